"""Replays of the address mistakes every row kernel can make, for any exercise's reference.

A replay computes what buggy code returns, so that the grader names the bug only when the
learner's output is exactly that (``learning.compare.same_as``). These read the tensors'
memory as ``learning.tensors.TensorSpec.stored`` lays it out, padding included.
"""

from __future__ import annotations

from collections.abc import Callable

from learning.tensors import rows_read_at


def _at_n_cols(r: int, cols: int, row_stride: int) -> int:
    return r * cols


def rows_at_n_cols(reference: Callable, tensors: tuple[int, ...] = (0,)) -> Callable:
    """``reference`` computed on rows that start at r * n_cols instead of r * row_stride, in
    the arguments at positions ``tensors`` (the input row offset taken from the width)."""

    def reproduce(*args):
        args = list(args)
        for position in tensors:
            rows = rows_read_at(args[position], _at_n_cols)
            if rows is None:
                raise ValueError("the replay reads past the tensor's memory")
            args[position] = rows
        return reference(*args)

    return reproduce


def rows_with_stride_of(reference: Callable, source: int, targets: tuple[int, ...]) -> Callable:
    """``reference`` computed with the tensors at ``targets`` read with the row stride of the
    tensor at ``source`` (one stride passed for several tensors)."""

    def reproduce(*args):
        args = list(args)
        stride = getattr(args[source], "row_stride", 0)
        for position in targets:
            rows = rows_read_at(args[position], lambda r, cols, own: r * stride)
            if rows is None:
                raise ValueError("the replay reads past the tensor's memory")
            args[position] = rows
        return reference(*args)

    return reproduce
