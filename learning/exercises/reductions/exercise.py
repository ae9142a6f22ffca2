"""The reductions exercise (lessons 03 and 07): a pairwise tree padded with the reduction's
identity, then rows centred in Triton with masked loads whose ``other`` is that identity."""

from __future__ import annotations

import math

from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import any_of, rows_at_n_cols, same_as
from learning.grader.tensors import TensorSpec

IDENTITY = {"sum": 0.0, "max": -math.inf, "min": math.inf, "product": 1.0}
COMBINE = {"sum": lambda a, b: a + b, "max": max, "min": min, "product": lambda a, b: a * b}

# ---------------------------------------------------------------------------------------------
# Lesson 03: tree_reduce(values, op) returns every level of the tree, compared exactly.


def tree(values, op, pad=None, halves=False, combine=None):
    """The levels of a pairwise tree; ``pad``, ``halves`` and ``combine`` (another op's step)
    reproduce known mistakes."""
    width = 1
    while width < len(values):
        width *= 2
    fill = IDENTITY[op] if pad is None else pad
    level = [float(v) for v in values] + [fill] * (width - len(values))
    levels = [level]
    while len(level) > 1:
        half = len(level) // 2
        pairs = [(level[i], level[i + half]) for i in range(half)] if halves else \
            [(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        level = [COMBINE[combine or op](a, b) for a, b in pairs]
        levels.append(level)
    return levels


def reference_tree(values, op):
    return tree(values, op)


def _padded_with(value, ops):
    def detect(got, args, want) -> bool:
        values, op = args
        return op in ops and got == tree(values, op, pad=value) != want

    return detect


def _swapped(got, args, want) -> bool:
    values, op = args
    other = {"max": math.inf, "min": -math.inf}.get(op)
    return other is not None and got == tree(values, op, pad=other) != want


def _unpadded(got, args, want) -> bool:
    values, _ = args
    return (isinstance(got, list) and len(got) > 0 and got[0] == [float(v) for v in values]
            and len(values) != len(want[0]))


def _halves(got, args, want) -> bool:
    return got == tree(*args, halves=True) != want


def _result_only(got, args, want) -> bool:
    result = want[-1][0]
    return got == result or got == [result] or got == [[result]] and len(want) > 1


def _first_level_missing(got, args, want) -> bool:
    return len(want) > 1 and got == want[1:]


def _other_combine(got, args, want) -> bool:
    """Padded with the right identity, but combined with another reduction's step."""
    values, op = args
    return got != want and any(got == tree(values, op, combine=other)
                               for other in COMBINE if other != op)


def _rounded_levels(got, args, want) -> bool:
    """Every level the reference's, each value rounded to the same 1 to 11 decimal places (a
    tree printed for display, round(v, 2)); infinities stay as they are."""
    if got == want or not isinstance(got, list) or len(got) != len(want) or any(
            not isinstance(g, list) or len(g) != len(w) for g, w in zip(got, want)):
        return False
    pairs = [(g, w) for level, wanted in zip(got, want) for g, w in zip(level, wanted)]
    return any(all(g == (round(w, digits) if math.isfinite(w) else w) for g, w in pairs)
               for digits in range(1, 12))


PYTHON_BUGS = (
    Bug("rounded", "the levels are rounded: return every value exactly as the combines give "
        "it, round() is for printing", _rounded_levels),
    Bug("zero-padding", "the row was padded with 0, which is the identity of sum only: pad a "
        "max with -inf, a min with +inf and a product with 1", _padded_with(0.0, ("max", "min",
                                                                               "product"))),
    Bug("swapped-identity", "this tree was padded with the other extreme's identity: a max "
        "pads with -inf (below everything), a min with +inf (above everything)", _swapped),
    Bug("one-padding", "the row was padded with 1, the identity of product only: a sum pads "
        "with 0", _padded_with(1.0, ("sum", "max", "min"))),
    Bug("no-padding", "level 0 must be padded with the identity up to a power of two, so that "
        "every level halves exactly", _unpadded),
    Bug("halves-pairing", "pair neighbours, level[2i] with level[2i + 1]; pairing i with "
        "i + half is also a tree, but not the one this exercise traces", _halves),
    Bug("result-only", "return every level, from the padded row to [result], not only the "
        "result", _result_only),
    Bug("first-level-missing", "the first level is the padded row itself, before any "
        "combining", _first_level_missing),
    Bug("wrong-combine", "each level combines with another reduction's step: combine(op, a, "
        "b) must give a + b, max(a, b), min(a, b) or a * b for its own op", _other_combine),
)


def _call(values, op):
    return lambda: ([float(v) for v in values], op)


PYTHON_CASES = (
    Case("sum of five", "[3, 1, 4, 1, 5]: eight lanes, three padded with 0",
         _call([3, 1, 4, 1, 5], "sum"), catches=("one-padding", "no-padding")),
    Case("max of negatives", "[-3, -1, -4]: a padded 0 would win, so the padding is -inf",
         _call([-3, -1, -4], "max"), catches=("zero-padding", "swapped-identity")),
    Case("min of positives", "[3, 1, 4]: a padded 0 would win, so the padding is +inf",
         _call([3, 1, 4], "min"), catches=("zero-padding", "swapped-identity")),
    Case("product of five", "[2, 3, 0.5, 4, 1.5]: a padded 0 would make everything 0, so the "
         "padding is 1", _call([2, 3, 0.5, 4, 1.5], "product"),
         catches=("wrong-combine", "zero-padding")),
    Case("max of mixed signs", "[-2, 5, -7, 1, 0, 3]: six values in eight lanes",
         _call([-2, 5, -7, 1, 0, 3], "max"), catches=("zero-padding", "halves-pairing")),
    Case("sum of eight", "a power of two: no padding, three levels of halving",
         _call([0.5, -1.5, 2, 8, -3, 0.25, 1, 4], "sum"),
         catches=("halves-pairing", "result-only", "first-level-missing")),
    Case("sum of fractions", "[1/3, 2/3, 1/7, 2/7, 3/7]: values of many digits, and sums whose "
         "last bits the order of the additions sets", _call([1 / 3, 2 / 3, 1 / 7, 2 / 7, 3 / 7],
                                                          "sum"), catches=("rounded",)),
    Case("single value", "[7] is already reduced: one level", _call([7], "min"), catches=()),
    Case("empty row, product", "[]: one lane holding the identity, the product of nothing",
         _call([], "product"), catches=("zero-padding",)),
    Case("empty row, max", "[]: the maximum of nothing is -inf", _call([], "max"),
         catches=("zero-padding", "swapped-identity", "one-padding")),
)

# ---------------------------------------------------------------------------------------------
# Lesson 07: centre_rows_triton(x, op) on a 2-D tensor, several rows per program.


def reference_centred(x, op):
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    centre = x.max(axis=1, keepdims=True) if op == "max" else x.mean(axis=1, keepdims=True)
    return x - centre


def _np():
    import numpy as np

    return np


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _zero_padded_max(x, op):
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    if op != "max":
        return reference_centred(x, op)
    padded = _next_power_of_two(x.shape[1]) > x.shape[1]
    centre = x.max(axis=1, keepdims=True)
    return x - (np.maximum(centre, 0.0) if padded else centre)


def _minus_inf_padded_sum(x, op):
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    if op != "mean" or _next_power_of_two(x.shape[1]) == x.shape[1]:
        return reference_centred(x, op)
    return np.full(x.shape, np.inf)


def _mean_over_block(x, op):
    x = _np().asarray(x, dtype=_np().float64)
    if op != "mean":
        return reference_centred(x, op)
    return x - x.sum(axis=1, keepdims=True) / _next_power_of_two(x.shape[1])


def _float16_mean(x, op):
    """The mean taken in float16, as a kernel without x.to(tl.float32) takes it: a row whose
    sum passes 65504 overflows to inf, and every centred value becomes -inf."""
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    if op != "mean":
        return reference_centred(x, op)
    with np.errstate(over="ignore"):
        total = x.astype(np.float16).sum(axis=1, keepdims=True, dtype=np.float16)
    if np.isfinite(total).all():  # no overflow: float16's rounding alone, no exact replay
        raise ValueError("the sum fits in float16")
    return x - total.astype(np.float64) / x.shape[1]


def _keep_dims_dropped(x, op):
    """ROWS == BLOCK without keep_dims: the (ROWS,) statistic lines up with the columns, so lane
    (r, c) of a tile subtracts the statistic of the tile's row c, that of a padding row past the
    last (-inf for max, whose padding reads -inf; 0 for mean). Any other ROWS fails to compile."""
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    n_rows, n_cols = x.shape
    block = _next_power_of_two(n_cols)
    statistic = x.max(axis=1) if op == "max" else x.mean(axis=1)
    padded = np.full(-(-n_rows // block) * block, -np.inf if op == "max" else 0.0)
    padded[:n_rows] = statistic
    tile_starts = (np.arange(n_rows) // block) * block
    return x - padded[tile_starts[:, None] + np.arange(n_cols)[None, :]]


def _down_the_columns(rows: int):
    """The statistic taken with axis=0 in tiles of ``rows`` rows: lane (r, c) subtracts the max
    (or the sum over n_cols) of column c over the rows of its tile (with or without keep_dims:
    a (BLOCK,) statistic broadcasts over the tile's rows as (1, BLOCK) does). The padding rows
    past the last add nothing (-inf to a max, 0 to a sum)."""
    def replay(x, op):
        np = _np()
        x = np.asarray(x, dtype=np.float64)
        n_rows, n_cols = x.shape
        out = np.empty_like(x)
        for start in range(0, n_rows, rows):
            tile = x[start:start + rows]
            column = tile.max(axis=0) if op == "max" else tile.sum(axis=0) / n_cols
            out[start:start + rows] = tile - column[None, :]
        return out

    return replay


def _always(statistic):
    """Rows centred on ``statistic`` whatever op asked for."""
    return lambda x, op: reference_centred(x, statistic)


_LOOSE = {"atol": 3e-3, "rtol": 3e-3}  # the formulas run in float64, the kernels in FP32 or less
_TIGHT = {"atol": 2e-5, "rtol": 2e-4}  # for mistakes whose effect is smaller than _LOOSE

TRITON_BUGS = (
    Bug("wrong-op", "op='max' subtracts each row's maximum, op='mean' each row's mean: these "
        "rows were centred on the other one",
        any_of(same_as(_always("max"), **_LOOSE), same_as(_always("mean"), **_LOOSE))),
    Bug("zero-other", "padded lanes read 0 (other=0, or no other at all), and 0 beats every "
        "value of an all-negative row: load a max with other=-float('inf'), its identity",
        same_as(_zero_padded_max, **_LOOSE)),
    Bug("minus-inf-other-for-sum", "a sum's padded lanes read -inf, which makes every sum "
        "-inf: the identity of sum is 0, so load with other=0.0",
        same_as(_minus_inf_padded_sum, **_LOOSE)),
    Bug("mean-over-block", "the mean divided by BLOCK, counting the padded lanes: divide the "
        "sum by n_cols", same_as(_mean_over_block, **_TIGHT)),
    Bug("keep-dims", "the row statistic has shape (ROWS,) and does not broadcast back over a "
        "(ROWS, BLOCK) tile: reduce with keep_dims=True to get (ROWS, 1). With ROWS equal to "
        "BLOCK it even runs, and row r subtracts the statistic of row c of its tile",
        same_as(_keep_dims_dropped, **_LOOSE), error="incompatible dimensions"),
    Bug("wrong-axis", "the statistic was taken down the tile's columns (axis=0, over its ROWS "
        "rows), not along each row: reduce with axis=1, the BLOCK axis",
        # not 1: down a column of one row is no reduction at all (centre = x), another mistake
        any_of(*(same_as(_down_the_columns(rows), **_LOOSE) for rows in (2, 4, 8, 16, 32, 64)))),
    Bug("out-of-bounds", "a load or store reached outside the tensors; which part of the "
        "address was wrong, the check cannot tell. It comes from one of: a lane that should "
        "be masked and was not (the tile's columns, cols < n_cols, and rows, rows < n_rows); "
        "an offset for a row that does not exist (row r starts at r * row_stride); or an "
        "address built with the wrong stride, or into an output allocated too small"),
    Bug("grid-too-small", "whole rows were never written: no program stored them. It comes "
        "from one of: a grid of too few programs (triton.cdiv(n_rows, ROWS), one for every ROWS "
        "rows); row indices that skip rows (program p starts at row p * ROWS); or a mask that "
        "hides every lane of the later rows (the column mask built from the address's offsets, "
        "row * row_stride + column, where it must compare the columns alone with n_cols)"),
    Bug("fp16-arithmetic", "the row's sum overflowed: float16 holds nothing above 65504, and "
        "these rows add up to more. Convert after the load, x.to(tl.float32), and reduce in "
        "FP32; only the store goes back to float16", same_as(_float16_mean, **_LOOSE)),
    Bug("row-stride", "a row-strided view (x[::2], a column slice) starts row r at "
        "r * x.stride(0), which is larger than n_cols: address row r with the row stride "
        "the launcher passes (x.stride(0)), not with n_cols or with another tensor's stride "
        "(a new output's is n_cols)",
        same_as(rows_at_n_cols(reference_centred), **_LOOSE)),
)


def _tensor(seed: int, rows: int, cols: int, op: str, *, dtype: str = "float32",
            layout: str = "contiguous", transform=None):
    def make():
        np = _np()
        values = np.random.default_rng(seed).standard_normal((rows, cols))
        if transform is not None:
            values = transform(values)
        return (TensorSpec(values, dtype=dtype, layout=layout), op)

    return make


def _all_negative(x):
    return -1.0 - 4.0 * _np().abs(x)


TRITON_CASES = (
    Case("width 3, max", "[[1, 2, 3], ...] in a block of 4: the padded lane must not count",
         lambda: (TensorSpec(_np().array([[1.0, 2.0, 3.0], [-3.0, -2.0, -1.0],
                                          [0.5, 0.0, -0.5], [9.0, 9.0, 9.0]])), "max"),
         catches=("zero-other",)),
    Case("all-negative rows, max", "values in [-5, -1]: a padded 0 would be every row's "
         "maximum", _tensor(1, 6, 17, "max", transform=_all_negative),
         catches=("zero-other", "keep-dims", "wrong-axis")),
    Case("all-negative rows, mean", "the same rows centred on their mean: padding 0 is right "
         "for a sum", _tensor(1, 6, 17, "mean", transform=_all_negative),
         catches=("mean-over-block", "minus-inf-other-for-sum")),
    Case("width 1000, mean", "1000 columns in a block of 1024: 24 padded lanes must not count "
         "towards the mean", _tensor(2, 4, 1000, "mean"), catches=("mean-over-block",)),
    Case("width 1000, max", "1000 columns, all negative", _tensor(3, 4, 1000, "max",
                                                                    transform=_all_negative),
         catches=("zero-other",)),
    Case("width 2049", "rows wider than a block of 1024 or 2048: the block must cover the whole "
         "row (triton.next_power_of_2(n_cols) = 4096)", _tensor(11, 3, 2049, "mean"),
         catches=("block-too-small",)),
    Case("37 rows", "a row count that is not a multiple of the rows per program: the last "
         "tile is partly past the end", _tensor(4, 37, 33, "max"),
         catches=("out-of-bounds", "grid-too-small")),
    Case("37 rows, mean", "the same, centred on the mean", _tensor(5, 37, 33, "mean"),
         catches=("out-of-bounds", "grid-too-small")),
    Case("single column", "width 1: every row centred on itself is 0",
         _tensor(6, 5, 1, "mean"), catches=()),
    Case("row-strided view", "x[::2] of a taller tensor: the row stride is 2 * n_cols",
         _tensor(7, 6, 50, "max", layout="row-strided"), catches=("row-stride",)),
    Case("column slice", "x[:, :40] of a wider tensor: the row stride is not n_cols",
         _tensor(8, 5, 40, "mean", layout="column-slice"), catches=("row-stride",)),
    Case("float16", "float16 storage, FP32 arithmetic, float16 output: rows near 300, whose "
         "sums (about 90000) float16 cannot hold",
         _tensor(9, 4, 300, "mean", dtype="float16", transform=lambda x: 300.0 + 2.0 * x),
         catches=("wrong-dtype", "fp16-arithmetic"), tolerance=Tolerance(atol=2e-3, rtol=2e-3)),
    Case("many rows on the GPU", "4096 rows of 781 centred on their mean: a full launch (GPU "
         "only, too slow to interpret)", _tensor(10, 4096, 781, "mean"),
         catches=("mean-over-block",), gpu_only=True),
)

PYTHON_HINTS = (
    "The identities are 0.0 for sum, -math.inf for max, math.inf for min and 1.0 for product.",
    "The padded width is the smallest power of two at least len(values): start at 1, double.",
    "One level from the last: [combine(op, level[i], level[i + 1]) for i in range(0, "
    "len(level), 2)].",
    "Append each new level to a list that starts with the padded row; stop at one value.",
)

TRITON_HINTS = (
    "OP is a tl.constexpr, so `if OP == \"max\":` is decided when the kernel compiles; give "
    "each branch its own tl.load with its own other.",
    "keep_dims=True turns the (ROWS,) statistic into (ROWS, 1), which subtracts row by row.",
    "Row r starts at x_ptr + r * x_row_stride; with rows of shape (ROWS, 1) and cols of shape "
    "(1, BLOCK), x_ptr + rows * x_row_stride + cols addresses the whole tile.",
    "A masked-off row of the last tile reduces to -inf or 0, and its store is masked: harmless.",
)

def _in_program(loops: dict, args: tuple) -> str:
    return f"in program {loops['program'][0]}" if "program" in loops else ""


# Lesson 07's kernel: the tile's rows, the tile as loaded (padding included, in FP32), and the
# statistic subtracted from each row. The Python part returns every level of its tree, which
# already shows the first level that is wrong: it declares no steps.
TRITON_STEPS = Steps(("rows", "x", "centre"), _in_program, function="centre_rows_kernel")

EXERCISE = Exercise(
    name="reductions",
    title="Reductions and their identities",
    lessons=("03-reductions.md", "07-reductions-triton.md"),
    parts=(
        Part("python", "tree_reduce: a pairwise tree padded with the identity", lesson="03",
             function="tree_reduce", reference=reference_tree, cases=PYTHON_CASES,
             tolerance=Tolerance(atol=0.0, rtol=0.0), bugs=PYTHON_BUGS, returns="exact",
             hints=PYTHON_HINTS, plain_python=True),
        Part("triton", "centre_rows_triton: masked loads whose other is the identity",
             lesson="07", function="centre_rows_triton", reference=reference_centred,
             cases=TRITON_CASES, tolerance=Tolerance(atol=1e-5, rtol=1e-5), bugs=TRITON_BUGS,
             returns="tensor", needs_kernels=True,
             kernel_ops=(("sum",),),
             torch_answers=("mean",),
             hints=TRITON_HINTS, steps=TRITON_STEPS),
    ),
)
