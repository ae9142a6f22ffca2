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
def matmul_kernel(
    c_ptr,  # the output C, (M, N)
    a_ptr,  # the left operand A, (M, K)
    b_ptr,  # the right operand B, (K, N)
    stride_cm, stride_cn,  # elements between neighbours down a column and along a row of C
    stride_am, stride_ak,  # the same for A (a.stride(0), a.stride(1))
    stride_bk, stride_bn,  # the same for B (b.stride(0), b.stride(1))
    M, N, K,  # the sizes: C is M x N, the sum runs over K
    BLOCK_M: tl.constexpr,  # rows of C per program: a power of two (>= 16 before Triton 3.5)
    BLOCK_N: tl.constexpr,  # columns of C per program: a power of two (>= 16 before Triton 3.5)
    BLOCK_K: tl.constexpr,  # the step of the K loop, tl.dot's K: a power of two >= 16
):
    """One program computes one BLOCK_M x BLOCK_N tile of C = A @ B (lesson 12).

    Preconditions: every BLOCK a power of two; BLOCK_K at least 16 (tl.dot's K, the dimension
    a and b share, on a GPU), BLOCK_M and BLOCK_N at least 16 too before Triton 3.5; any M, N,
    K; any strides. Accumulate in float32 and store in C's dtype.
    """
    # TODO(lesson 12): which tile am I, a float32 accumulator, the K loop with masked loads
    # of a and b (padding 0) and tl.dot, then a masked store.
    pass


def matmul_triton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B for 2-D tensors with ``matmul_kernel`` (lesson 12).

    ``a`` is (M, K) and ``b`` is (K, N), both float32, float16 or bfloat16 of one dtype, and
    either may be a strided view (``b.T``, ``a[:, :K]``): pass their strides. Returns a new
    (M, N) tensor of a's dtype on a's device; ``a`` and ``b`` must not change. Tiles of 32 x 32
    with a K step of 32 suit the check (the interpreter runs one program at a time).
    """
    # TODO(lesson 12): allocate C, launch one program per tile (triton.cdiv), return C.
    raise NotImplementedError("matmul_triton is not written yet: lesson 12 starts it")


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
