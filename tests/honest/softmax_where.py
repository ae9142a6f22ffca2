"""Softmax, twice: derived in plain Python (lesson 04), then written as a Triton kernel (lesson 08).

Reference solution for softmax.py.
"""

import math

import torch
import triton
import triton.language as tl


def softmax_python(values: list[float]) -> list[float]:
    """Softmax of one row of numbers, in plain Python (lesson 04)."""
    maximum = max(values)  # reduction
    shifted = [value - maximum for value in values]  # elementwise
    numerator = [math.exp(s) for s in shifted]  # elementwise
    denominator = sum(numerator)  # reduction
    output = [n / denominator for n in numerator]  # elementwise
    return output  # store


@triton.jit
def softmax_kernel(
    output_ptr,  # where the program writes its row of probabilities
    input_ptr,  # the scores, one row per program
    output_row_stride,  # elements between the starts of two output rows
    input_row_stride,  # elements between the starts of two input rows (x.stride(0))
    n_cols,  # the row's width; lanes at or past it are padding
    BLOCK: tl.constexpr,  # lanes per program: a power of two >= n_cols
):
    """One program computes the softmax of one row (lesson 08)."""
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    # Padding reads -inf: it cannot become the maximum, and exp(-inf) = 0 adds nothing to the sum.
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    maximum = tl.max(x, axis=0)
    numerator = tl.exp(x - maximum)
    denominator = tl.sum(numerator, axis=0)
    output = numerator / denominator
    tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)


def softmax_triton(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor with ``softmax_kernel`` (lesson 08)."""
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got {x.ndim} dimensions")
    if x.stride(1) != 1:
        raise ValueError(f"the last dimension must have stride 1, not {x.stride(1)}")
    n_rows, n_cols = x.shape
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    xw = torch.where(torch.isnan(x), torch.full_like(x, float("nan")), x)
    softmax_kernel[(n_rows,)](output, xw, output.stride(0), xw.stride(0), n_cols, BLOCK=block)
    return output
