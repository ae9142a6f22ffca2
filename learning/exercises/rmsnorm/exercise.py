"""The RMSNorm exercise (lessons 05 and 09): its cases, the bugs they catch, and the references.

y[j] = x[j] / sqrt(mean over k of x[k]**2 + eps) * w[j], row by row. Lesson 05 requires the
Python version to survive rows whose squares overflow a double (values near 1e200): it divides
the row by its largest magnitude first, as softmax subtracts its maximum. Lesson 09's kernel
works in FP32 on activations and does not rescale; its cases stay in FP32's range.
"""

from __future__ import annotations

import math
from functools import partial

from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import any_of, raises_like, rounded_output, rows_at_n_cols, same_as
from learning.grader.tensors import TensorSpec

DEFAULT_EPS = 1e-6


def _np():
    import numpy as np

    return np


# ---------------------------------------------------------------------------------------------
# References: float64, run only in the grader's process.


def reference_rows(x, weight, eps):
    """RMSNorm over the last axis in float64, scaled by each row's largest |x| so that no
    square overflows; a row of zeros gives zeros."""
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    scale = np.abs(x).max(axis=-1, keepdims=True)  # (rows, 1)
    safe = np.where(scale > 0, scale, 1.0)
    z = x / safe  # every |z| <= 1
    with np.errstate(over="ignore"):
        tail = eps / safe / safe  # eps in the scaled units; inf for a tiny row, harmlessly
    rms = np.sqrt((z * z).mean(axis=-1, keepdims=True) + tail)
    return np.where(scale > 0, z / rms, 0.0) * w


def _plain(x, w, eps, *, mean=True, eps_inside=True, weight=True, root=True, ddof=0,
           centre=False, eps_scaled=True, dtype="float64"):
    """The formula with one step changed, to reproduce a known mistake.

    Worked on the row divided by its largest |x| (s), as the reference is, so that a mistake is
    recognised on rows near 1e200 too: x / sqrt(ms + eps) = z / sqrt(ms_z + eps / s**2).
    """
    np = _np()
    x = np.asarray(x, dtype=dtype)
    w = np.asarray(w, dtype=dtype)
    with np.errstate(all="ignore"):
        if centre:
            x = x - x.mean(axis=-1, keepdims=True)
        if not root:  # x / (ms + eps) does not scale the same way: plain arithmetic
            ms = (x * x).sum(axis=-1, keepdims=True) / (x.shape[-1] - ddof)
            y = x / (ms + eps)
            return y * w if weight else y
        s = np.abs(x).max(axis=-1, keepdims=True)
        s = np.where(s > 0, s, 1.0).astype(dtype)
        z = x / s
        squares = (z * z).sum(axis=-1, keepdims=True)
        ms = squares / (x.shape[-1] - ddof) if mean else squares
        tail = eps / s / s if eps_scaled else eps
        y = z / np.sqrt(ms + tail) if eps_inside else z / (np.sqrt(ms) + eps / s)
        return y * w if weight else y


def _eps_outside(x, w, eps, dtype="float64"):
    return _plain(x, w, eps, eps_inside=False, dtype=dtype)


def _sum_not_mean(x, w, eps, dtype="float64"):
    return _plain(x, w, eps, mean=False, dtype=dtype)


def _no_weight(x, w, eps, dtype="float64"):
    return _plain(x, w, eps, weight=False, dtype=dtype)


def _no_sqrt(x, w, eps):
    return _plain(x, w, eps, root=False)


def _n_minus_one(x, w, eps):
    return _plain(x, w, eps, ddof=1)


def _layer_norm(x, w, eps):
    return _plain(x, w, eps, centre=True)


def _unscaled(x, w, eps):
    """x * x in float64 without rescaling: inf for values near 1e200, so the output is 0."""
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        ms = (x * x).mean(axis=-1, keepdims=True)
        return x / np.sqrt(ms + eps) * np.asarray(w, dtype=np.float64)


