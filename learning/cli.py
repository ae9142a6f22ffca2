"""What every learner command shares: argument errors as one line, and the console."""

from __future__ import annotations

import argparse

from rich.console import Console


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


def make_console() -> Console:
    """Colour in a terminal, plain text when piped or when NO_COLOR is set (rich decides)."""
    return Console(highlight=False)
