"""Print a worked example: ``python -m learning.explain softmax [--input 4,5,6]``.

Every number is computed when the command runs. Needs no GPU, no torch and no triton.
"""

from __future__ import annotations

import difflib
import math
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from learning import cli, explainers
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.explainers.page import Heading, Page, Steps, Table, Text

MAX_INPUT = 64


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.explain",
                           description="Print a topic's worked example, computed now.")
    parser.add_argument("topic", nargs="?", help=f"one of: {', '.join(explainers.TOPICS)}")
    forms = "; ".join(f"{topic}: {form}" for topic, form in explainers.inputs().items())
    parser.add_argument("--input", metavar="X,Y,...",
                        help=f"your own input, comma-separated, as the topic takes it ({forms})")
    return parser


def parse_row(text: str) -> list[float]:
    """'4, 5, 6' -> [4.0, 5.0, 6.0]; a clear ArgumentError for anything else."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or all(not item for item in items):
        raise ArgumentError("--input needs at least one number, e.g. --input 4,5,6")
    row = []
    for item in items:
        try:
            value = float(item)
        except ValueError:
            raise ArgumentError(f"--input: '{item}' is not a number (expected e.g. 4,5,6)") \
                from None
        if math.isnan(value):
            raise ArgumentError("--input: nan is no number a worked example can use; use "
                                "finite numbers (or -inf where the topic allows it)")
        if value == math.inf:  # typed as inf, or a number too large for a float (1e400)
            raise ArgumentError(f"--input: '{item.strip()}' is +inf, and every topic's "
                                "arithmetic turns it into nan (inf - inf); use finite numbers "
                                "(or -inf where the topic allows it)")
        row.append(value)
    if len(row) > MAX_INPUT:
        raise ArgumentError(f"--input: {len(row)} numbers is more than the {MAX_INPUT} a "
                            "worked table can show")
    return row


def find_topic(name: str | None):
    if name is None:  # the topics are what someone typing the bare command is looking for
        raise ArgumentError(f"name a topic, e.g. python -m learning.explain softmax; topics: "
                            f"{', '.join(explainers.TOPICS)}")
    name = name.strip().removesuffix(".py")
    if name not in explainers.TOPICS:
        close = difflib.get_close_matches(name, list(explainers.TOPICS), n=1)
        hint = f"did you mean '{close[0]}'?" if close else \
            f"known topics: {', '.join(explainers.TOPICS)}"
        raise ArgumentError(f"unknown topic '{name}'; {hint}")
    return explainers.load(name)


def _glue_input(argv: list[str]) -> list[str]:
    """Let ``--input -3,-2,-1`` through: argparse would take the negative row for an option."""
    glued, rest = [], list(argv)
    while rest:
        item = rest.pop(0)
        if item == "--input" and rest:
            item = f"--input={rest.pop(0)}"
        glued.append(item)
    return glued


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    argv = sys.argv[1:] if argv is None else argv
    try:
        options = build_parser().parse_args(_glue_input(argv))
        explainer = find_topic(options.topic)
        row = parse_row(options.input) if options.input is not None else None
        page = explainer.page(row)  # a topic may reject an input it cannot draw
    except HelpShown as shown:
        return shown.code
    except ArgumentError as error:
        # one line, however wide: the terminal folds it, a pipe keeps it whole
        console.print(f"explain: {escape(str(error))}", style="red", soft_wrap=True)
        return 2
    render(console, page)
    return 0


def render(console: Console, page: Page):
    console.print(f"[bold]{escape(page.title)}[/bold]")
    for block in page.blocks:
        if isinstance(block, Heading):
            console.print(f"\n[bold]{escape(block.text)}[/bold]")
        elif isinstance(block, Text):
            console.print(escape(block.text))
        elif isinstance(block, Table):
            _print_table(console, block.columns, block.rows)
            if block.caption:
                console.print(escape(block.caption))
        elif isinstance(block, Steps):
            rows = [(s.name, s.formula, s.kind, s.value) for s in block.steps]
            _print_table(console, ("Step", "Formula", "Kind", "Value"), rows, numeric=False)
        else:
            raise TypeError(f"cannot render {type(block).__name__}")


def _print_table(console: Console, columns, rows, numeric: bool = True):
    """A table whose cells never break inside a number or a word, its columns narrowed to fit
    the console (80 columns, or piped); when even the narrowest is too wide, each row becomes a
    short list of its cells."""
    widths = _column_widths(columns, rows, console.width)
    if widths is None:
        for row in rows:
            console.print(escape(f"{columns[0]}: {row[0]}"), highlight=False)
            for column, cell in zip(columns[1:], row[1:]):
                if str(cell).strip():
                    console.print(escape(f"  {column}: {cell}"), highlight=False)
        return
    console.print(_rich_table(columns, rows, widths, numeric))


#: A table whose narrowed columns would fold a cell over more lines than this is printed as
#: lists instead: a shape "4096 x 4096 x 4096" folded one word a line no longer reads as one.
MAX_CELL_LINES = 4


def _lines_needed(cell: str, width: int) -> int:
    """Lines ``cell`` takes folded at word boundaries into ``width`` columns."""
    lines, used = 1, 0
    for word in cell.split():
        if used and used + 1 + len(word) > width:
            lines, used = lines + 1, len(word)
        else:
            used += len(word) + (1 if used else 0)
    return lines


def _column_widths(columns, rows, room: int) -> list[int] | None:
    """Each column's width: its longest cell, narrowed widest first until the table fits in
    ``room`` but never below the column's longest word; None when even that does not fit, or
    when it fits only by folding a cell over more than MAX_CELL_LINES lines. Left to rich, a
    table too wide loses the same amount from every column, and a column left narrower than
    its longest word is cropped: the end of a number silently goes."""
    cells = [[str(column), *(str(row[i]) for row in rows)] for i, column in enumerate(columns)]
    longest = [max(len(cell) for cell in column) for column in cells]
    shortest = [max(len(word) for cell in column for word in cell.split() or [""])
                for column in cells]
    widths, spare = list(longest), room - 3 * len(columns)  # a space each side, a rule each
    while sum(widths) > spare:
        narrowable = [i for i, width in enumerate(widths) if width > shortest[i]]
        if not narrowable:
            return None
        widths[max(narrowable, key=lambda i: widths[i])] -= 1
    if any(_lines_needed(cell, widths[i]) > MAX_CELL_LINES
           for i, column in enumerate(cells) for cell in column):
        return None
    return widths


def _rich_table(columns, rows, widths, numeric: bool = True) -> RichTable:
    table = RichTable(show_edge=False, header_style="bold")
    for column, width in zip(columns, widths):
        table.add_column(escape(column), justify="right" if numeric else "left",
                         width=width, overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


if __name__ == "__main__":
    sys.exit(cli.run(main, "explain"))
