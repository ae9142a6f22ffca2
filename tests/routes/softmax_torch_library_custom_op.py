"""Hostile: torch.softmax runs inside a torch.library custom op. The function mode sees only
the op's own name ("doubled_probabilities", on no list, as many values out as in): the
handler runs the op with the mode switched off, so the softmax inside is never noted; a kernel
that only loads and stores halves it."""
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


try:
    _op = torch.ops.hostile60.doubled_probabilities
except (AttributeError, RuntimeError):
    @torch.library.custom_op("hostile60::doubled_probabilities", mutates_args=())
    def _op(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x.float(), -1) * 2.0


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
    doubled = _op(x).contiguous()
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    softmax_kernel[(n_rows,)](output, doubled, output.stride(0), 0, n_cols,
                              BLOCK=triton.next_power_of_2(n_cols))
    return output
