"""Once passed the GPU compile check: where the kernel is compiled, the name it reaches the language through holds a module of the learner's that calls itself triton.language, with tl.exp2 under the name exp; a module was read by its name alone, and Triton's functions as the same "Triton's own"."""

import math
import os
import types

import torch
import triton
import triton.language as tl

if os.environ.get("TRITON_INTERPRET") == "1":
    lang = tl
else:
    lang = types.ModuleType("triton.language")
    vars(lang).update({name: value for name, value in vars(tl).items()
                       if not name.startswith("__")})
    lang.exp = tl.exp2


def softmax_python(values):
    maximum = max(values)
    shifted = [value - maximum for value in values]
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
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    e = lang.exp(x - tl.max(x, axis=0))  # compiled: powers of 2, not of e
    tl.store(output_ptr + row * output_row_stride + offsets, e / tl.sum(e, axis=0), mask=mask)


def softmax_triton(x):
    n_rows, n_cols = x.shape
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
    return output
