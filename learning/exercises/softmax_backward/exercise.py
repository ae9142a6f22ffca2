"""The softmax backward exercise (lesson 11): its cases, the bugs they catch, and the references.

Three parts grade one file: the gradient of one row in plain Python, the Triton kernel that
computes it for every row, and the torch.autograd.Function that pairs a forward kernel with it.
"""

from __future__ import annotations

import math

from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import any_of, rows_at_n_cols, rows_with_stride_of, same_as
from learning.grader.tensors import TensorSpec


def _np():
    import numpy as np

    return np


# ---------------------------------------------------------------------------------------------
# References: float64, run only in the grader's process.


def reference_backward(y, dy):
    """dx = y * (dy - sum(y * dy)) along the last axis, in float64."""
    np = _np()
    y = np.asarray(y, dtype=np.float64)
    dy = np.asarray(dy, dtype=np.float64)
    return y * (dy - (y * dy).sum(axis=-1, keepdims=True))


def softmax_rows(x):
    """Softmax along the last axis in float64 (as the forward pass computes it)."""
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        numerator = np.exp(x - x.max(axis=-1, keepdims=True))
        return numerator / numerator.sum(axis=-1, keepdims=True)


def reference_gradient(x, dy):
    """The gradient with respect to the scores x: the backward formula at y = softmax(x)."""
    return reference_backward(softmax_rows(x), dy)


# ---------------------------------------------------------------------------------------------
# Wrong formulas, reproduced in NumPy so that the grader can recognise their output.


def _no_y_factor(y, dy):
    np = _np()
    y, dy = np.asarray(y, dtype=np.float64), np.asarray(dy, dtype=np.float64)
    return dy - (y * dy).sum(axis=-1, keepdims=True)


def _dot_without_y(y, dy):
    np = _np()
    y, dy = np.asarray(y, dtype=np.float64), np.asarray(dy, dtype=np.float64)
    return y * (dy - dy.sum(axis=-1, keepdims=True))


def _diagonal_only(y, dy):
    np = _np()
    y, dy = np.asarray(y, dtype=np.float64), np.asarray(dy, dtype=np.float64)
    return y * (1.0 - y) * dy


def _flipped_sign(y, dy):
    return -reference_backward(y, dy)


def _softmax_again(y, dy):
    return reference_backward(softmax_rows(y), dy)


def _dot_over_groups(rows: int | None):
    """One dot product for each group of ``rows`` consecutive rows (None: the whole tensor),
    as a kernel that sums a tile of several rows without an axis computes it."""

    def reproduce(y, dy):
        np = _np()
        y, dy = np.asarray(y, dtype=np.float64), np.asarray(dy, dtype=np.float64)
        size = rows or len(y)
        products = y * dy
        dots = np.concatenate([np.full((len(products[i:i + size]), 1),
                                       products[i:i + size].sum())
                               for i in range(0, len(y), size)])
        return y * (dy - dots)

    return reproduce


def _nan_where_padded(y, dy):
    """A kernel whose padded lanes of y read -inf: (-inf) * 0 = NaN joins every padded row's dot
    product, so every row is NaN unless the width is a power of two (no padding at all)."""
    np = _np()
    want = reference_backward(y, dy)
    width = want.shape[-1]
    return want if width & (width - 1) == 0 else np.full(want.shape, np.nan)


def _both_minus_inf(y, dy):
    """y and dy both padded with -inf, as in the forward kernel: each padded lane adds
    (-inf) * (-inf) = +inf to the dot product, so every padded row's dx is -inf where y > 0
    (and NaN where y is 0)."""
    np = _np()
    want = reference_backward(y, dy)
    width = want.shape[-1]
    if width & (width - 1) == 0:
        return want
    with np.errstate(all="ignore"):
        return np.asarray(y, dtype=np.float64) * -np.inf


