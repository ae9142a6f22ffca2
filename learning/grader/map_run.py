"""A memory map for a check: which case to map, and the worker run that records it, the
learner's kernel beside the reference's (``learning.grader.memory_map``, drawn by
``learning.grader.map_view``).
"""

from __future__ import annotations

import json
from pathlib import Path

from learning.grader import forkserver, stopped, warm
from learning.grader import memory_map as maps
from learning.grader.childproc import GRADER_FAILED_STATUS
from learning.grader.results import CheckResult
from learning.grader.worker_run import Settings, WorkerRun


def map_for_check(result: CheckResult, wanted: bool | str, case_seconds: float | None = None,
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
    if memory_map.learner is not None:
        accesses = memory_map.learner.accesses
        _unmasked_seen(result, part, case, memory_map.learner.stopped,
                       accesses[-1].line if accesses else 0)
    asked = isinstance(wanted, str)
    if memory_map.learner is not None and not memory_map.learner.accesses:
        # Nothing of the learner's touched memory: no picture (the reference's alone would
        # pass for a comparison), only what their code did instead.
        memory_map = maps.MemoryMap(result.exercise.name, part, case,
                                    note=maps.nothing_to_map(memory_map.learner))
    elif not asked and memory_map.learner is not None and not memory_map.learner.stopped \
            and _stopped_in_the_check(result, part, case):
        # The check's run of the case stopped (an error, a crash) and this one ran to its end:
        # code that behaves differently from run to run. A map of this run, or a sentence
        # about it, would describe a run that is not the graded one.
        memory_map = maps.MemoryMap(result.exercise.name, part, case, note=(
            "run again to record it, your code ran to its end, where in the check it stopped: "
            "a map of that other run would not show what went wrong in this one"))
    elif not asked and (observed := maps.nothing_to_show(memory_map)):
        # A picture that cannot show where things went wrong costs a screen: a sentence says
        # what was seen instead (--map CASE still draws it).
        memory_map = maps.MemoryMap(result.exercise.name, part, case, note=observed)
    memory_map.asked = asked
    return memory_map


def _stopped_in_the_check(result: CheckResult, part: str, case: str) -> bool:
    """Whether the case's verdict in the check is an error or a crash (the code stopped)."""
    for part_result in result.parts:
        for case_result in part_result.cases if part_result.part.name == part else ():
            if case_result.name == case:
                return case_result.verdict.status in ("error", "crashed")
    return False


def _unmasked_seen(result: CheckResult, part: str, case: str, stopped: str,
                   line: int = 0) -> None:
    """The map's run in the interpreter stopped on an access with no mask, whose lanes ran
    past the end of its tensor: where the case's own verdict could only say out-of-bounds (a
    compiled run's stores into the guard bands, which cannot show a mask), it now says that,
    at ``line`` of the kernel (the refused access's), which that verdict does not show."""
    from learning.grader import compare

    named = compare.unmasked_cause(stopped, line)
    if named is None:
        return
    for part_result in result.parts:
        if part_result.part.name != part:
            continue
        for case_result in part_result.cases:
            verdict = case_result.verdict
            if case_result.name == case and [b.key for b in verdict.causes] == \
                    ["out-of-bounds"]:
                verdict.causes = (named,)


def _forked_workers() -> bool:
    """Whether a worker can be forked from a process that has torch and triton loaded (the
    warm one, or the test suite's), so that one more costs a fraction of a second."""
    return forkserver.enabled() or warm.enabled()


def record_map(exercise, module_path: Path, part: str, case: str,
               reference_path: Path | None = None, case_seconds: float | None = None,
               memory_gib: float | None = None) -> maps.MemoryMap:
    """Run one case of ``module_path`` and of the reference (the exercise's solution unless
    ``reference_path`` is given) in the interpreter, in one worker process, recording both."""
    from learning.exercises import solution_path

    reference_path = reference_path or solution_path(exercise.name)
    settings = Settings(exercise, Path(module_path), True, case_seconds, memory_gib=memory_gib)
    request = {"part": part, "case": case, "reference": str(reference_path)}
    run = WorkerRun(settings, [exercise.part(part)], only={part: [case]},
                    extra_args=("--map", json.dumps(request)))
    run.execute()
    heard = run.heard
    memory_map = maps.MemoryMap(exercise.name, part, case,
                                maps.CaseMap.from_data(heard.maps.get(maps.LEARNER)),
                                maps.CaseMap.from_data(heard.maps.get(maps.REFERENCE)))
    if memory_map.learner is None:
        if heard.environment_problem:
            memory_map.note = heard.environment_problem
        elif heard.import_problem is not None:
            memory_map.note = f"your module could not be imported: " \
                              f"{heard.import_problem.message}"
        elif heard.missing:
            memory_map.note = next(iter(heard.missing.values())).message
        elif run.ended.returncode == GRADER_FAILED_STATUS:
            # no output is shown with a map: the error's own last line, to report
            memory_map.note = "the grader's own code failed while recording it (" + \
                (_last_line(run.output) or "no message") + "), which says nothing about " \
                "your code: please report it with this line"
        else:
            memory_map.note = f"the run that records it stopped: " \
                              f"{stopped.failure_verdict(run).summary}"
    elif memory_map.reference is None:
        problem = (heard.maps.get(maps.REFERENCE) or {}).get("problem", "")
        memory_map.note = f"the reference could not be recorded{': ' + problem if problem else ''}"
    return memory_map


def _last_line(output: str) -> str:
    """The last line of a process's output that is not blank, cut to 200 characters."""
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""
