"""Draw memory maps (``learning.grader.memory_map``): the learner's kernel beside the reference
kernel, one character per element, aligned at any width.

Each element shows the program that stored it (or read it): 0-9, then a-z, then A-Z, in launch
order. A dot is an element no program touched, ``*`` one stored more than once (or read by more
than one program). A lane past the tensor's edge is drawn where its index puts it: ``!`` when its
address fell outside the tensor's memory, ``#`` when it fell on another element of the tensor
(which it then read or wrote instead, and which shows that program too). A tile's lanes have the
index the kernel's arithmetic gave them (a k loop past K draws columns past the last of every
row), a 1-D block's lanes on no element go on along the row where the block starts, and other
lanes past the end are drawn where the next elements would be in memory. A terminal
adds a colour per program; piped or with NO_COLOR the same characters and a key carry it all.
Tensors too large to draw whole lose middle columns (``~``) and rows drawn alike in both maps
(``:``); rows with a difference stay, runs of identical ones shortened to their first and last
(``"``). A tensor of more than two dimensions has a row per vector along its last dimension,
labelled by its other indices.
"""

from __future__ import annotations

import itertools
import string
import textwrap
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from learning.cli import visible_text
from learning.grader import memory_map as maps
from learning.grader.memory_map import CaseMap, MemoryMap, Tensor, grid_dims, nothing_to_map

SYMBOLS = string.digits + string.ascii_lowercase + string.ascii_uppercase
NEVER, SEVERAL, OUTSIDE, ELSEWHERE, EMPTY = ".", "*", "!", "#", " "
ELIDED_COLUMN, ELIDED_ROW, REPEATED_ROW = "~", ":", '"'
INDENT = 4  # the maps sit under a case's name, less indented than its details to keep width
GAP = 3  # between the two maps
MAX_ROWS = 16  # rows of a tensor drawn before rows drawn alike in both maps are left out
MAX_WRONG_ROWS = 48  # rows with a difference drawn at most; past it their middle is left out
EXTRA_ROWS = 3  # rows drawn past either end of a tensor, for lanes outside it
EXTRA_COLUMNS = 6  # columns drawn past its right edge
WRAPS = (64, 32, 16, 8)  # a 1-D tensor too long for one line wraps at the widest that fits
MAX_BLOCKS = 3  # tensors drawn for one case
PALETTE = ("cyan", "magenta", "green", "yellow", "bright_blue")
STYLES = {NEVER: "dim", SEVERAL: "bold red", OUTSIDE: "bold white on red",
          ELSEWHERE: "bold red", ELIDED_COLUMN: "dim", ELIDED_ROW: "dim", REPEATED_ROW: "dim"}
WHO = {"learner": "your kernel", "reference": "reference"}


def symbol(program: int) -> str:
    """The character that stands for a program (they repeat after 62 programs)."""
    return SYMBOLS[program % len(SYMBOLS)]


@dataclass
class _Layout:
    """Where each element of a tensor, and each lane past its edges, is drawn. A row is named
    by a key: the indices of every dimension but the last (a 1-D tensor's drawn line, (line,))."""

    tensor: Tensor
    rows: list  # row slots: a key (past an edge: outside), or ELIDED_ROW / REPEATED_ROW
    columns: list  # column slots: a column number, or None (elided)
    wrap: int  # elements per drawn row (a 1-D tensor's line, the last dimension's size)
    one_d: bool
    place_outside: object  # offset -> (key, column) or None
    place_index: object  # a lane's index past an edge -> (key, column) or None
    left_out: int = 0  # rows with a difference that were not drawn (past MAX_WRONG_ROWS)

    def inside(self, key: tuple, column: int) -> bool:
        if self.one_d:
            return 0 <= column < self.wrap and 0 <= key[0] * self.wrap + column < self.tensor.size
        return 0 <= column < self.wrap and all(0 <= i < n for i, n in
                                               zip(key, self.tensor.shape[:-1]))

    def flat(self, key: tuple, column: int) -> int:
        if self.one_d:
            return key[0] * self.wrap + column
        flat = 0
        for i, n in zip(key + (column,), (*self.tensor.shape[:-1], self.wrap)):
            flat = flat * n + i
        return flat

    def row_label(self, slot) -> str:
        if isinstance(slot, str):
            return slot
        if self.one_d:
            return str(slot[0] * self.wrap) if len(self.rows) > 1 else str(slot[0])
        return ",".join(str(i) for i in slot)


