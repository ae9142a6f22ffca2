"""The matrix-product worked example: two tiles of C summed over K by hand, what a tile's size
does to the bytes read (lesson 02's roofline), the order programs visit the tiles in, and the
measured speed of the reference kernel when a GPU run has been committed.

Plain Python only, like every explainer: it needs no torch, no triton and no NumPy.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

from learning.bench import matmul as bench
from learning.cli import ArgumentError
from learning.course import COURSE_ROOT
from learning.exercises.traffic.explainer import EXAMPLE_BANDWIDTH, EXAMPLE_PEAK_FLOPS
from learning.explainers.page import Heading, Page, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "M,N,K,block, each 1 to 8 (3,2,3,2)"
# The worked example: A is M x K, B is K x N, tiles of BLOCK (matmul's declaration,
# learning.exercises.matmul.exercise, grades matmul_python on these same matrices).
DEFAULT = (3, 2, 3, 2)  # M, N, K, block
MAX_SIZE = 8  # --input keeps each of M, N, K and block at most this, so the tables stay readable
# An example GPU's dense 16-bit tensor-core rate, a round figure of the order of a current
# data-centre GPU's; the float32 rate and the bandwidth are lesson 02's example GPU.
EXAMPLE_TENSOR_FLOPS = 1000e12  # FLOP/s
INTENSITY_TILES = (1, 16, 32, 64, 128, 256)
RESULTS = COURSE_ROOT / "lab" / "results" / "matmul.json"
LAUNCH_PROBE = COURSE_ROOT / "lab" / "results" / "matmul_launch_probe.json"
RESULTS_TRITON39 = COURSE_ROOT / "lab" / "results" / "matmul_triton39.json"
HOST_PROBE = COURSE_ROOT / "lab" / "results" / "matmul_host_probe.json"
EDGES_PROBE = COURSE_ROOT / "lab" / "results" / "matmul_edges.json"
EDGES_PROBE_TRITON39 = COURSE_ROOT / "lab" / "results" / "matmul_edges_triton39.json"
ROWS_PROBE = COURSE_ROOT / "lab" / "results" / "matmul_rows.json"
STREAM_FLOOR = COURSE_ROOT / "lab" / "results" / "matmul_stream_floor.json"
STRIDE_PROBE = COURSE_ROOT / "lab" / "results" / "matmul_stride.json"
STRIDE_PROBE_TRITON39 = COURSE_ROOT / "lab" / "results" / "matmul_stride_triton39.json"
EARLY_PROBE = COURSE_ROOT / "lab" / "results" / "matmul_early_h100_run3.json"
RESULTS_H100_EARLY = COURSE_ROOT / "lab" / "results" / "matmul_h100_early_run3_2026-12-07.json"
RESULTS_H100_EARLY_TRITON39 = COURSE_ROOT / "lab" / "results" / \
    "matmul_h100_early_run3_triton39_2026-12-07.json"
EARLY_PROBE_TRITON39 = COURSE_ROOT / "lab" / "results" / "matmul_early_h100_run3_triton39.json"
ONE_LAUNCH = COURSE_ROOT / "lab" / "results" / "matmul_one_launch.json"
ONE_LAUNCH_TRITON39 = COURSE_ROOT / "lab" / "results" / "matmul_one_launch_triton39.json"
ONE_LAUNCH_H100 = COURSE_ROOT / "lab" / "results" / "matmul_one_launch_h100_2026-12-06.json"
BIG_ODD = 4097  # the product whose rows are copied in lab/probes/matmul_one_launch_probe.py
TARGET = 0.9  # the reference against torch.matmul at 4096^3 in float16 and bfloat16
TARGET_SIZE = (4096, 4096, 4096)


def worked_matrices(m: int, n: int, k: int) -> tuple[list[list[int]], list[list[int]]]:
    """A (m x k) counting up from 1, and B (k x n) of small numbers of both signs."""
    a = [[i * k + t + 1 for t in range(k)] for i in range(m)]
    b = [[(t + 2 * j) % 4 - 1 for j in range(n)] for t in range(k)]
    return a, b


def _cdiv(x: int, y: int) -> int:
    return -(-x // y)


def _count(n: int, noun: str) -> str:
    """'1 step', '3 steps': a count and its noun, which takes an s unless the count is 1."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _matrix(rows) -> str:
    """A matrix as a list of rows, with no space inside a row: a narrow table cell wraps
    between rows, never inside one ("[[1,2], [4,5]]", not "[[1, 2], [4," and "5]]")."""
    return "[" + ", ".join("[" + ",".join(str(v) for v in row) + "]" for row in rows) + "]"


def _product(x, y):
    return [[sum(x[i][t] * y[t][j] for t in range(len(y))) for j in range(len(y[0]))]
            for i in range(len(x))]


def _tile(matrix, r0: int, c0: int, block: int):
    """A block x block tile starting at (r0, c0), 0 past the matrix's edges."""
    rows, cols = len(matrix), len(matrix[0])
    return [[matrix[r][c] if r < rows and c < cols else 0 for c in range(c0, c0 + block)]
            for r in range(r0, r0 + block)]


def _span(start: int, block: int, size: int) -> str:
    end = min(start + block, size) - 1
    return str(start) if start == end else f"{start}-{end}"


def _lines(word: str, start: int, block: int, size: int) -> str:
    span = _span(start, block, size)
    return f"{word}s {span}" if "-" in span else f"{word} {span}"


def _check(numbers) -> tuple[int, int, int, int]:
    numbers = list(numbers) if numbers else list(DEFAULT)
    if len(numbers) != 4 or not all(math.isfinite(v) and v == int(v) for v in numbers):
        raise ArgumentError("--input: matmul takes four whole numbers M,N,K,block, e.g. 3,2,3,2")
    values = [int(v) for v in numbers]
    if not all(1 <= v <= MAX_SIZE for v in values):
        raise ArgumentError(f"--input: M, N, K and block must each be 1 to {MAX_SIZE}, so that "
                            f"the tiles fit on the page; got {','.join(map(str, values))}")
    return tuple(values)


# ---------------------------------------------------------------------------------------------
# Blocks.


def padded(numbers) -> Table:
    """A and B as the tiles see them: padded with 0 to whole tiles, the padding marked."""
    m, n, k, block = _check(numbers)
    a, b = worked_matrices(m, n, k)
    rows = []
    for name, matrix, height, width in (("A", a, m, k), ("B", b, k, n)):
        full_rows, full_cols = _cdiv(height, block) * block, _cdiv(width, block) * block
        for r in range(full_rows):
            cells = [str(matrix[r][c]) if r < height and c < width else "(0)"
                     for c in range(full_cols)]
            rows.append((name if r == 0 else "", str(r), " ".join(cells)))
    caption = (f"(0) marks padding: A is {m} x {k} and B is {k} x {n}, read in tiles of "
               f"{block} x {block}. Padding with 0 adds 0 * x = 0 to every sum, so the tiles "
               "can all be the same size and the edges need no other care.")
    return Table(("Matrix", "Row", "Values, padded to whole tiles"), tuple(rows), caption)


