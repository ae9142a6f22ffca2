"""RMSNorm, twice: derived in plain Python (lesson 05), then written as a Triton kernel (lesson 09).

Reference solution for rmsnorm.py.
"""

import math

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
    largest = max(abs(v) for v in values)  # reduction: the row's largest magnitude
    if largest == 0.0:
        return [0.0 for _ in values]  # 0 / sqrt(0 + eps) * w = 0
    scaled = [v / largest for v in values]  # elementwise: every |scaled| <= 1, no square overflows
    mean_square = sum(s * s for s in scaled) / len(scaled)  # reduction
    # eps in the same units: sqrt(mean(x**2) + eps) = largest * sqrt(mean_square + eps / largest**2)
    rms = math.sqrt(mean_square + eps / largest / largest)
    output = [s / rms * w for s, w in zip(scaled, weight)]  # elementwise
    return output


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
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    # Padding reads 0, the identity of a sum: 0 * 0 adds nothing to the sum of squares.
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=0.0)
    x = x.to(tl.float32)  # square and add in FP32, whatever the storage dtype
    mean_square = tl.sum(x * x, axis=0) / n_cols  # n_cols, never BLOCK: padding is not data
    inverse_rms = 1.0 / tl.sqrt(mean_square + eps)
    w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    output = x * inverse_rms * w
    tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)


def rmsnorm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension of a 2-D tensor with ``rmsnorm_kernel`` (lesson 09).

    Returns a new tensor of the same shape, dtype and device as ``x``; ``x`` and ``weight`` must
    not change. ``weight`` has shape (n_cols,). Rows may be a strided view (``x[::2]``): pass the
    row stride, don't assume n_cols. Compute in FP32 whatever the storage dtype (float32,
    float16, bfloat16).
    """
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got {x.ndim} dimensions")
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:
        raise ValueError(f"the last dimension must have stride 1, not {x.stride(1)}")
    if weight.shape != (n_cols,):
        raise ValueError(f"weight has shape {tuple(weight.shape)}; expected ({n_cols},)")
    weight = weight.contiguous()
    output = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(n_cols)
    rmsnorm_kernel[(n_rows,)](output, x, weight, output.stride(0), x.stride(0), n_cols, eps,
                              BLOCK=block)
    return output
