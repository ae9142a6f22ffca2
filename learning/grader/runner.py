"""Grade a learner's exercise module: run it in a child process, judge what comes back.

``grade`` returns plain results and prints nothing; ``learning.check`` renders them. The
learner's code only ever runs in ``learning.grader.worker``'s process, under a time limit, so a
hang, a crash or an exit in their code is reported as such and never takes the grader down with
it. The processes' plumbing (environment, events, output, signals) is
``learning.grader.childproc``. A memory map is one more worker run, in map mode:
``map_for_check`` picks the case and ``record_map`` runs it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from learning.grader import (  # gpu_compile: the events' classes, imported before any run
    childproc,
    compare,
    containment,
    forkserver,
    gpu_compile,  # noqa: F401
    handover,
    integrity,
    replays,
    stuck,
    warm,
)
from learning.grader import memory_map as maps
from learning.grader import mode as kernel_mode
from learning.grader.declarations import Exercise, Part
from learning.grader.returned import ImportProblem, Returned, Skipped
from learning.grader.state import STATE_DIR
from learning.grader.tensors import TensorSpec

PYTHON_CASE_SECONDS = 10.0
KERNEL_CASE_SECONDS = 60.0
# The grader's own start-up in the child (Python, torch, triton) before the learner's code runs.
STARTUP_SECONDS = 120.0
# The learner's import gets the case limit, but never less than this: a module may import
# libraries of its own, and a slow machine should not turn that into a failure.
IMPORT_FLOOR_SECONDS = 30.0
MAX_OUTPUT_LINES = 40
# The run that records a failing case's named steps (first_step_for) takes the first failing
# case that ran within STEPS_QUICK_SECONDS (else the quickest); its limit is STEPS_FACTOR times
# the case's own time, never below a floor (a kernel's: an interpreter run, whatever the case's
# own time on a GPU was).
STEPS_QUICK_SECONDS = 2.0
STEPS_FACTOR = 10.0
STEPS_FLOOR_SECONDS = 5.0
STEPS_KERNEL_FLOOR_SECONDS = 15.0
# GPU faults in one check, each costing a fresh process (a fork of the warm one, usually),
# before the rest of the part is left unrun.
MAX_GPU_FAULTS = 24
MAX_OUTPUT_CHARS = 4000
# Printed output past which a timed-out case says how much was printed: writing megabytes to a
# pipe takes seconds of its own.
PRINTED_A_LOT = 1_000_000
# The crash causes that speak of loads and stores, which only a kernel part has.
MEMORY_FAULT_CAUSES = {childproc.SIGNAL_CAUSES["SIGSEGV"], childproc.SIGNAL_CAUSES["SIGBUS"]}


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
        """One entry per distinct rejection (the same line fails for every argument type)."""
        unique = {}
        for c in self.compiled:
            if c.status == "rejected":
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
    mode: tuple[bool, str] | None = None  # (interpreting, why), when kernels were involved
    import_problem: ImportProblem | None = None
    # This machine's Triton interpreter cannot run kernels (mode.interpreter_problem): nothing
    # was graded, and the problem is the environment's, not the learner's.
    environment_problem: str = ""
    learner_output: str = ""
    seconds: float = 0.0
    # (seconds since the check began, what happened): process starts and exits, the worker's
    # events. What lab/probes/check_phases.py prints, to show where a check's time goes.
    timeline: list[tuple[float, str]] = field(default_factory=list)
    # Which program read and wrote which element, in one case (learning.grader.memory_map), when
    # grade() was asked for it.
    memory_map: object = None
    # Modules of the course's reference code (its solutions, its reference kernels) that the
    # learner's code loaded: cases it passed may have been computed by them.
    borrowed: list[str] = field(default_factory=list)
    # How the learner's file changed while it was checked ("" when it did not): the grades are
    # of the text read at the start, which is then no longer what the file holds.
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


def import_limit(case_seconds: float) -> float:
    """Seconds the learner's module may take to import, given the per-case limit."""
    return max(IMPORT_FLOOR_SECONDS, case_seconds)