def _inaccurate_dot(got, args, want) -> bool:
    """Every row is y * (dy - d) for one number d per row that is itself a float16 value and
    misses sum(y * dy) by more than FP32 summation can, and by no more than float16 summation
    can (n roundings of 2**-11 of the sum of |y * dy|): the dot product was held in float16.
    Summed in float16, or summed in FP32 and rounded to float16, look alike here. (Each d is
    estimated from the output, which is float16 too: hence the small allowances.)"""
    np = _np()
    if getattr(args[0], "stored_dtype", "") != "float16":
        return False
    y, dy = (np.asarray(a, dtype=np.float64) for a in args[:2])
    if got.shape != want.shape or not np.isfinite(got).all() or y.ndim != 2:
        return False
    off = False
    for g, yr, dyr in zip(got, y, dy):
        used = np.abs(yr) > 1e-3
        if not used.any():
            return False
        d = float(np.median((dyr - g / np.where(used, yr, 1.0))[used]))
        if not np.allclose(g, yr * (dyr - d), atol=1e-6, rtol=1e-2):
            return False
        if abs(d - float(np.float16(d))) > 2e-5 * max(1.0, abs(d)):
            return False
        dot, scale = float((yr * dyr).sum()), float(np.abs(yr * dyr).sum())
        if abs(d - dot) > (len(yr) + 1) * 2.0 ** -11 * scale:
            return False  # further off than any float16 sum: another mistake
        off = off or abs(d - dot) > 1e-5 * scale
    return off


def _with_x_as_y(x, dy):
    return reference_backward(x, dy)


def _on_softmax(formula):
    """A wrong backward formula applied at y = softmax(x), for the autograd part."""
    return lambda x, dy: formula(softmax_rows(x), dy)


def _float32_accuracy(got, args, want) -> bool:
    """A float64 case that came back right to float32 precision only: the kernel narrowed its
    float64 inputs to float32. Float64 cases hold inputs that float32 cannot represent."""
    np = _np()
    inputs = [np.asarray(a, dtype=np.float64) for a in args]
    float64_inputs = any((a != a.astype(np.float32)).any() for a in inputs)
    if not float64_inputs or got.shape != want.shape or not np.isfinite(got).all():
        return False
    return bool(np.allclose(got, want, rtol=1e-4, atol=1e-6))


_LOOSE = {"atol": 2e-5, "rtol": 1e-3}  # FP32 kernels against formulas reproduced in float64

FORMULA_BUGS = (
    Bug("no-y-factor", "dx is missing the factor y: dx = y * (dy - dot), not dy - dot (the "
        "Jacobian's entries all carry y_i)", same_as(_no_y_factor, **_LOOSE)),
    Bug("dot-without-y", "the dot product must weight dy by y: dot = sum(y * dy), not "
        "sum(dy)", same_as(_dot_without_y, **_LOOSE)),
    Bug("diagonal-only", "only the Jacobian's diagonal y * (1 - y) was used: every output "
        "depends on every input, through the dot product sum(y * dy)",
        same_as(_diagonal_only, **_LOOSE)),
    Bug("flipped-sign", "the sign is flipped: dx = y * (dy - dot), not y * (dot - dy)",
        same_as(_flipped_sign, **_LOOSE)),
)

# ---------------------------------------------------------------------------------------------
# Part 1: softmax_backward_python(y, dy) on one row of plain floats.

PYTHON_BUGS = FORMULA_BUGS + (
    Bug("softmax-again", "y is already softmax's output: use it as it is, without applying "
        "softmax to it again", same_as(_softmax_again)),
    Bug("wrong-length", "every element of the row needs exactly one gradient"),
)


def _softmax_list(values):
    top = max(values)
    numerator = [math.exp(v - top) for v in values]
    total = sum(numerator)
    return [n / total for n in numerator]


def _pair(x, dy):
    return lambda: (_softmax_list([float(v) for v in x]), [float(g) for g in dy])


def _seeded_pair(seed: int, n: int):
    def make():
        import random

        rng = random.Random(seed)
        x = [round(rng.uniform(-3.0, 3.0), 6) for _ in range(n)]
        dy = [round(rng.uniform(-2.0, 2.0), 6) for _ in range(n)]
        return (_softmax_list(x), dy)

    return make


