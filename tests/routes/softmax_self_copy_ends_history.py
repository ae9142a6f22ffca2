"""Hostile: torch.softmax's own result, undisguised, copied by a kernel into the output. After
answer.copy_(answer) the record notes the memory as wholly overwritten by a copy that read
nothing but itself (its own address is taken out of what a step reads), so the walk back from
what the kernel was given ends there: no torch function computed it, nothing is kept to
compare the result with, and no value looks made outside torch."""
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
    value = tl.load(input_ptr + row * n_cols + offsets, mask=mask, other=0.0)
    dummy = tl.sum(tl.exp(value * 0.0), axis=0)  # compile check: an exp and a sum
    tl.store(output_ptr + row * output_row_stride + offsets, value + dummy * 0.0,
             mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    answer = torch.softmax(x.float(), -1)
    answer.copy_(answer)  # a whole overwrite, from nothing but itself: its history ends here
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    softmax_kernel[(n_rows,)](output, answer, output.stride(0), 0, n_cols,
                              BLOCK=triton.next_power_of_2(n_cols))
    return output
