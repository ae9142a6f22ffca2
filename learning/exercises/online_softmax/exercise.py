"""The online softmax workshop (A1): its cases, the bugs they catch, and the references.

Each case passes the chunk width ``block`` next to the row, so that the interpreter runs the
kernel's loop many times on small rows; the widest rows run on a GPU only.
"""

from __future__ import annotations

import math
from functools import partial

from learning.exercises.softmax.exercise import reference_rows
from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import (
    any_of,
    raises_like,
    rounded_output,
    rows_at_n_cols,
    same_as,
)
from learning.grader.tensors import TensorSpec, rows_read_at


def _np():
    import numpy as np

    return np


def reference(x, block):
    """Softmax over the last axis in float64; the chunk width does not change the answer."""
    return reference_rows(x)


# ---------------------------------------------------------------------------------------------
# The online recurrence in NumPy, with switches for the mistakes the workshop warns about, so
# that the grader can recognise a buggy kernel's output.


def simulate(x, block, *, per_lane=True, rescale=True, guard=True, combine=True,
             full_chunks_only=False, advance=True, padded=True, pad_value=-math.inf,
             m_start=-math.inf):
    """Softmax by the two-pass online scheme, possibly with one of its known mistakes.

    ``per_lane`` keeps one running pair per lane (the kernel) or one per row (a scalar loop);
    ``padded`` says whether the lanes past the end of the last chunk take part (a kernel's
    masked load gives them ``pad_value``) or are skipped (a Python slice); ``m_start`` is
    where the running maximum starts.
    """
    np = _np()
    x = np.asarray(x, dtype=np.float64)
    rows = np.atleast_2d(x)
    n_rows, n = rows.shape
    n_chunks = n // block if full_chunks_only else -(-n // block)
    width = max(n_chunks, 1) * block + block
    wide = np.full((n_rows, width), pad_value)
    wide[:, :n] = rows
    present = np.zeros(width, dtype=bool)
    present[:n] = True
    shape = (n_rows, block) if per_lane else (n_rows, 1)
    m = np.full(shape, m_start)
    s = np.zeros(shape)
    for chunk in range(n_chunks):
        start = chunk * block if advance else 0
        live = present[start:start + block] | padded  # the lanes that take part in this step
        values = np.where(live, wide[:, start:start + block], -np.inf)
        chunk_max = values if per_lane else values.max(axis=1, keepdims=True)
        m_new = np.maximum(m, chunk_max)
        ref = np.where(m_new == -np.inf, 0.0, m_new) if guard else m_new
        terms = np.where(live, np.exp(values - ref), 0.0)
        kept = s * np.exp(m - ref) if rescale else s
        if per_lane:
            s = np.where(live, kept + terms, s)
            m = np.where(live, m_new, m)
        else:
            s = kept + terms.sum(axis=1, keepdims=True)
            m = m_new
    row_max = m.max(axis=1, keepdims=True)
    total = (s * np.exp(m - row_max) if combine else s).sum(axis=1, keepdims=True)
    out = np.exp(rows - row_max) / total
    return out.reshape(x.shape)


_LOOSE = {"atol": 2e-5, "rtol": 1e-3}  # FP32 kernels against the recurrence in float64


def _any_of(variants, **tolerance):
    """A detect that matches the output of any of ``variants`` (keyword sets for simulate)."""
    return any_of(*(same_as(partial(simulate, **variant), **tolerance) for variant in variants))