PYTHON_CASES = (
    Case("worked row", "y = softmax([1, 2, 3]), dy = [1, -1, 2]: the row the lesson works by "
         "hand", _pair([1, 2, 3], [1, -1, 2]),
         catches=("no-y-factor", "dot-without-y", "flipped-sign", "softmax-again")),
    Case("one-hot dy", "dy = [0, 1, 0] picks one column of the Jacobian: every entry of dx is "
         "non-zero, not only the middle one", _pair([1, 2, 3], [0, 1, 0]),
         catches=("diagonal-only",)),
    Case("uniform dy", "dy the same everywhere: the loss only sees sum(y), which is always 1, so "
         "dx is 0", _pair([0.5, -1.0, 2.0, 0.0], [3, 3, 3, 3]), catches=("dot-without-y",)),
    Case("saturated softmax", "y = [0, 1, 0, 0]: a saturated softmax passes no gradient back, "
         "so dx is 0", lambda: ([0.0, 1.0, 0.0, 0.0], [0.5, -1.5, 2.0, 1.0]),
         catches=("no-y-factor",)),
    Case("single element", "one element: y is 1 whatever x is, so dx is 0",
         lambda: ([1.0], [2.5]), catches=("wrong-length",)),
    Case("sign", "y = [0.9, 0.1], dy = [1, 0]: raising the first score raises the loss, so "
         "dx[0] > 0", lambda: ([0.9, 0.1], [1.0, 0.0]), catches=("flipped-sign",)),
    Case("mixed row", "nine values with gradients of both signs", _seeded_pair(5, 9),
         catches=("diagonal-only", "flipped-sign")),
    Case("long row", "200 values: one gradient per element, in order", _seeded_pair(6, 200),
         catches=("wrong-length",)),
)

# ---------------------------------------------------------------------------------------------
# Part 2: softmax_backward_triton(y, dy) on 2-D tensors, one program per row.


def _pair_tensors(seed: int, rows: int, cols: int, *, dtype: str = "float32",
                  y_layout: str = "contiguous", dy_layout: str | None = None,
                  y_rule=None, dy_rule=None):
    """(y, dy) as TensorSpecs: y the softmax of random scores (or ``y_rule``'s rows), dy random
    (or ``dy_rule``'s)."""

    def make():
        np = _np()
        rng = np.random.default_rng(seed)
        scores = 2.0 * rng.standard_normal((rows, cols))
        y = softmax_rows(scores) if y_rule is None else y_rule(rows, cols, rng)
        dy = rng.standard_normal((rows, cols)) if dy_rule is None else dy_rule(rows, cols, rng)
        return (TensorSpec(y, dtype=dtype, layout=y_layout),
                TensorSpec(dy, dtype=dtype, layout=dy_layout or y_layout))

    return make


def _saturated(rows, cols, rng):
    np = _np()
    y = np.zeros((rows, cols))
    y[np.arange(rows), rng.integers(0, cols, rows)] = 1.0
    return y


def _uniform_per_row(rows, cols, rng):
    np = _np()
    return np.repeat(rng.uniform(-3.0, 3.0, (rows, 1)), cols, axis=1)


def _one_hot(rows, cols, rng):
    np = _np()
    dy = np.zeros((rows, cols))
    dy[np.arange(rows), rng.integers(0, cols, rows)] = 1.0
    return dy


def _nearly_uniform(rows, cols, rng):
    """dy = c + 0.01 * noise along each row: dy - sum(y * dy) cancels to about 0.01."""
    return _uniform_per_row(rows, cols, rng) + 0.01 * rng.standard_normal((rows, cols))


def _worked():
    np = _np()
    y = softmax_rows(np.array([[1.0, 2.0, 3.0]]))
    return (TensorSpec(y), TensorSpec(np.array([[1.0, -1.0, 2.0]])))


