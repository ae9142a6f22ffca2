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
# How long a process asked to stop has to end what is below it before it is killed outright,
# and how long its exit status is then waited for.
GUARD_SECONDS = 10.0  # reached only when it has many processes to end (a fork bomb)
STATUS_SECONDS = 3.0


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


def end(process, learner_pid: int = 0) -> int | None:
    """End ``process`` and every process it started, and return its exit status (None when it
    cannot be known: a forked worker whose warm process stopped answering). Never waits longer
    than GUARD_SECONDS and then STATUS_SECONDS.

    On Linux ``process`` is a guard (learning.grader.containment): asked to stop, it kills
    everything below it, adopted processes included, and exits as its child did. A guard that
    does not exit in time is killed, with its group, and what /proc still shows below it and
    below ``learner_pid`` (its child, as that child reported itself). Elsewhere ``process``
    leads a process group of its own (spawn_options, or learning.grader.forkserver's setsid),
    which is killed whole; on Windows, taskkill ends the tree."""
    if os.name == "nt":
        _windows_kill_tree(process.pid)
        with contextlib.suppress(OSError):
            process.kill()  # in case taskkill could not run
        return _status(process, STATUS_SECONDS)
    from learning.grader import containment

    if not containment.available():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        return _status(process, STATUS_SECONDS)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGCONT)  # a stopped guard could not act on SIGTERM
            os.kill(process.pid, signal.SIGTERM)
        if _status(process, GUARD_SECONDS) is None:
            for pid in (learner_pid, process.pid):
                if pid > 1 and containment.available():
                    containment.kill_below(pid, seconds=1.0)
                for kill in (os.killpg, os.kill):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        if pid > 1:
                            kill(pid, signal.SIGKILL)
    return _status(process, STATUS_SECONDS)


def _status(process, seconds: float) -> int | None:
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def _windows_kill_tree(pid: int) -> None:
    """Windows: taskkill /T ends the process and its descendants, found by their parent's id
    (so a process whose parent has already exited is out of its reach)."""
    with contextlib.suppress(OSError):
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(pid)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
