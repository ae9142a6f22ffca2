"""Matrix multiplication, twice: tiled in plain Python, then written with tl.dot (lesson 12).

Reference solution for matmul.py.
"""

import torch
import triton
import triton.language as tl


def matmul_python(a: list[list[float]], b: list[list[float]], block: int) -> list[list[float]]:
    """C = A @ B, one block x block tile of C at a time, in plain Python (lesson 12)."""
    m, k, n = len(a), len(b), len(b[0])
    if any(len(row) != k for row in a):
        raise ValueError(f"a's rows must have {k} values, one for each row of b")
    c = [[0.0] * n for _ in range(m)]
    for i0 in range(0, m, block):  # one tile of C: rows i0..i0+block, columns j0..j0+block
        for j0 in range(0, n, block):
            acc = [[0.0] * block for _ in range(block)]  # the tile's accumulator
            for k0 in range(0, k, block):  # the K loop: one block of a's columns and b's rows
                # Load both tiles, padding with 0 (the identity of a sum) past every edge.
                a_tile = [[a[i][kk] if i < m and kk < k else 0.0 for kk in range(k0, k0 + block)]
                          for i in range(i0, i0 + block)]
                b_tile = [[b[kk][j] if kk < k and j < n else 0.0 for j in range(j0, j0 + block)]
                          for kk in range(k0, k0 + block)]
                for i in range(block):  # acc += a_tile @ b_tile
                    for j in range(block):
                        acc[i][j] += sum(a_tile[i][t] * b_tile[t][j] for t in range(block))
            for i in range(block):  # store the tile, leaving out the padding
                for j in range(block):
                    if i0 + i < m and j0 + j < n:
                        c[i0 + i][j0 + j] = acc[i][j]
    return c


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
    """One program computes one BLOCK_M x BLOCK_N tile of C = A @ B (lesson 12)."""
    pid_m = tl.program_id(0)  # which tile row
    pid_n = tl.program_id(1)  # which tile column
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    steps = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # float32 whatever the inputs
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + steps
        # Both tiles pad with 0 past every edge, K included: 0 * anything adds nothing.
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)  # (BLOCK_M, BLOCK_K)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)  # (BLOCK_K, BLOCK_N)
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul_triton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B for 2-D tensors with ``matmul_kernel``: any sizes, any strides (lesson 12)."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"expected two 2-D tensors, got {a.ndim} and {b.ndim} dimensions")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns "
                         "must equal b's rows")
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    block_m, block_n, block_k = 32, 32, 32
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    matmul_kernel[grid](c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1),
                        b.stride(0), b.stride(1), m, n, k,
                        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c


def matmul_plan(m: int, n: int, k: int, a_strides: tuple[int, int], b_strides: tuple[int, int],
                element_bytes: int, block: tuple[int, int, int]) -> dict:
    """What a launcher works out for C = A @ B before it launches (lesson 12)."""
    block_m, block_n, block_k = block
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    k_steps = triton.cdiv(k, block_k)

    def aligned(strides):  # adjacent elements, each row a whole number of 16-byte pieces
        return strides[1] == 1 and strides[0] * element_bytes % 16 == 0

    a_aligned, b_aligned = aligned(a_strides), aligned(b_strides)
    large = m * n * k >= 2**28
    return {
        "tiles": tiles,
        "k_steps": k_steps,
        "masked": k % block_k != 0,
        "a_aligned": a_aligned,
        "b_aligned": b_aligned,
        "copy_a": not a_aligned and large,
        "copy_b": not b_aligned and large,
        "padding": tiles * block_m * block_n * k_steps * block_k - m * n * k,
    }
