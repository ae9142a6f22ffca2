"""The child processes of a check, and what travels between them and the grader.

A check runs the learner's module in ``learning.grader.worker``'s process and, where kernels ran in
the interpreter, compiles them in ``learning.grader.gpu_compile``'s. This module holds what those
processes share with the grader's side (``learning.grader.worker_run``): the environment they
start with, how they are started and ended (in a process group of their own, handed the write
end of an event pipe), their framed and pickled events (unpickled from a short list of allowed
classes only), their output (kept up to a cap, and cut to what a report shows), the names and
likely causes of the signals (or, on Windows, the exceptions) that kill them, and the compile
check's process itself.

The same code runs on POSIX and on Windows. Pipes are read by a thread each, into one queue,
because Windows' select() takes only sockets; how a process is handed its pipe and ended, which
differs, is ``learning.grader.handover``.
"""

from __future__ import annotations

import os
import pickle
import queue
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

from learning.grader import handover

COMPILE_SECONDS = 90.0  # the GPU compile check, after the interpreter run
# What the learner's code may allocate beyond the worker's own start-up (torch, triton), on
# the CPU: an endless append or a tensor of n_cols ** 2 by mistake stops with a MemoryError
# instead of swapping a laptop to a standstill before the time limit fires.
MEMORY_ALLOWANCE_GIB = 4.0
MAX_CAPTURED_BYTES = 1 << 20  # learner output kept from one process; the rest is counted
# What a check's report shows of everything the learner's processes printed (cap_output)
MAX_OUTPUT_LINES = 40
MAX_OUTPUT_CHARS = 4000
# The largest event a worker sends: a case's output as float64 (4096 x 4096 is 128 MiB) and
# the bool mask of its unwritten elements. A larger frame is not the worker's.
MAX_EVENT_BYTES = 1 << 30
COURSE_ROOT = Path(__file__).resolve().parents[2]
FRAME_HEADER = struct.Struct("<Q")  # each event: its length, then the pickled tuple
# A worker's exit status when its event pipe is gone, or its descriptor now names another file:
# the learner's code closed or replaced descriptors it did not open (os.closerange, os.dup2)
CHANNEL_LOST_STATUS = 86
# A worker's exit status when the grader's own code in it raised: its traceback is on the
# process's output. (Code under check that calls os._exit(87) gets the same words: it is
# still no pass.)
GRADER_FAILED_STATUS = 87
_DROPPED_ENV = ("PYTHONWARNINGS", "PYTHONINSPECT", "PYTHONSTARTUP", "PYTHONBREAKPOINT")
# The longest one wait on the pipes lasts: Ctrl-C reaches the grader between two waits (on
# Windows a wait on a lock cannot be interrupted).
WAIT_SLICE_SECONDS = 0.25


# The likely cause of each way a process can be killed, as the learner should read it.
SIGNAL_CAUSES = {
    "SIGSEGV": "likely an out-of-bounds load or store (or a pointer computed from the wrong "
               "tensor)",
    "SIGBUS": "likely an out-of-bounds or misaligned load or store",
    "SIGABRT": "the process aborted itself: likely corrupted memory after an out-of-bounds "
               "store, or a failed check inside a library",
    "SIGFPE": "an arithmetic fault in native code, such as an integer division by zero",
    "SIGKILL": "killed from outside: most often the system ran out of memory (a tensor far "
               "larger than the case needs), or the code killed its own process",
    "SIGTERM": "asked to stop from outside, or the code ended its own process",
    "SIGILL": "an illegal instruction in native code",
}
# Windows ends a crashed process with the exception's code as its exit status (an NTSTATUS,
# 0xC0000000 and above, which no exit of a program's own gives): its name and likely cause.
WINDOWS_CRASHES = {
    0xC0000005: ("an access violation", SIGNAL_CAUSES["SIGSEGV"]),
    0xC000001D: ("an illegal instruction", SIGNAL_CAUSES["SIGILL"]),
    0xC0000094: ("an integer division by zero", SIGNAL_CAUSES["SIGFPE"]),
    0xC00000FD: ("a stack overflow", "recursion too deep for the native stack"),
    0xC0000374: ("a corrupted heap", "likely an out-of-bounds store into memory that was "
                 "later freed or reused"),
    0xC0000409: ("a fast fail", "the process ended itself at once: likely corrupted memory "
                 "after an out-of-bounds store, or a failed check inside a library"),
}