def _mean_squared(x, w, eps):
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    m = x.mean(axis=-1, keepdims=True)
    return x / np.sqrt(m * m + eps) * np.asarray(w, dtype=np.float64)


def _weight_first(x, w, eps):
    np = _np()
    v = np.asarray(x, dtype=np.float64) * np.asarray(w, dtype=np.float64)
    return v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + eps)


def _eps_not_scaled(x, w, eps):
    return _plain(x, w, eps, eps_scaled=False)


def _no_eps(x, w, eps, dtype="float64"):
    return _plain(x, w, 0.0, dtype=dtype)


def _no_eps_zero_branch(x, w, eps):
    """No eps, and a row of zeros given zeros by a branch of its own (as the lesson has code
    that rescales do): only rows with a nonzero value show the missing eps."""
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    zero = (x == 0).all(axis=-1, keepdims=True)
    return np.where(zero, 0.0, _no_eps(np.where(zero, 1.0, x), w, eps))


def _signed_scale(x, w, eps):
    """Scaled by max(x) instead of max(|x|): a row whose largest value is negative comes out
    negated (a positive scale of any size leaves RMSNorm unchanged)."""
    np = _np()
    top = np.asarray(x, dtype=np.float64).max(axis=-1, keepdims=True)
    return np.where(top < 0, -1.0, 1.0) * reference_rows(x, w, eps)


def _signed_largest(x, w, eps):
    """Scaled by the value of largest magnitude with its sign, max(values, key=abs): a row
    whose largest magnitude is negative comes out negated."""
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    top = np.take_along_axis(x, np.abs(x).argmax(axis=-1)[..., None], axis=-1)
    return np.where(top < 0, -1.0, 1.0) * reference_rows(x, w, eps)


# The mistakes that raise, in plain Python as a learner writes them: a learner's exception names
# one only when its replay raises the same exception on the same row.
def _python_rms(values, weight, eps, ddof=0, with_eps=True, rescale=True, eps_squared=False):
    largest = max(abs(v) for v in values) if rescale else 1.0
    if rescale and largest == 0.0:
        return [0.0 for _ in values]
    scaled = [v / largest for v in values]
    mean_square = sum(s * s for s in scaled) / (len(scaled) - ddof)
    tail = eps / (largest * largest) if eps_squared else eps / largest / largest
    rms = math.sqrt(mean_square + (tail if with_eps else 0.0))
    return [s / rms * w for s, w in zip(scaled, weight)]


# ---------------------------------------------------------------------------------------------
# Lesson 05: rmsnorm_python(values, weight, eps) on lists of floats.

