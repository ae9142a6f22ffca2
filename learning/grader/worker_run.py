"""One worker process, from the grader's side: start it, read its events under each phase's time
limit, then end it and everything it started.

The learner's code only ever runs in the worker's process (``learning.grader.worker``), so a
hang, a crash or an exit in their code is seen here as such and never takes the grader down with
it. What the events said is kept by ``learning.grader.worker_events``; what to tell the learner
when the process stopped early is ``learning.grader.stopped``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from learning.grader import childproc, containment, forkserver, handover, integrity, stuck, warm
from learning.grader.declarations import Exercise, Part
from learning.grader.results import Timeline
from learning.grader.state import STATE_DIR
from learning.grader.worker_events import Heard, describe, malformed

PYTHON_CASE_SECONDS = 10.0
KERNEL_CASE_SECONDS = 60.0
# The grader's own start-up in the child (Python, torch, triton) before the learner's code runs.
STARTUP_SECONDS = 120.0
# The learner's import gets the case limit, but never less than this: a module may import
# libraries of its own, and a slow machine should not turn that into a failure.
IMPORT_FLOOR_SECONDS = 30.0
STOPPED_LOOK_SECONDS = 1.0  # how often an idle wait looks whether the process was stopped


def import_limit(case_seconds: float) -> float:
    """Seconds the learner's module may take to import, given the per-case limit."""
    return max(IMPORT_FLOOR_SECONDS, case_seconds)


def aside_folder(module_path: Path) -> Path:
    """Where files the learner's code added in the course's folders are moved to."""
    return module_path.parent / STATE_DIR / "set-aside"


@dataclass(frozen=True)
class Settings:
    """How a check runs the learner's module: which file, in which mode, within which limits."""

    exercise: Exercise
    module_path: Path
    force_interpret: bool = False
    case_seconds: float | None = None  # the learner's --timeout; None: each part's own limit
    import_seconds: float | None = None  # None: import_limit of the case limit
    memory_gib: float | None = None  # None: the worker's own allowance


@dataclass
class Ending:
    """How the process ended, as far as the grader could see."""

    returncode: int | None = None
    timed_out: bool = False
    stuck_at: str = ""  # the learner's line a timed-out case was running, where known
    status_lost: bool = False  # its exit status is unknown: the process that forked it ended
    garbled: str = ""  # the process sent something that is not one of the course's events
    # seen stopped in /proc (a stop signal, which the learner's code may send its own process):
    # it would never have answered, so it was ended then, not at the time limit
    stopped: bool = False


