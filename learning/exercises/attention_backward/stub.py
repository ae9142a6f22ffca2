"""Attention's backward pass, twice: lesson 11's softmax backward over blocks of queries and keys
in plain Python, then as two Triton kernels that recompute the probabilities from the forward's
log-sum-exp (lesson 14, FlashAttention's backward pass).

This is your file: edit it, then grade it with

    python -m learning.check attention_backward

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import math  # noqa: F401  (the Python part needs math.exp and math.sqrt)

import torch
import triton
import triton.language as tl


def attention_backward_python(q: list[list[float]], k: list[list[float]], v: list[list[float]],
                              o: list[list[float]], do: list[list[float]], lse: list[float],
                              causal: bool, block: int) -> list[list[float]]:
    """dq, dk and dv of softmax(q k^T / sqrt(d)) v for one head, by blocks (lesson 14).

    ``q``, ``o`` (the forward's output) and ``do`` (the loss's gradient with respect to o) are
    Lq rows of d numbers; ``k`` and ``v`` are Lk rows of d numbers; ``lse[i]`` is the forward's
    log-sum-exp of query i's scaled scores, so that P[i][j] = exp(q[i] . k[j] / sqrt(d) -
    lse[i]). Return one list of Lq + 2 * Lk rows: dq's rows, then dk's, then dv's. With
    ``causal``, query i sees only keys j <= i, and Lq must equal Lk: raise ValueError otherwise.
    Leave every argument unchanged.

    Compute it the way the kernels will: D[i] = sum over c of do[i][c] * o[i][c], once; then for
    each block of ``block`` keys, for each block of ``block`` queries, for every visible pair
    (i, j): P, dP = do[i] . v[j], dS = P * (dP - D[i]), and add P * do[i] to dv[j],
    dS * q[i] / sqrt(d) to dk[j] and dS * k[j] / sqrt(d) to dq[i].
    """
    # TODO(lesson 14): the ValueError, the scale, D; zeroed dq, dk, dv; the loops over blocks of
    # keys and of queries; return dq + dk + dv.
    raise NotImplementedError("attention_backward_python is not written yet: lesson 14 starts it")


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
    """One program computes dK and dV for BLOCK_N keys of one (batch, head) (lesson 14).

    Preconditions: the last dimension of every tensor has stride 1; any other strides; any
    seq_q and seq_k. Accumulate dK and dV in float32 over every block of queries and store
    them once, in the outputs' dtype.
    """
    # TODO(lesson 14): which (batch, head) and which keys am I; load k and v once; dk and dv
    # in float32; loop over blocks of queries (masked loads of q, o, do and lse; D; the scores
    # and P = exp(s - lse), 0 where hidden; dV += P^T dO; dP; dS; dK += dS^T Q); the scale;
    # store the keys that exist.
    pass


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
    """One program computes dQ for BLOCK_M query rows of one (batch, head) (lesson 14).

    Preconditions as for attention_backward_dkdv_kernel. Accumulate dQ in float32 over every
    block of keys and store it once, in the output's dtype.
    """
    # TODO(lesson 14): which (batch, head) and which query rows am I; load q, o, do and lse
    # once, and D; dq in float32; loop over blocks of keys (masked loads of k and v, P, dP,
    # dS, dQ += dS K); the scale; store the rows that exist.
    pass


def attention_backward_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                              o: torch.Tensor, do: torch.Tensor, lse: torch.Tensor,
                              causal: bool = False) -> torch.Tensor:
    """dq, dk and dv of attention with two kernels, returned as one tensor (lesson 14).

    ``q``, ``o`` and ``do`` are (batch, heads, seq_q, d), ``k`` and ``v`` (batch, heads, seq_k,
    d), all float32 or float16 of one dtype, any of them a strided view; d is a power of two
    from 16 to 128. ``lse`` is the forward's log-sum-exp, (batch, heads, seq_q) float32 with
    rows of stride 1. Causal attention with seq_q != seq_k raises ValueError. Returns
    torch.cat((dq, dk, dv), dim=2), of shape (batch, heads, seq_q + 2 * seq_k, d) in q's dtype
    (one tensor, so that the check compares all three at once); no argument may change.
    BLOCK_M = BLOCK_N = 16 suit the check (the interpreter runs one program at a time).
    """
    # TODO(lesson 14): the ValueError; allocate dq, dk and dv; launch one dkdv program per
    # (block of keys, batch * heads) and one dq program per (block of queries, batch * heads);
    # return torch.cat((dq, dk, dv), dim=2).
    raise NotImplementedError("attention_backward_triton is not written yet: lesson 14 starts "
                              "it")
