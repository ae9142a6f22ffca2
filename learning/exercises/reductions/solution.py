"""Reductions, twice: a row folded by a pairwise tree in plain Python, padded with each
reduction's identity (lesson 03), then rows centred in Triton with masked loads whose ``other``
is that identity (lesson 07).

Reference solution for reductions.py.
"""

import math

import torch
import triton
import triton.language as tl

OPS = ("sum", "max", "min", "product")


def identity(op: str) -> float:
    """The value that changes nothing when combined: combine(op, identity(op), a) == a."""
    return {"sum": 0.0, "max": -math.inf, "min": math.inf, "product": 1.0}[op]


def combine(op: str, a: float, b: float) -> float:
    """One step of the reduction: two values in, one out."""
    if op == "sum":
        return a + b
    if op == "max":
        return max(a, b)
    if op == "min":
        return min(a, b)
    if op == "product":
        return a * b
    raise ValueError(f"unknown reduction {op!r}; use one of {OPS}")


def tree_reduce(values: list[float], op: str) -> list[list[float]]:
    """Reduce ``values`` with ``op`` by a pairwise tree, and return every level (lesson 03).

    Level 0 is the row padded with identity(op) up to a power of two (at least one lane);
    each next level combines neighbours 2i and 2i + 1 of the one before; the last level holds
    the single result.
    """
    width = 1
    while width < len(values):
        width *= 2
    level = [float(v) for v in values] + [identity(op)] * (width - len(values))
    levels = [level]
    while len(level) > 1:
        level = [combine(op, level[i], level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


@triton.jit
def centre_rows_kernel(
    out_ptr,  # where the centred rows go
    x_ptr,  # the rows to centre
    out_row_stride,  # elements between the starts of two output rows
    x_row_stride,  # elements between the starts of two input rows (x.stride(0))
    n_rows,  # rows at or past it are masked off
    n_cols,  # columns at or past it are masked off
    OP: tl.constexpr,  # "max" or "mean": the statistic subtracted from each row
    ROWS: tl.constexpr,  # rows per program, a power of two
    BLOCK: tl.constexpr,  # columns per row, a power of two >= n_cols
):
    """One program centres ROWS rows: x - max(row) or x - mean(row) (lesson 07)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]  # (ROWS, 1)
    cols = tl.arange(0, BLOCK)[None, :]  # (1, BLOCK)
    mask = (rows < n_rows) & (cols < n_cols)  # (ROWS, BLOCK)
    if OP == "max":
        # Padding reads -inf, the identity of max: it can never be a row's maximum.
        x = tl.load(x_ptr + rows * x_row_stride + cols, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        centre = tl.max(x, axis=1, keep_dims=True)  # (ROWS, 1): broadcasts back over BLOCK
    else:
        # Padding reads 0, the identity of sum; the mean divides by n_cols, not by BLOCK.
        x = tl.load(x_ptr + rows * x_row_stride + cols, mask=mask, other=0.0)
        x = x.to(tl.float32)
        centre = tl.sum(x, axis=1, keep_dims=True) / n_cols  # (ROWS, 1)
    tl.store(out_ptr + rows * out_row_stride + cols, x - centre, mask=mask)


def centre_rows_triton(x: torch.Tensor, op: str) -> torch.Tensor:
    """Subtract each row's maximum (op="max") or mean (op="mean") from the row (lesson 07).

    x is 2-D with stride 1 along the columns; returns a new tensor of x's shape and dtype.
    """
    if op not in ("max", "mean"):
        raise ValueError(f"op must be 'max' or 'mean', not {op!r}")
    if x.ndim != 2 or x.stride(1) != 1:
        raise ValueError(f"expected a 2-D tensor with contiguous columns, got shape "
                         f"{tuple(x.shape)} and strides {x.stride()}")
    n_rows, n_cols = x.shape
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    ROWS = 4
    grid = (triton.cdiv(n_rows, ROWS),)
    centre_rows_kernel[grid](out, x, out.stride(0), x.stride(0), n_rows, n_cols, OP=op,
                             ROWS=ROWS, BLOCK=triton.next_power_of_2(n_cols))
    return out
