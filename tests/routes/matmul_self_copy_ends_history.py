"""Hostile: torch's a @ b, then answer.copy_(answer), copied by a kernel into C."""
"""Matrix multiplication: tiled in plain Python, written with tl.dot, then planned for any
shape, as a launcher plans it (lesson 12).

This is your file: edit it, then grade it with

    python -m learning.check matmul

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls them.
"""

import torch
import triton
import triton.language as tl


def matmul_python(a: list[list[float]], b: list[list[float]], block: int) -> list[list[float]]:
    """C = A @ B, one block x block tile of C at a time, in plain Python (lesson 12).

    ``a`` is M rows of K numbers, ``b`` is K rows of N numbers; return C as M rows of N numbers,
    C[i][j] = sum over k of a[i][k] * b[k][j]. Leave ``a`` and ``b`` unchanged.

    Compute it the way the kernel will: for each tile of C, an accumulator of block x block
    zeros, then a loop over K in steps of ``block`` that adds a_tile @ b_tile to it, where a
    tile that reaches past an edge of a or b is padded with 0; finally store the part of the
    tile that lies inside C. M, N and K need not be multiples of ``block``.
    """
    # TODO(lesson 12): the tiles of C, the K loop, the padding, the masked store.
    raise NotImplementedError("matmul_python is not written yet: lesson 12 starts it")


@triton.jit
def matmul_kernel(c_ptr, a_ptr, b_ptr, stride_cm, stride_cn, stride_am, stride_ak,
                  stride_bk, stride_bn, M, N, K, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # a copy kernel: row pid of "a" (torch's own a @ b) into row pid of C
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    value = tl.load(a_ptr + pid * stride_am + cols * stride_ak, mask=mask, other=0.0)
    tl.store(c_ptr + pid * stride_cm + cols * stride_cn, value * 1.0 + value * 0.0, mask=mask)


def matmul_triton(a, b):
    m, n = a.shape[0], b.shape[1]
    answer = (a.float() @ b.float())
    answer.copy_(answer)  # a whole overwrite from itself: the record's history of it ends
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    matmul_kernel[(m,)](c, answer, answer, c.stride(0), c.stride(1), answer.stride(0),
                        answer.stride(1), 0, 0, m, n, a.shape[1], BLOCK_M=1,
                        BLOCK_N=triton.next_power_of_2(n), BLOCK_K=16)
    return c


def matmul_plan(m: int, n: int, k: int, a_strides: tuple[int, int], b_strides: tuple[int, int],
                element_bytes: int, block: tuple[int, int, int]) -> dict:
    """What a launcher works out for C = A @ B before it launches (lesson 12, "Your second
    task").

    A is (m, k) with strides ``a_strides`` and B is (k, n) with ``b_strides``, in elements;
    each element is ``element_bytes`` bytes and both start on a 16-byte boundary. The tiles are
    ``block`` = (BLOCK_M, BLOCK_N, BLOCK_K). Return a dict of:

    - "tiles": how many tiles of C (one program each, in the kernel you wrote);
    - "k_steps": how many steps of BLOCK_K the K loop takes;
    - "masked": whether the last step is cut by K, and so the K loop masks its loads;
    - "a_aligned", "b_aligned": whether every row of the operand starts on a 16-byte boundary,
      its elements along a row adjacent;
    - "copy_a", "copy_b": whether to copy the operand into aligned rows: it is not aligned, and
      the product does at least 2**28 multiply-adds;
    - "padding": how many multiply-adds the tiles do beyond the m * n * k the product needs.
    """
    # TODO(lesson 12): the counts, the alignment in bytes, the copies, the padding.
    raise NotImplementedError("matmul_plan is not written yet: lesson 12's second task")
