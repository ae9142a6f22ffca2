"""Run a check's parts in worker processes, one after another, until each has run or cannot.

After a GPU fault the cases after the faulting one run in a fresh process (a faulted CUDA
context can run nothing more, but the learner should see every case), and at the end the
faulted cases run once more in the interpreter, whose bounds checks name the line and lanes. A
process that dies, hangs or gives up in a case ends that part; later parts get a fresh one.
In the interpreter, which runs a launch's programs in one order in a case and in the other in
the next, each kernel part's first failing case runs once more in the other order
(``learning.grader.program_order``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

from learning.grader import childproc, compare, containment, judging, program_order, stopped
from learning.grader.judging import Rerun
from learning.grader.results import CheckResult, PartResult, Timeline, mark_not_run
from learning.grader.worker_events import CaseKey
from learning.grader.worker_run import Settings, WorkerRun

# GPU faults in one check, each costing a fresh process (a fork of the warm one, usually),
# before the rest of the part is left unrun.
MAX_GPU_FAULTS = 24


class LastRun(NamedTuple):
    """The run that judged a part last, and the part's result it filled."""

    run: WorkerRun
    part_result: PartResult


@dataclass(frozen=True)
class Ran:
    """What the processes left besides the results: the learner's output, as it came from
    each, and the kernels the interpreter launched (for the GPU compile check)."""

    output: str
    launches: list
    installed: set = field(default_factory=set)  # installed files the workers loaded


@dataclass
class _Progress:
    """How far a check's parts have got, between one worker process and the next."""

    pending: list[PartResult]  # the parts still to run, in order
    only: dict[str, list[str]] | None = None  # after a GPU fault: the faulted part's cases left
    carried: dict[CaseKey, object] = field(default_factory=dict)  # judged before that fault
    faults: list[CaseKey] = field(default_factory=list)
    latest: dict[str, LastRun] = field(default_factory=dict)  # by part name
    output: list[str] = field(default_factory=list)
    launches: list = field(default_factory=list)
    installed: set = field(default_factory=set)

    def collect(self, run: WorkerRun):
        judging.collect(run, self.pending)
        self.latest.update((p.part.name, LastRun(run, p)) for p in self.pending
                           if p.part.name in run.heard.touched)

    def resume_after(self, fault: CaseKey, run: WorkerRun):
        """The next process runs the faulted part's cases after ``fault``, and the parts after
        it; what this one judged is carried over."""
        self.faults.append(fault)
        faulted = next(p for p in self.pending if p.part.name == fault.part)
        names = [c.name for c in faulted.part.cases]
        self.carried = dict(run.heard.outcomes)
        self.only = {fault.part: names[names.index(fault.case) + 1:]}
        self.pending = self.pending[self.pending.index(faulted):]

    def give_up_on_stopped_part(self, run: WorkerRun):
        """The process died, hung or gave up in a case: the rest of that part cannot be
        trusted to run, but later parts get a fresh process."""
        heard = run.heard
        stopped_in = heard.current.part if heard.current else heard.abandoned.part \
            if heard.abandoned else self.pending[0].part.name
        broken = next(p for p in self.pending if p.part.name == stopped_in)
        self.pending = self.pending[self.pending.index(broken) + 1:]
        self.carried, self.only = {}, None


def run_parts(settings: Settings, result: CheckResult, compiler: childproc.CompileRun | None,
              timeline: Timeline) -> Ran:
    """Run every part of ``result`` that can run, filling its part results and what the
    processes said of the check (its mode, notes, problems, borrowed modules)."""
    progress = _Progress(list(result.parts))
    retried = False
    while progress.pending:
        run = WorkerRun(settings, [p.part for p in progress.pending], compiler=compiler,
                        only=progress.only, carried=progress.carried, timeline=timeline)
        run.execute()
        if run.ended.status_lost and not retried and _filtered():
            # the warm process that forked the worker went away with it, so how the worker
            # ended is unknown: not evidence against the learner's code, which the filter
            # keeps from signalling it. Once, the same parts run again in a fresh process (a
            # second loss is judged as it stands).
            retried = True
            result.add_note("the warm process that ran your code went away during the check, "
                            "and your parts ran again in a fresh process")
            timeline.note("worker: status lost with the warm process; run again")
            continue
        progress.output.append(run.output)
        for note in run.notes:
            result.add_note(note)
        result.add_note(run.repair_note())
        progress.launches += run.heard.launches
        progress.installed.update(run.heard.installed)
        result.borrowed += [name for name in run.heard.borrowed if name not in result.borrowed]
        if run.heard.mode is not None:
            result.mode = run.heard.mode
        if run.heard.environment_problem:
            result.environment_problem = run.heard.environment_problem
            mark_not_run(progress.pending, "not run: " + run.heard.environment_problem)
            break
        problem = stopped.import_problem(run)
        if problem is not None:
            result.import_problem = problem
            mark_not_run(progress.pending, "the module could not be imported")
            break
        progress.collect(run)
        fault = run.heard.gpu_fault()
        if fault is not None and len(progress.faults) < MAX_GPU_FAULTS:
            progress.resume_after(fault, run)
            continue
        if run.heard.finished:
            break
        progress.give_up_on_stopped_part(run)
    if progress.faults:
        faulted = [progress.latest[name].part_result
                   for name in dict.fromkeys(f.part for f in progress.faults)]
        reruns = _rerun_in_interpreter(settings, faulted, progress.faults, result, timeline)
        for part_result in faulted:
            judging.collect(progress.latest[part_result.part.name].run, [part_result], reruns)
    if result.mode is not None and result.mode.interpret:
        _rerun_in_the_other_order(settings, result, timeline)
    return Ran("".join(progress.output), progress.launches, progress.installed)


