"""Turn what a worker's process said into judged case results: each case's verdict, then the
named bugs that the part's other cases rule out.

A case is judged against the float64 reference (``learning.grader.compare``); a bug named on
one case is kept only where the rest of the learner's cases agree with its replay
(``learning.grader.replays``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from learning.grader import compare, replays, stopped
from learning.grader.declarations import Case, Part
from learning.grader.replays import Expected, WrongOutput
from learning.grader.results import CaseResult, PartResult, mark_not_run
from learning.grader.returned import Returned, Skipped
from learning.grader.tensors import TensorSpec
from learning.grader.worker_events import CaseKey
from learning.grader.worker_run import WorkerRun


@dataclass(frozen=True)
class Rerun:
    """A case that faulted on the GPU, run once more in Triton's interpreter: what it did
    there, or why it could not run there."""

    outcome: object = None  # Returned or Raised, when it ran
    unavailable: str = ""  # why it could not run there ("" when it ran)


class Explained(NamedTuple):
    """A wrong output that known bugs' replays explain: the verdict that names them."""

    verdict: compare.Verdict
    output: WrongOutput


def collect(run: WorkerRun, parts: list[PartResult], reruns: dict[CaseKey, Rerun] | None = None):
    """Turn the worker's events for ``parts`` into judged case results; a case in ``reruns``
    is told with what it did in the interpreter."""
    for part_result in parts:
        part = part_result.part
        if part.name in run.heard.missing:
            part_result.problem = run.heard.missing[part.name]
            mark_not_run([part_result], f"{part.function} is missing")
            continue
        if part.name not in run.heard.touched:
            continue
        part_result.cases = []
        passed: list[Expected] = []  # the cases the learner's code passed
        names: dict[int, str] = {}  # id of a passed case's Expected: the case's name
        failed: list[WrongOutput] = []  # those it got wrong, with numbers, no bug explains
        missed: list[Expected] = []  # every case it failed or raised in
        explained: list[Explained] = []  # wrong numbers a bug explains
        for case in part.cases:
            outcome = run.heard.outcomes.get(CaseKey(part.name, case.name))
            verdict, expected = _verdict(run, part, case, outcome, reruns or {})
            part_result.cases.append(CaseResult(case.name, case.purpose, verdict))
            if expected is None or not case.replays:
                continue
            if verdict.status in ("failed", "error"):
                missed.append(expected)
            if verdict.passed:
                passed.append(expected)
                names[id(expected)] = case.name
            elif part.returns != "exact" and verdict.status == "failed" \
                    and verdict.mismatch_count and not verdict.causes:
                # A wrong output no known bug explains: a named bug must not predict another.
                failed.append(WrongOutput(outcome.values, *expected))
            elif part.returns != "exact" and verdict.status == "failed" \
                    and verdict.mismatch_count:
                explained.append(Explained(verdict, WrongOutput(outcome.values, *expected)))
        _drop_contradicted(part_result, passed, failed, missed, names, explained)
        _unwritten_or_added_onto(part_result)
        if not failed and all(c.verdict.status in ("passed", "skipped", "not-run") or
                              any(c.verdict is e.verdict for e in explained)
                              for c in part_result.cases):
            _keep_the_one_explanation(explained)


def _unwritten_or_added_onto(part_result: PartResult) -> None:
    """Where one case shows the kernels adding onto what memory held before (its outputs
    follow the fill), outputs that kept the fill in another case may have had zeros added to
    them, not been left unwritten: their verdict names that cause, not a grid or a mask."""
    if not any(bug.key == "follows-the-fill" for c in part_result.cases
               for bug in c.verdict.causes):
        return
    for case_result in part_result.cases:
        verdict = case_result.verdict
        if verdict.causes and all(bug.key in compare.UNWRITTEN_KEYS for bug in verdict.causes):
            verdict.summary = verdict.summary.replace("never written", "left holding the "
                                                      "check's fill") + \
                " (as outputs no program stored to keep it, and as outputs that only zeros " \
                "were added onto do: other cases show your kernels add onto what memory held)"
            verdict.causes = (compare.COMMON_BUGS["follows-the-fill"],)