PYTHON_BUGS = (
    Bug("square-overflow", "x**2 overflows a double past about 1.3e154, so the mean square is "
        "inf and every output 0 (or OverflowError): divide the row by its largest |x| first",
        same_as(_unscaled), error="OverflowError", changes="mean_square"),
    Bug("eps-outside", "eps is added outside the square root, sqrt(mean_square) + eps (the "
        "RMSNorm paper's convention); this course grades torch.nn.RMSNorm's, "
        "sqrt(mean_square + eps)", same_as(_eps_outside)),
    Bug("sum-not-mean", "the squares are summed but not averaged: divide their sum by the "
        "number of values, n", same_as(_sum_not_mean)),
    Bug("n-minus-one", "the mean of the squares divides by n, not n - 1: RMSNorm is not a "
        "sample variance", same_as(_n_minus_one), raises=raises_like(partial(_python_rms,
                                                                               ddof=1))),
    Bug("no-weight", "each output must be multiplied by its weight, weight[i]",
        same_as(_no_weight)),
    Bug("no-sqrt", "divide by the root mean square, sqrt(mean_square + eps), not by the mean "
        "square itself", same_as(_no_sqrt)),
    Bug("subtracts-mean", "RMSNorm does not subtract the mean (that is LayerNorm): square the "
        "values as they are", same_as(_layer_norm)),
    Bug("mean-squared", "square each value, then average: mean(x**2), not mean(x)**2",
        same_as(_mean_squared)),
    Bug("weight-inside", "multiply by the weight after normalising, not before",
        same_as(_weight_first)),
    Bug("eps-not-scaled", "after dividing the row by its largest |x|, divide eps by the square "
        "of that value too, one division at a time: sqrt(mean(z**2) + eps / largest / "
        "largest) (largest**2 itself overflows past about 1.3e154, and underflows to 0 "
        "below about 1e-162)", same_as(_eps_not_scaled)),
    Bug("scale-sign", "scale by the largest magnitude, max(abs(v)), which is never negative: "
        "a negative scale (max(values), or max(values, key=abs) where the largest magnitude "
        "is negative) flips the sign of every output",
        any_of(same_as(_signed_scale), same_as(_signed_largest))),
    Bug("no-eps", "eps is not under the square root (missing, or added elsewhere): add it to "
        "the mean square, under the root; for a row "
        "of zeros it is what keeps the division defined, and the outputs are 0 (a row divided "
        "by its largest |x| needs its own branch when that value is 0)",
        any_of(same_as(_no_eps), same_as(_no_eps_zero_branch)),
        raises=raises_like(partial(_python_rms, with_eps=False, rescale=False),
                           partial(_python_rms, with_eps=False))),
    Bug("tiny-row", "for a tiny row the squares underflow to 0 and only eps keeps the "
        "division defined: keep eps under the root, and if you rescaled, divide eps by the "
        "largest value twice (eps / largest / largest), since largest * largest underflows to 0",
        raises=raises_like(partial(_python_rms, eps_squared=True))),
    Bug("wrong-length", "every input needs exactly one output"),
    Bug("rounded", "the outputs are rounded: return the full-precision values", rounded_output,
        keeps=("largest", "scaled", "mean_square", "rms")),
)


def _row(values, weight, eps=DEFAULT_EPS):
    return lambda: ([float(v) for v in values], [float(w) for w in weight], eps)


def _seeded(seed: int, n: int, scale: float = 2.0, shift: float = 0.0, eps=DEFAULT_EPS):
    def make():
        import random

        rng = random.Random(seed)
        values = [round(rng.uniform(-scale, scale) + shift, 6) for _ in range(n)]
        weight = [round(rng.uniform(0.5, 1.5), 4) for _ in range(n)]
        return (values, weight, eps)

    return make


PYTHON_CASES = (
    Case("worked example", "[1, 2, 2, 4] with weight [1, 0.5, 2, 1]: the row lesson 05 "
         "works by hand", _row([1, 2, 2, 4], [1, 0.5, 2, 1]),
         catches=("sum-not-mean", "no-sqrt", "mean-squared", "no-weight", "rounded")),
    Case("eps inside the root", "small values, eps = 1e-4: sqrt(mean_square + eps) and "
         "sqrt(mean_square) + eps differ by far", _row([0.001, -0.002, 0.003], [1, 1, 1], 1e-4),
         catches=("eps-outside",)),
    Case("zero row", "[0, 0, 0, 0]: eps keeps the division defined, and the outputs are 0",
         _row([0, 0, 0, 0], [1, 2, 3, 4]), catches=("no-eps",)),
    Case("mean, not sum", "twelve values: the mean square divides the sum by 12",
         _seeded(1, 12), catches=("sum-not-mean",)),
    Case("weight", "weights of 2, -1, 0.5, 3 and 0: each output is scaled by its own weight",
         _row([0.5, -1.5, 2.5, 1.0, 3.0], [2, -1, 0.5, 3, 0]), catches=("no-weight",)),
    Case("not centred", "[3, 4, 5, 6]: RMSNorm keeps the mean in, unlike LayerNorm",
         _row([3, 4, 5, 6], [1, 1, 1, 1]), catches=("subtracts-mean",)),
    Case("single value", "[-3] with weight [2]: one value normalises to about its sign times "
         "its weight", _row([-3], [2]), catches=("n-minus-one",)),
    Case("all negative", "[-1, -2, -3, -4]: the signs survive, since the squares are positive",
         _row([-1, -2, -3, -4], [1, 1, 1, 1]), catches=("scale-sign",)),
    Case("huge values", "values near 1e200: their squares overflow a double unless the row is "
         "divided by its largest |x| first", _row([1e200, -2e200, 3e200, 5e200], [1, 2, 1, 2]),
         catches=("square-overflow",)),
    Case("tiny values", "values near 1e-170: the squares underflow to 0, eps decides, and the "
         "outputs are tiny but defined", _row([1e-170, -3e-170, 2e-170], [1, 1, 1]),
         catches=("tiny-row",)),
    Case("long row", "300 values around 5: every value gets its own output, in order",
         _seeded(2, 300, scale=3.0, shift=5.0), catches=("wrong-length",)),
)

