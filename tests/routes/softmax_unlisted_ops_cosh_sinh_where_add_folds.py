"""Hostile: torch computes the whole softmax with functions on no list: exp(s) (s <= 0) as
1 / (cosh(s) - sinh(s)), the row maximum as a pairwise fold of
torch.where(torch.gt(a, b), a, b) over clones, the row sum as a pairwise fold of + over
clones; scaled by 2, halved by the kernel."""
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


def _fold(t, pad, pick):
    while t.shape[1] > 1:
        if t.shape[1] % 2:
            t = torch.cat([t, torch.full_like(t[:, :1], pad)], dim=1)
        a = t[:, 0::2].clone()
        b = t[:, 1::2].clone()
        t = pick(a, b)
    return t


def softmax_triton(x):
    n_rows, n_cols = x.shape
    xf = x.float()
    m = _fold(xf, -math.inf, lambda a, b: torch.where(torch.gt(a, b), a, b))
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # an all -inf row stays NaN-free
    s = xf - m
    sd = s.double()
    # exp(s) for s <= 0, no cancellation
    e = torch.reciprocal(torch.cosh(sd) - torch.sinh(sd)).float()
    answer = e / _fold(e, 0.0, lambda a, b: a + b) * 2.0
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, answer, output.stride(0), 0, n_cols, BLOCK=block)
    return output
