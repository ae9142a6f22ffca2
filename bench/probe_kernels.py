"""The kernels bench/whole_row_probe.py times: variants of a 16-bit softmax row kept whole.

Imported by the probe after it has chosen where kernels run (TRITON_INTERPRET is read when
``@triton.jit`` decorates a function). Each variant is explained in the probe's docstring.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
# -inf in both halves of a 32-bit word, per 16-bit dtype: the padding of a packed row
NEG_INF_PAIR = {"bf16": -8323200, "fp16": -67044352}  # 0xFF80FF80, 0xFC00FC00


@triton.jit
def _combine(m_a, s_a, m_b, s_b):
    m = tl.maximum(m_a, m_b)
    m_ref = tl.where(m == -float("inf"), 0.0, m)
    return m, s_a * tl.exp2((m_a - m_ref) * LOG2E) + s_b * tl.exp2((m_b - m_ref) * LOG2E)


@triton.jit
def _unpack(w, DT: tl.constexpr):
    """A 32-bit word as its two 16-bit values (low half first), in float32."""
    if DT == tl.bfloat16:
        lo = (w << 16).to(tl.float32, bitcast=True)
        hi = (w & -65536).to(tl.float32, bitcast=True)
    else:
        lo = w.to(tl.int16).to(DT, bitcast=True).to(tl.float32)
        hi = (w >> 16).to(tl.int16).to(DT, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _pack(lo, hi, DT: tl.constexpr):
    lo16 = lo.to(DT).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    hi16 = hi.to(DT).to(tl.int16, bitcast=True).to(tl.int32)
    return lo16 | (hi16 << 16)


@triton.jit
def pipelined_words(out_ptr, in_ptr, out_rs, in_rs, n_rows, n_cols, BLOCK: tl.constexpr,
                    STAGES: tl.constexpr, NEG: tl.constexpr, ONE_PASS: tl.constexpr):
    # 16-bit rows, an even n_cols and even strides; BLOCK columns are BLOCK // 2 words
    DT: tl.constexpr = in_ptr.dtype.element_ty
    in_w = in_ptr.to(tl.pointer_type(tl.int32))
    out_w = out_ptr.to(tl.pointer_type(tl.int32))
    cols = tl.arange(0, BLOCK // 2)
    mask = cols < n_cols // 2
    for r in tl.range(tl.program_id(0).to(tl.int64), n_rows, tl.num_programs(0),
                      num_stages=STAGES):
        w = tl.load(in_w + r * (in_rs // 2) + cols, mask=mask, other=NEG)
        if ONE_PASS:  # one reduction of per-thread (max, sum) pairs over tiles of 4 words
            lo, hi = _unpack(tl.reshape(w, (BLOCK // 8, 4)), DT)
            m_t = tl.maximum(tl.max(lo, axis=1), tl.max(hi, axis=1))
            ref = tl.where(m_t == -float("inf"), 0.0, m_t)[:, None]
            e_lo = tl.exp2((lo - ref) * LOG2E)
            e_hi = tl.exp2((hi - ref) * LOG2E)
            m, s = tl.reduce((m_t, tl.sum(e_lo + e_hi, axis=1)), 0, _combine)
            scale = (tl.where(m_t == -float("inf"), 0.0, tl.exp2((m_t - m) * LOG2E)) / s)
            y = tl.reshape(_pack(e_lo * scale[:, None], e_hi * scale[:, None], DT), (BLOCK // 2,))
        else:
            lo, hi = _unpack(w, DT)
            m = tl.max(tl.maximum(lo, hi), axis=0)
            e_lo = tl.exp2((lo - m) * LOG2E)
            e_hi = tl.exp2((hi - m) * LOG2E)
            inv = 1.0 / tl.sum(e_lo + e_hi, axis=0)
            y = _pack(e_lo * inv, e_hi * inv, DT)
        tl.store(out_w + r * (out_rs // 2) + cols, y, mask=mask)


@triton.jit
def pipelined_rows(out_ptr, in_ptr, out_rs, in_rs, n_rows, n_cols,
                   BLOCK: tl.constexpr, STAGES: tl.constexpr):
    # any dtype, loaded as it is stored
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for r in tl.range(tl.program_id(0).to(tl.int64), n_rows, tl.num_programs(0),
                      num_stages=STAGES):
        x = tl.load(in_ptr + r * in_rs + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp2((x - tl.max(x, axis=0)) * LOG2E)
        y = e * (1.0 / tl.sum(e, axis=0))
        tl.store(out_ptr + r * out_rs + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def packed(out_ptr, in_ptr, out_rs, in_rs, n_cols, zero,
           BLOCK: tl.constexpr, VEC: tl.constexpr, NEG: tl.constexpr):
    # one 16-bit row per program, kept as BLOCK // 2 words; zero is a runtime 0
    DT: tl.constexpr = in_ptr.dtype.element_ty
    WORDS: tl.constexpr = BLOCK // 2
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, WORDS)
    mask = cols < n_cols // 2
    w = tl.load(in_ptr.to(tl.pointer_type(tl.int32)) + row * (in_rs // 2) + cols, mask=mask,
                other=NEG)
    w = tl.reshape(w, (WORDS // VEC, VEC))
    lo, hi = _unpack(w, DT)
    m_t = tl.maximum(tl.max(lo, axis=1), tl.max(hi, axis=1))
    ref = tl.where(m_t == -float("inf"), 0.0, m_t)[:, None] * LOG2E
    s_t = tl.sum(tl.exp2(lo * LOG2E - ref), axis=1) + tl.sum(tl.exp2(hi * LOG2E - ref), axis=1)
    m_row, s_row = tl.reduce((m_t, s_t), 0, _combine)
    lo, hi = _unpack(w ^ zero, DT)  # not the same expression: unpacked again, not kept
    inv = 1.0 / s_row
    y = _pack(tl.exp2((lo - m_row) * LOG2E) * inv, tl.exp2((hi - m_row) * LOG2E) * inv, DT)
    tl.store(out_ptr.to(tl.pointer_type(tl.int32)) + row * (out_rs // 2) + cols,
             tl.reshape(y, (WORDS,)), mask=mask)


@triton.jit
def tiles(out_ptr, in_ptr, out_rs, in_rs, n_cols, BLOCK: tl.constexpr, VEC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_rs + cols, mask=mask, other=-float("inf"))
    x = tl.reshape(x.to(tl.float32), (BLOCK // VEC, VEC))
    m_t = tl.max(x, axis=1)
    m_row = tl.max(m_t, axis=0)
    # exponents against each tile's own maximum: they need not wait for the row's
    e = tl.exp2((x - tl.where(m_t == -float("inf"), 0.0, m_t)[:, None]) * LOG2E)
    w_t = tl.where(m_t == -float("inf"), 0.0, tl.exp2((m_t - m_row) * LOG2E))
    y = e * (w_t / tl.sum(tl.sum(e, axis=1) * w_t, axis=0))[:, None]
    tl.store(out_ptr + row * out_rs + cols, tl.reshape(y, (BLOCK,)).to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def exp2_polynomial(t):
    """2**t for t <= 0 on the FMA units: t = k + f with k an integer and |f| <= 1/2, 2**f by
    its Taylor series to degree 6 (relative error about 2e-7), 2**k added to the exponent."""
    t = tl.maximum(t, -125.0)
    j = t + 12582912.0  # 1.5 * 2**23: t rounded to an integer lands in j's low mantissa bits
    f = t - (j - 12582912.0)
    p = 1.5403530393381608e-4 * f + 1.3333558146428443e-3
    p = p * f + 9.618129107628477e-3
    p = p * f + 5.550410866482158e-2
    p = p * f + 0.2402265069591007
    p = p * f + 0.6931471805599453
    p = p * f + 1.0
    bits = p.to(tl.int32, bitcast=True) + (j.to(tl.int32, bitcast=True) << 23)
    return tl.where(t > -125.0, bits.to(tl.float32, bitcast=True), 0.0)


@triton.jit
def _exp2_variant(t, MODE: tl.constexpr):
    if MODE == 0:  # the special-function unit, as shipped
        return tl.exp2(t)
    elif MODE == 1:  # half each
        a, b = tl.split(tl.reshape(t, (t.shape[0], t.shape[1] // 2, 2)))
        return tl.reshape(tl.join(tl.exp2(a), exp2_polynomial(b)), (t.shape[0], t.shape[1]))
    else:  # no exponential: a wrong answer, for timing only
        return t * 0.001 + 1.0


@triton.jit
def one_pass_variant(out_ptr, in_ptr, out_rs, in_rs, n_cols,
                     BLOCK: tl.constexpr, VEC: tl.constexpr, MODE: tl.constexpr):
    # triton_kernels._softmax_one_pass with its exponentials swapped per MODE
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_rs + cols, mask=mask, other=-float("inf"))
    x = tl.reshape(x.to(tl.float32), (BLOCK // VEC, VEC))
    m_t = tl.max(x, axis=1)
    e = _exp2_variant((x - tl.where(m_t == -float("inf"), 0.0, m_t)[:, None]) * LOG2E, MODE)
    m_row, s_row = tl.reduce((m_t, tl.sum(e, axis=1)), 0, _combine)
    scale = tl.where(m_t == -float("inf"), 0.0, tl.exp2((m_t - m_row) * LOG2E)) / s_row
    y = tl.reshape(e * scale[:, None], (BLOCK,))
    tl.store(out_ptr + row * out_rs + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