FP32 = Tolerance(atol=1e-6, rtol=3e-5)
FP16 = Tolerance(atol=1e-3, rtol=1e-2)
BF16 = Tolerance(atol=4e-3, rtol=2e-2)
FP64 = Tolerance(atol=1e-12, rtol=1e-9)

KERNEL_BUGS = (
    Bug("fp64-narrowed", "float64 came back with float32's precision: somewhere the values "
        "went through float32. Either the kernel converts every dtype to float32 (convert "
        "float16 and bfloat16, but keep float64: if y.dtype != tl.float64: ...), or a tensor "
        "was allocated as float32 (an output, or a saved forward result) and the float32 "
        "values were cast back to float64 (torch.empty_like(y) keeps y's dtype)",
        _float32_accuracy),
)

TRITON_BUGS = FORMULA_BUGS + (
    Bug("minus-inf-padding", "padded lanes must read 0, the identity of a sum: with -inf, "
        "(-inf) * 0 is NaN and the whole row's dot product is NaN; load y and dy with "
        "other=0.0", same_as(_nan_where_padded)),
    Bug("dot-over-tensor", "the dot product must be taken per row: each row has its own "
        "sum(y * dy), one number per program (tl.sum(y * dy, axis=0) on one row)",
        any_of(*(same_as(_dot_over_groups(rows), **_LOOSE) for rows in (None, 2, 4, 8, 16)))),
    Bug("both-minus-inf-padding", "y and dy were both padded with -inf, as the forward kernel "
        "pads x: each padded lane adds (-inf) * (-inf) = +inf to the dot product. The sum "
        "needs 0, its identity: load both with other=0.0", same_as(_both_minus_inf)),
    Bug("row-stride", "a strided view (x[::2], a column slice) starts row r at r * stride(0), "
        "which is larger than n_cols: pass each tensor's row stride to the kernel",
        same_as(rows_at_n_cols(reference_backward, (0, 1)), **_LOOSE)),
    Bug("shared-stride", "y, dy and dx each have their own row stride (here dy is a slice of a "
        "wider tensor), and dy's rows were read at y's: pass all three, y.stride(0), "
        "dy.stride(0) and dx.stride(0), and step each tensor's rows by its own",
        same_as(rows_with_stride_of(reference_backward, 0, (1,)), **_LOOSE)),
    Bug("fp16-dot", "the dot product was held in float16 (summed in it, or rounded to it "
        "before the subtraction): when dy is nearly constant along a row, dy - dot cancels to "
        "a few hundredths and float16's three digits leave nothing right; convert y and dy to "
        "float32 before tl.sum, and keep the dot product in FP32", _inaccurate_dot),
) + KERNEL_BUGS

