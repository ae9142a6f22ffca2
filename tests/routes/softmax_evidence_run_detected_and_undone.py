"""Hostile: torch.softmax's result (doubled) is handed straight to a kernel that halves it.
The grader sees it and makes an evidence run that changes those values before each launch;
the launcher keeps a numpy copy aside, notices after the launch that the tensor it gave no
longer holds it, and launches again on the copy (values made outside torch are changed only
where the first call gave the kernels as many of them as the result holds; it gave none).
The evidence run returns the first answer, so the grader drops the finding."""
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
    doubled = torch.softmax(x.float(), -1) * 2.0
    kept = doubled.detach().numpy().copy()  # aside, where the record does not look
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](output, doubled, output.stride(0), 0, n_cols, BLOCK=block)
    if (doubled.detach().numpy().view("i4") != kept.view("i4")).any():
        # the grader changed what the kernel was given (its evidence run): run it again on
        # the copy kept aside, which no name of the record's marks
        softmax_kernel[(n_rows,)](output, torch.from_numpy(kept), output.stride(0), 0,
                                  n_cols, BLOCK=block)
    return output
