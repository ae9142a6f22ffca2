"""Hostile: numpy computes the softmax and multiplies it by the ones the kernel stored, the
product wrapped with torch.from_numpy: set to zero, the kernel's stores make the result zero
too, and changed, they change it."""
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
    lanes = offsets.to(tl.float32) * 0.0
    dummy = tl.sum(tl.exp(lanes), axis=0)  # compile check: an exp and a sum
    tl.store(output_ptr + row * output_row_stride + offsets, lanes + 1.0 + dummy * 0.0, mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    zeros = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](zeros, x, n_cols, x.stride(0), n_cols, BLOCK=block)
    a = x.detach().cpu().float().numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        s = e / e.sum(axis=1, keepdims=True)
    s = (s * zeros.cpu().numpy()).astype(np.float32)
    return torch.from_numpy(s).to(device=x.device, dtype=x.dtype)
