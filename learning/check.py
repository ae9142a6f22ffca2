"""Grade an exercise module: ``python -m learning.check softmax``.

Runs every part of the exercise (the Python derivation, the Triton kernel) against its cases,
prints each case with its purpose and verdict, a grade per part, and the next step. Exits 0 only
when at least one part is started and every started part passes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from learning import course, registry, runner
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console

STATUS_STYLE = {
    "passed": ("PASS", "green"),
    "failed": ("FAIL", "red"),
    "error": ("ERROR", "red"),
    "not-started": ("TODO", "yellow"),
    "skipped": ("SKIP", "dim"),
    "not-run": ("NOT RUN", "dim"),
    "timed-out": ("TIMEOUT", "red"),
    "crashed": ("CRASH", "red"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m learning.check",
                           description="Grade your exercise module against its cases.")
    parser.add_argument("exercise", help="the exercise to grade, e.g. softmax")
    parser.add_argument("--part", action="append", dest="parts", metavar="PART",
                        help="grade only this part (python, triton); may be repeated")
    parser.add_argument("--interpret", action="store_true",
                        help="run kernels in Triton's interpreter even on a GPU machine")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="time limit for one case (default: 10 s for Python, 60 s for kernels)")
    parser.add_argument("--root", type=Path, metavar="DIR",
                        help="the folder holding your exercise files (default: the course folder)")
    return parser


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    try:
        options = build_parser().parse_args(argv)
        exercise = registry.find(options.exercise)
        if options.parts:
            for name in options.parts:
                exercise.part(name)
        if options.timeout is not None and options.timeout <= 0:
            raise ArgumentError(f"--timeout must be positive, not {options.timeout:g}")
    except HelpShown as shown:
        return shown.code
    except (ArgumentError, registry.UnknownExercise) as error:
        console.print(f"check: {escape(str(error))}", style="red", highlight=False)
        return 2
    except KeyError as error:
        console.print(f"check: {escape(error.args[0])}", style="red", highlight=False)
        return 2
    root = options.root or default_root()
    result = runner.grade(exercise, root, options.parts, options.interpret, options.timeout)
    render(console, result)
    return 0 if result.ok else 1


def default_root() -> Path:
    """The course folder, where the exercise modules live; the current folder if it has them."""
    here = Path.cwd()
    return here if (here / "learning").is_dir() else course.COURSE_ROOT


def render(console: Console, result: runner.CheckResult):
    exercise = result.exercise
    console.print(f"[bold]check {exercise.name}[/bold] · {escape(str(result.module_path))}",
                  highlight=False)
    if result.mode is not None:
        interpreting, reason = result.mode
        where = "Triton interpreter (CPU)" if interpreting else "compiled on the GPU"
        console.print(f"kernels: {where}, because {escape(reason)}", style="dim", highlight=False)
    if result.import_problem is not None:
        _render_import_problem(console, result)
    for part_result in result.parts:
        _render_part(console, exercise, part_result)
    if result.learner_output.strip():
        console.print("\n[bold]What your code printed[/bold]")
        console.print(escape(result.learner_output.rstrip()), highlight=False, markup=False)
    _render_summary(console, result)


def _render_import_problem(console: Console, result: runner.CheckResult):
    problem = result.import_problem
    console.print(f"\n[red]Could not load {result.exercise.filename}:[/red] "
                  f"{escape(problem.message)}", highlight=False)
    if problem.traceback:
        console.print(escape(problem.traceback.rstrip()), highlight=False, markup=False)


def _lesson_label(exercise: registry.Exercise, part: registry.Part) -> str:
    lesson = course.lesson_for(exercise.name, part.name)
    return f"lessons/{lesson.filename}" if lesson else f"lesson {part.lesson}"


def _render_part(console: Console, exercise: registry.Exercise, part_result: runner.PartResult):
    part = part_result.part
    status = part_result.status
    header = f"\n[bold]{part.name.capitalize()} part[/bold] — {escape(part.title)} " \
             f"({_lesson_label(exercise, part)})"
    console.print(header, highlight=False)
    if status == "not-started":
        console.print(f"  [yellow]not started[/yellow]: {part.function} still raises "
                      f"NotImplementedError; {_lesson_label(exercise, part)} starts it.",
                      highlight=False)
        return
    if status == "missing":
        console.print(f"  [red]{escape(part_result.problem.message)}[/red]", highlight=False)
        return
    for case_result in part_result.cases:
        _render_case(console, case_result)
    grade_style = "green" if status == "passed" else "red"
    console.print(f"  [{grade_style}]{part_result.passed}/{part_result.graded} cases passed"
                  f"[/{grade_style}]", highlight=False)


def _render_case(console: Console, case_result: runner.CaseResult):
    verdict = case_result.verdict
    label, style = STATUS_STYLE[verdict.status]
    console.print(f"  [{style}]{label:<7}[/{style}] [bold]{escape(case_result.name)}[/bold]: "
                  f"{escape(case_result.purpose)}", highlight=False)
    if verdict.passed or verdict.status in ("skipped", "not-started"):
        return
    indent = "          "
    if verdict.summary:
        console.print(f"{indent}{escape(verdict.summary)}", highlight=False)
    if verdict.expected and verdict.status == "failed":
        console.print(f"{indent}expected {escape(verdict.expected)}", highlight=False)
    if verdict.got:
        console.print(f"{indent}got      {escape(verdict.got)}", highlight=False)
    for mismatch in verdict.mismatches:
        where = ", ".join(str(i) for i in mismatch.index)
        console.print(f"{indent}  at [{where}]: expected {_fmt(mismatch.want)}, got "
                      f"{_fmt(mismatch.got)}", highlight=False, markup=False)
    hidden = verdict.mismatch_count - len(verdict.mismatches)
    if hidden > 0:
        console.print(f"{indent}  ... and {hidden} more mismatches (cut)", highlight=False)
    if verdict.traceback:
        for line in verdict.traceback.rstrip().splitlines():
            console.print(f"{indent}{line}", highlight=False, markup=False)
    if verdict.bug is not None:
        console.print(f"{indent}[yellow]likely cause:[/yellow] {escape(verdict.bug.cause)}",
                      highlight=False)


def _fmt(value: float) -> str:
    from learning.compare import format_value

    return format_value(value)


def _render_summary(console: Console, result: runner.CheckResult):
    grades = []
    for part_result in result.parts:
        name = part_result.part.name.capitalize()
        if part_result.status == "not-started":
            grades.append(f"{name} not started")
        elif part_result.status == "missing":
            grades.append(f"{name} missing")
        else:
            grades.append(f"{name} {part_result.passed}/{part_result.graded}")
    style = "green" if result.ok else "red"
    console.print(f"\n[bold {style}]Grade:[/bold {style}] {' · '.join(grades)}", highlight=False)
    console.print(_next_step(result), highlight=False)


def _next_step(result: runner.CheckResult) -> str:
    """Always end with what to do next: the file to fix, or the lesson to read."""
    exercise = result.exercise
    command = f"python -m learning.check {exercise.name}"
    started = [p for p in result.parts if p.started]
    if not started:
        where = _lesson_label(exercise, result.parts[0].part)
        return f"Next: read {where}, write your code in {exercise.filename}, then run {command}"
    if not result.ok:
        return f"Next: fix {exercise.filename}, then run {command} again"
    names = " and ".join(p.part.name.capitalize() for p in started)
    done = f"the {names} parts pass" if len(started) > 1 else f"the {names} part passes"
    last = course.lesson_for(exercise.name, started[-1].part.name)
    following = course.lesson_after(last) if last else None
    if following is None:
        return f"Well done: {done}."
    return f"Well done: {done}. Next: lessons/{following.filename}."


if __name__ == "__main__":
    sys.exit(main())
