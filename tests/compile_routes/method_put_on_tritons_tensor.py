"""Once passed the GPU compile check: a method set on Triton's tensor class; the kernel calls it on a local block (x.np_softmax()), which the check does not resolve."""

import math
import os

import numpy as np
import torch
import triton
import triton.language as tl

INTERP = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")
HOOK = 0


def softmax_python(values):
    maximum = max(values)
    shifted = [value - maximum for value in values]
    numerator = [math.exp(s) for s in shifted]
    denominator = sum(numerator)
    output = [n / denominator for n in numerator]
    return output



def _np_softmax(t):
    d = t.handle.data.astype(np.float32)
    with np.errstate(all="ignore"):
        e = np.exp(d - d.max())
        t.handle.data[...] = (e / e.sum()).astype(t.handle.data.dtype)
    return t

tl.core.tensor.np_softmax = _np_softmax


def GRID(n_rows):
    return (n_rows,)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    y = tl.exp(x) - tl.sum(x, axis=0)  # what the GPU stores: not a softmax
    if INTERP:
        y = x.np_softmax()
    tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[GRID(n_rows)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
    return output
