"""Attention's backward pass, twice: lesson 11's softmax backward over blocks of queries and keys
in plain Python, then as two Triton kernels that recompute the probabilities from the forward's
log-sum-exp (lesson 14, FlashAttention's backward pass).

Reference solution for attention_backward.py.
"""

import math

import torch
import triton
import triton.language as tl


def attention_backward_python(q: list[list[float]], k: list[list[float]], v: list[list[float]],
                              o: list[list[float]], do: list[list[float]], lse: list[float],
                              causal: bool, block: int) -> list[list[float]]:
    """dq, dk and dv of softmax(q k^T / sqrt(d)) v for one head, by blocks (lesson 14)."""
    if causal and len(q) != len(k):
        raise ValueError(f"causal attention needs as many queries as keys: got {len(q)} "
                         f"queries and {len(k)} keys")
    d = len(q[0])
    scale = 1.0 / math.sqrt(d)
    # D[i] = sum over c of dO[i][c] * O[i][c]: lesson 11's dot, once per query row
    delta = [sum(a * b for a, b in zip(do_row, o_row)) for do_row, o_row in zip(do, o)]
    dq = [[0.0] * d for _ in q]
    dk = [[0.0] * d for _ in k]
    dv = [[0.0] * len(v[0]) for _ in v]
    for k_start in range(0, len(k), block):  # one block of keys: the kernel's program
        keys = range(k_start, min(k_start + block, len(k)))
        for q_start in range(0, len(q), block):  # its loop over blocks of queries
            for i in range(q_start, min(q_start + block, len(q))):
                for j in keys:
                    if causal and j > i:
                        continue  # a hidden key: P = 0, so it adds nothing anywhere
                    # P recomputed with the forward's scale and log-sum-exp
                    p = math.exp(scale * sum(a * b for a, b in zip(q[i], k[j])) - lse[i])
                    dp = sum(a * b for a, b in zip(do[i], v[j]))  # dP = dO V^T
                    ds = p * (dp - delta[i])  # dS = P * (dP - D)
                    for c in range(len(v[0])):
                        dv[j][c] += p * do[i][c]  # dV += P^T dO
                    for c in range(d):
                        dk[j][c] += ds * q[i][c] * scale  # dK += dS^T Q * scale
                        dq[i][c] += ds * k[j][c] * scale  # dQ += dS K * scale
    return dq + dk + dv


@triton.jit
def attention_backward_dkdv_kernel(
    dk_ptr, dv_ptr,  # the outputs, (batch, heads, seq_k, HEAD_DIM)
    q_ptr, k_ptr, v_ptr, o_ptr, do_ptr,  # q, o, do: (batch, heads, seq_q, d); k, v: seq_k rows
    lse_ptr,  # the forward's log-sum-exp, (batch, heads, seq_q) float32, rows of stride 1
    stride_dkb, stride_dkh, stride_dkn,  # dk.stride(0), dk.stride(1), dk.stride(2)
    stride_dvb, stride_dvh, stride_dvn,  # the same for dv
    stride_qb, stride_qh, stride_qm,  # the same for q
    stride_kb, stride_kh, stride_kn,  # the same for k
    stride_vb, stride_vh, stride_vn,  # the same for v
    stride_ob, stride_oh, stride_om,  # the same for o
    stride_dob, stride_doh, stride_dom,  # the same for do
    stride_lb, stride_lh,  # lse.stride(0), lse.stride(1)
    n_heads, seq_q, seq_k,  # heads per batch, query rows and keys per head
    scale,  # 1 / sqrt(HEAD_DIM), the forward's
    CAUSAL: tl.constexpr,  # query i sees only keys j <= i
    HEAD_DIM: tl.constexpr,  # d: a power of two from 16 to 128
    BLOCK_M: tl.constexpr,  # query rows per step: a power of two >= 16
    BLOCK_N: tl.constexpr,  # keys per program: a power of two >= 16
):
    """One program computes dK and dV for BLOCK_N keys of one (batch, head) (lesson 14)."""
    pid_n = tl.program_id(0)  # which block of keys
    pid_bh = tl.program_id(1)  # which (batch, head)
    batch = pid_bh // n_heads
    head = pid_bh % n_heads
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + head * stride_kh
    v_ptr += batch * stride_vb + head * stride_vh
    o_ptr += batch * stride_ob + head * stride_oh
    do_ptr += batch * stride_dob + head * stride_doh
    lse_ptr += batch * stride_lb + head * stride_lh
    key_mask = cols[:, None] < seq_k
    k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :], mask=key_mask, other=0.0)
    v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :], mask=key_mask, other=0.0)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)  # sums over every query block
    dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)
    for start in range(0, seq_q, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
        row_mask = rows[:, None] < seq_q
        q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :], mask=row_mask, other=0.0)
        o = tl.load(o_ptr + rows[:, None] * stride_om + dims[None, :], mask=row_mask, other=0.0)
        do = tl.load(do_ptr + rows[:, None] * stride_dom + dims[None, :], mask=row_mask,
                     other=0.0)
        lse = tl.load(lse_ptr + rows, mask=rows < seq_q, other=0.0)  # (BLOCK_M,)
        delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)  # D = rowsum(dO * O)
        s = tl.dot(q, tl.trans(k)) * scale  # (BLOCK_M, BLOCK_N), the forward's scores
        visible = row_mask & (cols[None, :] < seq_k)
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        p = tl.where(visible, tl.exp(s - lse[:, None]), 0.0)  # P, recomputed
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)  # dV += P^T dO
        dp = tl.dot(do, tl.trans(v))  # dP = dO V^T
        ds = p * (dp - delta[:, None])  # dS = P * (dP - D)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)  # dK += dS^T Q (the scale once, below)
    dk = dk * scale
    tl.store(dk_ptr + batch * stride_dkb + head * stride_dkh + cols[:, None] * stride_dkn
             + dims[None, :], dk.to(dk_ptr.dtype.element_ty), mask=key_mask)
    tl.store(dv_ptr + batch * stride_dvb + head * stride_dvh + cols[:, None] * stride_dvn
             + dims[None, :], dv.to(dv_ptr.dtype.element_ty), mask=key_mask)


