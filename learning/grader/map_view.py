"""Draw memory maps (``learning.grader.memory_map``): the learner's kernel beside the reference
kernel, one character per element, aligned at any width.

Each element shows the program that stored it (or read it): 0-9, then a-z, then A-Z, in launch
order. A dot is an element no program touched, ``*`` one stored more than once (or read by more
than one program), ``!`` a lane that addressed memory outside the tensor, drawn where it would
have been had the tensor gone on. A terminal adds a colour per program; piped or with NO_COLOR
the same characters and a key carry it all. Tensors too large to draw whole lose their middle
rows and columns (``:`` and ``~``).
"""

from __future__ import annotations

import string
import textwrap
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from learning.cli import visible_text
from learning.grader.memory_map import CaseMap, MemoryMap, Tensor, grid_dims, nothing_to_map

SYMBOLS = string.digits + string.ascii_lowercase + string.ascii_uppercase
NEVER, SEVERAL, OUTSIDE, EMPTY, ELIDED_COLUMN, ELIDED_ROW = ".", "*", "!", " ", "~", ":"
INDENT = 4  # the maps sit under a case's name, less indented than its details to keep width
GAP = 3  # between the two maps
MAX_ROWS = 16  # rows of a tensor drawn before its middle ones are left out
EXTRA_ROWS = 3  # rows drawn past either end of a tensor, for lanes outside it
EXTRA_COLUMNS = 6  # columns drawn past its right edge
WRAPS = (64, 32, 16, 8)  # a 1-D tensor too long for one line wraps at the widest that fits
MAX_BLOCKS = 3  # tensors drawn for one case
PALETTE = ("cyan", "magenta", "green", "yellow", "bright_blue")
STYLES = {NEVER: "dim", SEVERAL: "bold red", OUTSIDE: "bold white on red", ELIDED_COLUMN: "dim",
          ELIDED_ROW: "dim"}
WHO = {"learner": "your kernel", "reference": "reference"}


def symbol(program: int) -> str:
    """The character that stands for a program (they repeat after 62 programs)."""
    return SYMBOLS[program % len(SYMBOLS)]


@dataclass
class _Layout:
    """Where each element of a tensor, and each lane outside it, is drawn."""

    tensor: Tensor
    rows: list  # row slots: a row number (negative or past the end: outside), or None (elided)
    columns: list  # column slots: a column number, or None (elided)
    wrap: int  # elements per drawn row (a 1-D tensor's line, a 2-D tensor's width)
    one_d: bool
    place_outside: object  # offset -> (row, column) or None

    def inside(self, row: int, column: int) -> bool:
        size = self.tensor.size
        if self.one_d:
            return 0 <= column < self.wrap and 0 <= row * self.wrap + column < size
        return 0 <= row and 0 <= column < self.wrap and row * self.wrap + column < size

    def flat(self, row: int, column: int) -> int:
        return row * self.wrap + column

    def row_label(self, row: int) -> str:
        return str(row * self.wrap) if self.one_d and len(self.rows) > 1 else str(row)


def _count(shape) -> int:
    total = 1
    for n in shape:
        total *= n
    return total