def _drop_contradicted(part_result: PartResult, passed: list[Expected],
                       failed: list[WrongOutput], missed: list[Expected],
                       names: dict[int, str] | None = None,
                       explained: list[Explained] = ()):
    """A bug whose replay matched one case is not the learner's if their other cases rule it
    out: their code passed a case the bug would have failed, or returned another wrong output
    than the bug gives. Two mistakes can raise the same error, or agree on one row. A bug
    named on weak evidence alone (an exception's type, an output with no finite value) must also
    explain every failure: it is dropped if the learner failed a case the bug passes.

    A wrong output left with no cause that a bug's replay did give exactly says so among what
    was observed, with the case that rules the bug out (``names``: a passed case's name by the
    id of its Expected): the learner's mistake is not that one, but gives its output here."""
    verdicts = [c.verdict for c in part_result.cases if c.verdict.causes]
    named = {bug.key: bug for v in verdicts for bug in v.causes}
    weak_only = {key for key in named if all(key in v.weak for v in verdicts
                                             if key in {b.key for b in v.causes})}
    wrong = {key for key, bug in named.items() if replays.contradicted(bug, passed, failed)
             or key in weak_only and any(replays.predicts_pass(bug, *case) for case in missed)}
    # a mistake of several forms (one per tile size) matched case by case by different forms
    split = {key for key, bug in named.items() if key not in wrong and replays.no_one_form(
        bug, [e.output for e in explained if any(b.key == key for b in e.verdict.causes)])}
    wrong |= split
    for verdict in verdicts:
        dropped = [b for b in verdict.causes if b.key in wrong and b.key not in weak_only
                   and _replays_a_formula(b.detect)]
        verdict.causes = tuple(b for b in verdict.causes if b.key not in wrong)
        if dropped and not verdict.causes and verdict.status == "failed":
            verdict.observations = (*(_ruled_out(bug, passed, names or {}, bug.key in split)
                                      for bug in dropped), *verdict.observations)


def _replays_a_formula(detect) -> bool:
    """Whether a bug's evidence is the output of a wrong formula run again (``same_as`` or
    forms of it), not a look of the output (rounded to a few places, say: an output whose
    inputs have six decimals has six decimals too, whatever the mistake)."""
    if isinstance(detect, replays.any_of):
        return bool(detect.detects) and all(_replays_a_formula(d) for d in detect.detects)
    return isinstance(detect, replays.same_as)


def _ruled_out(bug, passed: list[Expected], names: dict[int, str], split: bool = False) -> str:
    """What a bug whose replay gives this case's output exactly, ruled out by other cases, is
    said to be: an observation, not a cause. ``split``: ruled out because no one of its forms
    gives every output it matched (``replays.no_one_form``)."""
    mistake = bug.cause.split(":")[0].split(". ")[0]
    if split:
        return (f"this output is exactly what a known mistake gives ({mistake}) in one of its "
                "forms (at one tile size, say), but no one form of it gives your outputs in "
                "every case: yours is another mistake that agrees with it here")
    predicts = [p for p in (getattr(check, "predicts_failure", None)
                            for check in (bug.detect, bug.raises)) if p is not None]
    failing = [names[id(case)] for case in passed
               if id(case) in names and any(p(*case) for p in predicts)]
    # contradicted() rules a bug out either way: a passed case it fails, or another output
    why = (f"your code passed case '{failing[0]}', which that mistake fails" if failing else
           "on another case your code and that mistake are wrong in different ways")
    return (f"this output is exactly what a known mistake gives ({mistake}), but {why}: "
            f"yours is another mistake that agrees with it here")


def _keep_the_one_explanation(explained: list[Explained]) -> None:
    """When one bug explains every wrong output of a part, another bug named beside it on some
    cases is dropped where its replay gives another output than the learner's on one of the
    rest: a result rounded for display can equal a wrong-scale replay where the softmax is
    one-hot, but only rounding explains every case. Called only when every failure of the part
    is a wrong output some bug explains; two real mistakes leave no single explanation."""
    if len(explained) < 2:
        return
    keys = [{b.key for b in e.verdict.causes} for e in explained]
    everywhere = set.intersection(*keys)
    if len(everywhere) != 1:
        return
    beside = {b.key: b for e in explained for b in e.verdict.causes if b.key not in everywhere}
    wrong = {key for key, bug in beside.items()
             if getattr(bug.detect, "explains", None) is not None
             and any(bug.detect.explains(*e.output) is False for e in explained)}
    for e in explained:
        e.verdict.causes = tuple(b for b in e.verdict.causes if b.key not in wrong)


def verdict_of(run: WorkerRun, part: Part, case: Case) -> compare.Verdict:
    """The verdict ``run`` gives ``case`` on its own: no rerun told, no other case weighed."""
    outcome = run.heard.outcomes.get(CaseKey(part.name, case.name))
    return _verdict(run, part, case, outcome, {})[0]


def _may_skip(heard, case: Case) -> bool:
    """Whether the grader itself skips ``case`` in this run: the learner's code runs in the
    process that reports each case, so a report of "skipped" counts only where a skip is due
    (a GPU-only case where kernels run in the interpreter; a bfloat16 case where they are
    compiled, on a GPU that lacks it). The mode, and whether the GPU has bfloat16, are what
    the worker said before the learner's import."""
    interpreted = heard.mode is None or heard.mode.interpret
    if not interpreted and not heard.mode.bfloat16 and any(
            isinstance(a, TensorSpec) and a.dtype == "bfloat16" for a in case.make_args()):
        return True
    return case.gpu_only and interpreted


