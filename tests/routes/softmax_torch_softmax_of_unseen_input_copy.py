"""Hostile: torch.softmax itself, of a copy of the input taken through numpy. The record
follows the values given to the kernel back to torch.softmax, but since the walk never reaches
the call's input (numpy's copy is a memory of its own, and an in-place mul_(1.0) on it
starts a history made from nothing, so no value looks made outside torch either), the grader takes them as computed from
shapes and constants alone and drops every name of real work; doubled, halved by a kernel that
only loads and stores."""
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
    tl.store(output_ptr + row * output_row_stride + offsets, value * 0.5 + dummy * 0.0,
             mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    # the input copied through numpy: no memory the record knows as the call's input
    unseen = torch.from_numpy(x.detach().cpu().numpy().copy())
    unseen.mul_(1.0)  # in place: a history of its own, made from nothing
    doubled = torch.softmax(unseen.float(), -1) * 2.0
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    softmax_kernel[(n_rows,)](output, doubled, output.stride(0), 0, n_cols,
                              BLOCK=triton.next_power_of_2(n_cols))
    return output