def _outside_placer(tensor: Tensor, wrap: int, one_d: bool):
    """offset (elements from the first) -> the (row, column) it would have in the drawing."""
    shape, strides = tensor.shape, tensor.strides
    if one_d:
        stride = strides[0] if strides else 1
        if stride <= 0:
            return lambda offset: None
        return lambda offset: (offset // stride // wrap, offset // stride % wrap) \
            if offset % stride == 0 else None
    if len(shape) < 2:
        return lambda offset: None
    collapsible = all(strides[d] == strides[d + 1] * shape[d + 1] for d in range(len(shape) - 2))
    rows = _count(shape[:-1])
    if strides[-1] == 1 and collapsible and (strides[-2] >= shape[-1] or rows == 1):
        step = max(strides[-2], shape[-1])
        return lambda offset: (offset // step, offset % step)
    if len(shape) == 2 and strides[0] == 1 and strides[1] >= shape[0]:
        return lambda offset: (offset % strides[1], offset // strides[1])
    return lambda offset: None


def _layout(tensor: Tensor, outside: list[int], budget: int) -> _Layout:
    """Rows and columns to draw for ``tensor`` in ``budget`` characters, with room for the
    lanes outside it (``outside``: their offsets, both maps' together)."""
    shape = tensor.shape or (1,)
    one_d = len(shape) == 1
    if one_d:
        n = shape[0]
        placer = _outside_placer(tensor, 1, True)  # offset -> (element index, 0)
        where = [spot[0] for spot in map(placer, outside) if spot is not None]
        low = max(min(where + [0]), -EXTRA_COLUMNS)
        high = min(max(where + [n - 1]), n - 1 + EXTRA_COLUMNS)
        if high - low + 1 <= budget:  # one line, with the lanes outside to either side
            return _Layout(tensor, [0], list(range(low, high + 1)), max(n, 1), True,
                           _clip(_as_column(placer), 0, 0, low, high))
        wrap = next((w for w in WRAPS if w <= budget), max(1, budget))
        placer = _outside_placer(tensor, wrap, True)
        last = (n - 1) // wrap
        spots = [p for p in map(placer, outside) if p is not None]
        first_row = max(min([r for r, _ in spots] + [0]), -EXTRA_ROWS)
        last_row = min(max([r for r, _ in spots] + [last]), last + EXTRA_ROWS)
        rows = _elide(list(range(0, last + 1)), MAX_ROWS)
        rows = list(range(first_row, 0)) + rows + list(range(last + 1, last_row + 1))
        return _Layout(tensor, rows, list(range(wrap)), wrap, True,
                       _clip(placer, first_row, last_row, 0, wrap - 1))
    n_rows, n_cols = _count(shape[:-1]), shape[-1]
    placer = _outside_placer(tensor, n_cols, False)
    spots = [p for p in map(placer, outside) if p is not None]
    first_row = max(min([r for r, _ in spots] + [0]), -EXTRA_ROWS)
    last_row = min(max([r for r, _ in spots] + [n_rows - 1]), n_rows - 1 + EXTRA_ROWS)
    last_column = min(max([c for _, c in spots] + [n_cols - 1]), n_cols - 1 + EXTRA_COLUMNS)
    extra = last_column - (n_cols - 1)
    extra = max(0, min(extra, budget - 3))
    last_column = n_cols - 1 + extra
    columns = _elide(list(range(n_cols)), budget - extra)
    columns += list(range(n_cols, last_column + 1))
    rows = list(range(first_row, 0)) + _elide(list(range(n_rows)), MAX_ROWS) + \
        list(range(n_rows, last_row + 1))
    return _Layout(tensor, rows, columns, n_cols, False,
                   _clip(placer, first_row, last_row, 0, last_column))


def _as_column(placer):
    """A 1-D tensor on one line: the element's index is its column."""
    def place(offset):
        spot = placer(offset)
        return None if spot is None else (0, spot[0])

    return place


def _clip(placer, first_row, last_row, first_column, last_column):
    def place(offset):
        spot = placer(offset)
        if spot is None or not (first_row <= spot[0] <= last_row
                                and first_column <= spot[1] <= last_column):
            return None
        return spot

    return place


def _elide(items: list, most: int) -> list:
    """``items`` with its middle replaced by one None when there are more than ``most``."""
    most = max(most, 3)
    if len(items) <= most:
        return items
    head = (most - 1 + 1) // 2
    tail = most - 1 - head
    return items[:head] + [None] + (items[-tail:] if tail else [])


# ---------------------------------------------------------------------------------------------
# One side of a block: the characters of one tensor's map.


class _Side:
    def __init__(self, case_map: CaseMap | None, label: str, kind: str, layout: _Layout):
        self.case_map, self.kind, self.layout, self.label = case_map, kind, layout, label
        self.known = case_map is not None and label in [t.label for t in case_map.tensors]
        self.touches = case_map.touches(label, kind) if self.known else {}
        self.outside = case_map.outside(label, kind) if self.known else []
        self.placed: dict[tuple[int, int], list[int]] = {}
        self.unplaced = 0
        for program, offset in self.outside:
            spot = layout.place_outside(offset)
            if spot is None or layout.inside(*spot):
                self.unplaced += 1
            else:
                self.placed.setdefault(spot, []).append(program)

    def cell(self, row: int, column: int) -> tuple[str, str]:
        if not self.known:
            return EMPTY, ""
        if self.layout.inside(row, column):
            programs = self.touches.get(self.layout.flat(row, column), [])
            if not programs:
                return NEVER, STYLES[NEVER]
            if self._several(programs):
                return SEVERAL, STYLES[SEVERAL]
            return symbol(programs[0]), PALETTE[programs[0] % len(PALETTE)]
        if (row, column) in self.placed:
            return OUTSIDE, STYLES[OUTSIDE]
        return EMPTY, ""

    def _several(self, programs: list[int]) -> bool:
        return len(programs) > 1 if self.kind == "store" else len(set(programs)) > 1

    def summary(self, who: str) -> str:
        if not self.known:
            return f"{who}: its kernels never touched a tensor like this one"
        size = self.layout.tensor.size
        programs = sorted({p for ps in self.touches.values() for p in ps})
        verb, done = ("stored", "written") if self.kind == "store" else ("read", "read")
        several = sum(1 for ps in self.touches.values() if self._several(ps))
        noun = "program" if len(programs) == 1 else "programs"
        if not programs:
            said = [f"no program {verb} any of its {size} elements"]
        elif len(self.touches) == size:
            said = [f"{len(programs)} {noun} {verb} "
                    f"{'its one element' if size == 1 else f'all {size} elements'}"]
        else:
            said = [f"{len(programs)} {noun} {verb} {len(self.touches)} of {size} elements"]
        if programs and size - len(self.touches):
            said.append(f"{size - len(self.touches)} never {done}")
        if several:
            said.append(f"{several} written more than once" if self.kind == "store" else
                        f"{several} read by more than one program")
        if self.outside:
            who_went = sorted({p for p, _ in self.outside})
            lines = sorted({self.case_map.line_of(p, self.kind, self.label) for p in who_went}
                           - {0})
            names = _programs_text(who_went)
            at = f", line {', '.join(map(str, lines))}" if lines else ""
            lanes = "lane" if len(self.outside) == 1 else "lanes"
            said.append(f"{len(self.outside)} {lanes} outside the tensor ({names}{at})")
            if self.unplaced:
                said.append(f"{self.unplaced} of them too far away to draw")
        return f"{who}: " + "; ".join(said)


def _programs_text(programs: list[int]) -> str:
    shown = ", ".join(str(p) for p in programs[:4])
    more = f" and {len(programs) - 4} more" if len(programs) > 4 else ""
    return f"program{'s' if len(programs) > 1 else ''} {shown}{more}"


# ---------------------------------------------------------------------------------------------
# The whole drawing.


def blocks(memory_map: MemoryMap) -> list[tuple[str, str]]:
    """(tensor label, "store" or "load") to draw: the output's stores always; another
    tensor's stores or loads where the two kernels differ (every one touched, when the case
    was asked for by name)."""
    learner, reference = memory_map.learner, memory_map.reference
    sides = [m for m in (learner, reference) if m is not None]
    chosen = []
    for label in memory_map.labels():
        kinds = set().union(*(m.kinds(label) for m in sides if label in _labels(m)))
        roles = {m.tensor(label).role for m in sides if label in _labels(m)}
        for kind in ("store", "load"):
            if kind not in kinds:
                continue
            differ = learner is None or reference is None or not learner.same(reference, label,
                                                                              kind)
            if kind == "store" and "output" in roles or \
                    learner is not None and learner.accesses and (
                        differ or memory_map.asked and roles & {"output", "input"}):
                chosen.append((label, kind))
    order = {"output": 0, "input": 1, "made": 2}
    chosen.sort(key=lambda block: min(order[m.tensor(block[0]).role] for m in sides
                                      if block[0] in _labels(m)))
    return chosen[:MAX_BLOCKS]


def _labels(case_map: CaseMap) -> list[str]:
    return [t.label for t in case_map.tensors]


def lines(memory_map: MemoryMap, width: int = 80) -> list[Text]:
    """The drawing, as lines no wider than ``width`` (styles for a terminal; rich drops them
    when the output is piped or NO_COLOR is set)."""
    out: list[Text] = []
    say = _sayer(out, width)
    learner, reference = memory_map.learner, memory_map.reference
    if memory_map.deferred:
        command = f"python -m learning.check {memory_map.exercise} --map '{memory_map.case}'"
        say(f"{command} draws which program of your kernel read and wrote which element in "
            f"this case, beside the reference kernel (not drawn here: {memory_map.note}).", 2)
        return out
    # A map is drawn only of code that touched memory: else one line says what it did.
    if learner is None or not learner.accesses:
        why = memory_map.note if learner is None else nothing_to_map(learner)
        say(f"No memory map of case '{memory_map.case}': {why or 'nothing was recorded'}.", 2)
        return out
    say(f"Memory map of case '{memory_map.case}', run again in Triton's interpreter: your "
        f"kernel on the left, the reference kernel on the right, on the same input.", 2)
    if reference is None:
        say(f"The reference could not be recorded ({memory_map.note}); your kernel's map "
            "is drawn alone.", INDENT)
    for label, kind in blocks(memory_map):
        out += _block(memory_map, label, kind, width)
    for who, case_map in (("your kernel", learner), ("the reference", reference)):
        if case_map is not None and case_map.stopped:
            last = case_map.accesses[-1].program if case_map.accesses else None
            where = f" in program {last}" if last is not None else ""
            refused = ", the refused one included" if case_map.stopped.startswith(
                "OutOfBoundsAccess") else ""
            say(f"{who[0].upper() + who[1:]} stopped{where} ({_short(case_map.stopped)}); the "
                f"map shows its accesses up to there{refused}.", INDENT)
    for line in _key(memory_map):
        say(line, INDENT, hang=2)
    return out


def _short(stopped: str) -> str:
    """The first clause of an exception's message: its type and what it says first."""
    text = stopped.splitlines()[0] if stopped else ""
    text = text.split(" (")[0].split(";")[0]
    return text if len(text) <= 120 else text[:117] + "..."


def _sayer(out: list, width: int):
    def say(text: str, indent: int, hang: int = 0):
        for line in textwrap.wrap(text, max(20, width - indent), subsequent_indent=" " * hang,
                                  break_on_hyphens=False) or [""]:
            out.append(Text(" " * indent + line))
    return say


def _block(memory_map: MemoryMap, label: str, kind: str, width: int) -> list[Text]:
    learner, reference = memory_map.learner, memory_map.reference
    tensor = next(m.tensor(label) for m in (learner, reference)
                  if m is not None and label in _labels(m))
    offsets = [o for m in (learner, reference) if m is not None and label in _labels(m)
               for _, o in m.outside(label, kind)]
    # Row labels: a 2-D tensor's row numbers, a wrapped 1-D tensor's first index per line.
    longest = _count(tensor.shape[:-1]) + EXTRA_ROWS if len(tensor.shape) > 1 else \
        _count(tensor.shape) + 64
    budget = max(8, (width - INDENT - len(str(longest)) - 2 - GAP) // 2)
    layout = _layout(tensor, offsets, budget)
    labels = [layout.row_label(r) if r is not None else ELIDED_ROW for r in layout.rows]
    label_width = max([len(s) for s in labels], default=1)
    sides = [_Side(m, label, kind, layout) for m in (learner, reference)]
    grid_width = len(layout.columns)
    slot = max(grid_width, len(WHO["learner"]))  # a narrow grid still has room for its title
    out: list[Text] = []
    say = _sayer(out, width)
    shape = " x ".join(str(n) for n in tensor.shape) or "a scalar"
    what = "which program stored each element" if kind == "store" else \
        "which program read each element"
    say(f"{label} ({shape}, {tensor.dtype}): {what}", INDENT)
    lead = " " * (INDENT + label_width + 1)
    out.append(Text(lead + WHO["learner"].ljust(slot) + " " * GAP + WHO["reference"]))
    ruler = _ruler(layout)
    if ruler.strip():
        out.append(Text((lead + ruler.ljust(slot) + " " * GAP + ruler).rstrip()))
    for row, row_label in zip(layout.rows, labels):
        line = Text(" " * INDENT + row_label.rjust(label_width) + " ")
        for number, side in enumerate(sides):
            if number:
                line.append(" " * (GAP + slot - grid_width))
            for column in layout.columns:
                if row is None:
                    line.append(" ")
                elif column is None:
                    line.append(ELIDED_COLUMN, style=STYLES[ELIDED_COLUMN])
                else:
                    char, style = side.cell(row, column)
                    line.append(char, style=style)
        line.rstrip()
        out.append(line)
    for who, side in zip(("your kernel", "reference"), sides):
        if side.case_map is not None:
            say(side.summary(who), INDENT + 2, hang=2)
    return out


def _ruler(layout: _Layout) -> str:
    """Column numbers above the grid, at multiples of five where they fit."""
    chars = [" "] * len(layout.columns)
    free = 0
    for position, column in enumerate(layout.columns):
        if column is None or column % 5 or position < free:
            continue
        text = str(column)
        if position + len(text) > len(chars):
            break
        chars[position:position + len(text)] = text
        free = position + len(text) + 1
    return "".join(chars)


def _key(memory_map: MemoryMap) -> list[str]:
    sides = [m for m in (memory_map.learner, memory_map.reference) if m is not None]
    most = max((max(m.programs, default=0) for m in sides), default=0)
    shown = "0-9, a-z, A-Z" if most >= 36 else "0-9, a-z" if most >= 10 else "0-9"
    numbers = {"0-9": "", "0-9, a-z": ", then a-z for 10 to 35",
               "0-9, a-z, A-Z": ", then a-z for 10 to 35 and A-Z for 36 to 61"}[shown]
    key = [f"Key: an element shows the program that touched it, numbered in launch order "
           f"(in a 1-D grid, its tl.program_id(0)): 0-9{numbers}"
           + (", and again from 0 after 61" if most >= len(SYMBOLS) else "")
           + f". '{NEVER}' never touched; '{SEVERAL}' stored more than once, or read by more "
           f"than one program; '{OUTSIDE}' a lane outside the tensor, drawn where the next "
           f"elements would be; '{ELIDED_COLUMN}' and '{ELIDED_ROW}' columns and rows left "
           "out."]
    if any(len(m.tensor(label).shape) > 2 for label, _ in blocks(memory_map)
           for m in sides if label in _labels(m)):
        key.append("A tensor of more than two dimensions is drawn with its leading ones "
                   "flattened: row r is its r-th vector along the last dimension.")
    described = {}
    for who, case_map in zip(("your kernel", "the reference"), (memory_map.learner,
                                                                 memory_map.reference)):
        if case_map is None:
            continue
        grids = [launch for launch in case_map.launches
                 if tuple(launch["grid"][1:]) != (1, 1) or len(case_map.launches) > 1]
        if not grids:
            continue
        said = []
        for launch in case_map.launches:
            programs = [(n, p) for n, p in sorted(case_map.programs.items())
                        if launch["first"] <= n < launch["first"] + _count(launch["grid"])]
            ids = ", ".join(f"{symbol(n)} = {tuple(p[:grid_dims(launch['grid'])])}"
                            for n, p in programs[:6])
            more = ", ..." if len(programs) > 6 else ""
            grid = tuple(launch["grid"][:grid_dims(launch["grid"])])
            said.append(f"{launch['kernel']} on a grid of {grid}: {ids}{more}")
        described[who] = "; ".join(said)
    if len(set(described.values())) == 1 and len(described) == 2:
        key.append(f"Programs of both: {described['your kernel']}.")
    else:
        key += [f"Programs of {who}: {text}." for who, text in described.items()]
    return key


def render(console: Console, memory_map: MemoryMap):
    """Print the drawing at the console's width; a map that cannot be drawn is one line, never
    the end of the check."""
    try:
        drawn = lines(memory_map, console.width)
    except Exception as exc:  # noqa: BLE001 - the check's verdicts matter more than the map
        drawn = [Text(f"  The memory map of case '{memory_map.case}' could not be drawn "
                      f"({type(exc).__name__}: {exc}).", style="dim")]
    for line in drawn:  # notes may quote the learner's exception: shown, not acted on
        console.print(visible_text(line), highlight=False, soft_wrap=True)


def plain(memory_map: MemoryMap, width: int = 80) -> str:
    """The drawing as plain text (what a pipe receives)."""
    return "\n".join(line.plain.rstrip() for line in lines(memory_map, width))


# ---------------------------------------------------------------------------------------------
# A lesson's computed section (learning.computed): a map made by the course's own code.


def lesson_block(block: str, args: list) -> str:
    """``store_without_mask N,BLOCK``: lesson 06's kernel with its store's mask left out,
    beside the same kernel with it, on the elementwise case of N elements, BLOCK lanes per
    program; drawn as check draws it, at 80 columns, piped."""
    import tempfile
    from pathlib import Path

    from learning.grader import registry, runner
    from learning.solutions import solution_path

    if block != "store_without_mask":
        raise KeyError(f"no memory_map block {block!r} (there is: store_without_mask)")
    n, lanes = (int(a) for a in args)
    reference = solution_path("elementwise").read_text(encoding="utf-8")
    right = _replaced(reference, "    BLOCK = 1024\n", f"    BLOCK = {lanes}\n")
    wrong = _replaced(right, "tl.store(out_ptr + offsets, out, mask=mask)",
                      "tl.store(out_ptr + offsets, out)")
    with tempfile.TemporaryDirectory() as folder:
        mine, theirs = Path(folder, "mine"), Path(folder, "theirs")
        for where, text in ((mine, wrong), (theirs, right)):
            where.mkdir()
            (where / "elementwise.py").write_text(text, encoding="utf-8")
        drawn = runner.record_map(registry.find("elementwise"), mine / "elementwise.py",
                                  "triton", f"n = {n}", theirs / "elementwise.py")
    if drawn.learner is None or drawn.reference is None:
        raise RuntimeError(f"the lesson's memory map could not be recorded: {drawn.note}")
    return "```text\n" + plain(drawn, 80) + "\n```"


def _replaced(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise ValueError(f"the elementwise solution no longer holds {old.strip()!r} once; "
                         "update learning/grader/map_view.lesson_block")
    return text.replace(old, new)