def grade(exercise: Exercise, root: Path | None = None, parts: list[str] | None = None,
          force_interpret: bool = False, case_seconds: float | None = None,
          import_seconds: float | None = None, compile_check: bool = True,
          memory_gib: float | None = None, memory_map: bool | str = False,
          first_steps: bool = False) -> CheckResult:
    """Run the learner's ``<root>/<exercise>.py`` against the chosen parts' cases.

    ``case_seconds`` limits each case, ``import_seconds`` the learner's import (default:
    ``import_limit(case_seconds)``). With ``compile_check``, kernels that ran in the
    interpreter are also compiled for a GPU target, and what the compiler rejects fails the part.
    ``memory_map`` (True, or a case's name) records a memory map of the first failing kernel
    case small enough to draw, or of that case (``learning.grader.memory_map``). With
    ``first_steps``, a part whose output is wrong and whose code keeps the lesson's names has
    its first failing case run once more with those values recorded, beside the reference's,
    and the case says the first named step whose value differs (``first_step_for``).
    """
    start = time.perf_counter()
    # Judging needs numpy: imported before the learner's code runs, which could change the
    # files this process would otherwise import in the middle of a run.
    childproc.import_numpy()
    # Absolute: the learner's process runs in the module's folder, where a relative --root
    # would point somewhere else.
    root = Path(root or Path.cwd()).resolve()
    module_path = root / exercise.filename
    chosen = [exercise.part(name) for name in parts] if parts else list(exercise.parts)
    result = CheckResult(exercise, module_path, [PartResult(p) for p in chosen])
    tampered = integrity.changed()
    if tampered:  # the grader's own answers cannot be trusted: nothing is graded
        result.environment_problem = integrity.refusal(tampered)
        _mark_not_run(result.parts, "not run: " + result.environment_problem)
        result.seconds = time.perf_counter() - start
        return result
    if not module_path.exists():
        result.import_problem = ImportProblem(
            "missing-file", f"{module_path} does not exist: python -m learning.reset "
            f"{exercise.name} --root {shlex.quote(str(root))} puts the original back")
        _mark_not_run(result.parts, "the module is missing")
        _skip_what_cannot_run_here(result, force_interpret)
        result.seconds = time.perf_counter() - start
        return result
    output_chunks, launches = [], []
    text_before = _read_bytes(module_path)
    compiler = childproc.CompileRun(module_path) if compile_check else None
    # the compile check runs the learner's code too
    course = integrity.Guard(module_path.parent, module_files=warm.module_files())
    try:
        _run_parts(result, exercise, module_path, force_interpret, case_seconds,
                   import_seconds, compiler, output_chunks, list(result.parts), launches,
                   memory_gib, start)
        if first_steps:
            for part_result in result.parts:
                if first_step_for(result, part_result, text_before, force_interpret,
                                  case_seconds, memory_gib):
                    result.timeline.append((time.perf_counter() - start,
                                            f"first step: {part_result.part.name} recorded"))
        if memory_map:
            result.memory_map = map_for_check(result, memory_map, case_seconds, memory_gib)
            result.timeline.append((time.perf_counter() - start, "memory map: recorded"))
        if compiler is not None and compiler.started:
            result.timeline.append((time.perf_counter() - start, "compile check: launches sent"))
            _attach_compile_check(result, compiler, launches)
            result.timeline.append((time.perf_counter() - start, "compile check: done"))
    finally:
        if compiler is not None and compiler.started:
            compiler.cancel()
        _note_repairs(result, course.repair(_aside_folder(module_path)), module_path)
    _skip_what_cannot_run_here(result, force_interpret)
    result.module_changed = _change(text_before, _read_bytes(module_path))
    result.graded_source = text_before
    result.learner_output = _cap_output("".join(output_chunks))
    result.seconds = time.perf_counter() - start
    return result


def _aside_folder(module_path: Path) -> Path:
    """Where files the learner's code added in the course's folders are moved to."""
    return module_path.parent / STATE_DIR / "set-aside"


def _note_repairs(result: CheckResult, repairs: integrity.Repairs, module_path: Path):
    note = repairs.note(str(_aside_folder(module_path)))
    if note and note not in result.notes:
        result.notes.append(note)


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _change(before: bytes | None, after: bytes | None) -> str:
    """How the learner's file changed during a check, in a word ("" when it did not)."""
    if before == after:
        return ""
    return "deleted" if after is None else "rewritten"


def import_problem(exercise: Exercise, root: Path | None = None) -> ImportProblem | None:
    """What keeps the learner's ``<root>/<exercise>.py`` from importing now, found by the
    import a check makes (in a worker, running no case); None when it imports, when the file
    is missing, or when the grader's own process could not start (nothing is known then)."""
    module_path = Path(root or Path.cwd()).resolve() / exercise.filename
    if not module_path.exists() or integrity.changed():
        return None
    run = _WorkerRun(exercise, module_path, [], False, None)
    run.execute()
    problem = run.import_problem if run.imported else run.import_failure()
    return None if problem is None or problem.kind == "start-up" else problem


def _run_parts(result, exercise, module_path, force_interpret, case_seconds, import_seconds,
               compiler, output_chunks, pending, launches, memory_gib=None, start=None):
    """One worker process after another, until every pending part has run or cannot. After a
    GPU fault the cases after the faulting one run in a fresh process (a faulted CUDA context
    can run nothing more, but the learner should see every case), and at the end the faulted
    cases run once more in the interpreter, whose bounds checks name the line and lanes."""
    carried, only, faults = {}, None, []
    latest = {}  # part name: (the run that judged it last, its PartResult)

    def collect(run, parts):
        _collect(run, parts)
        latest.update((p.part.name, (run, p)) for p in parts if p.part.name in run.touched)

    while pending:
        run = _WorkerRun(exercise, module_path, pending, force_interpret, case_seconds,
                         import_seconds, compiler, memory_gib, only, carried)
        run.clock_start = start if start is not None else time.perf_counter()
        run.timeline = result.timeline
        run.execute()
        output_chunks.append(run.output)
        result.notes += [note for note in run.notes if note not in result.notes]
        _note_repairs(result, run.repairs, module_path)
        launches += run.launches
        result.borrowed += [name for name in run.borrowed if name not in result.borrowed]
        if run.mode is not None:
            result.mode = run.mode
        if run.environment_problem:
            result.environment_problem = run.environment_problem
            _mark_not_run(pending, "not run: " + run.environment_problem)
            break
        if run.import_problem is None and not run.imported:
            run.import_problem = run.import_failure()
        if run.import_problem is not None:
            result.import_problem = run.import_problem
            _mark_not_run(pending, "the module could not be imported")
            break
        collect(run, pending)
        fault = run.gpu_fault()
        if fault is not None and len(faults) < MAX_GPU_FAULTS:
            faults.append(fault)
            part_name, case_name = fault
            faulted = next(p for p in pending if p.part.name == part_name)
            names = [c.name for c in faulted.part.cases]
            carried = dict(run.outcomes)
            only = {part_name: names[names.index(case_name) + 1:]}
            pending[:] = pending[pending.index(faulted):]
            continue
        if run.finished:
            break
        # The process died, hung or gave up in a case: the rest of that part cannot be trusted
        # to run, but later parts get a fresh process.
        stopped_in = run.current[0] if run.current else run.abandoned[0] if run.abandoned \
            else pending[0].part.name
        broken = next(p for p in pending if p.part.name == stopped_in)
        pending[:] = pending[pending.index(broken) + 1:]
        carried, only = {}, None
    if faults:
        faulted = [latest[name][1] for name in dict.fromkeys(f[0] for f in faults)]
        reruns = _rerun_in_interpreter(exercise, module_path, faulted, faults, case_seconds,
                                       memory_gib, result, start)
        for part_result in faulted:
            run = latest[part_result.part.name][0]
            run.reruns = reruns
            _collect(run, [part_result])


