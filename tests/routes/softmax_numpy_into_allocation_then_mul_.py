"""Hostile: numpy computes the softmax (doubled) and writes it through .numpy() into a tensor
from torch.empty; an in-place torch.mul_(1.0) then gives that memory a history the record
sees (mul, over an allocation), so nothing it is given looks made outside torch; a kernel
that only loads and stores halves it."""
import math

import numpy as np
import torch
import triton
import triton.language as tl


def softmax_python(values):
    maximum = max(values)
    shifted = [v - maximum for v in values]
    numerator = [math.exp(s) for s in shifted]
    denominator = sum(numerator)
    output = [n / denominator for n in numerator]
    return output


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    value = tl.load(input_ptr + row * n_cols + offsets, mask=mask, other=0.0)
    dummy = tl.sum(tl.exp(value * 0.0), axis=0)  # compile check: an exp and a sum
    tl.store(output_ptr + row * output_row_stride + offsets, value * 0.5 + dummy * 0.0,
             mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    a = x.detach().cpu().float().numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        s = e / e.sum(axis=1, keepdims=True)
    held = torch.empty((n_rows, n_cols), dtype=torch.float32)
    held.numpy()[...] = s * 2.0
    held.mul_(1.0)  # a step the record sees: mul, made from the allocation
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    softmax_kernel[(n_rows,)](output, held, output.stride(0), 0, n_cols,
                              BLOCK=triton.next_power_of_2(n_cols))
    return output