# ---------------------------------------------------------------------------------------------
# Lesson 09: rmsnorm_triton(x, weight, eps) on a 2-D tensor, one program per row.


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _mean_over_block(x, w, eps):
    np = _np()
    x = np.asarray(x, dtype=np.float32)
    block = _next_power_of_two(x.shape[-1])
    ms = (x * x).sum(axis=-1, keepdims=True) / block
    return x / np.sqrt(ms + np.float32(eps)) * np.asarray(w, dtype=np.float32)


def _minus_inf_padding(got, args, want) -> bool:
    """Padding loaded as -inf (softmax's identity): (-inf)**2 = inf, so every output is 0."""
    np = _np()
    x = args[0]
    padded = x.shape[-1] != _next_power_of_two(x.shape[-1])
    return bool(padded and got.shape == want.shape and np.all(got == 0)
                and np.any(want != 0))


def _fp16_squares(x, w, eps):
    """Squares summed in float16 (no FP32 conversion): past 65504 the sum is inf, rsqrt gives
    0, and the whole row comes out 0."""
    np = _np()
    x16 = np.asarray(x, dtype=np.float16)
    with np.errstate(all="ignore"):
        total = (x16 * x16).sum(axis=-1, keepdims=True, dtype=np.float16)
    return np.where(np.isinf(total), 0.0, reference_rows(x, w, eps))


def _fp32(reproduce):
    return lambda x, w, eps: reproduce(x, w, eps, dtype="float32")


FP32 = Tolerance(atol=1e-6, rtol=3e-5)
FP16 = Tolerance(atol=1e-3, rtol=1e-2)
BF16 = Tolerance(atol=4e-3, rtol=2e-2)
_LOOSE = {"atol": 2e-5, "rtol": 1e-3}  # buggy formulas reproduced in NumPy, not in Triton

TRITON_BUGS = (
    Bug("minus-inf-padding", "the padded lanes were loaded with -inf, softmax's padding: "
        "(-inf)**2 = inf makes the mean square inf and every output 0. The sum of squares "
        "needs other=0.0", _minus_inf_padding),
    Bug("mean-over-block", "the sum of squares was divided by BLOCK, which counts the padded "
        "lanes: divide by n_cols", same_as(_mean_over_block, **_LOOSE)),
    Bug("eps-outside", "eps is added outside the square root (the RMSNorm paper's convention); "
        "this course grades torch.nn.RMSNorm's: rsqrt(mean_square + eps)",
        same_as(_fp32(_eps_outside), **_LOOSE)),
    Bug("sum-not-mean", "the sum of squares must be divided by n_cols to give the mean square",
        same_as(_fp32(_sum_not_mean), **_LOOSE)),
    Bug("no-weight", "multiply each output by its weight: load weight_ptr + offsets (the same "
        "columns for every row) and multiply", same_as(_fp32(_no_weight), **_LOOSE)),
    Bug("weight-row-offset", "the weight is one row shared by every row of x: load it at "
        "weight_ptr + offsets, without the row's offset",
        # Every lane of a later row's load lies past the weight; a mask off by one, or a
        # wrong n_cols, leaves only some lanes past it.
        error=r"\b(\d+) of \1 active lanes .*past the end of weight"),
    Bug("row-stride", "a row-strided view (x[::2], a column slice) starts row r at "
        "r * x.stride(0), which is larger than n_cols: address row r with the row stride "
        "the launcher passes (x.stride(0)), not with n_cols or with another tensor's stride "
        "(a new output's is n_cols)",
        same_as(rows_at_n_cols(reference_rows), **_LOOSE)),
    Bug("no-eps", "eps is not under the square root (missing, or added elsewhere): a row of "
        "zeros needs rsqrt(mean_square + eps), or 0 * rsqrt(0) gives NaN",
        same_as(_fp32(_no_eps), **_LOOSE)),
    Bug("fp16-squares", "float16 squares overflow past 65504 (|x| > 256): convert the loaded "
        "values to FP32 (x.to(tl.float32)) before squaring",
        same_as(_fp16_squares, atol=1e-3, rtol=1e-2)),
)


