"""The exercise registry: every exercise of the course, found by name.

The exercises are declared in ``learning/exercises`` (one folder each, named once in its
``__init__``) with the types of ``learning.grader.declarations``.
"""

from __future__ import annotations

import difflib
import functools
import importlib
from collections.abc import Sequence

from learning.grader.declarations import Exercise


class UnknownExercise(LookupError):
    """The learner named an exercise the course does not have."""

    def __init__(self, name: str, known: Sequence[str]):
        self.name = name
        close = difflib.get_close_matches(name, known, n=1)
        known_list = ", ".join(known)
        hint = f"; did you mean '{close[0]}'?" if close else f"; known exercises: {known_list}"
        super().__init__(f"unknown exercise '{name}'{hint}")


@functools.cache
def all_exercises() -> tuple[Exercise, ...]:
    """Every exercise, in lesson order. Imported when first asked so commands start fast."""
    from learning.exercises import NAMES

    return tuple(importlib.import_module(f"learning.exercises.{name}.exercise").EXERCISE
                 for name in NAMES)


def find(name: str) -> Exercise:
    """The exercise called ``name`` (also accepts ``softmax.py`` and ``./softmax.py``), or
    UnknownExercise."""
    name = name.strip().removeprefix("./").removesuffix(".py")
    exercises = all_exercises()
    for exercise in exercises:
        if exercise.name == name:
            return exercise
    raise UnknownExercise(name, [e.name for e in exercises])
