"""Reference solutions: one complete exercise module per exercise, kept out of the learner's way.

Each file here has the same names as the exercise module at the top of the course, so copying it
over the learner's file would pass every case; the tests do exactly that in a temporary folder.
"""

from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parent


def solution_path(exercise_name: str) -> Path:
    return SOLUTIONS / f"{exercise_name}.py"
