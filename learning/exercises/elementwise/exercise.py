"""The elementwise exercise (lessons 01 and 06): relu(x + y), cut into blocks of lanes with a
mask, first by hand in Python, then as a Triton kernel."""

from __future__ import annotations

from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import any_of, raises_like, same_as
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


# Each is a replay: the reference with NaN where code with the mistake writes nothing. A replay
# (not a pattern alone) lets the grader drop the mistake when the learner's other cases show
# another pattern: mistakes that differ can leave the same element unwritten in one case.


def _unwritten_where(skipped):
    """A replay: the reference, NaN at ``skipped(n, block)`` (indices, or a slice); a mistake
    that does not show at this size raises ValueError (no evidence either way)."""

    def reproduce(x, y, *block):
        np = _np()
        out = reference(x, y).reshape(-1).copy()
        out[skipped(out.size, block[0] if block else None)] = np.nan
        return out.reshape(np.shape(reference(x, y)))

    return reproduce


def _per_block(skipped):
    """The replay for each block a program may have (the Python part's BLOCK is its third
    argument; a Triton launcher's is unknown, so every power of two is a form)."""

    def for_block(block):
        return same_as(_unwritten_where(lambda n, given: skipped(n, given or block)), **_LOOSE)

    return any_of(*(for_block(block) for block in POWERS_OF_TWO))


def _after_whole_blocks(n: int, block: int):
    """n // BLOCK programs: everything from the last whole block's end on."""
    written = (n // block) * block
    if written in (0, n):  # nothing written, or nothing left out: this case cannot tell
        raise ValueError("no partial block")
    return slice(written, None)


def _after_first_block(n: int, block: int):
    """Every program wrote the first block: all after it."""
    if block >= n:
        raise ValueError("one block holds the whole input")
    return slice(block, None)


def _only(position: int):
    def skipped(n: int, block):
        if n < 2:
            raise ValueError("one element: nothing else to compare")
        return [position % n]
    return skipped


def _added_only(x, y, *block):
    return _np().asarray(x, dtype=_np().float64) + _np().asarray(y)


def _relu_each(x, y, *block):
    np = _np()
    return np.maximum(np.asarray(x, dtype=np.float64), 0.0) + np.maximum(np.asarray(y), 0.0)


_LOOSE = {"atol": 1e-3, "rtol": 1e-3}  # fp16 cases run the same formulas

def _same_block(pid: str) -> Bug:
    """Only the first block written: three mistakes give exactly that, and the output cannot
    tell them apart. ``pid`` says where the program's number comes from, in the part's terms."""
    return Bug("same-block", "only the first block was written, as one program alone would "
               "write it. One of: every program wrote the same elements (offsets need the "
               f"program's start, pid * BLOCK + lane, with {pid}); only the first program ran "
               "(the grid); or the mask keeps only the first block's lanes (compare the "
               "offsets with n, not with BLOCK)", _per_block(_after_first_block))


SHARED_BUGS = (
    Bug("first-element-unwritten", "element 0 was never written: the offsets start one lane "
        "late; program pid's lanes are pid * BLOCK + 0, 1, ..., BLOCK - 1",
        same_as(_unwritten_where(_only(0)), **_LOOSE)),
    Bug("off-by-one-mask", "the last element was never written: the mask is off by one (keep "
        "the lanes with offsets < n), or the grid is one program short",
        same_as(_unwritten_where(_only(-1)), **_LOOSE)),
    Bug("grid-too-small", "everything up to a whole number of blocks was written and nothing "
        "after it: the final, partial block never ran, as n // BLOCK programs leave it out; "
        "launch the ceiling, (n + BLOCK - 1) // BLOCK (triton.cdiv(n, BLOCK))",
        _per_block(_after_whole_blocks)),
    _same_block("pid, the program's own number"),
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
    Case("all negative sums", "every x + y below zero: each output is a 0 that must still be "
         "written",
         lambda: ([-1.0, -2.5, -0.25, -7.0, -3.0], [0.5, 1.0, 0.125, 2.0, -1.0], 2),
         catches=("no-mask", "no-relu")),
)

# ---------------------------------------------------------------------------------------------
# Lesson 06: add_relu_triton(x, y) on 1-D tensors.

TRITON_BUGS = tuple(b for b in SHARED_BUGS if b.key != "same-block") + (
    _same_block("pid = tl.program_id(0), the program's index along the grid's one axis"),
    Bug("out-of-bounds", "a load or store reached outside the tensors; which part of the "
        "address was wrong, the check cannot tell. It comes from one of: a lane that should "
        "be masked and was not (mask = offsets < n in every tl.load and tl.store); offsets "
        "that point past the data (offsets = program_id * BLOCK + arange, on a grid of "
        "cdiv(n, BLOCK) programs); or an output allocated smaller than the input"),
    Bug("unwritten", "some elements were never written: no program stored to them. Look at the "
        "store's offsets and mask, and at how many programs the grid launches"),
    Bug("wrong-dtype", "the output must have the inputs' dtype (float16 in, float16 out; "
        "float32 in, float32 out): allocate it like x (torch.empty_like(x))"),
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

def _in_program(loops: dict, args: tuple) -> str:
    return f"in program {loops['program'][0]}" if "program" in loops else ""


# Lesson 06's kernel: this program's lanes, which of them hold an element, the two inputs as
# loaded, the sum through relu.
TRITON_STEPS = Steps(("offsets", "mask", "x", "y", "out"), _in_program,
                     function="add_relu_kernel")

EXERCISE = Exercise(
    name="elementwise",
    title="Elementwise work: relu(x + y) in blocks of lanes",
    lessons=("01-elementwise.md", "06-first-kernel.md"),
    parts=(
        Part("python", "add_relu_python: blocks of lanes with a mask, by hand", lesson="01",
             function="add_relu_python", reference=reference, cases=PYTHON_CASES,
             tolerance=Tolerance(atol=1e-12, rtol=1e-12), bugs=PYTHON_BUGS, returns="list",
             hints=PYTHON_HINTS, plain_python=True),
        Part("triton", "add_relu_triton: your first kernel", lesson="06",
             function="add_relu_triton", reference=reference, cases=TRITON_CASES,
             tolerance=Tolerance(atol=1e-6, rtol=1e-6), bugs=TRITON_BUGS, returns="tensor",
             needs_kernels=True,
             kernel_ops=(("add",),),
             torch_answers=("relu", "relu_", "clamp", "clamp_min", "threshold"),
             hints=TRITON_HINTS, steps=TRITON_STEPS),
    ),
)
