"""A warm process that forks the grader's worker processes: the test suite's, and learners'.

Every check runs the learner's code in a fresh ``learning.grader.worker`` process, and starting one
costs seconds of importing torch and triton before any case runs. The course's own tests grade
hundreds of versions, so with ``LEARNING_FORKSERVER=1`` the runner instead asks one server
process, which imported those libraries once, to fork each worker. A forked worker is still a
separate process with its own session, output, working folder and environment, so time limits,
crashes and exits behave as before. The test suite turns it on only in interpreter mode.

Learners' checks use the same server through ``learning.grader.warm``: started by the first
check, it listens on a socket of its own and outlives that check, so the next one skips the
imports.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

SWITCH = "LEARNING_FORKSERVER"
START_SECONDS = 180.0  # a new server imports torch and triton first: slow on a cold machine
# A ready server forks in milliseconds; one that has not answered by then is stuck (stopped,
# swapped out), and the caller starts the worker itself instead of waiting START_SECONDS
FORK_SECONDS = 15.0


def enabled() -> bool:
    """Asked for, and kernels already bound to the interpreter in this process's environment
    (the server imports triton for the interpreter, so it cannot serve compiled kernels), on a
    system that can fork and pass descriptors over a socket (not Windows)."""
    interpreting = os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes",
                                                                              "on")
    return os.environ.get(SWITCH, "") == "1" and interpreting and hasattr(os, "fork") \
        and hasattr(socket, "SOCK_SEQPACKET") and hasattr(socket, "send_fds")


# --- the server -------------------------------------------------------------------------------

def _preload(interpret: bool = True):
    """Import once what every worker imports, so that a fork starts with it loaded. Triton's
    own library kernels (tl.max, ...) are made for the interpreter only if TRITON_INTERPRET is
    set when triton.language is imported, so a server serves one mode. Nothing here may touch
    CUDA: a process that initialised it cannot hand a working GPU to its forks."""
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    from learning.grader import mode

    mode.stop_hiding_triton()  # a forked worker hides it again if its environment asks
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    from learning.grader import (  # noqa: F401
        allocations,
        containment,
        mode,
        registry,
        sanitizer,
        worker,
    )

    registry.all_exercises()
    if interpret:
        from learning.grader import loading

        loading.load_launch_modules()  # what Triton loads at a first launch, loaded once here
    if containment.available():
        # A worker's guard that is killed leaves what is below it to this process, which
        # ends it (_end_strays) instead of letting init adopt it; and with its memory out of
        # reach of other processes, no learner's code can change what later workers run.
        containment.prctl_flag(containment.PR_SET_CHILD_SUBREAPER, 1)
        containment.prctl_flag(containment.PR_SET_DUMPABLE, 0)


def _send(sock: socket.socket, message: dict):
    sock.send(json.dumps(message).encode())


def _become_worker(sock: socket.socket, request: dict, fds: list[int]):
    """In the forked child: take the request's output, folder and environment, run the worker."""
    code = 1
    try:
        sock.close()
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        event_fd, output_fd = fds
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.chdir(request["cwd"])
        # The guard and the filter are this server's to give up (its own environment, part of
        # the warm key), never a request's
        own = os.environ.get("LEARNING_CONTAINMENT")
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.pop("LEARNING_CONTAINMENT", None)
        if own is not None:
            os.environ["LEARNING_CONTAINMENT"] = own
        argv = list(request["argv"])
        argv[argv.index("--fd") + 1] = str(event_fd)
        from learning.grader import worker

        code = worker.main(argv)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    except BaseException:  # noqa: BLE001 - whatever happens, the child must not return
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


def serve(fd: int):
    """Serve the one grader at the other end of ``fd`` (a socket pair) until it goes away."""
    sock = socket.socket(fileno=fd)
    _preload()
    _send(sock, {"ready": True})
    _serve([sock])


def serve_listening(path: str, interpret: bool, idle_seconds: float):
    """Serve every grader that connects to the socket at ``path`` (learning.grader.warm), until none
    has for ``idle_seconds``. Binds only once the imports are done: a connection means ready."""
    _preload(interpret)
    if not interpret and not _gpu_usable_without_initialising():
        return 3  # a CPU build of torch: the caller's workers would interpret; see grader.warm
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        _bind_replacing_stale(listener, path)
    except OSError:
        return 2  # another server took the path first: the graders use that one
    listener.listen(8)
    bound = os.stat(path).st_ino
    _list_modules(path)

    def reachable() -> bool:
        """Whether a check can still find this server: its socket is still at ``path``."""
        try:
            return os.stat(path).st_ino == bound
        except OSError:
            return False

    try:
        _serve([], listener, idle_seconds, reachable)
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == bound:  # not a successor's socket
                os.unlink(path)
                os.unlink(path + MODULES_SUFFIX)
    return 0


MODULES_SUFFIX = ".modules"