def _filtered() -> bool:
    """Whether the learner's code runs under the filter that keeps it from signalling the
    grader's processes (the warm one included): Linux, with the guard on, on a machine the
    filter knows. Without it, a module that stopped the warm process would stop the check's
    own process in a fresh run."""
    return containment.available() and containment.machine() in containment._SYSCALLS


# The verdicts a launch's programs run in another order may turn into a pass: a wrong answer,
# an error raised (a bounds check that one program's stale read led to), or a time-out (a
# program waiting for one that, in this order, has not run yet).
ORDER_MAY_EXPLAIN = ("failed", "error", "timed-out")
# A timed-out case runs again in the other order within this many seconds (or the case's own
# limit, if shorter): a kernel that loops for ever in both orders costs this once more, not
# the case's whole limit; the reference takes well under a second for any case.
ORDER_RERUN_SECONDS = 10.0
# The mistakes of any exercise a race's output can look like (what a program stored, and
# where): a verdict naming another (the grader's code changed, torch's answer returned) stands.
RACE_LOOKS_LIKE = frozenset({"unwritten", "out-of-bounds", "grid-too-small", "block-too-small",
                             "off-by-one-mask", "follows-the-fill"})


def _rerun_in_the_other_order(settings: Settings, result: CheckResult, timeline: Timeline):
    """Each kernel part's first failing case, run once more with a launch's programs in the
    other order than the check ran them in: a case that passes then fails for the order
    alone, and its verdict names that cause, replacing any other (a replay that matched the
    racing output matched by chance); ``_judge_in_the_other_order`` says what confirms it."""
    wanted, stuck = {}, {}  # failing cases, and timed-out ones, by part
    for part_result in result.parts:
        if not part_result.part.needs_kernels:
            continue
        first = next((c for c in part_result.cases if c.verdict.status in ORDER_MAY_EXPLAIN),
                     None)
        if first is not None and any(bug.key in compare.COMMON_BUGS and
                                     bug.key not in RACE_LOOKS_LIKE
                                     for bug in first.verdict.causes):
            continue
        if first is not None and not part_result.part.case(first.name).gpu_only:
            into = stuck if first.verdict.status == "timed-out" else wanted
            into[part_result.part.name] = [first.name]
    if stuck:  # in a process of their own, each case within the shorter limit
        limit = min(settings.case_seconds or ORDER_RERUN_SECONDS, ORDER_RERUN_SECONDS)
        _judge_in_the_other_order(dataclasses.replace(settings, case_seconds=limit), result,
                                  stuck, "waits-for-another-program", timeline)
    if wanted:
        _judge_in_the_other_order(settings, result, wanted, "program-order", timeline)