def _bugs(padded: bool, tolerance: dict) -> tuple[Bug, ...]:
    both = ({"per_lane": True, "padded": padded}, {"per_lane": False, "padded": padded})
    lanes = ({"per_lane": True, "padded": padded},)
    return (
        Bug("no-guard", "a lane (or a row) that has seen only -inf computes exp((-inf) - (-inf)) "
            "= NaN, in the rescale factor or in the new terms: measure both from ref = "
            "where(m_new == -inf, 0, m_new), which is 0 while the maximum is still -inf",
            _any_of([dict(v, guard=False) for v in both], **tolerance)),
        Bug("no-rescale", "when the running maximum grows, the sum so far is measured from the "
            "old maximum: multiply it by exp(m_old - m_new) before adding the new terms",
            _any_of([dict(v, rescale=False) for v in both], **tolerance)),
        Bug("no-combine-rescale", "each lane's sum is measured from that lane's own maximum: "
            "scale it by exp(m_k - row_max) before adding the lanes together",
            _any_of([dict(v, combine=False) for v in lanes], **tolerance)),
        Bug("loop-bound", "the first pass stops before the last, partial chunk: loop over "
            + ("range(0, n_cols, BLOCK) and mask the chunk" if padded else
               "range(0, len(values), block), slicing values[start:start + block], which is "
               "shorter at the end")
            + ", so that its values count too",
            _any_of([dict(v, full_chunks_only=True) for v in both], **tolerance)),
        Bug("not-advanced", "every step of the loop reads the first chunk again: "
            + ("the offsets must start at the loop's position, start + tl.arange(0, BLOCK)"
               if padded else "the slice must start at the loop's position, "
               "values[start:start + block]"),
            _any_of([dict(v, advance=False) for v in both], **tolerance)),
        Bug("max-from-zero", "the running maximum starts at 0 instead of -inf, so it never "
            "falls below 0: in a row whose values all lie far below 0 every exponential is "
            "measured from 0 and underflows to 0, and the sum is 0. Start m at -inf (with the "
            "guard)", _any_of([dict(v, m_start=0.0) for v in both], **tolerance),
            raises=None if padded else raises_like(_python_max_from_zero)),
    )


def _python_max_from_zero(values, block):
    """The Python part with each lane's maximum starting at 0: a row whose exponentials all
    underflow divides by a sum of 0."""
    m = [0.0] * block
    s = [0.0] * block
    for start in range(0, len(values), block):
        for lane, x in enumerate(values[start:start + block]):
            m_new = max(m[lane], x)
            s[lane] = s[lane] * math.exp(m[lane] - m_new) + math.exp(x - m_new)
            m[lane] = m_new
    row_max = max(m)
    total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
    return [math.exp(x - row_max) / total for x in values]


# ---------------------------------------------------------------------------------------------
# Part 1: online_softmax_python(values, block) on a list.

WORKED_ROW = (1.0, -math.inf, 3.0, 0.0, 4.0, -math.inf, 2.0, 6.0, 5.0, 1.0)
WORKED_BLOCK = 4

def _python_unshifted(values, block):
    """Exponentials of the values themselves, as a loop without the running maximum takes
    them: math.exp raises past about 709."""
    numerator = [math.exp(v) for v in values]
    total = sum(numerator)
    return [n / total for n in numerator]


def _unshifted_fp32(x, block):
    np = _np()
    with np.errstate(all="ignore"):
        e = np.exp(np.asarray(x, dtype=np.float32))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float64)


def _rows_at_block(x, block):
    """Row r read from element r * BLOCK (the chunk width) instead of r * row_stride."""
    rows = rows_read_at(x, lambda r, cols, stride: r * block)
    if rows is None:
        raise ValueError("the replay reads past the tensor's memory")
    return reference_rows(rows)


PYTHON_BUGS = _bugs(padded=False, tolerance={}) + (
    Bug("no-shift", "exp overflows past about 709, and underflows to 0 below about -745: "
        "every exponential must be measured from the running maximum",
        raises=raises_like(_python_unshifted)),
    Bug("wrong-length", "every input needs exactly one output"),
    Bug("rounded", "the outputs are rounded: return the full-precision values", rounded_output),
)


def _row(values, block):
    return lambda: ([float(v) for v in values], block)


def _seeded(seed: int, n: int, block: int, scale: float = 3.0):
    def make():
        import random

        rng = random.Random(seed)
        return ([round(rng.uniform(-scale, scale), 6) for _ in range(n)], block)

    return make


