"""What a check returns: a result per case, per part and for the whole check, plain data that
``learning.check`` renders (``learning.grader.report``) and never prints itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from learning.grader import compare
from learning.grader.declarations import Exercise, Part
from learning.grader.mode import Mode
from learning.grader.returned import ImportProblem


class Moment(NamedTuple):
    """One entry of a check's timeline."""

    seconds: float  # since the check began
    what: str


@dataclass
class Timeline:
    """Where a check's time goes: what happened (a process started, an event came), when."""

    start: float = field(default_factory=time.perf_counter)
    moments: list[Moment] = field(default_factory=list)

    def note(self, what: str):
        self.moments.append(Moment(time.perf_counter() - self.start, what))


@dataclass
class CaseResult:
    name: str
    purpose: str
    verdict: compare.Verdict


@dataclass
class CompileCheck:
    """The GPU compile check of one part's kernels (interpreter runs only)."""

    ran: bool  # False: it could not run here, and ``note`` says why
    note: str = ""
    compiled: list = field(default_factory=list)  # gpu_compile.Compiled, one per launch

    @property
    def rejected(self) -> list:
        """One entry per distinct rejection (the same line fails for every argument type); a
        compile check the learner's code changed counts as one."""
        unique = {}
        for c in self.compiled:
            if c.status in ("rejected", "refused", "unvouched"):
                unique.setdefault((c.kernel, c.line) if c.line else (c.kernel, c.message), c)
        return list(unique.values())


@dataclass
class PartResult:
    part: Part
    cases: list[CaseResult] = field(default_factory=list)
    problem: ImportProblem | None = None  # the function is missing, or the module won't import
    compile_check: CompileCheck | None = None
    # Why no case of this part ran (the module is missing or did not import, or the function
    # is missing, which ``problem`` says): without ``problem``, nothing about the learner's
    # code was measured, so the part has no grade, only this reason.
    not_run: str = ""

    @property
    def passed(self) -> int:
        return sum(1 for c in self.cases if c.verdict.passed)

    @property
    def graded(self) -> int:
        """Cases that count towards the grade (GPU-only cases skipped here do not)."""
        return sum(1 for c in self.cases if c.verdict.status != "skipped")

    @property
    def status(self) -> str:
        """"passed", "failed", "not-started", "missing" or "not-run" (see ``not_run``)."""
        if self.problem is not None:  # the module imported, and the function is not in it
            return "missing" if self.problem.kind == "missing-function" else "failed"
        if self.not_run:
            return "not-run"
        if any(c.verdict.status == "not-started" for c in self.cases):
            return "not-started"
        if self.compile_check is not None and self.compile_check.rejected:
            return "failed"
        return "passed" if self.passed == self.graded and self.graded else "failed"

    @property
    def started(self) -> bool:
        return self.status != "not-started"


@dataclass
class CheckResult:
    exercise: Exercise
    module_path: Path
    parts: list[PartResult]
    mode: Mode | None = None  # where kernels ran and why, when kernels were involved
    import_problem: ImportProblem | None = None
    # This machine's Triton interpreter cannot run kernels (mode.interpreter_problem): nothing
    # was graded, and the problem is the environment's, not the learner's.
    environment_problem: str = ""
    learner_output: str = ""
    # The parts the learner named with --part (empty: every part): the next step repeats them
    asked: tuple[str, ...] = ()
    seconds: float = 0.0
    # Process starts and exits, the worker's events: what lab/probes/check_phases.py prints,
    # to show where a check's time goes.
    timeline: list[Moment] = field(default_factory=list)
    # Which program read and wrote which element, in one case (learning.grader.memory_map), when
    # grade() was asked for it.
    memory_map: object = None
    # Modules of the course's reference code (its solutions, its reference kernels) that the
    # learner's code loaded: cases it passed may have been computed by them.
    borrowed: list[str] = field(default_factory=list)
    # How the learner's file changed while it was checked ("" when it did not): the grades may
    # be of two texts (a kernel's source is read from the file when first launched), and are
    # not recorded.
    module_changed: str = ""
    # The learner's file as it was read at the start: what the grades are of.
    graded_source: bytes | None = None
    # One line each about how the check ran that the learner should know (a warm process that
    # had to be replaced, the course's files changed by the learner's code).
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """At least one part started, and every started part passes."""
        started = [p for p in self.parts if p.started]
        return bool(started) and all(p.status == "passed" for p in started)

    def add_note(self, note: str):
        """Say ``note`` once, however many of the check's processes saw it."""
        if note and note not in self.notes:
            self.notes.append(note)


def mark_not_run(parts: list[PartResult], why: str):
    """No case of ``parts`` ran, and ``why`` says why (a part with no grade)."""
    for part_result in parts:
        part_result.not_run = why
        part_result.cases = [CaseResult(c.name, c.purpose, compare.Verdict("not-run", why))
                             for c in part_result.part.cases]