def _rerun_in_interpreter(exercise, module_path, parts, faults, case_seconds, memory_gib,
                          result, start) -> dict[tuple[str, str], tuple[str, object]]:
    """The cases that faulted on the GPU, once more in Triton's interpreter, in one process:
    for each, ("ran", outcome), or ("unavailable", why) when it cannot run there."""
    reruns, wanted = {}, {}
    for part_name, case_name in faults:
        case = next(c for p in parts if p.part.name == part_name for c in p.part.cases
                    if c.name == case_name)
        if case.gpu_only:
            reruns[(part_name, case_name)] = ("unavailable", "the case runs only on a GPU")
        else:
            wanted.setdefault(part_name, []).append(case_name)
    if not wanted:
        return reruns
    run = _WorkerRun(exercise, module_path, [p for p in parts if p.part.name in wanted], True,
                     case_seconds, None, None, memory_gib, wanted)
    run.clock_start = start if start is not None else time.perf_counter()
    run.timeline = result.timeline
    run.execute()
    _note_repairs(result, run.repairs, module_path)
    for part_name, names in wanted.items():
        for case_name in names:
            outcome = run.outcomes.get((part_name, case_name))
            if run.environment_problem:
                reruns[(part_name, case_name)] = ("unavailable", run.environment_problem)
            elif outcome is None:
                reruns[(part_name, case_name)] = ("unavailable", "the interpreter run stopped "
                                                  "before this case finished")
            else:
                reruns[(part_name, case_name)] = ("ran", outcome)
    return reruns


def _attach_compile_check(result: CheckResult, compiler: childproc.CompileRun, launches: list):
    """Compile what the interpreter launched, and give each kernel part its report."""
    kernel_parts = [p for p in result.parts if p.part.needs_kernels and p.started
                    and p.problem is None]
    if not kernel_parts or result.import_problem is not None or not launches:
        return
    compiled, note = compiler.finish(launches)
    for part_result in kernel_parts:
        mine = [launch for launch in launches if launch.part == part_result.part.name]
        if not mine:
            continue
        if note:
            part_result.compile_check = CompileCheck(False, note)
            continue
        kernels = {launch.kernel for launch in mine}
        found = [c for c in compiled if c.kernel in kernels]
        skipped = [c for c in found if c.status == "not-checked"]
        part_result.compile_check = CompileCheck(
            True, "; ".join(f"{c.kernel}: {c.message}" for c in skipped), found)

def _interpreting(result: CheckResult, force_interpret: bool) -> bool | None:
    """Whether this check's cases ran (or would have run) on the CPU: from the mode the worker
    reported, else as the worker would choose it; None when that cannot be told here without
    importing torch (a CUDA driver sees a GPU, and the worker said nothing)."""
    if result.mode is not None:
        return result.mode[0]
    if not force_interpret and not any(p.part.needs_kernels for p in result.parts):
        return True  # no kernels: the worker keeps every tensor on the CPU
    if force_interpret or kernel_mode.env_asks_for_interpreter() \
            or not kernel_mode.cuda_driver_sees_a_gpu():
        return True
    return None


def _skip_what_cannot_run_here(result: CheckResult, force_interpret: bool):
    """A case that cannot run on this machine (a GPU-only case in the interpreter, bfloat16 on
    a GPU without it) is skipped, and so never counted, also when it did not run for another
    reason (an earlier case timed out or crashed the process, the module did not import): the
    grade's denominator is then the same whatever happened. A case that could have run here
    but did not still counts."""
    lacking = next((c.verdict.summary for p in result.parts for c in p.cases
                    if c.verdict.status == "skipped"
                    and c.verdict.summary.startswith("needs bfloat16")), None)
    interpreting = None
    for part_result in result.parts:
        for index, case_result in enumerate(part_result.cases):
            if case_result.verdict.status != "not-run":
                continue
            case = next((c for c in part_result.part.cases if c.name == case_result.name), None)
            if case is None:
                continue
            why = ""
            if case.gpu_only:
                if interpreting is None:
                    interpreting = _interpreting(result, force_interpret)
                if interpreting:
                    why = "needs a CUDA GPU"
            if not why and lacking and any(isinstance(a, TensorSpec) and a.dtype == "bfloat16"
                                           for a in case.make_args()):
                why = lacking
            if why:
                part_result.cases[index] = CaseResult(case_result.name, case_result.purpose,
                                                      compare.Verdict("skipped", why))


