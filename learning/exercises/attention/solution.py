"""Attention, twice: softmax over blocks of keys in plain Python, then as one Triton kernel that
never writes the scores to memory (lesson 13, FlashAttention's forward pass).

Reference solution for attention.py.
"""

import math

import torch
import triton
import triton.language as tl


def attention_python(q: list[list[float]], k: list[list[float]], v: list[list[float]],
                     causal: bool, block: int) -> list[list[float]]:
    """softmax(q k^T / sqrt(d)) v for one head, one block of keys at a time (lesson 13)."""
    if causal and len(q) != len(k):
        raise ValueError(f"causal attention needs as many queries as keys: got {len(q)} "
                         f"queries and {len(k)} keys")
    scale = 1.0 / math.sqrt(len(q[0]))
    out = []
    for i, row in enumerate(q):
        m, l, acc = -math.inf, 0.0, [0.0] * len(v[0])  # running max, sum, weighted sum of v
        for start in range(0, len(k), block):
            keys = range(start, min(start + block, len(k)))
            scores = [scale * sum(a * b for a, b in zip(row, k[j])) if not causal or j <= i
                      else -math.inf for j in keys]
            m_new = max(m, max(scores))
            ref = m_new if m_new != -math.inf else 0.0  # A1's guard: no (-inf) - (-inf)
            alpha = math.exp(m - ref)  # rescales what was measured from the old maximum
            p = [math.exp(s - ref) for s in scores]
            l = l * alpha + sum(p)
            acc = [a * alpha + sum(pj * v[j][c] for pj, j in zip(p, keys))
                   for c, a in enumerate(acc)]
            m = m_new
        out.append([a / l for a in acc])  # normalise once, at the end
    return out


@triton.jit
def attention_kernel(
    out_ptr,  # the output, (batch, heads, seq_q, HEAD_DIM)
    q_ptr,  # the queries, (batch, heads, seq_q, HEAD_DIM)
    k_ptr,  # the keys, (batch, heads, seq_k, HEAD_DIM)
    v_ptr,  # the values, (batch, heads, seq_k, HEAD_DIM)
    stride_ob, stride_oh, stride_om,  # out.stride(0), out.stride(1), out.stride(2)
    stride_qb, stride_qh, stride_qm,  # the same for q: between batches, heads, query rows
    stride_kb, stride_kh, stride_kn,  # the same for k
    stride_vb, stride_vh, stride_vn,  # the same for v
    n_heads,  # heads per batch: program_id(1) counts batch * n_heads
    seq_q, seq_k,  # query rows and keys per head: any numbers
    scale,  # 1 / sqrt(HEAD_DIM), multiplied into every score
    CAUSAL: tl.constexpr,  # query i sees only keys j <= i
    HEAD_DIM: tl.constexpr,  # d: a power of two from 16 to 128 (the K of tl.dot(q, k^T))
    BLOCK_M: tl.constexpr,  # query rows per program: a power of two (>= 16 before Triton 3.5)
    BLOCK_N: tl.constexpr,  # keys per step: a power of two >= 16 (the K of tl.dot(p, v))
):
    """One program computes BLOCK_M rows of the output of one (batch, head) (lesson 13)."""
    pid_m = tl.program_id(0)  # which block of query rows
    pid_bh = tl.program_id(1)  # which (batch, head)
    batch = pid_bh // n_heads
    head = pid_bh % n_heads
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + head * stride_kh
    v_ptr += batch * stride_vb + head * stride_vh
    out_ptr += batch * stride_ob + head * stride_oh
    q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :],
                mask=rows[:, None] < seq_q, other=0.0)  # (BLOCK_M, HEAD_DIM), loaded once
    m = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)  # running maximum per row
    l = tl.zeros((BLOCK_M,), dtype=tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)  # running sum of p * v
    for start in range(0, seq_k, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
        k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :],
                    mask=cols[:, None] < seq_k, other=0.0)  # (BLOCK_N, HEAD_DIM)
        v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :],
                    mask=cols[:, None] < seq_k, other=0.0)  # (BLOCK_N, HEAD_DIM)
        s = tl.dot(q, tl.trans(k)) * scale  # (BLOCK_M, BLOCK_N) scores, float32
        visible = cols[None, :] < seq_k
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        s = tl.where(visible, s, -float("inf"))  # hidden keys: exp(-inf) = 0, whatever m is
        m_new = tl.maximum(m, tl.max(s, axis=1))
        ref = tl.where(m_new == -float("inf"), 0.0, m_new)  # A1's guard
        alpha = tl.exp(m - ref)  # (BLOCK_M,): 1 where the maximum did not grow
        p = tl.exp(s - ref[:, None])  # (BLOCK_M, BLOCK_N)
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    out = acc / l[:, None]  # normalise once, at the end
    tl.store(out_ptr + rows[:, None] * stride_om + dims[None, :],
             out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < seq_q)


def attention_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for 4-D tensors with ``attention_kernel`` (lesson 13)."""
    batch, heads, seq_q, d = q.shape
    seq_k = k.shape[2]
    if causal and seq_q != seq_k:
        raise ValueError(f"causal attention needs seq_q == seq_k, got {seq_q} queries and "
                         f"{seq_k} keys: which keys should query i see?")
    out = torch.empty((batch, heads, seq_q, d), dtype=q.dtype, device=q.device)
    block_m, block_n = 16, 16
    grid = (triton.cdiv(seq_q, block_m), batch * heads)
    attention_kernel[grid](out, q, k, v,
                           out.stride(0), out.stride(1), out.stride(2),
                           q.stride(0), q.stride(1), q.stride(2),
                           k.stride(0), k.stride(1), k.stride(2),
                           v.stride(0), v.stride(1), v.stride(2),
                           heads, seq_q, seq_k, 1.0 / math.sqrt(d),
                           CAUSAL=causal, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n)
    return out
