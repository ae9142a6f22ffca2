"""The traffic worked example: eager softmax (five kernels) against fused, counted byte by byte.

The counting model lives here, in plain Python: the explain page and the traffic exercise's
grader (``learning.exercises.traffic.exercise``) both use it, so the lesson's numbers and the
grade agree.
A kernel is ``{"name", "reads", "writes", "flops"}``; ``arrays`` maps a name to its elements.
"""

from __future__ import annotations

import math

from learning.cli import ArgumentError
from learning.explainers.page import Heading, Page, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "rows,cols[,element_bytes] (4096,4096,4)"
KEYS = ("bytes", "flops", "intensity", "bound")
MEMORY_BOUND = "memory-bound"
COMPUTE_BOUND = "compute-bound"

# An example GPU for the cases and the explainer: round figures of the order of a current
# data-centre GPU's FP32 rate and memory bandwidth. Lesson 10 measures a real one.
EXAMPLE_PEAK_FLOPS = 60e12  # FLOP/s
EXAMPLE_BANDWIDTH = 4e12  # bytes/s

# ---------------------------------------------------------------------------------------------
# The counting model: exact integers. The traffic exercise grades against ``report``.


def kernel(name: str, reads, writes, flops: int) -> dict:
    """One kernel as the exercise describes it."""
    return {"name": name, "reads": list(reads), "writes": list(writes), "flops": int(flops)}


def kernel_bytes(k: dict, arrays: dict, element_bytes: int) -> tuple[int, int]:
    """(bytes read, bytes written) by one kernel."""
    read = sum(arrays[name] for name in k["reads"]) * element_bytes
    written = sum(arrays[name] for name in k["writes"]) * element_bytes
    return read, written


def bytes_moved(kernels, arrays: dict, element_bytes: int) -> int:
    return sum(sum(kernel_bytes(k, arrays, element_bytes)) for k in kernels)


def total_flops(kernels) -> int:
    return sum(k["flops"] for k in kernels)


def bound(intensity: float, peak_flops: float, bandwidth: float) -> str:
    """Below the ridge point peak / bandwidth the bytes take longer than the FLOPs."""
    return MEMORY_BOUND if intensity < peak_flops / bandwidth else COMPUTE_BOUND


def report(kernels, arrays, element_bytes, peak_flops, bandwidth) -> dict:
    """What lesson 02's roofline() returns: the reference the grader compares against."""
    nbytes = bytes_moved(kernels, arrays, element_bytes)
    flops = total_flops(kernels)
    intensity = flops / nbytes
    return {"bytes": nbytes, "flops": flops, "intensity": intensity,
            "bound": bound(intensity, peak_flops, bandwidth)}


# ---------------------------------------------------------------------------------------------
# Softmax over an N×D matrix, the lesson's example: the five kernels PyTorch's eager mode runs
# for ``e / e.sum(...)`` (what ``python -m learning.bench`` times as "eager"), other ways to cut
# the same steps into kernels, and one fused kernel.
# FLOPs per element: max 1 (a comparison), subtract 1, exp 1 (counted as one operation),
# sum 1 (an add), divide 1.


def softmax_arrays(rows: int, cols: int) -> dict:
    n = rows * cols
    return {"x": n, "m": rows, "s": n, "e": n, "y": n, "d": rows}


def eager_softmax(rows: int, cols: int) -> list[dict]:
    """Five kernels, one per torch operation of a readable softmax, each a round trip to memory:

        m = x.amax(dim=-1, keepdim=True); s = x - m; e = torch.exp(s)
        y = e / e.sum(dim=-1, keepdim=True)

    max:      m[r] = max_j x[r, j]      reads x,    writes m (one value per row)
    subtract: s = x - m                 reads x, m, writes s
    exp:      e = exp(s)                reads s,    writes e
    sum:      d[r] = sum_j e[r, j]      reads e,    writes d (one value per row)
    divide:   y = e / d                 reads e, d, writes y
    """
    n = rows * cols
    return [
        kernel("max", ["x"], ["m"], n),
        kernel("subtract", ["x", "m"], ["s"], n),
        kernel("exp", ["s"], ["e"], n),
        kernel("sum", ["e"], ["d"], n),
        kernel("divide", ["e", "d"], ["y"], n),
    ]


