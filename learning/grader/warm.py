"""A warm process for learners' checks, so that a re-check does not pay for importing torch.

A check runs the learner's code in a fresh worker process, and on a GPU machine merely starting
Python with torch and triton takes seconds (4.5 s measured on an H200 machine), longer than the
cases themselves. So the first check starts a server (``learning.grader.forkserver``) that
imports them once and then forks a worker for each check; a later check that finds it skips
the imports. Each worker is still a process of its own, which initialises CUDA itself (the
server never touches it), in its own session, so that limits, crashes and faults behave as
before.

The server listens on a socket in a folder only this user can open, named for everything that
was imported into it (the course's code, the Python, the packages' versions, the kernel mode),
so an edit to the course or an upgrade starts a fresh one. It exits after IDLE_SECONDS without
a check. ``LEARNING_WARM=0`` turns it off; where it cannot run (no fork, a platform without
sequenced-packet sockets), or anything about it fails, the check starts a process as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from learning.grader import forkserver, mode, state
from learning.grader.childproc import COURSE_ROOT, child_environment

SWITCH = "LEARNING_WARM"
IDLE_SWITCH = "LEARNING_WARM_IDLE"  # seconds; the tests make it short
IDLE_SECONDS = 600.0
START_SECONDS = 180.0  # the server's imports, on a slow machine
# A server already running answers a connection at once: one that has not within this many
# seconds is stuck (stopped, swapped out) and is replaced.
READY_SECONDS = 5.0
SOCKET_FOLDER_LIMIT = 80  # leaves room for "/<key>.sock" within a socket path's 108 bytes
_connected: dict[bool, forkserver.ForkServer] = {}
_notes: list[str] = []  # what happened to a warm process that a check should say, in one line


def enabled() -> bool:
    return (os.environ.get(SWITCH, "1") != "0" and sys.platform.startswith("linux")
            and hasattr(os, "fork") and hasattr(socket, "SOCK_SEQPACKET"))


def will_interpret(force_interpret: bool) -> bool:
    """The kernel mode the worker will choose, decided without importing torch."""
    return force_interpret or mode.env_asks_for_interpreter() or \
        not mode.cuda_driver_sees_a_gpu()


def key(interpret: bool) -> str:
    """Names everything the server imported: when any of it changes, so does the key."""
    digest = hashlib.sha256()
    containment = os.environ.get("LEARNING_CONTAINMENT", "1")  # the server's, not a request's
    digest.update(f"{sys.executable}\0{COURSE_ROOT}\0{interpret}\0{containment}\0".encode())
    for package in ("torch", "triton", "numpy"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            digest.update(f"{package}={importlib.metadata.version(package)}\0".encode())
    sources = sorted((COURSE_ROOT / "learning").rglob("*.py"))
    for path in [*sources, COURSE_ROOT / "triton_kernels.py"]:
        with contextlib.suppress(OSError):
            info = path.stat()
            digest.update(f"{path}\0{info.st_mtime_ns}\0{info.st_size}\0".encode())
    return digest.hexdigest()[:20]


def folder() -> Path | None:
    """This user's folder for the sockets, made private; None if it is not safely ours."""
    path = Path(tempfile.gettempdir()) / f"triton-course-{os.getuid()}"
    if len(str(path)) > SOCKET_FOLDER_LIMIT:
        return None  # a socket's whole path must fit in 108 bytes
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return path


# The markers this process wrote (_start_and_connect): any other that appears while a learner's
# code runs is that code's, and would turn warm checks off for good (FolderGuard)
_refused_here: set[Path] = set()


class FolderGuard:
    """The sockets' folder as it was before the learner's code ran; ``repair()`` puts back what
    that code did to it that would silently turn warm checks off for every later check: its
    permissions opened (folder() then refuses it), a file or a link put in its place, or a
    marker that says the server cannot run here. Returns what it did, in words."""

    def __init__(self):
        self.path = Path(tempfile.gettempdir()) / f"triton-course-{os.getuid()}"
        self.was_private = enabled() and folder() is not None
        self.markers = set(self.path.glob("*.refused")) if self.was_private else set()

    def repair(self) -> list[str]:
        if not self.was_private:
            return []
        done = []
        with contextlib.suppress(OSError):
            info = self.path.lstat()
            if not stat.S_ISDIR(info.st_mode):
                self.path.unlink()  # a file or a link where the folder was
                done.append(f"{self.path} was replaced by a file")
            elif info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != 0o700:
                os.chmod(self.path, 0o700)
                done.append(f"the permissions of {self.path} changed")
        with contextlib.suppress(OSError):
            for marker in set(self.path.glob("*.refused")) - self.markers - _refused_here:
                marker.unlink()
                done.append(f"{marker.name} appeared in {self.path}")
        return done


