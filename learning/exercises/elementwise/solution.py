"""Elementwise work, twice: add-then-ReLU cut into blocks by hand in plain Python (lesson 01),
then the same blocks as a Triton kernel (lesson 06).

Reference solution for elementwise.py.
"""

import math

import torch
import triton
import triton.language as tl


def add_relu_program(pid: int, x: list[float], y: list[float], out: list[float],
                     BLOCK: int) -> None:
    """What one program does: its BLOCK lanes, masked, write relu(x + y) into ``out``."""
    n = len(x)
    offsets = [pid * BLOCK + lane for lane in range(BLOCK)]  # this program's elements
    mask = [offset < n for offset in offsets]  # lanes past the end hold no element
    for offset, valid in zip(offsets, mask):
        if valid:
            out[offset] = max(x[offset] + y[offset], 0.0)


def add_relu_python(x: list[float], y: list[float], BLOCK: int) -> list[float]:
    """relu(x + y) for two equally long lists, computed by programs of BLOCK lanes (lesson 01)."""
    n = len(x)
    out = [math.nan] * n  # NaN until a program writes it, as the grader fills GPU outputs
    grid = (n + BLOCK - 1) // BLOCK  # ceiling division: the last block may be partly empty
    for pid in range(grid):
        add_relu_program(pid, x, y, out, BLOCK)
    return out


@triton.jit
def add_relu_kernel(
    out_ptr,  # where the program writes its block of results
    x_ptr,  # the first input
    y_ptr,  # the second input, as long as the first
    n,  # the number of elements; lanes at or past it are masked off
    BLOCK: tl.constexpr,  # lanes per program, a power of two
):
    """One program computes relu(x + y) for BLOCK consecutive elements (lesson 06)."""
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    out = tl.maximum(x + y, 0.0)
    tl.store(out_ptr + offsets, out, mask=mask)


def add_relu_triton(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """relu(x + y) for two 1-D tensors of the same length with ``add_relu_kernel`` (lesson 06)."""
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"expected two 1-D tensors of one length, got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    add_relu_kernel[grid](out, x, y, n, BLOCK=BLOCK)
    return out
