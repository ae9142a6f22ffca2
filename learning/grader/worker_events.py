"""What a worker process said, kept as each event arrives: the phase it reached, each case's
outcome, and what it recorded.

Events cross the pipe as plain tuples, ``(kind, ...)``, the only shape the grader unpickles
(``learning.grader.childproc``); here they become named facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from learning.grader.mode import Mode
from learning.grader.returned import ImportProblem


class CaseKey(NamedTuple):
    """A case, by its part's name and its own."""

    part: str
    case: str


class Abandoned(NamedTuple):
    """The part a process gave up on, and why the rest of its cases did not run."""

    part: str
    why: str


@dataclass
class Heard:
    """Everything a worker process said, as it stands after the last event."""

    phase: str = "start-up"  # then "import", then "cases"
    learner_pid: int = 0  # the process under the guard that runs the learner's code
    mode: Mode | None = None  # where kernels run, when the process said
    environment_problem: str = ""  # this machine cannot run the parts asked for
    imported: bool = False  # the learner's import ended, well or not (import_problem)
    import_problem: ImportProblem | None = None
    launches: list = field(default_factory=list)  # gpu_compile.Launch, for the compile check
    missing: dict[str, ImportProblem] = field(default_factory=dict)  # by part: no function
    outcomes: dict[CaseKey, object] = field(default_factory=dict)  # Returned, Raised, Skipped
    carried: frozenset[CaseKey] = frozenset()  # outcomes judged from an earlier process's run
    touched: set[str] = field(default_factory=set)  # parts with a case started or done
    current: CaseKey | None = None  # the case that started and has not ended
    abandoned: Abandoned | None = None
    maps: dict[str, object] = field(default_factory=dict)  # a --map run's, by whose kernel
    steps: dict[str, object] = field(default_factory=dict)  # a --steps run's, by whose code
    borrowed: list[str] = field(default_factory=list)  # reference modules the learner loaded
    # {path: stamp} of the installed files the process loaded before the learner's code ran
    # (installed.installed_stamps), for the check to compare afterwards
    installed: dict = field(default_factory=dict)
    finished: bool = False

    @classmethod
    def carrying(cls, outcomes: dict | None) -> Heard:
        """A fresh process's start: the outcomes an earlier process judged before its GPU
        faulted, which this one does not run again."""
        outcomes = {CaseKey(*key): outcome for key, outcome in (outcomes or {}).items()}
        return cls(outcomes=outcomes, carried=frozenset(outcomes),
                   touched={part for part, _ in outcomes})

    def take(self, event: tuple):
        """Keep what ``event`` says. A "contained" event (whether the filter holds) is for the
        timeline only; an unknown kind changes nothing."""
        kind = event[0]
        if kind == "pid":
            # sent by the worker's own code before the learner's runs: the first one counts
            if self.phase == "start-up" and not self.learner_pid:
                self.learner_pid = int(event[1])
        elif kind == "mode":
            # sent by the worker's own code before the learner's import: later ones are not
            # believed (which cases may be skipped rests on it)
            if self.phase == "start-up" and self.mode is None:
                self.mode = Mode(event[1], event[2], *event[3:4])
        elif kind == "environment":
            self.environment_problem = event[1]
            self.finished = True
        elif kind == "installed":
            # sent by the worker's own code before the learner's import, and read before it
            # (Channel.drained): later ones are not believed (the learner's code would leave
            # out what it changed)
            if not self.imported and not self.installed and isinstance(event[1], dict):
                self.installed = event[1]
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
            self.current = CaseKey(event[1], event[2])
            self.touched.add(event[1])
        elif kind == "done":
            self.outcomes[CaseKey(event[1], event[2])] = event[3]
            self.touched.add(event[1])
            self.current = None
        elif kind == "abandon":
            self.abandoned = Abandoned(event[1], event[2])
        elif kind == "map":
            self.maps[event[1]] = event[2]
        elif kind == "steps":
            self.steps[event[1]] = event[2]
        elif kind == "borrowed":
            # sent as each is found, from the worker or a process it forked: added up
            self.borrowed += [n for n in map(str, event[1]) if n not in self.borrowed]
        elif kind == "finished":
            self.finished = True

    def gpu_fault(self) -> CaseKey | None:
        """The case whose fault ended this process's GPU context, if one did."""
        if self.abandoned is None:
            return None
        faulted = [key for key, o in self.outcomes.items()
                   if key.part == self.abandoned.part and key not in self.carried
                   and getattr(o, "gpu_lost", False)]
        return faulted[-1] if faulted else None