def server(force_interpret: bool) -> forkserver.ForkServer | None:
    """A connection to the warm server for this check's mode, started if need be; None when
    there is none to be had (the caller starts a process of its own)."""
    if not enabled():
        return None
    interpret = will_interpret(force_interpret)
    known = _connected.get(interpret)
    if known is not None and not known.closed:
        return known
    try:
        where = folder()
        if where is None:
            return None
        name = key(interpret)
        path = where / f"{name}.sock"
        refused = where / f"{name}.refused"
        if refused.exists() and not interpret:  # only a compiled-mode server is refused
            return None  # this server could not run here before: do not pay for it again
        sock, ready_seconds = _connect_verified(path, interpret), READY_SECONDS
        if sock is None:
            _retire_stale(where, path, interpret)
            sock, ready_seconds = _start_and_connect(path, refused, interpret), START_SECONDS
    except OSError:
        return None
    if sock is None:
        return None
    connection = forkserver.ForkServer(sock, ready_seconds)
    connection.path, connection.peer = path, _peer_pid(sock)
    _connected[interpret] = connection
    return connection


def discard(connection: forkserver.ForkServer) -> None:
    """Give up a server that did not answer (``connection.lost`` says how): it is killed if it
    is still the course's process, its socket removed so that the next check starts a fresh
    one, and a note left for the check to show."""
    for interpret, known in list(_connected.items()):
        if known is connection:
            del _connected[interpret]
    _end(connection)
    _notes.append(f"the warm process {connection.lost or 'went away'}; it was replaced, and "
                  "this check started a fresh process")


def retire_connected() -> int:
    """End every warm server this process is connected to, and remove its socket, so that the
    next check starts a fresh one: installed code it loaded changed on disk (a shared library
    rewritten in place is what the server, and every worker it forks, runs from then on).
    Returns how many it ended."""
    done = 0
    for interpret, connection in list(_connected.items()):
        del _connected[interpret]
        _end(connection)
        done += 1
    return done


def _end(connection: forkserver.ForkServer) -> None:
    """Close ``connection``, kill its server if it is still the course's own process (stuck or
    stale, it would only be in the way), and remove its socket, so that the next check starts
    a fresh one."""
    path = getattr(connection, "path", None)
    pid = getattr(connection, "peer", 0)
    connection.close()
    if pid and path is not None and _impostor(pid, path) in ("", STOPPED):
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def _retire_stale(where: Path, fresh: Path, interpret: bool):
    """Remove the sockets of this course's servers for this mode whose key is no longer
    current (the course's files, touched by a learner's code or edited, changed it): no check
    can use them again, and each would idle on, holding torch, for IDLE_SECONDS. A server whose
    socket is gone ends once it has no check to serve; another checkout's is left alone."""
    for path in where.glob("*.sock"):
        if path == fresh:
            continue
        sock = _connect(path)
        if sock is None:
            continue
        pid = _peer_pid(sock)
        sock.close()
        if pid and _impostor(pid, path, interpret) == "" and _cwd(pid) == COURSE_ROOT:
            for stale in (path, Path(f"{path}{forkserver.MODULES_SUFFIX}")):
                with contextlib.suppress(OSError):
                    stale.unlink()


def _cwd(pid: int) -> Path | None:
    """The folder a process runs in (a warm server runs in the course's root)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


LISTING_LIMIT = 4 * 2**20  # bytes of a server's list of its modules read at most


def module_files() -> tuple[str, ...]:
    """The files of the modules that this course's warm processes loaded (the lists beside
    their sockets), for the check to watch while the learner's code runs. Only the servers
    this check could use: another checkout's, or another course version's, run other files,
    which are not this check's to watch (or to set aside)."""
    where = folder() if enabled() else None
    if where is None:
        return ()
    found = set()
    for interpret in (True, False):
        listing = where / f"{key(interpret)}.sock{forkserver.MODULES_SUFFIX}"
        # not a link, a FIFO or an endless file: the learner's code may have put one there
        with contextlib.suppress(OSError, UnicodeDecodeError, state.NotData):
            data = state.read_small_file(listing, LISTING_LIMIT) or b""
            found.update(line for line in data.decode("utf-8").splitlines()
                         if line.startswith("/"))
    return tuple(sorted(found))


