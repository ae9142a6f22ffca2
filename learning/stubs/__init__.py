"""Pristine copies of the exercise modules, as a learner first receives them.

``python -m learning.reset NAME`` restores a learner's module from here (after backing theirs
up); the tests check that each top-level module in the repository matches its copy.
"""

from pathlib import Path

STUBS = Path(__file__).resolve().parent


def stub_path(exercise_name: str) -> Path:
    return STUBS / f"{exercise_name}.py"