def _mark_not_run(parts: list[PartResult], why: str):
    for part_result in parts:
        part_result.not_run = why
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
        passed = []  # (args, want, atol, rtol) of the cases the learner's code passed
        failed = []  # (got, args, want, atol, rtol) of those it got wrong, with numbers
        missed = []  # (args, want, atol, rtol) of every case it failed or raised in
        explained = []  # (verdict, got, args, want, atol, rtol): wrong numbers a bug explains
        for case in part.cases:
            outcome = run.outcomes.get((part.name, case.name))
            verdict, evidence = _verdict(run, part, case, outcome)
            part_result.cases.append(CaseResult(case.name, case.purpose, verdict))
            if evidence is None or not case.replays:
                continue
            tolerance = case.tolerance or part.tolerance
            if verdict.status in ("failed", "error"):
                missed.append((*evidence, tolerance.atol, tolerance.rtol))
            if verdict.passed:
                passed.append((*evidence, tolerance.atol, tolerance.rtol))
            elif part.returns != "exact" and verdict.status == "failed" \
                    and verdict.mismatch_count and not verdict.causes:
                # A wrong output no known bug explains: a named bug must not predict another.
                failed.append((outcome.values, *evidence, tolerance.atol, tolerance.rtol))
            elif part.returns != "exact" and verdict.status == "failed" \
                    and verdict.mismatch_count:
                explained.append((verdict, outcome.values, *evidence, tolerance.atol,
                                  tolerance.rtol))
        _drop_contradicted(part_result, passed, failed, missed)
        if not failed and all(c.verdict.status in ("passed", "skipped", "not-run") or
                              any(c.verdict is e[0] for e in explained)
                              for c in part_result.cases):
            _keep_the_one_explanation(explained)


def _drop_contradicted(part_result: PartResult, passed: list, failed: list, missed: list):
    """A bug whose replay matched one case is not the learner's if their other cases rule it
    out: their code passed a case the bug would have failed, or returned another wrong output
    than the bug gives. Two mistakes can raise the same error, or agree on one row. A bug
    named on weak evidence alone (an exception's type, an output with no finite value) must also
    explain every failure: it is dropped if the learner failed a case the bug passes."""
    verdicts = [c.verdict for c in part_result.cases if c.verdict.causes]
    named = {bug.key: bug for v in verdicts for bug in v.causes}
    weak_only = {key for key in named if all(key in v.weak for v in verdicts
                                             if key in {b.key for b in v.causes})}
    wrong = {key for key, bug in named.items() if replays.contradicted(bug, passed, failed)
             or key in weak_only and any(replays.predicts_pass(bug, *case) for case in missed)}
    for verdict in verdicts:
        verdict.causes = tuple(b for b in verdict.causes if b.key not in wrong)


def _keep_the_one_explanation(explained: list) -> None:
    """When one bug explains every wrong output of a part, another bug named beside it on some
    cases is dropped where its replay gives another output than the learner's on one of the
    rest: a result rounded for display can equal a wrong-scale replay where the softmax is
    one-hot, but only rounding explains every case. Called only when every failure of the part
    is a wrong output some bug explains; two real mistakes leave no single explanation."""
    if len(explained) < 2:
        return
    keys = [{b.key for b in e[0].causes} for e in explained]
    everywhere = set.intersection(*keys)
    if len(everywhere) != 1:
        return
    beside = {b.key: b for e in explained for b in e[0].causes if b.key not in everywhere}
    wrong = {key for key, bug in beside.items()
             if getattr(bug.detect, "explains", None) is not None
             and any(bug.detect.explains(*e[1:]) is False for e in explained)}
    for verdict, *_ in explained:
        verdict.causes = tuple(b for b in verdict.causes if b.key not in wrong)


def _verdict(run: _WorkerRun, part: Part, case, outcome) -> tuple[compare.Verdict, tuple | None]:
    """The case's verdict, and the (args, want) it was judged on, when it was."""
    if outcome is None:
        if run.current == (part.name, case.name):
            return run.failure_verdict(), None
        if any(o is not None and getattr(o, "not_started", False)
               for (p, _), o in run.outcomes.items() if p == part.name):
            return compare.Verdict("not-started", "not started"), None
        if run.abandoned and run.abandoned[0] == part.name:
            return compare.Verdict("not-run", run.abandoned[1]), None
        return compare.Verdict("not-run", "not run: an earlier case stopped the process"), None
    if isinstance(outcome, Skipped):
        return compare.Verdict("skipped", outcome.reason), None
    args = tuple(a.stored() if isinstance(a, TensorSpec) else a for a in case.make_args())
    want = _reference(part, args)
    expect = {}
    specs = [a for a in case.make_args() if isinstance(a, TensorSpec)]
    expect["filename"] = run.module_path.name
    if specs:
        expect["dtype"] = specs[0].dtype
        expect["device"] = "cpu" if run.mode is None or run.mode[0] else "cuda"
    if isinstance(outcome, Returned) or hasattr(outcome, "not_started"):
        verdict = compare.judge(part, case, outcome, args, want, expect)
        rerun = run.reruns.get((part.name, case.name))
        if rerun is not None:
            verdict = _with_rerun(part, case, verdict, rerun, args, want, expect)
        return verdict, (args, want)
    return compare.Verdict("error", f"unexpected outcome {outcome!r}"), None


def _with_rerun(part: Part, case, verdict: compare.Verdict, rerun: tuple[str, object], args,
                want, expect: dict) -> compare.Verdict:
    """A GPU fault's verdict, told with what the same case did in the interpreter."""
    kind, outcome = rerun
    fault = verdict.summary.splitlines()[0] if verdict.summary else "the GPU faulted"
    if kind == "unavailable":
        verdict.summary = f"{verdict.summary}; it could not be re-run in Triton's interpreter " \
                          f"to find the line ({outcome})"
        return verdict
    there = compare.judge(part, case, outcome, args, want, dict(expect, device="cpu"))
    if getattr(outcome, "exc_type", "") == "OutOfBoundsAccess":
        there.summary = f"on the GPU: {fault}; re-run in Triton's interpreter, which checks " \
                        f"every address: {there.summary}"
        return there
    done = "it passed" if there.passed else f"{there.summary.splitlines()[0]}"
    verdict.summary = f"{verdict.summary}; re-run in Triton's interpreter: {done}"
    return verdict