def take_notes() -> list[str]:
    """The notes left since the last call (see discard), once each."""
    notes = list(dict.fromkeys(_notes))
    _notes.clear()
    return notes


#: A server that accepts no connection (its queue full, or a listener that never accepts) is
#: given this long; a connect with no limit would wait as long as it holds the socket.
CONNECT_SECONDS = 2.0


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(CONNECT_SECONDS)
    try:
        sock.connect(str(path))
    except OSError:  # refused, missing, or no answer in time (socket.timeout is an OSError)
        sock.close()
        return None
    sock.settimeout(None)  # what follows has limits of its own
    return sock


def _connect_verified(path: Path, interpret: bool) -> socket.socket | None:
    """A connection to the server at ``path``, when the process that answers there is the
    course's warm process for it (a socket that answers is not proof of that: see
    _impostor); otherwise None, with the socket removed so that a fresh server takes its
    place, and a note."""
    sock = _connect(path)
    if sock is None:
        return None
    pid = _peer_pid(sock)
    why = _impostor(pid, path, interpret) if pid else "it did not say which process it is"
    if not why:
        return sock
    sock.close()
    with contextlib.suppress(OSError):
        path.unlink()
    if why == STOPPED:  # the course's own process, stopped: it would never answer
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
        _notes.append("the warm process was stopped (a signal sent to it); it was replaced, "
                      "and this check started a fresh process")
    else:
        _notes.append(f"the process answering on the warm process's socket is not the "
                      f"course's ({why}); it was not used, and this check started a fresh "
                      "process")
    return None


STOPPED = "it is stopped"


def _peer_pid(sock: socket.socket) -> int:
    """The process at the other end of a Unix socket, as the kernel reports it (0: unknown)."""
    try:
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                      struct.calcsize("3i"))
    except (OSError, AttributeError):
        return 0
    pid, uid, _ = struct.unpack("3i", credentials)
    return pid if uid == os.getuid() else 0


def _impostor(pid: int, path: Path, interpret: bool | None = None) -> str:
    """Why process ``pid`` is not the course's warm process listening at ``path`` ("" when it
    is), from what the kernel says of it: the command that started it, our Python, and no
    more seccomp filters than this process has (a process started by a learner's code carries
    the filter of learning.grader.containment, which also keeps it from making the socket at
    all). STOPPED for the course's own process, stopped."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().decode(errors="replace").split("\0")
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            status = dict(line.split(":", 1) for line in handle if ":" in line)
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            mine = dict(line.split(":", 1) for line in handle if ":" in line)
    except OSError:
        return "it cannot be looked at in /proc"
    if argv[1:5] != ["-m", "learning.grader.forkserver", "--listen", str(path)] or \
            interpret is not None and ("--interpret" in argv) != interpret:
        return "another command listens there"
    if os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
        return "another Python runs it"
    if int(status.get("Seccomp_filters", "0").strip() or 0) > \
            int(mine.get("Seccomp_filters", "0").strip() or 0):
        return "it was started by code a check ran"
    if status.get("TracerPid", "0").strip() != "0":
        return "another process is tracing it"
    if status.get("State", "").strip()[:1] in ("T", "t"):
        return STOPPED
    return ""


def _start_and_connect(path: Path, refused: Path, interpret: bool) -> socket.socket | None:
    """Start a server in a session of its own (it outlives this check) and wait until it
    listens, which it does once its imports are done."""
    env = child_environment()
    if not interpret:
        env.pop("TRITON_INTERPRET", None)
    idle = os.environ.get(IDLE_SWITCH, str(IDLE_SECONDS))
    command = [sys.executable, "-m", "learning.grader.forkserver", "--listen", str(path), idle]
    if interpret:
        command.append("--interpret")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env, cwd=str(COURSE_ROOT),
                               start_new_session=True)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        sock = _connect(path)
        if sock is not None:
            if _peer_pid(sock) == process.pid:
                return sock
            sock.close()  # another process took the path first: proven as any other
            return _connect_verified(path, interpret)
        code = process.poll()
        if code is not None:
            if code == 3:  # it found no GPU it could use: remember, and never wait again
                refused.touch()
                _refused_here.add(refused)
            return _connect_verified(path, interpret)  # code 2: another check's server
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        process.kill()  # never ready: it would otherwise wait for a check that gave up on it
    return None
