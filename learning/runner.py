"""Grade a learner's exercise module: run it in a child process, judge what comes back.

``grade`` returns plain results and prints nothing; ``learning.check`` renders them. The
learner's code only ever runs in ``learning.worker``'s process, under a time limit, so a hang,
a crash or an exit in their code is reported as such and never takes the grader down with it.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from learning import compare
from learning.registry import Exercise, Part
from learning.returned import ImportProblem, Returned, Skipped
from learning.tensors import TensorSpec

PYTHON_CASE_SECONDS = 10.0
KERNEL_CASE_SECONDS = 60.0
IMPORT_SECONDS = 120.0
MAX_OUTPUT_LINES = 40
MAX_OUTPUT_CHARS = 4000
COURSE_ROOT = Path(__file__).resolve().parent.parent
_FRAME_HEADER = struct.Struct("<Q")


@dataclass
class CaseResult:
    name: str
    purpose: str
    verdict: compare.Verdict


@dataclass
class PartResult:
    part: Part
    cases: list[CaseResult] = field(default_factory=list)
    problem: ImportProblem | None = None  # the function is missing, or the module won't import

    @property
    def passed(self) -> int:
        return sum(1 for c in self.cases if c.verdict.passed)

    @property
    def graded(self) -> int:
        """Cases that count towards the grade (GPU-only cases skipped here do not)."""
        return sum(1 for c in self.cases if c.verdict.status != "skipped")

    @property
    def status(self) -> str:
        """"passed", "failed", "not-started" or "missing"."""
        if self.problem is not None:
            return "missing" if self.problem.kind == "missing-function" else "failed"
        if any(c.verdict.status == "not-started" for c in self.cases):
            return "not-started"
        return "passed" if self.passed == self.graded and self.graded else "failed"

    @property
    def started(self) -> bool:
        return self.status != "not-started"


@dataclass
class CheckResult:
    exercise: Exercise
    module_path: Path
    parts: list[PartResult]
    mode: tuple[bool, str] | None = None  # (interpreting, why), when kernels were involved
    import_problem: ImportProblem | None = None
    learner_output: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """At least one part started, and every started part passes."""
        started = [p for p in self.parts if p.started]
        return bool(started) and all(p.status == "passed" for p in started)


def grade(exercise: Exercise, root: Path | None = None, parts: list[str] | None = None,
          force_interpret: bool = False, case_seconds: float | None = None) -> CheckResult:
    """Run the learner's ``<root>/<exercise>.py`` against the chosen parts' cases."""
    start = time.perf_counter()
    root = Path(root or Path.cwd())
    module_path = root / exercise.filename
    chosen = [exercise.part(name) for name in parts] if parts else list(exercise.parts)
    result = CheckResult(exercise, module_path, [PartResult(p) for p in chosen])
    if not module_path.exists():
        result.import_problem = ImportProblem(
            "missing-file", f"{module_path} does not exist: run the check from the course "
            "folder, or restore the file with git")
        _mark_not_run(result.parts, "the module is missing")
        result.seconds = time.perf_counter() - start
        return result
    output_chunks = []
    pending = list(result.parts)
    while pending:
        run = _WorkerRun(exercise, module_path, pending, force_interpret, case_seconds)
        run.execute()
        output_chunks.append(run.output)
        if run.mode is not None:
            result.mode = run.mode
        if run.import_problem is not None:
            result.import_problem = run.import_problem
            _mark_not_run(pending, "the module could not be imported")
            break
        _collect(run, pending)
        if run.finished:
            break
        # The process died, hung or gave up in a case: the rest of that part cannot be trusted
        # to run, but later parts get a fresh process.
        stopped_in = run.current[0] if run.current else run.abandoned[0] if run.abandoned \
            else pending[0].part.name
        broken = next(p for p in pending if p.part.name == stopped_in)
        pending = pending[pending.index(broken) + 1:]
    result.learner_output = _cap_output("".join(output_chunks))
    result.seconds = time.perf_counter() - start
    return result


def _mark_not_run(parts: list[PartResult], why: str):
    for part_result in parts:
        part_result.cases = [CaseResult(c.name, c.purpose, compare.Verdict("not-run", why))
                             for c in part_result.part.cases]


def _collect(run: _WorkerRun, parts: list[PartResult]):
    """Turn the worker's events for ``parts`` into judged case results."""
    for part_result in parts:
        part = part_result.part
        if part.name in run.missing:
            part_result.problem = run.missing[part.name]
            _mark_not_run([part_result], f"{part.function} is missing")
            continue
        if part.name not in run.touched:
            continue
        part_result.cases = []
        for case in part.cases:
            outcome = run.outcomes.get((part.name, case.name))
            part_result.cases.append(CaseResult(case.name, case.purpose,
                                                _verdict(run, part, case, outcome)))


def _verdict(run: _WorkerRun, part: Part, case, outcome) -> compare.Verdict:
    if outcome is None:
        if run.current == (part.name, case.name):
            verdict = run.failure_verdict()
            if verdict.bug is None:
                verdict.bug = part.bug(case.catches[0])
            return verdict
        if any(o is not None and getattr(o, "not_started", False)
               for (p, _), o in run.outcomes.items() if p == part.name):
            return compare.Verdict("not-started", "not started")
        if run.abandoned and run.abandoned[0] == part.name:
            return compare.Verdict("not-run", run.abandoned[1])
        return compare.Verdict("not-run", "not run: an earlier case stopped the process")
    if isinstance(outcome, Skipped):
        return compare.Verdict("skipped", outcome.reason)
    args = tuple(a.exact() if isinstance(a, TensorSpec) else a for a in case.make_args())
    want = _reference(part, args)
    expect = {}
    specs = [a for a in case.make_args() if isinstance(a, TensorSpec)]
    if specs:
        expect["dtype"] = specs[0].dtype
        expect["device"] = "cpu" if run.mode is None or run.mode[0] else "cuda"
    if isinstance(outcome, Returned) or hasattr(outcome, "not_started"):
        return compare.judge(part, case, outcome, args, want, expect)
    return compare.Verdict("error", f"unexpected outcome {outcome!r}")


