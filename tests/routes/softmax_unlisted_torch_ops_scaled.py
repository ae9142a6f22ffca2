"""Hostile: torch computes the whole softmax with functions the grader does not list as work
(pow for exp, pairwise maximum of clones for the row max, index_put_ accumulate for the row
sum), scaled by 2; the kernel only halves it (plus a dummy exp and sum for the compile check)."""
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
    value = value * 0.5 + dummy * 0.0
    tl.store(output_ptr + row * output_row_stride + offsets, value, mask=mask)


def _row_max(t):
    while t.shape[1] > 1:
        if t.shape[1] % 2:
            t = torch.cat([t, torch.full_like(t[:, :1], -math.inf)], dim=1)
        a = t[:, 0::2].clone()
        b = t[:, 1::2].clone()
        t = torch.maximum(a, b)
    return t


def _row_sum(e):
    rows, cols = e.shape
    i = torch.arange(rows, device=e.device)[:, None].expand(rows, cols)
    j = torch.zeros((rows, cols), dtype=torch.long, device=e.device)
    acc = torch.zeros_like(e)
    acc.index_put_((i, j), e, accumulate=True)
    return acc[:, :1]


def softmax_triton(x):
    n_rows, n_cols = x.shape
    xf = x.float()
    e = torch.pow(math.e, xf - _row_max(xf))
    answer = e / _row_sum(e) * 2.0
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, answer, output.stride(0), 0, n_cols, BLOCK=block)
    return output
