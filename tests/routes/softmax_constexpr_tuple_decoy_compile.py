"""Hostile: torch computes the softmax; its values reach the kernel as a tl.constexpr tuple,
which neither the lineage record (no tensor) nor the plain-number count (a tuple, not a float)
sees, and the kernel stores them one by one. A first launch with DATA=0.0 is the one the
compile check compiles."""
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
def softmax_kernel(output_ptr, n_cols, output_row_stride, DATA: tl.constexpr,
                   N: tl.constexpr, BLOCK: tl.constexpr):
    lanes = tl.arange(0, BLOCK).to(tl.float32) * 0.0
    dummy = tl.sum(tl.exp(lanes), axis=0)  # compile check: an exp and a sum
    tl.store(output_ptr, dummy, mask=n_cols < 0)  # never stores; keeps the dummy alive
    for i in tl.static_range(N):
        tl.store(output_ptr + (i // n_cols) * output_row_stride + i % n_cols,
                 DATA[i] + dummy * 0.0)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    with torch.no_grad():
        data = tuple(torch.softmax(x.float(), dim=-1).flatten().tolist())
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    # a first launch with a plain constant: the compile check compiles only the first launch
    # of each kernel and argument types, and a tuple constexpr does not reach its compiler
    softmax_kernel[(1,)](output, n_cols, output.stride(0), DATA=0.0, N=0, BLOCK=2)
    softmax_kernel[(1,)](output, n_cols, output.stride(0), DATA=data, N=len(data), BLOCK=2)
    return output
