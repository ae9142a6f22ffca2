"""Hostile: numpy computes the softmax and writes its bits, unseen, into an int32 tensor that
torch.empty allocated; the kernel loads the int32 and bitcasts them to float32. An allocation's
values that vary count as written outside torch only for floating dtypes."""
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


def _numpy_softmax(x):
    a = x.detach().cpu().float().numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


@triton.jit
def softmax_kernel(output_ptr, bits_ptr, output_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    bits = tl.load(bits_ptr + row * n_cols + offsets, mask=mask, other=0)
    value = bits.to(tl.float32, bitcast=True)
    dummy = tl.sum(tl.exp(value * 0.0), axis=0)  # compile check: an exp and a sum
    tl.store(output_ptr + row * output_row_stride + offsets, value + dummy * 0.0, mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    bits = torch.empty((n_rows, n_cols), dtype=torch.int32, device=x.device)
    bits.numpy()[...] = _numpy_softmax(x).view(np.int32)
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, bits, output.stride(0), n_cols, BLOCK=block)
    return output