@triton.jit
def attention_backward_dq_kernel(
    dq_ptr,  # the output, (batch, heads, seq_q, HEAD_DIM)
    q_ptr, k_ptr, v_ptr, o_ptr, do_ptr, lse_ptr,  # as for attention_backward_dkdv_kernel
    stride_dqb, stride_dqh, stride_dqm,  # dq.stride(0), dq.stride(1), dq.stride(2)
    stride_qb, stride_qh, stride_qm,  # the same for q
    stride_kb, stride_kh, stride_kn,  # the same for k
    stride_vb, stride_vh, stride_vn,  # the same for v
    stride_ob, stride_oh, stride_om,  # the same for o
    stride_dob, stride_doh, stride_dom,  # the same for do
    stride_lb, stride_lh,  # lse.stride(0), lse.stride(1)
    n_heads, seq_q, seq_k,  # heads per batch, query rows and keys per head
    scale,  # 1 / sqrt(HEAD_DIM), the forward's
    CAUSAL: tl.constexpr,  # query i sees only keys j <= i
    HEAD_DIM: tl.constexpr,  # d: a power of two from 16 to 128
    BLOCK_M: tl.constexpr,  # query rows per program: a power of two >= 16
    BLOCK_N: tl.constexpr,  # keys per step: a power of two >= 16
):
    """One program computes dQ for BLOCK_M query rows of one (batch, head) (lesson 14)."""
    pid_m = tl.program_id(0)  # which block of query rows
    pid_bh = tl.program_id(1)  # which (batch, head)
    batch = pid_bh // n_heads
    head = pid_bh % n_heads
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + head * stride_kh
    v_ptr += batch * stride_vb + head * stride_vh
    o_ptr += batch * stride_ob + head * stride_oh
    do_ptr += batch * stride_dob + head * stride_doh
    lse_ptr += batch * stride_lb + head * stride_lh
    row_mask = rows[:, None] < seq_q
    q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :], mask=row_mask, other=0.0)
    o = tl.load(o_ptr + rows[:, None] * stride_om + dims[None, :], mask=row_mask, other=0.0)
    do = tl.load(do_ptr + rows[:, None] * stride_dom + dims[None, :], mask=row_mask, other=0.0)
    lse = tl.load(lse_ptr + rows, mask=rows < seq_q, other=0.0)  # (BLOCK_M,)
    delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)  # D = rowsum(dO * O)
    dq = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)  # sums over every key block
    for start in range(0, seq_k, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
        key_mask = cols[:, None] < seq_k
        k = tl.load(k_ptr + cols[:, None] * stride_kn + dims[None, :], mask=key_mask, other=0.0)
        v = tl.load(v_ptr + cols[:, None] * stride_vn + dims[None, :], mask=key_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale  # (BLOCK_M, BLOCK_N)
        visible = row_mask & (cols[None, :] < seq_k)
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        p = tl.where(visible, tl.exp(s - lse[:, None]), 0.0)  # P, recomputed
        dp = tl.dot(do, tl.trans(v))  # dP = dO V^T
        ds = p * (dp - delta[:, None])  # dS = P * (dP - D)
        dq += tl.dot(ds.to(k.dtype), k)  # dQ += dS K (the scale once, below)
    dq = dq * scale
    tl.store(dq_ptr + batch * stride_dqb + head * stride_dqh + rows[:, None] * stride_dqm
             + dims[None, :], dq.to(dq_ptr.dtype.element_ty), mask=row_mask)


def attention_backward_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                              o: torch.Tensor, do: torch.Tensor, lse: torch.Tensor,
                              causal: bool = False) -> torch.Tensor:
    """dq, dk and dv of attention with two kernels, returned as one tensor (lesson 14)."""
    batch, heads, seq_q, d = q.shape
    seq_k = k.shape[2]
    if causal and seq_q != seq_k:
        raise ValueError(f"causal attention needs seq_q == seq_k, got {seq_q} queries and "
                         f"{seq_k} keys: which keys should query i see?")
    dq = torch.empty((batch, heads, seq_q, d), dtype=q.dtype, device=q.device)
    dk = torch.empty((batch, heads, seq_k, d), dtype=q.dtype, device=q.device)
    dv = torch.empty((batch, heads, seq_k, d), dtype=q.dtype, device=q.device)
    block_m, block_n = 16, 16
    inputs = (q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
              v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
              do.stride(0), do.stride(1), do.stride(2), lse.stride(0), lse.stride(1),
              heads, seq_q, seq_k, 1.0 / math.sqrt(d))
    sizes = dict(CAUSAL=causal, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n)
    attention_backward_dkdv_kernel[(triton.cdiv(seq_k, block_n), batch * heads)](
        dk, dv, q, k, v, o, do, lse, dk.stride(0), dk.stride(1), dk.stride(2),
        dv.stride(0), dv.stride(1), dv.stride(2), *inputs, **sizes)
    attention_backward_dq_kernel[(triton.cdiv(seq_q, block_m), batch * heads)](
        dq, q, k, v, o, do, lse, dq.stride(0), dq.stride(1), dq.stride(2), *inputs, **sizes)
    return torch.cat((dq, dk, dv), dim=2)  # (batch, heads, seq_q + 2 * seq_k, d)
