"""Attention, twice: softmax over blocks of keys in plain Python, then as one Triton kernel that
never writes the scores to memory (lesson 13, FlashAttention's forward pass).

This is your file: edit it, then grade it with

    python -m learning.check attention

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import math  # noqa: F401  (the Python part needs math.exp, math.sqrt and math.inf)

import torch
import triton
import triton.language as tl


def attention_python(q: list[list[float]], k: list[list[float]], v: list[list[float]],
                     causal: bool, block: int) -> list[list[float]]:
    """softmax(q k^T / sqrt(d)) v for one head, one block of keys at a time (lesson 13).

    ``q`` is Lq rows of d numbers, ``k`` and ``v`` are Lk rows of d numbers; return Lq rows of
    d numbers. Row i of the output is the average of v's rows weighted by softmax over j of
    q[i] . k[j] / sqrt(d). With ``causal``, query i sees only keys j <= i (the others' scores
    are -inf), and Lq must equal Lk: raise ValueError otherwise. Leave q, k and v unchanged.

    Compute it the way the kernel will: for each query row, walk the keys in blocks of
    ``block`` keeping the largest score so far (m), the sum of exp(score - m) so far (l) and
    the weighted sum of v's rows so far (acc); when m grows, rescale l and acc by
    exp(m_old - m_new); divide acc by l once, at the end. Measure from 0 while m is still -inf
    (workshop A1's guard).
    """
    # TODO(lesson 13): the ValueError, the scale, and per query row the running m, l and acc
    # over blocks of keys, then acc / l.
    raise NotImplementedError("attention_python is not written yet: lesson 13 starts it")


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
    """One program computes BLOCK_M rows of the output of one (batch, head) (lesson 13).

    Preconditions: the last dimension of every tensor has stride 1; any other strides; any
    seq_q and seq_k. Accumulate in float32 and store in the output's dtype.
    """
    # TODO(lesson 13): which (batch, head) and which query rows am I; load q once; running m,
    # l and acc in float32; loop over blocks of keys (masked loads, scores with tl.dot, -inf
    # where a key is past seq_k or hidden by the causal mask, the rescaling, tl.dot with v);
    # divide by l and store the rows that exist.
    pass


def attention_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for 4-D tensors with ``attention_kernel`` (lesson 13).

    ``q`` is (batch, heads, seq_q, d), ``k`` and ``v`` are (batch, heads, seq_k, d), all
    float32, float16 or bfloat16 of one dtype; d is a power of two from 16 to 128. Any of them
    may be a strided view, such as a (batch, seq, heads, d) tensor transposed: pass the
    strides. Causal attention with seq_q != seq_k raises ValueError. Returns a new tensor of q's
    shape, dtype and device; q, k and v must not change. BLOCK_M = BLOCK_N = 16 suit the check
    (the interpreter runs one program at a time).
    """
    # TODO(lesson 13): the ValueError, allocate the output, launch one program per (block of
    # query rows, batch * heads), return the output.
    raise NotImplementedError("attention_triton is not written yet: lesson 13 starts it")