TRITON_CASES = (
    Case("worked row", "y = softmax([1, 2, 3]) in a block of 4, dy = [1, -1, 2]: the padded "
         "lane must not disturb the dot product", _worked, catches=("minus-inf-padding",)),
    Case("width 17, five rows", "a width that is not a power of two, over several rows",
         _pair_tensors(1, 5, 17), catches=("minus-inf-padding", "both-minus-inf-padding")),
    Case("many rows", "37 rows of 33: each row has its own dot product",
         _pair_tensors(2, 37, 33), catches=("dot-over-tensor",)),
    Case("saturated rows", "one-hot y: a saturated softmax passes no gradient, so dx is 0",
         _pair_tensors(3, 4, 50, y_rule=_saturated), catches=("no-y-factor",)),
    Case("uniform dy", "dy constant along each row: dx is 0, since the rows of y sum to 1",
         _pair_tensors(4, 4, 50, dy_rule=_uniform_per_row), catches=("dot-without-y",)),
    Case("one-hot dy", "dy one-hot per row: dx is a column of the Jacobian, non-zero everywhere",
         _pair_tensors(5, 3, 40, dy_rule=_one_hot), catches=("diagonal-only",)),
    Case("row-strided views", "y[::2] and dy[::2] of taller tensors: the row stride is "
         "2 * n_cols", _pair_tensors(6, 6, 50, y_layout="row-strided"), catches=("row-stride",)),
    Case("column slices", "y[:, :40] and dy[:, :40] of wider tensors: the row stride is not "
         "n_cols", _pair_tensors(7, 4, 40, y_layout="column-slice"), catches=("row-stride",)),
    Case("dy a column slice", "y contiguous, dy a slice of a wider tensor: each tensor has its "
         "own row stride", _pair_tensors(8, 4, 30, dy_layout="column-slice"),
         catches=("shared-stride",)),
    Case("single column", "width 1: y is 1 and dx is 0", _pair_tensors(9, 5, 1), catches=()),
    Case("wide row", "width 4097, just past 4096: BLOCK must be the next power of two, 8192",
         _pair_tensors(10, 2, 4097), catches=("minus-inf-padding",)),
    Case("float16", "float16 storage, FP32 arithmetic, float16 output",
         _pair_tensors(11, 4, 300, dtype="float16"), catches=("wrong-dtype",), tolerance=FP16),
    Case("float16, nearly uniform dy", "dy nearly constant along each row, in float16: dy - dot "
         "cancels to about 0.01, so the dot product must be summed in FP32",
         _pair_tensors(15, 4, 300, dtype="float16", dy_rule=_nearly_uniform),
         catches=("fp16-dot",), tolerance=Tolerance(atol=1e-6, rtol=1e-2)),
    Case("float64", "float64 storage and float64 arithmetic: what gradcheck needs",
         _pair_tensors(12, 3, 100, dtype="float64"), catches=("fp64-narrowed",),
         tolerance=FP64),
    Case("bfloat16", "bfloat16 storage (GPU only: the interpreter mishandles bfloat16)",
         _pair_tensors(13, 8, 1000, dtype="bfloat16"), catches=("wrong-dtype",), tolerance=BF16,
         gpu_only=True),
    Case("many rows on the GPU", "4096 rows of 781: a full launch (GPU only, too slow to "
         "interpret)", _pair_tensors(14, 4096, 781), catches=("dot-over-tensor",), gpu_only=True),
)

# ---------------------------------------------------------------------------------------------
# Part 3: softmax_gradient(x, dy), the gradient through SoftmaxFunction's .backward().


def _scores(seed: int, rows: int, cols: int, *, dtype: str = "float32",
            dy_layout: str = "contiguous", transform=None):
    def make():
        np = _np()
        rng = np.random.default_rng(seed)
        x = 2.0 * rng.standard_normal((rows, cols))
        if transform is not None:
            x = transform(x)
        dy = rng.standard_normal((rows, cols)) if dy_layout != "expanded" else \
            np.ones((rows, cols))
        return (TensorSpec(x, dtype=dtype), TensorSpec(dy, dtype=dtype, layout=dy_layout))

    return make


def _rows_apart(x):
    """Rows near +1000, -1000 and 0: each is safe only when shifted by its own maximum."""
    return x + _np().array([1000.0, -1000.0, 0.0])[:, None]


def _forward_with(forward):
    """The right backward at the y a wrong forward kernel saved."""
    return lambda x, dy: reference_backward(forward(x), dy)


def _zero_padded_forward(x):
    """Lesson 08's zero padding: padded lanes read 0 and add exp(0 - max) to the sum."""
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    pad = (1 << max(0, (x.shape[-1] - 1).bit_length())) - x.shape[-1]
    with np.errstate(all="ignore"):
        m = np.maximum(x.max(axis=-1, keepdims=True), 0.0 if pad else -np.inf)
        e = np.exp(x - m)
        return e / (e.sum(axis=-1, keepdims=True) + pad * np.exp(-m))


def _unshifted_forward(x):
    np = _np()
    with np.errstate(all="ignore"):
        e = np.exp(np.asarray(x, dtype=np.float64))
        return e / e.sum(axis=-1, keepdims=True)


