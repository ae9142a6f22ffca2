"""Softmax, twice: derived in plain Python (lesson 04), then written as a Triton kernel (lesson 08).

This is your file: edit it, then grade it with

    python -m learning.check softmax

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import math  # noqa: F401  (lesson 04 needs math.exp)

import torch
import triton
import triton.language as tl


def softmax_python(values: list[float]) -> list[float]:
    """Softmax of one row of numbers, in plain Python (lesson 04).

    Returns a new list of the same length whose values are positive and sum to one; ``values``
    itself must not change. It must not overflow for large inputs such as [1000, 1000].

    Write it as the six named steps of the lesson, one variable each: maximum, shifted,
    numerator, denominator, output, and return (store) the output.
    """
    # TODO(lesson 04): the six steps.
    raise NotImplementedError("softmax_python is not written yet: lesson 04 starts it")


@triton.jit
def softmax_kernel(
    output_ptr,  # where the program writes its row of probabilities
    input_ptr,  # the scores, one row per program
    output_row_stride,  # elements between the starts of two output rows
    input_row_stride,  # elements between the starts of two input rows (x.stride(0))
    n_cols,  # the row's width; lanes at or past it are padding
    BLOCK: tl.constexpr,  # lanes per program: a power of two >= n_cols
):
    """One program computes the softmax of one row (lesson 08).

    Preconditions: BLOCK >= n_cols and a power of two; the last dimension has stride 1.
    """
    # TODO(lesson 08): which row am I, load it (masked, padding -inf), the two reductions,
    # and a masked store.
    pass


def softmax_triton(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor with ``softmax_kernel`` (lesson 08).

    Returns a new tensor of the same shape, dtype and device as ``x``; ``x`` must not change.
    Rows may be a strided view (``x[::2]``): pass the row stride, don't assume n_cols.
    Compute in FP32 whatever the storage dtype (float32, float16, bfloat16).
    """
    # TODO(lesson 08): allocate the output, choose BLOCK, launch one program per row.
    raise NotImplementedError("softmax_triton is not written yet: lesson 08 starts it")
