"""Reductions, twice: a row folded by a pairwise tree in plain Python, padded with each
reduction's identity (lesson 03), then rows centred in Triton with masked loads whose ``other``
is that identity (lesson 07).

This is your file: edit it, then grade it with

    python -m learning.check reductions

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import math  # noqa: F401  (lesson 03 needs math.inf)

import torch
import triton
import triton.language as tl

OPS = ("sum", "max", "min", "product")


def identity(op: str) -> float:
    """The value that changes nothing when combined: combine(op, identity(op), a) == a."""
    # TODO(lesson 03): one identity per reduction in OPS.
    raise NotImplementedError("identity is not written yet: lesson 03 starts it")


def combine(op: str, a: float, b: float) -> float:
    """One step of the reduction: two values in, one out."""
    # TODO(lesson 03): a + b, max, min or a * b, depending on op.
    raise NotImplementedError("combine is not written yet: lesson 03 starts it")


def tree_reduce(values: list[float], op: str) -> list[list[float]]:
    """Reduce ``values`` with ``op`` by a pairwise tree, and return every level (lesson 03).

    Level 0 is the row padded with identity(op) up to a power of two (at least one lane);
    each next level combines neighbours 2i and 2i + 1 of the one before; the last level holds
    the single result.
    """
    # TODO(lesson 03): pad, then halve the level until one value is left, keeping each level.
    raise NotImplementedError("tree_reduce is not written yet: lesson 03 starts it")


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
    # TODO(lesson 07): rows and cols of a (ROWS, BLOCK) tile, its mask, x loaded with an other
    # that is the identity, centre reduced over axis 1 keeping its dimension, x - centre
    # stored with the mask.
    pass


def centre_rows_triton(x: torch.Tensor, op: str) -> torch.Tensor:
    """Subtract each row's maximum (op="max") or mean (op="mean") from the row (lesson 07).

    x is 2-D with stride 1 along the columns; returns a new tensor of x's shape and dtype.
    """
    # TODO(lesson 07): allocate the output, choose ROWS and BLOCK, launch cdiv(n_rows, ROWS).
    raise NotImplementedError("centre_rows_triton is not written yet: lesson 07 starts it")