def _reference(part: Part, args: tuple):
    if part.returns == "exact":
        return part.reference(*args)
    import numpy as np

    with np.errstate(all="ignore"):
        return np.asarray(part.reference(*args), dtype=np.float64)


# The note a worker process's capture adds where it stopped keeping what the learner printed.
_NOT_KEPT = re.compile(r"\n\[output cut: (\d+) more bytes\]")


def _cap_output(text: str) -> str:
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


class _WorkerRun:
    """One learner process: start it, read its events under time limits, end it."""

    def __init__(self, exercise: Exercise, module_path: Path, parts: list[PartResult],
                 force_interpret: bool, case_seconds: float | None,
                 import_seconds: float | None = None, compiler: childproc.CompileRun | None = None,
                 memory_gib: float | None = None, only: dict[str, list[str]] | None = None,
                 carried: dict | None = None):
        self.exercise = exercise
        self.module_path = module_path
        self.part_names = [p.part.name for p in parts]
        self.force_interpret = force_interpret
        kernels = any(p.part.needs_kernels for p in parts)
        default = KERNEL_CASE_SECONDS if kernels else PYTHON_CASE_SECONDS
        self.case_seconds = case_seconds or default
        self.explicit_seconds = case_seconds
        self.memory_gib = memory_gib
        self.import_seconds = import_seconds or import_limit(self.case_seconds)
        self.compiler = compiler
        self.phase = "start-up"  # then "import", then "cases"
        self.imported = False
        self.launches: list = []
        self.mode: tuple[bool, str] | None = None
        self.import_problem: ImportProblem | None = None
        self.environment_problem = ""
        self.missing: dict[str, ImportProblem] = {}
        self.only = only  # part: the only cases to run of it (the rest ran in another process)
        self.outcomes: dict[tuple[str, str], object] = dict(carried or {})
        self.carried = set(self.outcomes)  # judged from an earlier process's run
        self.touched: set[str] = {part for part, _ in self.outcomes}
        self.reruns: dict[tuple[str, str], tuple[str, object]] = {}
        self.current: tuple[str, str] | None = None
        self.abandoned: tuple[str, str] | None = None  # (part, why): the process gave up on it
        self.finished = False
        self.timed_out = False
        self.stuck_at = ""  # the learner's line a timed-out case was running, where known
        self.status_lost = False  # its exit status is unknown: the process that forked it ended
        self.garbled = ""  # the process sent something that is not one of the course's events
        self.clock_start = time.perf_counter()
        self.timeline: list[tuple[float, str]] = []
        self.returncode: int | None = None
        self.output = ""
        self.extra_args: list[str] = []  # more worker arguments: --map (learning.grader.memory_map)
        self.maps: dict[str, object] = {}  # what a --map worker recorded, by whose kernel
        self.steps: dict[str, object] = {}  # what a --steps worker recorded, by whose code
        self.borrowed: list[str] = []  # the course's reference modules the learner's code loaded
        self.learner_pid = 0  # the process under the guard that runs the learner's code
        self.repairs = integrity.Repairs()  # what its code did to the course's files, undone
        self.notes: list[str] = []  # what a learner should know of how it ran (warm.take_notes)
        # why the learner's process runs without the filter that keeps it from the grader's
        # processes ("" where it has it; None until it says)
        self.contained: str | None = None

    def execute(self):
        # This process's memory and descriptors out of the learner's processes' reach (they run
        # as the same user): /proc/<pid>/mem and /proc/<pid>/fd need it dumpable.
        containment.protect_grader()
        read_fd, write_fd = os.pipe()
        out_read, out_write = os.pipe()
        command = [sys.executable, "-m", "learning.grader.worker", "--exercise", self.exercise.name,
                   "--module-path", str(self.module_path), "--parts", ",".join(self.part_names),
                   "--fd", str(write_fd), "--grader-pid", str(os.getpid())]
        if self.force_interpret:
            command.append("--interpret")
        if self.memory_gib is not None:
            command += ["--memory-gib", f"{self.memory_gib:g}"]
        if self.only is not None:
            command += ["--cases", json.dumps(self.only)]
        command += self.extra_args
        stack_file = ""
        if stuck.supported():  # where a case that runs past its limit was stuck
            handle, stack_file = tempfile.mkstemp(prefix="course-stack-", suffix=".txt")
            os.close(handle)
            command += ["--stack-file", stack_file]
        self._output = childproc.CappedOutput()
        self._note("worker: started")
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
        course = integrity.Guard(self.module_path.parent, module_files=warm.module_files())
        try:
            self._read_events(pipes)
            if self.timed_out and self.phase == "cases" and stack_file:
                self.stuck_at = stuck.where(process.pid, stack_file, str(self.module_path))
        except BaseException:  # Ctrl-C (learning.watch): end the worker now, not in 5 s
            handover.end(process, self.learner_pid)
            raise
        finally:
            self._stop(process, pipes)
            if stack_file:
                with contextlib.suppress(OSError):
                    os.unlink(stack_file)
            # before anything is judged: what the grader imports from here on is the course's
            self.repairs = course.repair(_aside_folder(self.module_path))
        self._note("worker: ended")
        self.output = self._output.text()

    def _note(self, what: str):
        self.timeline.append((time.perf_counter() - self.clock_start, what))

    def _start(self, command: list[str], event_fd: int, output_fd: int):
        """A fresh worker process: forked by the test suite's server (learning.grader.forkserver) or
        a learner's warm one (learning.grader.warm), started from scratch where there is none."""
        cwd, env = str(self.module_path.parent), childproc.child_environment()
        server = None if handover.portable() else forkserver.ForkServer.get() \
            if forkserver.enabled() else warm.server(self.force_interpret)
        forked = server and server.spawn(command[3:], cwd, env, event_fd, output_fd)
        if server and not forked and server.lost and not forkserver.enabled():
            warm.discard(server)  # stuck or gone: replaced by a fresh one, for the next check
            self._note(f"worker: the warm process {server.lost}")
        self.notes += warm.take_notes()
        if forked:
            self._note("worker: forked from a warm process")
            return forked
        number, options = handover.spawn_options(event_fd)
        command[command.index("--fd") + 1] = str(number)
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output_fd,
                                stderr=output_fd, cwd=cwd, env=env, **options)

    def _limit(self) -> float:
        if self.phase != "cases":
            return {"start-up": STARTUP_SECONDS, "import": self.import_seconds}[self.phase]
        return self._case_limit(self.current[0] if self.current else None)

    def _case_limit(self, part_name: str | None) -> float:
        """The learner's --timeout, else the part's own budget: a Python part gets the Python
        limit even when kernel parts run in the same process."""
        if self.explicit_seconds or part_name is None:
            return self.case_seconds
        part = self.exercise.part(part_name)
        return KERNEL_CASE_SECONDS if part.needs_kernels else PYTHON_CASE_SECONDS

    def _read_events(self, pipes: childproc.PipeReader):
        # A bytearray: a pipe hands over 64 KiB a read, and a large output (25 MB for 4096 rows
        # of 781 float64 values) joined into immutable bytes cost seconds of copying.
        buffer = bytearray()
        deadline = time.monotonic() + self._limit()
        while "events" in pipes.open:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                return
            got = pipes.next(remaining)
            if got is None:
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
                    self.garbled = f"a frame of {size:,} bytes announced, more than any " \
                                   f"event the grader sends ({childproc.MAX_EVENT_BYTES:,})"
                    return
                if len(buffer) < childproc.FRAME_HEADER.size + size:
                    break
                frame = bytes(buffer[childproc.FRAME_HEADER.size:
                                     childproc.FRAME_HEADER.size + size])
                del buffer[:childproc.FRAME_HEADER.size + size]
                try:
                    event = childproc.load_event(frame)
                except Exception as exc:  # noqa: BLE001 - garbage on the pipe ends the run
                    self.garbled = f"{type(exc).__name__}: {exc}"
                    return
                try:
                    if not isinstance(event, tuple) or not event or \
                            not isinstance(event[0], str):
                        raise ValueError(f"not an event: {type(event).__name__}")
                    self._handle(event)
                except Exception as exc:  # noqa: BLE001 - a malformed event ends the run
                    self.garbled = f"{type(exc).__name__}: {exc}"
                    return
                if event[0] != "launch":  # a launch happens inside a case: its clock runs on
                    deadline = time.monotonic() + self._limit()
                if self.finished:
                    return

    def _handle(self, event: tuple):
        kind = event[0]
        if kind != "launch":
            called = getattr(event[3], "seconds", None) if kind == "done" else None
            self._note(" ".join(["worker:", kind, *(str(e) for e in event[1:3]
                                                    if isinstance(e, str))])
                       + (f" ({called:.3f} s of it in the learner's call)" if called else ""))
        if kind == "pid":
            # sent by the worker's own code before the learner's runs: the first one counts
            if self.phase == "start-up" and not self.learner_pid:
                self.learner_pid = int(event[1])
        elif kind == "contained":
            self.contained = event[1]
        elif kind == "mode":
            self.mode = (event[1], event[2])
            if event[1] and self.compiler is not None:
                self.compiler.start()  # overlaps its start-up with the interpreter run
        elif kind == "environment":
            self.environment_problem = event[1]
            self.finished = True
        elif kind == "importing":
            self.phase = "import"
        elif kind == "import":
            self.import_problem = event[1]
            self.imported = True
            self.phase = "cases"
        elif kind == "launch":
            self.launches.append(event[1])
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
        elif kind == "map":
            self.maps[event[1]] = event[2]
        elif kind == "steps":
            self.steps[event[1]] = event[2]
        elif kind == "borrowed":
            self.borrowed = [str(name) for name in event[1]]
        elif kind == "finished":
            self.finished = True

    def _stop(self, process: subprocess.Popen, pipes: childproc.PipeReader):
        """Let a process that is done exit on its own (reading what it still prints), then
        end it and every process it started: whatever the learner's code started (a child
        process, a thread that keeps the worker alive) ends with the check, and does not hold
        it up."""
        # A worker that said "finished" flushed its output first: what it printed is in the
        # pipe, read below once it is ended, rather than waiting for it to tear down CUDA and
        # the interpreter.
        if not self.finished and not self.timed_out:
            self.returncode = self._output.drain_until_exit(process, pipes, 5.0)
        status = handover.end(process, self.learner_pid)
        if self.returncode is None:
            self.returncode = status
            # None: the warm process that forked it ended or stopped answering
            self.status_lost = status is None
        self._output.drain_until_exit(process, pipes, 0.5)

    def gpu_fault(self) -> tuple[str, str] | None:
        """(part, case) of the case whose fault ended this process's GPU context, if one did."""
        if self.abandoned is None:
            return None
        faulted = [key for key, o in self.outcomes.items()
                   if key[0] == self.abandoned[0] and key not in self.carried
                   and getattr(o, "gpu_lost", False)]
        return faulted[-1] if faulted else None

    def import_failure(self) -> ImportProblem:
        """The process stopped before the learner's module finished importing: say how."""
        name = self.module_path.name
        if self.phase == "start-up":
            verdict = self.failure_verdict()
            return ImportProblem("start-up", f"the grader's process could not start: "
                                 f"{verdict.summary}; the output below may say why")
        if self.timed_out:
            return ImportProblem(
                "timed-out", f"importing {name} timed out after {self.import_seconds:g} s: code "
                "at the top level of the module runs on import; an endless loop or a long "
                "computation there belongs inside a function")
        code = self.returncode
        crashed = childproc.crash(code)
        if crashed is not None:
            return ImportProblem("crashed", f"the process crashed ({crashed[0]}) while "
                                 f"importing {name}")
        return ImportProblem("exited", f"{name} ended the program while being imported "
                             f"(exit status {code}): code at the top level of the module runs on "
                             "import; do not call sys.exit or os._exit there")

    def failure_verdict(self) -> compare.Verdict:
        """What to say about the case that was running when the process stopped answering."""
        name = f"{self.current[0]}/{self.current[1]}" if self.current else "start-up"
        if self.garbled:
            # Observed, not explained: the worker sends only plain data, but the learner's
            # code runs in its process and could write to the same descriptor.
            return compare.Verdict(
                "error", f"the grader could not read what the process sent it in case {name} "
                f"({self.garbled[:200]}), so the case has no result; the process was ended")
        if self.timed_out:
            kernels = self.exercise.part(self.current[0]).needs_kernels if self.current \
                else False
            usual = ("a loop in the kernel or the launcher whose condition never turns false "
                     "(an index or offset that is never advanced), or a launch far larger than "
                     "the case needs: the interpreter runs every program in turn") if kernels \
                else ("a loop whose condition never turns false: a while loop whose index or "
                      "bound is never advanced, or a list that grows as it is walked")
            limit = self._case_limit(self.current[0] if self.current else None)
            printed = len(self._output.kept) + self._output.dropped
            if printed >= PRINTED_A_LOT:  # seen, not guessed: say it beside the usual reason
                usual += (f". It also printed {printed:,} bytes by then, and printing that "
                          "much takes time of its own: take the prints out and check again")
            stopped = f"; when it was stopped it was running {self.stuck_at}" \
                if self.stuck_at else ""
            return compare.Verdict(
                "timed-out", f"did not finish within {limit:g} s in case {name} "
                f"(the reference takes well under a second){stopped}; the usual reason is "
                f"{usual}")
        if self.status_lost:
            return compare.Verdict(
                "crashed", f"the process stopped answering in case {name}, and the warm "
                "process that started it stopped answering too, so how it ended is unknown")
        code = self.returncode
        crashed = childproc.crash(code)
        if crashed is not None:
            what, cause = crashed
            kernels = self.exercise.part(self.current[0]).needs_kernels if self.current \
                else True
            if not kernels and cause in MEMORY_FAULT_CAUSES:  # a Python part has no loads
                cause = ("a memory fault in native code the function called (ctypes, a C "
                         "extension), or a signal the code sent itself: plain Python has no "
                         "loads or stores that could fault")
            return compare.Verdict(
                "crashed", f"the process crashed ({what}) in case {name}"
                f"{': ' + cause if cause else ''}")
        return compare.Verdict(
            "crashed", f"the process exited (status {code}) in case {name}: the code ended the "
            "program (sys.exit, os._exit) instead of returning",
            causes=(compare.COMMON_BUGS["exited"],))


