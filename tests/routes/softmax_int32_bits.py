"""Hostile: torch computes the softmax, handed to the kernel as an int32 bit pattern."""
import math

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
    bits = tl.load(input_ptr + row * n_cols + offsets, mask=mask, other=0)
    value = bits.to(tl.float32, bitcast=True)
    dummy = tl.sum(tl.exp(value * 0.0), axis=0)  # compile check: an exp and a sum
    value = value + dummy * 0.0
    tl.store(output_ptr + row * output_row_stride + offsets, value, mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    answer = torch.softmax(x.float(), dim=-1).contiguous().view(torch.int32)
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, answer, output.stride(0), 0, n_cols, BLOCK=block)
    return output