def _verdict(run: WorkerRun, part: Part, case: Case, outcome,
             reruns: dict[CaseKey, Rerun]) -> tuple[compare.Verdict, Expected | None]:
    """The case's verdict, and what it was judged against, when it was."""
    heard = run.heard
    if outcome is None:
        if heard.current == (part.name, case.name):
            return stopped.failure_verdict(run), None
        if any(o is not None and getattr(o, "not_started", False)
               for (p, _), o in heard.outcomes.items() if p == part.name):
            return compare.Verdict("not-started", "not started"), None
        if heard.abandoned and heard.abandoned.part == part.name:
            return compare.Verdict("not-run", heard.abandoned.why), None
        return compare.Verdict("not-run", "not run: an earlier case stopped the process"), None
    if isinstance(outcome, Skipped):
        if _may_skip(heard, case):
            return compare.Verdict("skipped", outcome.reason), None
        reason = str(outcome.reason)
        return compare.Verdict("not-run", reason if reason.startswith("not run:") else (
            "not run: the process that ran your code reported this case skipped, and only a "
            "GPU-only case without a GPU, or a bfloat16 case on a GPU without bfloat16, is "
            "skipped")), None
    args = tuple(a.stored() if isinstance(a, TensorSpec) else a for a in case.make_args())
    want = reference(part, args)
    expect = {}
    specs = [a for a in case.make_args() if isinstance(a, TensorSpec)]
    expect["filename"] = run.settings.module_path.name
    if specs:
        expect["dtype"] = specs[0].dtype
        expect["device"] = "cpu" if heard.mode is None or heard.mode.interpret else "cuda"
    if isinstance(outcome, Returned) or hasattr(outcome, "not_started"):
        verdict = compare.judge(part, case, outcome, args, want, expect)
        if getattr(outcome, "bfloat16_arithmetic", False) is True:
            _told_as_bfloat16_bits(verdict)
        rerun = reruns.get(CaseKey(part.name, case.name))
        if rerun is not None:
            verdict = _with_rerun(part, case, verdict, rerun, args, want, expect)
        tolerance = case.tolerance or part.tolerance
        return verdict, Expected(args, want, tolerance.atol, tolerance.rtol)
    return compare.Verdict("error", f"unexpected outcome {outcome!r}"), None


BFLOAT16_BITS = (
    "your kernels did arithmetic on bfloat16 values, and Triton's interpreter, which ran them "
    "here, gets that wrong: it keeps a bfloat16 value as its 16 raw bits and adds, multiplies, "
    "exponentiates, sums and compares those bits as whole numbers (tl.dot included; .to() "
    "conversions, loads and stores are right). The values above are the interpreter's, not "
    "what your kernels compute on a GPU, so no cause is read from them. Convert to float32 "
    "after tl.load (x.to(tl.float32)) and back at the store to be graded on this machine: a "
    "float32 accumulator is what a GPU kernel wants anyway")


def _told_as_bfloat16_bits(verdict: compare.Verdict) -> None:
    """A wrong output of kernels that computed on bfloat16 in the interpreter: the values are
    the interpreter's bit arithmetic, so they name no cause and are not described as one."""
    if verdict.status != "failed" or not verdict.mismatch_count:
        return  # passed, or failed for what the call did, not for its numbers
    verdict.interpreter_fault = BFLOAT16_BITS
    verdict.causes, verdict.weak, verdict.observations = (), (), ()


def _with_rerun(part: Part, case: Case, verdict: compare.Verdict, rerun: Rerun, args, want,
                expect: dict) -> compare.Verdict:
    """A GPU fault's verdict, told with what the same case did in the interpreter."""
    fault = verdict.summary.splitlines()[0] if verdict.summary else "the GPU faulted"
    if rerun.unavailable:
        verdict.summary = f"{verdict.summary}; it could not be re-run in Triton's interpreter " \
                          f"to find the line ({rerun.unavailable})"
        return verdict
    outcome = rerun.outcome
    there = compare.judge(part, case, outcome, args, want, dict(expect, device="cpu"))
    if getattr(outcome, "exc_type", "") == "OutOfBoundsAccess":
        there.summary = f"on the GPU: {fault}; re-run in Triton's interpreter, which checks " \
                        f"every address: {there.summary}"
        return there
    done = "it passed" if there.passed else f"{there.summary.splitlines()[0]}"
    verdict.summary = f"{verdict.summary}; re-run in Triton's interpreter: {done}"
    return verdict


def reference(part: Part, args: tuple):
    """The reference's answer to ``args``: exact for an exact part, else float64."""
    if part.returns == "exact":
        return part.reference(*args)
    import numpy as np

    with np.errstate(all="ignore"):
        return np.asarray(part.reference(*args), dtype=np.float64)