# The fields of a case's outcome and the types each may hold; a field not named is not read.
_TEXT = (str,)
_OUTCOME_FIELDS = {
    "Returned": {"type_name": _TEXT, "note": _TEXT, "computed_by_torch": _TEXT,
                 "libraries_used": _TEXT, "changed_where": _TEXT, "written_by_torch": _TEXT,
                 "passed_through": _TEXT, "dtype": (str, type(None)),
                 "device": (str, type(None)), "input_mutated": (bool,),
                 "input_autograd_changed": (bool,), "aliases_input": (bool,),
                 "ignores_kernels": (bool,), "guard_damage": (int,),
                 "kernel_launches": (int, type(None)), "other_threads": (int,),
                 "unseen_between": (bool,), "pre_run_hooks": _TEXT, "answer_fed": _TEXT,
                 "repeat_launched_nothing": (bool,), "hooks_left": _TEXT,
                 "pointer_unseen": _TEXT, "evidence_raised": (bool,),
                 "beyond_stores": (int,), "inputs_unread": (bool,),
                 "bfloat16_arithmetic": (bool,),
                 "seconds": (int, float)},
    "Raised": {"exc_type": _TEXT, "message": _TEXT, "traceback": _TEXT,
               "not_started": (bool,), "gpu_lost": (bool,), "seconds": (int, float)},
    "Skipped": {"reason": _TEXT},
}
_WHOLE_NUMBERS = ("shape", "strides", "changed_args", "changed_after_launch", "uncompared",
                  "changed_before_launch")


def _whole_numbers(value) -> bool:
    return isinstance(value, tuple) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)


def malformed_outcome(outcome) -> str:
    """Why a case's outcome cannot be judged ("" where it can): the worker sends only plain
    data, but the learner's code runs in its process and could send anything in its place, and
    what cannot be judged must end the run, not the grader."""
    import numpy as np

    kind = type(outcome).__name__
    fields = _OUTCOME_FIELDS.get(kind)
    if fields is None or type(outcome).__module__ != "learning.grader.returned":
        return f"a case's outcome of type {kind}"
    for name, types in fields.items():
        value = getattr(outcome, name, None)
        if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
            return f"{kind}.{name} of type {type(value).__name__}"
    if kind != "Returned":
        return ""
    for name in _WHOLE_NUMBERS:
        value = getattr(outcome, name)
        if value is not None and not _whole_numbers(value):
            return f"Returned.{name} that is not a tuple of whole numbers"
    values, unwritten = outcome.values, outcome.unwritten
    if values is not None:
        if not isinstance(values, np.ndarray) or values.dtype.kind not in "biuf":
            return "Returned.values that are not an array of numbers"
        if outcome.shape is not None and values.shape != tuple(outcome.shape):
            return f"Returned.values of shape {values.shape} for a shape {outcome.shape}"
    if unwritten is not None and not (isinstance(unwritten, np.ndarray)
                                      and unwritten.dtype == bool and values is not None
                                      and unwritten.shape == values.shape):
        return "Returned.unwritten that is not a mask of the values' shape"
    if not (isinstance(outcome.grader_changed, tuple)
            and all(isinstance(v, str) for v in outcome.grader_changed)):
        return "Returned.grader_changed that is not a tuple of names"
    races = getattr(outcome, "races", ())
    if not (isinstance(races, tuple) and all(isinstance(v, str) for v in races)):
        return "Returned.races that is not a tuple of sentences"
    return ""


