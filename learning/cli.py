"""What every learner command shares: argument errors as one line, and the console."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import os
import re
import signal
import sys
import threading
from pathlib import Path

from rich.console import Console
from rich.text import Text

# The course's own non-ASCII characters, and what they become on a terminal that cannot show them.
ASCII_FALLBACK = str.maketrans({"·": "*", "—": "-", "–": "-", "×": "x", "→": "->", "…": "...",
                                "≤": "<=", "≥": ">=", "−": "-", "’": "'", "“": '"', "”": '"'})


class ArgumentError(Exception):
    """Bad command-line input: reported in one line with exit status 2, never a traceback."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that raises ArgumentError instead of printing usage and exiting."""

    def error(self, message: str):
        raise ArgumentError(f"{message} (see {self.prog} --help)")

    def parse_args(self, args=None, namespace=None):
        try:
            return super().parse_args(args, namespace)
        except SystemExit as done:  # --help printed its text
            raise HelpShown(done.code or 0) from None


def folder(text: str) -> Path:
    """An argparse type for --root: a folder that exists, or a one-line error."""
    path = Path(text)
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text} {what}")
    return path


def positive(unit: str, largest: float):
    """An argparse type for a limit: a finite number above 0 and at most ``largest`` (nan,
    inf and 1e30 would reach the clocks and the memory cap as values they cannot take)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not 0 < value <= largest:  # also false for nan
            raise argparse.ArgumentTypeError(
                f"{text} must be a number of {unit} above 0 and at most {largest:g}")
        return value

    return parse


class HelpShown(Exception):
    """--help was printed; the command should return this exit status."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class _AsciiSafe:
    """A text stream for an output that cannot encode everything (LANG=C, PYTHONIOENCODING=
    ascii): known characters get ASCII stand-ins, anything else becomes '?', never an error."""

    def __init__(self, stream, encoding: str):
        self._stream = stream
        self._encoding = encoding

    def write(self, text: str) -> int:
        text = text.translate(ASCII_FALLBACK)
        safe = text.encode(self._encoding, errors="replace").decode(self._encoding)
        return self._stream.write(safe)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _can_encode(stream, sample: str = "·—×") -> str | None:
    """None if ``stream`` takes ``sample``, else its encoding."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        codecs.lookup(encoding)
        sample.encode(encoding)
    except (LookupError, UnicodeEncodeError):
        return encoding if _known(encoding) else "ascii"
    return None


def _known(encoding: str) -> bool:
    try:
        codecs.lookup(encoding)
        return True
    except LookupError:
        return False


# A course command as the messages suggest it: the module, then an exercise or a path, then
# options with their values ("python -m learning.check softmax --hint 2").
COMMAND = re.compile(r"python3? -m learning\.[a-z_]+(?: (?!-)[\w./-]+)?"
                     r"(?: --[a-z][\w-]*(?:[ =](?!-)[\w./-]+)?)*")
# Stands for a space inside a command while rich wraps a message: not whitespace, so rich never
# breaks a line there, and one cell wide, as the space it replaces; the output stream turns it
# back into a space.
_JOINED = "\ue000"


def keep_commands_whole(text: str, longest: int = 64) -> str:
    """``text`` with the spaces inside each suggested command of at most ``longest``
    characters joined (see _JOINED). A longer one (a bench command with its output paths) is
    left to wrap at its spaces: joined, it would not fit an indented line and rich would cut
    it anywhere."""
    return COMMAND.sub(lambda found: found.group(0).replace(" ", _JOINED)
                       if len(found.group(0)) <= longest else found.group(0), text)


# Characters a terminal acts on instead of showing: C0 and C1 controls but the tab and the
# newline (ESC starts the sequences that clear the screen, move the cursor, set the title or
# write the clipboard; a carriage return or a backspace overwrites what was printed), and the
# marks that reorder text from right to left.
_INERT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                    "\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\r": "\\r", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\0": "\\0"}


def visible(text: str) -> str:
    """``text`` with every character a terminal would act on written out as an escape
    (ESC as \\x1b, a carriage return as \\r, a right-to-left override as \\u202e), so
    that text from the learner's code is shown, never executed by the terminal."""
    return _INERT.sub(lambda found: _SHORT.get(found.group()) or
                      (f"\\x{ord(found.group()):02x}" if ord(found.group()) < 0x100
                       else f"\\u{ord(found.group()):04x}"), text)


