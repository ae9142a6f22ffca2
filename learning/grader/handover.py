"""How the grader hands a child process the write end of its event pipe, gives it a process
group of its own, and ends it with every process it started: the same three steps on POSIX and
on Windows, where a child inherits handles rather than descriptors and there is neither fork
nor killpg. What only Windows has sits in one small function each, beside its POSIX
counterpart. ``LEARNING_PORTABLE_PROCESS=1`` makes a check on Linux start its processes as on
Windows (each one fresh, never forked from a warm process), so that the tests run real checks
through that path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

# Set to 1, a check starts its processes as it does on Windows (each one fresh, never forked
# from a warm process); the tests run real checks through that path on Linux.
PORTABLE_SWITCH = "LEARNING_PORTABLE_PROCESS"


def portable() -> bool:
    """Whether child processes start as on Windows: each one fresh, as nothing can fork there
    (forced on other systems by LEARNING_PORTABLE_PROCESS=1)."""
    return os.name == "nt" or os.environ.get(PORTABLE_SWITCH, "").strip() == "1"


def spawn_options(event_fd: int) -> tuple[int, dict]:
    """(the number the child opens the event pipe's write end ``event_fd`` by, the arguments
    of subprocess.Popen that hand it over and give the child a process group of its own)."""
    if os.name == "nt":
        return _windows_spawn_options(event_fd)
    return event_fd, {"pass_fds": (event_fd,), "start_new_session": True}


def _windows_spawn_options(event_fd: int) -> tuple[int, dict]:
    """Windows: a child inherits handles, not descriptors. The pipe's handle is made
    inheritable and listed as the only one the child inherits beside its standard ones (so a
    process started at the same moment gets none), and a new process group keeps Ctrl-C, meant
    for the grader, from the learner's code."""
    import msvcrt

    handle = msvcrt.get_osfhandle(event_fd)
    os.set_handle_inheritable(handle, True)
    startup = subprocess.STARTUPINFO(lpAttributeList={"handle_list": [handle]})
    return handle, {"startupinfo": startup, "close_fds": True,
                    "creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}


def inherited_fd(number: int) -> int:
    """In a child: the descriptor of the event pipe its parent handed over as ``number`` (see
    spawn_options), kept from processes the learner's code starts in turn."""
    fd = _windows_open_handle(number) if os.name == "nt" else number
    os.set_inheritable(fd, False)
    return fd


def _windows_open_handle(handle: int) -> int:
    """Windows: a descriptor for an inherited handle, in binary mode (no newline translation:
    the events are pickled bytes)."""
    import msvcrt

    return msvcrt.open_osfhandle(handle, os.O_WRONLY | os.O_BINARY)


def kill_tree(process) -> None:
    """End ``process`` and every process it started (``process`` leads a group of its own:
    spawn_options, or learning.grader.forkserver's setsid); nothing happens if they have all
    ended."""
    if os.name == "nt":
        _windows_kill_tree(process.pid)
        with contextlib.suppress(OSError):
            process.kill()  # in case taskkill could not run
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _windows_kill_tree(pid: int) -> None:
    """Windows: taskkill /T ends the process and its descendants, found by their parent's id
    (so a process whose parent has already exited is out of its reach)."""
    with contextlib.suppress(OSError):
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(pid)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
