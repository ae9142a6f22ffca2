"""The production layer under triton_kernels.py: the plan that picks a kernel for a row, the
tables it reads, and the kernels that take softmax to the copy ceiling on a GPU.

When it is used. Every call of ``triton_kernels.softmax``, ``softmax_backward`` and ``rmsnorm``
asks ``plan`` (here) which kernel fits its rows. In Triton's interpreter, and on a GPU for
rows of up to MAX_SINGLE_BLOCK columns, the plan names a kernel of triton_kernels.py, the
ones the lessons read. On a GPU it also names the kernels defined here:

- ``_softmax_one_pass``: 16-bit rows wider than MAX_SINGLE_BLOCK, one program of 32 warps a
  row, its two reductions made one (per-tile (maximum, sum) pairs combined as in workshop A1);
- ``_softmax_pipelined``: 16-bit rows of 16385 to 32768 columns that read as aligned 32-bit
  words, one program per multiprocessor loading its next rows into shared memory while it
  computes this one (the words are packed and unpacked by ``_pack_pairs``/``_unpack_pairs``);
- ``_softmax_split_row`` and ``_softmax_backward_split_row``: rows wider than one program keeps
  in registers, cut into pieces that run at once and exchange their partial maxima and sums
  through memory (a ticket, an arrival count and a spin-wait). Softmax rows that can be copied
  16 bytes at a time take the same exchange with the pieces waiting in shared memory instead:
  ``_softmax_split_shared``, in lab/gluon.py (written in Gluon, which can hold
  data in shared memory; Triton's language cannot);
- ``_softmax_cluster``, also in lab/gluon.py: on a Hopper GPU, the softmax rows of
  _CLUSTER_PLANS that can be copied 16 bytes at a time, one thread-block cluster a row, whose
  CTAs push their partial maxima and sums into each other's shared memory;
- ``_softmax_backward_reload``: the backward pass of 16-bit rows of 32768 columns, one program
  a row that loads y again after the reduction instead of keeping it in registers;
- ``_softmax_flat_rows``: contiguous rows narrower than 16 bytes, read as one flat block.

What it measured. Each table below says why it holds what it holds; the figures are in
lab/RESULTS.md ("Softmax forward", "Softmax backward", "RMSNorm", and "What changed in this
round": the probe of 32768-column 16-bit rows, lab/results/whole_row.json, and the tuning
sweep, lab/results/tune.json), measured on an NVIDIA H200 with lab/probes/softmax_sweep.py,
lab/probes/whole_row_probe.py and ``python -m learning.bench``. On another GPU, re-measure before
trusting the tables.

How it is reached. triton_kernels.py plans and launches on its own. Importing this module
installs it through triton_kernels' public hook, ``use_production_layer``: the launchers then
ask ``plan`` here for every launch and hand ``launch`` the plans that name a kernel of this
module (``python -m learning.bench`` and the tests import it; so may anyone who wants the
reference at full speed). This module builds on triton_kernels (its plan, checks and launch
helpers); triton_kernels imports nothing from here.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import is_fake

import triton_kernels as tk
from triton_kernels import MAX_COLS, MAX_SINGLE_BLOCK, persistent_grid, wrap_triton

# ---------------------------------------------------------------------------------------------
# Limits and tuning tables
# ---------------------------------------------------------------------------------------------

#: Widest row one program keeps whole on a GPU (32 warps, 32 float32 values a thread).
MAX_GPU_SINGLE_BLOCK = 32768
#: The kernels the plan chooses between: triton_kernels' and the split-row kernels here.
STRATEGIES = (*tk.STRATEGIES, "split_row")
__all__ = ["MAX_COLS", "MAX_GPU_SINGLE_BLOCK", "MAX_SINGLE_BLOCK", "STRATEGIES", "Plan", "launch",
           "plan"]

# exp(z) = 2 ** (z * log2(e)). The GPU's fast exponential instruction is a power of two, so the
# fast kernels multiply by log2(e) themselves (tl.exp does the same multiply internally).
_LOG2E = tl.constexpr(1.4426950408889634)

# A program should hold enough bytes to keep the memory system busy: with 128 columns, one row
# is 512 bytes of float32, too little for a program of 128 threads. Rows narrower than
# ROW_TILE_BYTES are therefore grouped, ROW_TILE_BYTES // (block * itemsize) rows to a program.
# Measured on an H200 (lab/RESULTS.md): 4 KiB per program with 4 warps ran at 0.995 to 1.01
# of the copy ceiling from 128 to 1024 columns; 8 to 16 KiB per program ran 2 to 3 % slower.
_ROW_TILE_BYTES = 4096

# (largest elements per program, num_warps). A row lives in registers from its load to its
# store, so the warps grow with the block: each thread then holds 8 to 16 values, which keeps
# every load 16 bytes wide without running out of registers. More warps than that only add
# synchronisation to the two reductions: on an H200, 2048 bfloat16 columns ran at 1.0 of the
# copy ceiling with 4 warps, 0.88 with 8 and 0.57 with 16.
#
# Past 8192 columns (on a GPU only) the same rule goes on: 16 warps for 16384 columns and 32,
# the most a program can have, for 32768. Measured on an H200 (lab/RESULTS.md), one program
# of 16 warps per 16384-column row beat every split-row plan, in the forward pass (0.95 of
# the copy ceiling in float32 against 0.89, 0.90 in bfloat16 against 0.79) and in the
# backward pass (0.99 and 0.98 against 0.94 and 0.80).
_WARPS = (
    (1024, 4),
    (2048, 4),
    (4096, 8),
    (8192, 16),
    (16384, 16),
    (32768, 32),
)

# The widest row one program keeps whole on a GPU, per launcher and bytes per element. A
# 32768-column float32 row in one program of 32 warps ran at 0.93 of the ceiling against 0.88
# split. 16-bit rows wider than MAX_SINGLE_BLOCK take _softmax_one_pass with ONE_PASS_WARPS
# warps: measured on an H200 (256 MiB inputs, lab/results/tune.json), bfloat16 rows of 16384
# columns ran at 0.94 of the ceiling against 0.90 for _softmax, and of 32768 columns at 0.82
# against 0.77 for the split kernel; in float32 the one-pass form was slower (0.77 against
# 0.93 at 32768 columns), so float32 keeps _softmax. The backward pass holds two rows in
# registers: in float32 it is split past 16384 columns; 16-bit rows of 32768 columns are kept
# whole by _softmax_backward_reload with _RELOAD_WARPS warps, which reads y a second time rather
# than keep it (section 4 below). Measured on an H200 (1 GiB inputs, 2026-12-01, torch 2.11,
# Triton 3.6, lab/results/backward_warps.txt): _softmax_backward ran at 1.02 of the copy
# ceiling in bfloat16 and float16 with 16 warps, against 0.98 and 0.93 with 32, 1.01 and 0.90
# with 8, and 0.83 for the split kernel; in float32, 16 warps gave 0.88 and the split kernel
# 1.01. With Triton 3.9 the same 16 warps gave 0.96 (backward_warps_triton39.txt).
# RMSNorm holds one row, as the forward pass does: kept whole up to 32768 columns it ran at
# 0.93 to 0.98 of the ceiling there, against 0.69 to 0.78 for its looped kernel
# (lab/RESULTS.md).
_GPU_WHOLE_ROW = {
    ("softmax", 4): 32768,
    ("softmax", 2): 32768,
    ("softmax_backward", 4): 16384,
    ("softmax_backward", 2): 32768,
    ("rmsnorm", 4): 32768,
    ("rmsnorm", 2): 32768,
}
_RELOAD_WARPS = 16
_ONE_PASS_WARPS = 32
# 16-bit rows of 16385 to 32768 columns whose halves pair into aligned 32-bit words take
# _softmax_pipelined instead: one program of PIPELINED_WARPS warps per multiprocessor, with up
# to PIPELINED_STAGES - 1 rows in flight in shared memory. Measured on an H200 (1 GiB inputs,
# lab/results/whole_row.json): 32768 16-bit columns ran at 0.92 to 0.94 of the copy ceiling
# with 3 or 4 stages against 0.86 for _softmax_one_pass (16 warps: 0.92; two stages, one row
# in flight: 0.65 to 0.66, slower than no pipelining); at 16384 columns the one-pass kernel
# stays ahead (0.97 against 0.56 to 0.95), so the pipelined kernel starts above 16384.
_PIPELINED_WARPS = 32
_PIPELINED_STAGES = 4

# The looped kernels read a chunk of LOOPED_BLOCK columns per step. They run a persistent grid
# of LOOPED_PROGRAMS_PER_SM programs per multiprocessor, each walking over rows, so that few
# rows are in flight and the second pass's re-read has a chance to find its row in L2; with
# LOOPED_STAGES > 1 Triton also software-pipelines the loop's loads through shared memory.
# Even so they reached only about 0.55 to 0.92 of the copy ceiling on an H200 (RESULTS.md),
# which is why a GPU takes them only for rows too wide for the split-row kernel below. They
# are the kernels the interpreter runs for every row wider than MAX_SINGLE_BLOCK.
_LOOPED_BLOCK = 4096
_LOOPED_WARPS = 16
_LOOPED_PROGRAMS_PER_SM = 2
_LOOPED_STAGES = 1

# On a GPU, rows wider than _GPU_WHOLE_ROW are cut into pieces of SPLIT_BLOCK columns, one
# program of SPLIT_WARPS warps per piece (_softmax_split_row). Measured on an H200
# (lab/RESULTS.md): 4 warps beat 8 (0.87 against 0.84 of the ceiling at 65536 float32
# columns, 0.75 against 0.68 in bfloat16), and pieces of 8192 columns beat 4096 and 16384 in
# every dtype, 16-bit included (but for a 3 % edge of 4096 in the 16-bit backward pass at
# 32768 columns). Two variants that were measured and dropped: reading the piece again after
# the exchange instead of keeping exp(x) in registers (5 to 12 % slower), and publishing each
# piece's partials in one 64-bit word that the others poll instead of an arrival counter (20
# to 40 % slower: every waiting program polls the whole row's words). RESULTS.md lists the
# other variants measured and dropped (a persistent kernel that loads its next row while it
# waits among them).
_SPLIT_BLOCK = 8192
_SPLIT_WARPS = 4

# Softmax rows that the split-row plan takes go instead to lab.gluon's
# _softmax_split_shared where they can be copied into shared memory 16 bytes at a time
# (_fits_shared_copies): each piece waits for the row's exchange in shared memory, in its own
# dtype, rather than in registers as float32. Measured on an H200 (1 GiB inputs, torch 2.11,
# Triton 3.6, 2026-12-01; lab/probes/split_shared_probe.py, lab/results/split_shared*.json),
# against _softmax_split_row's 0.78, 0.75 and 0.70 of the copy ceiling in bfloat16 at 65536,
# 2**18 and 2**20 columns, and 0.92 and 0.79 in float32 at 65536 and 2**20: pieces of 16384
# columns, copied and folded 2048 at a time by 4 warps, ran at 0.91, 0.88 and 0.82 in bfloat16
# and 0.94 and 0.87 in float32; 16-bit rows of 2**20 columns ran at 0.86 with pieces of 32768
# and 8 warps (0.82 with 16384). Pieces of 8192 and of 65536 columns were slower at every
# width. Where the width is a multiple of the piece, no piece needs a mask (EVEN), which was
# worth up to 3 %. Against pieces of 16384, the wide pieces were ahead by 0.01 at 131072 16-bit
# columns, level at 2**18 and behind at 65536; the plan takes them past 32 pieces of 16384,
# which among the widths measured is 2**20 only.
_SHARED_PIECE = (16384, 2048, 4)  # columns per piece, columns per copy group, warps
_SHARED_WIDE_PIECE = (32768, 4096, 8)  # 16-bit rows of more than _SHARED_MAX_PIECES pieces
_SHARED_MAX_PIECES = 32

# On a Hopper GPU (compute capability 9.x) the rows that table serves from 16385 16-bit or 32769
# float32 columns up to those below go instead to lab.gluon's _softmax_cluster: one
# thread-block cluster a row, its CTAs' partials pushed into each other's shared memory. Measured
# on an H200 (1 GiB inputs, torch 2.11, Triton 3.6 and 3.9, 2026-12-02; lab/probes/probe_dsmem.py:
# lab/results/dsmem_explore.json, from which these rows were chosen, and dsmem.json and
# dsmem_triton39.json), against the kernels they replace: in 16-bit, clusters of two CTAs ran at
# 0.97 to 0.98 of the copy ceiling at 32768 columns (the pipelined kernel 0.93 to 0.94) and 65536
# (the split kernel 0.91); at 131072 columns sixteen CTAs of 8192 ran at 0.93 with both versions
# (two CTAs of 65536: 0.94 with 3.6, 0.90 with 3.9; the split kernel 0.90), and at 2**18 sixteen
# CTAs of 16384 at 0.92 (0.88). Clusters of 4 and 8 CTAs ran below the split kernel wherever they
# were tried, so no row here uses them. Float32 rows of 65536 columns ran at 0.96 to 0.97 in two
# CTAs (0.94 split); at 2**18 float32 columns the split kernel stayed ahead (0.94 against 0.89),
# and at 2**20 16-bit columns too (0.86 against 0.66 for sixteen CTAs of 65536).
# (first column past, last column, CTAs a cluster, columns per CTA, columns per copy group,
# warps), by bytes per element; of two rows for the same columns the first that this GPU can
# run (_cluster_plan) is taken.
_CLUSTER_PLANS = {
    2: ((16384, 32768, 2, 16384, 2048, 8), (32768, 65536, 2, 32768, 2048, 8),
        (65536, 131072, 16, 8192, 2048, 4), (65536, 131072, 2, 65536, 4096, 8),
        (131072, 262144, 16, 16384, 2048, 4)),
    4: ((32768, 65536, 2, 32768, 4096, 8),),
}
# A cluster of 16 CTAs is past the portable size of 8 and needs 16 free multiprocessors in one
# group of them: measured only on the H200's 132; a GPU with fewer keeps the split kernel.
_CLUSTER_16_MIN_SMS = 132
# Rows this wide or narrower never take a kernel that copies into shared memory: the launcher
# skips the check whether they can (_fits_shared_copies), which costs microseconds.
SHARED_FROM = 16384
# The interpreter runs programs one after another; two programs still exercise the row loop.
_INTERPRETER_PROGRAMS = 2


@dataclass(frozen=True)
class Plan(tk.Plan):
    """triton_kernels' plan, with the choices only this module's kernels take."""

    one_pass: bool = False  # single_block softmax only: one reduction of (max, sum) pairs
    pipelined: bool = False  # single_block softmax only: _softmax_pipelined (16-bit pairs)
    in_shared: bool = False  # split_row softmax only: the Gluon kernel, pieces in shared memory
    chunk: int = 0  # in_shared only: columns per copy group
    reload: bool = False  # single_block softmax_backward only: _softmax_backward_reload
    flat: bool = False  # multi_row softmax only: _softmax_flat_rows (see flat_rows)
    cluster: int = 0  # in_shared only: CTAs a cluster of lab.gluon._softmax_cluster


# ---------------------------------------------------------------------------------------------
# The plan: which kernel, with which block and warps, for rows of n_cols columns
# ---------------------------------------------------------------------------------------------


def _warps_for(elements: int) -> int:
    for limit, warps in _WARPS:
        if elements <= limit:
            return warps
    return _WARPS[-1][1]


def _plan(
    fn: str,
    n_cols: int,
    strategy: str | None = None,
    block: int | None = None,
    max_pieces: int = 0,
    itemsize: int = 4,
    paired: bool = False,
    shared: bool = False,
    clusters: bool = False,
) -> Plan:
    """Pick the kernel for rows of ``n_cols`` columns; ``strategy`` and ``block`` override.

    ``max_pieces`` is how many programs of one row are sure to run at the same time (the
    number of multiprocessors on a GPU, 0 in the interpreter): the split_row kernel needs them.
    ``itemsize`` is the bytes per element, which sets the rows per multi_row program.
    ``paired`` says that 16-bit rows can be read as aligned 32-bit words (see _pairs_of_16_bits).
    ``shared`` says that the rows can be copied into shared memory 16 bytes at a time by
    lab.gluon (see _fits_shared_copies): softmax then splits them with that kernel.
    ``clusters`` says that, besides, the GPU runs thread-block clusters (_clusters_available):
    softmax then gives the rows in _CLUSTER_PLANS one cluster each.
    RMSNorm has no split-row kernel: its rows wider than it keeps whole take the looped one.
    A plan is for one width: ``int(n_cols)`` makes torch.compile specialize on it.
    """
    n_cols = int(n_cols)
    if strategy is None and block is None and fn == "softmax" and shared and clusters:
        found = _cluster_plan(n_cols, itemsize, max_pieces)
        if found is not None:
            return found
    if strategy is None:
        if block is not None and block < n_cols:
            strategy = "looped"
        elif n_cols <= MAX_SINGLE_BLOCK:
            row_bytes = triton.next_power_of_2(n_cols) * itemsize
            strategy = "multi_row" if 2 * row_bytes <= _ROW_TILE_BYTES else "single_block"
        elif max_pieces > 0 and n_cols <= _GPU_WHOLE_ROW.get((fn, itemsize), 0):
            strategy = "single_block"  # a GPU: one program with many warps
        elif fn != "rmsnorm" and triton.cdiv(n_cols, _split_piece(
                fn, n_cols, itemsize, shared)[0]) <= max_pieces:
            strategy = "split_row"
        else:
            strategy = "looped"
    if strategy not in STRATEGIES:
        raise ValueError(
            f"{fn}: unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )
    if strategy == "looped":
        if block is None:
            return Plan("looped", _LOOPED_BLOCK, num_warps=_LOOPED_WARPS)
        _check_block(fn, block)
        return Plan("looped", block, num_warps=_warps_for(block))
    if strategy == "split_row":
        piece, chunk, warps, in_shared = _split_piece(fn, n_cols, itemsize, shared)
        if block is None and in_shared and triton.cdiv(n_cols, piece) <= max_pieces:
            return Plan("split_row", piece, num_warps=warps, in_shared=True, chunk=chunk)
        piece = _SPLIT_BLOCK if block is None else block
        _check_block(fn, piece)
        pieces = triton.cdiv(n_cols, piece)
        if pieces > max(max_pieces, 1):  # one piece never waits: it runs anywhere
            where = f"only {max_pieces} are sure to run at once (one per multiprocessor)"
            if max_pieces == 0:
                where = "the interpreter runs one program at a time"
            raise ValueError(
                f"{fn}: split_row would cut {n_cols} columns into {pieces} pieces of {piece} "
                f"that must run at the same time, but {where}: use strategy='looped'"
            )
        warps = _SPLIT_WARPS if block is None else min(_SPLIT_WARPS, _warps_for(piece))
        return Plan("split_row", piece, num_warps=warps)
    whole = triton.next_power_of_2(max(n_cols, 1))
    if block is not None:
        _check_block(fn, block)
        if block < n_cols:
            raise ValueError(
                f"{fn}: block={block} is narrower than the {n_cols} columns a {strategy} "
                f"kernel keeps whole: pass block >= {whole}, or strategy='looped'"
            )
        whole = block
    widest = MAX_GPU_SINGLE_BLOCK if strategy == "single_block" and max_pieces else \
        MAX_SINGLE_BLOCK
    if whole > widest:
        where = "on a GPU: MAX_GPU_SINGLE_BLOCK" if widest > MAX_SINGLE_BLOCK else \
            "MAX_SINGLE_BLOCK"
        raise ValueError(
            f"{fn}: a {strategy} block of {whole} columns is wider than {where}={widest}, "
            f"the widest row kept in registers: use strategy='looped'"
        )
    if strategy == "single_block":
        if fn == "softmax" and itemsize == 2 and max_pieces and whole > MAX_SINGLE_BLOCK:
            if paired and whole == MAX_GPU_SINGLE_BLOCK:
                return Plan("single_block", whole, num_warps=_PIPELINED_WARPS, programs_per_sm=1,
                            stages=_PIPELINED_STAGES, pipelined=True)
            return Plan("single_block", whole, num_warps=_ONE_PASS_WARPS, one_pass=True)
        if fn == "softmax_backward" and itemsize == 2 and max_pieces and \
                whole == MAX_GPU_SINGLE_BLOCK:
            return Plan("single_block", whole, num_warps=_RELOAD_WARPS, reload=True)
        return Plan("single_block", whole, num_warps=_warps_for(whole))
    rows = max(1, _ROW_TILE_BYTES // (whole * itemsize))
    return Plan("multi_row", whole, rows=rows, num_warps=_warps_for(rows * whole))


def _split_piece(fn: str, n_cols: int, itemsize: int, shared: bool):
    """(columns per piece, columns per copy group, warps, in shared memory) of a split row."""
    if fn != "softmax" or not shared:
        return _SPLIT_BLOCK, 0, _SPLIT_WARPS, False
    piece, chunk, warps = _SHARED_PIECE
    if itemsize == 2 and triton.cdiv(n_cols, piece) > _SHARED_MAX_PIECES:
        piece, chunk, warps = _SHARED_WIDE_PIECE
    return piece, chunk, warps, True


def _cluster_plan(n_cols: int, itemsize: int, max_pieces: int) -> Plan | None:
    """The cluster plan of _CLUSTER_PLANS for this width, if there is one this GPU can run."""
    for past, last, ctas, piece, chunk, warps in _CLUSTER_PLANS.get(itemsize, ()):
        if past < n_cols <= last and (ctas <= 8 or max_pieces >= _CLUSTER_16_MIN_SMS):
            return Plan("split_row", piece, num_warps=warps, in_shared=True, chunk=chunk,
                        cluster=ctas)
    return None


def _check_block(fn: str, block: int) -> None:
    if not isinstance(block, int) or block < 1 or block & (block - 1):
        hint = ""
        if isinstance(block, int):
            hint = f": try block={triton.next_power_of_2(max(block, 1))}"
        raise ValueError(
            f"{fn}: block={block!r} must be a positive power of two (tl.arange needs one){hint}"
        )


# ---------------------------------------------------------------------------------------------
# The device: multiprocessors, shared memory, and launching where torch.compile traces
# ---------------------------------------------------------------------------------------------


def _max_pieces(device: torch.device) -> int:
    """Programs of one row that are sure to run at once: one per multiprocessor; 0 on the CPU."""
    if device.type != "cuda":
        return 0
    return tk._sm_count(device.index if device.index is not None else
                        torch.cuda.current_device())


@functools.cache
def _shared_memory(index: int) -> int:
    """Bytes of shared memory one program may use on GPU ``index`` (what Triton checks)."""
    return triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]


def _pipeline_stages(device: torch.device, plan: Plan) -> int:
    """plan.stages, or fewer where shared memory cannot hold stages - 1 rows of 16-bit pairs
    (and 4 KiB for the reductions); 1 in the interpreter, which ignores it."""
    if device.type != "cuda":
        return 1
    index = device.index if device.index is not None else torch.cuda.current_device()
    in_flight = (_shared_memory(index) - 4096) // (plan.block * 2)
    return max(1, min(plan.stages, 1 + in_flight))


def _fits_shared_copies(*tensors: torch.Tensor) -> bool:
    """True if lab.gluon's kernel can copy these (rows, cols) views 16 bytes at a
    time (_copyable_rows) on the GPU that holds them: an NVIDIA GPU with asynchronous copies
    (compute capability 8.0 on) and a Triton whose Gluon the kernel is written for. False while
    torch.compile traces (fake tensors): its graph holds only Triton kernels, which it knows
    how to analyse, so it keeps _softmax_split_row."""
    return all(
        type(t) is torch.Tensor
        and t.device.type == "cuda"
        and torch.version.hip is None  # ROCm calls its GPUs "cuda" too: no cp.async there
        and _copyable_rows(t.shape[1], t.stride(0), t.data_ptr())
        and _capability(t.device.index if t.device.index is not None else
                        torch.cuda.current_device()) >= (8, 0)
        for t in tensors
    ) and _gluon_available()


def _copyable_rows(n_cols: int, row_stride: int, address: int) -> bool:
    """Whether rows of ``n_cols`` elements, ``row_stride`` elements apart, from byte
    ``address`` on, can be copied 16 bytes at a time with no copy crossing a row's end: the
    width and the row stride multiples of 16 elements (what Triton must see in its integer
    arguments to emit 16-byte copies, whatever the dtype), the first row 16-byte aligned."""
    return n_cols % 16 == 0 and row_stride % 16 == 0 and address % 16 == 0


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def _clusters_available(device: torch.device) -> bool:
    """Whether lab.gluon._softmax_cluster runs on this GPU: a Hopper (compute
    capability 9.x, the one with thread-block clusters that it was measured on) where Gluon
    runs. Callers ask only for tensors _fits_shared_copies accepts."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _capability(index)[0] == 9 and _gluon_available()


