"""Judge one case: what the learner's code returned against the float64 reference.

Runs in the grader's process only. The order of the questions is the order a person would ask
them: did it return at all, the right kind of thing, the right shape, leave its input alone,
write every element, and only then are the numbers right, and if not, which known bug's replay
gives exactly them (learning.grader.replays). Without such evidence no cause is named: what
differs is described instead (learning.grader.observe), and an exception is explained by what its
words mean (learning.grader.errors).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from learning.grader import errors, lineage, observe
from learning.grader.declarations import Bug, Case, Part
from learning.grader.numbers import (  # noqa: F401
    DECIMALS,
    close,
    counted,
    decimals_to_tell_apart,
    format_value,
    format_values,
    verb,
)
from learning.grader.returned import Raised, Returned

MAX_MISMATCHES_SHOWN = 5

# Mistakes any exercise can make, whatever it computes.
COMMON_BUGS = {
    bug.key: bug
    for bug in (
        Bug("returned-none", "the function returned None: is the return statement missing?"),
        Bug("returned-generator",
            "the function returned a generator: build a list with [...] instead of (...)"),
        Bug("returned-tuple", "the function returned a tuple: return a list"),
        Bug("wrong-type", "the function returned the wrong kind of object"),
        Bug("wrong-length", "the output has a different number of values than the input: "
            "every input needs exactly one output"),
        Bug("extra-list", "the result is wrapped in one list too many: return the list itself "
            "(return result), not a list holding it (return [result])"),
        Bug("nested-differently", "the output is nested differently from the expected list: "
            "compare its shape with the expected one"),
        Bug("wrong-shape", "the output's shape differs from the input's: allocate it like the "
            "input (torch.empty_like(x))"),
        Bug("wrong-dtype", "the output's dtype differs from the input's: store results in the "
            "input's dtype (torch.empty_like(x) and a store of the FP32 result)"),
        Bug("wrong-device", "the output lives on another device than the input"),
        Bug("float-for-int", "a whole number came back as a float where the answer is an int "
            "(a count): keep it an int. A division with / gives a float even when it divides "
            "exactly, and so does a product with a float such as 1.0; // and int() keep an int"),
        Bug("mutated-input", "the function changed its input: write results into a new "
            "list or tensor and leave the argument as it was"),
        Bug("input-autograd", "the caller's own tensor now tracks gradients: requires_grad_() "
            "on an argument changes it for the caller, and backward() leaves a .grad on it that "
            "the next call adds to. Work on a copy: x.detach().clone().requires_grad_()"),
        Bug("aliases-input", "the function returned its input (or a view of it): allocate a "
            "new output"),
        Bug("output-uncompared", "the output is a view of a memory far larger than any case "
            "needs (gigabytes), which the check cannot keep to compare: allocate the output "
            "with its own size (torch.empty_like(x))"),
        Bug("output-reused", "the function hands out the same output memory call after "
            "call (a buffer kept between calls, say): the next call overwrites the tensor the "
            "caller was given. Allocate each call's output afresh (torch.empty_like(x)); the "
            "allocator makes that cheap"),
        Bug("returned-transposed", "the tensor returned is a transposed view of one with the "
            "expected shape (its strides say so): the output was allocated the right way round "
            "and turned before the return (.T, .t(), .transpose or .permute). Return it as the "
            "kernel stored it"),
        Bug("unwritten", "some outputs were never written: no program stored to them. Look at "
            "the store's offsets and mask, at how many programs the grid launches, and, in a "
            "kernel that loops over the row, at the loop's bounds"),
        Bug("grid-too-small", "whole rows were never written: no program stored them. It "
            "comes from one of: a grid of fewer programs than rows (one per row is grid = "
            "(n_rows,)); programs that stored to other rows (a row index from another axis, or "
            "a store without the row's offset); or a mask that hides every lane of the later "
            "rows (built from the address's offsets, row * row_stride + column, where it must "
            "compare the column alone with n_cols)"),
        Bug("block-too-small", "the end of each row was never written: no lane stored there. "
            "Either BLOCK is narrower than the row (it must be triton.next_power_of_2(n_cols), "
            "or the kernel must loop over the row), or the store's offsets or mask stop short"),
        Bug("off-by-one-mask", "the last column was never written: the store stops one short, "
            "usually a mask that is off by one (keep the lanes with offsets < n_cols)"),
        Bug("out-of-bounds", "a load or store reached outside the tensors; which part of "
            "the address was wrong, the check cannot tell. It comes from one of: a lane that "
            "should be masked and was not (every lane at or past n_cols, in each load and "
            "store); an offset for data that does not exist (a row past the last one: row r "
            "starts at r * row_stride, and the grid launches one program per row); or an "
            "address built with the wrong stride, or into a tensor allocated too small"),
        Bug("program-order", "with each launch's programs run in one order (first to last, "
            "or last to first) this case fails, and in the other it passes. So one program "
            "reads what another program of the same launch stores (or two store to one "
            "place), and the answer depends on which runs first: on a GPU a launch's programs "
            "run at once, in no order the kernel can count on, and this is a race. Give each "
            "program everything it needs to compute its own outputs, or hand values between "
            "programs through a second launch (or an atomic operation)"),
        Bug("programs-share-memory", "one program of a launch reads memory that another "
            "program of the same launch stores (or stores where another reads), and nothing in "
            "the launch orders the two: on a GPU a launch's programs run at once, in no order "
            "the kernel can count on, so what is read depends on which gets there first (two "
            "programs adding into one sum with a load and a store lose one of the additions). "
            "Give each program everything it needs to compute its own outputs, or hand values "
            "between programs through a second launch (or an atomic operation)"),
        Bug("lanes-share-memory", "a lane of a program reads what another lane of the same "
            "program stored, with no tl.debug_barrier() between: on a GPU a program's lanes "
            "are threads that run at once, so the reading one may get there before the store "
            "(the interpreter runs a block's lanes together, in order). Have each lane read "
            "back only what it stored itself, or put tl.debug_barrier() between the store and "
            "the load"),
        Bug("waits-for-another-program", "with each launch's programs run in one order (first "
            "to last, or last to first) this case never finished, and in the other it passes. "
            "So a program waits in a loop for another program of the same launch to store "
            "something, and in the order that hung, that program had not run yet. On a GPU "
            "nothing promises that a launch's programs run together or in any order: the "
            "program waited for may not start until the waiting one ends, and then neither "
            "ends. Hand values between programs through a second launch, or give each program "
            "everything it needs to compute its own outputs"),
        Bug("follows-the-fill", "your code reads memory before anything stored there, or adds "
            "onto it: an atomic add into an output made with torch.empty, an `out += ...`, a "
            "buffer loaded before a program stored it. torch.empty leaves a tensor's memory "
            "as it was (the check fills it with NaN to show this): start an accumulator from "
            "torch.zeros, or store the value instead of adding it"),
        Bug("no-kernel", "the call launched no Triton kernel: this part grades a kernel of "
            "yours, so its result must come from a launch (kernel[grid](...)), not from torch "
            "or Python alone"),
        Bug("changed-after-kernel", "the values returned are not those your kernel stored: "
            "after its last launch, code outside the kernel changed the output (a torch "
            "operation on it, a copy into it). This part grades what the kernel computes: "
            "leave its output as the kernel stored it"),
        Bug("grader-changed", "your code changed the grader's own code in its process (the "
            "launch counter, the hooks on Triton's launches, Triton's interpreter, or the "
            "triton.language, numpy and math functions the interpreter computes a kernel's "
            "values with): a kernel part is judged by what that code counts and computes, so "
            "the result cannot be. Leave those modules alone"),
        Bug("hook-left", "your code set a profile or trace hook (sys.setprofile, sys.settrace, "
            "sys.monitoring) or a garbage collector's callback, or replaced one of Python's "
            "builtins (builtins.len = ...), and left it so as it returned (or as the module "
            "was imported): such a hook or builtin runs inside the grader's own code after "
            "yours, and can change what it reports. The grader put it back; remove it from "
            "your code"),
        Bug("result-kept", "called again with the same inputs, your function returned "
            "without a kernel launch the grader could count, which is what a result kept "
            "from an earlier call and handed back does: a kernel part grades what its "
            "kernels compute, every call, so launch one (kernel[grid](...)) in each"),
        Bug("pointer-unseen", "a kernel launch was given, as a pointer, an object that is no "
            "torch tensor and wraps none the grader could find: what that memory holds, and "
            "who computed it, cannot be followed. Pass the torch tensors themselves"),
        Bug("thread-beside-kernel", "a thread your code started ran beside the kernel: "
            "another thread can write the output while the kernel runs (or waits), and the "
            "grader sees only what the calling thread does. This part grades what your "
            "kernel computes: launch it from the calling thread, and start no threads"),
        Bug("answer-fed", "your code gave a kernel values that code outside it computed: a "
            "torch function that does this part's work (torch.softmax or torch.exp for a "
            "softmax, a @ b for a product), or numpy, or plain Python, changed or not. This "
            "part grades what your kernel computes: give it the inputs, and compute the answer "
            "in the kernel"),
        Bug("pre-run-hook", "a pre-run hook on your kernel ran inside its launch: code that "
            "is not the kernel, whose writes cannot be told from the kernel's stores. This "
            "part grades what your kernel computes: remove the hook (add_pre_run_hook)"),
        Bug("changed-between-launches", "between two launches, code the grader cannot see "
            "(numpy writing through a tensor's view, another thread or process) changed a "
            "memory a kernel had been given. This part grades what your kernels compute: "
            "change kernel memory only with kernels or torch operations"),
        Bug("not-plain-python", "this part is the lesson's derivation in plain Python (lists, "
            "loops and the math module), so that every step is yours: write it without torch, "
            "numpy or triton, which belong to the module's Triton part"),
        Bug("computed-by-torch", "the tensor returned was computed by torch during the call, "
            "not stored by a kernel of yours: no launch was given its memory, nor the memory "
            "it was copied from. This part grades what your kernel computes: return the "
            "tensor the kernel stores into"),
        Bug("passed-through", "the tensor returned holds values that torch (or code outside "
            "torch: numpy, plain Python) computed during the call and gave to a kernel, and "
            "changing them before the launch changes the result: the kernel passed them on "
            "instead of computing them. This part grades what your kernel computes: compute "
            "the answer in the kernel"),
        Bug("not-from-kernels", "the tensor returned does not come from your kernels: "
            "no launch was given its memory, no torch function the check saw made it (values "
            "computed outside torch, by numpy say, and wrapped), and changing what each launch "
            "stored, just after it, leaves it the same (or leaves values in it that are none of "
            "what the kernels' memories then hold: an answer made elsewhere, combined with "
            "what the kernels stored). "
            "This part grades what your kernel computes: return the tensor the kernel stores "
            "into"),
        Bug("inputs-unread", "your kernels were given values computed from the inputs "
            "before they ran (by torch under whatever name, numpy or plain Python), and what "
            "they returned follows none of the inputs' own values: the part's work was done "
            "outside them. This part "
            "grades what your kernel computes: give it the inputs (a copy, a cast or a padded "
            "copy of them is fine), and compute the answer in the kernel"),
        Bug("written-by-torch", "the tensor returned holds what torch computed, written "
            "into the memory a kernel was given (by copy_ or an in-place operation between "
            "launches), and changing what each launch stored, just after it, leaves it the "
            "same (a launch after torch's write stored nothing of its own there), or leaves "
            "values in it that are none of what the kernels' memories then hold (torch's, "
            "beside or combined with what the kernels stored). This part grades what your "
            "kernel computes: let the kernel store the answer"),
        Bug("exited", "the code ended the program (sys.exit, exit or os._exit): a function "
            "must return its result, never end the program"),
        Bug("missing-error", "the call returned a result for arguments it must refuse: check "
            "them first and raise the error the docstring names, with the numbers"),
    )
}


@dataclass
class Mismatch:
    index: tuple[int, ...]
    want: float
    got: float
    piece: str = ""  # the named result the element belongs to (Part.pieces), with its index


@dataclass
class Verdict:
    """The judgement of one case. ``status`` is one of STATUSES."""

    status: str
    summary: str = ""
    # Known mistakes the evidence shows: a replay that reproduces the output (or the error), or
    # what happened itself (an unwritten tail, a changed input). Empty when nothing is known.
    causes: tuple[Bug, ...] = ()
    # Causes whose only evidence here is weak: the same exception type as their replay's, or
    # an output with no finite value (only NaN or infinities), which many mistakes give alike.
    weak: tuple[str, ...] = ()
    meaning: str = ""  # what the raised exception means (learning.grader.errors), when known
    meaning_key: str = ""
    where: str = ""  # the learner's line that raised, "softmax.py, line 18 (f): code"
    observations: tuple[str, ...] = ()  # what differs, described from the data
    # the first of the lesson's named steps whose value differs from the reference's, in
    # words (learning.grader.first_step); "" when it was not recorded or cannot be said
    first_step: str = ""
    # why the values cannot be read for a cause, where the interpreter computed them wrongly
    # (bfloat16 arithmetic, done on raw bits); "" otherwise
    interpreter_fault: str = ""
    expected: str = ""
    got: str = ""
    mismatches: list[Mismatch] = field(default_factory=list)
    mismatch_count: int = 0
    unwritten_count: int = 0  # outputs no program stored (a verdict on unwritten elements)
    size: int = 0  # elements in the output, so a renderer knows whether "got" showed them all
    decimals: int = DECIMALS  # what the values are printed with (more where 9 hide a difference)
    traceback: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def bug(self) -> Bug | None:
        """The first known cause, or None."""
        return self.causes[0] if self.causes else None


STATUSES = ("passed", "failed", "error", "not-started", "skipped", "not-run", "timed-out",
            "crashed")


def _describe_expected(want, part: Part, decimals: int = DECIMALS) -> str:
    if part.returns == "tensor":
        return f"tensor of shape {tuple(want.shape)}: {format_values(want, decimals=decimals)}"
    return format_values(want, decimals=decimals)


def judge(part: Part, case: Case, outcome, args: tuple, want, expect: dict) -> Verdict:
    """Judge ``outcome`` (Returned or Raised) against ``want``, the reference's float64 output.

    ``args`` are the case's arguments as the reference saw them; ``expect`` carries what the
    output's metadata must be: ``dtype`` and ``device`` for tensors.
    """
    if case.raises:
        return _own_words(part, _judge_refusal(part, case, outcome, args,
                                               expect.get("filename", "")))
    if isinstance(outcome, Raised):
        return _own_words(part, _judge_raised(part, outcome, args, expect.get("filename", "")))
    if part.plain_python and getattr(outcome, "libraries_used", ""):
        used = outcome.libraries_used  # a function's name, or "numpy.float64 values"
        verdict = _fail("not-plain-python", f"{part.function} returned {used}"
                        if used.endswith(" values") else f"{part.function} called {used}")
        verdict.seconds = outcome.seconds
        return _own_words(part, verdict)
    if part.returns == "exact":
        verdict = _judge_exact(outcome, want, part)
        if not verdict.passed and not verdict.causes:
            got = outcome.raw if outcome.raw is not None else outcome.note
            verdict.causes = _recognise(part, case, got, args, want)
            verdict.observations = _observed(observe.describe_exact, got, want)
        verdict.seconds = outcome.seconds
        return verdict
    verdict = _judge_structure(part, outcome, want, expect)
    if verdict is not None and verdict.bug is not None and verdict.bug.key in UNWRITTEN_KEYS:
        _check_what_was_written(verdict, outcome, want, case.tolerance or part.tolerance)
        # A known bug's exact signature (unwritten elements included) names it better than
        # the generic pattern of what was left unwritten. Where nothing at all was written,
        # the output is the check's own NaN fill, which a replay that computes NaN everywhere
        # matches without being the learner's mistake: only a bug that writes nothing counts.
        known = _recognise(part, case, outcome.values, args, want)
        if not _wrote_any(outcome):
            known = tuple(bug for bug in known if bug.leaves_unwritten)
        verdict.causes = known or verdict.causes
    if verdict is None:
        verdict = _judge_values(part, case, outcome, args, want)
    verdict.seconds = outcome.seconds
    if not verdict.passed and not verdict.expected:
        verdict.expected = _describe_expected(want, part, verdict.decimals)
    return _own_words(part, verdict)


UNWRITTEN_KEYS = ("unwritten", "grid-too-small", "block-too-small", "off-by-one-mask")


def _check_what_was_written(verdict: Verdict, outcome, want, tolerance) -> None:
    """Whole rows never written name the grid only where every element that was written is
    right: a store to the wrong address (another tensor's row stride, a wrong row offset)
    leaves rows unwritten too, and writes wrong values where it does store, while a program
    that never ran changes no other row. (The end of each row left unwritten is another
    matter: a block or mask that stops short also leaves the row's reductions short, so wrong
    values there tell nothing apart.)"""
    import numpy as np

    if verdict.bug.key != "grid-too-small" or outcome.unwritten is None:
        return
    values = np.asarray(outcome.values, dtype=np.float64)
    written = ~np.asarray(outcome.unwritten, dtype=bool)
    if values.shape != np.shape(want) or values.shape != written.shape:
        return
    wrong = written & ~close(values, want, tolerance.atol, tolerance.rtol)
    count = int(wrong.sum())
    if not count:
        return
    verdict.summary += f"; and {count} of the {int(written.sum())} elements written " \
                       f"{verb(count, 'differs', 'differ')} from the reference"
    verdict.causes = (COMMON_BUGS["unwritten"],)


def _wrote_any(outcome) -> bool:
    """Whether the learner's code wrote at least one output element."""
    import numpy as np

    unwritten = getattr(outcome, "unwritten", None)
    return unwritten is None or not bool(np.all(unwritten))


def _own_words(part: Part, verdict: Verdict) -> Verdict:
    """A part may restate a common bug's cause for its own shapes (a vector has no rows)."""
    verdict.causes = tuple(
        next((b for b in part.bugs if b.key == bug.key), bug)
        if bug is COMMON_BUGS.get(bug.key) else bug for bug in verdict.causes)
    return verdict


def _judge_raised(part: Part, raised: Raised, args: tuple, filename: str) -> Verdict:
    """An exception: what it was, the learner's line, what it means, and the known mistakes
    whose replay raises the same exception on these arguments."""
    if raised.not_started:
        return Verdict("not-started", f"{part.function} still raises NotImplementedError",
                       seconds=raised.seconds)
    where = errors.learner_line(raised.traceback, filename) if filename else ""
    common = {"SystemExit": "exited", "OutOfBoundsAccess": "out-of-bounds",
              "CudaFault": "out-of-bounds"}
    if raised.exc_type in common:
        summary = "the code called sys.exit()" if raised.exc_type == "SystemExit" \
            else raised.message
        specific = tuple(b for b in part.bugs if _worded(b, summary))
        general = unmasked_cause(summary) or COMMON_BUGS[common[raised.exc_type]]
        return Verdict("error", summary, causes=specific + (general,),
                       where=where, traceback=raised.traceback, seconds=raised.seconds)
    summary = f"raised {raised.exc_type}: {raised.message}"
    worded = tuple(b for b in part.bugs if _worded(b, summary))
    replayed = tuple(b for b in part.bugs if b not in worded and b.raises is not None
                     and b.raises(raised.exc_type, args))
    explained = errors.explain(raised.exc_type, raised.message)
    key, meaning = explained if explained else ("", "")
    return Verdict("error", summary, causes=worded + replayed,
                   weak=tuple(b.key for b in replayed), meaning=meaning, meaning_key=key,
                   where=where, traceback=raised.traceback, seconds=raised.seconds)


def unmasked_cause(summary: str, line: int = 0) -> Bug | None:
    """The out-of-bounds cause where the interpreter saw its evidence: the access had no mask,
    and its lanes ran from inside the tensor on past the end (``line``: the kernel's line, for
    a verdict that does not show it). With more lanes than the tensor has elements, no offsets
    could have kept the block inside: the mask is missing. With fewer, the block may also start
    too far along. Still the out-of-bounds mistake, said for what it is; None for any other
    out-of-bounds access."""
    from learning.grader.sanitizer import MORE_LANES, RUNS_PAST_THE_END

    found = re.search(r"the (load|store) " + re.escape(RUNS_PAST_THE_END) +
                      f"({re.escape(MORE_LANES)})?", summary)
    if found is None:
        return None
    kind, wider = found.group(1), found.group(2)
    at = f"at line {line} of your kernel" if line else "on that line"
    lanes = (f"the {kind} {at} has no mask, so every lane of its block "
             f"{'reads' if kind == 'load' else 'writes'}")
    masking = ("A load or store whose block can be longer than the data needs a mask that "
               "keeps the lanes inside it (mask = offsets < n, from the same offsets as the "
               "address)") + (", and a load whose padding enters a sum or a maximum an other= "
                              "that leaves it unchanged" if kind == "load" else "")
    if wider:
        return Bug("out-of-bounds", f"{lanes}, and its block has more lanes than the tensor "
                   f"has elements, so the lanes past the data's last element reach beyond it. "
                   f"{masking}")
    return Bug("out-of-bounds", f"{lanes}, and they ran from inside the tensor on past its "
               "end. It comes from one of: a block that reaches past the data it covers, "
               "whose lanes there need a mask; or offsets that start too far along (a row "
               "offset or stride too large). " + masking)


def _worded(bug: Bug, summary: str) -> bool:
    """Whether an error's words are this bug's evidence: its pattern occurs in them."""
    return bool(bug.error) and re.search(bug.error, summary) is not None


def _judge_refusal(part: Part, case: Case, outcome, args: tuple, filename: str) -> Verdict:
    """A case whose arguments the function must refuse with ``case.raises``."""
    if isinstance(outcome, Raised):
        if outcome.not_started or outcome.exc_type == case.raises:
            verdict = _judge_raised(part, outcome, args, filename) if outcome.not_started \
                else Verdict("passed")
            verdict.seconds = outcome.seconds
            return verdict
        verdict = _judge_raised(part, outcome, args, filename)
        verdict.summary += f" (this case expects {case.raises})"
        return verdict
    what = outcome.type_name if outcome.shape is None or outcome.type_name == "NoneType" \
        else f"{outcome.type_name} of shape {outcome.shape}"
    verdict = _fail("missing-error", f"returned a {what} instead of raising {case.raises}")
    verdict.expected = case.raises
    verdict.seconds = outcome.seconds
    return verdict


def _fail(key: str, summary: str, got: str = "") -> Verdict:
    return Verdict("failed", summary, causes=(COMMON_BUGS[key],), got=got)


def _judge_structure(part: Part, returned: Returned, want, expect: dict) -> Verdict | None:
    """The checks that come before the numbers; None when all of them pass."""
    shape_check = {"tensor": _tensor_shape, "list": _list_shape}
    verdict = shape_check[part.returns](returned, want, expect)
    if verdict is not None:
        return verdict
    # first: changed, nothing the grader's code in that process found can be believed, an
    # input changed by the call included
    if part.needs_kernels and returned.grader_changed:
        changed = returned.grader_changed
        return _fail("grader-changed", f"the grader's own code in the process that ran yours "
                     f"had changed by the end of the call ({', '.join(changed[:3])}"
                     f"{f' and {len(changed) - 3} more' if len(changed) > 3 else ''}), and "
                     "it compares the inputs before and after the call, counts the kernel "
                     "launches, notes what torch computed or (in the "
                     "interpreter) computes the kernel's values: the result cannot be judged "
                     "as a kernel's")
    if returned.input_mutated:
        return _fail("mutated-input", _mutated(part, returned))
    if getattr(returned, "changed_before_launch", ()):
        which = ", ".join(str(p) for p in returned.changed_before_launch)
        return _fail("mutated-input", f"the call changed its input (argument {which}) while "
                     "it ran: at a kernel launch it held other values than the caller gave, and "
                     "by the end the caller's again. A kernel must read the inputs as they were "
                     "given and leave them so")
    if returned.input_autograd_changed:
        return _fail("input-autograd", "the call changed its input's autograd state: "
                     "requires_grad set, or a .grad left on it")
    if returned.guard_damage:
        damage = returned.guard_damage
        return _fail("out-of-bounds", f"{counted(damage, 'element')} "
                     f"{verb(damage, 'was', 'were')} written just "
                     "outside a tensor allocated during the call (into its guard bands)")
    if returned.aliases_input:
        return _fail("aliases-input", "the output shares memory with the input")
    if getattr(returned, "hooks_left", ""):
        return _fail("hook-left", f"when your code returned, {returned.hooks_left} held a hook "
                     "or a replacement it had set, which the grader's own code would have run "
                     "through: the result cannot be judged")
    if part.needs_kernels and getattr(returned, "pointer_unseen", ""):
        return _fail("pointer-unseen", f"a kernel launch was given a {returned.pointer_unseen} "
                     "as a pointer: no torch tensor, and no memory the grader could find")
    if part.needs_kernels and getattr(returned, "repeat_launched_nothing", False):
        return _fail("result-kept", "the grader called your function again with the same "
                     "inputs, and that call returned without launching any kernel, though "
                     "the first one launched: its result was not computed in that call")
    if part.needs_kernels and returned.reused_by_next_call:
        return _fail("output-reused", f"{returned.reused_by_next_call}: a caller keeping this "
                     "result sees it change")
    if part.needs_kernels and getattr(returned, "races", ()):
        from learning.grader.program_order import LANE_RACE

        race = returned.races[0]
        if race.startswith(LANE_RACE):
            return _fail("lanes-share-memory", race)
        return _fail("programs-share-memory", f"{race}: run one after another "
                     "here, the programs may have given the right values, but on a GPU they run "
                     "at once")
    if part.needs_kernels and returned.other_threads:
        return _fail("thread-beside-kernel", f"{returned.other_threads} thread(s) your code "
                     "started were running as a kernel was launched (or as the call "
                     "returned): what they wrote cannot be told from what the kernel stored")
    if part.needs_kernels and returned.pre_run_hooks:
        return _fail("pre-run-hook", f"{returned.pre_run_hooks} was launched with pre-run "
                     "hooks (add_pre_run_hook): code Triton runs inside the launch, before the "
                     "kernel, whose writes cannot be told from what the kernel stored")
    if part.needs_kernels and returned.unseen_between:
        return _fail("changed-between-launches", "a memory one launch left was changed "
                     "before the next launch by code no torch function the check saw ran "
                     "(numpy through a tensor's view, another thread or process): what the "
                     "later launch passed on is not what a kernel computed")
    if part.needs_kernels and returned.kernel_launches == 0 and getattr(want, "size", 0):
        return _fail("no-kernel", f"{part.function} returned without launching a kernel")
    if part.needs_kernels and returned.computed_by_torch:
        return _fail("computed-by-torch", _computed_by_torch(returned.computed_by_torch))
    if part.needs_kernels and returned.passed_through:
        return _fail("passed-through", _passed_through(returned.passed_through))
    then = "raised instead of returning values that follow them" \
        if getattr(returned, "evidence_raised", False) else "returned the same values"
    beyond = getattr(returned, "beyond_stores", 0)
    if beyond:
        then = (f"returned {counted(beyond, 'value')} that {verb(beyond, 'is', 'are')} none of "
                "those the tensors the launches were given then held: the answer was computed "
                "elsewhere and what the kernels stored combined with it")
    if part.needs_kernels and returned.ignores_kernels and returned.written_by_torch:
        return _fail("written-by-torch", f"what {_torchs(returned.written_by_torch)} computed "
                     "was written into the memory of the tensor returned, a memory a kernel "
                     "launch was given; run "
                     f"again with what each launch stored changed just after it, the call {then}:"
                     " the result is not what a kernel stored")
    if part.needs_kernels and returned.ignores_kernels:
        return _fail("not-from-kernels", "the tensor returned is memory no kernel launch was "
                     "given and no torch function the check saw made; run again with what "
                     f"each launch stored changed just after it, the call {then}")
    if part.needs_kernels and returned.changed_after_launch:
        which = ", ".join(str(p) for p in returned.changed_after_launch)
        where = "the returned tensor" if returned.type_name == "Tensor" else \
            f"the returned tensor(s) at position {which}"
        return _fail("changed-after-kernel", f"{where} changed after the last kernel launch "
                     "that was given its memory: its values are not what the kernel stored")
    if part.needs_kernels and getattr(returned, "uncompared", ()):
        return _fail("output-uncompared", "the returned tensor lies in a memory a kernel "
                     "launch was given that is too large for the check to compare with what "
                     "the kernel left there (calls.LARGEST_DIGESTED_BYTES): what the kernel "
                     "stored cannot be told from what other code wrote after it")
    if part.needs_kernels and returned.answer_fed == "outside torch":
        return _fail("answer-fed", "values made outside torch during the call (by numpy, "
                     "plain Python or a tensor subclass's own __torch_function__), as many as "
                     "the result holds, reached a kernel launch, and changing them before each "
                     "launch changes the result: the kernel was "
                     "handed what code outside the kernels computed")
    if part.needs_kernels and getattr(returned, "numbers_fed", 0):
        return _fail("answer-fed", f"{returned.numbers_fed} different plain numbers reached "
                     "the kernel launches as arguments (computed outside the kernels: in "
                     "Python, numpy or torch, taken out with .item() or .tolist()), and "
                     "changing them before each launch changes the result: a kernel's data "
                     "reaches it as tensors it loads, not as numbers computed for it")
    if part.needs_kernels and returned.answer_fed:
        if returned.answer_fed == lineage.UNFOLLOWED:
            return _fail("answer-fed", f"values {_torchs(returned.answer_fed)} computed during "
                         "the call reached a kernel launch, and changing them before each "
                         "launch changes the result: the kernel was handed values computed "
                         "outside it, by functions the check cannot name")
        return _fail("answer-fed", f"values torch's {returned.answer_fed} computed during the "
                     "call reached a kernel launch (whatever was done to them on the way), and "
                     "changing them before each launch changes the result: the kernel was "
                     f"handed torch's {returned.answer_fed}, which does (some of) this "
                     "part's work")
    if part.needs_kernels and getattr(returned, "inputs_unread", False):
        return _fail("inputs-unread", "run again with the call's inputs (and copies of them) "
                     "changed just before each kernel launch, the call returned the same "
                     "values: what the kernels computed depends on none of the inputs as they "
                     "found them, only on what code outside them computed before they ran")
    if returned.values is None:
        return _fail("wrong-type", f"could not read the returned values: {returned.note}")
    if getattr(returned, "follows_fill", 0):
        return _fail("follows-the-fill", f"{counted(returned.follows_fill, 'output')} "
                     f"{verb(returned.follows_fill, 'follows', 'follow')} what memory held "
                     "before your kernels wrote it: NaN where the check filled new tensors "
                     "with NaN, and another value of their own where it filled them with "
                     "another", format_values(returned.values))
    if returned.unwritten is not None:
        import numpy as np

        verdict = _unwritten_in_layout(_judge_unwritten(returned.unwritten, returned.values),
                                       returned)
        verdict.unwritten_count = int(np.count_nonzero(returned.unwritten))
        return verdict
    return None


def _ints(value) -> bool:
    """A non-empty tuple of whole numbers (the worker's word for a shape or strides)."""
    return isinstance(value, tuple) and bool(value) and \
        all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _unwritten_in_layout(verdict: Verdict, returned) -> Verdict:
    """The patterns of unwritten elements name the grid, the block or the mask by where they
    fall in the output's rows. In an output that is not laid out row after row (allocated
    transposed, say), a kernel that stores at row * stride(0) + column with no column stride
    misses elements that follow the layout instead, so the pattern names none of them: the
    layout is said, and no cause."""
    shape, strides = returned.shape, getattr(returned, "strides", None)
    if verdict.bug is None or not _ints(shape) or not _ints(strides) or \
            len(strides) != len(shape):
        return verdict
    want = _contiguous_strides(shape)
    if all(s == w for s, w, size in zip(strides, want, shape) if size > 1):
        return verdict
    if verdict.bug.key != "unwritten":  # a pattern in the rows: the layout breaks it
        verdict.causes = ()
    verdict.observations += (
        f"the tensor returned is not contiguous: shape {tuple(shape)} with strides "
        f"{tuple(strides)}, where a contiguous one has {want}. A store to row * stride(0) + "
        "column, with no column stride, reaches the elements this layout puts there, not "
        "the row's: allocate the output contiguous (torch.empty_like(x)), or store with both "
        "strides",)
    return verdict


def _torchs(source: str) -> str:
    """Who computed values, by the function the record names (lineage)."""
    if source == lineage.UNFOLLOWED:
        return (f"torch, through more steps than the check follows back (over "
                f"{lineage.MOST_STEPS} memories),")
    return f"torch's {source}"


def _computed_by_torch(source: str) -> str:
    """Where a returned tensor no kernel stored came from (calls.computed_by_torch)."""
    unseen = ": no kernel launch was given its memory, or the memory it was copied from"
    if source == lineage.UNFOLLOWED:
        return (f"the tensor returned was made by {_torchs(source)} during the call" + unseen)
    if source in lineage.WRAPS:
        return (f"the tensor returned was made by torch.{source} during the call from values "
                "computed outside torch" + unseen)
    return f"the tensor returned was computed by torch's {source} during the call" + unseen


def _passed_through(source: str) -> str:
    """What a kernel was given and passed on, from where its values came (calls.passed_through)."""
    said = "the tensor returned holds the values (to within 1e-3 of each) of "
    if source == lineage.OUTSIDE:
        said += ("a tensor your code gave a kernel that is no input and whose values no torch "
                 "function the check saw computed during the call (computed outside torch: by "
                 "numpy, say, wrapped by torch.from_numpy or written into the tensor)")
    elif source in lineage.WRAPS:
        said += (f"a tensor torch.{source} made during the call from values computed outside "
                 "torch, which your code gave a kernel")
    else:
        said += f"a tensor {_torchs(source)} computed during the call, which your code gave a " \
            "kernel"
    return said + (": the kernel passed them on (made again with those values changed before "
                   "each launch, the call returned other values)")


def _tensor_shape(returned: Returned, want, expect: dict) -> Verdict | None:
    if returned.type_name != "Tensor":
        key = "returned-none" if returned.type_name == "NoneType" else "wrong-type"
        return _fail(key, f"returned {returned.type_name}, not a torch.Tensor", returned.note)
    if returned.shape != tuple(want.shape):
        summary = f"returned shape {returned.shape}, expected {tuple(want.shape)}"
        if _transposed_view(returned, tuple(want.shape)):
            return _fail("returned-transposed", f"{summary}, with strides "
                         f"{tuple(returned.strides)}")
        return _fail("wrong-shape", summary)
    if expect.get("dtype") and returned.dtype != expect["dtype"]:
        return _fail("wrong-dtype", f"returned {returned.dtype} for a {expect['dtype']} input")
    if expect.get("device") and returned.device != expect["device"]:
        return _fail("wrong-device", f"returned a tensor on {returned.device}, the input is on "
                     f"{expect['device']}")
    return None


def _transposed_view(returned: Returned, want: tuple) -> bool:
    """Whether a 2-D tensor returned has the expected shape turned round and the strides of
    a transposed view of a contiguous tensor of the expected shape: (1, rows) for a shape
    (cols, rows), what torch.empty((rows, cols)).T has."""
    shape, strides = returned.shape, getattr(returned, "strides", None)
    return (len(want) == 2 and _ints(shape) and _ints(strides) and len(shape) == 2
            and len(strides) == 2 and tuple(shape) == want[::-1] and want[0] > 1
            and want[1] > 1 and tuple(strides) == (1, want[1]))


def _list_shape(returned: Returned, want, expect: dict) -> Verdict | None:
    kind = returned.type_name
    if kind == "NoneType":
        return _fail("returned-none", "returned None")
    if kind == "generator":
        return _fail("returned-generator", "returned a generator, not a list")
    if kind == "tuple":
        got = format_values(returned.values) if returned.values is not None else ""
        return _fail("returned-tuple", "returned a tuple, not a list", got)
    if kind != "list":
        return _fail("wrong-type", f"returned {kind}, not a list", returned.note)
    if returned.values is None:
        return _fail("wrong-type", f"returned a list, but {returned.note}")
    if returned.shape != tuple(want.shape):
        if len(returned.shape) == 1 and len(want.shape) == 1:
            return _fail("wrong-length", f"returned {counted(returned.shape[0], 'value')} for "
                         f"{counted(want.shape[0], 'input')}", format_values(returned.values))
        # one more level of brackets around the right values: the length was right
        key = "extra-list" if returned.shape == (1, *want.shape) else \
            "wrong-length" if len(returned.shape) == len(want.shape) else "nested-differently"
        return _fail(key, f"returned a list of shape {returned.shape}, expected "
                     f"{tuple(want.shape)}", format_values(returned.values))
    return None


@functools.cache
def _parameters(function: str) -> tuple[str, ...]:
    """The parameter names of ``function`` as the exercise stubs declare it (what the learner's
    own function is called with), or () when no stub defines it."""
    import ast
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parents[1] / "exercises").glob("*/stub.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == function:
                return tuple(a.arg for a in node.args.posonlyargs + node.args.args)
    return ()


def _mutated(part: Part | None, returned: Returned) -> str:
    """"the call changed its argument q" (by the reference's parameter names), or the words
    without a name where they are not known."""
    try:
        names = _parameters(part.function)
        named = [names[i] for i in returned.changed_args]
    except (IndexError, AttributeError):
        named = []
    if not named:
        return "the input was changed by the call"
    noun = "argument" if len(named) == 1 else "arguments"
    where = getattr(returned, "changed_where", "")
    first = f" ({named[0]}{where})" if where else ""
    return f"the input was changed by the call: its {noun} {', '.join(named)}{first}"


def _judge_exact(returned: Returned, want, part: Part | None = None) -> Verdict:
    """Parts whose answer is plain data (a word, a count, a tuple): equal or not."""
    if returned.type_name == "NoneType" and want is not None:
        return _fail("returned-none", "returned None")
    if returned.input_mutated:
        return _fail("mutated-input", _mutated(part, returned))
    got = returned.raw if returned.raw is not None else returned.note
    if type(got) is type(want) and got == want or _same_number(got, want):
        where = _float_for_int(got, want)
        if where is None:
            return Verdict("passed")
        path, value = where
        verdict = _fail("float-for-int", f"returned {value!r}{path}, a float, where the answer "
                        f"is the whole number {int(value)}")
        verdict.got, verdict.expected = _shorten(repr(got)), _shorten(repr(want))
        return verdict
    shown = _shorten(repr(got))
    # The value itself is shown once, on the "got" line under the summary: the summary says
    # only what kind of value it is.
    kind, wanted = type(got).__name__, type(want).__name__
    if returned.raw is None and returned.numpy_scalars:
        kinds = ", ".join(f"numpy.{name}" for name in returned.numpy_scalars)
        summary = f"returned numpy scalars ({kinds}) where the reference has Python's own " \
            "int, float and bool: convert each value with int(), float() or bool() (or .item())"
    elif returned.raw is None:
        summary = "returned a value that differs from the reference"
    elif kind == wanted:
        summary = f"returned {_a(kind)} that differs from the reference"
    else:
        summary = f"returned {_a(kind)}, where the reference is {_a(wanted)}"
    verdict = Verdict("failed", summary, got=shown)
    verdict.expected = _shorten(repr(want))
    return verdict


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


MAX_SHOWN_CHARS = 300


def _shorten(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [cut: {len(text) - limit} more " \
        "characters]"


def _float_for_int(got, want, path: str = ""):
    """(where, value) of the first float in ``got`` that stands, equal, for an int of
    ``want`` (100.0 for 100); None when every whole number is an int. Equality alone hides it:
    100.0 == 100, and {"bytes": 100.0} == {"bytes": 100}."""
    if isinstance(want, int) and not isinstance(want, bool):
        return (path, got) if isinstance(got, float) else None
    if isinstance(want, dict) and isinstance(got, dict):
        pairs = ((f"{path} as {key!r}", got.get(key), value) for key, value in want.items())
    elif isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        pairs = ((f"{path} at [{i}]", g, w) for i, (g, w) in enumerate(zip(got, want)))
    else:
        return None
    return next((found for where, g, w in pairs
                 if (found := _float_for_int(g, w, where)) is not None), None)


def _same_number(got, want) -> bool:
    numbers = (int, float)
    return (isinstance(got, numbers) and isinstance(want, numbers)
            and not isinstance(got, bool) and not isinstance(want, bool) and got == want)


def _judge_unwritten(unwritten, values) -> Verdict:
    """Name the pattern of the elements the learner's code never wrote."""
    import numpy as np

    if np.ndim(unwritten) == 1:  # a vector has no rows: say which elements
        missing = np.flatnonzero(unwritten)
        first, last = int(missing[0]), int(missing[-1])
        where = f"element {first}" if first == last else f"elements {first} to {last}"
        if len(missing) != last - first + 1:
            where = f"{where}, with gaps"
        summary = f"{len(missing)} of {unwritten.size} output elements " \
                  f"{verb(len(missing), 'was', 'were')} never written: {where}"
        return _fail("unwritten", summary, format_values(values))
    # (rows, cols), True where never written; a row is the last axis (one query's output)
    rows = unwritten.reshape(-1, unwritten.shape[-1]) if np.ndim(unwritten) > 2 \
        else np.atleast_2d(unwritten)
    summary = f"{int(rows.sum())} of {rows.size} output elements " \
              f"{verb(int(rows.sum()), 'was', 'were')} never written"
    whole = rows.all(axis=1)
    touched = rows.any(axis=1)
    key = "unwritten"
    if whole.all():
        summary = f"none of the {rows.size} output elements was written"
    elif whole.any() and not (touched & ~whole).any():
        key = "grid-too-small"
        first_row = int(np.argmax(whole))
        summary += f": {counted(int(whole.sum()), 'whole row')} of {len(rows)}, from row " \
                   f"{first_row}"
    else:
        first_col = int(np.argmax(rows.any(axis=0)))
        suffix = np.zeros_like(rows)
        suffix[:, first_col:] = True
        if (rows[touched] == suffix[touched]).all():
            columns = "the last column" if first_col == rows.shape[1] - 1 else \
                f"columns {first_col} to {rows.shape[1] - 1}"
            if touched.all():  # the same end missing from every row: a block or a mask
                key = "off-by-one-mask" if first_col == rows.shape[1] - 1 else "block-too-small"
                summary += f": {columns} of each row"
                if key == "off-by-one-mask" and _power_of_two(first_col):
                    # a row one past a power of two: a BLOCK of that power, one column short,
                    # leaves the same column as a mask off by one; the output cannot tell them
                    verdict = _fail(key, summary, format_values(values))
                    verdict.causes += (COMMON_BUGS["block-too-small"],)
                    return verdict
            else:  # only some rows: no block or mask would spare the others
                named = np.flatnonzero(touched)
                which = ", ".join(str(int(r)) for r in named[:5]) + \
                    (f" and {len(named) - 5} more" if len(named) > 5 else "")
                summary += f": {columns} of {verb(len(named), 'row', 'rows')} {which} only " \
                           f"(of {len(rows)}); the other rows are whole"
    return _fail(key, summary, format_values(values))


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _judge_values(part: Part, case: Case, returned: Returned, args: tuple, want) -> Verdict:
    import numpy as np

    tolerance = case.tolerance or part.tolerance
    got = returned.values
    good = close(got, want, tolerance.atol, tolerance.rtol)
    problems = [PROPERTIES[name](got) for name in case.checks]
    problems = [p for p in problems if p]
    if good.all() and not problems:
        return Verdict("passed")
    bad = np.argwhere(~good)
    pieces = _pieces(part, args, got.shape)
    mismatches = [Mismatch(tuple(int(i) for i in idx), float(want[tuple(idx)]),
                           float(got[tuple(idx)]), observe.in_piece(pieces, idx))
                  for idx in bad[:MAX_MISMATCHES_SHOWN]]
    causes = _recognise(part, case, got, args, want)
    if part.returns == "tensor" and case.fill_outputs_with_nan:
        # every element was written (NaN included): a mistake whose replay leaves some
        # unwritten is not this one, however its NaN compare with the learner's
        causes = tuple(bug for bug in causes if not bug.leaves_unwritten)
    # an output with no finite value where the reference has some: any mistake that ends in
    # an overflow or 0 / 0 gives it, so it is weak evidence for the bugs it matches
    no_finite = got.size > 1 and not np.isfinite(got).any() and bool(np.isfinite(want).any())
    summary = (f"{len(bad)} of {got.size} values {verb(len(bad), 'differs', 'differ')} from "
               f"the reference "
               f"({tolerance.describe()})") if len(bad) else problems[0]
    special = special_values(got, want)
    if special:
        summary += f"; {special}"
    if problems and len(bad):
        summary += f"; {problems[0]}"
    kept = [i for i, a in enumerate(args) if not isinstance(a, (int, float, str, bool))]
    inputs = tuple(args[i] for i in kept)
    parameters = _parameters(part.function)
    names = tuple(parameters[i] if i < len(parameters) else f"argument {i + 1}" for i in kept)
    dtype = next((getattr(a, "stored_dtype", "") for a in args
                  if getattr(a, "stored_dtype", "")), "float64")
    observations = _observed(observe.describe_values, got, want, tolerance.atol, tolerance.rtol,
                             inputs, part.observe, dtype, names, pieces)
    if pieces:
        observations = (observe.by_piece(~good, pieces), *observations)
    # as many decimals as it takes for the differing values shown to print differently
    decimals = decimals_to_tell_apart(want, got, wrong=~good) if got.shape == want.shape \
        else DECIMALS
    return Verdict("failed", summary, causes=causes, observations=observations,
                   weak=tuple(b.key for b in causes) if no_finite else (),
                   got=format_values(got, decimals=decimals), mismatches=mismatches,
                   mismatch_count=len(bad), size=int(got.size), decimals=decimals)


def _pieces(part: Part, args: tuple, shape: tuple) -> tuple[tuple[str, int], ...]:
    """The part's named results for this case, where they tile the output's second-to-last
    axis exactly (else none: an output of another shape is not described by them)."""
    if part.pieces is None or len(shape) < 2:
        return ()
    try:
        pieces = tuple(part.pieces(*args))
    except Exception:  # noqa: BLE001 - arguments of a case the pieces do not describe
        return ()
    return pieces if sum(n for _, n in pieces) == shape[-2] else ()


def _observed(describe, *args) -> tuple[str, ...]:
    """What ``describe`` says of a wrong output; a description that fails says nothing, since
    the verdict itself must not depend on it."""
    try:
        return tuple(describe(*args))
    except Exception:  # noqa: BLE001 - the learner's output can be anything
        return ()


def special_values(got, want) -> str:
    """Name the NaN and infinity mismatches, which a count of differing values hides."""
    import numpy as np

    if np.shape(got) != np.shape(want):
        return ""
    got_nan, want_nan = np.isnan(got), np.isnan(want)
    got_inf, want_inf = np.isinf(got), np.isinf(want)
    want_finite, got_finite = np.isfinite(want), np.isfinite(got)
    said = []
    for count, text in (
            (got_nan & want_finite, "{n} {outputs} NaN where the reference is finite"),
            (got_inf & want_finite, "{n} {outputs} infinite where the reference is finite"),
            (want_nan & got_finite, "the reference is NaN at {n} {places} where your output is "
             "finite"),
            (want_inf & got_finite, "the reference is infinite at {n} {places} where your "
             "output is finite")):
        n = int(np.count_nonzero(count))
        if n:
            said.append(text.format(n=n, outputs="output is" if n == 1 else "outputs are",
                                    places="place" if n == 1 else "places"))
    return "; ".join(said)


def _recognise(part: Part, case: Case, got, args, want) -> tuple[Bug, ...]:
    """Every known bug whose replay gives exactly this output (none when no replay does, or
    the case is declared too large to replay on)."""
    if not case.replays:
        return ()
    return tuple(bug for bug in part.bugs
                 if bug.detect is not None and bug.detect(got, args, want))


def _sums_to_one(got) -> str | None:
    import numpy as np

    sums = np.atleast_2d(got).sum(axis=-1)
    worst = float(sums[np.argmax(np.abs(sums - 1.0))]) if sums.size else 1.0
    if not np.isfinite(worst) or abs(worst - 1.0) > 1e-6:
        return f"the outputs sum to {format_value(worst)}, not 1"
    return None


PROPERTIES: dict[str, Callable[[Any], str | None]] = {"sums-to-one": _sums_to_one}
