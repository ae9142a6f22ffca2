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


def describe(event: tuple) -> str:
    """An event's line on the check's timeline: its kind, the names it carries, and for a
    case's end the share of its time spent in the learner's call."""
    kind = event[0]
    called = getattr(event[3], "seconds", None) if kind == "done" else None
    return " ".join(["worker:", kind, *(str(e) for e in event[1:3] if isinstance(e, str))]) \
        + (f" ({called:.3f} s of it in the learner's call)" if called else "")