# ---------------------------------------------------------------------------------------------
# A memory map (learning.grader.memory_map): one more worker run, in map mode.


def map_for_check(result, wanted, case_seconds: float | None = None,
                  memory_gib: float | None = None) -> maps.MemoryMap | None:
    """The map a check shows: of the case ``wanted`` names, or (``wanted`` True) of its
    first failing kernel case small enough to draw; None when there is none."""
    if result.import_problem is not None:
        return None
    if isinstance(wanted, str):
        part, case = maps.find_case(result.exercise, wanted)
    else:
        found = maps.first_failing(result)
        if found is None:
            return None
        part, case = found
        if not _forked_workers():
            return maps.MemoryMap(result.exercise.name, part, case, deferred=True, note=(
                "without the warm process, recording it would start Python, torch and triton "
                "once more"))
    try:
        memory_map = record_map(result.exercise, result.module_path, part, case,
                                case_seconds=case_seconds, memory_gib=memory_gib)
    except Exception as exc:  # noqa: BLE001 - a map is an extra: it never ends a check
        memory_map = maps.MemoryMap(result.exercise.name, part, case,
                                    note=f"recording it failed ({type(exc).__name__}: {exc})")
    asked = isinstance(wanted, str)
    if memory_map.learner is not None and not memory_map.learner.accesses:
        # Nothing of the learner's touched memory: no picture (the reference's alone would
        # pass for a comparison), only what their code did instead.
        memory_map = maps.MemoryMap(result.exercise.name, part, case,
                                    note=maps.nothing_to_map(memory_map.learner))
    elif not asked and (observed := maps.nothing_to_show(memory_map)):
        # A picture that cannot show where things went wrong costs a screen: a sentence says
        # what was seen instead (--map CASE still draws it).
        memory_map = maps.MemoryMap(result.exercise.name, part, case, note=observed)
    memory_map.asked = asked
    return memory_map


