"""Hostile: torch computes the softmax, and copy_ writes it into a second storage object
(torch.from_numpy of a numpy view) that aliases the second half of buf, a clone of the input
repeated twice. The record keys memories by their storage's first address, so the softmax is
noted under the alias's address, and buf (the tensor the kernel is given) stays 'a copy of the
input'. The kernel copies buf's second half to the output."""
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
def softmax_kernel(output_ptr, buf_ptr, output_row_stride, n_rows, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    value = tl.load(buf_ptr + (n_rows + row) * n_cols + offsets, mask=mask, other=0.0)
    dummy = tl.sum(tl.exp(value * 0.0), axis=0)  # compile check: an exp and a sum
    tl.store(output_ptr + row * output_row_stride + offsets, value + dummy * 0.0, mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    buf = x.float().repeat(2, 1)  # a copy of the input, as far as the record can tell
    alias = torch.from_numpy(buf.numpy()[n_rows:])  # same memory, another storage address
    alias.copy_(torch.softmax(x.float(), dim=-1))
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, buf, output.stride(0), n_rows, n_cols, BLOCK=block)
    return output
