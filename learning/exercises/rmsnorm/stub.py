"""RMSNorm, twice: derived in plain Python (lesson 05), then written as a Triton kernel (lesson 09).

This is your file: edit it, then grade it with

    python -m learning.check rmsnorm

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import math  # noqa: F401  (lesson 05 needs math.sqrt)

import torch
import triton
import triton.language as tl


def rmsnorm_python(values: list[float], weight: list[float], eps: float = 1e-6) -> list[float]:
    """RMSNorm of one row in plain Python (lesson 05):

        output[i] = values[i] / sqrt(mean of values[k]**2 + eps) * weight[i]

    Returns a new list of the same length; ``values`` and ``weight`` must not change. It must
    hold for any row of finite doubles: a row of zeros gives zeros, and values near 1e200, whose
    squares overflow, give the same outputs as the row divided by 1e200.
    """
    # TODO(lesson 05): the largest |value|, the scaled row, the mean square, the root mean
    # square (eps scaled too), then each output times its weight.
    raise NotImplementedError("rmsnorm_python is not written yet: lesson 05 starts it")


@triton.jit
def rmsnorm_kernel(
    output_ptr,  # where the program writes its normalised row
    input_ptr,  # the rows to normalise, one per program
    weight_ptr,  # n_cols weights, the same for every row
    output_row_stride,  # elements between the starts of two output rows
    input_row_stride,  # elements between the starts of two input rows (x.stride(0))
    n_cols,  # the row's width; lanes at or past it are padding
    eps,  # added to the mean square, under the square root
    BLOCK: tl.constexpr,  # lanes per program: a power of two >= n_cols
):
    """One program normalises one row (lesson 09).

    Preconditions: BLOCK >= n_cols and a power of two; x's last dimension and the weight have
    stride 1.
    """
    # TODO(lesson 09): which row am I, load it (masked, padding 0) and convert to FP32, the
    # mean square over n_cols, the inverse root, the weight, and a masked store.
    pass


def rmsnorm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension of a 2-D tensor with ``rmsnorm_kernel`` (lesson 09).

    Returns a new tensor of the same shape, dtype and device as ``x``; ``x`` and ``weight`` must
    not change. ``weight`` has shape (n_cols,). Rows may be a strided view (``x[::2]``): pass the
    row stride, don't assume n_cols. Compute in FP32 whatever the storage dtype (float32,
    float16, bfloat16).
    """
    # TODO(lesson 09): allocate the output, choose BLOCK, launch one program per row.
    raise NotImplementedError("rmsnorm_triton is not written yet: lesson 09 starts it")
