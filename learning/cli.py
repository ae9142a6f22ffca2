"""What every learner command shares: argument errors as one line, and the console."""

from __future__ import annotations

import argparse
import codecs
import sys

from rich.console import Console

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


def make_console() -> Console:
    """Colour in a terminal, plain text when piped or when NO_COLOR is set (rich decides);
    ASCII stand-ins on an output that cannot encode the course's characters."""
    encoding = _can_encode(sys.stdout)
    if encoding is None:
        return Console(highlight=False)
    return Console(highlight=False, file=_AsciiSafe(sys.stdout, encoding))


def run(main, prog: str) -> int:
    """Run a command's ``main``; Ctrl-C ends it with one line and status 130 (the shell's
    code for an interrupt) instead of a traceback. A check's worker, in a process group of its
    own, is ended by the grader on the way out."""
    try:
        return main()
    except KeyboardInterrupt:
        print(f"{prog}: stopped (Ctrl-C)", file=sys.stderr)
        return 130