def _judge_in_the_other_order(settings: Settings, result: CheckResult,
                              wanted: dict[str, list[str]], cause: str, timeline: Timeline):
    """Run ``wanted`` (case names by part) in fresh processes: in the other order, then, for
    each that passed, in the check's own order, then in the other order again. A case that
    passes in the other order both times and fails again in its own (as it failed in the
    check) gets ``cause``, in place of any other. The run in the check's own order rules out
    a pass that came from running alone, in a fresh process (a call that fails only the
    second time, state kept between calls); the second run in the other order, most of a
    pass that came by chance (random draws)."""
    parts = {p.part.name: p for p in result.parts if p.part.name in wanted}
    verdicts = {(name, c.name): c.verdict for name, cases in wanted.items()
                for c in parts[name].cases if c.name in cases}
    passed = _passing(settings, parts, wanted, program_order.OPPOSITE, result, timeline)
    if not passed:
        return
    # the control's limit: a few times what the passing run took (a time-out's case would
    # otherwise take the whole limit again to fail the same way)
    slowest = max(seconds for seconds in passed.values())
    limit = max(ORDER_CONTROL_FLOOR_SECONDS, ORDER_CONTROL_FACTOR * slowest)
    control = dataclasses.replace(
        settings, case_seconds=min(settings.case_seconds or limit, limit))
    again = _by_part(passed)
    still = _statuses(control, parts, again, program_order.ALTERNATE, result, timeline)
    failing = {key for key, (status, _) in still.items() if status == verdicts[key].status}
    if not failing:
        return
    confirmed = _passing(settings, parts, _by_part(failing), program_order.OPPOSITE, result,
                         timeline)
    timeline.note(f"program order: {len(confirmed)} case(s) fail in the check's order and "
                  f"pass in the other, twice: {cause}")
    for key in confirmed:
        verdict = verdicts[key]
        verdict.causes, verdict.weak = (compare.COMMON_BUGS[cause],), ()
        # a time-out's usual reasons (a loop that never advances) are ruled out now
        verdict.summary = verdict.summary.split(stopped.USUAL_REASON)[0]


# The check's-order run that confirms an order's verdict may take this many times the seconds
# the passing run took, and at least ORDER_CONTROL_FLOOR_SECONDS.
ORDER_CONTROL_FACTOR = 5.0
ORDER_CONTROL_FLOOR_SECONDS = 2.0


def _by_part(keys) -> dict[str, list[str]]:
    wanted: dict[str, list[str]] = {}
    for part, case in keys:
        wanted.setdefault(part, []).append(case)
    return wanted


def _statuses(settings: Settings, parts: dict, wanted: dict[str, list[str]], order: str,
              result: CheckResult, timeline: Timeline) -> dict[tuple[str, str], tuple[str, float]]:
    """The status and seconds of each wanted case, run in one fresh process in ``order``
    (the learner's output from it is not shown again)."""
    run = WorkerRun(settings, [parts[name].part for name in wanted], only=wanted,
                    timeline=timeline, extra_args=("--program-order", order))
    run.execute()
    result.add_note(run.repair_note())
    found = {}
    for name, cases in wanted.items():
        for case in cases:
            verdict = judging.verdict_of(run, parts[name].part, parts[name].part.case(case))
            found[(name, case)] = (verdict.status, verdict.seconds)
    return found


def _passing(settings: Settings, parts: dict, wanted: dict[str, list[str]], order: str,
             result: CheckResult, timeline: Timeline) -> dict[tuple[str, str], float]:
    """The wanted cases that pass in ``order``, with the seconds each took."""
    found = _statuses(settings, parts, wanted, order, result, timeline)
    return {key: seconds for key, (status, seconds) in found.items() if status == "passed"}


def _rerun_in_interpreter(settings: Settings, parts: list[PartResult], faults: list[CaseKey],
                          result: CheckResult, timeline: Timeline) -> dict[CaseKey, Rerun]:
    """The cases that faulted on the GPU, once more in Triton's interpreter, in one process."""
    reruns, wanted = {}, {}
    for fault in faults:
        case = next(c for p in parts if p.part.name == fault.part for c in p.part.cases
                    if c.name == fault.case)
        if case.gpu_only:
            reruns[fault] = Rerun(unavailable="the case runs only on a GPU")
        else:
            wanted.setdefault(fault.part, []).append(fault.case)
    if not wanted:
        return reruns
    interpreted = dataclasses.replace(settings, force_interpret=True, import_seconds=None)
    run = WorkerRun(interpreted, [p.part for p in parts if p.part.name in wanted], only=wanted,
                    timeline=timeline)
    run.execute()
    result.add_note(run.repair_note())
    for part_name, names in wanted.items():
        for case_name in names:
            key = CaseKey(part_name, case_name)
            outcome = run.heard.outcomes.get(key)
            if run.heard.environment_problem:
                reruns[key] = Rerun(unavailable=run.heard.environment_problem)
            elif outcome is None:
                reruns[key] = Rerun(unavailable="the interpreter run stopped before this case "
                                                "finished")
            else:
                reruns[key] = Rerun(outcome)
    return reruns