def _list_modules(path: str):
    """Write beside the socket the files of the modules this server loaded, for a check to
    watch while the learner's code runs (learning.grader.integrity): code planted in one of
    them would run in every worker this server forks."""
    files = sorted({getattr(m, "__file__", None) for m in list(sys.modules.values())} - {None})
    text = "\n".join(f for f in files if isinstance(f, str)) + "\n"
    # A new file moved into place: opening the path itself would follow a link a learner's
    # code left there and write over whatever it points at.
    with contextlib.suppress(OSError):
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path) or ".",
                                             prefix=".modules-")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, path + MODULES_SUFFIX)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _gpu_usable_without_initialising() -> bool:
    """torch.cuda.is_available() asked through NVML, which leaves CUDA uninitialised."""
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch

    try:
        return bool(torch.cuda.is_available())
    finally:
        os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)


def _bind_replacing_stale(listener: socket.socket, path: str):
    try:
        listener.bind(path)
        return
    except OSError:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            probe.connect(path)
            raise  # a live server answers there
        except ConnectionRefusedError:
            os.unlink(path)  # left by a server that died: take its place
        finally:
            probe.close()
    listener.bind(path)


# How long a worker whose grader went away has, once asked to stop, before it is killed
STOP_SECONDS = 3.0


def _request(message: bytes, fds: list[int]) -> dict | None:
    """The fork request in ``message``, or None when it is not one: only a grader sends to
    this socket, but nothing that arrives is trusted to be well formed."""
    try:
        request = json.loads(message)
    except (ValueError, UnicodeDecodeError, RecursionError):  # "[" * 100000 nests too deep
        return None
    if not isinstance(request, dict) or len(fds) != 2:
        return None
    argv, env = request.get("argv"), request.get("env")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) \
            or "--fd" not in argv[:-1] or not isinstance(request.get("cwd"), str) \
            or not isinstance(env, dict) \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()) \
            or not isinstance(request.get("id"), int):
        return None
    return request


def _serve(connections: list, listener: socket.socket | None = None,
           idle_seconds: float | None = None, reachable=None):
    """Fork a worker per request; tell each request's grader when its worker exits. A grader
    that goes away takes its workers with it. A listening server whose socket is no longer
    ``reachable`` (removed, or replaced by another server's) ends once it has nobody to serve."""
    owners: dict[int, socket.socket] = {}  # worker pid: the connection that asked for it
    stopping: dict[int, float] = {}  # worker pid: when it is killed if it has not exited
    quiet_since = time.monotonic()
    while True:
        if _reap(owners, stopping):
            _end_strays(owners)
        for pid, deadline in list(stopping.items()):
            if time.monotonic() > deadline:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                stopping.pop(pid)
        if connections or owners:
            quiet_since = time.monotonic()
        elif listener is None:
            return
        elif time.monotonic() - quiet_since > idle_seconds:
            return
        elif reachable is not None and not reachable():
            return
        watched = connections + ([listener] if listener is not None else [])
        # Poll for exits often while workers run; an idle server wakes once a second.
        ready, _, _ = select.select(watched, [], [], 0.05 if owners or listener is None else 1.0)
        for sock in ready:
            if sock is listener:
                with contextlib.suppress(OSError):
                    connection, _ = listener.accept()
                    _send(connection, {"ready": True})
                    connections.append(connection)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
            except OSError:
                message, fds = b"", []
            request = _request(message, fds) if message else None
            if request is None:  # the grader went away, or sent what is not a request
                for received in fds:
                    with contextlib.suppress(OSError):
                        os.close(received)
                connections.remove(sock)
                for pid in [p for p, owner in owners.items() if owner is sock]:
                    # its guard ends everything below it (learning.grader.containment)
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGTERM)
                    stopping[pid] = time.monotonic() + STOP_SECONDS
                sock.close()
                continue
            pid = os.fork()
            if pid == 0:
                if listener is not None:
                    listener.close()
                for other in connections:
                    if other is not sock:
                        other.close()
                _become_worker(sock, request, fds)
            for received in fds:
                os.close(received)
            owners[pid] = sock
            with contextlib.suppress(OSError):
                _send(sock, {"started": request["id"], "pid": pid})


