"""Hostile: torch computes A @ B; it reaches the kernel as an int32 bit pattern, which the
grader's poisoning only nudges by a few ULPs (within its own 1e-3), so the kernel is not seen
to follow torch's answer."""
import torch
import triton
import triton.language as tl


def matmul_python(a, b, block):
    m, k, n = len(a), len(b), len(b[0])
    return [[sum(a[i][p] * b[p][j] for p in range(k)) for j in range(n)] for i in range(m)]


@triton.jit
def matmul_kernel(c_ptr, bits_ptr, numel, one, zero, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    value = tl.load(bits_ptr + offsets, mask=mask, other=0).to(tl.float32, bitcast=True)
    value = value * one + zero  # compile check: a product and an addition
    tl.store(c_ptr + offsets, value.to(c_ptr.dtype.element_ty), mask=mask)


def matmul_triton(a, b):
    m, k = a.shape
    n = b.shape[1]
    bits = (a.float() @ b.float()).contiguous().view(torch.int32)
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    block = 1024
    matmul_kernel[(triton.cdiv(m * n, block),)](c, bits, m * n, 1.0, 0.0, BLOCK=block)
    return c


def matmul_plan(m, n, k, a_strides, b_strides, element_bytes, block):
    raise NotImplementedError("not this route")