def _reference(part: Part, args: tuple):
    if part.returns == "exact":
        return part.reference(*args)
    import numpy as np

    with np.errstate(all="ignore"):
        return np.asarray(part.reference(*args), dtype=np.float64)


def _cap_output(text: str) -> str:
    lines = text.splitlines()
    cut_lines = len(lines) - MAX_OUTPUT_LINES
    if cut_lines > 0:
        text = "\n".join(lines[:MAX_OUTPUT_LINES]) + f"\n[output cut: {cut_lines} more lines]"
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"\n[output cut: {len(text) - MAX_OUTPUT_CHARS} more " \
            "characters]"
    return text


class _WorkerRun:
    """One learner process: start it, read its events under time limits, end it."""

    def __init__(self, exercise: Exercise, module_path: Path, parts: list[PartResult],
                 force_interpret: bool, case_seconds: float | None):
        self.exercise = exercise
        self.module_path = module_path
        self.part_names = [p.part.name for p in parts]
        self.force_interpret = force_interpret
        kernels = any(p.part.needs_kernels for p in parts)
        default = KERNEL_CASE_SECONDS if kernels else PYTHON_CASE_SECONDS
        self.case_seconds = case_seconds or default
        self.mode: tuple[bool, str] | None = None
        self.import_problem: ImportProblem | None = None
        self.missing: dict[str, ImportProblem] = {}
        self.outcomes: dict[tuple[str, str], object] = {}
        self.touched: set[str] = set()
        self.current: tuple[str, str] | None = None
        self.abandoned: tuple[str, str] | None = None  # (part, why): the process gave up on it
        self.finished = False
        self.timed_out = False
        self.returncode: int | None = None
        self.output = ""

    def execute(self):
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(
            [str(COURSE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        command = [sys.executable, "-m", "learning.worker", "--exercise", self.exercise.name,
                   "--module-path", str(self.module_path), "--parts", ",".join(self.part_names),
                   "--fd", str(write_fd)]
        if self.force_interpret:
            command.append("--interpret")
        with tempfile.TemporaryFile() as output:
            process = subprocess.Popen(
                command, pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, cwd=str(self.module_path.parent), env=env,
                start_new_session=True)
            os.close(write_fd)
            try:
                self._read_events(read_fd)
            finally:
                os.close(read_fd)
                self._stop(process)
            output.seek(0)
            self.output = output.read().decode("utf-8", errors="replace")

    def _read_events(self, fd: int):
        buffer = b""
        deadline = time.monotonic() + IMPORT_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                return
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return
            buffer += chunk
            while len(buffer) >= _FRAME_HEADER.size:
                (size,) = _FRAME_HEADER.unpack_from(buffer)
                if len(buffer) < _FRAME_HEADER.size + size:
                    break
                frame = buffer[_FRAME_HEADER.size:_FRAME_HEADER.size + size]
                buffer = buffer[_FRAME_HEADER.size + size:]
                event = pickle.loads(frame)
                self._handle(event)
                # After the mode is chosen the learner's module is imported, which may be slow.
                wait = IMPORT_SECONDS if event[0] == "mode" else self.case_seconds
                deadline = time.monotonic() + wait
                if self.finished:
                    return

    def _handle(self, event: tuple):
        kind = event[0]
        if kind == "mode":
            self.mode = (event[1], event[2])
        elif kind == "import":
            self.import_problem = event[1]
        elif kind == "part-missing":
            self.missing[event[1]] = event[2]
        elif kind == "start":
            self.current = (event[1], event[2])
            self.touched.add(event[1])
        elif kind == "done":
            self.outcomes[(event[1], event[2])] = event[3]
            self.touched.add(event[1])
            self.current = None
        elif kind == "abandon":
            self.abandoned = (event[1], event[2])
        elif kind == "finished":
            self.finished = True

    def _stop(self, process: subprocess.Popen):
        if self.finished:
            try:
                self.returncode = process.wait(timeout=10)
                return
            except subprocess.TimeoutExpired:
                pass
        elif not self.timed_out:
            try:
                self.returncode = process.wait(timeout=5)
                return
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.returncode = process.wait()

    def failure_verdict(self) -> compare.Verdict:
        """What to say about the case that was running when the process stopped answering."""
        name = f"{self.current[0]}/{self.current[1]}" if self.current else "start-up"
        if self.timed_out:
            return compare.Verdict(
                "timed-out", f"timed out after {self.case_seconds:g} s in case {name}: an "
                "endless loop, or a launch far larger than the case needs")
        code = self.returncode
        if code is not None and code < 0:
            number = -code
            try:
                label = signal.Signals(number).name
            except ValueError:
                label = "unknown"
            memory = ("SIGSEGV", "SIGBUS", "SIGABRT")
            cause = ": likely an out-of-bounds load or store" if label in memory else ""
            return compare.Verdict(
                "crashed", f"the process crashed (signal {number}, {label}) in case {name}{cause}")
        return compare.Verdict(
            "crashed", f"the process exited (status {code}) in case {name}: the code ended the "
            "program (sys.exit, os._exit) instead of returning", bug=compare.COMMON_BUGS["exited"])
