"""Hostile: numpy computes the attention; a kernel stores zeros, which numpy adds in before
torch.from_numpy wraps the sum, so the result 'follows' what the kernel stored."""
import math

import numpy as np
import torch
import triton
import triton.language as tl


def attention_python(q, k, v, causal, block):
    raise NotImplementedError("not this route")


@triton.jit
def attention_kernel(out_ptr, numel, one, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    lanes = offsets.to(tl.float32) * 0.0
    dummy = tl.sum(tl.exp(lanes), axis=0)  # compile check: an exp, a product, an addition
    tl.store(out_ptr + offsets, lanes * one + dummy * 0.0, mask=mask)


def attention_triton(q, k, v, causal=False):
    batch, heads, seq_q, d = q.shape
    seq_k = k.shape[2]
    if causal and seq_q != seq_k:
        raise ValueError("causal attention needs seq_q == seq_k")
    zeros = torch.empty((batch, heads, seq_q, d), dtype=torch.float32, device=q.device)
    block = 1024
    attention_kernel[(triton.cdiv(zeros.numel(), block),)](zeros, zeros.numel(), 1.0,
                                                            BLOCK=block)
    qn, kn, vn = (t.detach().cpu().double().numpy() for t in (q, k, v))
    scores = qn @ kn.swapaxes(-1, -2) / math.sqrt(d)
    if causal:
        scores = np.where(np.tril(np.ones((seq_q, seq_k), dtype=bool)), scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    out = (p @ vn + zeros.cpu().numpy()).astype(np.float32)
    return torch.from_numpy(out).to(device=q.device, dtype=q.dtype)
