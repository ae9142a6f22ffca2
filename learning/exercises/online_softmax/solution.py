"""Online softmax (workshop A1): rows wider than a block, read in chunks with a running maximum
and a rescaled running sum, first on a list, then as a Triton kernel.

Reference solution for online_softmax.py.
"""

import math

import torch
import triton
import triton.language as tl


def online_softmax_python(values: list[float], block: int) -> list[float]:
    """Softmax of one row, read in chunks of ``block`` values with one running pair per lane.

    Lane k sees values[k], values[k + block], values[k + 2 * block], ... and keeps the largest
    value it has seen (m[k]) and the sum of exp(value - m[k]) over them (s[k]), rescaling s[k]
    whenever m[k] grows. The lanes are combined once at the end; a second pass writes.
    """
    m = [-math.inf] * block  # running maximum per lane
    s = [0.0] * block  # running sum per lane, measured from m
    for start in range(0, len(values), block):
        for lane, x in enumerate(values[start:start + block]):
            m_new = max(m[lane], x)
            # the guard: a lane that has seen only -inf measures from 0, not from -inf
            ref = 0.0 if m_new == -math.inf else m_new
            s[lane] = s[lane] * math.exp(m[lane] - ref) + math.exp(x - ref)
            m[lane] = m_new
    row_max = max(m)
    # combine the lanes: bring every s[k] from its own maximum to the row's
    total = sum(s_k * math.exp(m_k - row_max) for m_k, s_k in zip(m, s))
    return [math.exp(x - row_max) / total for x in values]


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
    row = tl.program_id(0)
    x_row = input_ptr + row * input_row_stride
    y_row = output_ptr + row * output_row_stride
    lanes = tl.arange(0, BLOCK)
    # pass 1: per lane, the largest value seen (m) and the sum of exp(x - m) over them (s)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offsets = start + lanes
        x = tl.load(x_row + offsets, mask=offsets < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # the guard: while a lane has seen only -inf, measure from 0 so that s stays 0
        ref = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - ref) + tl.exp(x - ref)
        m = m_new
    # combine the lanes: bring every s_k from its own maximum to the row's
    row_max = tl.max(m, axis=0)
    # a lane that saw only -inf adds 0 * exp(-inf) = 0; a row of only -inf gets NaN, as in torch
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    # pass 2: read the row again and write exp(x - row_max) / total
    for start in range(0, n_cols, BLOCK):
        offsets = start + lanes
        mask = offsets < n_cols
        x = tl.load(x_row + offsets, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + offsets, tl.exp(x - row_max) / total, mask=mask)


def online_softmax_triton(x: torch.Tensor, block: int) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor with ``online_softmax_kernel``.

    ``block`` is the chunk width, a power of two; rows may be any width up to 2**20 and a
    strided view (``x[::2]``). Returns a new tensor of ``x``'s shape, dtype and device.
    """
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got {x.ndim} dimensions")
    if x.stride(1) != 1:
        raise ValueError(f"the last dimension must have stride 1, not {x.stride(1)}")
    if block < 1 or block & (block - 1):
        raise ValueError(f"block must be a power of two, not {block}")
    n_rows, n_cols = x.shape
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    online_softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols,
                                     BLOCK=block)
    return output
