"""Keep the computed sections of the documents current: ``python -m learning.computed [--check]``.

The lessons, README.md and lab/RESULTS.md may hold computed sections.

A lesson marks a section it does not write by hand like this:

    <!-- computed: softmax table 1,2,3 -->
    ...whatever the explainer produced last time...
    <!-- end computed -->

The marker names an explainer topic, one of its ``BLOCKS`` and the numbers (separated by
commas) that the block takes as one list. Four topics are not explainers: ``hints`` (an
exercise's hints, as ``check --hint`` gives them), ``cases`` (the cases the check runs for one
part: ``cases EXERCISE PART``), ``facts`` (learning/explainers/facts.py: what
lab/probes/lesson_facts.py measured on a GPU, and which kernel triton_kernels' launchers pick) and
``memory_map`` (learning/grader/map_view.py: a kernel run in Triton's interpreter and drawn as
``check`` draws it).
This command regenerates every such section, and ``learning/course_files.sha256``, the digests
a check compares the course's own files with (learning.grader.integrity); ``--check`` only
reports the stale ones and exits 1, which is what the test suite does.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from learning import cli, explainers
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.course import LESSONS_DIR
from learning.explainers.page import Table, to_markdown
from learning.grader import integrity

MARKER = re.compile(
    r"(?P<open><!-- computed: (?P<topic>\w+) (?P<block>\w+)(?: (?P<args>[^>]*?))? -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- end computed -->)",
    re.DOTALL,
)


def _parse_args(text: str | None) -> list:
    if not text:
        return []
    values = []
    for item in text.split(","):
        number = float(item)
        values.append(int(number) if number.is_integer() and "." not in item else number)
    return values


def render_hints(exercise_name: str, parts_text: str | None) -> str:
    """The hints ``check --hint`` shows for the named parts of an exercise, as a lesson lists
    them: the same words and the same count as the command's."""
    from learning.grader import registry

    exercise = registry.find(exercise_name)
    names = (parts_text or "").split(",") if parts_text else [p.name for p in exercise.parts]
    lines = []
    for name in names:
        part = exercise.part(name.strip())
        command = f"python -m learning.check {exercise.name} --part {part.name} --hint N"
        lines.append(f"The {part.name.capitalize()} part has {len(part.hints)} hints; "
                     f"`{command}` shows hint N, and without N the next one:")
        lines.append("")
        for level, hint in enumerate(part.hints, 1):
            lines += _hint_item(level, hint)
        lines.append("")
    return "\n".join(lines).rstrip()


def _hint_item(level: int, hint: str) -> list[str]:
    """One hint as a list item: its prose lines, and its code lines (those indented by four
    spaces, as ``check --hint`` prints them) as a code block inside the item."""
    lines, code = [], []
    for line in hint.splitlines():
        if line.startswith("    "):
            code.append(line[4:])
            continue
        if code:
            lines += ["", "   ```python", *(f"   {c}" for c in code), "   ```", ""]
            code = []
        lines.append(f"{level}. {line}" if not lines else f"   {line}")
    if code:
        lines += ["", "   ```python", *(f"   {c}" for c in code), "   ```"]
    return lines


def render_cases(exercise_name: str, part_name: str | None) -> str:
    """The cases the check runs for one part of an exercise, as data: what each holds, what it
    is held to and where it runs."""
    from learning.grader import registry

    exercise = registry.find(exercise_name)
    part = exercise.part((part_name or "").strip())
    exact = part.returns == "exact"  # plain data: equal or not, no tolerance
    rows = []
    for case in part.cases:
        tolerance = f"raises {case.raises}" if case.raises else "exact" if exact else \
            (case.tolerance or part.tolerance).describe()
        rows.append((case.name, case.purpose, tolerance,
                     "GPU only" if case.gpu_only else "everywhere"))
    caption = "An answer passes when it equals the reference's, value for value and of the " \
        "same kind (a whole number where the reference has one)." if exact else \
        "A value passes when |got - want| <= atol + rtol * |want|, want the float64 " \
        "reference computed from the same (rounded) inputs."
    return to_markdown(Table(("Case", "What it tests", "Tolerance", "Runs"), tuple(rows), caption))


def render_block(topic: str, block: str, args_text: str | None) -> str:
    if topic == "hints":  # not an explainer: the exercise's own hints, block = its name
        return render_hints(block, args_text)
    if topic == "cases":  # not an explainer: the check's own cases, block = the exercise
        return render_cases(block, args_text)
    if topic == "memory_map":  # not an explainer: a kernel run in the interpreter, drawn
        from learning.grader import map_view

        return map_view.lesson_block(block, _parse_args(args_text))
    if topic == "facts":  # not an explainer: GPU measurements and triton_kernels' routing
        from learning.explainers import facts

        return to_markdown(facts.BLOCKS[block](_parse_args(args_text)))
    module = explainers.load(topic)
    function = module.BLOCKS[block]
    return to_markdown(function(_parse_args(args_text)))


def refresh(text: str) -> str:
    def replace(match: re.Match) -> str:
        body = render_block(match["topic"], match["block"], match["args"])
        return f"{match['open']}{body}\n{match['close']}"

    return MARKER.sub(replace, text)


def documents(directory: Path = LESSONS_DIR) -> list[Path]:
    """Every document with computed sections: the lessons, the README, and the lab's results
    page and notes."""
    root = directory.parent
    extra = [root / "README.md", root / "lab" / "RESULTS.md",
             *sorted((root / "lab" / "notes").glob("*.md"))]
    return sorted(directory.glob("*.md")) + [path for path in extra if path.exists()]


def stale_lessons(directory: Path = LESSONS_DIR) -> list[Path]:
    return [path for path in documents(directory)
            if refresh(path.read_text(encoding="utf-8")) != path.read_text(encoding="utf-8")]


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    parser = CommandParser(prog="python -m learning.computed",
                           description="Regenerate the computed sections of the lessons.")
    parser.add_argument("--check", action="store_true", help="report stale lessons, change none")
    try:
        options = parser.parse_args(argv)
    except HelpShown as shown:
        return shown.code
    except ArgumentError as error:
        console.print(f"computed: {error}", style="red")
        return 2
    stale = stale_lessons()
    lab_list = integrity.COURSE_ROOT / integrity.LAB_LIST
    lab_stale = not lab_list.exists() or lab_list.read_text(encoding="utf-8") != \
        integrity.lab_text()
    if lab_stale and not options.check:  # before the digests: the list is one of the files
        lab_list.write_text(integrity.lab_text(), encoding="utf-8")
        console.print(f"updated {lab_list.name}")
    manifest_stale = integrity.changed()
    if options.check:
        if lab_stale:
            console.print(f"stale: {lab_list.name}, the lab's Python files (run python -m "
                          "learning.computed)")
        for path in stale:
            console.print(f"stale: {path.name} (run python -m learning.computed)")
        if manifest_stale:
            console.print(f"stale: {integrity.MANIFEST.name}, the digests of the course's files "
                          f"({', '.join(manifest_stale[:3])}) (run python -m learning.computed)")
        return 1 if stale or manifest_stale or lab_stale else 0
    for path in stale:
        path.write_text(refresh(path.read_text(encoding="utf-8")), encoding="utf-8")
        console.print(f"updated {path.name}")
    if manifest_stale:  # after the documents: a lesson is no course file, but be in order
        integrity.MANIFEST.write_text(integrity.manifest_text(), encoding="utf-8")
        console.print(f"updated {integrity.MANIFEST.name} ({len(manifest_stale)} file(s))")
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main, "computed"))