def _tensor(seed: int, rows: int, cols: int, *, dtype: str = "float32",
            layout: str = "contiguous", scale: float = 1.0, eps: float = DEFAULT_EPS,
            transform=None):
    """(x, weight, eps): x standard normal times ``scale``; weight in [0.5, 1.5]."""

    def make():
        np = _np()
        rng = np.random.default_rng(seed)
        values = scale * rng.standard_normal((rows, cols))
        if transform is not None:
            values = transform(values)
        weight = rng.uniform(0.5, 1.5, cols)
        return (TensorSpec(values, dtype=dtype, layout=layout), TensorSpec(weight, dtype=dtype),
                eps)

    return make


def _second_row_zero(x):
    x = x.copy()
    x[1, :] = 0.0
    return x


def _large_magnitudes(x):
    """|x| between 200 and 1000: squares far past float16's largest value, 65504."""
    np = _np()
    return np.sign(x) * (200.0 + 800.0 * np.abs(np.tanh(x)))


TRITON_CASES = (
    Case("width 3", "one row [1, 2, 3] in a block of 4: the padded lane must add 0 to the sum "
         "and must not count in the mean",
         lambda: (TensorSpec(_np().array([[1.0, 2.0, 3.0]])),
                  TensorSpec(_np().array([0.5, 1.0, 2.0])), DEFAULT_EPS),
         catches=("mean-over-block",)),
    Case("width 17, five rows", "a width that is not a power of two, over several rows",
         _tensor(1, 5, 17), catches=("weight-row-offset", "mean-over-block")),
    Case("eps inside the root", "values near 1e-3 with eps = 1e-5: eps must be added under "
         "the square root", _tensor(2, 3, 100, scale=1e-3, eps=1e-5), catches=("eps-outside",)),
    Case("zero row", "a row of zeros between two others: eps keeps it finite, its outputs are 0",
         _tensor(3, 3, 64, transform=_second_row_zero), catches=("no-eps",)),
    Case("many rows", "37 rows of 33: each program must find its own row",
         _tensor(4, 37, 33), catches=("weight-row-offset", "grid-too-small")),
    Case("single column", "width 1: each output is about the sign of x times the weight",
         _tensor(5, 5, 1), catches=()),
    Case("row-strided view", "x[::2] of a taller tensor: the row stride is 2 * n_cols",
         _tensor(6, 6, 50, layout="row-strided"), catches=("row-stride",)),
    Case("column slice", "x[:, :40] of a wider tensor: the row stride is not n_cols",
         _tensor(7, 4, 40, layout="column-slice"), catches=("row-stride",)),
    Case("float16", "float16 storage, FP32 arithmetic, float16 output",
         _tensor(8, 4, 300, dtype="float16"), catches=("wrong-dtype",), tolerance=FP16),
    Case("float16, large values", "|x| from 200 to 1000 in float16: the squares only fit in "
         "FP32", _tensor(9, 3, 256, dtype="float16", transform=_large_magnitudes),
         catches=("fp16-squares",), tolerance=FP16),
    Case("wide row", "width 4097, just past 4096: BLOCK must be the next power of two, 8192",
         _tensor(10, 2, 4097), catches=("mean-over-block",)),
    Case("wider row", "width 9000, past 8192: a BLOCK fixed at 8192, enough for every row "
         "above, is not enough", _tensor(13, 1, 9000), catches=("block-too-small",)),
    Case("hundreds of rows", "257 rows of 3: a grid of a fixed number of programs (256, or a "
         "GPU's 132 multiprocessors) leaves rows unwritten", _tensor(14, 257, 3),
         catches=("grid-too-small",)),
    Case("bfloat16", "bfloat16 storage (GPU only: the interpreter mishandles bfloat16)",
         _tensor(11, 8, 1000, dtype="bfloat16"), catches=("wrong-dtype",), tolerance=BF16,
         gpu_only=True),
    Case("many rows on the GPU", "4096 rows of 781: a full launch (GPU only, too slow to "
         "interpret)", _tensor(12, 4096, 781), catches=("grid-too-small",), gpu_only=True),
)

