"""How an exercise is declared: its parts, cases, known bugs and tolerances, as data.

Nothing here runs a learner's code. The runner reads these declarations; adding an exercise means
adding its folder under ``learning/exercises`` and naming it there, never a branch in the runner.
``learning.grader.registry`` finds an exercise by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Tolerance:
    """Agreement with the float64 reference: |got - want| <= atol + rtol * |want|, elementwise."""

    atol: float
    rtol: float

    def describe(self) -> str:
        return f"atol {self.atol:g}, rtol {self.rtol:g}"


@dataclass(frozen=True)
class Bug:
    """A mistake learners make, and the one-line likely cause the grader prints when it sees it.

    ``detect(got, args, want)``, when given, says whether a failing output is exactly what code
    with this bug returns for the case's arguments (``args`` as the reference sees them). A
    match is the evidence that lets the grader name this bug; ``learning.grader.replays.same_as``
    builds one from a function that reproduces the bug. ``raises(exc_type, args)``, when
    given, says whether the bug's plain-Python replay raises the same exception on these
    arguments (``learning.grader.replays.raises_like``). ``error`` names the bug when the learner's
    call raises an error whose message matches it (a regular expression, ``re.search``). A bug
    with none of the three is never named: the grader says what it observed instead.
    ``keeps`` and ``changes`` are what the mistake does to the part's named steps (``Steps``),
    where the learner's code keeps the lesson's names: it leaves the steps of ``keeps`` as the
    reference's (a rounded output: every step before the output), and always changes the step
    ``changes`` (no rescaling: the mean square). A record of the learner's steps in which one
    of ``keeps`` differs first, or ``changes`` matches, rules the mistake out
    (``contradicted_by_steps``), however well its replay matched: two mistakes can give one
    output, and the steps tell them apart.
    ``leaves_unwritten`` says that the replay's NaN stand for outputs the bug never writes (the
    check fills outputs with NaN): only such a bug can be named where nothing was written at
    all, since a replay that computes NaN everywhere matches that fill too; and never where
    every element was written (computed NaN are no unwritten ones). A replay that writes
    nothing at all carries no evidence: it raises ValueError instead (nothing to tell).
    """

    key: str
    cause: str
    detect: Callable[[Any, tuple, Any], bool] | None = None
    hint: int = 0  # the level (1-based) of the part's hint that helps with this bug, if any
    error: str = ""  # a pattern of the error message ("raised ValueError: ...") it causes
    raises: Callable[[str, tuple], bool] | None = None
    leaves_unwritten: bool = False
    keeps: tuple[str, ...] = ()
    changes: str = ""

    def contradicted_by_steps(self, matched: tuple[str, ...], differs: str) -> bool:
        """Whether a record of the learner's named steps rules this mistake out: ``matched``,
        the steps that matched the reference's before the first that did not, ``differs``
        (or the code raised before setting it; "" when every named step matched)."""
        return differs in self.keeps or (bool(self.changes) and self.changes in matched)

    @property
    def recognisable(self) -> bool:
        """The grader can see evidence of this bug (a replay or an error's words)."""
        return self.detect is not None or self.raises is not None or bool(self.error)


@dataclass(frozen=True)
class Case:
    """One graded call of the learner's function.

    ``make_args`` builds the call's arguments (plain Python values, or ``TensorSpec`` for
    tensors); it must be deterministic, because the grader and the learner's process each
    build them. ``catches`` names the bugs this case is there to expose: the test suite proves
    that a catalogued version with each of them fails this case and is named. It is never
    printed as a cause: a failure names only the bugs whose evidence it shows.
    """

    name: str
    purpose: str
    make_args: Callable[[], tuple]
    catches: tuple[str, ...]
    tolerance: Tolerance | None = None
    checks: tuple[str, ...] = ()
    gpu_only: bool = False
    fill_outputs_with_nan: bool = True
    # The exception type the call must raise ("ValueError"): arguments the function must refuse.
    # Raising it passes; returning fails, naming the part's (or the common) "missing-error" bug.
    raises: str = ""
    # False for a case too large to replay every known mistake on (seconds of NumPy each, for
    # hundreds of forms): a failure there is described as observed, and is no evidence for or
    # against the mistakes the smaller cases name.
    replays: bool = True


@dataclass(frozen=True)
class Steps:
    """The named steps of a part's function, as its lesson and stub name them: where a wrong
    output first parts from the reference's is said in their terms
    (``learning.grader.first_step``). ``where(loops, args)`` puts into words where the
    reference was when it set a value, from its loop variables (and "program", in a kernel)
    and the case's arguments: "for query row 0, keys 2 to 3"."""

    names: tuple[str, ...]
    where: Callable[[dict, tuple], str] | None = None
    function: str = ""  # the function whose steps these are, when not the part's own (a kernel)
    # Another value a step may hold and still be right, from the reference's values so far
    # ({name: value}): the same quantity in other units (RMSNorm's rms of the row itself, not
    # of the row over its largest magnitude). A learner's step that holds it matches.
    also_right: dict[str, Callable[[dict], Any]] = field(default_factory=dict, compare=False)
    # The later steps the reference computes from a step ({name: (names, ...)}): a learner's
    # step that differs while every one of these, next in the same place, matches holds a
    # value of the learner's own under that name (the raw scores kept in s, the masked ones
    # in another variable), not the first wrong step.
    feeds: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Part:
    """One function of an exercise module that a lesson asks the learner to write."""

    name: str  # "python" or "triton"
    title: str
    lesson: str  # the lesson that starts this part, e.g. "04"
    function: str  # the function in the learner's module that the grader calls
    reference: Callable[..., Any]  # float64 reference, run in the grader's process only
    cases: tuple[Case, ...]
    tolerance: Tolerance
    bugs: tuple[Bug, ...] = ()  # the mistakes this part's cases can name, most specific first
    # What the function returns, which decides how it is compared:
    #   "list"   a list of floats (nested lists for 2-D), compared with the tolerance;
    #   "tensor" a torch.Tensor of the input's dtype and device, compared with the tolerance;
    #   "exact"  plain data (str, int, tuple, ...), compared with ==.
    returns: str = "list"
    needs_kernels: bool = False  # True when the part launches Triton kernels
    # The lesson's derivation in plain Python (lists and math): a call that runs a function of
    # torch, numpy or triton fails, whatever it returns (learning.grader.plain)
    plain_python: bool = False
    # Hints in levels, from a nudge to nearly the answer; ``check NAME --hint`` shows the next.
    hints: tuple[str, ...] = ()
    # Facts about a wrong output worth stating for this part (learning.grader.observe): "row-sums"
    # for outputs whose rows are probabilities.
    observe: tuple[str, ...] = ()
    steps: Steps | None = None  # the lesson's named steps, recorded when a case fails
    # The heading of the lesson's section that sets this part's task, where it is not where the
    # lesson starts its exercise (a third part that comes late in the lesson).
    section: str = ""
    # Where the output is several results stacked along its second-to-last axis (attention's
    # dq, dk and dv), their names and lengths for a case's arguments, so that what differs is
    # said of each by name: ``pieces(args) -> (("dQ", 16), ("dK", 16), ("dV", 16))``.
    pieces: Callable[..., tuple[tuple[str, int], ...]] | None = None
    # Kernel parts: the kinds of operation the part's kernels, together, must compile into,
    # as alternatives (learning.grader.kernel_ops): (("exp", "sum"),) for a softmax. Kernels
    # that compile into none of them did not compute the answer, whatever the interpreter gave.
    kernel_ops: tuple[tuple[str, ...], ...] = ()
    # Kernel parts: the torch functions that compute the answer (as the learner writes them:
    # "softmax", "matmul" for @): values any of them computed during a call must not reach a
    # launch, however changed on the way (doubled, transposed, reversed)
    torch_answers: tuple[str, ...] = ()

    def bug(self, key: str) -> Bug:
        for bug in self.bugs:
            if bug.key == key:
                return bug
        raise KeyError(f"part {self.name!r} declares no bug {key!r}")

    def case(self, name: str) -> Case:
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(f"part {self.name!r} has no case {name!r}")


@dataclass(frozen=True)
class Exercise:
    """An exercise module at the top of the course and the parts the lessons add to it."""

    name: str
    title: str
    parts: tuple[Part, ...]
    lessons: tuple[str, ...] = ()  # lesson files, in order, that work on this module

    @property
    def filename(self) -> str:
        return f"{self.name}.py"

    def part(self, name: str) -> Part:
        for part in self.parts:
            if part.name == name:
                return part
        known = ", ".join(p.name for p in self.parts)
        raise KeyError(f"exercise {self.name!r} has no part {name!r} (it has: {known})")
