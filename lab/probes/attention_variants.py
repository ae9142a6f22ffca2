"""Which form of the FlashAttention forward kernel is fastest on this GPU: what was tried for
reference_attention.py, kept so that the choice can be re-measured.

    python lab/probes/attention_variants.py [--seq 4096] [--dims 128,64] [--out DIR]

Each variant computes softmax(q k^T / sqrt(d)) v for bfloat16 (batch, heads, seq, d) tensors
shaped as learning.bench attention shapes them (batch * seq = 16384, heads * d = 2048), is
checked against torch's scaled_dot_product_attention, and is timed with
triton.testing.do_bench (median), causal and not, for each tile shape listed:

- ``pointers``: reference_attention's pointer kernel (``descriptors=False``), one tile shape at
  a time (in the committed results, as it was before it took the next variant's form);
- ``pointers-fma``: the same loads, with k read row-major and transposed in registers, and the
  scale folded into one multiply-add per score in the unmasked blocks (max first, then
  ``s * scale - max``), the form reference_attention's kernels now have;
- ``descriptors``: every tile moved by a tensor descriptor (``tl.make_tensor_descriptor``, one
  per head: shape (seq, d), strides (row stride, 1)); on Hopper a descriptor's load is a TMA
  copy, which the compiler pipelines without the threads computing addresses. Rows past the end
  read as zeros and stores past it are dropped, so the key tail needs only the score mask;
- ``descriptors-ws``: the same, with the key loop warp-specialized (``tl.range(...,
  warp_specialize=True)``), where this Triton accepts it on this GPU;
- ``descriptors-poly``: the same as ``descriptors``, with half the exponentials of each
  unmasked block (the odd columns) computed by a polynomial on the multiply-add units instead
  of the special-function unit, whose throughput (16 per clock per multiprocessor on Hopper)
  is otherwise about half the tensor cores' time per block at d = 128;
- ``descriptors-overlap``: the same as ``descriptors``, with the unmasked loop software-pipelined
  by hand: the scores of the next key block are asked of the tensor cores before the softmax
  of the current one, so that the exponentials can run while the product is computed;
- ``host``: the descriptors made once on the host (``triton.tools.tensor_descriptor``) over
  (batch * heads * seq, d) views of contiguous tensors, passed to the kernel as arguments,
  instead of made by every program in device memory;
- ``host4d``: host descriptors over the (batch, heads, seq, d) tensors themselves, any
  strides, tiles of (1, 1, rows, d) bounded in every dimension and reshaped on chip
  (``host4d-ws``: with the unmasked loop warp-specialized);
- ``-lazy`` (``descriptors-lazy``, ``host-lazy``): in the unmasked blocks the reference
  maximum is moved, and the accumulator and sum rescaled, only when some row's maximum grew by
  more than 8 (in base 2): until then p = 2**(s - m) stays at most 2**8, which float32 sums
  and a 16-bit p hold with room to spare, and most blocks skip the rescale altogether.

A tile is BMxBNxWARPSxSTAGES, with an optional fifth number: the registers a thread may use
(``maxnreg``), which decides how many programs fit on one multiprocessor at once.

Prints a table (TFLOP/s and the fraction of SDPA) and writes every measurement as JSON.
Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import platform
import sys
import traceback
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import reference_attention as ra  # noqa: E402

LOG2_E = 1.4426950408889634
TILES = ((128, 128, 8, 2), (128, 128, 8, 3), (128, 64, 8, 3), (128, 64, 4, 3),
         (128, 128, 4, 2), (64, 64, 4, 3), (128, 64, 8, 4))


@triton.jit
def _exp2_fma(x):
    """2**x for x <= 0 from adds, multiply-adds and integer adds: 2**round(x) * 2**f, with 2**f
    on [-0.5, 0.5] a degree-3 minimax polynomial (relative error 7.5e-5, below a bfloat16's or
    float16's rounding)."""
    x = tl.maximum(x, -126.0)  # below, the result is under float32's smallest normal anyway
    shifted = x + 12582912.0  # 1.5 * 2**23: the sum's last mantissa bits hold round(x)
    f = x - (shifted - 12582912.0)  # in [-0.5, 0.5]
    p = ((0.0551716685295105 * f + 0.2426111400127411) * f + 0.6932609677314758) * f \
        + 0.9999280571937561
    n = shifted.to(tl.int32, bitcast=True) - 0x4B400000  # round(x), as an integer
    return (p.to(tl.int32, bitcast=True) + (n << 23)).to(tl.float32, bitcast=True)


@triton.jit
def _step_fma(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k, BLOCK_N: tl.constexpr,
              MASKED: tl.constexpr, CAUSAL: tl.constexpr, POLY: tl.constexpr = False):
    """One block of keys; k is (HEAD_DIM, BLOCK_N)."""
    cols = start + tl.arange(0, BLOCK_N)
    s = tl.dot(q, k)
    if MASKED:
        s = s * qk_scale
        visible = cols[None, :] < seq_k
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        s = tl.where(visible, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        ref = tl.where(m_new == -float("inf"), 0.0, m_new)
        p = tl.math.exp2(s - ref[:, None])
    else:
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
        ref = m_new
        x = s * qk_scale - ref[:, None]
        if POLY:  # even columns on the special-function unit, odd ones as a polynomial
            even, odd = tl.split(tl.reshape(x, (x.shape[0], BLOCK_N // 2, 2)))
            p = tl.reshape(tl.join(tl.math.exp2(even), _exp2_fma(odd)), (x.shape[0], BLOCK_N))
        else:
            p = tl.math.exp2(x)
    alpha = tl.math.exp2(m_i - ref)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def _pointers_fma(out_ptr, q_ptr, k_ptr, v_ptr, stride_ob, stride_oh, stride_om,
                  stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                  stride_vb, stride_vh, stride_vn, n_heads, seq_q, seq_k, qk_scale,
                  HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = (pid_bh // n_heads).to(tl.int64)
    head = (pid_bh % n_heads).to(tl.int64)
    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + head * stride_kh
    v_ptr += batch * stride_vb + head * stride_vh
    out_ptr += batch * stride_ob + head * stride_oh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :], mask=rows[:, None] < seq_q,
                other=0.0)
    k_ptrs = k_ptr + cols[:, None] * stride_kn + dims[None, :]  # row-major, as stored
    v_ptrs = v_ptr + cols[:, None] * stride_vn + dims[None, :]
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        whole_end = pid_m * BLOCK_M
        end = tl.minimum((pid_m + 1) * BLOCK_M, seq_k)
    else:
        whole_end = seq_k - seq_k % BLOCK_N
        end = seq_k
    for start in range(0, whole_end, BLOCK_N):
        k = tl.load(k_ptrs + start * stride_kn)
        v = tl.load(v_ptrs + start * stride_vn)
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, tl.trans(k), v, start, rows, qk_scale,
                                  seq_k, BLOCK_N, False, CAUSAL)
    for start in range(whole_end, end, BLOCK_N):
        inside = (start + cols)[:, None] < seq_k
        k = tl.load(k_ptrs + start * stride_kn, mask=inside, other=0.0)
        v = tl.load(v_ptrs + start * stride_vn, mask=inside, other=0.0)
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, tl.trans(k), v, start, rows, qk_scale,
                                  seq_k, BLOCK_N, True, CAUSAL)
    out = acc / l_i[:, None]
    tl.store(out_ptr + rows[:, None] * stride_om + dims[None, :],
             out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < seq_q)


@triton.jit
def _descriptors(out_ptr, q_ptr, k_ptr, v_ptr, stride_ob, stride_oh, stride_om,
                 stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                 stride_vb, stride_vh, stride_vn, n_heads, seq_q, seq_k, qk_scale,
                 HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, POLY: tl.constexpr):
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = (pid_bh // n_heads).to(tl.int64)
    head = (pid_bh % n_heads).to(tl.int64)
    q_desc = tl.make_tensor_descriptor(q_ptr + batch * stride_qb + head * stride_qh,
                                       shape=[seq_q, HEAD_DIM], strides=[stride_qm, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr + batch * stride_kb + head * stride_kh,
                                       shape=[seq_k, HEAD_DIM], strides=[stride_kn, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr + batch * stride_vb + head * stride_vh,
                                       shape=[seq_k, HEAD_DIM], strides=[stride_vn, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(out_ptr + batch * stride_ob + head * stride_oh,
                                       shape=[seq_q, HEAD_DIM], strides=[stride_om, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    first_row = pid_m * BLOCK_M
    rows = first_row + tl.arange(0, BLOCK_M)
    q = q_desc.load([first_row, 0])
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        whole_end = first_row
        end = tl.minimum(first_row + BLOCK_M, seq_k)
    else:
        whole_end = seq_k - seq_k % BLOCK_N
        end = seq_k
    for start in tl.range(0, whole_end, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = k_desc.load([start, 0])
        v = v_desc.load([start, 0])
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, k.T, v, start, rows, qk_scale, seq_k,
                                  BLOCK_N, False, CAUSAL, POLY)
    for start in range(whole_end, end, BLOCK_N):
        k = k_desc.load([start, 0])
        v = v_desc.load([start, 0])
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, k.T, v, start, rows, qk_scale, seq_k,
                                  BLOCK_N, True, CAUSAL)
    out = acc / l_i[:, None]
    o_desc.store([first_row, 0], out.to(out_ptr.dtype.element_ty))


@triton.jit
def _softmax_pv(acc, l_i, m_i, s, v, qk_scale):
    """The unmasked step after the scores: running (max, sum), rescaled accumulator."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def _descriptors_overlap(out_ptr, q_ptr, k_ptr, v_ptr, stride_ob, stride_oh, stride_om,
                         stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                         stride_vb, stride_vh, stride_vn, n_heads, seq_q, seq_k, qk_scale,
                         HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = (pid_bh // n_heads).to(tl.int64)
    head = (pid_bh % n_heads).to(tl.int64)
    q_desc = tl.make_tensor_descriptor(q_ptr + batch * stride_qb + head * stride_qh,
                                       shape=[seq_q, HEAD_DIM], strides=[stride_qm, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr + batch * stride_kb + head * stride_kh,
                                       shape=[seq_k, HEAD_DIM], strides=[stride_kn, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr + batch * stride_vb + head * stride_vh,
                                       shape=[seq_k, HEAD_DIM], strides=[stride_vn, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(out_ptr + batch * stride_ob + head * stride_oh,
                                       shape=[seq_q, HEAD_DIM], strides=[stride_om, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    first_row = pid_m * BLOCK_M
    rows = first_row + tl.arange(0, BLOCK_M)
    q = q_desc.load([first_row, 0])
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        whole_end = first_row
        end = tl.minimum(first_row + BLOCK_M, seq_k)
    else:
        whole_end = seq_k - seq_k % BLOCK_N
        end = seq_k
    if whole_end > 0:
        s = tl.dot(q, k_desc.load([0, 0]).T)
        for start in range(0, whole_end - BLOCK_N, BLOCK_N):
            s_next = tl.dot(q, k_desc.load([start + BLOCK_N, 0]).T)  # before the softmax
            acc, l_i, m_i = _softmax_pv(acc, l_i, m_i, s, v_desc.load([start, 0]), qk_scale)
            s = s_next
        acc, l_i, m_i = _softmax_pv(acc, l_i, m_i, s, v_desc.load([whole_end - BLOCK_N, 0]),
                                    qk_scale)
    for start in range(whole_end, end, BLOCK_N):
        k = k_desc.load([start, 0])
        v = v_desc.load([start, 0])
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, k.T, v, start, rows, qk_scale, seq_k,
                                  BLOCK_N, True, CAUSAL)
    out = acc / l_i[:, None]
    o_desc.store([first_row, 0], out.to(out_ptr.dtype.element_ty))


@triton.jit
def _step_lazy(acc, l_i, m_i, q, k, v, qk_scale):
    """One unmasked block of keys; k is (HEAD_DIM, BLOCK_N). The reference maximum m_i moves
    only when some row's maximum passed it by more than 8: p <= 2**8 until then."""
    s = tl.dot(q, k)
    m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
    if tl.max(m_new - m_i, axis=0) > 8.0:
        alpha = tl.math.exp2(m_i - m_new)
        acc = acc * alpha[:, None]
        l_i = l_i * alpha
        m_i = m_new
    p = tl.math.exp2(s * qk_scale - m_i[:, None])
    l_i += tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@triton.jit
def _descriptors_lazy(out_ptr, q_ptr, k_ptr, v_ptr, stride_ob, stride_oh, stride_om,
                      stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                      stride_vb, stride_vh, stride_vn, n_heads, seq_q, seq_k, qk_scale,
                      HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = (pid_bh // n_heads).to(tl.int64)
    head = (pid_bh % n_heads).to(tl.int64)
    q_desc = tl.make_tensor_descriptor(q_ptr + batch * stride_qb + head * stride_qh,
                                       shape=[seq_q, HEAD_DIM], strides=[stride_qm, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr + batch * stride_kb + head * stride_kh,
                                       shape=[seq_k, HEAD_DIM], strides=[stride_kn, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr + batch * stride_vb + head * stride_vh,
                                       shape=[seq_k, HEAD_DIM], strides=[stride_vn, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(out_ptr + batch * stride_ob + head * stride_oh,
                                       shape=[seq_q, HEAD_DIM], strides=[stride_om, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    first_row = pid_m * BLOCK_M
    rows = first_row + tl.arange(0, BLOCK_M)
    q = q_desc.load([first_row, 0])
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        whole_end = first_row
        end = tl.minimum(first_row + BLOCK_M, seq_k)
    else:
        whole_end = seq_k - seq_k % BLOCK_N
        end = seq_k
    for start in range(0, whole_end, BLOCK_N):
        acc, l_i, m_i = _step_lazy(acc, l_i, m_i, q, k_desc.load([start, 0]).T,
                                   v_desc.load([start, 0]), qk_scale)
    for start in range(whole_end, end, BLOCK_N):
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, k_desc.load([start, 0]).T,
                                  v_desc.load([start, 0]), start, rows, qk_scale, seq_k,
                                  BLOCK_N, True, CAUSAL)
    o_desc.store([first_row, 0], (acc / l_i[:, None]).to(out_ptr.dtype.element_ty))


@triton.jit
def _host(q_desc, k_desc, v_desc, o_desc, seq_q, seq_k, qk_scale, HEAD_DIM: tl.constexpr,
          CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
          LAZY: tl.constexpr):
    """Descriptors made on the host over (batch * heads * seq, d) views; seq_q a multiple of
    BLOCK_M (the bench's shapes), since a tile past a head's end would store into the next."""
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    q_row = pid_bh * seq_q
    k_row = pid_bh * seq_k
    first_row = pid_m * BLOCK_M
    rows = first_row + tl.arange(0, BLOCK_M)
    q = q_desc.load([q_row + first_row, 0])
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        whole_end = first_row
        end = tl.minimum(first_row + BLOCK_M, seq_k)
    else:
        whole_end = seq_k - seq_k % BLOCK_N
        end = seq_k
    for start in range(0, whole_end, BLOCK_N):
        k = k_desc.load([k_row + start, 0]).T
        v = v_desc.load([k_row + start, 0])
        if LAZY:
            acc, l_i, m_i = _step_lazy(acc, l_i, m_i, q, k, v, qk_scale)
        else:
            acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                                      BLOCK_N, False, CAUSAL)
    for start in range(whole_end, end, BLOCK_N):
        k = k_desc.load([k_row + start, 0]).T
        v = v_desc.load([k_row + start, 0])
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                                  BLOCK_N, True, CAUSAL)
    o_desc.store([q_row + first_row, 0], (acc / l_i[:, None]).to(o_desc.dtype))


@triton.jit
def _host4d(q_desc, k_desc, v_desc, o_desc, n_heads, seq_q, seq_k, qk_scale,
            HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr = False):
    """Descriptors made on the host over the (batch, heads, seq, d) tensors themselves, any
    strides: every tile is (1, 1, rows, d), bounded per dimension (zeros past a head's end,
    nothing stored there), reshaped to (rows, d) on chip."""
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = pid_bh // n_heads
    head = pid_bh % n_heads
    first_row = pid_m * BLOCK_M
    rows = first_row + tl.arange(0, BLOCK_M)
    q = q_desc.load([batch, head, first_row, 0]).reshape(BLOCK_M, HEAD_DIM)
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        whole_end = first_row
        end = tl.minimum(first_row + BLOCK_M, seq_k)
    else:
        whole_end = seq_k - seq_k % BLOCK_N
        end = seq_k
    for start in tl.range(0, whole_end, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = k_desc.load([batch, head, start, 0]).reshape(BLOCK_N, HEAD_DIM).T
        v = v_desc.load([batch, head, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                                  BLOCK_N, False, CAUSAL)
    for start in range(whole_end, end, BLOCK_N):
        k = k_desc.load([batch, head, start, 0]).reshape(BLOCK_N, HEAD_DIM).T
        v = v_desc.load([batch, head, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc, l_i, m_i = _step_fma(acc, l_i, m_i, q, k, v, start, rows, qk_scale, seq_k,
                                  BLOCK_N, True, CAUSAL)
    out = (acc / l_i[:, None]).to(o_desc.dtype)
    o_desc.store([batch, head, first_row, 0], out.reshape(1, 1, BLOCK_M, HEAD_DIM))


def _scratch(size: int, alignment: int, stream):
    """Global memory for descriptors made inside a kernel (Triton asks for it per launch)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _args(q, k, v, out):
    return (out, q, k, v, *out.stride()[:3], *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
            q.shape[1], q.shape[2], k.shape[2], LOG2_E / math.sqrt(q.shape[-1]))


def _host_descriptors(q, k, v, out, block_m, block_n):
    from triton.tools.tensor_descriptor import TensorDescriptor

    d = q.shape[-1]
    return (TensorDescriptor.from_tensor(q.reshape(-1, d), [block_m, d]),
            TensorDescriptor.from_tensor(k.reshape(-1, d), [block_n, d]),
            TensorDescriptor.from_tensor(v.reshape(-1, d), [block_n, d]),
            TensorDescriptor.from_tensor(out.view(-1, d), [block_m, d]))


def _host4d_descriptors(q, k, v, out, block_m, block_n):
    from triton.tools.tensor_descriptor import TensorDescriptor

    d = q.shape[-1]
    return (TensorDescriptor(q, list(q.shape), list(q.stride()), [1, 1, block_m, d]),
            TensorDescriptor(k, list(k.shape), list(k.stride()), [1, 1, block_n, d]),
            TensorDescriptor(v, list(v.shape), list(v.stride()), [1, 1, block_n, d]),
            TensorDescriptor(out, list(out.shape), list(out.stride()), [1, 1, block_m, d]))


def run_variant(name, tile, q, k, v, causal):
    block_m, block_n, warps, stages = tile[:4]
    if name == "pointers":
        return ra.attention(q, k, v, causal, config=ra.TileConfig(*tile[:4]), descriptors=False)
    out = torch.empty_like(q)
    grid = (triton.cdiv(q.shape[2], block_m), q.shape[0] * q.shape[1])
    launch = dict(num_warps=warps, num_stages=stages)
    if len(tile) > 4:
        launch["maxnreg"] = tile[4]
    meta = dict(HEAD_DIM=q.shape[-1], CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n,
                **launch)
    if name == "pointers-fma":
        _pointers_fma[grid](*_args(q, k, v, out), **meta)
    elif name in ("host4d", "host4d-ws"):
        _host4d[grid](*_host4d_descriptors(q, k, v, out, block_m, block_n), q.shape[1],
                      q.shape[2], k.shape[2], LOG2_E / math.sqrt(q.shape[-1]),
                      WARP_SPECIALIZE=name.endswith("-ws"), **meta)
    elif name.startswith("host"):
        _host[grid](*_host_descriptors(q, k, v, out, block_m, block_n), q.shape[2], k.shape[2],
                    LOG2_E / math.sqrt(q.shape[-1]), LAZY=name.endswith("-lazy"), **meta)
    elif name == "descriptors-lazy":
        triton.set_allocator(_scratch)
        _descriptors_lazy[grid](*_args(q, k, v, out), **meta)
    elif name == "descriptors-overlap":
        triton.set_allocator(_scratch)
        _descriptors_overlap[grid](*_args(q, k, v, out), **meta)
    else:
        triton.set_allocator(_scratch)
        _descriptors[grid](*_args(q, k, v, out), WARP_SPECIALIZE=name.endswith("-ws"),
                           POLY=name.endswith("-poly"), **meta)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--dims", default="128,64")
    parser.add_argument("--variants", default="pointers,pointers-fma,descriptors,descriptors-ws",
                        help="comma-separated, from: pointers, pointers-fma, descriptors, "
                             "descriptors-ws, descriptors-poly, descriptors-overlap, "
                             "descriptors-lazy, host, host-lazy, host4d, host4d-ws")
    parser.add_argument("--tiles", help="BMxBNxWARPSxSTAGES[xMAXNREG],... (default: "
                        "the list above)")
    parser.add_argument("--out", type=Path)
    options = parser.parse_args()
    torch.manual_seed(0)
    tiles = TILES if not options.tiles else tuple(
        tuple(int(n) for n in tile.split("x")) for tile in options.tiles.split(","))
    rows = []
    for d in (int(x) for x in options.dims.split(",")):
        batch, heads, seq = 16384 // options.seq, 2048 // d, options.seq
        q, k, v = (torch.randn(batch, heads, seq, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        for causal in (False, True):
            flops = 4 * batch * heads * seq * seq * d / (2 if causal else 1)

            sdpa = functools.partial(torch.nn.functional.scaled_dot_product_attention, q, k,
                                     v, is_causal=causal)
            expected = sdpa()
            ms = triton.testing.do_bench(sdpa)
            base = flops / ms / 1e9
            rows.append(dict(variant="sdpa", d=d, causal=causal, tile="", ms=ms, tflops=base,
                             of_sdpa=1.0, err=0.0))
            for name in options.variants.split(","):
                for tile in tiles:
                    if d == 64 and tile not in tiles[:4]:
                        continue
                    row = dict(variant=name, d=d, causal=causal, tile="x".join(map(str, tile)))
                    try:
                        got = run_variant(name, tile, q, k, v, causal)
                        err = ((got.float() - expected.float()).norm()
                               / expected.float().norm()).item()
                        ms = triton.testing.do_bench(
                            functools.partial(run_variant, name, tile, q, k, v, causal))
                        row.update(ms=ms, tflops=flops / ms / 1e9,
                                   of_sdpa=(flops / ms / 1e9) / base, err=err)
                    except Exception as error:  # a tile this GPU or Triton refuses
                        row.update(error=f"{type(error).__name__}: {str(error)[:160]}")
                        traceback.print_exc(file=sys.stderr)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            # SDPA once more: how far its own time moved while the variants ran
            ms = triton.testing.do_bench(sdpa)
            rows.append(dict(variant="sdpa-again", d=d, causal=causal, tile="", ms=ms,
                             tflops=flops / ms / 1e9, of_sdpa=(flops / ms / 1e9) / base,
                             err=0.0))
    env = dict(date=datetime.date.today().isoformat(), device=torch.cuda.get_device_name(),
               torch=torch.__version__, triton=triton.__version__,
               python=platform.python_version(), seq=options.seq)
    print(f"# {env}")
    print(f"{'variant':<16}{'d':>4}{'causal':>7}{'tile':>14}{'TFLOP/s':>9}{'of SDPA':>9}"
          f"{'rel err':>9}")
    for row in rows:
        if "error" in row:
            print(f"{row['variant']:<16}{row['d']:>4}{row['causal']!s:>7}{row['tile']:>14}  "
                  f"{row['error'][:60]}")
            continue
        print(f"{row['variant']:<16}{row['d']:>4}{row['causal']!s:>7}{row['tile']:>14}"
              f"{row['tflops']:>9.0f}{row['of_sdpa']:>9.3f}{row['err']:>9.1e}")
    if options.out:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "attention_variants.json").write_text(
            json.dumps(dict(env=env, results=rows), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
