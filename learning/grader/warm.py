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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from learning.grader import forkserver, mode
from learning.grader.childproc import COURSE_ROOT, child_environment

SWITCH = "LEARNING_WARM"
IDLE_SWITCH = "LEARNING_WARM_IDLE"  # seconds; the tests make it short
IDLE_SECONDS = 600.0
START_SECONDS = 180.0  # the server's imports, on a slow machine
SOCKET_FOLDER_LIMIT = 80  # leaves room for "/<key>.sock" within a socket path's 108 bytes
_connected: dict[bool, forkserver.ForkServer] = {}


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
    digest.update(f"{sys.executable}\0{COURSE_ROOT}\0{interpret}\0".encode())
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
        if refused.exists():
            return None  # this server could not run here before: do not pay for it again
        sock = _connect(path) or _start_and_connect(path, refused, interpret)
    except OSError:
        return None
    if sock is None:
        return None
    _connected[interpret] = forkserver.ForkServer(sock)
    return _connected[interpret]


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


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
            return sock
        code = process.poll()
        if code is not None:
            if code == 3:  # it found no GPU it could use: remember, and never wait again
                refused.touch()
            return _connect(path)  # code 2: another check's server took the path
        time.sleep(0.02)
    return None
