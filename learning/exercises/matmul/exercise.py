"""The matrix-multiplication exercise (lesson 12): its cases, the bugs they catch, the references.

Most cases hold small integers: every product and every partial sum is then exact in float32,
in TF32 and on any order of summation, so a correct kernel returns exactly A @ B whatever the
GPU's tensor cores round to, and each known bug's replay gives exactly what the buggy code
returns. Two cases hold random values and so also say what "float32" means here (see TF32).
"""

from __future__ import annotations

import math

from learning.exercises.matmul import explainer as worked_example
from learning.exercises.matmul.explainer import plan_reference, planned  # shared with the page
from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import (
    any_of,
    columns_next_to_each_other,
    raises_like,
    rows_at_n_cols,
    same_as,
)
from learning.grader.tensors import TensorSpec, round_to_dtype

# Tile sizes a learner may pick: the replays of mistakes that depend on the tile try each.
TILES = (16, 32, 64, 128, 256)


def _np():
    import numpy as np

    return np


# ---------------------------------------------------------------------------------------------
# References: float64, run only in the grader's process.


def reference(a, b, block=None):
    """A @ B in float64 (``block`` changes nothing: the tiling is how, not what)."""
    np = _np()
    return np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Lesson 12, part 1: matmul_python(a, b, block) on lists of lists.