def four_kernel_softmax(rows: int, cols: int) -> list[dict]:
    """The eager kernels with the sum and the divide in one kernel that holds the row."""
    n = rows * cols
    return [
        kernel("max", ["x"], ["m"], n),
        kernel("subtract", ["x", "m"], ["s"], n),
        kernel("exp", ["s"], ["e"], n),
        kernel("sum-and-divide", ["e"], ["y"], 2 * n),
    ]


def three_kernel_softmax(rows: int, cols: int) -> list[dict]:
    """max; exp(x - m) in one kernel; sum-and-divide."""
    n = rows * cols
    return [
        kernel("max", ["x"], ["m"], n),
        kernel("exp(x - max)", ["x", "m"], ["e"], 2 * n),
        kernel("sum-and-divide", ["e"], ["y"], 2 * n),
    ]


def fused_softmax(rows: int, cols: int) -> list[dict]:
    """One kernel: each row read once, both reductions on chip, the result written once."""
    n = rows * cols
    return [kernel("fused softmax", ["x"], ["y"], 5 * n)]


# ---------------------------------------------------------------------------------------------
# The page.

DEFAULT_SHAPE = (4096, 4096, 4)
SMALL_SHAPE = (1024, 1024, 4)
DTYPES = {1: "8-bit", 2: "16-bit", 4: "float32", 8: "float64"}
MAX_ELEMENTS = 2**40

# What each eager kernel computes, for the table.
FORMULAS = {
    "max": "m[r] = max over j of x[r, j]",
    "subtract": "s = x - m",
    "exp": "e = exp(s)",
    "sum-and-divide": "y = e / (sum over j of e[r, j])",
    "exp(x - max)": "e = exp(x - m)",
    "sum": "d[r] = sum over j of e[r, j]",
    "divide": "y = e / d",
    "fused softmax": "y = softmax(x), row by row",
}


def megabytes(nbytes: int) -> str:
    return f"{nbytes / 1e6:,.1f} MB"


def mebibytes(nbytes: int) -> str:
    value = f"{nbytes / 2**20:,.2f}".rstrip("0").rstrip(".")
    return f"{value} MiB"