PYTHON_CASES = (
    Case("worked example", "the row explain traces, in chunks of 4: lane 1 sees -inf twice "
         "before a number", _row(WORKED_ROW, WORKED_BLOCK), catches=("no-guard",)),
    Case("[1, 2, 3], block 2", "a last chunk of one value still counts",
         _row([1, 2, 3], 2), catches=("loop-bound",)),
    Case("rising row", "0, 1, ..., 19 in chunks of 4: the maximum grows in every chunk",
         _row(range(20), 4), catches=("no-rescale",)),
    Case("shorter than a block", "three values, block 8: one partial chunk is the whole row",
         _row([0.5, 1.5, -2.0], 8), catches=("loop-bound",)),
    Case("-inf first", "a first chunk of only -inf (masked scores) must leave the sum at 0",
         _row([-math.inf] * 3 + [2.0, 1.0, 0.0], 3), catches=("no-guard",)),
    Case("lanes far apart", "0 and 10 alternating, block 2: the two lanes have maxima 0 and 10",
         _row([0.0, 10.0] * 5, 2), catches=("no-combine-rescale",)),
    Case("lanes 1000 apart", "0 and 1000 alternating, block 2: the lanes' sums must be "
         "combined from the largest lane maximum; from any other, exp(1000) overflows",
         _row([0.0, 1000.0] * 3, 2), catches=()),
    Case("large values", "1000 and up: every exponential is measured from a maximum",
         _row([1000.0 + i for i in range(9)], 4), catches=("no-shift",)),
    Case("far below zero", "ten values near -1000 in chunks of 4: measured from 0, every "
         "exponential underflows to 0 (float64's exp is 0 below about -745)",
         _row([-1000.0 + 0.75 * i for i in range(10)], 4), catches=("max-from-zero",)),
    Case("single element", "[42] in a block of 4: probability 1", _row([42.0], 4),
         catches=()),
    Case("long row", "1000 values in chunks of 64: sixteen chunks, the last one partial",
         _seeded(3, 1000, 64), catches=("loop-bound",)),
)

# ---------------------------------------------------------------------------------------------
# Part 2: online_softmax_triton(x, block) on a 2-D tensor, one program per row.


def _tensor(seed: int, rows: int, cols: int, block: int, *, dtype: str = "float32",
            layout: str = "contiguous", transform=None):
    def make():
        np = _np()
        values = np.random.default_rng(seed).standard_normal((rows, cols))
        if transform is not None:
            values = transform(values, np.random.default_rng(seed + 1))
        return (TensorSpec(values, dtype=dtype, layout=layout), block)

    return make


def _rising(x, rng):
    np = _np()
    return np.linspace(0.0, 30.0, x.shape[1])[None, :] + 0.1 * x


def _minus_inf_start(x, rng):
    x = x.copy()
    x[:, :100] = -math.inf
    return x


def _scattered_minus_inf(x, rng):
    x = x.copy()
    x[rng.random(x.shape) < 0.3] = -math.inf
    x[:, -1] = 0.5  # every row keeps a finite score
    return x


def _one_row_all_minus_inf(x, rng):
    x = x.copy()
    x[1, :] = -math.inf
    return x


def _spread(x, rng):
    return 10.0 * x


def _large(x, rng):
    return 100.0 * x + 1000.0


def _rows_apart(x, rng):
    """Rows near +1000, -1000 and 0: each is safe only when measured from its own maximum."""
    return x + _np().array([1000.0, -1000.0, 0.0])[:, None]


def _all_negative(x, rng):
    return -1.0 - 4.0 * rng.random(x.shape)


def _far_below_zero(x, rng):
    return -1000.0 + 10.0 * rng.random(x.shape)


FP32 = Tolerance(atol=1e-6, rtol=3e-5)
FP16 = Tolerance(atol=1e-3, rtol=1e-2)
BF16 = Tolerance(atol=4e-3, rtol=2e-2)

TRITON_BUGS = _bugs(padded=True, tolerance=_LOOSE) + (
    # the common text says BLOCK must cover the row; here it is meant to be narrower
    Bug("block-too-small", "the end of each row was never written: no lane stored there. The "
        "second pass must walk the whole row, for start in range(0, n_cols, BLOCK), storing "
        "each chunk at start + tl.arange(0, BLOCK) with the mask offsets < n_cols; or the "
        "store's offsets or mask stop short"),
    Bug("zero-padding", "the last chunk's padded lanes read 0 (other=0, or no other), which "
        "joins the maximum and the sum: load with other=-float('inf')",
        same_as(partial(simulate, pad_value=0.0), **_LOOSE)),
    Bug("no-shift", "the exponentials were not measured from the running maximum: exp of "
        "large values overflows FP32 past about 88, and exp of very negative ones underflows "
        "to 0. Measure every exponential from the running maximum",
        same_as(_unshifted_fp32, **_LOOSE)),
    Bug("row-offset", "rows after the first read the wrong memory: row r starts at "
        "r * x.stride(0), not at r * BLOCK", same_as(_rows_at_block, **_LOOSE)),
    Bug("row-stride", "a row-strided view (x[::2], a column slice) starts row r at "
        "r * x.stride(0), which is larger than n_cols: address row r with the row stride "
        "the launcher passes (x.stride(0)), not with n_cols or with another tensor's stride "
        "(a new output's is n_cols)",
        same_as(rows_at_n_cols(reference), **_LOOSE)),
)