def _reap(owners: dict, stopping: dict) -> bool:
    """Collect the children that exited, telling each worker's grader; whether any did."""
    any_exited = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return any_exited
        if pid == 0:
            return any_exited
        any_exited = True
        stopping.pop(pid, None)
        owner = owners.pop(pid, None)
        if owner is not None:
            with contextlib.suppress(OSError):
                _send(owner, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _end_strays(owners: dict):
    """Kill every child of this process that is not a worker, and what is below it: processes
    a killed guard left behind, which this process adopted (it is a subreaper)."""
    from learning.grader import containment

    if not containment.available():
        return
    me = os.getpid()
    for pid, parent in containment.parents().items():
        if parent == me and pid not in owners:
            containment.kill_below(pid, seconds=1.0)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


# --- the grader's side ------------------------------------------------------------------------

def _stopped(pid: int) -> bool:
    """Whether /proc shows ``pid`` stopped (SIGSTOP, say): it would answer nothing until
    continued. False where there is no /proc to ask."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return pid > 0 and handle.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


class ForkedProcess:
    """The part of subprocess.Popen that the runner uses, for a worker the server forked."""

    def __init__(self, server: ForkServer, pid: int):
        self.server = server
        self.pid = pid

    def poll(self) -> int | None:
        return self.server.exit_code(self.pid)

    def wait(self, timeout: float | None = None) -> int:
        code = self.server.wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
        return code


class ForkServer:
    """The grader's end of a server: the test suite's own (``get``, started on first use), or
    a learner's warm one that ``learning.grader.warm`` connected to."""

    _instance: ForkServer | None = None
    _create = threading.Lock()

    def __init__(self, sock: socket.socket | None = None, ready_seconds: float = START_SECONDS):
        self.process = None
        # how long to wait for its "ready": a server just started imports torch first; one
        # already running answers at once, or is stuck
        self.ready_seconds = ready_seconds
        self.lost = ""  # why it was given up, when it was
        if sock is None:
            from learning.grader.childproc import child_environment

            sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.process = subprocess.Popen(
                [sys.executable, "-m", "learning.grader.forkserver", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                env=child_environment(), start_new_session=True)
            theirs.close()
        self.sock = sock
        self.ids = itertools.count()
        self.started: dict[int, int] = {}
        self.exits: dict[int, int] = {}
        self.ready = False
        self.closed = False
        self.sending = threading.Lock()
        self.changed = threading.Condition()
        threading.Thread(target=self._listen, daemon=True).start()

    def close(self):
        """Hang up: the server ends this grader's workers, and may then go idle."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    @classmethod
    def get(cls) -> ForkServer | None:
        """The running server, or None when it cannot be had (then the runner spawns)."""
        with cls._create:
            if cls._instance is None or cls._instance.closed:
                try:
                    cls._instance = ForkServer()
                except OSError:
                    return None
            return cls._instance

    def _listen(self):
        while True:
            try:
                message = self.sock.recv(1 << 16)
                data = json.loads(message) if message else None
                if data is not None and not isinstance(data, dict):
                    raise ValueError("not a message")
            except (OSError, ValueError, UnicodeDecodeError):
                data = None
            with self.changed:
                try:
                    if data is None:
                        self.closed = True
                        return
                    if "ready" in data:
                        self.ready = True
                    elif "started" in data:
                        self.started[int(data["started"])] = int(data["pid"])
                    elif "exit" in data:
                        self.exits[int(data["exit"])] = int(data["code"])
                except (TypeError, ValueError):
                    self.closed = True
                    self.lost = "it sent a message the grader could not read"
                    return
                finally:
                    self.changed.notify_all()

    def spawn(self, argv: list[str], cwd: str, env: dict, event_fd: int,
              output_fd: int) -> ForkedProcess | None:
        """Fork a worker; None if the server is gone, so that the caller can spawn instead."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.ready or self.closed, self.ready_seconds):
                self.lost = f"it did not answer within {self.ready_seconds:g} s"
                self.closed = True
                self.close()
                return None
            if self.closed:
                self.lost = self.lost or "it hung up"
                return None
        request_id = next(self.ids)
        request = {"id": request_id, "argv": argv, "cwd": cwd, "env": env}
        try:
            with self.sending:
                socket.send_fds(self.sock, [json.dumps(request).encode()], [event_fd, output_fd])
        except OSError:
            return None
        deadline = time.monotonic() + FORK_SECONDS
        with self.changed:
            while not (request_id in self.started or self.closed):
                stopped = _stopped(self.server_pid())
                if stopped or time.monotonic() > deadline:
                    # stuck: hang up, so that a fork it makes later is ended, not run beside ours
                    self.lost = "it was stopped (a signal sent to it)" if stopped else \
                        f"it did not start a worker within {FORK_SECONDS:g} s"
                    self.closed = True
                    self.close()
                    return None
                # a stopped server is seen within a quarter of a second, not after FORK_SECONDS
                self.changed.wait(min(0.25, max(deadline - time.monotonic(), 0.0)))
            pid = self.started.pop(request_id, None)
            if pid is None:
                self.lost = self.lost or "it hung up"
        return None if pid is None else ForkedProcess(self, pid)

    def server_pid(self) -> int:
        """The server's process: the suite's own child, or a warm one's peer on its socket."""
        return self.process.pid if self.process is not None else getattr(self, "peer", 0)

    def exit_code(self, pid: int) -> int | None:
        with self.changed:
            return self.exits.get(pid)

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        """The worker's exit status, or None when the server did not say within ``timeout``
        seconds (FORK_SECONDS when None: no wait on another process is unbounded)."""
        with self.changed:
            self.changed.wait_for(lambda: pid in self.exits or self.closed,
                                  FORK_SECONDS if timeout is None else timeout)
            return self.exits.get(pid)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--listen"]:  # --listen PATH IDLE_SECONDS [--interpret]
        return serve_listening(argv[1], "--interpret" in argv, float(argv[2]))
    serve(int(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
