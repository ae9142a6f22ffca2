"""Other versions of each exercise: known-wrong ones with the diagnosis the grader must give,
and correct ones in other styles that must get full marks.

Each exercise's catalogue (``learning/exercises/NAME/catalogue.py``) lists them as ``WRONG`` and
``RIGHT``. A version is the reference solution with some definitions replaced (later
definitions in a module win). The test suite grades every one and asserts its verdict.
"""

from __future__ import annotations

import importlib
import textwrap
from dataclasses import dataclass

from learning.exercises import solution_path

# Diagnoses a wrong version may need that are not a bug's name: the case limit ran out (and no
# cause is claimed), or no known mistake matches (and the grader says what differs instead).
# An exception's meaning is written "error:<key>", a key of learning.grader.errors.MEANINGS.
DIAGNOSES = ("timed-out", "unknown")


@dataclass(frozen=True)
class Version:
    """Another version of one part: its replacement source and the diagnosis the check must
    give (None for a correct version, which must pass every case)."""

    name: str
    part: str
    bug: str | None  # a Bug key of the part or of COMMON_BUGS, "error:<key>", or a DIAGNOSES
    source: str
    # The diagnosis rests on the interpreter's bounds checks (an address past a tensor's end is
    # an error there); compiled on a GPU the same code reads whatever lies beyond.
    interpreter_only: bool = False

    def module_text(self, exercise: str) -> str:
        reference = solution_path(exercise).read_text(encoding="utf-8")
        return (f"{reference}\n\n# --- known-wrong version: {self.name} ---\n"
                f"{textwrap.dedent(self.source).strip()}\n")


def versions(exercise: str) -> tuple[Version, ...]:
    """Every catalogued version of ``exercise``, wrong and right."""
    module = importlib.import_module(f"learning.exercises.{exercise}.catalogue")
    return module.WRONG + module.RIGHT


def wrong(exercise: str) -> tuple[Version, ...]:
    return tuple(v for v in versions(exercise) if v.bug is not None)


def right(exercise: str) -> tuple[Version, ...]:
    return tuple(v for v in versions(exercise) if v.bug is None)
