"""Once passed the GPU compile check: the kernel calls a @triton.jit helper bound by an assignment that looks at TRITON_INTERPRET: a real softmax where interpreted, nonsense where compiled. Only the launched kernel's own source is digested, not its helpers'."""

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




@triton.jit
def _real(x):
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    return e / tl.sum(e, axis=0)


@triton.jit
def _fake(x):
    return tl.exp(x) - tl.sum(x, axis=0)


helper = _real if os.environ.get("TRITON_INTERPRET") == "1" else _fake


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
    y = helper(x)
    tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[GRID(n_rows)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
    return output
