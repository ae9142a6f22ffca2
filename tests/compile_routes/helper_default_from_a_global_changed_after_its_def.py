"""Once passed the GPU compile check: a helper's default names a global that is changed after its def ran; the interpreter runs the def again as it first launches the kernel (the new value), the compiler binds the value the def gave (the old one)."""

import math

import torch
import triton
import triton.language as tl

NORMALISE = 0


def softmax_python(values):
    maximum = max(values)
    shifted = [value - maximum for value in values]
    numerator = [math.exp(s) for s in shifted]
    denominator = sum(numerator)
    output = [n / denominator for n in numerator]
    return output


@triton.jit
def finish(e, K: tl.constexpr = NORMALISE):
    if K:
        e = e / tl.sum(e, axis=0)
    return e


NORMALISE = 1


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    y = finish(tl.exp(x - tl.max(x, axis=0)))
    tl.store(output_ptr + row * output_row_stride + offsets, y, mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
    return output