_NUMPY_IMPORT = threading.Lock()


def import_numpy() -> None:
    """Import NumPy, or wait until the thread importing it has finished. The grader imports it
    in the background while the worker starts; unpickling an array meanwhile imported one of
    its submodules in a second thread, and Python's import locks then handed that thread a
    partly initialised numpy (an ImportError, reported as a crash of the learner's code)."""
    with _NUMPY_IMPORT:
        import numpy  # noqa: F401


class EventUnpickler(pickle.Unpickler):
    """Events come from a process that runs the learner's code: rebuild only the plain data
    the course sends (its result classes, NumPy arrays), never an arbitrary callable."""

    ALLOWED = {
        "learning.grader.returned": {"Returned", "Raised", "Skipped", "ImportProblem"},
        "learning.grader.gpu_compile": {"Launch", "Compiled"},
        "numpy": {"ndarray", "dtype"},
        "numpy.core.multiarray": {"_reconstruct", "scalar"},
        "numpy.core.numeric": {"_frombuffer"},
        "numpy._core.numeric": {"_frombuffer"},
        "numpy._core.multiarray": {"_reconstruct", "scalar"},
        "numpy.dtypes": None,  # NumPy 2's dtype classes (Float64DType, ...)
        "builtins": {"complex", "frozenset", "set", "slice", "range"},
        "collections": {"OrderedDict"},
    }

    def find_class(self, module: str, name: str):
        allowed = self.ALLOWED.get(module, ())
        if allowed is None and name.endswith("DType") or allowed and name in allowed:
            if module.startswith("numpy"):
                import_numpy()  # whole, even while another thread is importing it
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused {module}.{name} from the learner's process")


def load_event(frame: bytes) -> tuple:
    import io

    return EventUnpickler(io.BytesIO(frame)).load()


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"


class Crash(NamedTuple):
    """What killed a process, in words, and its likely cause ("" where none is known)."""

    what: str
    cause: str


def crash(returncode: int | None) -> Crash | None:
    """How the process crashed, when its exit status says it did: killed by a signal on POSIX
    ("signal 11, SIGSEGV"), ended by an exception on Windows ("exception 0xC0000005, an access
    violation"); None for an exit of its own."""
    if returncode is None:
        return None
    if returncode < 0:
        label = signal_name(-returncode)
        return Crash(f"signal {-returncode}, {label}", SIGNAL_CAUSES.get(label, ""))
    status = returncode & 0xFFFFFFFF
    if status >= 0xC0000000:
        name, cause = WINDOWS_CRASHES.get(status, ("an unhandled exception", ""))
        return Crash(f"exception 0x{status:08X}, {name}", cause)
    return None


class Chunk(NamedTuple):
    """What one read of a child's pipe gave: the pipe's name, and its bytes."""

    pipe: str
    data: bytes


class PipeReader:
    """The pipes from a child process, each read to its end by a thread of its own, whose
    chunks arrive in one queue. Each pipe's read end belongs to its thread, which closes it at
    the end: a pipe held open by a process that escaped the kill keeps only that thread."""

    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.open: set[str] = set()  # the pipes whose end has not been taken from the queue

    def read(self, name: str, fd: int):
        self.open.add(name)
        threading.Thread(target=self._pump, args=(name, fd), daemon=True,
                         name=f"learning-{name}-pipe").start()

    def _pump(self, name: str, fd: int):
        try:
            while True:
                try:
                    chunk = os.read(fd, 1 << 20)
                except OSError:  # the pipe broke: as good as its end
                    chunk = b""
                self._queue.put((name, chunk))
                if not chunk:
                    return
        finally:
            os.close(fd)

    def next(self, seconds: float) -> Chunk | None:
        """The next chunk from any pipe (b"" at a pipe's end), or None when none came within
        ``seconds`` (at most WAIT_SLICE_SECONDS)."""
        try:
            name, chunk = self._queue.get(timeout=min(max(seconds, 0.0), WAIT_SLICE_SECONDS))
        except queue.Empty:
            return None
        if not chunk:
            self.open.discard(name)
        return Chunk(name, chunk)