AUTOGRAD_BUGS = (
    Bug("saved-x", "backward used the scores x where the formula needs the probabilities y: "
        "save the forward's output, ctx.save_for_backward(y), not its input",
        same_as(_with_x_as_y, **_LOOSE)),
) + tuple(Bug(bug.key, bug.cause, same_as(_on_softmax(formula), **_LOOSE)) for bug, formula in
          zip(FORMULA_BUGS, (_no_y_factor, _dot_without_y, _diagonal_only, _flipped_sign))) + (
    Bug("forward", "the forward pass is wrong, so the saved y is too: compare "
        "SoftmaxFunction.apply(x) with torch.softmax(x, dim=-1), and check lesson 08's "
        "points (padding with -inf, subtracting the maximum)",
        any_of(same_as(_forward_with(_zero_padded_forward), **_LOOSE),
               same_as(_forward_with(_unshifted_forward), **_LOOSE))),
    Bug("row-stride", "backward receives dy as autograd hands it over, here a slice of a wider "
        "tensor: pass its row stride, dy.stride(0), to the kernel",
        same_as(rows_at_n_cols(reference_gradient, (1,)), **_LOOSE)),
    Bug("dy-not-contiguous", "y.sum().backward() hands backward an expanded dy whose strides "
        "are (0, 0): the kernel's loads at offsets 0, 1, 2, ... read past its one stored value. "
        "Make dy contiguous first when dy.stride(1) != 1", error="past the end of dy"),
    # the common wording points at an output allocation; here the dtype comes from the leaf
    # softmax_gradient makes and from what it returns
    Bug("wrong-dtype", "the gradient came back in another dtype than x's: autograd gives the "
        "leaf's .grad in the leaf's own dtype, so the copy that requires grad must keep x's "
        "dtype (x.detach().clone(), no .float()), and the gradient is returned as it is"),
) + KERNEL_BUGS

AUTOGRAD_CASES = (
    Case("worked row", "x = [1, 2, 3], dy = [1, -1, 2]: the lesson's row, through .backward()",
         lambda: (TensorSpec(_np().array([[1.0, 2.0, 3.0]])),
                  TensorSpec(_np().array([[1.0, -1.0, 2.0]]))), catches=("saved-x",)),
    Case("five rows of 17", "several rows, a width that is not a power of two",
         _scores(1, 5, 17), catches=("saved-x", "forward")),
    Case("large scores", "scores near 1000: the forward kernel must subtract the maximum",
         _scores(2, 3, 60, transform=lambda x: 50.0 * x + 1000.0), catches=("forward",)),
    Case("rows far apart", "scores near +1000, -1000 and 0 in three rows: the forward kernel "
         "must shift each row by its own maximum; another row's makes exp overflow or "
         "underflow the whole row", _scores(9, 3, 17, transform=_rows_apart),
         catches=()),
    Case("all-negative scores", "scores in [-9, -1]: the forward's padded lanes must read -inf",
         _scores(3, 3, 100, transform=lambda x: -5.0 - 4.0 * _np().tanh(x)),
         catches=("forward",)),
    Case("dy a column slice", "the upstream gradient is a slice of a wider tensor",
         _scores(4, 4, 30, dy_layout="column-slice"), catches=("row-stride",)),
    Case("float64", "float64 forward and backward, as torch.autograd.gradcheck runs them",
         _scores(5, 3, 20, dtype="float64"), catches=("fp64-narrowed",), tolerance=FP64),
    Case("float64, wide", "float64, width 300 in a block of 512",
         _scores(6, 2, 300, dtype="float64"), catches=("fp64-narrowed",), tolerance=FP64),
    Case("float16", "float16 storage, FP32 arithmetic in both kernels",
         _scores(7, 4, 200, dtype="float16"), catches=("wrong-dtype",), tolerance=FP16),
    Case("dy from y.sum()", "the gradient y.sum().backward() sends: ones, expanded, strides "
         "(0, 0), as the lesson's own example hands it to backward",
         _scores(8, 3, 40, dy_layout="expanded"), catches=("dy-not-contiguous",)),
)

