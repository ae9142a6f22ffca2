"""The softmax exercise (lessons 04 and 08): its cases, the bugs they catch, and the references."""

from __future__ import annotations

import math
from functools import partial

from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import (
    any_of,
    raises_like,
    rounded_output,
    rows_at_n_cols,
    same_as,
)
from learning.grader.tensors import TensorSpec

# ---------------------------------------------------------------------------------------------
# References: float64, run only in the grader's process.


def reference_rows(x):
    """Softmax over the last axis in float64; a row of only -inf gives NaN, as torch does."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        shifted = x - x.max(axis=-1, keepdims=True)
        numerator = np.exp(shifted)
        return numerator / numerator.sum(axis=-1, keepdims=True)


def _np():
    import numpy as np

    return np


# ---------------------------------------------------------------------------------------------
# Lesson 04: softmax_python(values) on a list of floats.


def _exp_only(values):
    return _np().exp(values)


def _no_max_shift(values):
    e = _np().exp(values)
    return e / e.sum()


def _not_divided(values):
    return _np().exp(_np().asarray(values) - max(values))


def _divided_by_shifted_sum(values):
    shifted = _np().asarray(values) - max(values)
    return _np().exp(shifted) / shifted.sum()


def _shifted_by(choose):
    def reproduce(values):
        np = _np()
        e = np.exp(np.asarray(values, dtype=np.float64) - choose(values))
        return e / e.sum()

    return reproduce


# Shifts other than the maximum that learners pick.
_SHIFTS = (lambda v: v[0], lambda v: sum(v) / len(v), min, lambda v: v[-1])


# The same mistakes in plain Python (math.exp raises where NumPy gives inf): a learner's error
# names one of them only when its replay raises the same exception on the same row.
def _python_softmax(values, shift=max, summed_shifted=False):
    top = shift(values) if shift else 0.0
    shifted = [v - top for v in values]
    numerator = [math.exp(s) for s in shifted]
    denominator = sum(shifted) if summed_shifted else sum(numerator)
    return [n / denominator for n in numerator]


def _python_no_shift(values):
    return _python_softmax(values, shift=None)


def _python_summed_shifted(values):
    return _python_softmax(values, summed_shifted=True)


PYTHON_BUGS = (
    Bug("exp-only", "exponentials alone are not probabilities: divide each one by the sum of "
        "all of them", same_as(_exp_only), hint=4),
    Bug("not-divided-by-sum", "the outputs are not divided by the sum of the exponentials "
        "(dividing by their maximum, which is 1, changes nothing)", same_as(_not_divided), hint=4),
    Bug("summed-shifted", "the denominator adds up the shifted inputs, not their exponentials: "
        "denominator = sum(numerator)", same_as(_divided_by_shifted_sum), hint=3,
        raises=raises_like(_python_summed_shifted)),
    Bug("rounded", "the outputs are rounded: return the full-precision values", rounded_output,
        hint=4, keeps=("maximum", "shifted", "numerator", "denominator")),
    Bug("no-max-shift", "math.exp overflows past about 709 (and every term underflows to 0 "
        "below about -745): subtract the row's maximum before exponentiating",
        same_as(_no_max_shift), hint=2, raises=raises_like(_python_no_shift)),
    Bug("wrong-shift", "the shift must be the row's maximum: shifting by another value (the "
        "first element, the mean, the minimum) still lets exp overflow",
        any_of(*(same_as(_shifted_by(shift)) for shift in _SHIFTS)), hint=1,
        raises=raises_like(*(partial(_python_softmax, shift=shift) for shift in _SHIFTS))),
    Bug("wrong-length", "every input needs exactly one output", hint=4),
)


def _row(*values):
    return lambda: ([float(v) for v in values],)


def _seeded_row(seed: int, n: int, scale: float = 3.0):
    def make():
        import random

        rng = random.Random(seed)
        return ([round(rng.uniform(-scale, scale), 6) for _ in range(n)],)

    return make


PYTHON_CASES = (
    Case("worked example", "[1, 2, 3]: the values the lesson computes by hand",
         _row(1, 2, 3), catches=("exp-only", "not-divided-by-sum", "summed-shifted")),
    Case("overflow", "[1000, 1000]: math.exp(1000) overflows, so the maximum must be "
         "subtracted first", _row(1000, 1000), catches=("no-max-shift",)),
    Case("underflow", "[-1000, -1000]: every exp underflows to 0 and 0/0 fails, unless the "
         "maximum is subtracted", _row(-1000, -1000), catches=("no-max-shift",)),
    Case("single element", "[42]: one value is certain, so its probability is 1",
         _row(42), catches=("wrong-length",)),
    Case("shifted row", "[1001, 1002, 1003]: adding a constant changes nothing, so this is "
         "the worked example again", _row(1001, 1002, 1003), catches=("no-max-shift",)),
    Case("wide spread", "[-1000, 0, 1000]: only a shift by the maximum keeps every exponent "
         "at or below 0", _row(-1000, 0, 1000), catches=("wrong-shift",)),
    Case("probability sum", "nine mixed values: the outputs are probabilities and sum to one",
         _seeded_row(4, 9), catches=("exp-only", "not-divided-by-sum"), checks=("sums-to-one",)),
    Case("all negative", "[-3, -2, -1]: a negative row is as valid as a positive one",
         _row(-3, -2, -1), catches=("exp-only",)),
    Case("equal values", "[0.5, 0.5, 0.5, 0.5]: equal scores share the probability equally",
         _row(0.5, 0.5, 0.5, 0.5), catches=("summed-shifted",)),
    Case("vanishing probability", "[0, -800]: exp(-800) is below the smallest double; its "
         "probability is 0, not an error", _row(0, -800), catches=()),
    Case("long row", "200 values: every element gets its own output, in order",
         _seeded_row(11, 200, scale=20.0), catches=("wrong-length",)),
)

# ---------------------------------------------------------------------------------------------
# Lesson 08: softmax_triton(x) on a 2-D tensor, one program per row.


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _zero_padded(x):
    """What a kernel computes when its padded lanes read 0 (other=0, or no other at all)."""
    np = _np()
    x = np.asarray(x, dtype=np.float32)
    pad = _next_power_of_two(x.shape[-1]) - x.shape[-1]
    with np.errstate(all="ignore"):
        m = np.maximum(x.max(axis=-1, keepdims=True), 0.0 if pad else -np.inf)
        e = np.exp(x - m)
        return e / (e.sum(axis=-1, keepdims=True) + pad * np.exp(-m))


def _max_over_padding(x):
    """Maximum over zero-padded lanes, but a correctly masked sum, in FP32 like the kernel."""
    np = _np()
    x = np.asarray(x, dtype=np.float32)
    pad = _next_power_of_two(x.shape[-1]) - x.shape[-1]
    with np.errstate(all="ignore"):
        m = np.maximum(x.max(axis=-1, keepdims=True), 0.0 if pad else -np.inf)
        e = np.exp(x - m)
        return e / e.sum(axis=-1, keepdims=True)


def _no_shift_fp32(x):
    np = _np()
    with np.errstate(all="ignore"):
        e = np.exp(np.asarray(x, dtype=np.float32))
        return e / e.sum(axis=-1, keepdims=True)


def _all_minus_inf_as_zero(x):
    """Rows of only -inf given 0 everywhere (a denominator guarded against 0)."""
    np = _np()
    out = reference_rows(x)
    return np.where(np.isneginf(np.asarray(x)).all(axis=-1, keepdims=True), 0.0, out)


def _minus_inf_as_zero(x):
    np = _np()
    x = np.where(np.isneginf(x), 0.0, x)
    return reference_rows(x)


def _tensor(seed: int, rows: int, cols: int, *, dtype: str = "float32",
            layout: str = "contiguous", transform=None):
    def make():
        np = _np()
        values = np.random.default_rng(seed).standard_normal((rows, cols))
        if transform is not None:
            values = transform(values, np.random.default_rng(seed + 1))
        return (TensorSpec(values, dtype=dtype, layout=layout),)

    return make


def _all_negative(x, rng):
    return -1.0 - 4.0 * rng.random(x.shape)


def _very_negative(x, rng):
    return x - 200.0


def _one_hot(x, rng):
    hot = _np().full(x.shape, -1.0e4)
    hot[_np().arange(x.shape[0]), rng.integers(0, x.shape[1], x.shape[0])] = 0.0
    return hot


def _large(x, rng):
    return 100.0 * x + 1000.0


def _rows_apart(x, rng):
    """Rows near +1000, -1000 and 0: each is safe only when shifted by its own maximum."""
    return x + _np().array([1000.0, -1000.0, 0.0])[:, None]


def _some_minus_inf(x, rng):
    x = x.copy()
    x[rng.random(x.shape) < 0.3] = -math.inf
    x[:, 0] = 0.5  # every row keeps a finite score, so its softmax is defined
    return x


def _one_row_all_minus_inf(x, rng):
    x = x.copy()
    x[1, :] = -math.inf
    return x


FP32 = Tolerance(atol=1e-6, rtol=3e-5)
FP16 = Tolerance(atol=1e-3, rtol=1e-2)
BF16 = Tolerance(atol=4e-3, rtol=2e-2)
_LOOSE = {"atol": 2e-5, "rtol": 1e-3}  # buggy formulas reproduced in NumPy, not in Triton

TRITON_BUGS = (
    Bug("minus-inf-to-zero", "a -inf score (a masked position) must get probability 0: keep "
        "it as -inf, since exp(-inf) = 0 already", same_as(_minus_inf_as_zero, **_LOOSE), hint=3),
    Bug("max-over-padding", "the maximum included zero-padded lanes: for a very negative row "
        "every exponential underflows to 0 and 0/0 gives NaN; load with other=-inf",
        same_as(_max_over_padding, **_LOOSE), hint=3),
    Bug("zero-padding", "padded lanes read 0 (other=0, or no other at all) and add exp(0 - max) "
        "to the denominator: load with other=-float('inf')", same_as(_zero_padded, **_LOOSE),
        hint=3),
    Bug("no-max-shift", "the row maximum was not subtracted: exp of large values overflows "
        "FP32 past about 88 (inf / inf is NaN), and exp of very negative ones underflows to "
        "0 (0 / 0 is NaN). Subtract the row maximum before exponentiating",
        same_as(_no_shift_fp32, **_LOOSE), hint=4),
    Bug("row-stride", "a row-strided view (x[::2], a column slice) starts row r at "
        "r * x.stride(0), which is larger than n_cols: address row r with the row stride "
        "the launcher passes (x.stride(0)), not with n_cols or with another tensor's stride "
        "(a new output's is n_cols)",
        same_as(rows_at_n_cols(reference_rows), **_LOOSE), hint=2),
    Bug("all-minus-inf", "a row of only -inf has no softmax: like torch.softmax, return NaN "
        "there (0/0) rather than a made-up value", same_as(_all_minus_inf_as_zero, **_LOOSE),
        hint=4),
)

TRITON_CASES = (
    Case("width 3", "one row [1, 2, 3] in a block of 4: the padded lane must not count",
         lambda: (TensorSpec(_np().array([[1.0, 2.0, 3.0]])),), catches=("zero-padding",)),
    Case("width 17, five rows", "a width that is not a power of two, over several rows",
         _tensor(1, 5, 17), catches=("out-of-bounds", "zero-padding")),
    Case("all-negative rows", "values in [-5, -1]: zero padding would become the maximum",
         _tensor(2, 4, 781, transform=_all_negative), catches=("zero-padding",)),
    Case("very negative rows", "x - 200: a maximum taken over zero padding makes every "
         "exponential underflow", _tensor(3, 2, 1000, transform=_very_negative),
         catches=("max-over-padding",)),
    Case("one-hot rows", "-1e4 everywhere but one 0 per row: the probability mass sits in one "
         "column", _tensor(4, 3, 1000, transform=_one_hot), catches=("zero-padding",)),
    Case("large values", "100·x + 1000: exp overflows FP32 unless the maximum is subtracted",
         _tensor(5, 2, 100, transform=_large), catches=("no-max-shift",)),
    Case("rows far apart", "rows near +1000, -1000 and 0: each row must be shifted by its own "
         "maximum; another row's makes exp overflow or underflow the whole row",
         _tensor(16, 3, 17, transform=_rows_apart), catches=()),
    Case("many rows", "37 rows of 33: each program must find its own row",
         _tensor(6, 37, 33), catches=("out-of-bounds", "grid-too-small")),
    Case("single column", "width 1: every output is exactly 1", _tensor(7, 5, 1),
         catches=()),
    Case("row-strided view", "x[::2] of a taller tensor: the row stride is 2 * n_cols",
         _tensor(8, 6, 50, layout="row-strided"), catches=("row-stride",)),
    Case("column slice", "x[:, :40] of a wider tensor: the row stride is not n_cols",
         _tensor(9, 4, 40, layout="column-slice"), catches=("row-stride",)),
    Case("-inf entries", "masked scores (-inf) get probability 0",
         _tensor(10, 3, 37, transform=_some_minus_inf), catches=("minus-inf-to-zero",)),
    Case("all -inf row", "a row of only -inf has no softmax: NaN there, as torch.softmax "
         "gives, and the other rows unharmed", _tensor(11, 3, 20, transform=_one_row_all_minus_inf),
         catches=("all-minus-inf",)),
    Case("narrower rows next", "3 rows of 18, graded just after 3 rows of 20 (the same block "
         "of 32): nothing an earlier call kept (a padded copy, a cached buffer) may stand in "
         "for this call's columns", _tensor(19, 3, 18), catches=()),
    Case("float16", "float16 in, float16 out: the output keeps the input's dtype (FP32 inside "
         "is the lesson's advice, which this case's values cannot tell from FP16 arithmetic)",
         _tensor(12, 4, 300, dtype="float16"), catches=("wrong-dtype",), tolerance=FP16),
    Case("wide row", "width 4097, just past 4096: BLOCK must be the next power of two, 8192",
         _tensor(13, 2, 4097), catches=("zero-padding", "block-too-small")),
    Case("wider row", "width 9000, past 8192: a BLOCK fixed at 8192, enough for every row "
         "above, is not enough", _tensor(17, 1, 9000), catches=("block-too-small",)),
    Case("hundreds of rows", "257 rows of 3: a grid of a fixed number of programs (256, or a "
         "GPU's 132 multiprocessors) leaves rows unwritten", _tensor(18, 257, 3),
         catches=("grid-too-small",)),
    Case("bfloat16", "bfloat16 storage (GPU only: the interpreter mishandles bfloat16)",
         _tensor(14, 8, 1000, dtype="bfloat16"), catches=("wrong-dtype",), tolerance=BF16,
         gpu_only=True),
    Case("many rows on the GPU", "4096 rows of 781: a full launch (GPU only, too slow to "
         "interpret)", _tensor(15, 4096, 781), catches=("grid-too-small",), gpu_only=True),
)

PYTHON_HINTS = (
    "Start with the first reduction, maximum = max(values): every later step uses it.",
    "shifted = [v - maximum for v in values], then numerator = [math.exp(s) for s in shifted]. "
    "Every shifted value is at most 0, so no exponential can overflow.",
    "denominator = sum(numerator): the sum of the exponentials, not of the shifted values.",
    "output = [n / denominator for n in numerator], and return that new list; leave values "
    "as it was, and do not round.",
)

TRITON_HINTS = (
    "row = tl.program_id(0); cols = tl.arange(0, BLOCK); mask = cols < n_cols.",
    "Row r starts at input_ptr + row * input_row_stride (and output_ptr + row * "
    "output_row_stride): use the strides you are given, never n_cols or BLOCK.",
    "Load with mask=mask, other=-float('inf'), then x = x.to(tl.float32): the padded lanes "
    "can neither become the maximum nor add to the sum.",
    "maximum = tl.max(x, axis=0); numerator = tl.exp(x - maximum); denominator = "
    "tl.sum(numerator, axis=0); store numerator / denominator with the same mask.",
    "In softmax_triton: output = torch.empty_like(x); BLOCK = triton.next_power_of_2(n_cols); "
    "softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=BLOCK).",
)

# The six steps of lesson 04, as the stub asks for them (the store is the return).
PYTHON_STEPS = Steps(("maximum", "shifted", "numerator", "denominator", "output"))

def _in_row_program(loops: dict, args: tuple) -> str:
    return f"in the program of row {loops['program'][0]}" if "program" in loops else ""


# The same steps in lesson 08's kernel, one program per row (x: the row as loaded, in FP32).
TRITON_STEPS = Steps(("x", "maximum", "numerator", "denominator", "output"), _in_row_program,
                     function="softmax_kernel",
                     # x loaded with 0 past the row, the mask put on later steps instead
                     feeds={"x": ("maximum", "numerator")})

EXERCISE = Exercise(
    name="softmax",
    title="Softmax: derive the kernel, then write it",
    lessons=("04-softmax.md", "08-softmax-triton.md"),
    parts=(
        Part("python", "softmax_python: one row in plain Python", lesson="04",
             function="softmax_python", reference=reference_rows, cases=PYTHON_CASES,
             tolerance=Tolerance(atol=1e-12, rtol=1e-9), bugs=PYTHON_BUGS, returns="list",
             hints=PYTHON_HINTS, observe=("row-sums",), steps=PYTHON_STEPS, plain_python=True),
        Part("triton", "softmax_triton: one program per row", lesson="08",
             function="softmax_triton", reference=reference_rows, cases=TRITON_CASES,
             tolerance=FP32, bugs=TRITON_BUGS, returns="tensor", needs_kernels=True,
             kernel_ops=(("exp", "sum"),),
             torch_answers=("softmax", "_softmax", "log_softmax", "exp", "exp_", "exp2",
                            "logsumexp", "sigmoid"),
             hints=TRITON_HINTS, observe=("row-sums",), steps=TRITON_STEPS),
    ),
)