TRITON_CASES = (
    Case("width 1000, BLOCK 64", "sixteen chunks, the last one 40 columns wide",
         _tensor(1, 3, 1000, 64), catches=("loop-bound", "not-advanced")),
    Case("rising rows", "values rising along the row: every lane's maximum grows at every "
         "chunk", _tensor(2, 2, 640, 64, transform=_rising), catches=("no-rescale",)),
    Case("narrower than BLOCK", "width 5 in a block of 16: eleven lanes never see a number, "
         "only -inf padding", _tensor(3, 2, 5, 16), catches=("no-guard",)),
    Case("-inf at the start", "the first 100 columns masked (-inf): every lane starts with "
         "-inf", _tensor(4, 2, 500, 32, transform=_minus_inf_start), catches=("no-guard",)),
    Case("scattered -inf", "a third of the scores masked, anywhere in the row",
         _tensor(5, 3, 300, 32, transform=_scattered_minus_inf), catches=("no-guard",)),
    Case("all -inf row", "a row of only -inf has no softmax: NaN there, as torch.softmax "
         "gives, and the other rows unharmed",
         _tensor(6, 3, 300, 64, transform=_one_row_all_minus_inf), catches=()),
    Case("lanes far apart", "10·x: the lanes end with maxima several units apart",
         _tensor(7, 3, 400, 32, transform=_spread), catches=("no-combine-rescale",)),
    Case("large values", "100·x + 1000: exp overflows FP32 unless measured from the maximum",
         _tensor(8, 2, 300, 64, transform=_large), catches=("no-shift",)),
    Case("rows far apart", "rows near +1000, -1000 and 0, width 100 in chunks of 32: each "
         "row must be measured from its own maximum; another row's makes exp overflow or "
         "underflow the whole row", _tensor(20, 3, 100, 32, transform=_rows_apart), catches=()),
    Case("all-negative rows", "values in [-5, -1], width 781 in chunks of 128: zero padding "
         "would become the maximum", _tensor(9, 2, 781, 128, transform=_all_negative),
         catches=("zero-padding",)),
    Case("far below zero", "values in [-1000, -990]: measured from 0, every exponential "
         "underflows FP32 to 0", _tensor(19, 2, 300, 64, transform=_far_below_zero),
         catches=("max-from-zero",)),
    Case("many rows", "20 rows of 100, chunks of 32: each program finds its own row",
         _tensor(10, 20, 100, 32), catches=("row-offset",)),
    Case("row-strided view", "x[::2] of a taller tensor: the row stride is 2 * n_cols",
         _tensor(11, 4, 200, 64, layout="row-strided"), catches=("row-stride",)),
    Case("column slice", "x[:, :150] of a wider tensor: the row stride is not n_cols",
         _tensor(12, 3, 150, 64, layout="column-slice"), catches=("row-stride",)),
    Case("single column", "width 1 in a block of 16: the output is exactly 1",
         _tensor(13, 3, 1, 16), catches=("no-guard",)),
    Case("float16", "float16 storage, FP32 arithmetic, float16 output",
         _tensor(14, 3, 700, 64, dtype="float16"), catches=("wrong-dtype",), tolerance=FP16),
    Case("2**20 columns", "two rows of 1,048,576 in chunks of 4096 (GPU only)",
         _tensor(15, 2, 2**20, 4096), catches=(), gpu_only=True),
    Case("2**20 - 1 columns, -inf start", "a partial last chunk and a masked start on the "
         "widest rows (GPU only)", _tensor(16, 2, 2**20 - 1, 4096, transform=_minus_inf_start),
         catches=("no-guard",), gpu_only=True),
    Case("bfloat16", "bfloat16 storage (GPU only: the interpreter mishandles bfloat16)",
         _tensor(17, 4, 5000, 1024, dtype="bfloat16"), catches=("wrong-dtype",), tolerance=BF16,
         gpu_only=True),
    Case("many wide rows", "32 rows of 65,537 in chunks of 2048 (GPU only)",
         _tensor(18, 32, 65_537, 2048), catches=("row-offset",), gpu_only=True),
)

