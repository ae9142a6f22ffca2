"""Show an exercise's reference solution: ``python -m learning.solution softmax``.

Only once every part of the exercise has passed its last check, so it is read to compare, not
to copy; ``--force`` shows it anyway. Without Triton (macOS) the kernel parts can never be
checked, so there only the parts that can be must pass, and one line says so.
"""

from __future__ import annotations

import sys

from rich.markup import escape
from rich.syntax import Syntax

from learning import cli
from learning.check import default_root
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.exercises import solution_path
from learning.grader import mode as kernel_mode
from learning.grader import registry, state
from learning.grader.declarations import Exercise


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.solution",
                           description="Show the reference solution once your exercise passes.")
    parser.add_argument("exercise", help="the exercise, e.g. softmax")
    parser.add_argument("--force", action="store_true", help="show it even before it passes")
    parser.add_argument("--root", type=cli.folder, metavar="DIR",
                        help="the folder holding your exercise files (default: the course folder)")
    return parser


# A part's last grade in words ("not-started" is the grader's name for a stub still raising)
STATUS_WORDS = {"not-started": "not started (the stub still raises NotImplementedError)",
                "failed": "failing", "error": "raising an error", "timed-out": "timed out",
                "crashed": "crashed"}


def unfinished_parts(exercise: Exercise, progress: state.State,
                     kernels: bool = True, source: bytes | None = None) -> list[str]:
    """The parts whose last check did not pass, each with its grade, in words; with
    ``kernels`` False, of the parts that launch no kernel (Triton is missing here). Given the
    learner's ``source`` as it is now, a pass recorded of another version of it does not
    count: the record does not match the file."""
    missing = []
    digest = None if source is None else state.source_digest(source)
    for part in exercise.parts:
        if not kernels and part.needs_kernels:
            continue
        grade = progress.grade(exercise.name, part.name)
        if grade is None:
            missing.append(f"{part.name}: not checked yet")
        elif grade.status == "passed" and digest and grade.source and grade.source != digest:
            missing.append(f"{part.name}: passed, but {exercise.filename} has changed since "
                           "that check")
        elif grade.status != "passed":
            said = STATUS_WORDS.get(grade.status, grade.status.replace("-", " "))
            # a part not started ran no case: a count of its cases would be one the check,
            # which leaves out those this machine cannot run, does not show
            missing.append(f"{part.name}: {said}" if grade.status == "not-started" else
                           f"{part.name}: {said}, {grade.passed} of {grade.total} cases passed")
    return missing


def _current_source(path) -> bytes:
    """The learner's file as it is now (b"" when it cannot be read: no pass matches that)."""
    try:
        return state.read_small_file(path, 1 << 24) or b""
    except (OSError, state.NotData):
        return b""


def is_open(exercise: Exercise, progress: state.State) -> bool:
    """Whether ``python -m learning.solution`` shows this exercise's reference without
    --force: every part that can be checked here passed its last check."""
    return not unfinished_parts(exercise, progress, kernels=kernel_mode.triton_missing() is None)


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    try:
        options = build_parser().parse_args(argv)
        exercise = registry.find(options.exercise)
    except HelpShown as shown:
        return shown.code
    except (ArgumentError, registry.UnknownExercise) as error:
        console.print(f"solution: {escape(str(error))}", style="red", highlight=False)
        return 2
    root = options.root or default_root()
    progress = state.load(root)
    if progress.note:
        print(f"note: {progress.note}", file=sys.stderr)
    why = kernel_mode.triton_missing()
    missing = unfinished_parts(exercise, progress, kernels=why is None,
                               source=_current_source(root / exercise.filename))
    # The kernel parts not passed, which Triton would have to check: none where it is here.
    elsewhere = [p.name for p in exercise.parts if why and p.needs_kernels
                 and getattr(progress.grade(exercise.name, p.name), "status", "") != "passed"]
    every = "every part that can be checked here" if elsewhere else "every part"
    if missing and not options.force:
        console.print(f"solution: the reference for {exercise.name} opens once {every} "
                      f"passes ({'; '.join(missing)}). Run python -m learning.check "
                      f"{exercise.name}, or add --force to read it now.", highlight=False)
        return 1
    source = solution_path(exercise.name).read_text(encoding="utf-8")
    if elsewhere and not options.force:
        noun = "part" if len(elsewhere) == 1 else "parts"
        note = f"note: the reference opened on the parts checked here; its Triton {noun} " \
               f"({', '.join(elsewhere)}) cannot be checked here: {why}."
        print(note, file=sys.stderr)  # apart from the source, which may be redirected
    if not sys.stdout.isatty():  # redirected (> ref.py) or piped: the file itself, unwrapped
        sys.stdout.write(source)
        return 0
    console.print(f"[bold]Reference solution for {exercise.filename}[/bold]", highlight=False)
    # Each line of code printed whole, for the terminal to fold: a line rich wrapped itself
    # would be copied as two, and a comment's tail would no longer parse.
    longest = max((len(line) for line in source.splitlines()), default=1)
    console.print(Syntax(source, "python", line_numbers=False, word_wrap=False,
                         code_width=longest), soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main, "solution"))