def tile(numbers) -> Table:
    """One tile of C summed over K step by step: the numbers are M,N,K,block,tile (1-based)."""
    values = list(numbers) if numbers else [*DEFAULT, 1]
    if len(values) != 5:
        raise ArgumentError("the tile block takes M,N,K,block,tile")
    m, n, k, block = _check(values[:4])
    a, b = worked_matrices(m, n, k)
    tiles_n = _cdiv(n, block)
    index = int(values[4]) - 1
    if not 0 <= index < _cdiv(m, block) * tiles_n:
        raise ArgumentError(f"there is no tile {index + 1} of C")
    i0, j0 = (index // tiles_n) * block, (index % tiles_n) * block
    acc = [[0] * block for _ in range(block)]
    rows = []
    for k0 in range(0, k, block):
        a_tile, b_tile = _tile(a, i0, k0, block), _tile(b, k0, j0, block)
        step = _product(a_tile, b_tile)
        acc = [[x + y for x, y in zip(r, s)] for r, s in zip(acc, step)]
        rows.append((f"k {_span(k0, block, k)}", _matrix(a_tile), _matrix(b_tile), _matrix(step),
                     _matrix(acc)))
    kept_rows, kept_cols = min(block, m - i0), min(block, n - j0)
    stored = [row[:kept_cols] for row in acc[:kept_rows]]
    dropped = block * block - kept_rows * kept_cols
    caption = (f"Stored into C[{_span(i0, block, m)}][{_span(j0, block, n)}]: "
               f"{_matrix(stored)}" + (f"; the other {dropped} values of the tile lie past C's "
                                       "edge, and the store's mask drops them." if dropped
                                       else "; the whole tile lies inside C."))
    # (never 1 value: a b x b tile cut at C's edge keeps at most b * (b - 1), so it drops at
    # least b >= 2; a block of 1 drops nothing)
    return Table(("Step", "A tile", "B tile", "A tile @ B tile", "Accumulator"), tuple(rows),
                 caption)


def result(numbers) -> Text:
    """C assembled from the tiles, against the product computed directly."""
    m, n, k, block = _check(numbers)
    a, b = worked_matrices(m, n, k)
    c = _product(a, b)
    tiles = _cdiv(m, block) * _cdiv(n, block)
    steps = _cdiv(k, block)
    together = "The one tile gives" if tiles == 1 else f"The {tiles} tiles together give"
    each = "It" if tiles == 1 else "Each tile"
    return Text(f"{together} C = {_matrix(c)}, which is A @ B computed directly, element by "
                f"element. {each} took {_count(steps, 'step')} of K, "
                f"{_count(tiles * steps, 'tile product')} in all.")


def _traffic(size: int, tile_size: int, element_bytes: int) -> tuple[int, int]:
    """(bytes, FLOPs) of C = A @ B for size x size matrices when each program computes a
    tile_size x tile_size tile and nothing is reused between programs: every program reads its
    tile_size rows of A and tile_size columns of B in full, and writes its tile once."""
    programs = _cdiv(size, tile_size) ** 2
    read = programs * 2 * tile_size * size  # a (tile x K) panel of A and a (K x tile) of B
    written = size * size
    return (read + written) * element_bytes, 2 * size ** 3


def intensity(numbers) -> Table:
    """Bytes, FLOP per byte and the roofline's verdict per tile size: size,element_bytes."""
    size, element_bytes = (int(v) for v in (numbers or (4096, 2)))
    peak = EXAMPLE_TENSOR_FLOPS if element_bytes == 2 else EXAMPLE_PEAK_FLOPS
    ridge = peak / EXAMPLE_BANDWIDTH
    rows = []
    for tile_size in INTENSITY_TILES:
        nbytes, flops = _traffic(size, tile_size, element_bytes)
        ratio = flops / nbytes
        attainable = min(peak, ratio * EXAMPLE_BANDWIDTH)
        bound = "compute-bound" if ratio >= ridge else "memory-bound"
        label = "1 (one element of C)" if tile_size == 1 else f"{tile_size} x {tile_size}"
        rows.append((label, f"{nbytes / 1e9:,.2f}", f"{ratio:,.1f}", bound,
                     f"{attainable / 1e12:,.0f}"))
    least = (3 * size * size * element_bytes)
    rows.append(("each matrix read once", f"{least / 1e9:,.2f}",
                 f"{2 * size ** 3 / least:,.1f}", "compute-bound", f"{peak / 1e12:,.0f}"))
    kind = "16-bit tensor-core" if element_bytes == 2 else "float32"
    caption = (f"C = A @ B for {size} x {size} matrices of {element_bytes}-byte elements: "
               f"{2 * size ** 3 / 1e9:,.0f} GFLOP whatever the tiles. GB read and written when "
               f"no program reuses another's loads. Example GPU: {peak / 1e12:,.0f} TFLOP/s "
               f"({kind}) and {EXAMPLE_BANDWIDTH / 1e12:g} TB/s, so the ridge is at "
               f"{ridge:,.1f} FLOP per byte.")
    return Table(("Tile of C per program", "GB moved", "FLOP per byte", "Bound",
                  "Roof (TFLOP/s)"), tuple(rows), caption)


def _grouped(pid: int, tiles_m: int, tiles_n: int, group: int) -> tuple[int, int]:
    """The tile (pid_m, pid_n) that program ``pid`` computes in grouped order."""
    in_group = group * tiles_n
    first = (pid // in_group) * group
    height = min(tiles_m - first, group)
    return first + (pid % in_group) % height, (pid % in_group) // height


def _tile_of(pid: int, tiles_m: int, tiles_n: int, group: int) -> tuple[int, int]:
    if group <= 1:
        return pid // tiles_n, pid % tiles_n  # row-major
    return _grouped(pid, tiles_m, tiles_n, group)


def order(numbers) -> Table:
    """Which program computes each tile, row-major and grouped: tiles_m,tiles_n,group."""
    tiles_m, tiles_n, group = (int(v) for v in (numbers or (4, 4, 2)))
    maps = []
    for g in (1, group):
        cells = [[""] * tiles_n for _ in range(tiles_m)]
        for pid in range(tiles_m * tiles_n):
            r, c = _tile_of(pid, tiles_m, tiles_n, g)
            cells[r][c] = str(pid)
        maps.append(cells)
    rows = tuple((str(r), " ".join(f"{v:>2}" for v in maps[0][r]),
                  " ".join(f"{v:>2}" for v in maps[1][r])) for r in range(tiles_m))
    first = [_panels(tiles_n, tiles_m, tiles_n, g) for g in (1, group)]
    wave, they = ("Program 0 covers", "it reads") if tiles_n == 1 else \
        (f"The first {tiles_n} programs cover", "they read")
    return Table(("Tile row", "Row-major: program of each tile", f"Grouped by {group}: program "
                  "of each tile"), rows,
                 f"A grid of {tiles_m} x {tiles_n} {'tile' if tiles_m * tiles_n == 1 else 'tiles'}"
                 f" of C; programs with low numbers start "
                 f"first. {wave} {_count(first[0][0], 'tile row')} and "
                 f"{_count(first[0][1], 'tile column')} in row-major order, {first[1][0]} and "
                 f"{first[1][1]} grouped by {group}: {they} {_count(sum(first[0]), 'panel')} "
                 f"of A and B in the one order, {sum(first[1])} in the other.")


def _panels(wave: int, tiles_m: int, tiles_n: int, group: int) -> tuple[int, int]:
    """Distinct row panels of A and column panels of B that the first ``wave`` programs read."""
    tiles = [_tile_of(pid, tiles_m, tiles_n, group) for pid in range(min(wave, tiles_m * tiles_n))]
    return len({r for r, _ in tiles}), len({c for _, c in tiles})


def l2(numbers) -> Table:
    """What the programs running together read, row-major and grouped:
    size,tile,wave,group,element_bytes."""
    size, tile_size, wave, group, element_bytes = (int(v) for v in
                                                  (numbers or (4096, 128, 64, 8, 2)))
    tiles = _cdiv(size, tile_size)
    panel = tile_size * size * element_bytes  # one tile-row of A, or one tile-column of B
    rows = []
    for label, g in (("row-major", 1), (f"grouped by {group}", group)):
        panels_a, panels_b = _panels(wave, tiles, tiles, g)
        read = (panels_a + panels_b) * panel
        rows.append((label, str(panels_a), str(panels_b), f"{read / 2**20:,.0f}",
                     f"{read / wave / 2**20:,.2f}"))
    caption = (f"{size} x {size} matrices of {element_bytes}-byte elements in tiles of "
               f"{tile_size} ({tiles} x {tiles} tiles), "
               f"{'one program' if wave == 1 else f'the first {wave} programs'} running at "
               f"once. Each program reads a whole row panel of A and column panel of B "
               f"({panel / 2**20:,.0f} MiB each); panels that several programs share are read "
               "from memory once if the L2 cache keeps them.")
    return Table(("Order", "Row panels of A", "Column panels of B", "MiB to read (shared once)",
                  "MiB per program"), tuple(rows), caption)


def round_half(value: float) -> float:
    """``value`` rounded to float16 (round to nearest even); past 65504 it is infinite."""
    if math.isinf(value) or math.isnan(value):
        return value
    try:
        return struct.unpack("<e", struct.pack("<e", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def round_bfloat16(value: float) -> float:
    """``value`` rounded to bfloat16: the top 16 bits of its float32, to nearest even."""
    if math.isinf(value) or math.isnan(value):
        return value
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def _climbing_sum(k: int) -> tuple[list[float], list[float]]:
    """One row of A and one column of B whose running product sum climbs past 65504 by
    k / 2 and comes back down, as in the check's accumulator cases: A's second half repeats
    its first, B's second half undoes its first but for a few nudges of 1."""
    half = k // 2
    a_half = [float(12 + (t * 5) % 4) for t in range(half)]
    b_half = [float(12 + (t * 3) % 4) for t in range(half)]
    nudges = [(1.0 if t % 7 == 0 else -1.0 if t % 11 == 0 else 0.0) for t in range(half)]
    return a_half + a_half, b_half + [d - v for d, v in zip(nudges, b_half)]


def accumulator(numbers) -> Table:
    """The running sum of one element of C kept in float32, float16 and bfloat16, block by
    block: k,block_k."""
    k, block_k = (int(v) for v in (numbers or (1024, 128)))
    a, b = _climbing_sum(k)
    exact, half, brain = 0.0, 0.0, 0.0
    rows = []
    for k0 in range(0, k, block_k):
        step = math.fsum(x * y for x, y in zip(a[k0:k0 + block_k], b[k0:k0 + block_k]))
        exact += step  # whole numbers far below 2**24: float32 holds every one exactly
        half = round_half(half + round_half(step))
        brain = round_bfloat16(brain + round_bfloat16(step))
        rows.append((f"{k0 + block_k}", _whole(step), _whole(exact), _whole(half),
                     _whole(brain)))
    caption = (f"One element of C = sum over {_count(k, 'product')} of whole numbers, added "
               f"one block "
               f"of {block_k} at a time, as a kernel's K loop does. Its true value is "
               f"{_whole(exact)}; the float16 accumulator ends at {_whole(half)}, the bfloat16 "
               f"one at {_whole(brain)}.")
    return Table(("After k", "This block's sum", "float32 accumulator", "float16 accumulator",
                  "bfloat16 accumulator"), tuple(rows), caption)


def _whole(value: float) -> str:
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"


# ---------------------------------------------------------------------------------------------
# The committed measurements (python -m learning.bench matmul on a GPU).


def load_results(path: Path = RESULTS) -> dict | None:
    """The committed GPU run, or None while there is none."""
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _provenance(data: dict, command: bool = True) -> str:
    """Where and when the run was made, and by what command (or where to find it: a terminal's
    page has no room for a command as long as a list of products)."""
    env = data["env"]
    said = f"command `{data['command']}`" if command else \
        "its command is in lab/results/matmul.json"
    ptxas = f", ptxas: {env['ptxas']}" if env.get("ptxas") else ""
    return (f"{env['device']} ({env['sms']} SMs), torch {env['torch']}, triton "
            f"{env['triton']}, CUDA {env['cuda']}{ptxas}, {env['date']}; {said}.")


NOT_MEASURED = ("Not yet measured on a GPU: lab/results/matmul.json is not committed. On a "
                "CUDA GPU, python -m learning.bench matmul --json lab/results/matmul.json "
                "writes it; python -m learning.computed then fills this section.")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def summarise(results: list[dict]) -> dict:
    """Per (dtype, M, N, K), in the order measured: each implementation's TFLOP/s over the
    rounds, the reference / torch ratio of each round (both timed in that round, one after the
    other), and the configurations the autotuner chose. A run without rounds is one round."""
    shapes: dict = {}
    for r in results:
        shape = shapes.setdefault((r["dtype"], r["M"], r["N"], r["K"]),
                                  {"tflops": {}, "rounds": {}, "configs": [], "notes": {}})
        if "tflops" in r:
            shape["tflops"].setdefault(r["impl"], []).append(r["tflops"])
            shape["rounds"].setdefault(r.get("round", 0), {})[r["impl"]] = r["tflops"]
        else:
            shape["notes"].setdefault(r["impl"], r.get("note", "-"))
        if r["impl"] == "reference" and r.get("config"):
            shape["configs"].append(r["config"])
    for shape in shapes.values():
        shape["ratios"] = sorted(pair["reference"] / pair["torch"]
                                 for pair in shape["rounds"].values()
                                 if "reference" in pair and "torch" in pair)
    return shapes


def _median_cell(shape: dict, impl: str) -> str:
    values = shape["tflops"].get(impl)
    return f"{_median(values):,.0f}" if values else shape["notes"].get(impl, "-")


def _spread(values: list[float], digits: int = 2) -> str:
    return "-" if not values else f"{min(values):.{digits}f}" if len(values) == 1 else \
        f"{min(values):.{digits}f} to {max(values):.{digits}f}"


def _rounds_taken(data: dict) -> str:
    """How many rounds each product was timed in, said as the caption's first words: "Medians
    over 5 rounds", or fewer where the run's time budget ran out before every product had
    the rounds asked for."""
    asked = data.get("rounds", 1)
    taken: dict = {}
    for r in data.get("results", ()):
        if r.get("impl") == "reference" and "device_us" in r:
            key = (r.get("dtype"), r.get("M"), r.get("N"), r.get("K"))
            taken.setdefault(key, set()).add(r.get("round", 0))
    counts = [len(rounds) for rounds in taken.values()]
    if not counts or min(counts) == asked:
        return f"Medians over {asked} rounds"
    if max(counts) == 1:
        return (f"One round of the {asked} asked for (the run's time budget ran out; each "
                "range is that round's figure)")
    return (f"Medians over {min(counts)} to {max(counts)} rounds of the {asked} asked for (as "
            "many as the run's time budget allowed)")


def _rounds_said(data: dict) -> str:
    rounds = data.get("rounds", 1)
    if "timing" in data:  # the bench of issue 36: the GPU's own time, the tiles chosen once
        timed = ("TFLOP/s from the GPU's own time per call (a CUDA graph of back-to-back calls "
                 "over inputs too large together for the L2 cache); the reference chose its "
                 "tiles once, on its first call. ")
        if rounds == 1:
            return "One round. " + timed
        return (f"{_rounds_taken(data)}, each timing the reference and then torch.matmul, "
                "the ratio's range over the rounds. " + timed)
    if rounds == 1:
        return "One round: each figure is do_bench's median of one timing run. "
    return (f"Medians over {rounds} rounds; each round lets the autotuner choose afresh and "
            "times the reference and then torch.matmul, and the ratio's range is over the "
            "rounds. ")


def measured(_numbers=None, data: dict | None = None, command: bool = True):
    """TFLOP/s of the reference and of torch.matmul per size and dtype: medians over the run's
    rounds, the ratio's median and range, and the autotuner's choice."""
    data = data if data is not None else load_results()
    if data is None:
        return Text(NOT_MEASURED)
    rows = []
    for (dtype, m, n, k), shape in summarise(data["results"]).items():
        ratios = shape["ratios"]
        rows.append((dtype, f"{m} x {n} x {k}", _median_cell(shape, "reference"),
                     _median_cell(shape, "torch"),
                     f"{_median(ratios):.2f}" if ratios else "-", _spread(ratios),
                     bench.most_chosen(shape["configs"])))
    return Table(("dtype", "M x N x K", "reference TFLOP/s", "torch.matmul TFLOP/s",
                  "speed: reference / torch", "lowest to highest",
                  "configuration the autotuner chose"),
                 tuple(rows), _rounds_said(data) + _provenance(data, command))


def configs(_numbers=None, data: dict | None = None):
    """Every configuration of the autotuning table timed on its own at one size: the median
    over the run's rounds, and the range."""
    data = data if data is not None else load_results()
    if data is None:
        return Text(NOT_MEASURED)
    timed: dict = {}
    for r in data.get("configs", ()):
        entry = timed.setdefault((r["dtype"], r["M"], r["N"], r["K"], r["config"]), [])
        entry.append(r.get("tflops", r.get("note", "-")))
    rows = []
    for (dtype, m, n, k, config), values in timed.items():
        numbers = [v for v in values if isinstance(v, float | int)]
        rows.append((dtype, f"{m} x {n} x {k}", config,
                     f"{_median(numbers):,.0f}" if numbers else str(values[0]),
                     _spread(numbers, 0)))
    return Table(("dtype", "M x N x K", "configuration", "TFLOP/s", "lowest to highest"),
                 tuple(rows), _rounds_said(data) + _provenance(data))


def target(_numbers=None, data: dict | None = None):
    """The goal: the reference at 0.9x torch.matmul or better at 4096^3, 16-bit, judged by the
    median ratio over the rounds; the range says whether every round met it."""
    data = data if data is not None else load_results()
    if data is None:
        return Text(NOT_MEASURED)
    shapes = summarise(data["results"])
    lines = []
    for dtype in ("fp16", "bf16"):
        ratios = shapes.get((dtype, *TARGET_SIZE), {}).get("ratios")
        if ratios:
            median = _median(ratios)
            status = "not met" if median < TARGET else "met" if ratios[0] >= TARGET else \
                "met at the median, not in every round"
            lines.append((dtype, f">= {TARGET:.2f}", f"{median:.2f}", _spread(ratios), status))
        else:
            lines.append((dtype, f">= {TARGET:.2f}", "-", "-", "not measured"))
    return Table(("dtype (4096 x 4096 x 4096)", "reference / torch.matmul, goal",
                  "median", "lowest to highest", "status"), tuple(lines),
                 _rounds_said(data) + _provenance(data))


def launch(_numbers=None, path: Path = LAUNCH_PROBE):
    """lab/probes/matmul_launch_probe.py: per call, the time do_bench measures, the host's time and
    the GPU's own time (a CUDA graph), for the reference and for torch.matmul."""
    if not path.exists():
        return Text(f"Not measured: lab/results/{path.name} is not committed; on a CUDA GPU, "
                    f"python lab/probes/matmul_launch_probe.py --json lab/results/{path.name} "
                    "writes it.")
    data = json.loads(path.read_text(encoding="utf-8"))
    env = data["env"]
    rows = tuple((r["phase"], f"{r['M']} x {r['N']} x {r['K']}",
                  *(f"{r[f'{impl}_{key}_us']:.0f}" for impl in ("tuned", "torch")
                    for key in ("do_bench", "host", "graph")))
                 for r in data["rows"])
    return Table(("autotuner", "M x N x K", "reference: do_bench us", "reference: host us",
                  "reference: GPU us", "torch: do_bench us", "torch: host us", "torch: GPU us"),
                 rows,
                 f"{data['rows'][0]['dtype']}, one process. do_bench: the median time of a call "
                 "as the bench measures it; host: the host's time per call over 200 calls "
                 "left unsynchronised; GPU: a CUDA graph of 20 calls replayed, per call (no host "
                 "work). Each phase after the first made the autotuner choose again "
                 f"(reference_matmul.forget_choices). {env['device']}, torch {env['torch']}, "
                 f"triton {env['triton']}, {env['date']}; command `{data['command']}`.")


def _not_committed(path: Path, command: str) -> Text:
    return Text(f"Not measured: lab/results/{path.name} is not committed; on a CUDA GPU, "
                f"{command} --json lab/results/{path.name} writes it.")


def _env_said(data: dict) -> str:
    env = data["env"]
    ptxas = f", ptxas: {env['ptxas']}" if env.get("ptxas") else ""
    return (f"{env['device']}, torch {env['torch']}, triton {env['triton']}{ptxas}, "
            f"{env['date']}; command `{data['command']}`.")


def shapes(_numbers=None, path: Path = RESULTS):
    """The products models use, each judged by its goals: the GPU's time per call (a CUDA
    graph), the host's time per call, for the reference and torch.matmul, medians over the
    rounds with each ratio's range, the share of the copy ceiling for a few rows, the tiles
    the reference chose and whether the goals are met."""
    data = load_results(path)
    if data is None or "timing" not in data:
        return _not_committed(path, "python -m learning.bench matmul --rounds 5")
    rows = []
    for (dtype, m, n, k), shape in bench.summarise(data["results"]).items():
        device, call = shape["device"], shape["call"]

        def us(values):
            return f"{_median(values):,.1f}" if values else "-"

        def ratio(values):
            return f"{_median(values):.2f} ({_spread(values)})" if values else "-"

        rows.append((dtype, f"{m} x {n} x {k}", us(device.get("reference")),
                     us(device.get("torch")), ratio(shape["device_ratios"]),
                     us(call.get("reference")), us(call.get("torch")),
                     ratio(shape["call_ratios"]),
                     f"{_median(shape['copy']):.2f}" if shape["copy"] else "-",
                     bench.most_chosen(shape["configs"]), bench.goal(m, shape)))
    return Table(("dtype", "M x N x K", "GPU us", "torch GPU us", "GPU time: torch / reference",
                  "call us", "torch call us", "call time: reference / torch", "copy share", "tiles",
                  "goals"), tuple(rows),
                 f"{_rounds_taken(data)}, each timing the reference and "
                 "then torch.matmul; ranges over the rounds. GPU: "
                 f"{data['timing']['device']}. Call: {data['timing']['call']}. Goals: GPU "
                 f"time at least {bench.DEVICE_GOAL:.2f} of torch.matmul's speed "
                 f"({bench.SKINNY_DEVICE_GOAL:.2f} for {bench.SKINNY_M} rows or fewer, and "
                 f"{bench.COPY_GOAL:.2f} of the copy ceiling), the call at most "
                 f"{bench.CALL_GOAL:.1f} times torch.matmul's. " + _provenance(data))


def shapes_triton39(_numbers=None):
    """``shapes`` for the run with Triton 3.9."""
    return shapes(path=RESULTS_TRITON39)


def shapes_h100_early(_numbers=None):
    """``shapes`` for the H100 runs of the product launched early, Triton 3.6."""
    return shapes(path=RESULTS_H100_EARLY)


def shapes_h100_early_triton39(_numbers=None):
    """``shapes`` for the H100 run of the product launched early, Triton 3.9."""
    return shapes(path=RESULTS_H100_EARLY_TRITON39)


def host(_numbers=None, path: Path = HOST_PROBE):
    """lab/probes/matmul_host_probe.py: where the host's time per call goes, piece by piece."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_host_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    pieces: dict = {}
    for r in data["rows"]:
        pieces.setdefault((f"{r['M']} x {r['N']} x {r['K']}", r["piece"]), []).append(
            r["host_us"])
    rows = tuple((size, piece, f"{_median(values):.1f}", _spread(values, 1))
                 for (size, piece), values in pieces.items())
    chosen = "; ".join(f"{size.replace('x', ' x ')}: {label}"
                       for size, label in data["configs"].items())
    return Table(("M x N x K", "piece", "host us per call", "lowest to highest"), rows,
                 f"{data['dtype']}; each piece called back to back without waiting for the "
                 "GPU, medians of 3 rounds. Tiles chosen: " + chosen + ". " + _env_said(data))


def edges(_numbers=None, path: Path = EDGES_PROBE):
    """lab/probes/matmul_edges_probe.py: each off-tile remedy against the same tiles without
    it, in the GPU's own time."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_edges_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    grouped: dict = {}
    for r in data["rows"]:
        grouped.setdefault((f"{r['M']} x {r['N']} x {r['K']}", r["variant"], r["config"]),
                           []).append(r)
    rows = tuple((size, variant, f"{_median([r['device_us'] for r in runs]):,.1f}",
                  f"{_median([r['tflops'] for r in runs]):,.0f}", config)
                 for (size, variant, config), runs in grouped.items())
    return Table(("M x N x K", "variant", "GPU us", "TFLOP/s", "tiles"), rows,
                 f"{data['dtype']}; medians of {len(next(iter(grouped.values())))} rounds; "
                 f"GPU time as the bench measures it. " + _env_said(data))


def edges_triton39(_numbers=None):
    """``edges`` for the run with Triton 3.9."""
    return edges(path=EDGES_PROBE_TRITON39)


def rows_tried(_numbers=None, path: Path = ROWS_PROBE, best: int = 5):
    """lab/probes/matmul_rows_probe.py: per product, the rows fastest on the GPU of every row
    tried, with their host time per call and whether the reference's table holds them."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_rows_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    grouped: dict = {}
    for r in data["rows"]:
        if "device_us" in r:
            grouped.setdefault(f"{r['M']} x {r['N']} x {r['K']}", {}).setdefault(
                r["row"], []).append(r)
    rows, rounds = [], max(r["round"] for r in data["rows"] if "round" in r) + 1
    for size, by_row in grouped.items():
        torch_us = _median([r["device_us"] for r in by_row.pop("torch.matmul")])
        ranked = sorted(by_row.items(),
                        key=lambda item: _median([r["device_us"] for r in item[1]]))
        for name, runs in ranked[:best]:
            device = _median([r["device_us"] for r in runs])
            rows.append((size, name, f"{device:.1f}", f"{torch_us / device:.2f}",
                         f"{_median([r['host_us'] for r in runs]):.1f}"))
        rows.append((size, "torch.matmul", f"{torch_us:.1f}", "1.00", "-"))
    return Table(("M x N x K", "row ((table): one of the reference's)", "GPU us",
                  "torch / row", "host us per call"), tuple(rows),
                 f"{data['dtype']}; the {best} fastest on the GPU of every row tried per "
                 f"product, medians of {rounds} rounds. " + _env_said(data))


# ---------------------------------------------------------------------------------------------
# matmul_plan (lesson 12's third part): what a launcher works out for one product before it
# launches, the facts reference_matmul's _Plan derives. The check's reference and the lesson's
# table of plans both come from here.

#: An operand whose rows do not start on 16-byte boundaries is copied into aligned rows only
#: where the product does at least this many multiply-adds (reference_matmul.PAD_MIN_MACS):
#: below it, the unaligned kernel runs for about as long as launching the copy costs.
COPY_MIN_MACS = 2**28


def _rows_aligned(strides, element_bytes: int) -> bool:
    return strides[1] == 1 and strides[0] * element_bytes % 16 == 0


def planned(m, n, k, a_strides, b_strides, element_bytes, block, *, count=_cdiv,
            aligned=_rows_aligned, masked=None, copies=None, padding=None) -> dict:
    """The plan, each fact computed by the given rule (the lesson's by default): the check's
    known mistakes (learning/exercises/matmul/exercise.py) replace one rule each."""
    block_m, block_n, block_k = block
    tiles = count(m, block_m) * count(n, block_n)
    k_steps = count(k, block_k)
    a_aligned = aligned(a_strides, element_bytes)
    b_aligned = aligned(b_strides, element_bytes)
    large = m * n * k >= COPY_MIN_MACS
    copy_a, copy_b = copies(a_aligned, b_aligned, m * n * k) if copies else \
        (not a_aligned and large, not b_aligned and large)
    done = tiles * block_m * block_n * k_steps * block_k
    return {
        "tiles": tiles,
        "k_steps": k_steps,
        "masked": masked(k, block_k) if masked else k % block_k != 0,
        "a_aligned": a_aligned,
        "b_aligned": b_aligned,
        "copy_a": copy_a,
        "copy_b": copy_b,
        "padding": padding(m, n, k, tiles, block, k_steps) if padding else done - m * n * k,
    }


def plan_reference(m, n, k, a_strides, b_strides, element_bytes, block) -> dict:
    """The plan of C = A @ B, A (m, k) and B (k, n) of these strides (in elements) and
    ``element_bytes``-byte elements, both starting on 16-byte boundaries, in tiles of ``block``
    = (BLOCK_M, BLOCK_N, BLOCK_K)."""
    return planned(m, n, k, a_strides, b_strides, element_bytes, block)


#: The products of "How fast it is" (and a K the step does not divide), each with a row of the
#: reference's table that suits it: (M, N, K) and (BLOCK_M, BLOCK_N, BLOCK_K).
PLAN_EXAMPLES = (
    ((4096, 4096, 4096), (128, 256, 64)),
    ((4096, 4096, 512), (128, 256, 64)),
    ((4096, 4096, 4064), (128, 256, 64)),
    ((4097, 4097, 4097), (128, 256, 64)),
    ((1024, 1024, 1024), (64, 128, 128)),
    ((1000, 1000, 1000), (64, 128, 64)),
    ((8, 4096, 4096), (16, 32, 512)),
)


def plans(_numbers=None) -> Table:
    """matmul_plan's answer for each of PLAN_EXAMPLES, from the check's own reference."""
    rows = []
    for (m, n, k), block in PLAN_EXAMPLES:
        plan = plan_reference(m, n, k, (k, 1), (n, 1), 2, block)
        done = plan["padding"] + m * n * k
        copies = [name for name in ("A", "B") if plan[f"copy_{name.lower()}"]]
        rows.append((f"{m}x{n}x{k}", "x".join(str(v) for v in block),
                     f"{plan['tiles']:,}", str(plan["k_steps"]),
                     "cut" if plan["masked"] else "whole",
                     " ".join("yes" if plan[f"{x}_aligned"] else "no" for x in "ab"),
                     "+".join(copies) or "none", f"{plan['padding'] / done:.1%}"))
    return Table(("M x N x K", "tile", "tiles", "K steps", "last step", "rows aligned (A B)",
                  "copies", "padding"), tuple(rows),
                 "Two-byte elements, A and B contiguous, tiles (BLOCK_M x BLOCK_N x BLOCK_K) "
                 "from the reference's table; padding as a share of the multiply-adds done. "
                 "Computed by the check's reference for matmul_plan.")


def stream_floor(_numbers=None, path: Path = STREAM_FLOOR):
    """lab/probes/matmul_stream_floor_probe.py: what reading the decoding step's B, and
    nothing else, reaches of the copy ceiling, beside the reference's and torch's products."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_stream_floor_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    grouped: dict = {}
    for r in data["rows"]:
        grouped.setdefault(r["run"], []).append(r)
    rows = tuple((run, f"{_median([r['device_us'] for r in runs]):.2f}",
                  f"{_median([r['gbps'] for r in runs]):,.0f}",
                  f"{_median([r['share_of_ceiling'] for r in runs]):.2f}",
                  _spread([r["share_of_ceiling"] for r in runs]))
                 for run, runs in grouped.items())
    m, n, k = data["product"]
    return Table(("what runs", "GPU us", "GB/s moved", "share of the copy ceiling",
                  "lowest to highest"), rows,
                 f"{data['dtype']}, B of {m} x {n} x {k} ({k * n * 2 // 2**20} MiB); "
                 f"medians of {len(next(iter(grouped.values())))} rounds, GPU time as the "
                 f"bench measures it; the copy ceiling is a 1 GiB copy, "
                 f"{data['copy_ceiling_gbps']:,.0f} GB/s. The reference chose "
                 f"{data['reference_row']}. " + _env_said(data))


def strides(_numbers=None, path: Path = STRIDE_PROBE):
    """lab/probes/matmul_stride_probe.py: 1000 cubed with its rows 1000, 1008 and 1024
    elements apart, beside 1024 cubed: the rows' starts and the edges, measured apart."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_stride_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    grouped: dict = {}
    for r in data["rows"]:
        grouped.setdefault((r["dtype"], r["size"], r["stride"], r["variant"]), []).append(
            r["device_us"])
    rows = tuple((dtype, f"{size} cubed", f"{stride} ({stride * 2:,} bytes)", variant,
                  f"{_median(values):.2f}", _spread(values))
                 for (dtype, size, stride, variant), values in grouped.items())
    return Table(("dtype", "product", "rows apart, elements", "what runs", "GPU us",
                  "lowest to highest"), rows,
                 f"A and B views of wider buffers; medians of "
                 f"{len(next(iter(grouped.values())))} rounds, GPU time as the bench measures "
                 "it. " + _env_said(data))


def early(_numbers=None, path: Path = EARLY_PROBE):
    """lab/probes/matmul_early_probe.py: each product launched early (programmatic dependent
    launch) and not, back to back and after a small torch kernel that does not launch the next
    early, beside torch.matmul timed the same two ways."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_early_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    grouped: dict = {}
    for r in data["rows"]:
        grouped.setdefault((tuple(r["shape"]), r["dtype"]), {}).setdefault(r["run"], []).append(r)
    rows, rounds = [], 0
    for (shape, dtype), by_run in grouped.items():
        torch_runs = by_run["torch.matmul"]
        mid = {key: _median([r[key] for r in torch_runs]) for key in ("alone_us", "after_torch_us")}
        for run in ("reference, early", "reference, not early"):
            runs = by_run.get(run, [])
            if not runs:
                continue
            rounds = len(runs)
            alone = [r["alone_us"] for r in runs]
            after = [r["after_torch_us"] for r in runs]
            rows.append((" x ".join(str(x) for x in shape), dtype, run.removeprefix("reference, "),
                         f"{_median(alone):.2f} ({min(alone):.2f} to {max(alone):.2f})",
                         f"{mid['alone_us'] / _median(alone):.2f}",
                         f"{_median(after):.2f} ({min(after):.2f} to {max(after):.2f})",
                         f"{mid['after_torch_us'] / _median(after):.2f}"))
    return Table(("M x N x K", "dtype", "launched", "back to back, GPU us", "torch over it",
                  "after a torch kernel, GPU us", "torch over it"), tuple(rows),
                 f"Medians of {rounds} rounds (lowest to highest), GPU time as the bench "
                 "measures it (a CUDA graph of calls over copies too large for L2). Back to "
                 "back: the calls alone, as the bench times them. After a torch kernel: each "
                 "call after a small torch kernel "
                 "(one float added to), that kernel's own time taken off; torch.matmul timed "
                 "the same way in each column. The row the reference chose for each product "
                 "is timed both ways. " + _env_said(data))


def early_triton39(_numbers=None):
    """``early`` for the run with Triton 3.9."""
    return early(path=EARLY_PROBE_TRITON39)


def strides_triton39(_numbers=None):
    """``strides`` for the run with Triton 3.9."""
    return strides(path=STRIDE_PROBE_TRITON39)


def _one_launch_rows(part: str, path: Path) -> tuple:
    """The probe's timed rows of one part, per dtype: (dtype, run, device us, range, torch over
    it, host us, host over torch's), the fastest on the GPU first."""
    data = json.loads(path.read_text(encoding="utf-8"))
    grouped: dict = {}
    for r in data["rows"]:
        if r.get("part") == part and "device_us" in r:
            grouped.setdefault(r["dtype"], {}).setdefault(r["run"], []).append(r)
    rows, rounds = [], 0
    for dtype, by_run in grouped.items():
        torch_runs = by_run.get("torch.matmul", [])
        torch_device = _median([r["device_us"] for r in torch_runs])
        torch_host = _median([r["host_us"] for r in torch_runs])
        for run, runs in sorted(by_run.items(),
                                key=lambda kv: _median([r["device_us"] for r in kv[1]])):
            device = [r["device_us"] for r in runs]
            host = _median([r["host_us"] for r in runs])
            rounds = max(rounds, len(runs))
            rows.append((dtype, run, f"{_median(device):,.1f}", _spread(device, 1),
                         f"{torch_device / _median(device):.2f}", f"{host:.1f}",
                         f"{host / torch_host:.2f}"))
    return data, tuple(rows), rounds


def one_launch(_numbers=None, path: Path = ONE_LAUNCH):
    """lab/probes/matmul_one_launch_probe.py: 4097 cubed with the copies in a launch of their
    own and in the product's own launch, the GPU's time and the host's per call."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_one_launch_probe.py")
    data, rows, rounds = _one_launch_rows(f"{BIG_ODD} cubed", path)
    chosen = "; ".join(f"{r['dtype']}: {r['chosen']}" for r in data["rows"]
                       if r.get("part") == "choice")
    return Table(("dtype", "what runs", "GPU us", "lowest to highest", "GPU: torch / it",
                  "call us", "call: it / torch"), rows,
                 f"{BIG_ODD} cubed; medians of {rounds} rounds, GPU time and call time as the "
                 "bench measures them; the copy tile is the rows x columns each step of a "
                 "program's copy moves. The reference chose " + (chosen or "nothing recorded")
                 + ". " + _env_said(data))


def one_launch_triton39(_numbers=None):
    """``one_launch`` for the run with Triton 3.9."""
    return one_launch(path=ONE_LAUNCH_TRITON39)


def mixed_operands(_numbers=None, path: Path = ONE_LAUNCH_H100):
    """lab/probes/matmul_one_launch_probe.py: 1000 cubed with each operand moved by tensor
    descriptor or by pointers."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_one_launch_probe.py")
    data, rows, rounds = _one_launch_rows("1000 cubed", path)
    return Table(("dtype", "what runs", "GPU us", "lowest to highest", "GPU: torch / it",
                  "call us", "call: it / torch"), rows,
                 f"1000 cubed, contiguous operands; medians of {rounds} rounds, as the bench "
                 "measures them (the probe's kernel makes its descriptors on every call, so "
                 "its call times are not the reference's). " + _env_said(data))


def cublas_kernels(_numbers=None, path: Path = ONE_LAUNCH):
    """lab/probes/matmul_one_launch_probe.py: the kernels torch.matmul ran, from torch's
    profiler, for each product."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_one_launch_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = tuple((r["dtype"], " x ".join(str(v) for v in r["product"]), r["kernel"],
                  f"{r['device_us']:,.1f}")
                 for r in data["rows"] if r.get("part") == "cublas")
    return Table(("dtype", "M x N x K", "kernel", "GPU us per call"), rows,
                 "torch.profiler over 5 calls each, the inputs in the L2 cache. " +
                 _env_said(data))


# ---------------------------------------------------------------------------------------------
# What was tried on a GPU for the two products the reference leaves short of its goals (1000
# cubed, and one decoding step), and lost: each table keeps, of every kind of row a probe
# timed, the fastest, beside torch.matmul timed in the same run, and says why a row that
# failed has no time.

RESULTS_FOLDER = COURSE_ROOT / "lab" / "results"
# Each kind of row a probe times, as (words in the row's name, the kind): the first that a
# row's name contains names its kind
CLUSTER_KINDS = (("clusters of 4", "clusters of 4 CTAs"), ("clusters of 2", "clusters of 2 CTAs"),
                 ("reference (chosen)", "the reference's choice"), ("", "one CTA per program"))
# (file, the command that writes it, its kinds)
SMALL_PROBES = (
    ("matmul_cluster.json", "python lab/probes/matmul_cluster_probe.py", CLUSTER_KINDS),
    ("matmul_cluster_h100.json", "python lab/probes/matmul_cluster_probe.py", CLUSTER_KINDS),
    ("matmul_specialize_h100.json", "python lab/probes/matmul_specialize_probe.py",
     (("warp-specialized", "loads in a warp of their own"),
      ("C by descriptor", "C stored by tensor descriptor"), ("", "C stored by pointers"))),
    ("matmul_copy_inside_h100.json", "python lab/probes/matmul_copy_inside_probe.py",
     (("rows 1024 apart", "rows 1024 apart, no copy (the bound)"),
      ("A and B copied", "A and B copied in the same launch"),
      ("B copied", "B copied in the same launch"), ("A copied", "A copied in the same launch"),
      ("", "rows 2000 bytes apart"))),
)
DECODE = RESULTS_FOLDER / "matmul_decode.json"
SMALL_SIZE = 1000


def _kind(run: str, kinds: tuple) -> str:
    for words, kind in kinds:
        if words in run:
            return kind
    return run


def _failure(note: str) -> str:
    """A probe's note on a row with no time, in the table's words."""
    if note.startswith("AssertionError: error"):
        return f"wrong answer (relative error {note.split()[-1]})"
    return note


def _short(device: str) -> str:
    return " ".join(word for word in device.split() if not word.endswith("GB") and
                    word not in ("NVIDIA", "HBM3"))


def small_tried(_numbers=None, results: Path = RESULTS_FOLDER):
    """1000 cubed: clusters, warp specialization, C stored by descriptor, copies into aligned
    rows in the product's own launch; the fastest row of each kind per GPU and dtype."""
    rows, said = [], []
    for name, command, kinds in SMALL_PROBES:
        path = results / name
        if not path.exists():
            return _not_committed(path, command)
        data = json.loads(path.read_text(encoding="utf-8"))
        gpu = _short(data["env"]["device"])
        said.append(f"{name}: " + _env_said(data))
        for dtype in ("fp16", "bf16"):
            mine = [r for r in data["rows"] if r.get("dtype") == dtype and
                    r.get("size", SMALL_SIZE) == SMALL_SIZE]
            torch_times = [r["device_us"] for r in mine
                           if r["run"] == "torch.matmul" and "device_us" in r]
            if not torch_times:
                continue
            torch_us = _median(torch_times)
            fastest: dict = {}
            for r in mine:
                if r["run"] == "torch.matmul":
                    continue
                kind = _kind(r["run"], kinds)
                times = [x["device_us"] for x in mine if x["run"] == r["run"] and
                         "device_us" in x]
                if not times:  # it failed: said on a row of its own
                    fastest[f"{kind}: {_failure(r.get('note', 'no time'))}"] = (
                        float("inf"), r["run"], "-", "-")
                    continue
                us = _median(times)
                if us < fastest.get(kind, (float("inf"),))[0]:
                    fastest[kind] = (us, r["run"], _spread(times), f"{torch_us / us:.2f}")
            rows.append((gpu, dtype, "torch.matmul", "", f"{torch_us:.2f}",
                         _spread(torch_times), "1.00"))
            for kind, (us, run, spread, ratio) in sorted(fastest.items(),
                                                         key=lambda kv: kv[1][0]):
                time = "-" if us == float("inf") else f"{us:.2f}"
                rows.append((gpu, dtype, kind, run, time, spread, ratio))
    return Table(("GPU", "dtype", "what runs", "fastest row of its kind", "GPU us",
                  "lowest to highest", "GPU time: torch / it"), tuple(rows),
                 f"{SMALL_SIZE} cubed; medians over each probe's rounds, GPU time as the bench "
                 "measures it, torch.matmul timed in the same run; a row with no time says "
                 "why it has none. " + " ".join(said))


def _label(chosen: str) -> str:
    """A row as the tables name it, from a probe's record of the reference's choice: its
    label, or the dataclass's repr that the first runs recorded."""
    if not chosen.startswith("TileConfig("):
        return chosen
    fields = dict(part.split("=") for part in chosen[len("TileConfig("):-1].split(", "))
    words = [f"{fields['block_m']}x{fields['block_n']}x{fields['block_k']} group "
             f"{fields['group_m']}", f"{fields['num_warps']} warps",
             f"{fields['num_stages']} stages"]
    if fields.get("split_k", "1") != "1":
        words.append(f"K split in {fields['split_k']}")
    words += [said for flag, said in (("tma", "tensor descriptors"), ("persistent", "persistent"),
                                      ("copy_inside", "copies in the same launch"))
              if fields.get(flag) == "True"]
    return ", ".join(words)


def _width(run: str) -> str:
    if run in ("torch.matmul", "reference (chosen)"):
        return run
    columns = run.split("x")[1]
    split = " K split" if "K split" in run else ""
    return f"strips of {columns} columns{split}"


def decode_tried(_numbers=None, path: Path = DECODE):
    """One decoding step: the fastest row for each strip width of B, with and without K
    split, beside torch.matmul, each with its share of the copy ceiling."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_decode_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for dtype in ("fp16", "bf16"):
        mine = [r for r in data["rows"] if r.get("dtype") == dtype and "device_us" in r]
        by_run: dict = {}
        for r in mine:
            by_run.setdefault(r["run"], []).append(r)
        if "torch.matmul" not in by_run:
            continue
        torch_us = _median([r["device_us"] for r in by_run["torch.matmul"]])
        fastest: dict = {}
        for run, runs in by_run.items():
            us = _median([r["device_us"] for r in runs])
            kind = _width(run)
            if us < fastest.get(kind, (float("inf"),))[0]:
                fastest[kind] = (us, run, runs)
        chosen = next((r["chosen"] for r in data["rows"] if r.get("dtype") == dtype and
                       "chosen" in r), "")
        for kind, (us, run, runs) in sorted(fastest.items(), key=lambda kv: kv[1][0]):
            share = _median([r["share_of_ceiling"] for r in runs])
            named = {"torch.matmul": "", "reference (chosen)": _label(chosen)}.get(run, run)
            rows.append((dtype, kind, named, f"{us:.2f}",
                         _spread([r["device_us"] for r in runs]), f"{torch_us / us:.2f}",
                         f"{share:.2f}"))
    m, n, k = data["product"]
    return Table(("dtype", "what runs", "fastest row of its kind", "GPU us", "lowest to highest",
                  "GPU time: torch / it", "share of the copy ceiling"), tuple(rows),
                 f"{m} x {n} x {k}; medians over the probe's rounds, GPU time as the bench "
                 f"measures it; the copy ceiling is a 1 GiB copy, "
                 f"{data['copy_ceiling_gbps']:,.0f} GB/s. " + _env_said(data))


# ---------------------------------------------------------------------------------------------
# The page.


def page(row=None) -> Page:
    """The whole worked example; ``row`` is M,N,K,block (each 1 to 8) for your own sizes."""
    m, n, k, block = _check(row)
    tiles_m, tiles_n, steps = _cdiv(m, block), _cdiv(n, block), _cdiv(k, block)
    numbers = (m, n, k, block)
    grid, each = ("one tile", "it is") if tiles_m * tiles_n == 1 else \
        (f"{tiles_m} x {tiles_n} tiles", "each tile is")
    result_page = Page(f"C = A @ B for A {m} x {k} and B {k} x {n}, in tiles of {block}")
    result_page.add(
        Text(f"C[i][j] = sum over k of A[i][k] * B[k][j]. C is {m} x {n}: {grid} of {block} x "
             f"{block}, and {each} a sum over K in "
             f"{_count(steps, 'step')} of {block}. One program per tile: it keeps an "
             f"accumulator of {block} x {block} zeros, adds A tile @ B tile at every step, "
             "and stores the accumulator once."),
        padded(numbers))
    for index in range(tiles_m * tiles_n):
        i0, j0 = (index // tiles_n) * block, (index % tiles_n) * block
        result_page.add(Heading(f"Tile {index + 1} of {tiles_m * tiles_n}: "
                                f"{_lines('row', i0, block, m)}, "
                                f"{_lines('column', j0, block, n)} of C"),
                        tile((*numbers, index + 1)))
    result_page.add(
        result(numbers),
        Heading("Why tiles: the bytes each program reads"),
        Text("A program that computes one element of C reads a whole row of A and a whole "
             "column of B for 2K FLOPs: about one FLOP per two bytes in 16-bit. A program "
             "that computes a T x T tile reads T rows and T columns for 2 T^2 K FLOPs, so "
             "every byte it loads serves T times more arithmetic."),
        intensity((4096, 2)),
        intensity((4096, 4)),
        Heading("Program order and the L2 cache"),
        Text("Tiles of C that share a row panel of A, or a column panel of B, read the same "
             "bytes. Programs that run at the same time can share them through the L2 cache, "
             "so the order in which program numbers map to tiles decides how many distinct "
             "panels are in flight."),
        order((4, 4, 2)),
        l2((4096, 128, 64, 8, 2)),
        Heading("Why the accumulator is float32"),
        Text("A float16 value tops out at 65504 and a bfloat16 stores 7 bits of mantissa. An "
             "accumulator in either loses a long sum even when the answer itself is small:"),
        accumulator((1024, 128)),
        Heading("Planning a launch (matmul_plan)"),
        Text("Before it launches, a launcher works out the tiles, the K steps and whether the "
             "last is cut, whether each operand's rows start on 16-byte boundaries (in bytes, "
             "not elements), which operands are worth copying, and what the padding costs:"),
        plans(),
        Heading("Measured on a GPU"),
        measured(command=False),
    )
    return result_page


# Blocks a lesson can embed by name; each takes the marker's numbers as one list.
BLOCKS = {
    "padded": padded,
    "tile": tile,
    "result": result,
    "intensity": intensity,
    "order": order,
    "l2": l2,
    "accumulator": accumulator,
    "measured": measured,
    "configs": configs,
    "target": target,
    "launch": launch,
    "shapes": shapes,
    "shapes_triton39": shapes_triton39,
    "shapes_h100_early": shapes_h100_early,
    "shapes_h100_early_triton39": shapes_h100_early_triton39,
    "host": host,
    "edges": edges,
    "edges_triton39": edges_triton39,
    "rows": rows_tried,
    "floor": stream_floor,
    "strides": strides,
    "early": early,
    "early_triton39": early_triton39,
    "strides_triton39": strides_triton39,
    "one_launch": one_launch,
    "one_launch_triton39": one_launch_triton39,
    "mixed_operands": mixed_operands,
    "cublas": cublas_kernels,
    "small_tried": small_tried,
    "decode_tried": decode_tried,
    "plans": plans,
}
