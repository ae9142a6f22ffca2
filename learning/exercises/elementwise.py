"""The elementwise exercise (lessons 01 and 06): relu(x + y), cut into blocks of lanes with a
mask, first by hand in Python, then as a Triton kernel."""

from __future__ import annotations

from learning.grader.declarations import Bug, Case, Exercise, Part, Tolerance
from learning.grader.replays import raises_like, same_as
from learning.grader.tensors import TensorSpec

# ---------------------------------------------------------------------------------------------
# The reference: float64, run only in the grader's process.


def reference(x, y, *block):
    """relu(x + y) elementwise; ``block`` (the Python part's BLOCK) changes nothing."""
    import numpy as np

    return np.maximum(np.asarray(x, dtype=np.float64) + np.asarray(y, dtype=np.float64), 0.0)


def _np():
    import numpy as np

    return np


# ---------------------------------------------------------------------------------------------
# Known mistakes, each as the output it produces. Elements a program never writes keep the NaN
# the output started with, so a signature holds NaN exactly where the buggy code writes nothing.


POWERS_OF_TWO = tuple(1 << k for k in range(16))  # the blocks a learner's launcher may pick


def _tail_unwritten(got, args, want) -> bool:
    """Everything right up to a multiple of some block, nothing written after it: the grid
    was n // BLOCK programs instead of cdiv(n, BLOCK)."""
    np = _np()
    got = np.asarray(got, dtype=np.float64)
    n = want.size
    blocks = [args[2]] if len(args) > 2 else POWERS_OF_TWO
    for block in blocks:
        written = (n // block) * block
        if written in (0, n):  # nothing written at all says nothing about the grid
            continue
        head_ok = np.allclose(got[:written], want[:written], rtol=1e-3, atol=1e-3)
        if head_ok and np.isnan(got[written:]).all():
            return True
    return False


def _first_block_only(got, args, want) -> bool:
    """The first block right and nothing after it: every program wrote the same block, as if
    the offsets ignored the program id."""
    np = _np()
    got = np.asarray(got, dtype=np.float64)
    blocks = [args[2]] if len(args) > 2 else POWERS_OF_TWO
    for block in blocks:
        if block < want.size and np.isnan(got[block:]).all() and not np.isnan(got[:block]).any():
            return bool(np.allclose(got[:block], want[:block], rtol=1e-3, atol=1e-3))
    return False


def _last_unwritten(got, args, want) -> bool:
    """Everything right but the last element: the mask was offsets < n - 1."""
    np = _np()
    got = np.asarray(got, dtype=np.float64)
    return (want.size > 1 and bool(np.isnan(got[-1]))
            and np.allclose(got[:-1], want[:-1], rtol=1e-3, atol=1e-3))


def _first_unwritten(got, args, want) -> bool:
    """Everything right but element 0: the offsets start one lane late (pid * BLOCK + 1)."""
    np = _np()
    got = np.asarray(got, dtype=np.float64)
    return (want.size > 1 and bool(np.isnan(got[0]))
            and np.allclose(got[1:], want[1:], rtol=1e-3, atol=1e-3))


def _added_only(x, y, *block):
    return _np().asarray(x, dtype=_np().float64) + _np().asarray(y)


def _relu_each(x, y, *block):
    np = _np()
    return np.maximum(np.asarray(x, dtype=np.float64), 0.0) + np.maximum(np.asarray(y), 0.0)


_LOOSE = {"atol": 1e-3, "rtol": 1e-3}  # fp16 cases run the same formulas

SHARED_BUGS = (
    Bug("first-element-unwritten", "element 0 was never written: the offsets start one lane "
        "late; program pid's lanes are pid * BLOCK + 0, 1, ..., BLOCK - 1", _first_unwritten),
    Bug("off-by-one-mask", "the last element was never written: the mask is off by one (keep "
        "the lanes with offsets < n), or the grid is one program short", _last_unwritten),
    Bug("grid-too-small", "everything up to a whole number of blocks was written and nothing "
        "after it: the final, partial block never ran, as n // BLOCK programs leave it out; "
        "launch the ceiling, (n + BLOCK - 1) // BLOCK (triton.cdiv(n, BLOCK))", _tail_unwritten),
    Bug("same-block", "only the first block was written: either every program wrote the same "
        "elements (offsets need the program's start, pid * BLOCK + lane), or only the first "
        "program ran", _first_block_only),
    Bug("no-relu", "these are x + y: clamp each sum at zero, max(x + y, 0)",
        same_as(_added_only, **_LOOSE)),
    Bug("relu-before-add", "the ReLU went on each input, relu(x) + relu(y): add first, then "
        "clamp the sum", same_as(_relu_each, **_LOOSE)),
)

# ---------------------------------------------------------------------------------------------
# Lesson 01: add_relu_python(x, y, BLOCK) on lists of floats.

def _python_unmasked(x, y, block):
    """Lesson 01's programs with every lane working, the ones past the end included."""
    out = [0.0] * len(x)
    for pid in range((len(x) + block - 1) // block):
        for lane in range(block):
            offset = pid * block + lane
            out[offset] = max(x[offset] + y[offset], 0.0)
    return out


PYTHON_BUGS = SHARED_BUGS + (
    Bug("no-mask", "the last block's lanes past the end hold no element: skip them, "
        "mask = offset < n, and write only the lanes where it is true",
        raises=raises_like(_python_unmasked)),
)


def _lists(seed: int, n: int, block: int):
    def make():
        import random

        rng = random.Random(seed)
        x = [round(rng.uniform(-4, 4), 6) for _ in range(n)]
        y = [round(rng.uniform(-4, 4), 6) for _ in range(n)]
        return (x, y, block)

    return make


def _worked_example():
    x = [float(i) - 4.5 for i in range(10)]
    y = [1.0 if i % 2 else 2.0 for i in range(10)]
    return (x, y, 4)


PYTHON_CASES = (
    Case("n = 10, BLOCK = 4", "the lesson's drawing: three programs, the last with two "
         "masked lanes", _worked_example, catches=("no-mask", "grid-too-small")),
    Case("n = 16, BLOCK = 4", "a multiple of the block: four full programs, no lane masked",
         _lists(1, 16, 4), catches=("no-relu", "relu-before-add")),
    Case("n = 1, BLOCK = 8", "one element: one program, seven of its eight lanes masked",
         _lists(2, 1, 8), catches=("no-mask",)),
    Case("n = 17, BLOCK = 8", "one element past two full blocks: a third program for it alone",
         _lists(3, 17, 8), catches=("no-mask", "grid-too-small")),
    Case("n = 1000, BLOCK = 256", "four programs, the last one 232 lanes full",
         _lists(4, 1000, 256), catches=("no-mask", "grid-too-small")),
    Case("n = 4097, BLOCK = 1024", "one element past four blocks of 1024",
         _lists(5, 4097, 1024), catches=("no-mask", "grid-too-small")),
    Case("n = 0, BLOCK = 4", "no elements: no programs at all, and an empty result",
         _lists(6, 0, 4), catches=()),
    Case("all negative sums", "every x + y below zero: the ReLU gives zeros, written ones",
         lambda: ([-1.0, -2.5, -0.25, -7.0, -3.0], [0.5, 1.0, 0.125, 2.0, -1.0], 2),
         catches=("no-mask", "no-relu")),
)

# ---------------------------------------------------------------------------------------------
# Lesson 06: add_relu_triton(x, y) on 1-D tensors.

TRITON_BUGS = SHARED_BUGS + (
    Bug("out-of-bounds", "a load or store reached outside the tensors; which part of the "
        "address was wrong, the check cannot tell. It comes from one of: a lane that should "
        "be masked and was not (mask = offsets < n in every tl.load and tl.store); offsets "
        "that point past the data (offsets = program_id * BLOCK + arange, on a grid of "
        "cdiv(n, BLOCK) programs); or an output allocated smaller than the input"),
    Bug("unwritten", "some elements were never written: no program stored to them. Look at the "
        "store's offsets and mask, and at how many programs the grid launches"),
    Bug("wrong-dtype", "float16 inputs must give a float16 output: allocate it like x "
        "(torch.empty_like(x))"),
)


def _vectors(seed: int, n: int, dtype: str = "float32"):
    def make():
        rng = _np().random.default_rng(seed)
        x = rng.standard_normal(n)
        y = rng.standard_normal(n)
        return (TensorSpec(x, dtype=dtype), TensorSpec(y, dtype=dtype))

    return make


TRITON_CASES = (
    Case("n = 10", "the lesson's ten elements: one program, most of its lanes masked",
         _vectors(1, 10), catches=("out-of-bounds",)),
    Case("n = 1", "a single element", _vectors(2, 1), catches=("out-of-bounds",)),
    Case("n = 17", "not a power of two", _vectors(3, 17), catches=("out-of-bounds",)),
    Case("n = 1000", "just below 1024: a block larger than the input",
         _vectors(4, 1000), catches=("out-of-bounds",)),
    Case("n = 1024", "exactly one block of 1024: hides every masking bug, so it is not alone",
         _vectors(5, 1024), catches=("no-relu",)),
    Case("n = 4097", "one element past 4096: a last program with a single valid lane",
         _vectors(6, 4097), catches=("grid-too-small", "out-of-bounds")),
    Case("n = 20000", "several programs whatever the BLOCK: each must find its own elements",
         _vectors(7, 20000), catches=("grid-too-small", "out-of-bounds")),
    Case("float16", "float16 storage and a float16 result", _vectors(8, 300, "float16"),
         catches=("wrong-dtype",), tolerance=Tolerance(atol=2e-3, rtol=2e-3)),
    Case("a million elements", "a full-size launch (GPU only, too slow to interpret)",
         _vectors(9, 1 << 20), catches=("same-block",), gpu_only=True),
)

PYTHON_HINTS = (
    "range(BLOCK) gives a program's lanes; the element a lane works on is pid * BLOCK + lane.",
    "A lane's mask is offset < len(x): read and write only where it holds.",
    "The grid is (n + BLOCK - 1) // BLOCK programs: for n = 10 and BLOCK = 4 that is 3, not 2.",
    "For n = 0 the grid is 0 programs and the result is the empty list.",
)

TRITON_HINTS = (
    "pid = tl.program_id(0) is lesson 01's pid; the grid has one dimension, axis 0.",
    "offsets = pid * BLOCK + tl.arange(0, BLOCK), and mask = offsets < n.",
    "Both loads and the store take mask=mask: then the padded lanes never touch memory.",
    "The launch: add_relu_kernel[(triton.cdiv(n, BLOCK),)](out, x, y, n, BLOCK=BLOCK).",
)

EXERCISE = Exercise(
    name="elementwise",
    title="Elementwise work: relu(x + y) in blocks of lanes",
    lessons=("01-elementwise.md", "06-first-kernel.md"),
    parts=(
        Part("python", "add_relu_python: blocks of lanes with a mask, by hand", lesson="01",
             function="add_relu_python", reference=reference, cases=PYTHON_CASES,
             tolerance=Tolerance(atol=1e-12, rtol=1e-12), bugs=PYTHON_BUGS, returns="list",
             hints=PYTHON_HINTS),
        Part("triton", "add_relu_triton: your first kernel", lesson="06",
             function="add_relu_triton", reference=reference, cases=TRITON_CASES,
             tolerance=Tolerance(atol=1e-6, rtol=1e-6), bugs=TRITON_BUGS, returns="tensor",
             needs_kernels=True, hints=TRITON_HINTS),
    ),
)
