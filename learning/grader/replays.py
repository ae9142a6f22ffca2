"""Replays of known mistakes: the evidence the grader needs before it names one.

A replay computes what buggy code returns (``same_as``, ``any_of``) or whether it raises
(``raises_like``), so that a bug is named only when the learner's output is exactly that, and
dropped when the learner's other cases rule it out (``contradicted``). The address mistakes
every row kernel can make are here too, for any exercise's reference: they read the tensors'
memory as ``learning.grader.tensors.TensorSpec.stored`` lays it out, padding included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from learning.grader.declarations import Bug
from learning.grader.numbers import close
from learning.grader.tensors import rows_read_at

ROUNDING_PLACES = range(1, 12)  # the decimal places a result rounded for display may keep


class Expected(NamedTuple):
    """A case as a replay is held against it: its arguments, the reference's output, and the
    tolerance the learner's output was judged within."""

    args: tuple
    want: Any
    atol: float
    rtol: float


class WrongOutput(NamedTuple):
    """The learner's wrong output (``got``) beside what the case expected."""

    got: Any
    args: tuple
    want: Any
    atol: float
    rtol: float


class rounded:  # noqa: N801 - used like a function: Bug(..., rounded())
    """A ``Bug.detect`` for a result rounded for display, round(v, 6): every value is the
    reference rounded to 1 to 11 decimal places (an output of zeros is none: floor division
    gives it too). One case alone cannot tell it from other ways to get such values (a row of
    inputs of six decimals, copied where the reference is nearly that row), so it is checked
    against every case the learner ran: a case that rounding would fail, passed, or a wrong
    output no rounding gives, rules it out (``contradicted``)."""

    def __call__(self, got, args, want) -> bool:
        import numpy as np

        if got.shape != want.shape or np.allclose(got, want, rtol=1e-9, atol=1e-12):
            return False
        if not np.any(got):  # all zeros is no rounding (floor division gives it too)
            return False
        return self._is_rounding(got, want)

    @staticmethod
    def _is_rounding(got, want) -> bool:
        import numpy as np

        return any(np.allclose(got, np.round(want, places), rtol=0, atol=1e-13)
                   for places in ROUNDING_PLACES)

    def predicts_failure(self, args, want, atol: float, rtol: float) -> bool | None:
        """True when rounding to any number of places fails the case; None otherwise (the
        places the learner kept are not known)."""
        import numpy as np

        want = np.asarray(want, dtype=np.float64)
        if want.dtype == object or not np.isfinite(want).all():
            return None
        passes = [bool(close(np.round(want, places), want, atol, rtol).all())
                  for places in ROUNDING_PLACES]
        return True if not any(passes) else None

    def explains(self, got, args, want, atol: float, rtol: float) -> bool | None:
        """False for a wrong output that is no rounding of the reference."""
        import numpy as np

        if np.shape(got) != np.shape(want) or not np.isfinite(want).all():
            return None
        return self._is_rounding(got, want)


rounded_output = rounded()  # the one every rounding bug uses


class same_as:  # noqa: N801 - used like a function: Bug(..., same_as(formula))
    """A ``Bug.detect`` that recognises the output of ``reproduce(*args)``, the buggy formula.

    ``predicts_failure`` says whether code with this bug would fail a case, so that a bug
    is not named for a learner whose code passed a case the bug would have failed.
    """

    def __init__(self, reproduce: Callable[..., Any], atol: float = 1e-12, rtol: float = 1e-9):
        self.reproduce, self.atol, self.rtol = reproduce, atol, rtol

    def _buggy(self, args):
        import numpy as np

        try:
            with np.errstate(all="ignore"):
                return np.asarray(self.reproduce(*args), dtype=np.float64)
        except (ArithmeticError, ValueError, TypeError, IndexError):
            return None

    def __call__(self, got, args, want) -> bool:
        buggy = self._buggy(args)
        if buggy is None or buggy.shape != got.shape or close(got, want, self.atol,
                                                                self.rtol).all():
            return False
        return bool(close(got, buggy, self.atol, self.rtol).all())

    def predicts_failure(self, args, want, atol: float, rtol: float) -> bool | None:
        buggy = self._buggy(args)
        if buggy is None:
            return None
        return buggy.shape != want.shape or not bool(close(buggy, want, atol, rtol).all())

    def explains(self, got, args, want, atol: float, rtol: float) -> bool | None:
        """Whether a wrong output ``got`` is what this bug gives, where the bug shows (None
        where the replay cannot say, or gives the right answer there)."""
        buggy = self._buggy(args)
        if buggy is None or buggy.shape != want.shape or close(buggy, want, atol, rtol).all():
            return None
        # The case's dtype sets how closely a kernel can follow the float64 replay.
        atol, rtol = max(atol, self.atol), max(rtol, self.rtol)
        return buggy.shape == got.shape and bool(close(got, buggy, atol, rtol).all())


class any_of:  # noqa: N801 - used like a function: Bug(..., any_of(same_as(a), same_as(b)))
    """A ``Bug.detect`` for a mistake with several forms (a shift by the first element, by the
    mean, ...): any form's replay is evidence; the bug predicts a failure only when all do."""

    def __init__(self, *detects):
        self.detects = detects

    def __call__(self, got, args, want) -> bool:
        return any(detect(got, args, want) for detect in self.detects)

    def predicts_failure(self, args, want, atol: float, rtol: float) -> bool | None:
        """True when every form fails the case, False when every form passes it."""
        predictions = [getattr(d, "predicts_failure", lambda *a: None)(args, want, atol, rtol)
                       for d in self.detects]
        if predictions and all(p is True for p in predictions):
            return True
        return False if predictions and all(p is False for p in predictions) else None

    def explains(self, got, args, want, atol: float, rtol: float) -> bool | None:
        answers = [getattr(d, "explains", lambda *a: None)(got, args, want, atol, rtol)
                   for d in self.detects]
        if any(a is True for a in answers):
            return True
        return False if any(a is False for a in answers) else None