def _count(shape) -> int:
    total = 1
    for n in shape:
        total *= n
    return total


def _outside_placer(tensor: Tensor, wrap: int, one_d: bool):
    """offset (elements from the first) -> the (row, column) it would have in the drawing, its
    row counted through the leading dimensions flattened."""
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


def _key_of(row: int, lead: tuple) -> tuple:
    """The key of flattened row ``row`` (the first index unbounded, so rows past the end get
    indices past the first dimension's)."""
    key = []
    for n in reversed(lead[1:]):
        row, index = divmod(row, n)
        key.append(index)
    return (row, *reversed(key))


def _near(key: tuple, lead: tuple) -> bool:
    """Whether a row past the edge is close enough to the tensor's to be drawn."""
    return all(-EXTRA_ROWS <= i < n + EXTRA_ROWS for i, n in zip(key, lead))


def _layout(tensor: Tensor, outside: list[int], past: list[tuple], budget: int) -> _Layout:
    """Rows and columns to draw for ``tensor`` in ``budget`` characters, with room for the
    lanes past its edges (``outside``: offsets placed by address; ``past``: indices placed as
    they are; both maps' together). Every row is listed: ``_choose_rows`` leaves some out."""
    shape = tensor.shape or (1,)
    if len(shape) == 1:
        n = shape[0]
        placer = _outside_placer(tensor, 1, True)  # offset -> (element index, 0)
        where = [spot[0] for spot in map(placer, outside) if spot is not None]
        low = max(min(where + [0]), -EXTRA_COLUMNS)
        high = min(max(where + [n - 1]), n - 1 + EXTRA_COLUMNS)
        if high - low + 1 <= budget:  # one line, with the lanes outside to either side
            return _Layout(tensor, [(0,)], list(range(low, high + 1)), max(n, 1), True,
                           _clip(_as_column(placer), {(0,)}, low, high), _nowhere)
        wrap = next((w for w in WRAPS if w <= budget), max(1, budget))
        placer = _outside_placer(tensor, wrap, True)
        last = (n - 1) // wrap
        spots = [p for p in map(placer, outside) if p is not None]
        first_row = max(min([r for r, _ in spots] + [0]), -EXTRA_ROWS)
        last_row = min(max([r for r, _ in spots] + [last]), last + EXTRA_ROWS)
        keys = [(r,) for r in range(first_row, last_row + 1)]
        return _Layout(tensor, keys, list(range(wrap)), wrap, True,
                       _clip(_keyed(placer, (last + 1,)), set(keys), 0, wrap - 1), _nowhere)
    lead, n_cols = tuple(shape[:-1]), shape[-1]
    place = _keyed(_outside_placer(tensor, n_cols, False), lead)

    def place_index(index):
        return tuple(index[:-1]), index[-1]

    spots = [s for s in [place(o) for o in outside] + [place_index(i) for i in past]
             if s is not None and _near(s[0], lead)]
    last_column = min(max([c for _, c in spots] + [n_cols - 1]), n_cols - 1 + EXTRA_COLUMNS)
    extra = max(0, min(last_column - (n_cols - 1), budget - 3))
    last_column = n_cols - 1 + extra
    columns = _elide(list(range(n_cols)), budget - extra) + list(range(n_cols, last_column + 1))
    keys = sorted(set(itertools.product(*(range(n) for n in lead))) | {k for k, _ in spots})
    return _Layout(tensor, keys, columns, n_cols, False,
                   _clip(place, set(keys), 0, last_column),
                   _clip(place_index, set(keys), 0, last_column))


def _nowhere(index):
    """A 1-D tensor's lanes are all placed by address (none is held by index)."""
    return None


def _keyed(placer, lead: tuple):
    """A placer of (flattened row, column) made one of (key, column)."""
    def place(offset):
        spot = placer(offset)
        return None if spot is None else (_key_of(spot[0], lead), spot[1])

    return place


