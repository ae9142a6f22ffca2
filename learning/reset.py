"""Start an exercise over: ``python -m learning.reset softmax``.

Restores the exercise module as the course ships it, after saving yours as a timestamped
backup in ``.course-state/backups/``. Asks first unless ``--yes`` is given.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from rich.markup import escape

from learning import cli, solution
from learning.check import default_root
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.exercises import stub_path
from learning.grader import registry, state
from learning.grader.state import STATE_DIR


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.reset",
                           description="Restore an exercise module, backing up yours first.")
    parser.add_argument("exercise", help="the exercise to restore, e.g. softmax")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--root", type=cli.folder, metavar="DIR",
                        help="the folder holding your exercise files (default: the course folder)")
    return parser


def backup(path: Path, root: Path) -> Path:
    """Copy the learner's file into the backups folder under a name that never collides."""
    folder = root / STATE_DIR / "backups"
    folder.mkdir(parents=True, exist_ok=True)
    # written only into a folder of its own, as a new file: a link there (left by code the
    # check ran, say) would carry the learner's file wherever it points
    if os.path.realpath(folder) != os.path.abspath(folder):
        raise OSError(f"{folder} leads elsewhere through a link")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = folder / f"{path.stem}-{stamp}.py"
    counter = 1
    while target.exists() or target.is_symlink():
        counter += 1
        target = folder / f"{path.stem}-{stamp}-{counter}.py"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(path.read_bytes())
    shutil.copystat(path, target)
    return target


def can_ask() -> bool:
    """Whether a question can be answered: input from a terminal, not a pipe or a script."""
    return bool(sys.stdin) and sys.stdin.isatty()


def confirm(console, question: str) -> bool:
    console.print(question, end=" ", highlight=False, markup=False)  # "[y/N]" is no style
    try:
        return input().strip().lower() in ("y", "yes")
    except EOFError:  # Ctrl-D: a no, and the line the question is on still needs its end
        console.print()
        return False


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    try:
        options = build_parser().parse_args(argv)
        exercise = registry.find(options.exercise)
    except HelpShown as shown:
        return shown.code
    except (ArgumentError, registry.UnknownExercise) as error:
        console.print(f"reset: {escape(str(error))}", style="red", highlight=False)
        return 2
    root = options.root or default_root()
    target = root / exercise.filename
    if target.is_dir():
        console.print(f"reset: {escape(str(target))} is a folder, not the exercise's module; "
                      "nothing changed.", style="red", highlight=False)
        return 2
    stub = stub_path(exercise.name).read_text(encoding="utf-8")
    if target.exists() and target.read_text(encoding="utf-8", errors="replace") == stub:
        console.print(f"{exercise.filename} is already as the course ships it; nothing to do.",
                      highlight=False)
        return 0
    progress = state.load(root)
    # the grades go with the code, and with them the reference solution, if it was open
    relock = (f"; its reference solution locks again until every part passes (python -m "
              f"learning.solution {exercise.name} --force shows it anyway)"
              if solution.is_open(exercise, progress) else "")
    if target.exists() and not options.yes:
        unchanged = f"Nothing changed: {exercise.filename} is as it was, and no backup was made."
        if not can_ask():
            console.print(f"{unchanged} reset asks before it replaces your file, and cannot ask "
                          "here (the input is not a terminal); pass --yes to reset without "
                          "asking.", highlight=False)
            return 1
        question = (f"Replace {target} with the original stub? Your version is backed up "
                    f"first{relock}. [y/N]")
        if not confirm(console, question):
            console.print(unchanged, highlight=False)
            return 1
    saved = None
    try:
        saved = backup(target, root) if target.exists() else None
    except OSError as error:  # the backup folder cannot be written: the file stays as it was
        console.print(f"reset: could not back up {escape(str(target))} in "
                      f"{escape(str(state.state_path(root).parent / 'backups'))}: "
                      f"{escape(error.strerror or str(error))}; {escape(exercise.filename)} "
                      f"was left as it was", style="red", highlight=False)
        return 1
    try:
        target.write_text(stub, encoding="utf-8")
    except OSError as error:  # a read-only folder, a full disk
        kept = f"; your version is saved as {saved}" if saved else ""
        console.print(f"reset: could not restore {escape(str(target))}: "
                      f"{escape(error.strerror or str(error))}{escape(kept)}", style="red",
                      highlight=False)
        return 1
    progress.forget(exercise.name)  # the old grades describe code that is gone
    state.save(root, progress)
    if saved:
        console.print(f"Your version is saved as {escape(str(saved))}", highlight=False)
    console.print(f"{exercise.filename} is restored{relock}. Run python -m learning.check "
                  f"{exercise.name} to see it reported as not started.", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main, "reset"))