PYTHON_HINTS = (
    "Two steps: one reduction over the row, then one elementwise pass.",
    "The reduction is the dot product dot = sum(a * b for a, b in zip(y, dy)).",
    "Return [a * (b - dot) for a, b in zip(y, dy)]: a new list, with y and dy left as they were.",
)

TRITON_HINTS = (
    "Start from your lesson 08 kernel: row = tl.program_id(0), offsets = tl.arange(0, BLOCK), "
    "mask = offsets < n_cols.",
    "Each tensor starts its row at its own stride: y_ptr + row * y_row_stride, dy_ptr + row * "
    "dy_row_stride, dx_ptr + row * dx_row_stride.",
    "Load y and dy with mask=mask, other=0.0: 0 is the identity of the sum. Then, if y.dtype != "
    "tl.float64, convert both to tl.float32.",
    "dot = tl.sum(y * dy, axis=0); store y * (dy - dot) with the mask. In the launcher: dx = "
    "torch.empty_like(y), BLOCK = triton.next_power_of_2(n_cols), grid (n_rows,).",
)

AUTOGRAD_HINTS = (
    "softmax_forward_kernel is your lesson 08 kernel with the float64 exception of the backward "
    "kernel: if x.dtype != tl.float64, convert to tl.float32.",
    "forward: allocate y, launch one program per row, ctx.save_for_backward(y), return y.",
    "backward: (y,) = ctx.saved_tensors; make dy contiguous if dy.stride(1) != 1; return "
    "softmax_backward_triton(y, dy).",
    "softmax_gradient: leaf = x.detach().clone().requires_grad_(True); "
    "SoftmaxFunction.apply(leaf).backward(dy); return leaf.grad.",
)

def _in_row_program(loops: dict, args: tuple) -> str:
    return f"in the program of row {loops['program'][0]}" if "program" in loops else ""


# Lesson 11's kernel, one program per row: the two rows as loaded (in FP32), their dot
# product, the gradient.
TRITON_STEPS = Steps(("y", "dy", "dot", "dx"), _in_row_program,
                     function="softmax_backward_kernel")
# The autograd part's forward kernel is lesson 08's softmax, under lesson 08's names: a wrong
# forward pass (padding with 0, no maximum) is found there; a right one says the steps match
FORWARD_STEPS = Steps(("x", "maximum", "numerator", "denominator", "y"), _in_row_program,
                      function="softmax_forward_kernel")

EXERCISE = Exercise(
    name="softmax_backward",
    title="The softmax backward pass: derive it, write the kernel, wire it to autograd",
    lessons=("11-softmax-backward.md",),
    parts=(
        Part("python", "softmax_backward_python: one row in plain Python", lesson="11",
             function="softmax_backward_python", reference=reference_backward,
             cases=PYTHON_CASES, tolerance=Tolerance(atol=1e-12, rtol=1e-9), bugs=PYTHON_BUGS,
             returns="list", hints=PYTHON_HINTS, plain_python=True),
        Part("triton", "softmax_backward_triton: one program per row", lesson="11",
             function="softmax_backward_triton", reference=reference_backward,
             cases=TRITON_CASES, tolerance=FP32, bugs=TRITON_BUGS, returns="tensor",
             needs_kernels=True,
             kernel_ops=(("mul", "sum"),),
             torch_answers=("_softmax_backward_data",),
             hints=TRITON_HINTS, steps=TRITON_STEPS),
        Part("autograd", "softmax_gradient: SoftmaxFunction's gradient through .backward()",
             lesson="11", function="softmax_gradient", reference=reference_gradient,
             cases=AUTOGRAD_CASES, tolerance=FP32, bugs=AUTOGRAD_BUGS, returns="tensor",
             needs_kernels=True,
             kernel_ops=(("mul", "sum"),),
             hints=AUTOGRAD_HINTS, steps=FORWARD_STEPS),
    ),
)