def _forked_workers() -> bool:
    """Whether a worker can be forked from a process that has torch and triton loaded (the
    warm one, or the test suite's), so that one more costs a fraction of a second."""
    return forkserver.enabled() or warm.enabled()


def record_map(exercise, module_path: Path, part: str, case: str,
               reference_path: Path | None = None, case_seconds: float | None = None,
               memory_gib: float | None = None) -> maps.MemoryMap:
    """Run one case of ``module_path`` and of the reference (the exercise's solution unless
    ``reference_path`` is given) in the interpreter, in one worker process, recording both."""
    import json

    from learning.solutions import solution_path

    reference_path = reference_path or solution_path(exercise.name)
    parts = [PartResult(exercise.part(part))]
    run = _WorkerRun(exercise, Path(module_path), parts, True, case_seconds, None, None,
                     memory_gib, {part: [case]})
    run.extra_args = ["--map", json.dumps({"part": part, "case": case,
                                           "reference": str(reference_path)})]
    run.execute()
    memory_map = maps.MemoryMap(exercise.name, part, case,
                                maps.CaseMap.from_data(run.maps.get(maps.LEARNER)),
                                maps.CaseMap.from_data(run.maps.get(maps.REFERENCE)))
    if memory_map.learner is None:
        if run.environment_problem:
            memory_map.note = run.environment_problem
        elif run.import_problem is not None:
            memory_map.note = f"your module could not be imported: {run.import_problem.message}"
        elif run.missing:
            memory_map.note = next(iter(run.missing.values())).message
        else:
            memory_map.note = f"the run that records it stopped: " \
                              f"{run.failure_verdict().summary}"
    elif memory_map.reference is None:
        problem = (run.maps.get(maps.REFERENCE) or {}).get("problem", "")
        memory_map.note = f"the reference could not be recorded{': ' + problem if problem else ''}"
    return memory_map


