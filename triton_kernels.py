"""Reference Triton kernels the lessons read: softmax, its backward pass, and RMSNorm.

In the lessons' order: 1. ``_softmax``, one row per program (lesson 08), and
``_softmax_multi_row`` for narrow rows; 2. ``_softmax_looped``, rows wider than a block
(workshop A1); 3. ``_softmax_backward`` and its multi-row and looped forms (lesson 11);
4. ``_rmsnorm`` and its forms (lesson 09); 5. the launchers ``softmax``, ``softmax_backward``
and ``rmsnorm``; 6. the launchers as PyTorch operators (lesson 11). Every kernel loads float32,
float16 or bfloat16, computes in float32 and stores in its output's dtype.

The launchers plan on their own (``_plan``: one row per program, several narrow rows per
program, or a loop over chunks of a row too wide for one block) and need nothing else. A
production layer can take the planning over through one public hook,
``use_production_layer(layer)``: the course's lab installs its own (``lab/production.py``, with
kernels for wide and 16-bit rows tuned on an H200) when it is imported, as the bench does.
This module imports nothing from the lab. Importing it defines the kernels and does nothing
else: whether they run in Triton's interpreter or compiled for the CUDA GPU is decided before
the import (``learning.grader.mode.select()``).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import is_fake

try:
    from torch.library import wrap_triton as _wrap_for_tracing  # torch >= 2.6
except ImportError:
    _wrap_for_tracing = None

__all__ = ["MAX_COLS", "MAX_SINGLE_BLOCK", "STRATEGIES", "Plan", "production_layer", "rmsnorm",
           "softmax", "softmax_backward", "use_production_layer"]

#: Widest row one program keeps whole in registers; wider rows take the looped kernels.
MAX_SINGLE_BLOCK = 8192
#: Widest row the launchers accept (4 MiB of float32 per row).
MAX_COLS = 2**20
#: The kernels of this module, by strategy (the production layer adds its own).
STRATEGIES = ("single_block", "multi_row", "looped")

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
# Each launcher checks what its kernels assume, each refusal carrying the numbers and the fix,
# views the tensor as (rows, n_cols) without copying, asks for a plan (which kernel, how wide a
# block, how many warps) and launches it. wrap_triton(kernel, like) is the kernel itself,
# unless torch.compile is tracing the launch (section 6).

# A program should hold enough bytes to keep the memory system busy: one row of 128 float32
# columns is 512 bytes, too little for a program of 128 threads, so rows narrower than
# _ROW_TILE_BYTES are grouped, _ROW_TILE_BYTES // (block * itemsize) rows to a program.
_ROW_TILE_BYTES = 4096
# (largest elements per program, num_warps): a row lives in registers from its load to its
# store, so the warps grow with the block and each thread holds 8 to 16 values.
_WARPS = ((2048, 4), (4096, 8), (8192, 16))
# The looped kernels read LOOPED_BLOCK columns a step, in a persistent grid of
# LOOPED_PROGRAMS_PER_SM programs per multiprocessor walking over the rows, so that few rows
# are in flight and the second pass may find its row still in L2.
_LOOPED_BLOCK = 4096
_LOOPED_WARPS = 16
_LOOPED_PROGRAMS_PER_SM = 2
# The interpreter runs programs one after another; two programs still exercise the row loop.
_INTERPRETER_PROGRAMS = 2
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# True when the kernels were defined under TRITON_INTERPRET=1 and so run on the CPU
_INTERPRETED = not isinstance(_softmax, triton.runtime.jit.JITFunction)


@dataclass(frozen=True)
class Plan:
    """How one launch is shaped: which kernel, how many columns per block, rows, warps."""

    strategy: str  # one of STRATEGIES
    block: int  # columns per block: the whole row (a power of two >= n_cols) or a chunk
    rows: int = 1  # rows per program (multi_row only)
    num_warps: int = 4
    programs_per_sm: int = _LOOPED_PROGRAMS_PER_SM  # looped only: persistent grid size
    stages: int = 1  # looped only: chunks in flight per program


def _warps_for(elements: int) -> int:
    return next((warps for limit, warps in _WARPS if elements <= limit), _WARPS[-1][1])


def _plan(fn: str, n_cols: int, strategy: str | None = None, block: int | None = None,
          itemsize: int = 4) -> Plan:
    """This module's plan for rows of ``n_cols`` columns; ``strategy`` and ``block`` override.
    ``itemsize`` (bytes per element) sets how many narrow rows share a program."""
    n_cols = int(n_cols)  # a plan is for one width: torch.compile specialises on it
    if strategy is None:
        if block is not None and block < n_cols or n_cols > MAX_SINGLE_BLOCK:
            strategy = "looped"
        else:
            row_bytes = triton.next_power_of_2(n_cols) * itemsize
            strategy = "multi_row" if 2 * row_bytes <= _ROW_TILE_BYTES else "single_block"
    if strategy not in STRATEGIES:
        raise ValueError(f"{fn}: unknown strategy {strategy!r}; choose one of "
                         f"{', '.join(STRATEGIES)}")
    if strategy == "looped":
        if block is None:
            return Plan("looped", _LOOPED_BLOCK, num_warps=_LOOPED_WARPS)
        _check_block(fn, block)
        return Plan("looped", block, num_warps=_warps_for(block))
    whole = triton.next_power_of_2(max(n_cols, 1))
    if block is not None:
        _check_block(fn, block)
        if block < n_cols:
            raise ValueError(f"{fn}: block={block} is narrower than the {n_cols} columns a "
                             f"{strategy} kernel keeps whole: pass block >= {whole}, or "
                             "strategy='looped'")
        whole = block
    if whole > MAX_SINGLE_BLOCK:
        raise ValueError(f"{fn}: a {strategy} block of {whole} columns is wider than "
                         f"MAX_SINGLE_BLOCK={MAX_SINGLE_BLOCK}, the widest row kept in "
                         "registers: use strategy='looped'")
    if strategy == "single_block":
        return Plan("single_block", whole, num_warps=_warps_for(whole))
    rows = max(1, _ROW_TILE_BYTES // (whole * itemsize))
    return Plan("multi_row", whole, rows=rows, num_warps=_warps_for(rows * whole))


def _check_block(fn: str, block: int) -> None:
    if not isinstance(block, int) or block < 1 or block & (block - 1):
        hint = f": try block={triton.next_power_of_2(max(block, 1))}" \
            if isinstance(block, int) else ""
        raise ValueError(f"{fn}: block={block!r} must be a positive power of two (tl.arange "
                         f"needs one){hint}")


_production = None  # the production layer that plans every launch, once one is installed


def use_production_layer(layer) -> None:
    """The hook: hand every launch's plan to ``layer``, or with None keep this module's own.
    A layer answers ``plan(fn, rows, out, strategy, block)`` for every launch and
    ``launch(fn, plan, *views)`` for plans naming kernels of its own (False for this
    module's); importing ``lab.production`` installs the course's."""
    global _production
    _production = layer


def production_layer():
    """The production layer installed with ``use_production_layer``, or None."""
    return _production


def _plan_for(fn: str, rows: torch.Tensor, out: torch.Tensor | None, strategy: str | None,
              block: int | None) -> Plan:
    production = production_layer()
    if production is not None:
        return production.plan(fn, rows, out, strategy, block)
    return _plan(fn, rows.shape[1], strategy, block, rows.element_size())


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def persistent_grid(n_rows: int, device: torch.device, plan: Plan) -> tuple[int]:
    """The grid of a kernel whose programs loop over rows: plan.programs_per_sm programs per
    multiprocessor on a GPU, _INTERPRETER_PROGRAMS in the interpreter; never more than rows."""
    if device.type != "cuda":
        return (max(1, min(n_rows, _INTERPRETER_PROGRAMS)),)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return (max(1, min(n_rows, _sm_count(index) * plan.programs_per_sm)),)


def _on_device(t: torch.Tensor):
    """Make ``t``'s GPU the current one for a launch (Triton launches on the current device)."""
    if t.device.type != "cuda" or t.device.index in (None, torch.cuda.current_device()):
        return contextlib.nullcontext()  # nothing to switch: saves microseconds per launch
    return torch.cuda.device(t.device)


def wrap_triton(kernel, like: torch.Tensor):
    """``kernel``, to be launched on tensors like ``like``. On real tensors, the kernel itself.
    On the stand-ins torch.compile traces with (fake tensors, which have no memory), the kernel
    wrapped by torch.library.wrap_triton (torch >= 2.6), so that the compiled graph holds the
    launch. (Wrapping a launch on real tensors works too, but costs a dispatch per launch.)"""
    if _wrap_for_tracing is None or type(like) is torch.Tensor or not is_fake(like):
        return kernel
    return _wrap_for_tracing(kernel)


def _check_tensor(fn: str, name: str, t: object) -> torch.Tensor:
    """Type, dtype and device checks shared by every launcher."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"{fn}: {name} has dtype {t.dtype}; the kernels store float32, float16 "
                        f"or bfloat16 (and compute in float32): convert with {name}.float()")
    if _INTERPRETED and t.device.type != "cpu":
        raise ValueError(
            f"{fn}: {name} is on {t.device}, but the kernels run in Triton's interpreter "
            f"(TRITON_INTERPRET=1 was set when triton_kernels was imported), which reads CPU "
            f"memory: pass {name}.cpu(), or import triton_kernels without TRITON_INTERPRET")
    if not _INTERPRETED and t.device.type != "cuda":
        raise ValueError(
            f"{fn}: {name} is on {t.device}, but the kernels are compiled for the CUDA GPU: "
            f"pass {name}.cuda(), or set TRITON_INTERPRET=1 before importing triton_kernels")
    return t


def _rows(fn: str, name: str, t: torch.Tensor) -> torch.Tensor:
    """View ``t`` as (rows, n_cols) without copying: last dimension stride 1, one row stride."""
    if t.dim() == 0:
        t = t.reshape(1, 1)
    n_cols = t.shape[-1]
    if n_cols > MAX_COLS:
        raise ValueError(
            f"{fn}: {name} has {n_cols} columns, more than MAX_COLS={MAX_COLS} (2**20) that the "
            f"looped kernel supports: split the last dimension into rows of at most {MAX_COLS}")
    if n_cols > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{fn}: the last dimension of {name} has stride {t.stride(-1)}, but the kernel "
            f"reads each row as consecutive elements (stride 1): pass {name}.contiguous()")
    try:
        return t.view(-1, n_cols)
    except RuntimeError:
        raise ValueError(
            f"{fn}: the leading dimensions of {name} (shape {tuple(t.shape)}, strides "
            f"{t.stride()}) cannot be flattened into rows with one row stride: pass "
            f"{name}.contiguous()") from None


def _launch_softmax(out: torch.Tensor, x: torch.Tensor, plan: Plan) -> None:
    """Launch the forward kernel ``plan`` names on the (rows, cols) views ``out`` and ``x``."""
    production = production_layer()
    if production is not None and production.launch("softmax", plan, out, x):
        return  # a kernel of the production layer
    n_rows, n_cols = x.shape
    args = (out, x, out.stride(0), x.stride(0))
    if plan.strategy == "single_block":
        wrap_triton(_softmax, x)[(n_rows,)](*args, n_cols, BLOCK=plan.block,
                                            num_warps=plan.num_warps)
    elif plan.strategy == "multi_row":
        wrap_triton(_softmax_multi_row, x)[(triton.cdiv(n_rows, plan.rows),)](
            *args, n_rows, n_cols, ROWS=plan.rows, BLOCK=plan.block, num_warps=plan.num_warps)
    else:
        wrap_triton(_softmax_looped, x)[persistent_grid(n_rows, x.device, plan)](
            *args, n_rows, n_cols, BLOCK=plan.block, STAGES=plan.stages, num_warps=plan.num_warps)


def _launch_softmax_backward(dx: torch.Tensor, y: torch.Tensor, dy: torch.Tensor,
                             plan: Plan) -> None:
    """Launch the backward kernel ``plan`` names on (rows, cols) views."""
    production = production_layer()
    if production is not None and production.launch("softmax_backward", plan, dx, y, dy):
        return
    n_rows, n_cols = y.shape
    args = (dx, y, dy, dx.stride(0), y.stride(0), dy.stride(0))
    if plan.strategy == "single_block":
        wrap_triton(_softmax_backward, y)[(n_rows,)](*args, n_cols, BLOCK=plan.block,
                                                     num_warps=plan.num_warps)
    elif plan.strategy == "multi_row":
        wrap_triton(_softmax_backward_multi_row, y)[(triton.cdiv(n_rows, plan.rows),)](
            *args, n_rows, n_cols, ROWS=plan.rows, BLOCK=plan.block, num_warps=plan.num_warps)
    else:
        wrap_triton(_softmax_backward_looped, y)[persistent_grid(n_rows, y.device, plan)](
            *args, n_rows, n_cols, BLOCK=plan.block, STAGES=plan.stages, num_warps=plan.num_warps)


def softmax(x: torch.Tensor, strategy: str | None = None,
            block: int | None = None) -> torch.Tensor:
    """Softmax over the last dimension of ``x``, computed in float32, returned in ``x.dtype``.

    Preconditions, each refused with the numbers and the fix: ``x`` is float32, float16 or
    bfloat16, on the CUDA GPU (a CPU tensor in the interpreter); its last dimension has stride
    1 (any row stride: ``x[::2]`` needs no copy) and at most ``MAX_COLS`` (2**20) columns.
    An empty tensor gives an empty tensor; a row that is -inf everywhere gives NaN (as torch).

    ``_plan`` picks the kernel: ``_softmax`` (``_softmax_multi_row`` for narrow rows) up to
    ``MAX_SINGLE_BLOCK`` columns, ``_softmax_looped`` past that; under a production layer
    (``use_production_layer``) a GPU also takes kernels of its own for wide and 16-bit rows.
    ``strategy`` (one of ``STRATEGIES``) forces a kernel
    and ``block`` its block width; a ``block`` narrower than the row forces the looped kernel.
    Differentiable: its gradient is ``softmax_backward``.
    """
    _check_tensor("softmax", "x", x)
    if x.numel() == 0:
        return x.new_empty(x.shape)
    rows = _rows("softmax", "x", x)  # (n_rows, n_cols), stride (any, 1)
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)  # (n_rows, n_cols)
    plan = _plan_for("softmax", rows, out, strategy, block)
    with _on_device(x):
        _launch_softmax(out, rows, plan)
    return out.view(x.shape)


def softmax_backward(y: torch.Tensor, dy: torch.Tensor, strategy: str | None = None,
                     block: int | None = None) -> torch.Tensor:
    """Gradient of softmax over the last dimension: dx = y * (dy - sum(y * dy)) per row.

    ``y`` is the forward output, ``dy`` the gradient of the loss with respect to it, both as
    ``softmax``'s ``x`` and alike in shape, dtype and device. Returns ``y``'s shape and dtype,
    computed in float32. ``strategy`` and ``block`` as in ``softmax``.
    """
    _check_tensor("softmax_backward", "y", y)
    _check_tensor("softmax_backward", "dy", dy)
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
    y2, dy2 = _rows("softmax_backward", "y", y), _rows("softmax_backward", "dy", dy)
    plan = _plan_for("softmax_backward", y2, None, strategy, block)
    dx = torch.empty(y2.shape, dtype=y.dtype, device=y.device)
    with _on_device(y):
        _launch_softmax_backward(dx, y2, dy2, plan)
    return dx.view(y.shape)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
            block: int | None = None) -> torch.Tensor:
    """RMSNorm over the last dimension: y = x / sqrt(mean(x ** 2) + eps) * weight, per row.

    Preconditions: ``x`` as for ``softmax``; ``weight`` float32, float16 or bfloat16 of shape
    ``(x.shape[-1],)`` and stride 1, on the same device; ``eps >= 0``. Accumulates in float32,
    returns ``x.dtype``. ``_rmsnorm_multi_row`` for narrow rows, ``_rmsnorm`` up to
    ``MAX_SINGLE_BLOCK`` columns (wider on a GPU under the production layer),
    ``_rmsnorm_looped`` past that or where ``block`` is narrower than the row.
    """
    _check_tensor("rmsnorm", "x", x)
    _check_tensor("rmsnorm", "weight", weight)
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
    rows = _rows("rmsnorm", "x", x)  # (n_rows, n_cols), stride (any, 1)
    n_rows = rows.shape[0]
    plan = _plan_for("rmsnorm", rows, None, None, block)
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    args = (out, rows, weight, out.stride(0), rows.stride(0))
    with _on_device(x):
        if plan.strategy == "single_block":
            wrap_triton(_rmsnorm, x)[(n_rows,)](*args, n_cols, float(eps), BLOCK=plan.block,
                                                num_warps=plan.num_warps)
        elif plan.strategy == "multi_row":
            wrap_triton(_rmsnorm_multi_row, x)[(triton.cdiv(n_rows, plan.rows),)](
                *args, n_rows, n_cols, float(eps), ROWS=plan.rows, BLOCK=plan.block,
                num_warps=plan.num_warps)
        else:
            wrap_triton(_rmsnorm_looped, x)[persistent_grid(n_rows, x.device, plan)](
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
if not _INTERPRETED and hasattr(torch.library, "triton_op"):
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
