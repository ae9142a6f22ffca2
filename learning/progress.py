"""Where you are in the course: ``python -m learning.progress``.

Lists every lesson in reading order with the exercise it grades, each part's grade from its
last check, and the next thing to do. Grades come from ``.course-state/progress.json``, which
``learning.check`` writes; delete it at any time, and re-checking rebuilds it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from learning import cli, course
from learning.check import default_root
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.grader import mode as kernel_mode
from learning.grader import registry, state

GRADE_STYLE = {"passed": "green", "failed": "red", "missing": "red", "not-started": "yellow"}


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.progress",
                           description="Show every lesson, your grades and what to do next.")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--root", type=cli.folder, metavar="DIR",
                        help="the folder holding your exercise files (default: the course folder)")
    return parser


def _in_declared_order(exercise, names) -> list[str]:
    """The parts of ``exercise`` among ``names``, in the order the exercise declares them
    (python first), whichever of them its lesson starts with."""
    if exercise is None:
        return []
    return [p.name for p in exercise.parts if p.name in names]


def rows(progress: state.State, root: Path | None = None) -> list[dict]:
    """One row per lesson part: what it is, whether it exists yet, and its last grade; given
    the course folder ``root``, whether that grade is of the exercise file as it is now."""
    exercises = {e.name: e for e in registry.all_exercises()}
    result = []
    digests: dict[str, str] = {}
    for lesson in course.LESSONS:
        exercise = exercises.get(lesson.exercise)
        graded = _in_declared_order(exercise, (lesson.part, *lesson.also))
        grades = {}
        for part in graded:
            grade = progress.grade(lesson.exercise, part)
            grades[part] = None if grade is None else {
                "status": grade.status, "passed": grade.passed, "total": grade.total,
                "checked_at": grade.checked_at}
            if grade is not None and grade.source and root is not None:
                if exercise.name not in digests:
                    digests[exercise.name] = state.file_digest(Path(root) / exercise.filename)
                # false: the file was edited (or replaced) after this grade was recorded
                grades[part]["of_current_file"] = grade.source == digests[exercise.name]
        result.append({"lesson": lesson.number, "title": lesson.title,
                       "file": f"lessons/{lesson.filename}", "available": lesson.available,
                       "exercise": f"{lesson.exercise}.py" if graded else None,  # 10: none
                       "parts": grades,
                       # Why the module did not import at its last check (the grades are of
                       # the last code that did), or null.
                       "does_not_import": (progress.does_not_import(lesson.exercise) or None)
                       if graded else None})
    return result


def next_step(progress: state.State) -> str:
    """The first lesson in reading order that is not done, as check's last line names it
    (without Triton, the first whose Python part is not done)."""
    exercises = {e.name: e for e in registry.all_exercises()}
    kernels = kernel_mode.triton_missing() is None
    graded = {name: tuple(p.name for p in e.parts if kernels or not p.needs_kernels)
              for name, e in exercises.items()}
    lesson = course.next_lesson(progress, graded, kernels)
    if lesson is None:
        return "Every available lesson's exercise passes. Well done." if kernels else \
            kernel_mode.python_parts_done_line()
    exercise = exercises[lesson.exercise]
    if progress.does_not_import(exercise.name):
        return (f"Fix {exercise.filename} (it did not import at its last check), then run "
                f"python -m learning.check {exercise.name}")
    for part in _in_declared_order(exercise, (lesson.part, *lesson.also)):
        if part not in graded[exercise.name]:
            continue
        grade = progress.grade(exercise.name, part)
        if grade is None or grade.status == "not-started":  # checked, but nothing written yet
            return (f"Read lessons/{lesson.filename}, then run "
                    f"python -m learning.check {exercise.name}")
        if grade.status != "passed":
            return (f"Fix {exercise.filename} ({part} part), then run "
                    f"python -m learning.check {exercise.name}")
    return f"Read lessons/{lesson.filename}: it has nothing to grade"


def _grade_text(grade: dict | None, here: bool = True) -> tuple[str, str]:
    if grade is None:
        return ("not checked", "dim") if here else ("needs Triton", "dim")
    if grade["status"] in ("not-started", "missing"):
        return grade["status"].replace("-", " "), GRADE_STYLE[grade["status"]]
    counted = f"{grade['passed']}/{grade['total']}"
    if grade["status"] != "passed" and grade["passed"] == grade["total"]:
        # every case right, the part still failed (the GPU compiler rejected the kernel, say):
        # said in words, not only in a colour a pipe or a reader may not see
        counted += ", failed"
    return counted, GRADE_STYLE.get(grade["status"], "red")


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    try:
        options = build_parser().parse_args(argv)
    except HelpShown as shown:
        return shown.code
    except ArgumentError as error:
        console.print(f"progress: {escape(str(error))}", style="red", highlight=False)
        return 2
    root = options.root or default_root()
    progress = state.load(root)
    table_rows = rows(progress, root)
    if options.json:
        print(json.dumps({"lessons": table_rows, "next": next_step(progress),
                          "note": progress.note or None}, indent=2))
        return 0
    if progress.note:
        console.print(f"note: {escape(progress.note)}", style="yellow", highlight=False)
    table = Table(title="Your progress", header_style="bold", show_edge=False)
    # a file name is never split (attention_backward.py, at 80 columns): the lesson's title,
    # which is words, wraps instead
    longest = max([len(str(row["exercise"])) for row in table_rows] + [len("Exercise")])
    for column in ("#", "Lesson", "Exercise", "Part", "Grade"):
        table.add_column(column, overflow="fold",
                         min_width=longest if column == "Exercise" else None)
    # Without Triton, the kernel parts not checked yet say so instead of "not checked".
    elsewhere = set() if kernel_mode.triton_missing() is None else \
        {(f"{e.name}.py", p.name) for e in registry.all_exercises() for p in e.parts
         if p.needs_kernels}
    for row in table_rows:
        title = escape(row["title"]) if row["available"] else f"[dim]{escape(row['title'])} " \
                                                               "(coming)[/dim]"
        if not row["parts"]:  # a lesson to read and measure, with nothing graded
            table.add_row(row["lesson"], title, "nothing", "none",
                          "[dim]nothing to grade[/dim]")
        for index, (part, grade) in enumerate(row["parts"].items()):
            text, style = _grade_text(grade, (row["exercise"], part) not in elsewhere)
            if row["does_not_import"]:  # checked or not, the file as it is now will not load
                text, style = f"{text} (does not import now)", "red"
            elif grade is not None and grade.get("of_current_file") is False:
                text = f"{text} (file changed since)"
            table.add_row(row["lesson"] if index == 0 else "", title if index == 0 else "",
                          row["exercise"] if index == 0 else "", part,
                          f"[{style}]{escape(text)}[/{style}]")
    console.print(table)
    console.print(f"\nNext: {escape(next_step(progress))}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main, "progress"))
