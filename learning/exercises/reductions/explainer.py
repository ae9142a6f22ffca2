"""Reductions and their identities: the value each one pads with, and a pairwise tree traced
level by level (lessons 03 and 07)."""

from __future__ import annotations

import math

from learning.explainers.page import Heading, Page, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "a row of values (-3,-1,-4)"
DEFAULT_ROW = (-3.0, -1.0, -4.0, -1.0, -5.0)
IDENTITY = {"sum": 0.0, "max": -math.inf, "min": math.inf, "product": 1.0}
COMBINE = {"sum": lambda a, b: a + b, "max": max, "min": min, "product": lambda a, b: a * b}
SPELLING = {"sum": ("a + b", "0.0"), "max": ("max(a, b)", "-math.inf"),
            "min": ("min(a, b)", "math.inf"), "product": ("a * b", "1.0")}


def number(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def values_text(values) -> str:
    return "[" + ", ".join(number(v) for v in values) + "]"


def width_for(n: int) -> int:
    """The block: the smallest power of two holding n values (one lane at least)."""
    width = 1
    while width < n:
        width *= 2
    return width


def tree(values, op: str, pad: float | None = None) -> list[list[float]]:
    """Every level of the pairwise tree: the padded row, then neighbours combined."""
    fill = IDENTITY[op] if pad is None else pad
    level = [float(v) for v in values] + [fill] * (width_for(len(values)) - len(values))
    levels = [level]
    while len(level) > 1:
        level = [COMBINE[op](level[i], level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


def identities(row) -> Table:
    """Each reduction, its identity, and what padding with 0 would have given for ``row``."""
    row = [float(v) for v in row]
    pad = width_for(len(row)) - len(row)
    rows = []
    for op, (formula, spelled) in SPELLING.items():
        right = tree(row, op)[-1][0]
        with_zero = tree(row, op, pad=0.0)[-1][0]
        verdict = "same" if with_zero == right else "wrong"
        rows.append((op, formula, spelled, number(right), f"{number(with_zero)} ({verdict})"))
    caption = (f"The row {values_text(row)} fills {len(row)} of {width_for(len(row))} lanes; "
               f"{pad} padded lane{'s hold' if pad != 1 else ' holds'} the identity.")
    return Table(("Reduction", "combine(a, b)", "Identity (pad with)", "Result",
                  "Result if padded with 0"), tuple(rows), caption)


def trace(row, op: str) -> Table:
    """The tree for ``op``, one line per level."""
    levels = tree(row, op)
    rows = []
    for depth, level in enumerate(levels):
        if depth == 0:
            what = f"the row, padded with {number(IDENTITY[op])}"
        else:
            pairs = len(levels[depth - 1]) // 2
            what = f"{pairs} pair{'s' if pairs != 1 else ''} combined"
        rows.append((str(depth), what, values_text(level)))
    return Table(("Level", "What happened", "Values"), tuple(rows),
                 f"{op} of {values_text(row)} = {number(levels[-1][0])} after "
                 f"{len(levels) - 1} levels.")


def page(row=None) -> Page:
    """The identity table and four traced trees for ``row`` (``--input``), or the default."""
    row = list(DEFAULT_ROW) if row is None else list(row)
    result = Page(f"Reducing {values_text(row)}")
    result.add(
        Text("A reduction folds a row into one value with a combine step. A block has a power "
             "of two lanes, so a shorter row is padded; the padding must be the reduction's "
             "identity, the value that combine leaves unchanged, or it takes part in the result."),
        Heading("The identities"), identities(row),
    )
    for op in SPELLING:
        result.add(Heading(f"{op}: the tree, level by level"), trace(row, op))
    result.add(Text("Each level halves the one before, so n values need about log2(n) levels; "
                    "on a GPU every pair of one level is combined at the same time."))
    return result


BLOCKS = {
    "identities": identities,
    "trace_sum": lambda row: trace(row, "sum"),
    "trace_max": lambda row: trace(row, "max"),
    "trace_min": lambda row: trace(row, "min"),
    "trace_product": lambda row: trace(row, "product"),
}


def shapes(numbers) -> Table:
    """The shapes in a (ROWS, BLOCK) tile's reduction, with and without keep_dims."""
    rows_, block = (int(v) for v in numbers)

    def broadcast(a: tuple, b: tuple) -> str:
        a, b = list(a), list(b)
        while len(a) < len(b):
            a.insert(0, 1)
        while len(b) < len(a):
            b.insert(0, 1)
        out = []
        for p, q in zip(a, b):
            if p != q and 1 not in (p, q):
                return f"error: {p} and {q} do not match"
            out.append(max(p, q))
        return str(tuple(out))

    tile = (rows_, block)
    kept, dropped = (rows_, 1), (rows_,)
    wrong = broadcast(tile, dropped)
    if wrong.startswith("(") and rows_ == block:
        wrong += ": runs, but row r subtracts the statistic of row c"
    return Table(("Expression", "Shape"), (
        ("rows = pid * ROWS + tl.arange(0, ROWS)[:, None]", str((rows_, 1))),
        ("cols = tl.arange(0, BLOCK)[None, :]", str((1, block))),
        ("x = tl.load(..., mask=(rows < n_rows) & (cols < n_cols), other=...)", str(tile)),
        ("tl.max(x, axis=1, keep_dims=True)", str(kept)),
        ("x - tl.max(x, axis=1, keep_dims=True)", broadcast(tile, kept)),
        ("tl.max(x, axis=1)", str(dropped)),
        ("x - tl.max(x, axis=1)", wrong),
    ), f"ROWS = {rows_}, BLOCK = {block}.")


BLOCKS["shapes"] = shapes


def _float32(value: float) -> float:
    """``value`` rounded to float32 (to nearest even), in plain Python."""
    import struct

    return struct.unpack("f", struct.pack("f", value))[0]


def _loop_sum(values) -> float:
    total = 0.0
    for value in values:
        total = _float32(total + value)
    return total


def _tree_sum(values) -> float:
    level = list(values)
    while len(level) > 1:
        if len(level) % 2:
            level.append(0.0)
        level = [_float32(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def summation(numbers) -> Table:
    """The float32 rounding error of a left-to-right loop and of a pairwise tree, against the
    exact sum (math.fsum), each the mean over a few seeded rows of uniform values in [0, 1)."""
    import math
    import random

    rows = []
    for n in (int(v) for v in numbers):
        loop_errors, tree_errors = [], []
        for seed in range(4):
            rng = random.Random(seed)
            values = [_float32(rng.random()) for _ in range(n)]
            exact = math.fsum(values)
            loop_errors.append(abs(_loop_sum(values) - exact) / exact)
            tree_errors.append(abs(_tree_sum(values) - exact) / exact)
        rows.append((f"{n:,}", f"{sum(loop_errors) / 4:.1e}", f"{sum(tree_errors) / 4:.1e}"))
    return Table(("Values summed", "Loop, relative error", "Tree, relative error"), tuple(rows),
                 "float32 sums of uniform values in [0, 1), the mean over 4 seeded rows, "
                 "against the exact sum (math.fsum); computed by python -m learning.computed.")


BLOCKS["summation"] = summation