def microseconds(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _dtype(element_bytes: int) -> str:
    return DTYPES.get(element_bytes, f"{element_bytes}-byte")


def _label(rows: int, cols: int, element_bytes: int) -> str:
    return f"{rows}×{cols} {_dtype(element_bytes)}"


def _full_passes(kernels, arrays, rows: int, cols: int) -> tuple[int, int]:
    """(reads, writes) of full-size arrays (rows × cols elements) over the whole sequence."""
    full = rows * cols
    reads = sum(1 for k in kernels for name in k["reads"] if arrays[name] == full)
    writes = sum(1 for k in kernels for name in k["writes"] if arrays[name] == full)
    return reads, writes


def kernel_table(kernels, rows: int, cols: int, element_bytes: int) -> Table:
    """Each kernel of a sequence with what it reads and writes, and the total."""
    arrays = softmax_arrays(rows, cols)
    lines = []
    for k in kernels:
        read, written = kernel_bytes(k, arrays, element_bytes)
        lines.append((k["name"], FORMULAS.get(k["name"], ""), ", ".join(k["reads"]),
                       ", ".join(k["writes"]), f"{read:,}", f"{written:,}",
                       f"{read + written:,}"))
    total = bytes_moved(kernels, arrays, element_bytes)
    read_total = sum(kernel_bytes(k, arrays, element_bytes)[0] for k in kernels)
    lines.append(("total", "", "", "", f"{read_total:,}", f"{total - read_total:,}",
                  f"{total:,}"))
    reads, writes = _full_passes(kernels, arrays, rows, cols)
    small = total - (reads + writes) * rows * cols * element_bytes
    caption = (f"{reads + writes} full-size passes ({_count(reads, 'read')}, "
               f"{_count(writes, 'write')}) of "
               f"{rows * cols * element_bytes:,} bytes"
               + (f", plus {small:,} bytes of per-row values" if small else "")
               + f": {total:,} bytes, {megabytes(total)} ({mebibytes(total)}).")
    return Table(("Kernel", "Computes", "Reads", "Writes", "Bytes read", "Bytes written",
                  "Bytes"), tuple(lines), caption)


def eager_table(numbers) -> Table:
    rows, cols, element_bytes = _shape(numbers)
    return kernel_table(eager_softmax(rows, cols), rows, cols, element_bytes)


def fused_table(numbers) -> Table:
    rows, cols, element_bytes = _shape(numbers)
    return kernel_table(fused_softmax(rows, cols), rows, cols, element_bytes)


def _report(kernels, rows: int, cols: int, element_bytes: int) -> dict:
    return report(kernels, softmax_arrays(rows, cols), element_bytes,
                           EXAMPLE_PEAK_FLOPS, EXAMPLE_BANDWIDTH)


VERSIONS = (
    ("eager, 5 kernels", eager_softmax),
    ("fused, 1 kernel", fused_softmax),
)

DECOMPOSITIONS = (
    ("eager, 5 kernels: max; subtract; exp; sum; divide", eager_softmax),
    ("4 kernels: max; subtract; exp; sum-and-divide", four_kernel_softmax),
    ("3 kernels: max; exp(x - max); sum-and-divide", three_kernel_softmax),
    ("1 kernel: fused", fused_softmax),
)


def compare_table(numbers) -> Table:
    """Eager against fused for one shape: bytes, and how many times the fused bound."""
    rows, cols, element_bytes = _shape(numbers)
    fused = _report(fused_softmax(rows, cols), rows, cols, element_bytes)["bytes"]
    lines = []
    for name, build in VERSIONS:
        nbytes = _report(build(rows, cols), rows, cols, element_bytes)["bytes"]
        lines.append((name, f"{nbytes:,}", megabytes(nbytes), mebibytes(nbytes),
                      f"{nbytes / fused:.2f}×"))
    one_pass = rows * cols * element_bytes
    caption = (f"One full-size pass is {rows} × {cols} × {element_bytes} = {one_pass:,} bytes "
               f"({megabytes(one_pass)}, {mebibytes(one_pass)}).")
    return Table(("Softmax of " + _label(rows, cols, element_bytes), "Bytes", "MB", "MiB",
                  "Against fused"), tuple(lines), caption)


def decomposition_table(numbers) -> Table:
    """How the eager total moves with the way the steps are cut into kernels."""
    rows, cols, element_bytes = _shape(numbers)
    lines = []
    for name, build in DECOMPOSITIONS:
        kernels = build(rows, cols)
        arrays = softmax_arrays(rows, cols)
        reads, writes = _full_passes(kernels, arrays, rows, cols)
        nbytes = bytes_moved(kernels, arrays, element_bytes)
        lines.append((name, f"{reads} + {writes}", f"{nbytes:,}", megabytes(nbytes)))
    return Table(("Decomposition", "Full-size reads + writes", "Bytes", "MB"), tuple(lines))


def roofline_table(numbers) -> Table:
    """Intensity and bound on the example GPU, and the time the traffic alone needs."""
    rows, cols, element_bytes = _shape(numbers)
    peak, bandwidth = EXAMPLE_PEAK_FLOPS, EXAMPLE_BANDWIDTH
    lines = []
    for name, build in VERSIONS:
        summary = _report(build(rows, cols), rows, cols, element_bytes)
        attainable = min(peak, summary["intensity"] * bandwidth)
        lines.append((name, f"{summary['flops']:,}", f"{summary['intensity']:.3f}",
                      summary["bound"], f"{attainable / 1e12:.2f}",
                      microseconds(summary["bytes"] / bandwidth)))
    caption = (f"Example GPU: {peak / 1e12:g} TFLOP/s and {bandwidth / 1e12:g} TB/s, so the "
               f"ridge point is {peak / bandwidth:g} FLOP/byte. FLOPs count 5 per element "
               "(compare, subtract, exp, add, divide).")
    return Table(("Softmax of " + _label(rows, cols, element_bytes), "FLOPs", "FLOP/byte",
                  "Bound", "Roof (TFLOP/s)", "Traffic time"), tuple(lines), caption)


def _shape(numbers) -> tuple[int, int, int]:
    """(rows, cols, element_bytes) from two or three positive whole numbers."""
    values = list(numbers)
    if len(values) not in (2, 3):
        raise ArgumentError(f"--input takes rows,cols or rows,cols,element_bytes, not "
                            f"{len(values)} numbers (e.g. --input 4096,4096,4)")
    for value in values:
        if not math.isfinite(value) or value != int(value) or value < 1:
            raise ArgumentError(f"--input: {value:g} is not a positive whole number")
    rows, cols = int(values[0]), int(values[1])
    element_bytes = int(values[2]) if len(values) == 3 else 4
    if element_bytes not in DTYPES:
        raise ArgumentError(f"--input: an element is 1, 2, 4 or 8 bytes, not {element_bytes}")
    if rows * cols > MAX_ELEMENTS:
        raise ArgumentError(f"--input: {rows}×{cols} is more than 2**40 elements")
    return rows, cols, element_bytes


ASSUMPTIONS = (
    "The model: every kernel reads each of its inputs from global memory in full and writes "
    "each of its outputs back in full, and nothing survives on chip from one kernel to the "
    "next. That is logical traffic. For the fused kernel it is a lower bound: no softmax can "
    "read less than its input or write less than its output. What the memory really moves can "
    "differ: a cache can serve a second read of data it still holds (a 1024×1024 float32 "
    "intermediate is 4 MiB, small enough to stay in a GPU's L2), spilled registers add traffic, "
    "and a layout that uses part of each fetched line wastes the rest."
)


def _shape_section(rows: int, cols: int, element_bytes: int) -> list:
    shape = [rows, cols, element_bytes]
    return [
        Heading(f"Eager softmax of {_label(rows, cols, element_bytes)}: five kernels"),
        eager_table(shape),
        Heading("Fused softmax: one kernel"),
        fused_table(shape),
        Heading("Eager against fused"),
        compare_table(shape),
    ]


def page(row=None) -> Page:
    """The whole worked example; ``row`` is the learner's rows,cols[,element_bytes]."""
    rows, cols, element_bytes = _shape(row if row is not None else DEFAULT_SHAPE)
    shape = [rows, cols, element_bytes]
    result = Page(f"Memory traffic of softmax over a {_label(rows, cols, element_bytes)} matrix")
    result.add(
        Text("Eager softmax, written as x.amax, x - m, torch.exp, then e / e.sum, runs five "
             "kernels, one per torch operation; the fused kernel runs them all in one program "
             "per row. Each eager kernel writes its result to memory, and the next kernel reads "
             "it back."),
        Text(ASSUMPTIONS),
        *_shape_section(rows, cols, element_bytes),
        Heading("The total depends on where the kernels are cut"),
        decomposition_table(shape),
        Heading("On the roofline"),
        roofline_table(shape),
    )
    if row is None:
        small = list(SMALL_SHAPE)
        result.add(
            Heading(f"The same for {_label(*small)}"),
            compare_table(small),
            Text("At this size every intermediate fits in a large GPU's L2 cache, so the eager "
                 "version's measured traffic can fall well below its logical count; the fused "
                 "kernel's bound holds whatever the cache does."),
        )
    return result


# Blocks a lesson can embed by name, each taking the marker's numbers as one list
# (rows, cols, element_bytes; see learning.computed).
BLOCKS = {
    "eager": eager_table,
    "fused": fused_table,
    "compare": compare_table,
    "decompositions": decomposition_table,
    "roofline": roofline_table,
}