# ---------------------------------------------------------------------------------------------
# The first named step that differs (learning.grader.first_step): one more worker run.


def first_step_for(result: CheckResult, part_result: PartResult, source: bytes | None,
                   force_interpret: bool = False, case_seconds: float | None = None,
                   memory_gib: float | None = None) -> bool:
    """Record the named steps of a case of the part whose output was wrong (else of one that
    raised), the learner's beside the reference's, and put where they first differ on that
    case's verdict. Nothing runs for a part without declared steps, without a failing
    case, or whose function keeps none of the lesson's names; False then."""
    from learning.grader import first_step, named_steps

    part, steps = part_result.part, part_result.part.steps
    if steps is None or part_result.problem is not None or result.import_problem is not None:
        return False
    # a wrong output (else an error the case did not ask for: the steps before it), the first
    # that ran quickly, else the quickest
    wrong = [c for c in part_result.cases if c.verdict.status == "failed"
             and c.verdict.mismatch_count]
    candidates = wrong or [c for c in part_result.cases if c.verdict.status == "error"
                           and not part.case(c.name).raises]
    failed = next((c for c in candidates if c.verdict.seconds <= STEPS_QUICK_SECONDS),
                  min(candidates, key=lambda c: c.verdict.seconds, default=None))
    if failed is None or not named_steps.uses_names(source, steps.function or part.function,
                                                    steps.names):
        return False
    case = part.case(failed.name)
    # tracing slows the learner's code some times over: a bound of its own, well under a
    # case's, so that a failing check waits seconds for it at most
    floor, ceiling = (STEPS_KERNEL_FLOOR_SECONDS, KERNEL_CASE_SECONDS) if part.needs_kernels \
        else (STEPS_FLOOR_SECONDS, PYTHON_CASE_SECONDS)
    limit = case_seconds or min(max(floor, STEPS_FACTOR * failed.verdict.seconds), ceiling)
    run = _steps_run(result.exercise, result.module_path, part, case,
                     force_interpret or part.needs_kernels, limit, memory_gib)
    _note_repairs(result, run.repairs, result.module_path)
    ours = named_steps.Recording.from_data(run.steps.get(named_steps.REFERENCE))
    theirs = named_steps.Recording.from_data(run.steps.get(named_steps.LEARNER))
    tolerance = case.tolerance or part.tolerance
    args = tuple(a.stored() if isinstance(a, TensorSpec) else a for a in case.make_args())
    try:
        failed.verdict.first_step = first_step.first_difference(
            ours, theirs, steps.names, steps.where, args, tolerance.atol, tolerance.rtol)
    except Exception:  # noqa: BLE001 - an extra: the verdict stands without it
        failed.verdict.first_step = ""
    return True


def _steps_run(exercise, module_path: Path, part, case, interpret: bool, case_seconds,
               memory_gib):
    """The worker run that records one case's named steps (worker --steps): a kernel's in the
    interpreter whatever the machine (a compiled kernel's steps are not Python to trace), a
    Python part's in the check's own mode (the warm process the check used forks it)."""
    from learning.solutions import solution_path

    parts = [PartResult(part)]
    run = _WorkerRun(exercise, Path(module_path), parts, interpret, case_seconds, None, None,
                     memory_gib, {part.name: [case.name]})
    run.extra_args = ["--steps", json.dumps({"part": part.name, "case": case.name,
                                             "reference": str(solution_path(exercise.name)),
                                             "interpret": interpret})]
    try:
        run.execute()
    except Exception:  # noqa: BLE001 - the steps are an extra: they never end a check
        pass
    return run
