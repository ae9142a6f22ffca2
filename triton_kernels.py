"""Reference Triton kernels the lessons read: softmax, its backward pass, and RMSNorm.

In the lessons' order: 1. ``_softmax``, one row per program (lesson 08), and
``_softmax_multi_row`` for narrow rows; 2. ``_softmax_looped``, rows wider than a block
(workshop A1); 3. ``_softmax_backward`` and its multi-row and looped forms (lesson 11);
4. ``_rmsnorm`` and its forms (lesson 09); 5. the launchers ``softmax``, ``softmax_backward``
and ``rmsnorm``; 6. the launchers as PyTorch operators (lesson 11). Every kernel loads float32,
float16 or bfloat16, computes in float32 and stores in its output's dtype.

The launchers ask ``_plan`` in lab/production.py, the production layer, which kernel
fits the rows; on a GPU it also names kernels of its own for wide and 16-bit rows. Importing
defines the kernels and does nothing else: whether they run in Triton's interpreter or compiled
for the CUDA GPU is decided before the import (``learning.grader.mode.select()``).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from lab import production as fast
from lab.production import (
    MAX_COLS,
    MAX_GPU_SINGLE_BLOCK,
    MAX_SINGLE_BLOCK,
    STRATEGIES,
    Plan,
    _max_pieces,
    _plan,
    launch_softmax,
    launch_softmax_backward,
    wrap_triton,
)

__all__ = ["MAX_COLS", "MAX_GPU_SINGLE_BLOCK", "MAX_SINGLE_BLOCK", "STRATEGIES", "Plan", "rmsnorm",
           "softmax", "softmax_backward"]

# ---------------------------------------------------------------------------------------------
# 1. Softmax, one row per program
# ---------------------------------------------------------------------------------------------
#
# Each program loads its whole row as one block of BLOCK lanes (a power of two, as tl.arange
# needs), so the row is read once however often it is used. The lanes past the end read
# `other`, the identity of the reductions that follow: -inf never wins a maximum and
# exp(-inf) = 0 adds nothing to the sum (0 instead would join the sum, and be the maximum of an
# all-negative row). A row that is -inf everywhere gives (-inf) - (-inf) = NaN, as in PyTorch.


@triton.jit
def _softmax(
    output_ptr,  # *T: output rows, column stride 1
    input_ptr,  # *T: input rows, column stride 1
    output_row_stride,  # elements from one output row to the next
    input_row_stride,  # elements from one input row to the next (any value: x[::2] works)
    n_cols,  # columns in a row, n_cols <= BLOCK
    BLOCK: tl.constexpr,  # lanes per program: a power of two >= n_cols
):
    # one program per row; int64 so that row * stride cannot overflow on large tensors
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    # x_j for j < n_cols, -inf in the padded lanes (the identity of max; exp(-inf) = 0)
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=-float("inf"))
    # compute in float32, whatever the storage dtype
    x = x.to(tl.float32)
    # maximum = max_j x_j (first reduction)
    maximum = tl.max(x, axis=0)
    # numerator_j = exp(x_j - maximum), at most exp(0) = 1: cannot overflow
    numerator = tl.exp(x - maximum)
    # denominator = sum_j numerator_j (second reduction); the padded lanes add exp(-inf) = 0
    denominator = tl.sum(numerator, axis=0)
    # one division per row, then one multiply per element
    output = numerator * (1.0 / denominator)
    # store the real columns only, converted to the output's dtype
    output = output.to(output_ptr.dtype.element_ty)
    tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)


# Narrow rows (128 float32 columns are 512 bytes, too little to keep a program busy) are
# grouped into (ROWS, BLOCK) tiles: the same computation with reductions along axis 1, one per
# row. exp(z) is written 2 ** (z * log2(e)), as tl.exp computes it too (workshop A1 compares).
_LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _softmax_multi_row(
    output_ptr, input_ptr, output_row_stride, input_row_stride,  # as in _softmax
    n_rows,  # rows in the tensor: the last tile may hang over the end
    n_cols,  # columns in a row, n_cols <= BLOCK
    ROWS: tl.constexpr,  # rows per program, a power of two
    BLOCK: tl.constexpr,  # lanes per row, a power of two >= n_cols
):
    # this program's rows and the columns: a (ROWS, BLOCK) tile
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    offsets = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (offsets[None, :] < n_cols)
    # both tiles' addresses before the load (computed after the reductions, the store's made
    # 4-column float32 rows slower on an H200: lab/results/multi_row_ab.txt)
    input_ptrs = input_ptr + rows[:, None] * input_row_stride + offsets[None, :]
    output_ptrs = output_ptr + rows[:, None] * output_row_stride + offsets[None, :]
    x = tl.load(input_ptrs, mask=mask, other=-float("inf")).to(tl.float32)
    # maximum[r] = max_c x[r, c]
    maximum = tl.max(x, axis=1)
    # numerator[r, c] = exp(x[r, c] - maximum[r])
    numerator = tl.exp2((x - maximum[:, None]) * _LOG2E)
    # one reciprocal of the denominator per row
    inverse = 1.0 / tl.sum(numerator, axis=1)
    output = (numerator * inverse[:, None]).to(output_ptr.dtype.element_ty)
    tl.store(output_ptrs, output, mask=mask)


# ---------------------------------------------------------------------------------------------
# 2. Softmax, rows wider than one block (workshop A1)
# ---------------------------------------------------------------------------------------------
#
# A row wider than a block is read in chunks of BLOCK columns, and each lane keeps a running
# maximum m and sum s, rescaling s whenever m grows: m_new = max(m, x),
# s = s * exp(m - m_new) + exp(x - m_new). After the loop the lanes are combined once. The
# guard: a lane that has seen only -inf has m = m_new = -inf, and (-inf) - (-inf) = NaN would
# poison its sum; measured from m_ref = 0 instead, both terms are exp(-inf) = 0. The second pass
# reads the row again from its end, where the chunks are likeliest still in L2, and few rows
# are in flight: a persistent grid, each program looping over rows p, p + P, p + 2P, ...


@triton.jit
def _softmax_looped(
    output_ptr, input_ptr, output_row_stride, input_row_stride,  # as in _softmax
    n_rows,  # rows in the tensor; program p takes rows p, p + P, p + 2P, ... (P programs)
    n_cols,  # columns in a row, any number up to 2**20
    BLOCK: tl.constexpr,  # columns per chunk, a power of two
    STAGES: tl.constexpr,  # chunks in flight per program (software pipelining of the loads)
):
    lanes = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(n_cols, BLOCK)
    for row in tl.range(tl.program_id(0).to(tl.int64), n_rows, tl.num_programs(0)):
        x_row = input_ptr + row * input_row_stride
        y_row = output_ptr + row * output_row_stride
        # pass 1: per lane, the running maximum m and the sum s of exp(x - m) so far
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            offsets = start + lanes
            mask = offsets < n_cols
            x = tl.load(x_row + offsets, mask=mask, other=-float("inf"),
                        eviction_policy="evict_last").to(tl.float32)
            m_new = tl.maximum(m, x)
            # the guard: a lane that has seen only -inf measures from 0, not from -inf
            m_ref = tl.where(m_new == -float("inf"), 0.0, m_new)
            # s = s * exp(m - m_ref) + exp(x - m_ref); both exponents are <= 0
            s = s * tl.exp2((m - m_ref) * _LOG2E) + tl.exp2((x - m_ref) * _LOG2E)
            m = m_new
        # combine the lanes: row_max = max_k m_k, total = sum_k s_k * exp(m_k - row_max)
        row_max = tl.max(m, axis=0)
        total = tl.sum(s * tl.exp2((m - row_max) * _LOG2E), axis=0)
        inverse = 1.0 / total
        # pass 2, last chunk first: y = exp(x - row_max) / total
        for i in tl.range(0, n_chunks, num_stages=STAGES):
            offsets = (n_chunks - 1 - i) * BLOCK + lanes
            mask = offsets < n_cols
            x = tl.load(x_row + offsets, mask=mask, other=-float("inf"),
                        eviction_policy="evict_first")
            y = tl.exp2((x.to(tl.float32) - row_max) * _LOG2E) * inverse
            tl.store(y_row + offsets, y.to(output_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------
# 3. Softmax backward (lesson 11)
# ---------------------------------------------------------------------------------------------
#
# dx_i = y_i * (dy_i - dot) with dot = sum_j y_j * dy_j: one reduction, then elementwise work,
# the forward pass's shape with two inputs. The padded lanes load 0, the identity of the sum
# ((-inf) * 0 would be NaN).


@triton.jit
def _softmax_backward(
    dx_ptr,  # *T: output gradient rows, column stride 1
    y_ptr,  # *T: softmax output rows, column stride 1
    dy_ptr,  # *T: incoming gradient rows, column stride 1
    dx_row_stride,  # elements from one dx row to the next
    y_row_stride,  # elements from one y row to the next
    dy_row_stride,  # elements from one dy row to the next
    n_cols,  # columns in a row, n_cols <= BLOCK
    BLOCK: tl.constexpr,  # lanes per program, a power of two >= n_cols
):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    # y_j, dy_j in float32; padded lanes 0, the identity of the sum
    y = tl.load(y_ptr + row * y_row_stride + offsets, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0).to(tl.float32)
    # dot = sum_j y_j * dy_j
    dot = tl.sum(y * dy, axis=0)
    dx = y * (dy - dot)
    tl.store(dx_ptr + row * dx_row_stride + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_backward_multi_row(
    dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride, dy_row_stride,  # as _softmax_backward's
    n_rows,  # rows in the tensor: the last tile may hang over the end
    n_cols,  # columns in a row, n_cols <= BLOCK
    ROWS: tl.constexpr,  # rows per program, a power of two
    BLOCK: tl.constexpr,  # lanes per row, a power of two >= n_cols
):
    # _softmax_backward on a (ROWS, BLOCK) tile of narrow rows
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    offsets = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (offsets[None, :] < n_cols)
    y = tl.load(y_ptr + rows[:, None] * y_row_stride + offsets[None, :], mask=mask, other=0.0)
    dy = tl.load(dy_ptr + rows[:, None] * dy_row_stride + offsets[None, :], mask=mask, other=0.0)
    y, dy = y.to(tl.float32), dy.to(tl.float32)
    # dot[r] = sum_c y[r, c] * dy[r, c]: axis=1, one per row (without it the rows would share one)
    dot = tl.sum(y * dy, axis=1)
    dx = (y * (dy - dot[:, None])).to(dx_ptr.dtype.element_ty)
    tl.store(dx_ptr + rows[:, None] * dx_row_stride + offsets[None, :], dx, mask=mask)


@triton.jit
def _softmax_backward_looped(
    dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride, dy_row_stride,  # as _softmax_backward's
    n_rows,  # rows in the tensor; program p takes rows p, p + P, ... (P programs)
    n_cols,  # columns in a row, any number up to 2**20
    BLOCK: tl.constexpr,  # columns per chunk, a power of two
    STAGES: tl.constexpr,  # chunks in flight per program (software pipelining of the loads)
):
    lanes = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(n_cols, BLOCK)
    for row in tl.range(tl.program_id(0).to(tl.int64), n_rows, tl.num_programs(0)):
        y_row = y_ptr + row * y_row_stride
        dy_row = dy_ptr + row * dy_row_stride
        dx_row = dx_ptr + row * dx_row_stride
        # pass 1: acc_k = sum over chunks of y * dy, per lane; a sum needs no rescaling
        acc = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            offsets = start + lanes
            mask = offsets < n_cols
            y = tl.load(y_row + offsets, mask=mask, other=0.0, eviction_policy="evict_last")
            dy = tl.load(dy_row + offsets, mask=mask, other=0.0, eviction_policy="evict_last")
            acc += y.to(tl.float32) * dy.to(tl.float32)
        dot = tl.sum(acc, axis=0)
        # pass 2, last chunk first: dx = y * (dy - dot)
        for i in tl.range(0, n_chunks, num_stages=STAGES):
            offsets = (n_chunks - 1 - i) * BLOCK + lanes
            mask = offsets < n_cols
            y = tl.load(y_row + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
            dy = tl.load(dy_row + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
            dx = y.to(tl.float32) * (dy.to(tl.float32) - dot)
            tl.store(dx_row + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------
# 4. RMSNorm (lesson 09)
# ---------------------------------------------------------------------------------------------
#
# y_j = x_j / sqrt(mean_k(x_k ** 2) + eps) * w_j: one reduction per row, then elementwise work.
# The padded lanes load 0, the identity of the sum; the mean divides by n_cols, never BLOCK.


@triton.jit
def _rmsnorm(
    output_ptr,  # *T: output rows, column stride 1
    input_ptr,  # *T: input rows, column stride 1
    weight_ptr,  # *W: weight, n_cols elements, stride 1
    output_row_stride,  # elements from one output row to the next
    input_row_stride,  # elements from one input row to the next
    n_cols,  # columns in a row, n_cols <= BLOCK
    eps,  # float32 added to the mean square, keeps a zero row finite
    BLOCK: tl.constexpr,  # lanes per program, a power of two >= n_cols
):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    # x_j in float32, 0 in the padded lanes
    x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=0.0)
    x = x.to(tl.float32)
    # mean_square = sum_j x_j ** 2 / n_cols
    mean_square = tl.sum(x * x, axis=0) / n_cols
    # inverse_rms = 1 / sqrt(mean_square + eps), one per row
    inverse_rms = tl.rsqrt(mean_square + eps)
    w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    output = (x * inverse_rms * w).to(output_ptr.dtype.element_ty)  # converted at the store
    tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)


@triton.jit
def _rmsnorm_multi_row(
    output_ptr, input_ptr, weight_ptr, output_row_stride, input_row_stride,  # as in _rmsnorm
    n_rows,  # rows in the tensor: the last tile may hang over the end
    n_cols,  # columns in a row, n_cols <= BLOCK
    eps,  # float32 added to the mean square
    ROWS: tl.constexpr,  # rows per program, a power of two
    BLOCK: tl.constexpr,  # lanes per row, a power of two >= n_cols
):
    # _rmsnorm on a (ROWS, BLOCK) tile of narrow rows, as _softmax_multi_row is to _softmax
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    offsets = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (offsets[None, :] < n_cols)
    x = tl.load(input_ptr + rows[:, None] * input_row_stride + offsets[None, :], mask=mask,
                other=0.0).to(tl.float32)
    # inverse_rms[r] = 1 / sqrt(sum_c x[r, c] ** 2 / n_cols + eps)
    inverse_rms = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    # the weight is loaded once per program and shared by its rows
    w = tl.load(weight_ptr + offsets, mask=offsets < n_cols, other=0.0).to(tl.float32)
    output = (x * inverse_rms[:, None] * w[None, :]).to(output_ptr.dtype.element_ty)
    tl.store(output_ptr + rows[:, None] * output_row_stride + offsets[None, :], output, mask=mask)


@triton.jit
def _rmsnorm_looped(
    output_ptr, input_ptr, weight_ptr, output_row_stride, input_row_stride,  # as in _rmsnorm
    n_rows,  # rows in the tensor; program p takes rows p, p + P, ... (P programs)
    n_cols,  # columns in a row, any number up to 2**20
    eps,  # float32 added to the mean square
    BLOCK: tl.constexpr,  # columns per chunk, a power of two
):
    lanes = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(n_cols, BLOCK)
    for row in tl.range(tl.program_id(0).to(tl.int64), n_rows, tl.num_programs(0)):
        x_row = input_ptr + row * input_row_stride
        y_row = output_ptr + row * output_row_stride
        # pass 1: acc_k = sum over chunks of x ** 2, per lane
        acc = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK):
            offsets = start + lanes
            x = tl.load(x_row + offsets, mask=offsets < n_cols, other=0.0,
                        eviction_policy="evict_last").to(tl.float32)
            acc += x * x
        inverse_rms = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
        # pass 2, last chunk first: y = x * inverse_rms * w
        for i in tl.range(0, n_chunks):
            offsets = (n_chunks - 1 - i) * BLOCK + lanes
            mask = offsets < n_cols
            x = tl.load(x_row + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
            w = tl.load(weight_ptr + offsets, mask=mask, other=0.0)
            y = x.to(tl.float32) * inverse_rms * w.to(tl.float32)
            tl.store(y_row + offsets, y.to(output_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------
# 5. Launchers
# ---------------------------------------------------------------------------------------------
#
# Each launcher checks what its kernels assume, each refusal carrying the numbers and the fix
# (the checks all three share are in lab/production.py), views the tensor as (rows,
# n_cols) without copying, asks _plan which kernel fits, and launches it. wrap_triton(kernel,
# like) is the kernel itself, unless torch.compile is tracing the launch (section 6).


def _launch_softmax(out: torch.Tensor, x: torch.Tensor, plan: Plan) -> None:
    """Launch the forward kernel ``plan`` names on the (rows, cols) views ``out`` and ``x``."""
    n_rows, n_cols = x.shape
    args = (out, x, out.stride(0), x.stride(0))
    if fast.is_fast(plan):  # one pass, pipelined or split rows: lab/production.py
        launch_softmax(out, x, plan)
    elif plan.strategy == "single_block":
        wrap_triton(_softmax, x)[(n_rows,)](*args, n_cols, BLOCK=plan.block,
                                            num_warps=plan.num_warps)
    elif plan.strategy == "multi_row":
        wrap_triton(_softmax_multi_row, x)[(triton.cdiv(n_rows, plan.rows),)](
            *args, n_rows, n_cols, ROWS=plan.rows, BLOCK=plan.block, num_warps=plan.num_warps)
    else:
        wrap_triton(_softmax_looped, x)[fast.persistent_grid(n_rows, x.device, plan)](
            *args, n_rows, n_cols, BLOCK=plan.block, STAGES=plan.stages, num_warps=plan.num_warps)


def _launch_softmax_backward(dx: torch.Tensor, y: torch.Tensor, dy: torch.Tensor,
                             plan: Plan) -> None:
    """Launch the backward kernel ``plan`` names on (rows, cols) views."""
    n_rows, n_cols = y.shape
    args = (dx, y, dy, dx.stride(0), y.stride(0), dy.stride(0))
    if fast.is_fast(plan):  # split rows: lab/production.py
        launch_softmax_backward(dx, y, dy, plan)
    elif plan.strategy == "single_block":
        wrap_triton(_softmax_backward, y)[(n_rows,)](*args, n_cols, BLOCK=plan.block,
                                                     num_warps=plan.num_warps)
    elif plan.strategy == "multi_row":
        wrap_triton(_softmax_backward_multi_row, y)[(triton.cdiv(n_rows, plan.rows),)](
            *args, n_rows, n_cols, ROWS=plan.rows, BLOCK=plan.block, num_warps=plan.num_warps)
    else:
        wrap_triton(_softmax_backward_looped, y)[fast.persistent_grid(n_rows, y.device, plan)](
            *args, n_rows, n_cols, BLOCK=plan.block, STAGES=plan.stages, num_warps=plan.num_warps)


def softmax(x: torch.Tensor, strategy: str | None = None,
            block: int | None = None) -> torch.Tensor:
    """Softmax over the last dimension of ``x``, computed in float32, returned in ``x.dtype``.

    Preconditions, each refused with the numbers and the fix: ``x`` is float32, float16 or
    bfloat16, on the CUDA GPU (a CPU tensor in the interpreter); its last dimension has stride
    1 (any row stride: ``x[::2]`` needs no copy) and at most ``MAX_COLS`` (2**20) columns.
    An empty tensor gives an empty tensor; a row that is -inf everywhere gives NaN (as torch).

    ``_plan`` picks the kernel: ``_softmax`` (``_softmax_multi_row`` for narrow rows) up to
    ``MAX_SINGLE_BLOCK`` columns, ``_softmax_looped`` past that in the interpreter, a GPU's
    kernels from lab/production.py. ``strategy`` (one of ``STRATEGIES``) forces a kernel
    and ``block`` its block width; a ``block`` narrower than the row forces the looped kernel.
    Differentiable: its gradient is ``softmax_backward``.
    """
    fast._check_tensor("softmax", "x", x)
    if x.numel() == 0:
        return x.new_empty(x.shape)
    rows = fast._rows("softmax", "x", x)  # (n_rows, n_cols), stride (any, 1)
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)  # (n_rows, n_cols)
    # only wide rows can use the shared-memory copies: narrow rows skip the check's cost
    shared = (strategy is not None or rows.shape[1] > fast.SHARED_FROM) and \
        fast._fits_shared_copies(rows, out)
    plan = _plan("softmax", rows.shape[1], strategy, block, _max_pieces(x.device),
                 x.element_size(), fast._pairs_of_16_bits(rows, out), shared,
                 shared and fast._clusters_available(x.device))
    if strategy is None and block is None:
        plan = fast.flat_rows(plan, _max_pieces(x.device), rows, out)
    with fast._on_device(x):
        _launch_softmax(out, rows, plan)
    return out.view(x.shape)


def softmax_backward(y: torch.Tensor, dy: torch.Tensor, strategy: str | None = None,
                     block: int | None = None) -> torch.Tensor:
    """Gradient of softmax over the last dimension: dx = y * (dy - sum(y * dy)) per row.

    ``y`` is the forward output, ``dy`` the gradient of the loss with respect to it, both as
    ``softmax``'s ``x`` and alike in shape, dtype and device. Returns ``y``'s shape and dtype,
    computed in float32. ``strategy`` and ``block`` as in ``softmax``.
    """
    fast._check_tensor("softmax_backward", "y", y)
    fast._check_tensor("softmax_backward", "dy", dy)
    if y.shape != dy.shape:
        raise ValueError(
            f"softmax_backward: y has shape {tuple(y.shape)} but dy has shape {tuple(dy.shape)}: "
            f"dy must be the gradient with respect to y, of the same shape")
    if y.dtype != dy.dtype:
        raise TypeError(f"softmax_backward: y is {y.dtype} but dy is {dy.dtype}: convert dy "
                        f"with dy.to(y.dtype)")
    if y.device != dy.device:
        raise ValueError(f"softmax_backward: y is on {y.device} but dy is on {dy.device}")
    if y.numel() == 0:
        return y.new_empty(y.shape)
    y2, dy2 = fast._rows("softmax_backward", "y", y), fast._rows("softmax_backward", "dy", dy)
    plan = _plan("softmax_backward", y2.shape[1], strategy, block, _max_pieces(y.device),
                 y.element_size())
    dx = torch.empty(y2.shape, dtype=y.dtype, device=y.device)
    with fast._on_device(y):
        _launch_softmax_backward(dx, y2, dy2, plan)
    return dx.view(y.shape)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
            block: int | None = None) -> torch.Tensor:
    """RMSNorm over the last dimension: y = x / sqrt(mean(x ** 2) + eps) * weight, per row.

    Preconditions: ``x`` as for ``softmax``; ``weight`` float32, float16 or bfloat16 of shape
    ``(x.shape[-1],)`` and stride 1, on the same device; ``eps >= 0``. Accumulates in float32,
    returns ``x.dtype``. ``_rmsnorm_multi_row`` for narrow rows, ``_rmsnorm`` up to
    ``MAX_SINGLE_BLOCK`` columns (``MAX_GPU_SINGLE_BLOCK`` on a GPU), ``_rmsnorm_looped`` past
    that or where ``block`` is narrower than the row.
    """
    fast._check_tensor("rmsnorm", "x", x)
    fast._check_tensor("rmsnorm", "weight", weight)
    n_cols = x.shape[-1] if x.dim() else 1
    if weight.dim() != 1 or weight.shape[0] != n_cols:
        raise ValueError(f"rmsnorm: weight has shape {tuple(weight.shape)} but x has {n_cols} "
                         f"columns: weight must have shape ({n_cols},)")
    if n_cols > 1 and weight.stride(0) != 1:
        raise ValueError(f"rmsnorm: weight has stride {weight.stride(0)}; pass weight.contiguous()")
    if weight.device != x.device:
        raise ValueError(f"rmsnorm: x is on {x.device} but weight is on {weight.device}")
    if not eps >= 0:
        raise ValueError(f"rmsnorm: eps={eps} must be >= 0 (it keeps a zero row finite)")
    if x.numel() == 0:
        return x.new_empty(x.shape)
    rows = fast._rows("rmsnorm", "x", x)  # (n_rows, n_cols), stride (any, 1)
    n_rows = rows.shape[0]
    plan = _plan("rmsnorm", n_cols, None, block, _max_pieces(x.device), x.element_size())
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    args = (out, rows, weight, out.stride(0), rows.stride(0))
    with fast._on_device(x):
        if plan.strategy == "single_block":
            wrap_triton(_rmsnorm, x)[(n_rows,)](*args, n_cols, float(eps), BLOCK=plan.block,
                                                num_warps=plan.num_warps)
        elif plan.strategy == "multi_row":
            wrap_triton(_rmsnorm_multi_row, x)[(triton.cdiv(n_rows, plan.rows),)](
                *args, n_rows, n_cols, float(eps), ROWS=plan.rows, BLOCK=plan.block,
                num_warps=plan.num_warps)
        else:
            wrap_triton(_rmsnorm_looped, x)[fast.persistent_grid(n_rows, x.device, plan)](
                *args, n_rows, n_cols, float(eps), BLOCK=plan.block, num_warps=plan.num_warps)
    return out.view(x.shape)


# ---------------------------------------------------------------------------------------------
# 6. The launchers as PyTorch operators (lesson 11)
# ---------------------------------------------------------------------------------------------
#
# torch.compile cannot trace into a function that launches Triton kernels (the graph breaks
# there), and autograd cannot differentiate one. Registered through torch.library, each
# launcher becomes an operator (torch.ops.triton_course.softmax, ...) with a fake
# implementation, an empty output of the right shape and dtype to trace with, and softmax gets
# a gradient: the forward pass keeps y, the backward pass calls softmax_backward. That is lesson
# 11's torch.autograd.Function in the form PyTorch now prefers. Where kernels compile, triton_op
# (torch >= 2.6) lets torch.compile see the kernels themselves; custom_op keeps the operator
# opaque, as the interpreter needs. The dispatcher costs host time on every call, so the public
# names go through the operator only when autograd or torch.compile must see the call.

_define = getattr(torch.library, "custom_op", None)  # None before torch 2.4: plain functions
if not fast._INTERPRETED and hasattr(torch.library, "triton_op"):
    _define = torch.library.triton_op
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _must_be_seen(t: object) -> bool:
    """Whether a call with ``t`` must go through the operator: autograd records it, or a
    tracer made ``t`` (torch.compile's fake and functional tensors are subclasses)."""
    return isinstance(t, torch.Tensor) and (
        type(t) not in _PLAIN or (t.requires_grad and torch.is_grad_enabled()))


def _as_operator(launcher, backward=None, setup_context=None):
    """``launcher`` registered as triton_course::<its name>, and what to call in its place."""
    if _define is None:
        return launcher
    name = launcher.__name__
    operator = _define(f"triton_course::{name}", launcher, mutates_args=())
    operator.register_fake(lambda x, *args, **kwargs: x.new_empty(x.shape))
    if backward is not None:
        operator.register_autograd(backward, setup_context=setup_context)
    registered = getattr(torch.ops.triton_course, name)

    @functools.wraps(launcher)
    def call(*args, **kwargs):
        if torch.compiler.is_compiling() or any(map(_must_be_seen, (*args, *kwargs.values()))):
            return registered(*args, **kwargs)
        return launcher(*args, **kwargs)

    return call


def _keep_y(ctx, inputs, output):
    ctx.save_for_backward(output)  # y: the gradient needs y, not x


def _softmax_gradient(ctx, dy):
    (y,) = ctx.saved_tensors
    # y.sum().backward() sends an expanded dy (strides 0); the kernels read rows of stride 1
    return softmax_backward(y, dy.contiguous()), None, None


softmax_backward = _as_operator(softmax_backward)
softmax = _as_operator(softmax, _softmax_gradient, _keep_y)
rmsnorm = _as_operator(rmsnorm)
