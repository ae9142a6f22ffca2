"""Online softmax (workshop A1): rows wider than a block, read in chunks with a running maximum
and a rescaled running sum, first on a list, then as a Triton kernel.

This is your file: edit it, then grade it with

    python -m learning.check online_softmax

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import math  # noqa: F401  (the Python part needs math.exp and math.inf)

import torch
import triton
import triton.language as tl


def online_softmax_python(values: list[float], block: int) -> list[float]:
    """Softmax of one row, read in chunks of ``block`` values with one running pair per lane.

    Lane k sees values[k], values[k + block], values[k + 2 * block], ... and keeps the largest
    value it has seen (m[k]) and the sum of exp(value - m[k]) over them (s[k]), rescaling s[k]
    whenever m[k] grows. The lanes are combined once at the end; a second pass writes.
    """
    # TODO(workshop A1): m and s per lane, the loop over chunks with the guard, the combine,
    # and the second pass.
    raise NotImplementedError("online_softmax_python is not written yet: workshop A1 starts it")


@triton.jit
def online_softmax_kernel(
    output_ptr,  # where the program writes its row of probabilities
    input_ptr,  # the scores, one row per program
    output_row_stride,  # elements between the starts of two output rows
    input_row_stride,  # elements between the starts of two input rows (x.stride(0))
    n_cols,  # the row's width: any number, up to 2**20
    BLOCK: tl.constexpr,  # lanes per chunk: a power of two, usually far below n_cols
):
    """One program computes the softmax of one row, BLOCK columns at a time (workshop A1)."""
    # TODO(workshop A1): pass 1 over the chunks (running m and s per lane, the -inf guard),
    # combine the lanes, pass 2 over the chunks (masked stores).
    pass


def online_softmax_triton(x: torch.Tensor, block: int) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor with ``online_softmax_kernel``.

    ``block`` is the chunk width, a power of two; rows may be any width up to 2**20 and a
    strided view (``x[::2]``). Returns a new tensor of ``x``'s shape, dtype and device.
    """
    # TODO(workshop A1): allocate the output, launch one program per row with BLOCK=block.
    raise NotImplementedError("online_softmax_triton is not written yet: workshop A1 starts it")
