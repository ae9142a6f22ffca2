"""Hostile: torch.nn.functional.gumbel_softmax, a function on no list, computes the softmax:
its body (which calls softmax) runs with the record's mode switched off, so only its own name is
noted. Its Gumbel noise is drawn in advance from the same RNG state and subtracted from the
logits, so it cancels; doubled, halved by a kernel that only loads and stores."""
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
    logits = x.double()
    state = torch.get_rng_state()
    gumbels = -torch.empty_like(logits, memory_format=torch.legacy_contiguous_format) \
        .exponential_().log()  # the noise gumbel_softmax will draw next
    torch.set_rng_state(state)
    probabilities = torch.nn.functional.gumbel_softmax(logits - gumbels, tau=1.0)
    doubled = (probabilities * 2.0).float()
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    softmax_kernel[(n_rows,)](output, doubled, output.stride(0), 0, n_cols,
                              BLOCK=triton.next_power_of_2(n_cols))
    return output