def _malformed_problem(problem) -> str:
    """Why an import problem cannot be read ("" where it can)."""
    if not isinstance(problem, ImportProblem):
        return "an import problem of another type"
    for name in ("kind", "message", "traceback", "function"):
        if not isinstance(getattr(problem, name, None), str):
            return f"an import problem whose {name} is not a string"
    if not isinstance(problem.details, dict):
        return "an import problem whose details are not a dictionary"
    return ""


def _type_described(kind, depth: int = 0) -> bool:
    """A launch's argument type: a string, or (a tuple argument's) a tuple of them, nested a
    few levels at most."""
    if isinstance(kind, str):
        return True
    return type(kind) is tuple and depth < 8 and all(
        _type_described(inner, depth + 1) for inner in kind)


def _malformed_launch(launch) -> str:
    """Why a launch sent for the GPU compile check cannot be read ("" where it can)."""
    from learning.grader.gpu_compile import Launch

    if type(launch) is not Launch:
        return "a launch of another type"
    if not all(isinstance(getattr(launch, name, None), str) for name in ("part", "kernel")):
        return "a launch whose part or kernel is not named by a string"
    for name in ("signature", "constexprs", "options"):
        pairs = getattr(launch, name, None)
        if not isinstance(pairs, tuple) or not all(
                isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
                for pair in pairs):
            return f"a launch whose {name} is not pairs of a name and a value"
    if not all(_type_described(kind) for _, kind in launch.signature):
        return "a launch whose argument types are not strings or tuples of them"
    if not isinstance(launch.past, str):
        return "a launch whose reading of the kernel's source is not a string"
    if not isinstance(launch.reads, tuple) or not all(
            type(pair) is tuple and len(pair) == 2 and all(isinstance(v, str) for v in pair)
            for pair in launch.reads):
        return "a launch whose reads are not pairs of strings"
    if not isinstance(launch.line, int):
        return "a launch whose line is not a whole number"
    return ""


def malformed(event: tuple, parts: set[str]) -> str:
    """Why ``event`` cannot be taken ("" where it can): the fields a kind's handling reads, of
    the types it reads them as, and parts of this exercise."""
    kind, size = event[0], len(event)
    need = {"pid": 2, "start": 3, "done": 4, "part-missing": 3, "abandon": 3, "map": 3,
            "steps": 3, "environment": 2, "import": 2, "installed": 2, "launch": 2}
    if size < need.get(kind, 1):
        return f"a {kind!r} event of {size} fields"
    if kind in ("start", "done", "part-missing", "abandon"):
        if not isinstance(event[1], str) or event[1] not in parts:
            return f"a {kind!r} event for a part this exercise does not have"
        if kind in ("start", "done") and not isinstance(event[2], str):
            return f"a {kind!r} event whose case is not named by a string"
    if kind == "pid" and (not isinstance(event[1], int) or isinstance(event[1], bool)):
        return "a 'pid' event whose process id is not a whole number"
    if kind == "abandon" and not isinstance(event[2], str):
        return "an 'abandon' event whose reason is not a string"
    if kind == "part-missing" and _malformed_problem(event[2]):
        return f"a 'part-missing' event with {_malformed_problem(event[2])}"
    if kind == "import" and event[1] is not None and _malformed_problem(event[1]):
        return f"an 'import' event with {_malformed_problem(event[1])}"
    if kind == "launch" and _malformed_launch(event[1]):
        return f"a 'launch' event with {_malformed_launch(event[1])}"
    if kind == "environment" and not isinstance(event[1], str):
        return "an 'environment' event whose problem is not a string"
    if kind == "done":
        return malformed_outcome(event[3])
    return ""


def describe(event: tuple) -> str:
    """An event's line on the check's timeline: its kind, the names it carries, and for a
    case's end the share of its time spent in the learner's call."""
    kind = event[0]
    called = getattr(event[3], "seconds", None) if kind == "done" else None
    return " ".join(["worker:", kind, *(str(e) for e in event[1:3] if isinstance(e, str))]) \
        + (f" ({called:.3f} s of it in the learner's call)" if called else "")