@functools.cache
def _gluon_available() -> bool:
    """Whether lab.gluon's kernel runs here: compiled kernels, and a Triton with the
    Gluon it is written for (imported on first use: the CPU never needs it)."""
    if tk._INTERPRETED:
        return False
    from lab import gluon

    return gluon.AVAILABLE


# ---------------------------------------------------------------------------------------------
# 1. Softmax, one row per program, the two reductions made one (GPU, wide 16-bit rows)
# ---------------------------------------------------------------------------------------------
#
# triton_kernels._softmax reduces its row twice, the maximum and then the sum, and each
# reduction across the
# warps of a program is a round trip through shared memory with a barrier. With 16-bit rows of
# 16384 columns or more, one program of 32 warps fills a multiprocessor, nothing else runs
# beside it to hide that wait, and it shows (lab/RESULTS.md). This kernel reduces once.
#
# It views the row as (BLOCK // VEC, VEC) tiles, VEC being the elements of one 16-byte load, so
# that each tile sits in one thread. Each tile t gets its own maximum m_t and sum
# s_t = sum exp(x - m_t) without leaving its thread; then one reduction over the tiles combines
# the (m_t, s_t) pairs as the looped kernel's lanes do,
#
#     M = max(m_a, m_b),   S = s_a * exp(m_a - M) + s_b * exp(m_b - M),
#
# with the same guard for a tile of only -inf. Finally y = e_t * exp(m_t - M) / S: the
# exponentials e_t = exp(x - m_t) stay in registers and each tile is rescaled once.