def _whole_blocks(n: int, block: int) -> int:
    return (n // block) * block


def _k_tail_dropped(a, b, block):
    """The K loop covers only whole blocks: range(0, K // block * block, block)."""
    np = _np()
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    kept = _whole_blocks(b.shape[0], block)
    return a[:, :kept] @ b[:kept]


def _edge_tiles_dropped(a, b, block):
    """Only whole tiles of C are computed; C was filled with zeros beforehand."""
    np = _np()
    c = reference(a, b)
    out = np.zeros_like(c)
    m, n = _whole_blocks(c.shape[0], block), _whole_blocks(c.shape[1], block)
    out[:m, :n] = c[:m, :n]
    return out


def _last_k_block_only(a, b, block):
    """The accumulator is reset (or assigned, not added to) in every step of the K loop."""
    np = _np()
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    last = ((b.shape[0] - 1) // block) * block
    return a[:, last:] @ b[last:]


def _python_unpadded(a, b, block):
    """Tiles read without padding: a[i][k] for every k of the block, past the edge too."""
    m, k, n = len(a), len(b), len(b[0])
    c = [[0.0] * n for _ in range(m)]
    for i0 in range(0, m, block):
        for j0 in range(0, n, block):
            for k0 in range(0, k, block):
                for i in range(i0, i0 + block):
                    for j in range(j0, j0 + block):
                        c[i][j] += sum(a[i][t] * b[t][j] for t in range(k0, k0 + block))
    return c


PYTHON_BUGS = (
    Bug("k-tail-dropped", "the K loop stops at the last whole block, so the last K % block "
        "columns of a (and rows of b) never enter the sum: loop range(0, K, block) and pad "
        "the last block with 0", same_as(_k_tail_dropped), hint=2),
    Bug("edge-tiles-dropped", "only whole tiles of C were computed: the last M % block rows "
        "and N % block columns kept their zeros. Loop range(0, M, block) over the tiles and "
        "pad the edge tiles", same_as(_edge_tiles_dropped), hint=1),
    Bug("acc-reset", "only the last block of the K loop counts: the accumulator is reset (or "
        "assigned with =) inside the K loop. Set it to zeros once per tile, before the K loop, "
        "and add to it", same_as(_last_k_block_only), hint=3),
    Bug("unpadded-edges", "an index ran past the edge of a, b or C (the line above says "
        "which): a tile read past the edge of a or b, or stored past the edge of C, raises "
        "this error on these inputs. Read a tile padded with 0, a[i][k] if i < M and k < K "
        "else 0.0, and store only the elements inside C (i0 + i < M and j0 + j < N)",
        raises=raises_like(_python_unpadded), hint=2),
    Bug("wrong-length", "C = A @ B has one row for each row of a and one column for each "
        "column of b: len(a) rows of len(b[0]) values", hint=1),
)


def _lists(a_rows, b_rows, block):
    return lambda: ([[float(v) for v in row] for row in a_rows],
                    [[float(v) for v in row] for row in b_rows], block)


def _counting(m: int, k: int, n: int, block: int, seed: int = 0, low: int = -4, high: int = 4):
    """Small integers: every sum is exact, so any order of summation gives the same C."""
    def make():
        import random

        rng = random.Random(seed)
        a = [[float(rng.randint(low, high)) for _ in range(k)] for _ in range(m)]
        b = [[float(rng.randint(low, high)) for _ in range(n)] for _ in range(k)]
        return a, b, block

    return make


def _random_floats(m: int, k: int, n: int, block: int, seed: int):
    def make():
        import random

        rng = random.Random(seed)
        a = [[round(rng.uniform(-2, 2), 6) for _ in range(k)] for _ in range(m)]
        b = [[round(rng.uniform(-2, 2), 6) for _ in range(n)] for _ in range(k)]
        return a, b, block

    return make


# The worked example of `python -m learning.explain matmul`, the same matrices.
WORKED_M, WORKED_N, WORKED_K, WORKED_BLOCK = worked_example.DEFAULT
WORKED_A, WORKED_B = worked_example.worked_matrices(WORKED_M, WORKED_N, WORKED_K)

PYTHON_CASES = (
    Case("worked example", "3x3 @ 3x2 in tiles of 2: the two tiles the lesson works by hand",
         _lists(WORKED_A, WORKED_B, WORKED_BLOCK),
         catches=("k-tail-dropped", "edge-tiles-dropped", "acc-reset", "unpadded-edges")),
    Case("1x1x1", "one number times one number, in a tile of 4: everything else is padding",
         _lists(((3,),), ((-2,),), 4), catches=("unpadded-edges",)),
    Case("no edge anywhere", "4x6 @ 6x2 in tiles of 2: every tile is whole, nothing to pad",
         _counting(4, 6, 2, 2, seed=1), catches=("acc-reset",)),
    Case("edges in M, N and K", "5x7 @ 7x3 in tiles of 2: the last tile of every dimension "
         "is cut", _counting(5, 7, 3, 2, seed=2),
         catches=("k-tail-dropped", "edge-tiles-dropped", "unpadded-edges")),
    Case("block of 1", "tiles of a single element: the plain triple loop, in tiles",
         _counting(3, 4, 5, 1, seed=3), catches=("wrong-length",)),
    Case("block larger than the matrices", "2x3 @ 3x5 in tiles of 8: one tile, mostly "
         "padding, and a K loop of one step", _counting(2, 3, 5, 8, seed=4),
         catches=("k-tail-dropped", "edge-tiles-dropped", "unpadded-edges")),
    Case("tall and skinny", "17x5 @ 5x2 in tiles of 4: many tile rows, one tile column",
         _counting(17, 5, 2, 4, seed=5), catches=("edge-tiles-dropped", "wrong-length")),
    Case("wide and short", "2x5 @ 5x17 in tiles of 4: one tile row, many tile columns",
         _counting(2, 5, 17, 4, seed=6), catches=("edge-tiles-dropped", "wrong-length")),
    Case("K past the block many times", "3x41 @ 41x2 in tiles of 4: eleven steps of the K "
         "loop, the last one cut", _counting(3, 41, 2, 4, seed=7),
         catches=("k-tail-dropped", "acc-reset")),
    Case("random values", "6x9 @ 9x7 of six-decimal values in tiles of 4: the sums must be "
         "exact to float64's rounding", _random_floats(6, 9, 7, 4, seed=8),
         catches=("acc-reset",)),
)

# ---------------------------------------------------------------------------------------------
# Lesson 12, part 2: matmul_triton(a, b) on two 2-D tensors.
#
# What "float32" means: on NVIDIA GPUs with tensor cores, tl.dot rounds float32 inputs to TF32
# (10 bits of mantissa) before it multiplies, unless told input_precision="ieee"; the sums stay
# float32. The course accepts both: integer cases are exact either way, and the one random
# float32 case allows TF32's error (below).

EXACT = Tolerance(atol=1e-6, rtol=1e-6)  # small integers: every correct kernel is exact
FP16 = Tolerance(atol=1e-3, rtol=2e-3)  # random float16: C rounded once to float16
# Random float32 in [-1, 1], K = 300, |C| up to 23: inputs truncated to TF32 err by up to
# 2**-10 of themselves, and the worst element of C then errs by 0.016 (0.0055 when TF32
# rounds to nearest), a seventh of what this allows at most; the rest is room for the order
# in which a GPU sums. No tolerance here can catch a float16 accumulator: it keeps 11 bits,
# as TF32 does, and errs by 0.008 (BLOCK_K = 256) to 0.019 (BLOCK_K = 16), on both sides of
# TF32's 0.016. The whole-number case "float32 sums past 65504" catches it instead
# (tests/test_matmul.py measures both errors).
TF32 = Tolerance(atol=3e-2, rtol=1e-2)
BF16 = Tolerance(atol=1e-2, rtol=8e-3)  # bfloat16 output: C rounded once to bfloat16
_REPLAY = {"atol": 1e-6, "rtol": 1e-6}  # replays of integer cases are exact, as the kernel


def _stored(x, dtype: str):
    return round_to_dtype(x, dtype)


def _out_dtype(args) -> str:
    return getattr(args[0], "stored_dtype", "float64")


def _per_tile(form):
    """One replay per tile size (``form(a, b, tile)``): any of them is evidence."""
    return any_of(*(same_as(lambda a, b, t=t: form(a, b, t), **_REPLAY) for t in TILES))


def _per_tile_pair(form):
    return any_of(*(same_as(lambda a, b, tm=tm, tn=tn: form(a, b, tm, tn), **_REPLAY)
                    for tm in TILES for tn in TILES))


def _padded_k_with(fill: float):
    """Both tiles padded with ``fill`` past K: each padded step adds fill * fill."""
    def form(a, b, block_k):
        np = _np()
        c = reference(a, b)
        pad = (-b.shape[0]) % block_k
        if pad:
            with np.errstate(all="ignore"):
                c = c + pad * (fill * fill)
        return _stored(c, _out_dtype((a,)))

    return form


def _k_loop_short(a, b, block_k):
    """for k in range(0, K // BLOCK_K): the last, partial K block is never read."""
    np = _np()
    kept = _whole_blocks(b.shape[0], block_k)
    return _stored(np.asarray(a)[:, :kept] @ np.asarray(b)[:kept], _out_dtype((a,)))


def _last_block(a, b, block_k):
    """acc = tl.dot(a, b) instead of acc += ...: only the last K block remains."""
    np = _np()
    return _stored(_last_k_block_only(np.asarray(a), np.asarray(b), block_k), _out_dtype((a,)))


def _accumulated_in(acc_dtype: str | None, rounds_each_product: bool):
    """acc kept in ``acc_dtype`` or (None) in the inputs' own dtype, added to in one of two
    ways: acc += tl.dot(a, b).to(...) rounds each K block's float32 product, then the sum;
    acc = (acc + tl.dot(a, b)).to(...) rounds only the sum. A float16 acc on float16 inputs is
    the inputs' dtype's mistake: its replay is left to that one, so the cause is named once."""
    def form(a, b, block_k):
        np = _np()
        dtype = _out_dtype((a,))
        if acc_dtype == dtype:
            raise ValueError(f"{dtype} inputs: the replay of an accumulator in their dtype")
        kept = acc_dtype or dtype
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        acc = np.zeros((a.shape[0], b.shape[1]))
        with np.errstate(all="ignore"):
            for k0 in range(0, b.shape[0], block_k):
                step = _stored(a[:, k0:k0 + block_k] @ b[k0:k0 + block_k], "float32")
                if rounds_each_product:
                    step = _stored(step, kept)
                acc = _stored(acc + step, kept)
        return _stored(acc, dtype)

    return form


def _accumulated_in_either_way(acc_dtype: str | None):
    return any_of(*(_per_tile(_accumulated_in(acc_dtype, rounds))
                    for rounds in (True, False)))


def _stored_as_float16(a, b):
    """The tile converted with .to(tl.float16) before the store, whatever C's dtype."""
    return _stored(_stored(reference(a, b), "float16"), _out_dtype((a,)))


def _whole_tiles_only(a, b, block_m, block_n):
    """grid = (M // BLOCK_M, N // BLOCK_N): the edge tiles never run (NaN: never written)."""
    np = _np()
    c = _stored(reference(a, b), _out_dtype((a,)))
    out = np.full(c.shape, np.nan)
    m, n = _whole_blocks(c.shape[0], block_m), _whole_blocks(c.shape[1], block_n)
    if not m or not n:  # nothing written, as every way of writing nothing leaves C: no evidence
        raise ValueError("no whole tile")
    out[:m, :n] = c[:m, :n]
    return out


def _grid_axes_swapped(a, b, block_m, block_n):
    """The grid's axes swapped against the kernel's program ids: only tiles (i, j) with i and
    j below both counts of tiles run."""
    np = _np()
    c = _stored(reference(a, b), _out_dtype((a,)))
    tiles_m, tiles_n = -(-c.shape[0] // block_m), -(-c.shape[1] // block_n)
    both = min(tiles_m, tiles_n)
    out = np.full(c.shape, np.nan)
    out[:both * block_m, :both * block_n] = c[:both * block_m, :both * block_n]
    return out


def _operand_offsets_swapped(a, b, tile):
    """a's rows taken from the program's column offsets and b's columns from its row offsets
    (masks swapped with them): tile (i, j) of C holds rows of tile j times columns of tile i."""
    np = _np()
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    m, n = a.shape[0], b.shape[1]
    tiles = max(-(-m // tile), -(-n // tile))
    a0 = np.zeros((tiles * tile, a.shape[1]))
    a0[:m] = a
    b0 = np.zeros((b.shape[0], tiles * tile))
    b0[:, :n] = b
    full = a0 @ b0
    rows, cols = np.arange(m)[:, None], np.arange(n)[None, :]
    source_rows = (cols // tile) * tile + rows % tile
    source_cols = (rows // tile) * tile + cols % tile
    return _stored(full[source_rows, source_cols], _out_dtype((a,)))


def _matmul_of(a, b):
    return _stored(reference(a, b), _out_dtype((a,)))


TRITON_BUGS = (
    Bug("whole-tiles-grid", "the edge tiles never ran, so their elements were never "
        "written: C is what a grid of whole tiles only gives (M // BLOCK_M by N // BLOCK_N, "
        "rounded down), one program short on an axis. Launch triton.cdiv(M, BLOCK_M) by "
        "triton.cdiv(N, BLOCK_N) programs and mask the edges", _per_tile_pair(_whole_tiles_only),
        hint=5, leaves_unwritten=True),
    Bug("grid-axes-swapped", "the grid's axes are swapped against the kernel's program ids: "
        "axis 0 must count the tiles down M (triton.cdiv(M, BLOCK_M)) if pid_m = "
        "tl.program_id(0), and axis 1 the tiles across N",
        _per_tile(lambda a, b, tile: _grid_axes_swapped(a, b, tile, tile)), hint=1),
    Bug("k-padding-not-zero", "the K edge is padded with something other than 0 (-inf, "
        "softmax's fill, gives (-inf) * (-inf) = +inf): a sum's identity is 0, so load both a "
        "and b with other=0.0", any_of(_per_tile(_padded_k_with(-math.inf)),
                                       _per_tile(_padded_k_with(1.0))), hint=3),
    Bug("k-loop-short", "the K loop stops at the last whole block (range(0, K // BLOCK_K)), so "
        "the last K % BLOCK_K products never enter the sum: loop range(0, K, BLOCK_K) (or "
        "tl.cdiv(K, BLOCK_K) steps) and mask the last one", _per_tile(_k_loop_short), hint=3),
    Bug("acc-overwritten", "only the last block of the K loop counts: acc = tl.dot(a, b) "
        "replaces the sum instead of adding to it. Write acc += tl.dot(a, b)",
        _per_tile(_last_block), hint=4),
    Bug("acc-input-dtype", "the accumulator is kept in the inputs' 16-bit dtype: float16 "
        "overflows past 65504 and bfloat16 keeps 8 bits, so a long sum goes wrong. Accumulate "
        "in tl.float32 (tl.zeros(..., dtype=tl.float32)) and convert once, at the store",
        _accumulated_in_either_way(None), hint=4),
    Bug("acc-float16", "the accumulator is float16 though the inputs are not "
        "(tl.zeros(..., dtype=tl.float16), with tl.dot's result converted by .to(tl.float16) "
        "before or after it is added): float16 keeps 11 significant bits (10 stored) and its "
        "largest value is 65504, so every step of the K loop rounds the running sum to 11 bits "
        "(past 2048 it skips whole numbers) and a sum past 65504 becomes inf, even when C itself "
        "is small. Keep acc = tl.zeros(..., dtype=tl.float32), add tl.dot's float32 result as it "
        "is, and convert once, at the store",
        _accumulated_in_either_way("float16"), hint=4),
    Bug("stored-as-float16", "C was rounded to float16 before the store (acc.to(tl.float16)), "
        "whatever its dtype: convert to the output's own type, "
        "acc.to(c_ptr.dtype.element_ty)", same_as(_stored_as_float16, **_REPLAY), hint=4),
    Bug("operand-offsets-swapped", "a's tile was loaded with the program's column offsets "
        "and b's with its row offsets: a's rows go with pid_m (rows of C), b's columns with "
        "pid_n (columns of C)", _per_tile(_operand_offsets_swapped), hint=2),
    Bug("strides-assumed", "the kernel assumed contiguous tensors (row stride K for a, N for "
        "b, for both or for one of them): a view such as b.T or a[:, :K] has other strides. "
        "Pass a.stride(0), a.stride(1), b.stride(0), b.stride(1) and use them",
        any_of(*(same_as(rows_at_n_cols(_matmul_of, tensors=assumed), **_REPLAY)
                 for assumed in ((0, 1), (0,), (1,)))), hint=2),
    Bug("column-stride-assumed", "the column stride was taken to be 1 (for a, for b, or for "
        "both): in a transposed view such as a = at.T the neighbours along a row are "
        "a.stride(1) elements apart, not 1. Pass a.stride(1) and b.stride(1) and use them",
        any_of(*(same_as(columns_next_to_each_other(_matmul_of, tensors), **_REPLAY)
                 for tensors in ((0,), (1,), (0, 1)))), hint=2),
    # one of several causes, each another hint's: no one hint is pointed at
    Bug("out-of-bounds", "a load or store reached outside the tensors; which part of the "
        "address was wrong, the check cannot tell. It comes from one of: a lane that should "
        "be masked and was not (rows at or past M and columns at or past N in the loads of a "
        "and b and the store of C, and in each step of the K loop the k at or past K); an "
        "offset for a tile that does not exist (a grid of cdiv(M, BLOCK_M) x cdiv(N, "
        "BLOCK_N) programs); or an address built with the wrong strides (a row stride where "
        "the column stride belongs), or into a C allocated with another shape than (M, N)"),
    Bug("unwritten", "some elements of C were never written: no program stored them. Look at "
        "the grid (triton.cdiv(M, BLOCK_M) by triton.cdiv(N, BLOCK_N) programs), at which tile "
        "each program takes, and at the store's offsets and mask", hint=5),
    Bug("grid-too-small", "whole rows of C were never written: no program stored them. Which "
        "rows are stored is decided by the grid's first axis (triton.cdiv(M, BLOCK_M) tiles, "
        "each program's rows from pid_m * BLOCK_M) and by the store's row mask (rows < M): "
        "one of them stops short, or the store's row offsets point elsewhere", hint=5),
    Bug("block-too-small", "the last columns of C were never written: no program stored them. "
        "Which columns are stored is decided by the grid's second axis (triton.cdiv(N, "
        "BLOCK_N) tiles, each program's columns from pid_n * BLOCK_N) and by the store's "
        "column mask (columns < N): one of them stops short", hint=5),
    Bug("off-by-one-mask", "the last column of C was never written: the store's column mask "
        "stops one short of N (it must keep the columns < N), or the grid's second axis leaves "
        "out the tile that holds it", hint=5),
    Bug("wrong-shape", "C = A @ B is M x N: allocate torch.empty((M, N), dtype=a.dtype, "
        "device=a.device), M = a.shape[0] and N = b.shape[1]", hint=5),
    Bug("wrong-dtype", "C must have a's dtype: accumulate in float32, then store in the "
        "output's type (torch.empty((M, N), dtype=a.dtype, ...))", hint=5),
)


def _integers(seed: int, m: int, k: int, n: int, *, dtype: str = "float32", low: int = -4,
              high: int = 4, a_layout: str = "contiguous", b_layout: str = "contiguous"):
    """a (m, k) and b (k, n) of integers in [low, high]: exact in every float format used."""
    def make():
        rng = _np().random.default_rng(seed)
        a = rng.integers(low, high + 1, (m, k)).astype(float)
        b = rng.integers(low, high + 1, (k, n)).astype(float)
        return (TensorSpec(a, dtype=dtype, layout=a_layout, guard=math.nan),
                TensorSpec(b, dtype=dtype, layout=b_layout, guard=math.nan))

    return make


def _random(seed: int, m: int, k: int, n: int, dtype: str):
    def make():
        rng = _np().random.default_rng(seed)
        if dtype == "float32":
            a, b = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
        else:
            a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        return (TensorSpec(a, dtype=dtype, guard=math.nan),
                TensorSpec(b, dtype=dtype, guard=math.nan))

    return make


def overflowing_halves(seed: int, m: int, k: int, n: int, dtype: str):
    """Integers whose running sum over K climbs past 65504 (float16's largest value) by K / 2
    and comes back down: C itself is small and exact, but a 16-bit accumulator overflows (or,
    in bfloat16, loses the low digits) on the way. No block of up to 256 steps reaches 65504
    on its own (256 * 15 * 15 = 57600), so the overflow is the accumulator's, whatever the
    block; with K / 2 = 512 the sum passes it at every (m, n) (512 * 12 * 12 = 73728)."""
    def make():
        np = _np()
        rng = np.random.default_rng(seed)
        half = k // 2
        a_half = rng.integers(12, 16, (m, half)).astype(float)
        b_half = rng.integers(12, 16, (half, n)).astype(float)
        nudge = rng.choice([-1.0, 0.0, 0.0, 0.0, 1.0], (half, n))
        a = np.concatenate([a_half, a_half], axis=1)  # a's second half repeats its first
        b = np.concatenate([b_half, nudge - b_half], axis=0)  # b's undoes it, but for nudge
        return (TensorSpec(a, dtype=dtype, guard=math.nan),
                TensorSpec(b, dtype=dtype, guard=math.nan))

    return make


TRITON_CASES = (
    Case("1x1x1", "one number times one number: a single tile, almost all of it padding",
         _integers(1, 1, 1, 1, low=2), catches=("out-of-bounds",)),
    Case("M edge", "45x32 @ 32x64: the last tile row is cut at M = 45",
         _integers(2, 45, 32, 64),
         catches=("whole-tiles-grid", "out-of-bounds")),
    Case("N edge", "64x32 @ 32x45: the last tile column is cut at N = 45",
         _integers(3, 64, 32, 45), catches=("whole-tiles-grid",)),
    Case("K edge", "32x45 @ 45x32: the last step of the K loop is cut at K = 45, and both "
         "tiles must pad it with 0", _integers(4, 32, 45, 32),
         catches=("k-padding-not-zero", "k-loop-short", "acc-overwritten", "out-of-bounds")),
    Case("every edge", "37x29 @ 29x43: no size is a multiple of any tile",
         _integers(5, 37, 29, 43),
         catches=("whole-tiles-grid", "k-padding-not-zero", "k-loop-short", "out-of-bounds")),
    Case("tall and skinny", "200x5 @ 5x3: many tile rows and a single tile column",
         _integers(6, 200, 5, 3), catches=("grid-axes-swapped",)),
    Case("wide and short", "3x5 @ 5x200: a single tile row and many tile columns",
         _integers(7, 3, 5, 200), catches=("grid-axes-swapped",)),
    Case("several tiles each way", "70x8 @ 8x70: three tile rows and three tile columns "
         "(with tiles of 32), each program must find its own", _integers(8, 70, 8, 70),
         catches=("operand-offsets-swapped",)),
    Case("transposed b", "b = bt.T, a view of a 24x36 tensor: b's strides are (1, 36), not "
         "(24, 1)", _integers(9, 20, 36, 24, b_layout="transposed"),
         catches=("strides-assumed", "column-stride-assumed")),
    Case("transposed a", "a = at.T, a view of a 36x20 tensor: a's strides are (1, 20), not "
         "(36, 1), so its column stride is not 1 either", _integers(18, 20, 36, 24,
                                                                   a_layout="transposed"),
         catches=("strides-assumed", "column-stride-assumed")),
    Case("column slice of a", "a = wide[:, :27], the first columns of a wider tensor: a's row "
         "stride is not K", _integers(10, 20, 27, 18, a_layout="column-slice"),
         catches=("strides-assumed",)),
    Case("K past the tile many times", "8x1000 @ 1000x8 of integers up to 20: about thirty "
         "steps of the K loop, sums in the thousands", _integers(11, 8, 1000, 8, low=-20,
                                                              high=20),
         catches=("k-loop-short", "acc-overwritten", "stored-as-float16", "acc-float16")),
    Case("float16 accumulator overflow", "float16 integers whose running sum passes 65504 "
         "before halfway along K = 1024 and comes back to a small C: only a float32 "
         "accumulator gets there", overflowing_halves(12, 5, 1024, 6, "float16"),
         catches=("acc-input-dtype", "wrong-dtype")),
    Case("float32 sums past 65504", "float32 integers whose running sum passes 65504 "
         "before halfway along K = 1024 and comes back to a small C: float32 (and TF32) holds "
         "every partial sum exactly, a float16 accumulator overflows to inf",
         overflowing_halves(17, 5, 1024, 6, "float32"),
         catches=("acc-float16",)),
    Case("float16 random", "33x50 @ 50x40 random normal float16: C rounded once, to float16",
         _random(13, 33, 50, 40, "float16"), catches=("wrong-dtype",), tolerance=FP16),
    Case("float32 random", "29x300 @ 300x31 uniform in [-1, 1]: float32 with TF32's error "
         "allowed (tl.dot's default on NVIDIA tensor cores)", _random(14, 29, 300, 31,
                                                                     "float32"),
         catches=(), tolerance=TF32),
    Case("bfloat16 accumulator", "bfloat16 integers whose running sum reaches about 1e5 at "
         "K / 2: a bfloat16 accumulator keeps 8 bits of it (GPU only: the interpreter "
         "mishandles bfloat16)", overflowing_halves(15, 5, 1024, 6, "bfloat16"),
         catches=("acc-input-dtype",), tolerance=BF16, gpu_only=True),
    Case("a full launch on the GPU", "1000x700 @ 700x900 random float16: hundreds of tiles "
         "(GPU only, too slow to interpret)", _random(16, 1000, 700, 900, "float16"),
         catches=(), tolerance=FP16, gpu_only=True,
         replays=False),
)

PYTHON_HINTS = (
    "C has len(a) rows and len(b[0]) columns; start from c = [[0.0] * n for _ in range(m)] "
    "and visit its tiles: for i0 in range(0, m, block): for j0 in range(0, n, block).",
    "Inside a tile, loop over K in blocks too: for k0 in range(0, k, block). Read a tile as "
    "a[i][kk] if i < m and kk < k else 0.0, so every tile is block x block and the padding "
    "adds 0 to the sum.",
    "Give each tile of C its own accumulator, acc = [[0.0] * block for _ in range(block)], "
    "made once before the K loop; every K step adds a_tile @ b_tile to it.",
    "After the K loop, store acc[i][j] into c[i0 + i][j0 + j] only where i0 + i < m and "
    "j0 + j < n, and return c; leave a and b as they were.",
)

TRITON_HINTS = (
    "Launch a 2-D grid, one program per tile of C: grid = (triton.cdiv(M, BLOCK_M), "
    "triton.cdiv(N, BLOCK_N)); in the kernel pid_m = tl.program_id(0), pid_n = "
    "tl.program_id(1).",
    "rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M) and cols = pid_n * BLOCK_N + "
    "tl.arange(0, BLOCK_N). With ks the k indices of one step (hint 3), a's tile is a_ptr + "
    "rows[:, None] * stride_am + ks[None, :] * stride_ak, b's is b_ptr + ks[:, None] * "
    "stride_bk + cols[None, :] * stride_bn: use the strides you are given.",
    "for k0 in range(0, K, BLOCK_K): ks = k0 + tl.arange(0, BLOCK_K). Mask a with "
    "(rows[:, None] < M) & (ks[None, :] < K) and b with (ks[:, None] < K) & (cols[None, :] < "
    "N), both with other=0.0.",
    "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32) before the loop, acc += tl.dot(a, "
    "b) inside it, and store acc.to(c_ptr.dtype.element_ty) with the mask (rows[:, None] < "
    "M) & (cols[None, :] < N).",
    "In matmul_triton: c = torch.empty((M, N), dtype=a.dtype, device=a.device); launch "
    "matmul_kernel[grid](c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1), "
    "b.stride(0), b.stride(1), M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32); return c.",
)

def _in_tile(loops: dict, args: tuple) -> str:
    """Where the reference was: "in the tile at C[0][2], K block from 4"."""
    if "i0" not in loops or "j0" not in loops:
        return ""
    place = f"in the tile at C[{loops['i0']}][{loops['j0']}]"
    return place + (f", K block from {loops['k0']}" if "k0" in loops else "")


# Each tile's accumulator, the two tiles of each step of the K loop, and C.
PYTHON_STEPS = Steps(("acc", "a_tile", "b_tile", "c"), _in_tile)

def _in_tile_program(loops: dict, args: tuple) -> str:
    """Where the reference kernel was: "in program (1, 0), K block from 32"."""
    if "program" not in loops:
        return ""
    x, y = loops["program"][:2]
    return f"in program ({x}, {y})" + (f", K block from {loops['k0']}" if "k0" in loops else "")


# The kernel's rows and columns of C, its accumulator, the ks and the tiles of a and b of each
# step of the K loop, and the tile of C.
TRITON_STEPS = Steps(("rows", "cols", "acc", "ks", "a", "b", "c"), _in_tile_program,
                     function="matmul_kernel")

# ---------------------------------------------------------------------------------------------
# Lesson 12, part 3: matmul_plan, what a launcher works out for one product before it launches:
# the facts reference_matmul's _Plan derives from the sizes, the strides and the tile (tiles of C,
# K steps and whether the K loop is masked, rows on 16-byte boundaries, which operands are worth
# copying, the multiply-adds spent on padding). All whole numbers and truths, so the answer is
# exact, and each known mistake is recognised in the fields it changes. The model itself
# (plan_reference) lives in the explainer, whose table of plans lesson 12 shows.
#
# Known mistakes: each is the plan with one rule replaced. A mistake is named only where every
# field it changes holds exactly what the mistake gives, and the rest of its fields the right
# values: the fields one rule feeds (a copy follows from the alignment) go together, so right
# alignments with wrong copies are not taken for an alignment mistake.


def _whole_tiles(m, n, k, a_strides, b_strides, element_bytes, block):
    return planned(m, n, k, a_strides, b_strides, element_bytes, block, count=lambda x, y: x // y)


def _aligned_in_elements(m, n, k, a_strides, b_strides, element_bytes, block):
    return planned(m, n, k, a_strides, b_strides, element_bytes, block,
                   aligned=lambda strides, _: strides[1] == 1 and strides[0] % 16 == 0)


def _column_stride_ignored(m, n, k, a_strides, b_strides, element_bytes, block):
    return planned(m, n, k, a_strides, b_strides, element_bytes, block,
                   aligned=lambda strides, size: strides[0] * size % 16 == 0)


def _masked_inverted(m, n, k, a_strides, b_strides, element_bytes, block):
    return planned(m, n, k, a_strides, b_strides, element_bytes, block,
                   masked=lambda k, block_k: k % block_k == 0)


def _masked_by_16(m, n, k, a_strides, b_strides, element_bytes, block):
    return planned(m, n, k, a_strides, b_strides, element_bytes, block,
                   masked=lambda k, block_k: k % 16 != 0)


def _copies_every_size(m, n, k, a_strides, b_strides, element_bytes, block):
    return planned(m, n, k, a_strides, b_strides, element_bytes, block,
                   copies=lambda a_aligned, b_aligned, macs: (not a_aligned, not b_aligned))


def _padding_without_k(m, n, k, a_strides, b_strides, element_bytes, block):
    return planned(m, n, k, a_strides, b_strides, element_bytes, block,
                   padding=lambda m, n, k, tiles, block, k_steps:
                   tiles * block[0] * block[1] * k - m * n * k)


def _padding_not_subtracted(m, n, k, a_strides, b_strides, element_bytes, block):
    return planned(m, n, k, a_strides, b_strides, element_bytes, block,
                   padding=lambda m, n, k, tiles, block, k_steps:
                   tiles * block[0] * block[1] * k_steps * block[2])


class _fields_as:  # noqa: N801 - used like a function: Bug(..., _fields_as(replay, fields))
    """A ``Bug.detect`` that recognises a mistake in the fields it changes (see above)."""

    def __init__(self, replay, fields: tuple[str, ...]):
        self.replay, self.fields = replay, fields

    def _buggy(self, args) -> dict | None:
        try:
            return self.replay(*args)
        except (ArithmeticError, ValueError, TypeError, IndexError):
            return None

    def __call__(self, got, args, want) -> bool:
        buggy = self._buggy(args)
        if buggy is None or not isinstance(got, dict) or not all(f in got for f in self.fields):
            return False
        return any(not _same(buggy[f], want[f]) for f in self.fields) and \
            all(_same(got[f], buggy[f]) for f in self.fields)

    def predicts_failure(self, args, want, atol: float, rtol: float) -> bool | None:
        buggy = self._buggy(args)
        if buggy is None:
            return None
        return any(not _same(buggy[f], want[f]) for f in self.fields)


def _same(got, want) -> bool:
    """Equal as the check compares an exact answer (True equals 1, as in Python)."""
    return got == want


_PLAN_ALIGNMENT = ("a_aligned", "b_aligned", "copy_a", "copy_b")

PLAN_BUGS = (
    Bug("whole-tiles", "a count of whole tiles or steps (M // BLOCK_M, K // BLOCK_K): a tile "
        "or step cut by an edge is still one, so round up, (x + block - 1) // block, which is "
        "what triton.cdiv computes; the padding follows from the counts",
        _fields_as(_whole_tiles, ("tiles", "k_steps", "padding")), hint=1),
    Bug("aligned-in-elements", "alignment was tested on the stride in elements "
        "(stride % 16): a row starts on a 16-byte boundary when stride * element_bytes is a "
        "multiple of 16, so 1000 two-byte elements (2000 bytes) are aligned and 1004 four-byte "
        "ones (4016 bytes) too", _fields_as(_aligned_in_elements, _PLAN_ALIGNMENT), hint=3),
    Bug("column-stride-ignored", "an operand whose elements along a row are not adjacent "
        "(column stride other than 1, as in a[:, ::2]) was called aligned: 16 bytes in one "
        "load need 16 adjacent bytes, so test strides[1] == 1 as well",
        _fields_as(_column_stride_ignored, _PLAN_ALIGNMENT), hint=3),
    Bug("masked-inverted", "\"masked\" is the other way round: the last step is cut, and so "
        "the K loop masks its loads, when BLOCK_K does not divide K (k % BLOCK_K != 0)",
        _fields_as(_masked_inverted, ("masked",)), hint=2),
    Bug("masked-by-16", "\"masked\" was tested against 16 instead of the K step: the last "
        "step is cut when BLOCK_K does not divide K (4064 is a multiple of 16, not of 64)",
        _fields_as(_masked_by_16, ("masked",)), hint=2),
    Bug("copies-every-size", "every unaligned operand was copied, whatever the product's size: "
        "the copy pays only where the product does at least 2**28 multiply-adds "
        "(m * n * k >= 2**28); below it, the copy costs about what it saves",
        _fields_as(_copies_every_size, ("copy_a", "copy_b")), hint=4),
    Bug("padding-without-k", "the padding counts the edge tiles' rows and columns but not the "
        "K loop's last, cut step: every program multiplies k_steps * BLOCK_K along K, so the "
        "work done is tiles * BLOCK_M * BLOCK_N * k_steps * BLOCK_K",
        _fields_as(_padding_without_k, ("padding",)), hint=4),
    Bug("padding-not-subtracted", "\"padding\" is the whole work done, tiles times steps "
        "times the tile's volume: the padding is what is left after m * n * k, the "
        "multiply-adds the product needs", _fields_as(_padding_not_subtracted, ("padding",)),
        hint=4),
)


def _plan_args(m, n, k, a_strides=None, b_strides=None, element_bytes=2, block=(128, 128, 64)):
    def make():
        return (m, n, k, tuple(a_strides or (k, 1)), tuple(b_strides or (n, 1)),
                element_bytes, tuple(block))

    return make


PLAN_CASES = (
    Case("1024 cubed", "every size a multiple of every block: no tile or step cut, rows of "
         "2048 bytes, no padding", _plan_args(1024, 1024, 1024), catches=("masked-inverted",)),
    Case("1000 cubed", "no block divides 1000: 8 x 8 tiles of 128 x 128, 16 steps of 64, the "
         "last cut at 1000 - 960 = 40; rows of 2000 bytes start on 16-byte boundaries",
         _plan_args(1000, 1000, 1000),
         catches=("whole-tiles", "aligned-in-elements", "padding-without-k",
                  "padding-not-subtracted")),
    Case("4097 cubed", "one past a tile in every direction: rows of 8194 bytes, never on "
         "16-byte boundaries, and a product large enough to copy both operands",
         _plan_args(4097, 4097, 4097, block=(128, 256, 64)),
         catches=("whole-tiles", "padding-without-k")),
    Case("small and unaligned", "rows of 202 bytes, but 64 x 64 x 101 is too small a product for "
         "a copy to pay", _plan_args(64, 64, 101, b_strides=(64, 1)),
         catches=("copies-every-size",)),
    Case("a short K cut by the step", "4096 x 4096 x 4064: K a multiple of 16 but not of the "
         "K step of 64, so the last step is cut",
         _plan_args(4096, 4096, 4064, block=(128, 256, 64)),
         catches=("masked-inverted", "masked-by-16", "whole-tiles")),
    Case("every other column", "a = wide[:, ::2], strides (2048, 2): rows 4096 bytes apart, "
         "but no two elements of a row adjacent",
         _plan_args(1024, 1024, 1024, a_strides=(2048, 2)),
         catches=("column-stride-ignored",)),
    Case("transposed b", "b = bt.T, strides (1, 1024): b's rows are bt's columns, one element "
         "each 2048 bytes apart", _plan_args(1024, 1024, 1024, b_strides=(1, 1024)), catches=()),
    Case("float32 rows of 1004", "four-byte elements: 1004 of them are 4016 bytes, a multiple "
         "of 16, though 1004 is not", _plan_args(1024, 1024, 1004, element_bytes=4),
         catches=("aligned-in-elements",)),
    Case("float16 rows of 1004", "the same K in two-byte elements: 2008 bytes, not a multiple "
         "of 16", _plan_args(1024, 1024, 1004), catches=()),
    Case("decoding step", "8 x 4096 x 4096 in tiles of 16 x 32 with K steps of 512: half of "
         "every tile's rows is padding", _plan_args(8, 4096, 4096, block=(16, 32, 512)),
         catches=("whole-tiles", "padding-not-subtracted")),
    Case("exactly 2**28 multiply-adds", "1024 x 1024 x 256 with a's rows 257 elements apart: "
         "as large as a product must be for the copy to pay", _plan_args(
             1024, 1024, 256, a_strides=(257, 1)), catches=()),
    Case("one row short of 2**28", "1023 x 1024 x 256, the same a: one row fewer, no copy",
         _plan_args(1023, 1024, 256, a_strides=(257, 1)), catches=("copies-every-size",)),
)

PLAN_HINTS = (
    "A tile or step cut by an edge is still a whole one: tiles = "
    "cdiv(m, BLOCK_M) * cdiv(n, BLOCK_N) and k_steps = cdiv(k, BLOCK_K), with cdiv(x, y) = "
    "(x + y - 1) // y.",
    "The last step of the K loop is cut when BLOCK_K does not divide K, and then the loop "
    "masks its loads: masked = k % BLOCK_K != 0.",
    "An operand's rows start on 16-byte boundaries when its elements along a row are adjacent "
    "and a row's length in bytes is a multiple of 16: strides[1] == 1 and strides[0] * "
    "element_bytes % 16 == 0.",
    "copy_a = not a_aligned and m * n * k >= 2**28 (the same for b); padding = tiles * "
    "BLOCK_M * BLOCK_N * k_steps * BLOCK_K - m * n * k, the multiply-adds done beyond those "
    "the product needs.",
)


EXERCISE = Exercise(
    name="matmul",
    title="Tiled matrix multiplication: derive the tiles, then write them with tl.dot",
    lessons=("12-matmul.md",),
    parts=(
        Part("python", "matmul_python: C = A @ B tile by tile in plain Python", lesson="12",
             function="matmul_python", reference=reference, cases=PYTHON_CASES,
             tolerance=Tolerance(atol=1e-12, rtol=1e-9), bugs=PYTHON_BUGS, returns="list",
             hints=PYTHON_HINTS, steps=PYTHON_STEPS, plain_python=True),
        Part("triton", "matmul_triton: one program per tile of C, tl.dot over K", lesson="12",
             function="matmul_triton", reference=reference, cases=TRITON_CASES,
             tolerance=EXACT, bugs=TRITON_BUGS, returns="tensor", needs_kernels=True,
             kernel_ops=(("dot",), ("mul", "add")),
             torch_answers=("matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear",
                            "tensordot", "mv", "dot", "sum"),
             hints=TRITON_HINTS, steps=TRITON_STEPS),
        Part("plan", "matmul_plan: what the launcher works out before it launches",
             lesson="12", function="matmul_plan", reference=plan_reference, cases=PLAN_CASES,
             tolerance=Tolerance(atol=0.0, rtol=0.0), bugs=PLAN_BUGS, returns="exact",
             hints=PLAN_HINTS, section="Your second task: plan the launch"),
    ),
)