def visible_text(text: Text) -> Text:
    """A rich Text, with its control characters shown as ``visible`` shows them (its styles
    are dropped then: a line that holds one is the learner's text, not the course's)."""
    if not _INERT.search(text.plain):
        return text
    return Text(visible(text.plain), style=text.style)


class CourseConsole(Console):
    """A rich Console that never wraps a line inside a suggested command that fits a line, so
    that a command copied from an 80-column terminal or a piped log runs as printed, and that
    shows every control character of the text it is given instead of passing it to the
    terminal (``visible``)."""

    def print(self, *objects, **options) -> None:
        longest = max(self.width - 16, 20)  # room for an indent and a word or two before it
        super().print(*(keep_commands_whole(o, longest) if isinstance(o, str) else
                        visible_text(o) if isinstance(o, Text) else o
                        for o in objects), **options)

    def render_str(self, text: str, **options):
        return super().render_str(visible(text), **options)


# Spaces at the end of a line (rich leaves the one it wrapped at), before any colour codes
_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)(?=\n)")


class _Unjoined:
    """The stream under a CourseConsole: joined spaces become spaces again, and no line ends
    in a space (rich keeps the space it wraps a line at)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(_TRAILING.sub(r"\1", text.replace(_JOINED, " ")))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def make_console() -> Console:
    """Colour in a terminal, plain text when piped or when NO_COLOR is set (rich decides);
    ASCII stand-ins on an output that cannot encode the course's characters; suggested
    commands never broken across lines."""
    encoding = _can_encode(sys.stdout)
    stream = sys.stdout if encoding is None else _AsciiSafe(sys.stdout, encoding)
    # emoji off: ":thumbs_up:" in the learner's output is shown as written, not as a picture
    return CourseConsole(highlight=False, emoji=False, file=_Unjoined(stream),
                         width=_usable_width())


# Narrower than this, rich prints nothing at all (COLUMNS=0) or a word a line
MIN_COLUMNS = 20


def _usable_width() -> int | None:
    """None to let rich decide (COLUMNS, the terminal's size, or 80), or 80 where COLUMNS is
    set to something no line fits in (0, a negative number, a word)."""
    columns = os.environ.get("COLUMNS")
    if columns is None:
        return None
    try:
        return None if int(columns) >= MIN_COLUMNS else 80
    except ValueError:
        return 80


class Stopped(KeyboardInterrupt):
    """The command was asked to stop by a signal (SIGTERM, or SIGHUP when its terminal
    closed): raised like Ctrl-C's KeyboardInterrupt, so that the same clean-up runs (a check
    ends its worker and everything the learner's code started) before the command exits."""

    def __init__(self, number: int):
        super().__init__(number)
        self.number = number


def _stop(number, frame):
    for name in ("SIGTERM", "SIGHUP"):  # a second signal must not cut the clean-up short
        with contextlib.suppress(AttributeError, ValueError, OSError):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    raise Stopped(number)


def stop_on_signals() -> None:
    """Turn SIGTERM and SIGHUP into ``Stopped`` in this process (from its main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGHUP"):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            signal.signal(getattr(signal, name), _stop)


def run(main, prog: str) -> int:
    """Run a command's ``main``; Ctrl-C ends it with one line and status 130 (the shell's
    code for an interrupt) instead of a traceback, SIGTERM and SIGHUP with 128 and their
    number. A check's worker, and whatever it started, is ended on the way out."""
    stop_on_signals()
    try:
        return main()
    except Stopped as stopped:
        with contextlib.suppress(OSError, ValueError):  # a closed terminal takes no line
            print(f"{prog}: stopped ({_signal_name(stopped.number)})", file=sys.stderr)
        return 128 + stopped.number
    except KeyboardInterrupt:
        print(f"{prog}: stopped (Ctrl-C)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of the output went away (progress --json | head)
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit would fail again
        return 1


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
