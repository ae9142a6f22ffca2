"""Every exercise of the course, in lesson order: one folder each, named once here.

``learning/exercises/NAME/`` holds the same files for every exercise:

    __init__.py     one line saying which exercise it is; it imports nothing
    exercise.py     the declaration: its parts, cases, known bugs and named steps (``EXERCISE``)
    stub.py         the exercise module as a learner first receives it, NAME.py at the top;
                    ``python -m learning.reset NAME`` restores it, the tests check the two match
    solution.py     the reference solution: the stub's names, every body written, so copied
                    over NAME.py it passes every case (the tests do exactly that)
    catalogue.py    other versions (``WRONG``, ``RIGHT``): known-wrong ones with the diagnosis
                    the check must give, correct ones in other styles; each is the whole source
                    of the definitions it puts in place of the solution's
    explainer.py    the worked example of ``python -m learning.explain NAME``, computed as it
                    runs; it imports neither torch nor a declaration, so it starts at once

Nothing is imported here: ``learning.grader.registry`` imports the declarations when it is
first asked, so a command that reads one exercise's files does not import all of them.
"""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
# The files every exercise's folder holds, and nothing else.
FILES = ("__init__.py", "exercise.py", "stub.py", "solution.py", "catalogue.py", "explainer.py")

NAMES = (
    "elementwise",
    "traffic",
    "reductions",
    "softmax",
    "rmsnorm",
    "softmax_backward",
    "online_softmax",
    "matmul",
    "attention",
    "attention_backward",
)


def path(name: str, file: str) -> Path:
    """One of the files in the folder of the exercise ``name``: ``path("softmax", "stub.py")``."""
    return FOLDER / name / file


def stub_path(name: str) -> Path:
    return path(name, "stub.py")


def solution_path(name: str) -> Path:
    return path(name, "solution.py")