@triton.jit
def _combine_max_sum(m_a, s_a, m_b, s_b):
    """Two (maximum, sum of exp(x - maximum)) pairs as one; a pair of only -inf is (-inf, 0)."""
    m = tl.maximum(m_a, m_b)
    m_ref = tl.where(m == -float("inf"), 0.0, m)  # both -inf: measure from 0, both terms 0
    return m, s_a * tl.exp2((m_a - m_ref) * _LOG2E) + s_b * tl.exp2((m_b - m_ref) * _LOG2E)


@triton.jit
def _softmax_one_pass(
    out_ptr,  # *T: output rows, column stride 1
    in_ptr,  # *T: input rows, column stride 1
    out_row_stride,  # elements from one output row to the next
    in_row_stride,  # elements from one input row to the next
    n_cols,  # columns in a row, n_cols <= BLOCK
    BLOCK: tl.constexpr,  # lanes per program: a power of two >= n_cols
    VEC: tl.constexpr,  # columns per tile: one 16-byte load (8 16-bit values), <= BLOCK
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    # the row as tiles of VEC columns, in float32
    x = tl.reshape(x.to(tl.float32), (BLOCK // VEC, VEC))
    # per tile, within one thread: m_t = max, e = exp(x - m_t) (from 0 if the tile is all -inf)
    m_t = tl.max(x, axis=1)
    e = tl.exp2((x - tl.where(m_t == -float("inf"), 0.0, m_t)[:, None]) * _LOG2E)
    # the one reduction across the program: (M, S) from the tiles' (m_t, s_t)
    m_row, s_row = tl.reduce((m_t, tl.sum(e, axis=1)), 0, _combine_max_sum)
    # y = e * exp(m_t - M) / S; a row of only -inf has S = 0 and comes out NaN, as in PyTorch
    scale = tl.where(m_t == -float("inf"), 0.0, tl.exp2((m_t - m_row) * _LOG2E)) / s_row
    y = tl.reshape(e * scale[:, None], (BLOCK,))
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------
# 2. Softmax, the next rows loaded while this one is computed (GPU, 16-bit rows of 32768)
# ---------------------------------------------------------------------------------------------
#
# A 32768-column row held in float32 is 128 KiB of registers, half of a multiprocessor's, so
# one program runs per multiprocessor and its load, reductions and store follow one another:
# while it reduces, that multiprocessor reads nothing. Here one program per multiprocessor
# walks over rows (rows p, p + P, p + 2P, ...), and the loop carries STAGES - 1 rows in flight:
# Triton's loop pipeliner copies the next rows from device memory into shared memory
# (asynchronous copies) while the current one is computed. The shared memory must hold them,
# 64 KiB per 16-bit row of 32768 columns, so the launcher picks STAGES from what the GPU has.
#
# The row is read as 32-bit words, two 16-bit values each, and unpacked in registers:
# bfloat16 is the upper half of a float32, so a shift or a mask makes the float32; float16 is
# converted. The same loop over plain 16-bit loads is pipelined too, but ran up to 3 % slower
# (lab/results/whole_row.json). Words need an even n_cols, even row strides and 4-byte
# aligned rows; the launcher checks, and otherwise takes _softmax_one_pass. The padding is a
# word of two -inf.


@triton.jit
def _unpack_pairs(w, DT: tl.constexpr):
    """32-bit words as their two 16-bit values of dtype DT (low half first), in float32."""
    if DT == tl.bfloat16:
        lo = (w << 16).to(tl.float32, bitcast=True)
        hi = (w & -65536).to(tl.float32, bitcast=True)  # -65536 = 0xFFFF0000
    else:
        lo = w.to(tl.int16).to(DT, bitcast=True).to(tl.float32)
        hi = (w >> 16).to(tl.int16).to(DT, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _pack_pairs(lo, hi, DT: tl.constexpr):
    """Two float32 tensors rounded to dtype DT and packed in 32-bit words (lo in the low half)."""
    lo16 = lo.to(DT).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    hi16 = hi.to(DT).to(tl.int16, bitcast=True).to(tl.int32)
    return lo16 | (hi16 << 16)


@triton.jit
def _softmax_pipelined(
    out_ptr,  # *T: 16-bit output rows, column stride 1, rows 4-byte aligned
    in_ptr,  # *T: 16-bit input rows, column stride 1, rows 4-byte aligned
    out_row_stride,  # elements from one output row to the next, even
    in_row_stride,  # elements from one input row to the next, even
    n_rows,  # rows in the tensor; program p takes rows p, p + P, p + 2P, ... (P programs)
    n_cols,  # columns in a row, even, n_cols <= BLOCK
    NEG_INF_PAIR: tl.constexpr,  # the int32 word holding two -inf of dtype T: the padding
    BLOCK: tl.constexpr,  # columns per row, a power of two >= n_cols: BLOCK // 2 words
    STAGES: tl.constexpr,  # rows in flight in the loop (the loop pipeliner's stages)
):
    DT: tl.constexpr = in_ptr.dtype.element_ty
    in_words = in_ptr.to(tl.pointer_type(tl.int32))
    out_words = out_ptr.to(tl.pointer_type(tl.int32))
    words = tl.arange(0, BLOCK // 2)
    mask = words < n_cols // 2
    for row in tl.range(tl.program_id(0).to(tl.int64), n_rows, tl.num_programs(0),
                        num_stages=STAGES):
        w = tl.load(in_words + row * (in_row_stride // 2) + words, mask=mask, other=NEG_INF_PAIR)
        lo, hi = _unpack_pairs(w, DT)
        # the two reductions of _softmax, over both halves of each word
        m = tl.max(tl.maximum(lo, hi), axis=0)
        e_lo = tl.exp2((lo - m) * _LOG2E)
        e_hi = tl.exp2((hi - m) * _LOG2E)
        inv = 1.0 / tl.sum(e_lo + e_hi, axis=0)
        y = _pack_pairs(e_lo * inv, e_hi * inv, DT)
        tl.store(out_words + row * (out_row_stride // 2) + words, y, mask=mask)


_NEG_INF_PAIR = {
    dtype: torch.full((2,), -float("inf"), dtype=dtype).view(torch.int32).item()
    for dtype in (torch.float16, torch.bfloat16)
}


def _pairs_of_16_bits(*tensors: torch.Tensor) -> bool:
    """True if these (rows, cols) 16-bit views can be read as aligned 32-bit words: an even
    number of columns, even row strides, and rows that start on a 4-byte boundary."""
    return all(
        t.element_size() == 2
        and t.shape[1] % 2 == 0
        and (t.shape[0] == 1 or t.stride(0) % 2 == 0)
        and _starts_on_4_bytes(t)
        for t in tensors
    )


def _starts_on_4_bytes(t: torch.Tensor) -> bool:
    """Whether the first element's address is a multiple of 4. A fake tensor (torch.compile
    traces with them) has no address: its storage offset decides, since PyTorch allocates
    storage aligned (and torch.compile copies a graph input whose storage is not)."""
    if type(t) is not torch.Tensor and is_fake(t):
        return t.storage_offset() * t.element_size() % 4 == 0
    return t.data_ptr() % 4 == 0


# ---------------------------------------------------------------------------------------------
# 3. Softmax, a wide row split across programs that run at the same time (GPU only)
# ---------------------------------------------------------------------------------------------
#
# triton_kernels._softmax_looped reads a wide row twice, and on a GPU the second read is only
# cheap while the row is still in L2; with hundreds of rows in flight it is not, and the
# kernel tops out near two thirds of the copy ceiling. Here a row of n_cols columns is instead
# cut into cdiv(n_cols, BLOCK) pieces, one program per piece, each piece kept in registers
# from its load to its store, so every element is read once and written once. The pieces of a
# row only have to agree on two numbers, the row's maximum M and sum S, which they exchange
# through a small scratch buffer in device memory:
#
#     each piece k:   m_k = max(x over the piece),  s_k = sum(exp(x - m_k) over the piece)
#     every piece:    M = max_k m_k,                S = sum_k s_k * exp(m_k - M)
#
# (the same combine as the lanes of the looped kernel, with the same guard for a piece that
# holds only -inf). A piece publishes (m_k, s_k), counts itself in at its row with an atomic
# add, and spins until all pieces of the row have arrived.
#
# Spinning on other programs is only safe if they are running too. A program therefore takes
# a ticket when it starts (an atomic counter), and the ticket, not the program id, names its
# row and piece: every smaller ticket belongs to a program that is running or finished, so the
# pieces a program waits for are either running or next in line, and the launcher guarantees
# that a whole row's pieces can be resident at once (no more pieces than multiprocessors).
# The interpreter runs programs one after another, so it would wait for ever: there the
# launcher uses _softmax_looped.


@triton.jit
def _softmax_split_row(
    out_ptr,  # *T: output rows, column stride 1
    in_ptr,  # *T: input rows, column stride 1
    out_row_stride,  # elements from one output row to the next
    in_row_stride,  # elements from one input row to the next
    n_cols,  # columns in a row; the row is cut into n_pieces = cdiv(n_cols, BLOCK) pieces
    part_ptr,  # *fp32: scratch, (n_rows, PIECES, 2): each piece's (max, sum)
    sync_ptr,  # *i32: zeroed, 1 + n_rows: [0] hands out tickets, [1 + r] counts row r's arrivals
    PIECES: tl.constexpr,  # a power of two >= n_pieces
    BLOCK: tl.constexpr,  # columns per piece, a power of two
):
    n_pieces = tl.cdiv(n_cols, BLOCK)
    # tickets are handed out in the order programs start: ticket = row * n_pieces + piece
    ticket = tl.atomic_add(sync_ptr, 1)
    row = (ticket // n_pieces).to(tl.int64)
    piece = ticket % n_pieces
    cols = piece * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    # m_k = max over the piece; a piece of only -inf measures from 0 so that s_k = 0, not NaN
    m = tl.max(x, axis=0)
    m_ref = tl.where(m == -float("inf"), 0.0, m)
    # e = exp(x - m_k), kept in registers until the store; s_k = sum over the piece of e
    e = tl.exp2((x - m_ref) * _LOG2E)
    s = tl.sum(e, axis=0)
    # publish (m_k, s_k), then count this piece in (acq_rel: the stores are visible first)
    part = part_ptr + (row * PIECES + piece) * 2
    tl.store(part, m)
    tl.store(part + 1, s)
    tl.debug_barrier()
    arrived = tl.atomic_add(sync_ptr + 1 + row, 1) + 1
    # wait for the row's other pieces
    while arrived < n_pieces:
        arrived = tl.atomic_add(sync_ptr + 1 + row, 0)
    # M = max_k m_k, S = sum_k s_k * exp(m_k - M); read through L2 (.cg), where the atomics live.
    # A piece of only -inf adds 0 * exp(-inf) = 0; a row of only -inf has M = -inf and S = NaN.
    k = tl.arange(0, PIECES)
    parts = part_ptr + (row * PIECES + k) * 2
    m_k = tl.load(parts, mask=k < n_pieces, other=-float("inf"), cache_modifier=".cg")
    s_k = tl.load(parts + 1, mask=k < n_pieces, other=0.0, cache_modifier=".cg")
    m_row = tl.max(m_k, axis=0)
    s_row = tl.sum(s_k * tl.exp2((m_k - m_row) * _LOG2E), axis=0)
    # y = exp(x - M) / S = e * exp(m_k - M) / S: one exponential per element, one per piece
    # (a piece of only -inf has e = 0 and scale 0; a row of only -inf has S = NaN: NaN)
    scale = tl.where(m == -float("inf"), 0.0, tl.exp2((m - m_row) * _LOG2E)) / s_row
    y = e * scale
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_backward_split_row(
    dx_ptr,  # *T: output gradient rows, column stride 1
    y_ptr,  # *T: softmax output rows, column stride 1
    dy_ptr,  # *T: incoming gradient rows, column stride 1
    dx_row_stride,  # elements from one dx row to the next
    y_row_stride,  # elements from one y row to the next
    dy_row_stride,  # elements from one dy row to the next
    n_cols,  # columns in a row; the row is cut into n_pieces = cdiv(n_cols, BLOCK) pieces
    part_ptr,  # *fp32: scratch, (n_rows, PIECES): each piece's sum of y * dy
    sync_ptr,  # *i32: zeroed, 1 + n_rows: [0] hands out tickets, [1 + r] counts row r's arrivals
    PIECES: tl.constexpr,  # a power of two >= n_pieces
    BLOCK: tl.constexpr,  # columns per piece, a power of two
):
    # the same ticket, publish, arrive and wait as _softmax_split_row, with one partial: s_k
    n_pieces = tl.cdiv(n_cols, BLOCK)
    ticket = tl.atomic_add(sync_ptr, 1)
    row = (ticket // n_pieces).to(tl.int64)
    piece = ticket % n_pieces
    cols = piece * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * y_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    # s_k = sum over the piece of y * dy
    tl.store(part_ptr + row * PIECES + piece, tl.sum(y * dy, axis=0))
    tl.debug_barrier()
    arrived = tl.atomic_add(sync_ptr + 1 + row, 1) + 1
    while arrived < n_pieces:
        arrived = tl.atomic_add(sync_ptr + 1 + row, 0)
    # s = sum_k s_k; dx = y * (dy - s)
    k = tl.arange(0, PIECES)
    s_k = tl.load(part_ptr + row * PIECES + k, mask=k < n_pieces, other=0.0, cache_modifier=".cg")
    dx = y * (dy - tl.sum(s_k, axis=0))
    tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------
# 4. Softmax backward, y read again after the reduction (GPU, 16-bit rows of 32768)
# ---------------------------------------------------------------------------------------------
#
# triton_kernels._softmax_backward keeps y and dy, 64 float32 values of each a thread at 32768
# columns and 16 warps, from their loads to the store of dx = y * (dy - dot): 128 registers, all
# a thread of 16 warps may have, and the compiler spills (8 bytes a thread with Triton 3.6, 16
# with 3.9). Written as dx = p - y * dot with p = y * dy, only p has to be kept if y is loaded
# again after the reduction. The row was read a moment before, and both first loads ask L2 to
# keep their lines (evict_last), so the second load is served by L2, not by device memory: 108
# to 114 registers, no spills. Measured on an H200 (1 GiB inputs, torch 2.11, 2026-12-01;
# lab/probes/backward_variants.py, lab/results/backward_variants*.json and the sweeps
# softmax_backward*.json): 1.02 of the copy ceiling in bfloat16 with Triton 3.6 and 3.9, 1.03
# to 1.05 in float16, against 1.02 (3.6) and 0.97 (3.9) for _softmax_backward. Without the hint
# on dy it ran at 0.97 in bfloat16 with 3.9; reading both y and dy again, or keeping p beside
# y, ran at 0.92 to 0.94 with 3.9.


@triton.jit
def _softmax_backward_reload(
    dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride, dy_row_stride,  # as _softmax_backward
    n_cols,  # columns in a row, n_cols <= BLOCK
    BLOCK: tl.constexpr,  # lanes per program, a power of two >= n_cols
):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    y_at = y_ptr + row * y_row_stride + offsets
    y = tl.load(y_at, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_row_stride + offsets, mask=mask, other=0.0,
                 eviction_policy="evict_last").to(tl.float32)
    p = y * dy  # kept; y and dy are not
    dot = tl.sum(p, axis=0)
    y = tl.load(y_at, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    dx = p - y * dot  # = y * (dy - dot)
    tl.store(dx_ptr + row * dx_row_stride + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------
# 5. Softmax, narrow rows read as one flat block (GPU, rows of fewer than 16 bytes)
# ---------------------------------------------------------------------------------------------
#
# triton_kernels._softmax_multi_row reads a (ROWS, BLOCK) tile through a row stride and a
# width that the compiler knows nothing about (Triton specialises an integer argument only on
# whether 16 divides it), so for rows narrower than 16 bytes it cannot prove that neighbouring
# lanes are neighbours in memory: 4-column 16-bit rows were loaded 2 bytes at a time and ran at
# 0.53 of the copy ceiling on an H200 (lab/RESULTS.md). When the rows lie one after another
# (row stride = width = BLOCK), the tile is ROWS * BLOCK consecutive elements: read as one flat
# block, whose only mask is its end, it is loaded 16 bytes at a time, then viewed as
# (ROWS, BLOCK) for the two reductions. Measured on an H200 (1 GiB inputs, torch 2.11,
# Triton 3.6 and 3.9, 2026-12-01; the forward sweeps, lab/RESULTS.md "Narrow 16-bit rows"):
# 4-column bfloat16 and float16 rows at 1.00 of the copy ceiling.


@triton.jit
def _softmax_flat_rows(
    out_ptr,  # *T: output rows, contiguous: row stride BLOCK
    in_ptr,  # *T: input rows, contiguous: row stride BLOCK
    n_elements,  # rows * BLOCK
    ROWS: tl.constexpr,  # rows per program, a power of two
    BLOCK: tl.constexpr,  # columns per row, a power of two: every row is exactly this wide
):
    flat = tl.program_id(0).to(tl.int64) * (ROWS * BLOCK) + tl.arange(0, ROWS * BLOCK)
    mask = flat < n_elements  # whole rows past the end: padded with zeros, never stored
    x = tl.load(in_ptr + flat, mask=mask, other=0.0).to(tl.float32)
    x = tl.reshape(x, (ROWS, BLOCK))
    maximum = tl.max(x, axis=1)
    numerator = tl.exp2((x - maximum[:, None]) * _LOG2E)
    y = numerator * (1.0 / tl.sum(numerator, axis=1))[:, None]
    tl.store(out_ptr + flat, tl.reshape(y, (ROWS * BLOCK,)).to(out_ptr.dtype.element_ty),
             mask=mask)


def flat_rows(plan: Plan, max_pieces: int, *tensors: torch.Tensor) -> Plan:
    """``plan`` with ``flat`` set where _softmax_flat_rows serves it better: on a GPU, a
    multi_row plan for rows of fewer than 16 bytes whose width is its block, in (rows, cols)
    views whose rows follow one another in memory."""
    if plan.strategy != "multi_row" or not max_pieces:
        return plan
    n_rows, n_cols = tensors[0].shape
    narrow = 2 <= n_cols == plan.block and n_cols * tensors[0].element_size() < 16
    if narrow and all(t.shape[0] == 1 or t.stride(0) == n_cols for t in tensors):
        return dataclasses.replace(plan, flat=True)
    return plan


def _split_scratch(n_rows: int, pieces: int, per_piece: int, device: torch.device):
    """The split_row kernels' partials (n_rows, next_power_of_2(pieces), per_piece) and the
    zeroed ticket and arrival counters (1 + n_rows)."""
    if n_rows * pieces >= 2**31:
        raise ValueError(
            f"split_row: {n_rows} rows x {pieces} pieces is more than 2**31 programs: "
            f"split the batch into smaller calls"
        )
    width = triton.next_power_of_2(pieces) * per_piece
    part = torch.empty(n_rows * width, dtype=torch.float32, device=device)
    sync = torch.zeros(1 + n_rows, dtype=torch.int32, device=device)
    return part, sync


# ---------------------------------------------------------------------------------------------
# Launching the kernels above: triton_kernels' launchers hand over the plans that name them
# ---------------------------------------------------------------------------------------------


def plan(fn: str, rows: torch.Tensor, out: torch.Tensor | None = None,
         strategy: str | None = None, block: int | None = None) -> Plan:
    """The hook's plan for one launch of triton_kernels' ``fn`` on (rows, cols) views: the
    input ``rows`` and, for softmax, its output ``out``; ``strategy`` and ``block`` override."""
    n_cols, pieces, itemsize = rows.shape[1], _max_pieces(rows.device), rows.element_size()
    if fn != "softmax":
        return _plan(fn, n_cols, strategy, block, pieces, itemsize)
    # only wide rows can use the shared-memory copies: narrow rows skip the check's cost
    shared = (strategy is not None or n_cols > SHARED_FROM) and _fits_shared_copies(rows, out)
    found = _plan("softmax", n_cols, strategy, block, pieces, itemsize,
                  _pairs_of_16_bits(rows, out), shared, shared and _clusters_available(rows.device))
    if strategy is None and block is None:
        found = flat_rows(found, pieces, rows, out)
    return found


def launch(fn: str, plan: tk.Plan, *views: torch.Tensor) -> bool:
    """Launch ``plan`` if it names a kernel of this module (True); False for triton_kernels'."""
    if not isinstance(plan, Plan) or not is_fast(plan):
        return False
    if fn == "softmax":
        launch_softmax(*views, plan)
    elif fn == "softmax_backward":
        launch_softmax_backward(*views, plan)
    else:
        return False
    return True


def is_fast(plan: Plan) -> bool:
    """Whether ``plan`` names a kernel of this module rather than one of triton_kernels.py."""
    return plan.strategy == "split_row" or plan.one_pass or plan.pipelined or plan.reload or \
        plan.flat


def launch_softmax(out: torch.Tensor, x: torch.Tensor, plan: Plan) -> None:
    """Launch the forward kernel ``plan`` names (``is_fast(plan)``) on the (rows, cols) views
    ``out`` and ``x``."""
    n_rows, n_cols = x.shape
    if plan.flat:
        wrap_triton(_softmax_flat_rows, x)[(triton.cdiv(n_rows, plan.rows),)](
            out, x, n_rows * n_cols, ROWS=plan.rows, BLOCK=plan.block, num_warps=plan.num_warps,
        )  # fmt: skip
    elif plan.pipelined:
        wrap_triton(_softmax_pipelined, x)[persistent_grid(n_rows, x.device, plan)](
            out, x, out.stride(0), x.stride(0), n_rows, n_cols,
            NEG_INF_PAIR=_NEG_INF_PAIR[x.dtype], BLOCK=plan.block,
            STAGES=_pipeline_stages(x.device, plan), num_warps=plan.num_warps,
        )  # fmt: skip
    elif plan.one_pass:
        wrap_triton(_softmax_one_pass, x)[(n_rows,)](
            out, x, out.stride(0), x.stride(0), n_cols,
            BLOCK=plan.block, VEC=min(plan.block, 16 // x.element_size()), num_warps=plan.num_warps,
        )  # fmt: skip
    elif plan.cluster:
        from lab import gluon as gluon_kernels  # where _clusters_available() said it runs

        if n_rows * plan.cluster >= 2**31:
            raise ValueError(
                f"softmax: {n_rows} rows x {plan.cluster} CTAs is more than 2**31 CTAs: split "
                f"the batch into smaller calls"
            )
        gluon_kernels.launch_clustered(
            gluon_kernels._softmax_cluster, n_rows, plan.cluster,
            out, x, out.stride(0), x.stride(0), n_cols, CTAS=plan.cluster, PIECE=plan.block,
            CHUNK=plan.chunk, VEC=16 // x.element_size(), EVEN=n_cols == plan.cluster * plan.block,
            num_warps=plan.num_warps,
        )  # fmt: skip
    elif plan.in_shared:
        from lab import gluon as gluon_kernels  # where _gluon_available() said it runs

        pieces = triton.cdiv(n_cols, plan.block)
        part, sync = _split_scratch(n_rows, pieces, 2, x.device)
        gluon_kernels._softmax_split_shared[(n_rows * pieces,)](
            out, x, out.stride(0), x.stride(0), n_cols, part, sync,
            PIECES=triton.next_power_of_2(pieces), PIECE=plan.block, CHUNK=plan.chunk,
            VEC=16 // x.element_size(), EVEN=n_cols % plan.block == 0, num_warps=plan.num_warps,
        )  # fmt: skip
    else:
        pieces = triton.cdiv(n_cols, plan.block)
        part, sync = _split_scratch(n_rows, pieces, 2, x.device)
        wrap_triton(_softmax_split_row, x)[(n_rows * pieces,)](
            out, x, out.stride(0), x.stride(0), n_cols, part, sync,
            PIECES=triton.next_power_of_2(pieces), BLOCK=plan.block, num_warps=plan.num_warps,
        )  # fmt: skip


def launch_softmax_backward(dx: torch.Tensor, y: torch.Tensor, dy: torch.Tensor,
                            plan: Plan) -> None:
    """Launch the backward kernel ``plan`` names (``is_fast(plan)``) on (rows, cols) views."""
    n_rows, n_cols = y.shape
    if plan.reload:
        wrap_triton(_softmax_backward_reload, y)[(n_rows,)](
            dx, y, dy, dx.stride(0), y.stride(0), dy.stride(0), n_cols, BLOCK=plan.block,
            num_warps=plan.num_warps,
        )  # fmt: skip
        return
    pieces = triton.cdiv(n_cols, plan.block)
    part, sync = _split_scratch(n_rows, pieces, 1, y.device)
    wrap_triton(_softmax_backward_split_row, y)[(n_rows * pieces,)](
        dx, y, dy, dx.stride(0), y.stride(0), dy.stride(0), n_cols, part, sync,
        PIECES=triton.next_power_of_2(pieces), BLOCK=plan.block, num_warps=plan.num_warps,
    )  # fmt: skip


# importing this module is what installs it (see the module's docstring)
tk.use_production_layer(sys.modules[__name__])
