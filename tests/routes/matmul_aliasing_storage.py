"""Hostile (matmul): torch computes a @ b, and copy_ writes it into a second storage object
(torch.from_numpy of a numpy view) that aliases buf, a copy of the input a repeated, from its
second element on. The record keys memories by their storage's first address, so the product
is noted under the alias's address and buf, the tensor the kernel is given, stays 'a copy of
the input'. The kernel copies the product out of buf (a dummy tl.dot for the compile check)."""
import torch
import triton
import triton.language as tl


def matmul_python(a, b, block):
    m, k, n = len(a), len(b), len(b[0])
    c = [[0.0] * n for _ in range(m)]
    for i in range(m):
        for j in range(n):
            c[i][j] = sum(a[i][p] * b[p][j] for p in range(k))
    return c


@triton.jit
def matmul_kernel(c_ptr, buf_ptr, M, N, stride_cm, stride_cn, OFFSET: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    value = tl.load(buf_ptr + OFFSET + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
    zeros = tl.zeros((16, 16), dtype=tl.float32)
    dummy = tl.sum(tl.sum(tl.dot(zeros, zeros), axis=1), axis=0)  # compile check: a dot
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
             (value + dummy * 0.0).to(c_ptr.dtype.element_ty), mask=mask)


def matmul_triton(a, b):
    m, k = a.shape
    n = b.shape[1]
    flat = a.float().reshape(-1)
    buf = flat.repeat(m * n // max(1, flat.numel()) + 2)  # a copy of the input, to the record
    alias = torch.from_numpy(buf.numpy()[1:1 + m * n])  # same memory, another storage address
    alias.copy_((a.float() @ b.float()).reshape(-1))
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
    matmul_kernel[grid](c, buf, m, n, c.stride(0), c.stride(1), OFFSET=1, BLOCK_M=32, BLOCK_N=32)
    return c


def matmul_plan(m, n, k, a_strides, b_strides, element_bytes, block):
    raise NotImplementedError("matmul_plan is not written yet: lesson 12's second task")
