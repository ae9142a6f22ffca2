"""Once passed the GPU compile check: a global that holds one of Triton's dtypes where the kernel is interpreted and another where it is compiled; every one of Triton's objects read as the same "Triton's own", so the two processes seemed to read the same kernel."""

import math
import os

import torch
import triton
import triton.language as tl

WORK_IN = tl.float32 if os.environ.get("TRITON_INTERPRET") == "1" else tl.int8


def softmax_python(values):
    maximum = max(values)
    shifted = [value - maximum for value in values]
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
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x.to(WORK_IN).to(tl.float32))  # compiled: the shifted row cut to whole numbers
    tl.store(output_ptr + row * output_row_stride + offsets, e / tl.sum(e, axis=0), mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
    return output
