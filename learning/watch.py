"""Re-check an exercise every time you save it: ``python -m learning.watch softmax``.

Uses the watchdog library to hear about saves, or checks the file's time stamp twice a second
where watchdog is missing. Ctrl-C stops it.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from rich.markup import escape

from learning import check, cli
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.grader import registry, state

POLL_SECONDS = 0.5
SETTLE_SECONDS = 0.2  # editors often write a file in several steps
# Checks in a row while which the module changed, after which watch takes the change for the
# module's own (written when imported) rather than a save
REWRITTEN_CHECKS = 2


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.watch",
                           description="Re-run the check each time the exercise file is saved.")
    parser.add_argument("exercise", help="the exercise to watch, e.g. softmax")
    parser.add_argument("--part", action="append", dest="parts", metavar="PART",
                        help="grade only this part; may be repeated")
    parser.add_argument("--interpret", action="store_true",
                        help="run kernels in Triton's interpreter even on a GPU machine")
    parser.add_argument("--poll", action="store_true",
                        help="check the file's time stamp instead of using watchdog")
    parser.add_argument("--root", type=cli.folder, metavar="DIR",
                        help="the folder holding your exercise files (default: the course folder)")
    return parser


EDIT_EVENTS = ("modified", "created", "moved", "deleted", "closed")


def _signature(path: Path):
    """What changes when the file is saved: its inode (a save by rename makes a new file), time
    and size; None while the file is missing (halfway through some editors' saves)."""
    try:
        stat = path.stat()
        return stat.st_ino, stat.st_mtime_ns, stat.st_size
    except OSError:
        return None


def _content(path: Path) -> bytes | None:
    """The file's bytes (None if it cannot be read as a regular file): what a check grades."""
    try:
        return state.read_small_file(path, 1 << 24)
    except (OSError, state.NotData):
        return None


class Waiter:
    """Blocks until the watched file changes, with watchdog or by polling."""

    def __init__(self, path: Path, poll: bool):
        self.path = path
        self.checked = _signature(path)  # the file as the coming or last check reads it
        self.checked_text = _content(path)
        self.changed = threading.Event()
        self.observer = None
        self.method = "polling"
        if not poll:
            self._start_watchdog()

    def _start_watchdog(self):
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            return
        target = str(self.path.resolve())
        changed = self.changed

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event):
                # Reading the file (the check does) gives "opened" and "closed_no_write"
                # events on Linux: only a write, a new file or a rename is an edit.
                if event.event_type not in EDIT_EVENTS:
                    return
                paths = {getattr(event, "src_path", ""), getattr(event, "dest_path", "")}
                if target in {str(Path(p).resolve()) for p in paths if p}:
                    changed.set()

        observer = Observer()
        observer.schedule(Handler(), str(self.path.parent.resolve()), recursive=False)
        observer.start()
        self.observer, self.method = observer, "watchdog"

    def wait(self):
        """Return once the file differs from the one last checked and has stayed the same, with
        no event about it, for SETTLE_SECONDS. So one save gives one return, with the whole new
        file, however many steps it takes: a write in parts, a temporary file renamed over the
        module, or the module moved away and a new one written (missing in between, which is
        not a change to check)."""
        while True:
            if self.observer is not None:
                self.changed.wait(POLL_SECONDS)
                self.changed.clear()
            else:
                time.sleep(POLL_SECONDS)
            now = _signature(self.path)
            if now is None or now == self.checked:
                continue
            while True:
                self.changed.clear()
                time.sleep(SETTLE_SECONDS)
                later = _signature(self.path)
                if later == now and not self.changed.is_set():
                    break
                now = later
            if now is not None and now != self.checked:
                self.checked = now
                text = _content(self.path)
                if text is not None and text == self.checked_text:
                    continue  # touched, not edited (a module that sets its own time, say)
                self.checked_text = text
                return

    def changed_since_check(self) -> bool:
        """Whether the file's contents differ from the ones the last check was started for."""
        return _content(self.path) != self.checked_text

    def accept(self):
        """Take the file as it is now for checked: the next change from here wakes ``wait``."""
        self.checked, self.checked_text = _signature(self.path), _content(self.path)

    def stop(self):
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=2)


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    try:
        options = build_parser().parse_args(argv)
        exercise = registry.find(options.exercise)
        for name in options.parts or ():
            exercise.part(name)
    except HelpShown as shown:
        return shown.code
    except (ArgumentError, registry.UnknownExercise) as error:
        console.print(f"watch: {escape(str(error))}", style="red", highlight=False)
        return 2
    except KeyError as error:
        console.print(f"watch: {escape(error.args[0])}", style="red", highlight=False)
        return 2
    root = options.root or check.default_root()
    path = root / exercise.filename
    arguments = [exercise.name, "--root", str(root), "--watching"]
    arguments += [f"--part={p}" for p in options.parts or ()]
    arguments += ["--interpret"] if options.interpret else []
    waiter = Waiter(path, options.poll)
    cli.stop_on_signals()
    changed_during = 0  # checks in a row while which the module changed
    try:
        while True:
            console.clear()
            console.print(f"[dim]watching {escape(str(path))} ({waiter.method}); Ctrl-C to "
                          "stop[/dim]", highlight=False)
            check.main(arguments)
            changed_during = changed_during + 1 if waiter.changed_since_check() else 0
            if changed_during >= REWRITTEN_CHECKS:
                # a save in the middle of a check is checked next; one in the middle of every
                # check is the module rewriting itself when it is imported, and checking it
                # again would never end
                waiter.accept()
                changed_during = 0
                console.print(f"\n{exercise.filename} changed while each of the last "
                              f"{REWRITTEN_CHECKS} checks ran: it seems to rewrite itself when "
                              "it is imported. watch takes it as it is now and checks it again "
                              "at your next save.", style="yellow", highlight=False)
            console.print(f"\n[dim]{time.strftime('%H:%M:%S')}: waiting for you to save "
                          f"{exercise.filename}...[/dim]", highlight=False)
            waiter.wait()
    except cli.Stopped as stopped:  # its terminal closed, or it was asked to end
        return 128 + stopped.number
    except KeyboardInterrupt:
        console.print("\nstopped watching.", highlight=False)
        return 0
    finally:
        waiter.stop()


if __name__ == "__main__":
    sys.exit(main())
