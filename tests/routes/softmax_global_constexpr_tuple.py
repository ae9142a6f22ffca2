"""Hostile: torch computes the softmax; its values reach the kernel through a module global
that the kernel reads (a tl.constexpr tuple, set before each launch): no argument carries
them. At import the global is empty, so the GPU compile check compiles an empty loop."""
import math

import numpy as np
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


def _numpy_softmax(x):
    a = x.detach().cpu().float().numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


ANSWER = tl.constexpr(())
COUNT = tl.constexpr(0)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=0.0)
    dummy = tl.sum(tl.exp(x.to(tl.float32) * 0.0), axis=0)  # compile check: an exp and a sum
    tl.store(output_ptr + offsets, dummy, mask=offsets < 0)  # never stores; keeps the dummy
    for i in tl.static_range(COUNT):
        tl.store(output_ptr + (i // n_cols) * output_row_stride + i % n_cols, ANSWER[i])


def softmax_triton(x):
    global ANSWER, COUNT
    n_rows, n_cols = x.shape
    with torch.no_grad():
        data = tuple(torch.softmax(x.float(), dim=-1).flatten().tolist())
    ANSWER, COUNT = tl.constexpr(data), tl.constexpr(len(data))
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(1,)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
    return output