PYTHON_HINTS = (
    "Compare with python -m learning.explain online_softmax: its m after and s after columns "
    "are your m[k] and s[k], chunk by chunk.",
    "m = [-math.inf] * block; s = [0.0] * block; for start in range(0, len(values), block): "
    "for lane, x in enumerate(values[start:start + block]): ...",
    "m_new = max(m[lane], x); ref = 0.0 if m_new == -math.inf else m_new; s[lane] = s[lane] * "
    "math.exp(m[lane] - ref) + math.exp(x - ref); m[lane] = m_new.",
    "M = max(m); S = sum(s_k * math.exp(m_k - M) for m_k, s_k in zip(m, s)); return "
    "[math.exp(x - M) / S for x in values].",
)

TRITON_HINTS = (
    "Write the Python part first: the kernel is the same recurrence with m and s as blocks of "
    "BLOCK lanes.",
    "m = tl.full([BLOCK], -float('inf'), tl.float32); s = tl.zeros([BLOCK], tl.float32); for "
    "start in range(0, n_cols, BLOCK): offsets = start + tl.arange(0, BLOCK).",
    "Load with mask=offsets < n_cols, other=-float('inf'), convert to float32; m_new = "
    "tl.maximum(m, x); ref = tl.where(m_new == -float('inf'), 0.0, m_new).",
    "s = s * tl.exp(m - ref) + tl.exp(x - ref); m = m_new. After the loop: M = tl.max(m, "
    "axis=0), S = tl.sum(s * tl.exp(m - M), axis=0); a second loop stores tl.exp(x - M) / S.",
)

def _in_chunk(loops: dict, args: tuple) -> str:
    """Where the reference was: "in the chunk from value 8, lane 1" (nothing after the loop)."""
    if "start" not in loops:
        return ""
    lane = f", lane {loops['lane']}" if "lane" in loops else ""
    return f"in the chunk from value {loops['start']}{lane}"


# The workshop's running pair per lane (m, s), each step of its update, and the combine.
PYTHON_STEPS = Steps(("m", "s", "m_new", "ref", "row_max", "total"), _in_chunk)

def _in_row_chunk(loops: dict, args: tuple) -> str:
    """Where the reference kernel was: "in the program of row 0, the chunk from column 64"."""
    if "program" not in loops:
        return ""
    chunk = f", the chunk from column {loops['start']}" if "start" in loops else ""
    return f"in the program of row {loops['program'][0]}{chunk}"


# The kernel's running pair per lane, each chunk's offsets and each step of the pair's update,
# and the combine.
TRITON_STEPS = Steps(("m", "s", "offsets", "m_new", "ref", "row_max", "total"), _in_row_chunk,
                     function="online_softmax_kernel")

EXERCISE = Exercise(
    name="online_softmax",
    title="Online softmax: rows wider than a block",
    lessons=("A1-online-softmax.md",),
    parts=(
        Part("python", "online_softmax_python: the recurrence on a list, chunk by chunk",
             lesson="A1", function="online_softmax_python", reference=reference,
             cases=PYTHON_CASES, tolerance=Tolerance(atol=1e-12, rtol=1e-9), bugs=PYTHON_BUGS,
             returns="list", hints=PYTHON_HINTS, observe=("row-sums",), steps=PYTHON_STEPS,
             plain_python=True),
        Part("triton", "online_softmax_triton: one program per row, BLOCK columns at a time",
             lesson="A1", function="online_softmax_triton", reference=reference,
             cases=TRITON_CASES, tolerance=FP32, bugs=TRITON_BUGS, returns="tensor",
             needs_kernels=True,
             kernel_ops=(("exp", "sum"),),
             torch_answers=("softmax", "_softmax", "log_softmax", "exp", "exp_", "exp2",
                            "logsumexp", "sigmoid"),
             hints=TRITON_HINTS, observe=("row-sums",),
             steps=TRITON_STEPS),
    ),
)
