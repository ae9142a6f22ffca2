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


def backup(path: Path, root: Path, move: bool = False) -> Path:
    """Copy the learner's file into the backups folder under a name that never collides (or,
    with ``move``, move it there: a file too large to read whole)."""
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
    if move:
        os.rename(path, target)  # (the backups are beside it: the same file system)
        return target
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
    # Read without waiting, and never more than a module's worth: what is not such a file
    # (a FIFO, a device, a link to /dev/zero, a file of gigabytes) is never read
    link = os.readlink(target) if target.is_symlink() else None
    unusual = ""  # what stands in the module's place, where it is no module
    try:
        current = state.read_small_file(target, state.MODULE_LIMIT, follow=True)
    except state.NotData as error:
        current, unusual = None, str(error)
    except OSError as error:
        console.print(f"reset: {escape(str(target))} cannot be read "
                      f"({escape(error.strerror or str(error))}); nothing changed.",
                      style="red", highlight=False)
        return 1
    stub = stub_path(exercise.name).read_text(encoding="utf-8")
    if current is not None and current.decode("utf-8", errors="replace") == stub:
        console.print(f"{exercise.filename} is already as the course ships it; nothing to do.",
                      highlight=False)
        return 0
    progress = state.load(root)
    # the grades go with the code, and with them the reference solution, if it was open
    relock = (f"; its reference solution locks again until every part passes (python -m "
              f"learning.solution {exercise.name} --force shows it anyway)"
              if solution.is_open(exercise, progress) else "")
    if os.path.lexists(target) and not options.yes:
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
        # a link's file is left where it is, and kept a copy of; what holds no data (a
        # FIFO, a device) is only removed; a file too large to copy is moved, whole
        if current is not None:
            saved = backup(target, root)
        elif unusual and link is None and target.is_file():
            saved = backup(target, root, move=True)
    except OSError as error:  # the backup folder cannot be written: the file stays as it was
        console.print(f"reset: could not back up {escape(str(target))} in "
                      f"{escape(str(state.state_path(root).parent / 'backups'))}: "
                      f"{escape(error.strerror or str(error))}; {escape(exercise.filename)} "
                      f"was left as it was", style="red", highlight=False)
        return 1
    # a link (to where the learner keeps their work) is replaced by the stub, not written
    # through: the file it leads to is left as it is
    try:
        if os.path.lexists(target) and (link is not None or not target.is_file()):
            target.unlink()  # (a folder was refused above)
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
    if link is not None:
        console.print(f"{escape(exercise.filename)} was a link to {escape(link)}: the link was "
                      "replaced, and what it led to was left as it is.", highlight=False)
    elif unusual and not saved:
        console.print(f"{escape(exercise.filename)} was {escape(unusual)}, which holds no "
                      "file's text: it was removed.", highlight=False)
    console.print(f"{exercise.filename} is restored{relock}. Run python -m learning.check "
                  f"{exercise.name} to see it reported as not started.", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main, "reset"))