PYTHON_HINTS = (
    "largest = max(abs(v) for v in values); if it is 0, the row is all zeros and so is the "
    "output.",
    "scaled = [v / largest for v in values]; mean_square = the sum of their squares divided "
    "by len(values), the number of values.",
    "rms = math.sqrt(mean_square + eps / largest / largest): eps under the root, scaled like "
    "the row.",
    "output = [s / rms * w for s, w in zip(scaled, weight)], a new list.",
)

TRITON_HINTS = (
    "row = tl.program_id(0); offsets = tl.arange(0, BLOCK); mask = offsets < n_cols; row r "
    "starts at input_ptr + row * input_row_stride.",
    "Load with mask=mask, other=0.0 (the identity of a sum, not softmax's -inf), then "
    ".to(tl.float32) before squaring.",
    "mean_square = tl.sum(x * x, axis=0) / n_cols (never BLOCK); inverse_rms = "
    "tl.rsqrt(mean_square + eps).",
    "w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32); store "
    "x * inverse_rms * w at output_ptr + row * output_row_stride + offsets with the mask; "
    "launch grid (n_rows,) with BLOCK = triton.next_power_of_2(n_cols).",
)

# The steps of lesson 05's table, as the stub asks for them (the zero row returns early).
# The lesson's rms is of the scaled row; the row's own RMS, largest times it, is as right (the
# output divides the row by it instead of the scaled row by rms)
PYTHON_STEPS = Steps(("largest", "scaled", "mean_square", "rms", "output"),
                     also_right={"rms": lambda held: held["rms"] * held["largest"]})


def _in_row_program(loops: dict, args: tuple) -> str:
    return f"in the program of row {loops['program'][0]}" if "program" in loops else ""


# Lesson 09's kernel, one program per row (x: the row as loaded, in FP32; w: the weights).
TRITON_STEPS = Steps(("x", "mean_square", "inverse_rms", "w", "output"), _in_row_program,
                     function="rmsnorm_kernel")

EXERCISE = Exercise(
    name="rmsnorm",
    title="RMSNorm: derive it, then write the kernel",
    lessons=("05-rmsnorm.md", "09-rmsnorm-triton.md"),
    parts=(
        Part("python", "rmsnorm_python: one row in plain Python", lesson="05",
             function="rmsnorm_python", reference=reference_rows, cases=PYTHON_CASES,
             tolerance=Tolerance(atol=1e-12, rtol=1e-9), bugs=PYTHON_BUGS, returns="list",
             hints=PYTHON_HINTS, steps=PYTHON_STEPS, plain_python=True),
        Part("triton", "rmsnorm_triton: one program per row", lesson="09",
             function="rmsnorm_triton", reference=reference_rows, cases=TRITON_CASES,
             tolerance=FP32, bugs=TRITON_BUGS, returns="tensor", needs_kernels=True,
             kernel_ops=(("sum", "mul"),),
             torch_answers=("rms_norm", "layer_norm", "rsqrt", "rsqrt_", "sqrt", "sqrt_",
                            "norm", "vector_norm", "linalg_vector_norm", "mean", "var"),
             hints=TRITON_HINTS, steps=TRITON_STEPS),
    ),
)
