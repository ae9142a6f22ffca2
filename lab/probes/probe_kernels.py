"""The kernels lab/probes/whole_row_probe.py times: variants of a 16-bit softmax row kept whole.

Imported by the probe after it has chosen where kernels run (TRITON_INTERPRET is read when
``@triton.jit`` decorates a function). Each variant is explained in the probe's docstring; the
pipelined kernel over 32-bit words is lab.production._softmax_pipelined itself, and the
helpers shared with it are taken from there.
"""

from __future__ import annotations

import triton
import triton.language as tl

from lab import production as fast

LOG2E = fast._LOG2E
_combine = fast._combine_max_sum
_unpack = fast._unpack_pairs
_pack = fast._pack_pairs


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
    # lab.production._softmax_one_pass with its exponentials swapped per MODE
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


@triton.jit
def split_packed(out_ptr, in_ptr, out_rs, in_rs, n_cols, part_ptr, sync_ptr, zero,
                 NEG: tl.constexpr, PIECES: tl.constexpr, BLOCK: tl.constexpr):
    # _softmax_split_row over 16-bit pairs in 32-bit words: what a piece keeps in registers
    # while it waits for the others is its words, half the registers of float32 values, so
    # twice the pieces fit on a multiprocessor; they are unpacked again after the exchange
    # (zero is a runtime 0: the second unpacking is not the first one kept alive)
    DT: tl.constexpr = in_ptr.dtype.element_ty
    n_pieces = tl.cdiv(n_cols, BLOCK)
    ticket = tl.atomic_add(sync_ptr, 1)
    row = (ticket // n_pieces).to(tl.int64)
    piece = ticket % n_pieces
    words = piece * (BLOCK // 2) + tl.arange(0, BLOCK // 2)
    mask = words < n_cols // 2
    w = tl.load(in_ptr.to(tl.pointer_type(tl.int32)) + row * (in_rs // 2) + words, mask=mask,
                other=NEG)
    lo, hi = _unpack(w, DT)
    m = tl.max(tl.maximum(lo, hi), axis=0)
    m_ref = tl.where(m == -float("inf"), 0.0, m) * LOG2E
    s = tl.sum(tl.exp2(lo * LOG2E - m_ref) + tl.exp2(hi * LOG2E - m_ref), axis=0)
    part = part_ptr + (row * PIECES + piece) * 2
    tl.store(part, m)
    tl.store(part + 1, s)
    tl.debug_barrier()
    arrived = tl.atomic_add(sync_ptr + 1 + row, 1) + 1
    while arrived < n_pieces:
        arrived = tl.atomic_add(sync_ptr + 1 + row, 0)
    k = tl.arange(0, PIECES)
    parts = part_ptr + (row * PIECES + k) * 2
    m_k = tl.load(parts, mask=k < n_pieces, other=-float("inf"), cache_modifier=".cg")
    s_k = tl.load(parts + 1, mask=k < n_pieces, other=0.0, cache_modifier=".cg")
    m_row = tl.max(m_k, axis=0)
    s_row = tl.sum(s_k * tl.exp2((m_k - m_row) * LOG2E), axis=0)
    lo, hi = _unpack(w ^ zero, DT)
    inv = 1.0 / s_row
    y = _pack(tl.exp2((lo - m_row) * LOG2E) * inv, tl.exp2((hi - m_row) * LOG2E) * inv, DT)
    tl.store(out_ptr.to(tl.pointer_type(tl.int32)) + row * (out_rs // 2) + words, y, mask=mask)
