"""The first named step that differs, for a check: the worker run that records a failing
case's named steps, the learner's beside the reference's (``learning.grader.named_steps``), and
where they first part (``learning.grader.first_step``), put on that case's verdict.
"""

from __future__ import annotations

import json

from learning.grader.declarations import Case, Part
from learning.grader.results import CheckResult, PartResult
from learning.grader.tensors import TensorSpec
from learning.grader.worker_run import (
    KERNEL_CASE_SECONDS,
    PYTHON_CASE_SECONDS,
    Settings,
    WorkerRun,
)

# The run takes the first failing case that ran within STEPS_QUICK_SECONDS (else the
# quickest); its limit is STEPS_FACTOR times the case's own time, never below a floor (a
# kernel's: an interpreter run, whatever the case's own time on a GPU was).
STEPS_QUICK_SECONDS = 2.0
STEPS_FACTOR = 10.0
STEPS_FLOOR_SECONDS = 5.0
STEPS_KERNEL_FLOOR_SECONDS = 15.0


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
    # a wrong or unwritten output (else an error the case did not ask for: the steps before
    # it), the first that ran quickly, else the quickest
    wrong = [c for c in part_result.cases if c.verdict.status == "failed"
             and (c.verdict.mismatch_count or c.verdict.unwritten_count)]
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
    settings = Settings(result.exercise, result.module_path,
                        force_interpret or part.needs_kernels, limit, memory_gib=memory_gib)
    run = _steps_run(settings, part, case)
    result.add_note(run.repair_note())
    ours = named_steps.Recording.from_data(run.heard.steps.get(named_steps.REFERENCE))
    if ours is not None and ours.raised and part.needs_kernels:
        from learning.grader import mode

        # a kernel's steps are recorded in Triton's interpreter, on a GPU machine too; where
        # it cannot run the reference, nothing is compared (first_step.first_difference)
        problem = mode.interpreter_problem()
        if problem is not None:
            result.add_note(f"step by step: not shown for {part.function}: {problem}")
    theirs = named_steps.Recording.from_data(run.heard.steps.get(named_steps.LEARNER))
    tolerance = case.tolerance or part.tolerance
    args = tuple(a.stored() if isinstance(a, TensorSpec) else a for a in case.make_args())
    found: dict = {}
    try:
        failed.verdict.first_step = first_step.first_difference(
            ours, theirs, steps.names, steps.where, args, tolerance.atol, tolerance.rtol, found,
            steps.also_right, steps.feeds)
    except Exception:  # noqa: BLE001 - an extra: the verdict stands without it
        failed.verdict.first_step, found = "", {}
    if found:
        _drop_ruled_out(part_result, found["matched"], found["differs"])
    return True


def _drop_ruled_out(part_result: PartResult, matched: tuple[str, ...], differs: str) -> None:
    """Drop, from every case of the part, the named mistakes that the learner's recorded
    steps rule out (``Bug.contradicted_by_steps``): one piece of code ran every case, and a
    rounded output whose rms already differed, or an overflow whose mean square matched, was
    never the learner's mistake, wherever its replay matched."""
    for case in part_result.cases:
        verdict = case.verdict
        kept = tuple(b for b in verdict.causes if not b.contradicted_by_steps(matched, differs))
        if kept != verdict.causes:
            verdict.causes = kept
            verdict.weak = tuple(k for k in verdict.weak if k in {b.key for b in kept})


def _steps_run(settings: Settings, part: Part, case: Case) -> WorkerRun:
    """The worker run that records one case's named steps (worker --steps): a kernel's in the
    interpreter whatever the machine (a compiled kernel's steps are not Python to trace), a
    Python part's in the check's own mode (the warm process the check used forks it)."""
    from learning.exercises import solution_path

    request = {"part": part.name, "case": case.name,
               "reference": str(solution_path(settings.exercise.name)),
               "interpret": settings.force_interpret}
    run = WorkerRun(settings, [part], only={part.name: [case.name]},
                    extra_args=("--steps", json.dumps(request)))
    try:
        run.execute()
    except Exception:  # noqa: BLE001 - the steps are an extra: they never end a check
        pass
    return run
