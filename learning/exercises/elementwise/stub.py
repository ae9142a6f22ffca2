"""Elementwise work, twice: add-then-ReLU cut into blocks by hand in plain Python (lesson 01),
then the same blocks as a Triton kernel (lesson 06).

This is your file: edit it, then grade it with

    python -m learning.check elementwise

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import math  # noqa: F401  (lesson 01 starts the output as math.nan)

import torch
import triton
import triton.language as tl


def add_relu_program(pid: int, x: list[float], y: list[float], out: list[float],
                     BLOCK: int) -> None:
    """What one program does: its BLOCK lanes, masked, write relu(x + y) into ``out``."""
    # TODO(lesson 01): offsets of this program's lanes, the mask, then the masked writes.
    raise NotImplementedError("add_relu_program is not written yet: lesson 01 starts it")


def add_relu_python(x: list[float], y: list[float], BLOCK: int) -> list[float]:
    """relu(x + y) for two equally long lists, computed by programs of BLOCK lanes (lesson 01).

    Returns a new list of len(x) values, max(x[i] + y[i], 0.0); x and y must not change.
    Start the output as NaN everywhere, launch enough programs to cover every element (the
    last block may be partly empty) and let each one call ``add_relu_program``.
    """
    # TODO(lesson 01): the output, the grid (ceiling division), one call per program.
    raise NotImplementedError("add_relu_python is not written yet: lesson 01 starts it")


@triton.jit
def add_relu_kernel(
    out_ptr,  # where the program writes its block of results
    x_ptr,  # the first input
    y_ptr,  # the second input, as long as the first
    n,  # the number of elements; lanes at or past it are masked off
    BLOCK: tl.constexpr,  # lanes per program, a power of two
):
    """One program computes relu(x + y) for BLOCK consecutive elements (lesson 06)."""
    # TODO(lesson 06): which program am I, my offsets, the mask, two loads, a masked store.
    pass


def add_relu_triton(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """relu(x + y) for two 1-D tensors of the same length with ``add_relu_kernel`` (lesson 06).

    Returns a new tensor of x's shape, dtype and device; x and y must not change. The length
    need not be a multiple of BLOCK: 1, 17, 1000 and 4097 are all graded.
    """
    # TODO(lesson 06): allocate the output, choose BLOCK, launch triton.cdiv(n, BLOCK) programs.
    raise NotImplementedError("add_relu_triton is not written yet: lesson 06 starts it")