def _as_column(placer):
    """A 1-D tensor on one line: the element's index is its column."""
    def place(offset):
        spot = placer(offset)
        return None if spot is None else ((0,), spot[0])

    return place


def _clip(placer, keys: set, first_column: int, last_column: int):
    def place(where):
        spot = placer(where)
        if spot is None or spot[0] not in keys or not first_column <= spot[1] <= last_column:
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


def _choose_rows(layout: _Layout, sides: list) -> None:
    """Leave out rows when there are more than MAX_ROWS: first those drawn alike in both maps
    with no lane past an edge (all right), keeping the first and last of them; then, if rows
    with a difference are still too many, the middle of each run drawn identically; and only
    past MAX_WRONG_ROWS, the middle of what is left (counted in ``left_out``)."""
    keys = layout.rows
    if len(keys) <= MAX_ROWS:
        return
    columns = [c for c in layout.columns if c is not None]
    if None in layout.columns:
        columns = list(range(layout.wrap)) + [c for c in columns if c >= layout.wrap]
    drawn = {key: tuple(tuple(side.cell(key, c)[0] for c in columns) for side in sides)
             for key in keys}
    compared = all(side.known for side in sides) and len(sides) == 2

    def right(key):
        mine = drawn[key][0]
        if OUTSIDE in mine or ELSEWHERE in mine:
            return False
        return not compared or mine == drawn[key][1]

    wrong = {key for key in keys if not right(key)}
    alike = [key for key in keys if key not in wrong]
    room = max(2, MAX_ROWS - 1 - len(wrong))
    kept = wrong | set(alike[:(room + 1) // 2]) | set(alike[len(alike) - room // 2:])
    slots: list = []
    for key in keys:
        if key in kept:
            slots.append(key)
        elif not slots or slots[-1] != ELIDED_ROW:
            slots.append(ELIDED_ROW)
    if len(slots) > MAX_ROWS:
        slots = _shorten_runs(slots, drawn)
    if len(slots) > MAX_WRONG_ROWS:
        head = MAX_WRONG_ROWS // 2
        tail = MAX_WRONG_ROWS - head - 1
        middle = slots[head:len(slots) - tail]
        layout.left_out = sum(1 for s in middle if not isinstance(s, str) and s in wrong)
        slots = slots[:head] + [ELIDED_ROW] + slots[len(slots) - tail:]
    layout.rows = slots


def _shorten_runs(slots: list, drawn: dict) -> list:
    """Runs of three or more rows drawn identically in both maps, as their first row, a '"'
    and their last row."""
    out: list = []
    run: list = []

    def flush():
        out.extend(run if len(run) < 3 else [run[0], REPEATED_ROW, run[-1]])
        run.clear()

    for slot in slots:
        if not isinstance(slot, str) and run and drawn[slot] == drawn[run[-1]]:
            run.append(slot)
            continue
        flush()
        if isinstance(slot, str):
            out.append(slot)
        else:
            run.append(slot)
    flush()
    return out


# ---------------------------------------------------------------------------------------------
# One side of a block: the characters of one tensor's map.


class _Side:
    def __init__(self, case_map: CaseMap | None, label: str, kind: str, layout: _Layout):
        self.case_map, self.kind, self.layout, self.label = case_map, kind, layout, label
        self.known = case_map is not None and label in [t.label for t in case_map.tensors]
        self.touches = case_map.touches(label, kind) if self.known else {}
        self.outside = case_map.outside(label, kind, indexed=False) if self.known else []
        self.past = case_map.past(label, kind) if self.known else []
        self.placed: dict[tuple, set[str]] = {}
        self.placed_by: set[str] = set()  # "address", "index": how drawn lanes were placed
        self.unplaced = 0
        spots = [(layout.place_outside(offset), OUTSIDE, "address")
                 for _, offset in self.outside] + \
            [(layout.place_index(index), ELSEWHERE if landed else OUTSIDE, "index")
             for _, index, landed in self.past]
        for spot, mark, how in spots:
            if spot is None or layout.inside(*spot):
                self.unplaced += 1
            else:
                self.placed.setdefault(spot, set()).add(mark)
                self.placed_by.add(how)

    def cell(self, key: tuple, column: int) -> tuple[str, str]:
        if not self.known:
            return EMPTY, ""
        if self.layout.inside(key, column):
            programs = self.touches.get(self.layout.flat(key, column), [])
            if not programs:
                return NEVER, STYLES[NEVER]
            if self._several(programs):
                return SEVERAL, STYLES[SEVERAL]
            return symbol(programs[0]), PALETTE[programs[0] % len(PALETTE)]
        marks = self.placed.get((key, column))
        if marks:
            mark = OUTSIDE if OUTSIDE in marks else ELSEWHERE
            return mark, STYLES[mark]
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
        if self.past:
            said.append(self._past_text())
        if self.outside:
            lanes = "lane" if len(self.outside) == 1 else "lanes"
            said.append(f"{len(self.outside)} {lanes} outside the tensor "
                        f"({self._who_went([p for p, _ in self.outside])})")
        if self.unplaced:
            said.append(f"{self.unplaced} of those lanes too far away to draw")
        if self.layout.left_out:
            said.append(f"{self.layout.left_out} more rows with a difference not drawn")
        return f"{who}: " + "; ".join(said)

    def _who_went(self, programs: list[int]) -> str:
        went = sorted(set(programs))
        lines = sorted({self.case_map.line_of(p, self.kind, self.label) for p in went} - {0})
        at = f", line {', '.join(map(str, lines))}" if lines else ""
        return f"{_programs_text(went)}{at}"

    def _past_text(self) -> str:
        """What a tile's lanes past an edge did: which indices went past which edge, and how
        many of them read or wrote another element instead of memory outside the tensor."""
        shape = self.layout.tensor.shape
        edges = []
        for dim, n in enumerate(shape):
            values = sorted({index[dim] for _, index, _ in self.past
                             if not 0 <= index[dim] < n})
            if values:
                edges.append(_edge_text(dim, len(shape), n, values))
        on = ""
        if all(0 <= i < n for _, index, _ in self.past for i, n in zip(index, shape[:-1])):
            # Only the last index went past: on which rows.
            keys = sorted({index[:-1] for _, index, _ in self.past})
            on = "" if _count(shape[:-1]) == 1 else \
                " on every row" if len(keys) == _count(shape[:-1]) else \
                f" on {_span('row', [k[0] for k in keys])}" if len(shape) == 2 else \
                f" on {len(keys)} rows"
        landed = sum(1 for _, _, hit in self.past if hit)
        count = len(self.past)
        lanes = "lane" if count == 1 else "lanes"
        verb = "wrote over" if self.kind == "store" else "read"
        split = []
        if landed:
            split.append(f"{landed} {verb} another element of {self.label} in its place")
        if count - landed:
            split.append(f"{count - landed} addressed no element of {self.label}")
        who = self._who_went([p for p, _, _ in self.past]).replace(", line", " at line")
        return f"{count} {lanes} {' and '.join(edges)}{on}, by {who}: {', '.join(split)}"


def _edge_text(dim: int, dims: int, size: int, values: list[int]) -> str:
    """'past its last column (columns 45 to 63)', 'before its first row (row -1)', or for a
    dimension of a tensor of more than two, 'past the end of dimension 2 (12 to 15)'."""
    after = values[-1] >= size
    if dims == 2:
        name = "row" if dim == 0 else "column"
        edge = f"past its last {name}" if after else f"before its first {name}"
        return f"{edge} ({_span(name, values)})"
    end = "past the end" if after else "before the start"
    numbers = f"index {values[0]}" if len(values) == 1 else \
        f"indices {values[0]} to {values[-1]}"
    return f"{end} of dimension {dim} ({numbers})"


def _span(name: str, values: list[int]) -> str:
    if len(values) == 1:
        return f"{name} {values[0]}"
    if values == list(range(values[0], values[-1] + 1)):
        return f"{name}s {values[0]} to {values[-1]}"
    return f"{len(values)} {name}s"


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
    say(f"Memory map of case '{memory_map.case}', run again in Triton's interpreter with the "
        f"programs first to last: your kernel on the left, the reference kernel on the right, "
        f"on the same input.", 2)
    if reference is None:
        say(f"The reference could not be recorded ({memory_map.note}); your kernel's map "
            "is drawn alone.", INDENT)
    drawn: set[str] = set()  # the marks the blocks use, for the key
    for label, kind in blocks(memory_map):
        out += _block(memory_map, label, kind, width, drawn)
    for who, case_map in (("your kernel", learner), ("the reference", reference)):
        if case_map is not None and case_map.stopped:
            last = case_map.accesses[-1].program if case_map.accesses else None
            where = f" in program {last}" if last is not None else ""
            # the check's own run may have gone last to first (program_order) and stopped at
            # another program: say which this one is, so the two numbers do not contradict
            refused = ", the refused one included. Here the programs ran first to last; the " \
                "check's own run of the case may have met another program out of bounds " \
                "first" if case_map.stopped.startswith("OutOfBoundsAccess") else ""
            # an access with no mask: that, instead of the lane counts the map shows
            unmasked = maps.unmasked_clause(case_map.stopped)
            stopped = f"{case_map.stopped.split(':')[0]}: {unmasked}" if unmasked else \
                maps.first_clause(case_map.stopped)
            say(f"{who[0].upper() + who[1:]} stopped{where} ({stopped}); the map shows its "
                f"accesses up to there{refused}.", INDENT)
    for line in _key(memory_map, drawn):
        say(line, INDENT, hang=2)
    return out


def _sayer(out: list, width: int):
    def say(text: str, indent: int, hang: int = 0):
        for line in textwrap.wrap(text, max(20, width - indent), subsequent_indent=" " * hang,
                                  break_on_hyphens=False) or [""]:
            out.append(Text(" " * indent + line))
    return say


def _block(memory_map: MemoryMap, label: str, kind: str, width: int,
           drawn: set[str]) -> list[Text]:
    learner, reference = memory_map.learner, memory_map.reference
    known = [m for m in (learner, reference) if m is not None and label in _labels(m)]
    tensor = known[0].tensor(label)
    shapes = {tuple(m.tensor(label).shape) for m in known}
    if len(shapes) > 1:  # one grid cannot hold both: each side's would be drawn in the other's
        out: list[Text] = []
        yours, theirs = (" x ".join(str(n) for n in m.tensor(label).shape) for m in known)
        _sayer(out, width)(f"{label}: not drawn, its shapes differ (yours {yours}, the "
                           f"reference's {theirs}), and one grid cannot set them side by side.",
                           INDENT)
        return out
    offsets = [o for m in known for _, o in m.outside(label, kind, indexed=False)]
    past = [index for m in known for _, index, _ in m.past(label, kind)]
    # Row labels: a 2-D tensor's row numbers, a wrapped 1-D tensor's first index per line, the
    # leading indices of a tensor of more dimensions ("1,0,5").
    lead = tensor.shape[:-1]
    longest = len(str(_count(tensor.shape) + 64)) if len(tensor.shape) < 2 else \
        sum(len(str(n + EXTRA_ROWS)) for n in lead) + len(lead) - 1
    budget = max(8, (width - INDENT - longest - 2 - GAP) // 2)
    layout = _layout(tensor, offsets, past, budget)
    sides = [_Side(m, label, kind, layout) for m in (learner, reference)]
    _choose_rows(layout, sides)
    labels = [layout.row_label(r) for r in layout.rows]
    label_width = max([len(s) for s in labels], default=1)
    grid_width = len(layout.columns)
    slot = max(grid_width, len(WHO["learner"]))  # a narrow grid still has room for its title
    out: list[Text] = []
    say = _sayer(out, width)
    shape = " x ".join(str(n) for n in tensor.shape) or "a scalar"
    what = "which program stored each element" if kind == "store" else \
        "which program read each element"
    say(f"{label} ({shape}, {tensor.dtype}): {what}", INDENT)
    indent = " " * (INDENT + label_width + 1)
    out.append(Text(indent + WHO["learner"].ljust(slot) + " " * GAP + WHO["reference"]))
    ruler = _ruler(layout)
    if ruler.strip():
        out.append(Text((indent + ruler.ljust(slot) + " " * GAP + ruler).rstrip()))
    for row, row_label in zip(layout.rows, labels):
        line = Text(" " * INDENT + row_label.rjust(label_width) + " ")
        if isinstance(row, str):
            drawn.add(row)
            line.rstrip()
            out.append(line)
            continue
        for number, side in enumerate(sides):
            if number:
                line.append(" " * (GAP + slot - grid_width))
            for column in layout.columns:
                if column is None:
                    drawn.add(ELIDED_COLUMN)
                    line.append(ELIDED_COLUMN, style=STYLES[ELIDED_COLUMN])
                else:
                    char, style = side.cell(row, column)
                    drawn.add(char)
                    line.append(char, style=style)
        line.rstrip()
        out.append(line)
    if len(tensor.shape) > 2:
        drawn.add("labelled rows")
    for side in sides:
        drawn |= {f"placed {how}" for how in side.placed_by}
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


# What each mark means, in the key, when a block draws it.
MARKS = {
    OUTSIDE: "a lane that addressed no element of the tensor",
    ELSEWHERE: "a lane past an edge of the tensor whose address fell on another of its "
               "elements, which it read or wrote instead",
    ELIDED_COLUMN: "columns left out",
    ELIDED_ROW: "rows left out, drawn alike in both maps",
    REPEATED_ROW: "rows left out, each drawn exactly as the rows just above and below",
}


def _key(memory_map: MemoryMap, drawn: set[str]) -> list[str]:
    sides = [m for m in (memory_map.learner, memory_map.reference) if m is not None]
    most = max((max(m.programs, default=0) for m in sides), default=0)
    shown = "0-9, a-z, A-Z" if most >= 36 else "0-9, a-z" if most >= 10 else "0-9"
    numbers = {"0-9": "", "0-9, a-z": ", then a-z for 10 to 35",
               "0-9, a-z, A-Z": ", then a-z for 10 to 35 and A-Z for 36 to 61"}[shown]
    marks = "".join(f"; '{mark}' {meaning}" for mark, meaning in MARKS.items() if mark in drawn)
    if "placed index" in drawn:
        marks += ". A lane past an edge is drawn at the row and column the kernel's " \
                 "offsets gave it (a 1-D block's, on the row where the block starts)"
    if "placed address" in drawn:
        marks += (". Other lanes" if "placed index" in drawn else ". Lanes outside it are") + \
            " drawn where the next elements would be in memory"
    # programs are numbered on through every launch of the call: only with one launch is a
    # 1-D grid's number its tl.program_id(0)
    several = any(len(m.launches) > 1 for m in sides)
    order = "(on from one launch to the next: the lines below give each launch's programs and " \
        "their tl.program_id)" if several else "(in a 1-D grid, its tl.program_id(0))"
    key = [f"Key: an element shows the program that touched it, numbered in launch order "
           f"{order}: 0-9{numbers}"
           + (", and again from 0 after 61" if most >= len(SYMBOLS) else "")
           + f". '{NEVER}' never touched; '{SEVERAL}' stored more than once, or read by more "
           f"than one program{marks}. An atomic operation (tl.atomic_add, ...) counts as a "
           "read and a store."]
    if "labelled rows" in drawn:
        key.append("A tensor of more than two dimensions is drawn one row per vector along its "
                   "last dimension, labelled by its other indices: row 1,0,5 is [1, 0, 5, :].")
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

    from learning.exercises import solution_path
    from learning.grader import map_run, registry

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
        drawn = map_run.record_map(registry.find("elementwise"), mine / "elementwise.py",
                                   "triton", f"n = {n}", theirs / "elementwise.py")
    if drawn.learner is None or drawn.reference is None:
        raise RuntimeError(f"the lesson's memory map could not be recorded: {drawn.note}")
    return "```text\n" + plain(drawn, 80) + "\n```"


def _replaced(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise ValueError(f"the elementwise solution no longer holds {old.strip()!r} once; "
                         "update learning/grader/map_view.lesson_block")
    return text.replace(old, new)