class WorkerRun:
    """One learner process: start it, read its events under time limits, end it. ``only``
    names, by part, the only cases to run (the rest ran in another process, which judged
    ``carried``); ``extra_args`` asks for a recording run instead of grading (--map, --steps),
    or another order of a launch's programs (--program-order)."""

    def __init__(self, settings: Settings, parts: list[Part], *,
                 compiler: childproc.CompileRun | None = None,
                 only: dict[str, list[str]] | None = None, carried: dict | None = None,
                 extra_args: tuple[str, ...] = (), timeline: Timeline | None = None):
        self.settings = settings
        self.part_names = [part.name for part in parts]
        kernels = any(part.needs_kernels for part in parts)
        default = KERNEL_CASE_SECONDS if kernels else PYTHON_CASE_SECONDS
        self.case_seconds = settings.case_seconds or default
        self.import_seconds = settings.import_seconds or import_limit(self.case_seconds)
        self.compiler = compiler
        self.only = only
        self.extra_args = list(extra_args)
        self.timeline = timeline if timeline is not None else Timeline()
        self.heard = Heard.carrying(carried)
        self.ended = Ending()
        self._stopped_looks = 0  # idle looks in a row that found the learner's process stopped
        self.output = ""
        self._output = childproc.CappedOutput()
        self.repairs = integrity.Repairs()  # what its code did to the course's files, undone
        self.notes: list[str] = []  # what a learner should know of how it ran (warm.take_notes)

    @property
    def printed(self) -> int:
        """Bytes the learner's process printed, kept or not."""
        return len(self._output.kept) + self._output.dropped

    def repair_note(self) -> str:
        """What the learner's code did to the course's files, in one line ("" when nothing)."""
        return self.repairs.note(str(aside_folder(self.settings.module_path)))

    def execute(self):
        """Start the process, read its events until it finishes or runs past a limit, end it,
        and put back what its code changed in the course's files."""
        # This process's memory and descriptors out of the learner's processes' reach (they run
        # as the same user): /proc/<pid>/mem and /proc/<pid>/fd need it dumpable.
        containment.protect_grader()
        read_fd, write_fd = os.pipe()
        out_read, out_write = os.pipe()
        command = self._command(write_fd)
        stack_file = ""
        if stuck.supported():  # where a case that runs past its limit was stuck
            handle, stack_file = tempfile.mkstemp(prefix="course-stack-", suffix=".txt")
            os.close(handle)
            command += ["--stack-file", stack_file]
        self.timeline.note("worker: started")
        try:
            process = self._start(command, write_fd, out_write)
        except BaseException:
            os.close(read_fd)
            os.close(out_read)
            if stack_file:
                with contextlib.suppress(OSError):
                    os.unlink(stack_file)
            raise
        finally:
            os.close(write_fd)
            os.close(out_write)
        pipes = childproc.PipeReader()  # from here on, each read end belongs to its thread
        pipes.read("events", read_fd)
        pipes.read("output", out_read)
        module_path = self.settings.module_path
        course = integrity.Guard(module_path.parent, module_files=warm.module_files())
        try:
            self._read_events(pipes)
            if self.ended.timed_out and self.heard.phase == "cases" and stack_file:
                self.ended.stuck_at = stuck.where(process.pid, stack_file, str(module_path))
        except BaseException:  # Ctrl-C (learning.watch): end the worker now, not in 5 s
            handover.end(process, self.heard.learner_pid)
            raise
        finally:
            self._stop(process, pipes)
            if stack_file:
                with contextlib.suppress(OSError):
                    os.unlink(stack_file)
            # before anything is judged: what the grader imports from here on is the course's
            course.watch_installed(self.heard.installed)
            self.repairs = course.repair(aside_folder(module_path))
        self.timeline.note("worker: ended")
        self.output = self._output.text()

    def _command(self, event_fd: int) -> list[str]:
        """The worker's command line (a spawned process gets the descriptor's own number)."""
        settings = self.settings
        command = [sys.executable, "-m", "learning.grader.worker",
                   "--exercise", settings.exercise.name, "--module-path", str(settings.module_path),
                   "--parts", ",".join(self.part_names), "--fd", str(event_fd),
                   "--grader-pid", str(os.getpid())]
        if settings.force_interpret:
            command.append("--interpret")
        if settings.memory_gib is not None:
            command += ["--memory-gib", f"{settings.memory_gib:g}"]
        if self.only is not None:
            command += ["--cases", json.dumps(self.only)]
        return command + self.extra_args

    def _start(self, command: list[str], event_fd: int, output_fd: int):
        """A fresh worker process: forked by the test suite's server (learning.grader.forkserver) or
        a learner's warm one (learning.grader.warm), started from scratch where there is none."""
        cwd, env = str(self.settings.module_path.parent), childproc.child_environment()
        server = None if handover.portable() else forkserver.ForkServer.get() \
            if forkserver.enabled() else warm.server(self.settings.force_interpret)
        forked = server and server.spawn(command[3:], cwd, env, event_fd, output_fd)
        if server and not forked and server.lost and not forkserver.enabled():
            warm.discard(server)  # stuck or gone: replaced by a fresh one, for the next check
            self.timeline.note(f"worker: the warm process {server.lost}")
        self.notes += warm.take_notes()
        if forked:
            self.timeline.note("worker: forked from a warm process")
            return forked
        number, options = handover.spawn_options(event_fd)
        command[command.index("--fd") + 1] = str(number)
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output_fd,
                                stderr=output_fd, cwd=cwd, env=env, **options)

    def _limit(self) -> float:
        """The time the phase the process is in may take, counted from its last event."""
        phase, current = self.heard.phase, self.heard.current
        if phase != "cases":
            return {"start-up": STARTUP_SECONDS, "import": self.import_seconds}[phase]
        return self.case_limit(current.part if current else None)

    def case_limit(self, part_name: str | None) -> float:
        """The learner's --timeout, else the part's own budget: a Python part gets the Python
        limit even when kernel parts run in the same process."""
        if self.settings.case_seconds or part_name is None:
            return self.case_seconds
        part = self.settings.exercise.part(part_name)
        return KERNEL_CASE_SECONDS if part.needs_kernels else PYTHON_CASE_SECONDS

    def _seen_stopped(self) -> bool:
        """Whether the learner's process has been seen stopped twice in a row, a look apart (a
        process of its own could have continued it in between)."""
        pid = self.heard.learner_pid
        if not (pid and os.path.isdir("/proc/self") and containment.stopped(pid, below=False)):
            self._stopped_looks = 0
            return False
        self._stopped_looks += 1
        return self._stopped_looks >= 2

    def _read_events(self, pipes: childproc.PipeReader):
        # A bytearray: a pipe hands over 64 KiB a read, and a large output (25 MB for 4096 rows
        # of 781 float64 values) joined into immutable bytes cost seconds of copying.
        buffer = bytearray()
        deadline = time.monotonic() + self._limit()
        while "events" in pipes.open:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.ended.timed_out = True
                return
            got = pipes.next(min(remaining, STOPPED_LOOK_SECONDS))
            if got is None:
                if self._seen_stopped():
                    self.ended.stopped = True
                    return
                continue
            pipe, chunk = got
            if pipe == "output":
                self._output.add(chunk)
                continue
            if not chunk:
                return
            buffer += chunk
            while len(buffer) >= childproc.FRAME_HEADER.size:
                (size,) = childproc.FRAME_HEADER.unpack_from(buffer)
                if size > childproc.MAX_EVENT_BYTES:  # not one of the worker's frames
                    self.ended.garbled = f"a frame of {size:,} bytes announced, more than " \
                                         f"any event the grader sends " \
                                         f"({childproc.MAX_EVENT_BYTES:,})"
                    return
                if len(buffer) < childproc.FRAME_HEADER.size + size:
                    break
                frame = bytes(buffer[childproc.FRAME_HEADER.size:
                                     childproc.FRAME_HEADER.size + size])
                del buffer[:childproc.FRAME_HEADER.size + size]
                try:
                    event = childproc.load_event(frame)
                except Exception as exc:  # noqa: BLE001 - garbage on the pipe ends the run
                    self.ended.garbled = f"{type(exc).__name__}: {exc}"
                    return
                try:
                    if not isinstance(event, tuple) or not event or \
                            not isinstance(event[0], str):
                        raise ValueError(f"not an event: {type(event).__name__}")
                    self._handle(event)
                except Exception as exc:  # noqa: BLE001 - a malformed event ends the run
                    self.ended.garbled = f"{type(exc).__name__}: {exc}"
                    return
                if event[0] != "launch":  # a launch happens inside a case: its clock runs on
                    deadline = time.monotonic() + self._limit()
                if self.heard.finished:
                    return

    def _handle(self, event: tuple):
        wrong = malformed(event, {part.name for part in
                                                self.settings.exercise.parts})
        if wrong:
            raise ValueError(wrong)
        if event[0] != "launch":
            self.timeline.note(describe(event))
        self.heard.take(event)
        if event[0] == "mode" and event[1] and self.compiler is not None:
            self.compiler.start()  # overlaps its start-up with the interpreter run

    def _stop(self, process: subprocess.Popen, pipes: childproc.PipeReader):
        """Let a process that is done exit on its own (reading what it still prints), then
        end it and every process it started: whatever the learner's code started (a child
        process, a thread that keeps the worker alive) ends with the check, and does not hold
        it up."""
        # A worker that said "finished" flushed its output first: what it printed is in the
        # pipe, read below once it is ended, rather than waiting for it to tear down CUDA and
        # the interpreter.
        ended = self.ended
        if not self.heard.finished and not ended.timed_out and not ended.stopped:
            ended.returncode = self._output.drain_until_exit(process, pipes, 5.0)
        status = handover.end(process, self.heard.learner_pid)
        if ended.returncode is None:
            ended.returncode = status
            # None: the warm process that forked it ended or stopped answering
            ended.status_lost = status is None
        self._output.drain_until_exit(process, pipes, 0.5)