class raises_like:  # noqa: N801 - used like a function: Bug(..., raises=raises_like(code))
    """A ``Bug.raises``: the learner's call raised ``exc_type``, and so does the plain-Python
    replay of the buggy code on the same arguments (any of ``reproductions``, for a mistake
    with several forms)."""

    def __init__(self, *reproductions: Callable[..., Any]):
        self.reproductions = reproductions

    def _run(self, reproduce, args) -> tuple[str, Any]:
        """The replay's exception type ("" if none), and what it returned."""
        try:
            return "", reproduce(*args)
        except Exception as exc:  # noqa: BLE001 - the replay's own error is the evidence
            return type(exc).__name__, None

    def _raised(self, reproduce, args) -> str:
        return self._run(reproduce, args)[0]

    def __call__(self, exc_type: str, args) -> bool:
        return any(self._raised(r, args) == exc_type for r in self.reproductions)

    def predicts_failure(self, args, want, atol: float, rtol: float) -> bool | None:
        """True when every form raises here; False when every form returns the right answer,
        so that code with the mistake passes this case."""
        runs = [self._run(r, args) for r in self.reproductions]
        if all(raised for raised, _ in runs):
            return True
        return False if all(not raised and _right(value, want, atol, rtol)
                            for raised, value in runs) else None


def _right(value, want, atol: float, rtol: float) -> bool:
    import numpy as np

    try:
        value = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return value.shape == np.shape(want) and bool(close(value, want, atol, rtol).all())


def predicts_pass(bug: Bug, args, want, atol: float, rtol: float) -> bool:
    """Whether code with ``bug`` passes this case (an ``Expected``, spread): its replay gives
    the right answer there."""
    for check in (bug.detect, bug.raises):
        predict = getattr(check, "predicts_failure", None)
        if predict is not None and predict(args, want, atol, rtol) is False:
            return True
    return False


def contradicted(bug: Bug, passed: list[Expected], failed: list[WrongOutput] = ()) -> bool:
    """Whether the learner's other cases rule ``bug`` out: code with it would have failed a
    case they passed, or would have returned another wrong output where theirs was wrong and
    no known bug explains theirs."""
    for check in (bug.detect, bug.raises):
        predict = getattr(check, "predicts_failure", None)
        if predict is not None and any(predict(*case) for case in passed):
            return True
    explains = getattr(bug.detect, "explains", None)
    return explains is not None and any(explains(*case) is False for case in failed)



def forms(detect) -> list:
    """The single programs a ``Bug.detect`` stands for: each form of an ``any_of`` (nested ones
    opened), or the detect itself."""
    if isinstance(detect, any_of):
        return [leaf for d in detect.detects for leaf in forms(d)]
    return [detect]


def no_one_form(bug: Bug, named: list[WrongOutput]) -> bool:
    """Whether no single form of a mistake with several (an ``any_of``: one per tile size,
    say) gives every wrong output the mistake is named for, where each alone has one that
    does. A K loop that always stops one step short gives, with tiles of 32, what stopping at
    the last whole block gives with tiles of 64 where K is 32, and with tiles of 32 where K is
    45: a program that made that mistake gives the one or the other. Only the named outputs
    are weighed: a launcher may pick its tiles by the inputs' shape, so a form that fits them
    may still fail a case the learner passed at another tile size."""
    candidates = forms(bug.detect)
    if len(candidates) < 2 or len(named) < 2:
        return False
    for form in candidates:
        explains = getattr(form, "explains", None)
        if explains is None:
            return False  # a form that cannot be replayed case by case: nothing to weigh
        if all(explains(*case) is True for case in named):
            return False
    return True


def _rows_read(reference: Callable, tensors: tuple[int, ...], row_start) -> Callable:
    """``reference`` computed on the rows a kernel reads in the arguments at ``tensors``: row r
    starting at element ``row_start(args)(r, cols, row_stride)`` of its storage, then read one
    element after another (``rows_read_at``)."""

    def reproduce(*args):
        args = list(args)
        start = row_start(args)
        for position in tensors:
            rows = rows_read_at(args[position], start)
            if rows is None:
                raise ValueError("the replay reads past the tensor's memory")
            args[position] = rows
        return reference(*args)

    return reproduce


def rows_at_n_cols(reference: Callable, tensors: tuple[int, ...] = (0,)) -> Callable:
    """``reference`` computed on rows that start at r * n_cols instead of r * row_stride, in
    the arguments at positions ``tensors`` (the input row offset taken from the width)."""
    return _rows_read(reference, tensors, lambda args: lambda r, cols, own: r * cols)


def rows_with_stride_of(reference: Callable, source: int, targets: tuple[int, ...]) -> Callable:
    """``reference`` computed with the tensors at ``targets`` read with the row stride of the
    tensor at ``source`` (one stride passed for several tensors)."""
    return _rows_read(reference, targets, lambda args: lambda r, cols, own:
                      r * getattr(args[source], "row_stride", 0))


def columns_next_to_each_other(reference: Callable, tensors: tuple[int, ...]) -> Callable:
    """``reference`` computed with each row of the tensors at ``tensors`` starting where it
    should (r * row stride) and then read one element after another: a column stride taken to
    be 1."""
    return _rows_read(reference, tensors, lambda args: lambda r, cols, own: r * own)