def child_environment() -> dict:
    """The environment of a child process: the learner's, minus what would change how Python
    runs, with the course importable and output unbuffered (a crash loses nothing printed)."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(COURSE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


class CappedOutput:
    """What the learner's process prints: the first MAX_CAPTURED_BYTES kept, the rest counted."""

    def __init__(self):
        self.kept = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes):
        room = MAX_CAPTURED_BYTES - len(self.kept)
        self.kept += chunk[:max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def drain_until_exit(self, process: subprocess.Popen, pipes: PipeReader, seconds: float):
        """Keep taking the "output" pipe's chunks until the process has exited and the pipe
        has ended, or ``seconds`` pass; the process's status, or None. Chunks of other pipes
        that arrive meanwhile are dropped."""
        deadline = time.monotonic() + seconds
        while True:
            code = process.poll()
            remaining = deadline - time.monotonic()
            if code is not None and "output" not in pipes.open or remaining <= 0:
                return code
            if "output" in pipes.open:
                got = pipes.next(min(remaining, 0.2))
                if got is not None and got.pipe == "output":
                    self.add(got.data)
            else:
                time.sleep(min(remaining, 0.05))

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[output cut: {self.dropped} more bytes]"
        return text


# The note a worker process's capture adds where it stopped keeping what the learner printed.
_NOT_KEPT = re.compile(r"\n\[output cut: (\d+) more bytes\]")


def cap_output(text: str) -> str:
    """What the learner printed, as the report shows it: the first MAX_OUTPUT_LINES lines and
    MAX_OUTPUT_CHARS characters, and one note that counts what is not shown, measured against
    everything printed (the processes' captures keep only so much; their notes are summed)."""
    not_kept = sum(int(n) for n in _NOT_KEPT.findall(text))
    text = _NOT_KEPT.sub("", text)
    # Lines end at a newline only: a carriage return (a progress bar's) stays what it is, for
    # the report to show as \r and --json to keep exact
    text = text.rstrip("\n")
    shown = "\n".join(text.split("\n")[:MAX_OUTPUT_LINES])[:MAX_OUTPUT_CHARS]
    notes = []
    hidden = len(text) - len(shown)
    if hidden > 0:
        lines = text.count("\n") - shown.count("\n")
        notes.append(f"{hidden} more characters" + (f" ({lines} more lines)" if lines else "") +
                     " not shown")
    if not_kept:
        notes.append(f"{not_kept} more bytes printed and not kept")
    return shown + (f"\n[output cut: {'; '.join(notes)}]" if notes else "")


class CompileRun:
    """The GPU compile check's process (learning.grader.gpu_compile): started when the worker says
    kernels run in the interpreter, so that its imports overlap the interpreter run; given the
    recorded launches at the end."""

    def __init__(self, module_path: Path):
        self.module_path = module_path
        self.process: subprocess.Popen | None = None
        self.pipes: PipeReader | None = None

    @property
    def started(self) -> bool:
        return self.process is not None

    def start(self):
        if self.process is not None:
            return
        from learning.grader import containment

        containment.protect_grader()
        read_fd, write_fd = os.pipe()
        env = child_environment()
        env.pop("TRITON_INTERPRET", None)
        env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="learning-compile-")
        self.cache_dir = env["TRITON_CACHE_DIR"]
        try:
            number, options = handover.spawn_options(write_fd)
            self.process = subprocess.Popen(
                [sys.executable, "-m", "learning.grader.gpu_compile", "--module-path",
                 str(self.module_path), "--fd", str(number), "--grader-pid", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=str(self.module_path.parent), env=env, **options)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self.pipes = PipeReader()
        self.pipes.read("events", read_fd)

    def cancel(self):
        """Nothing to compile: end the process without waiting for it."""
        self.finish(None)

    def finish(self, launches: list | None) -> tuple[list, str]:
        """Send the launches, collect what the compiler said; (results, why it could not run)."""
        import shutil

        from learning.grader.gpu_compile import chosen

        results, note = [], ""
        try:
            if launches is None:
                return results, note
            unique = chosen(launches)
            try:
                pickle.dump(unique, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self.process.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            note = self._collect(results, unique)
        finally:
            handover.end(self.process)
            try:
                self.process.stdin.close()
            except OSError:
                pass
            shutil.rmtree(self.cache_dir, ignore_errors=True)
            self.process = None
        return results, note

    def _collect(self, results: list, unique: list) -> str:
        """What the compiler said of each launch, into ``results``; why it could not say it.
        Once the process has run the learner's statements (after "ready"), its ending early,
        stalling or sending what is not an event is the learner's code's doing as far as
        anyone can tell: each launch not answered is then not vouched for, which keeps the
        part from passing, rather than a note beside a pass. Before "ready" the same holds of
        a signal (stopped, or ended by one): the worker ran the learner's code meanwhile, and
        where no seccomp filter holds it, that code can send one."""
        ready_seen = []
        note = self._read(results, len(unique), ready_seen)
        if note and (ready_seen or note.startswith(_SIGNALLED)):
            from learning.grader.gpu_compile import (
                COMPILER_CRASHED,
                UNANSWERED,
                Compiled,
                compiler_crash,
            )

            # ended by a signal mid-compile, with the compiler's own failed assertion on
            # record: Triton's crash, not the module's doing
            crash = compiler_crash(self.cache_dir) if note.startswith(_SIGNALLED) else ""
            said = COMPILER_CRASHED.format(_triton_version(), crash) if crash else \
                UNANSWERED.format(note)
            answered = {c.key for c in results}
            results += [Compiled(launch.kernel, "unvouched", said, key=launch.key)
                        for launch in unique if launch.key not in answered]
            return ""
        return note

    def _read(self, results: list, expected: int, ready: list) -> str:
        from learning.grader import containment

        buffer = b""
        deadline = time.monotonic() + COMPILE_SECONDS
        ready_seen = False
        looked = time.monotonic()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return f"it did not finish within {COMPILE_SECONDS:g} s"
            got = self.pipes.next(remaining)
            if got is None:
                if os.path.isdir("/proc/self") and time.monotonic() - looked > 1.0:
                    looked = time.monotonic()
                    if containment.stopped(self.process.pid):  # it would never finish
                        return f"{_SIGNALLED} stopped (a signal sent to it)"
                continue
            chunk = got.data
            if not chunk:
                if ready_seen and len(results) >= expected:
                    return ""
                try:
                    code = self.process.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    code = None
                if code is not None and code < 0:
                    return f"{_SIGNALLED} ended by signal {-code}"
                return "its process stopped before it finished"
            buffer += chunk
            while len(buffer) >= FRAME_HEADER.size:
                (size,) = FRAME_HEADER.unpack_from(buffer)
                if size > MAX_EVENT_BYTES:
                    return _GARBLED
                if len(buffer) < FRAME_HEADER.size + size:
                    break
                event = _compile_event(buffer[FRAME_HEADER.size:FRAME_HEADER.size + size])
                buffer = buffer[FRAME_HEADER.size + size:]
                if event is None:
                    return _GARBLED
                if event[0] == "ready":
                    ready_seen = True
                    if event[1]:  # it cannot run here (turned off, no compiler): not vouched
                        return event[1]  # for, not refused
                    ready.append(True)
                elif event[0] == "compiled":
                    results.append(event[1])
                elif event[0] == "unvouched":  # plain words: nothing of the learner's to run
                    from learning.grader.gpu_compile import Compiled

                    results.append(Compiled(event[1], "unvouched", event[2], key=event[3]))
                elif event[0] == "finished":
                    return ""


def _triton_version() -> str:
    try:
        import triton

        return str(triton.__version__)
    except Exception:  # noqa: BLE001 - a Triton that cannot be imported here has no version
        return "(unknown)"


# The compile check's process runs the learner's statements with its event pipe open: what
# they write there ends the check's reading, with this note, instead of the grader.
_GARBLED = "its process sent what is not one of the course's events"
_SIGNALLED = "its process was"  # how a note on a signal the process got begins


def _compile_event(frame: bytes) -> tuple | None:
    """The compile check's event in ``frame``, or None when it is not one of its events."""
    from learning.grader.gpu_compile import Compiled

    try:
        event = load_event(frame)
    except Exception:  # noqa: BLE001 - whatever the frame holds
        return None
    shapes = {("ready", 2): lambda e: e[1] is None or isinstance(e[1], str),
              ("compiled", 2): lambda e: isinstance(e[1], Compiled),
              ("unvouched", 4): lambda e: isinstance(e[1], str) and isinstance(e[2], str)
              and isinstance(e[3], tuple),
              ("finished", 1): lambda e: True}
    if not isinstance(event, tuple) or not event or not isinstance(event[0], str):
        return None
    fits = shapes.get((event[0], len(event)))
    return event if fits is not None and fits(event) else None
