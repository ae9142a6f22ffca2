"""The course's reference matrix product, which lesson 12 reads: C = A @ B with tl.dot.

Why this kernel exists
======================

A matrix product does 2 * M * N * K floating-point operations on M * K + K * N inputs: for
large matrices it is the first kernel of the course whose speed limit is arithmetic, not
memory, but only if each value loaded from memory serves many operations. One program per
BLOCK_M x BLOCK_N tile of C does that: it walks K in steps of BLOCK_K, loads a BLOCK_M x
BLOCK_K tile of A and a BLOCK_K x BLOCK_N tile of B per step, and lets ``tl.dot`` (the GPU's
tensor cores) multiply them into a float32 accumulator that never leaves the chip. Every
element it loads is used BLOCK_N (or BLOCK_M) times. Lesson 12 derives this in plain Python
and has the learner write the simple version in ``matmul.py``; this file adds what makes it
fast:

1. ``_matmul``: the kernel. Programs are numbered in *grouped* order: GROUP_M tile rows at a
   time, column by column, so that the programs running together share row panels of A and
   column panels of B in the L2 cache instead of each fetching its own. Rows past M and
   columns past N wrap around to real ones (``% M``, ``% b_cols``), so the loads need no mask
   in those directions; the store's mask drops what the wrapped lanes compute. Where K is
   whole steps (``EVEN_K``) the K loop loads with no mask at all; where the last step is cut,
   every step is masked, by runs of 16 bytes along A's rows where that is exact. Where the
   launcher knows every row of A and B starts on a 16-byte boundary (``ALIGNED``), the kernel
   says so with ``tl.multiple_of``, so that the compiler moves 16 bytes per load.
2. ``_matmul_tma``: the same product with its tiles of A and B moved by tensor descriptors
   (Hopper's TMA, Triton 3.4 and later): the copy is bounded by each operand's shape, so the
   edges read zeros with no mask or wrap at all. It needs rows on 16-byte
   boundaries; the table's rows marked ``tma`` run it where they can, and are timed beside
   the others. ``_matmul_persistent`` (rows marked ``persistent``, with pointers or
   descriptors) launches one program per multiprocessor, each walking tile after tile, so that
   a short K's pipeline start and tile store overlap the next tile's loads.
3. ``CONFIGS`` and ``SKINNY_CONFIGS``: the tile shapes timed the first time a product is
   seen, each with the reason it is in the table. Products of a few rows (a language model
   decoding a few tokens: M of 16 or fewer) read a large B once and do little arithmetic on
   it, so their tiles are narrow, and some split K between programs (``SPLIT_K``) so that
   every multiprocessor streams a share of B; the program that finishes a tile's share last
   adds the others' (``_finish_tile``), in the same launch.
4. ``matmul(a, b)``: checks its arguments (with the numbers and the fix in every message) and
   launches. The first call for a product (its shapes, strides, dtype, device and the
   alignment of its pointers) times the table's rows, as ``triton.autotune`` would (a product
   launched early, below, in calls back to back, as the bench times it: ``_back_to_back_ms``),
   and remembers the best in a ``_Plan``, with the kernel that Triton compiled for it: of the
   rows within 5 % of the fastest on the GPU (``TIE``), those that launch fewest kernels per
   call, and of them the one whose call costs the host least, where it costs clearly less
   than the fastest's (``HOST_GAIN``, the tied rows' calls timed in turns; a small product's
   kernel can end before the next call is launched, and then the launch is what a program
   waits for). Every later call for that
   product skips the checks, the choice and Triton's own launch path (which binds,
   specializes and looks the kernel up again on every call): it launches the compiled kernel
   directly (``_direct_launcher``), and where the kernel takes tensor descriptors, encodes each
   operand's descriptor once per address rather than on every call (``_EncodedLaunch``, on
   the Triton versions whose launcher it was run against). An operand whose rows do not
   start on 16-byte boundaries (4097 columns of 2 bytes) is first copied into one whose
   rows do (``_pad_rows``, both operands in one launch, into buffers the plan keeps), where
   the product is large enough for the copy to pay; or, in the rows marked "copies in the
   same launch", by the product's own launch (``_matmul_copied``): each program copies its
   share, waits until every program has (``_all_arrived``), then computes its tiles, so that
   a call costs the host one launch, as torch.matmul's does. A small product
   (``EARLY_MAX_MACS``), where the GPU and Triton allow (``EARLY_LAUNCH``), is launched early
   (programmatic dependent launch): its programs are placed as the kernel before it ends, and
   wait, before reading anything, until that kernel's writes are seen
   (``_after_the_kernel_before``).

Inputs are float32, float16 or bfloat16 (both of one dtype), of any strides; C has their
dtype and is contiguous. The sum is float32, rounded once to C's dtype. On NVIDIA GPUs
``tl.dot`` multiplies float32 inputs as TF32 (10 bits of mantissa; Triton's docstring warns
they may be truncated, not rounded), as torch does only when asked (``allow_tf32``, off by
default); 16-bit inputs are multiplied exactly. In Triton's interpreter, which cannot time
anything, ``matmul`` runs one fixed configuration and launches through Triton's usual path.
Importing this module defines the kernels and does nothing else.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

try:  # programmatic dependent launch (Triton 3.4 and later; Hopper GPUs and later)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:
    gdc_launch_dependents = gdc_wait = None

__all__ = ["CONFIGS", "INTERPRETER_CONFIG", "INTERPRETER_SKINNY", "MAX_OFFSET", "SKINNY_CONFIGS",
           "SKINNY_M", "TileConfig", "chosen_config", "forget_choices", "matmul"]

#: Largest element offset the kernel computes in 32-bit integers: (rows - 1) * row stride +
#: (columns - 1) * column stride of every operand, and M * N for C, must stay below it.
MAX_OFFSET = 2**31 - 1
#: Products with at most this many rows take the skinny table.
SKINNY_M = 16
#: Rows of an operand copied for alignment are this many elements wide (a multiple of 16
#: bytes in every dtype, and of the widest BLOCK_N's 128 bytes in 16-bit).
PAD_TO = 64
#: The copy reads and writes the operand once; it pays where the product does at least this
#: many multiply-adds (645 cubed): below it the unaligned kernel runs for a few microseconds,
#: about what launching the copy costs the host.
PAD_MIN_MACS = 2**28
#: The copy kernel's tile (rows x columns of the operand) and warps (``_pad_rows``).
PAD_TILE = (16, 256)
PAD_WARPS = 4
#: Launch the product early where the GPU and Triton can (programmatic dependent launch,
#: ``_after_the_kernel_before``): its programs are placed on the multiprocessors as the kernel
#: before ends, and wait there for that kernel's writes, instead of being launched after it.
EARLY_LAUNCH = True
#: ... for products of at most this many multiply-adds. The gap an early launch closes is a
#: fraction of a microsecond: a share of the call for a product of a few microseconds, noise
#: for a large one, where at 4096 cubed in float16 the early launch measured slower in each of
#: three H100 runs (lab/results/matmul_early_h100*.json). 1000 and 1024 cubed and a decoding
#: step are under it; 2048 cubed is not.
EARLY_MAX_MACS = 2**31
#: An early-launched product (not a persistent one) may ask for its operands into L2 before it
#: waits for the kernel before it (``_into_l2``), so that their reads from memory overlap that
#: kernel's last microseconds. Off: on an H100 the decoding step's fastest row without it beat
#: every row with it, and 1000 cubed was no faster (lab/probes/matmul_prefetch_probe.py,
#: lab/results/matmul_prefetch_h100.json); 1024 cubed, which meets its goal without, gained 5 %.
PREFETCH = False
#: ... this share of each operand, from its first element: every program walks K from its
#: start, so the first rows of B are the first read, and the rest streams in behind them.
PREFETCH_SHARE = 1.0
#: The copy's tile where the product's own launch copies (``_matmul_copied``): one program
#: per multiprocessor copies many tiles, one after another, so each is larger.
COPY_INSIDE_TILE = (64, 256)
#: Launch ``_matmul_copied`` as a cooperative grid: the driver then promises that every
#: program is resident at once (or refuses the launch), which its wait for the others needs.
COOPERATIVE = True
#: A plan keeps the buffers it copies into, one pair per stream, with their descriptors, for
#: its next calls, where the pair takes at most this many bytes (4097 cubed in 16-bit: 65 MiB,
#: held until ``forget_choices``): allocating and describing them on every call costs the host
#: microseconds each time. Larger pairs are allocated for each call, as C is (the GPU's time
#: dwarfs the host's there).
KEEP_PADDED_BYTES = 256 * 2**20


@dataclass(frozen=True)
class TileConfig:
    """One row of a tuning table: the tile of C, the K step, the grouping, the launch, and how
    many programs share one tile's K (``split_k``; 1: each program sums all of K)."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int
    split_k: int = 1
    tma: bool = False  # tiles moved by tensor descriptors (_matmul_tma) instead of pointers
    # one program per multiprocessor walks tile after tile (_matmul_persistent)
    persistent: bool = False
    # the copies into aligned rows made by the product's own launch (_matmul_copied): rows
    # that are persistent, with pointers, and run only where an operand is copied
    copy_inside: bool = False
    # CTAs per program (Triton's num_ctas, Hopper and later): the tile is shared out among
    # the CTAs of one thread-block cluster
    cluster: int = 1

    def shared_bytes(self, element_bytes: int) -> int:
        """Shared memory the software pipeline holds: num_stages tiles of A and of B."""
        return self.num_stages * (self.block_m + self.block_n) * self.block_k * element_bytes

    @property
    def label(self) -> str:
        split = f", K split in {self.split_k}" if self.split_k > 1 else ""
        tma = ", tensor descriptors" if self.tma else ""
        persistent = ", persistent" if self.persistent else ""
        inside = ", copies in the same launch" if self.copy_inside else ""
        cluster = f", clusters of {self.cluster}" if self.cluster > 1 else ""
        return (f"{self.block_m}x{self.block_n}x{self.block_k} group {self.group_m}, "
                f"{self.num_warps} warps, {self.num_stages} stages{split}{tma}{persistent}"
                f"{inside}{cluster}")


# The tuning table: the first call for a product times every row that fits in shared memory
# and keeps the fastest for the next calls. Few rows, each there for a reason: every row costs
# a compile and a timing run per new product.
CONFIGS = (
    # Large 16-bit products: the widest tile that fits three pipeline stages (2 bytes *
    # (128 + 256) * 64 * 3 = 144 KiB); 8 warps make two warpgroups on Hopper's tensor cores.
    TileConfig(128, 256, 64, 8, 8, 3),
    # The same tile, one stage deeper (192 KiB): more loads in flight per program.
    TileConfig(128, 256, 64, 8, 8, 4),
    # The transposed shape, for products whose N is the smaller side.
    TileConfig(256, 128, 64, 8, 8, 3),
    # Square 128 tiles: twice the programs of the wide tiles, for mid-sized products.
    TileConfig(128, 128, 64, 8, 4, 4),
    TileConfig(128, 128, 64, 8, 8, 3),
    # Thin K step, deep pipeline: what the Triton tutorials use on Ampere-class GPUs.
    TileConfig(64, 256, 32, 8, 4, 4),
    # Small products (or few tiles): more, smaller programs keep every multiprocessor busy.
    TileConfig(128, 64, 64, 8, 4, 4),
    TileConfig(64, 128, 64, 8, 4, 4),
    # The same, one stage deeper: at 1024 cubed on an H200 the fastest pointer row measured
    # (lab/probes/matmul_rows_probe.py).
    TileConfig(64, 128, 64, 8, 4, 5),
    TileConfig(64, 64, 64, 8, 4, 3),
    # The large tiles again with tensor descriptors (Hopper's TMA: one copy instruction per
    # tile, the edges filled with zeros by the hardware), where the GPU and the rows allow.
    TileConfig(128, 256, 64, 8, 8, 3, tma=True),
    TileConfig(128, 256, 64, 8, 8, 4, tma=True),
    TileConfig(128, 128, 64, 8, 4, 4, tma=True),
    # The small products' tiles with tensor descriptors: 1024 cubed makes 64 tiles of 128 x 128
    # for 132 multiprocessors, and 128 of these.
    TileConfig(64, 128, 64, 8, 4, 4, tma=True),
    TileConfig(128, 64, 64, 8, 4, 4, tma=True),
    # The same small tiles with longer or more steps in flight, with descriptors and without:
    # at 1024 cubed on an H200 the fastest rows measured (lab/probes/matmul_rows_probe.py).
    TileConfig(64, 128, 128, 8, 4, 4, tma=True),
    TileConfig(64, 128, 64, 8, 4, 6, tma=True),
    TileConfig(64, 128, 128, 8, 4, 4),
    TileConfig(64, 128, 64, 8, 4, 6),
    # One program per multiprocessor, walking tiles (_matmul_persistent): where K is short,
    # the next tile's loads overlap this one's last steps and its store. At 4096 x 4096 x 512
    # on an H200, as fast as cuBLAS, where a program per tile is slower.
    TileConfig(128, 256, 64, 8, 8, 3, persistent=True),
    TileConfig(128, 256, 64, 8, 8, 4, persistent=True),
    TileConfig(128, 256, 64, 8, 8, 3, tma=True, persistent=True),
    # The persistent rows again, copying the operands in the same launch, for products whose
    # rows must be copied (4097 cubed): one launch per call, not two.
    TileConfig(128, 256, 64, 8, 8, 3, persistent=True, copy_inside=True),
    TileConfig(128, 256, 64, 8, 8, 4, persistent=True, copy_inside=True),
)

# The skinny table, for M <= SKINNY_M (8 x 4096 x 4096: 32 MiB of B for 0.27 GFLOP). Such a
# product is a copy of B through the tensor cores: what counts is that all of an H200's 132
# multiprocessors stream B at once, with many bytes in flight each. One tile row of 16
# (tl.dot's smallest M on every Triton the course runs); the tile's columns and the K split
# decide how many programs share B. For N = 4096:
SKINNY_CONFIGS = (
    # 128 programs, each a 32-column strip of B, K in steps of 256, 4 deep: 96 KiB in flight.
    TileConfig(16, 32, 256, 1, 4, 4),
    # The same strips with a shorter step, 6 deep; or a long step, 6 or 3 deep (up to 80 KiB
    # of B in flight: a multiprocessor streams at full speed only with many bytes in flight).
    TileConfig(16, 32, 128, 1, 4, 6),
    TileConfig(16, 32, 256, 1, 4, 6),
    TileConfig(16, 32, 512, 1, 4, 3),
    # 256 programs of 16 columns, two per multiprocessor: the one row whose pipeline fits a
    # T4's 64 KiB in 16-bit.
    TileConfig(16, 16, 256, 1, 4, 4),
    # 64 strips of 64 columns, K split in 4: 256 programs; each tile's last adds the four.
    TileConfig(16, 64, 128, 1, 4, 4, split_k=4),
    # 64 strips of 64 columns, K split in 2: 128 programs, each twice the bytes in flight.
    TileConfig(16, 64, 256, 1, 4, 4, split_k=2),
    # The 32-column strips and the split in 4 with tensor descriptors: a few threads issue
    # each tile's copy, the rest wait on it.
    TileConfig(16, 32, 256, 1, 4, 4, tma=True),
    TileConfig(16, 64, 128, 1, 4, 4, split_k=4, tma=True),
    # The long step and the split in 2 with tensor descriptors: fewer, larger copies in flight.
    TileConfig(16, 32, 512, 1, 4, 3, tma=True),
    TileConfig(16, 64, 256, 1, 4, 4, split_k=2, tma=True),
    # The long step 4 deep, and 2 warps 6 deep, with tensor descriptors: the fastest rows
    # measured on an H200 for 8 x 4096 x 4096 (lab/probes/matmul_rows_probe.py).
    TileConfig(16, 32, 512, 1, 4, 4, tma=True),
    TileConfig(16, 32, 256, 1, 2, 6, tma=True),
)

#: The configurations the interpreter runs (it times nothing, so there is nothing to tune);
#: the skinny one splits K so that the split's finish (_finish_tile) runs in its tests too.
INTERPRETER_CONFIG = TileConfig(32, 32, 32, 4, 4, 1)
INTERPRETER_SKINNY = TileConfig(16, 32, 32, 1, 4, 1, split_k=2)


@triton.jit
def _tile(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Which tile of C the tile-th program computes: programs come in groups of GROUP_M tile
    rows; inside a group they go down a column of tiles before moving right, so neighbours in
    time share panels of A and B."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    height = min(tiles_m - first_m, GROUP_M)  # the last group may have fewer tile rows
    pid_m = first_m + (tile % per_group) % height
    pid_n = (tile % per_group) // height
    return pid_m, pid_n


@triton.jit
def _after_the_kernel_before(EARLY: tl.constexpr):
    """Where the launch was early (``EARLY``: programmatic dependent launch, ``_Plan``), wait
    until the kernel before this one on the stream has finished and its writes are seen, then
    let the kernel after this one launch. Called before any load: the inputs may be that
    kernel's outputs. The next kernel's programs can then be placed on the multiprocessors as
    this one's leave, instead of after a whole kernel boundary."""
    if EARLY:
        gdc_wait()
        gdc_launch_dependents()


@triton.jit
def _into_l2(ptr, span, LINE: tl.constexpr):
    """Ask the L2 cache for this program's share of the ``span`` elements from ``ptr``, one
    128-byte line (``LINE`` elements) per lane, without waiting for any of them. Programs
    share the lines out in turn, so that together they ask for each line once.

    Made before an early-launched program waits for the kernel before it
    (``_after_the_kernel_before``): while that kernel still runs, this one's operands start
    moving from memory into L2, and its first loads after the wait find them there. Only L2
    is filled, and L2 is where every write of the kernel before lands: a line fetched before
    that kernel writes it is updated there, so what the loads read after the wait is the same
    as without the prefetch. (PTX's ``prefetch.global.L2``; Triton has no prefetch of its own,
    and its interpreter runs no PTX: the launcher never asks for it there.)"""
    lanes: tl.constexpr = 128
    me = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
    programs = tl.num_programs(0) * tl.num_programs(1)
    lines = tl.cdiv(span, LINE)
    share = tl.cdiv(lines, programs)
    first = me * share
    last = min(first + share, lines)
    for at in range(first, last, lanes):
        line = tl.minimum(at + tl.arange(0, lanes), last - 1)  # past the share: its last again
        tl.inline_asm_elementwise("prefetch.global.L2 [$1];", "=r,l",
                                  [ptr + line.to(tl.int64) * LINE], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def _store_tile(c_ptr, c, rows, cols, stride_cm, stride_cn, M, N, C_ALIGNED: tl.constexpr,
                VEC: tl.constexpr):
    """Store a tile of C, masked to M x N. Where C's rows start on 16-byte boundaries
    (``C_ALIGNED``: N a multiple of VEC, C contiguous), the kernel says so, and compares whole
    runs of VEC columns with N: Triton then sees the mask constant over each run and stores 16
    bytes at a time even where N, say 1000, is no multiple of 16 that it can see."""
    c_rows = rows * stride_cm
    if C_ALIGNED:
        c_rows = tl.multiple_of(c_rows, VEC)
        in_n = (cols // VEC) < N // VEC
    else:
        in_n = cols < N
    c_ptrs = c_ptr + c_rows[:, None] + cols[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(rows[:, None] < M) & in_n[None, :])


@triton.jit
def _finish_tile(c_ptr, acc, rows, cols, stride_cm, stride_cn, M, N, partial_ptr, arrivals_ptr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr,
                 C_ALIGNED: tl.constexpr, VEC: tl.constexpr):
    """Round a program's float32 sum to C's dtype and store it, once the tile's sum is whole.

    With SPLIT_K programs per tile, each holds one share of K's sum. Each writes its share to
    its own BLOCK_M x BLOCK_N slot of the workspace (``partial_ptr``, float32), then counts
    itself in at the tile's arrival counter (``arrivals_ptr``, int32, zero at launch); the
    program that arrives last adds the other shares to its own, stores C and sets the counter
    back to zero for the next launch. Nobody waits for anybody (the programs of a tile need
    not run at the same time), and the sum needs no second kernel.
    """
    if SPLIT_K > 1:
        tile_size: tl.constexpr = BLOCK_M * BLOCK_N
        tile = tl.program_id(0)
        share = tl.program_id(1)
        slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        shares = partial_ptr + tile.to(tl.int64) * (SPLIT_K * tile_size)
        tl.store(shares + share * tile_size + slot, acc)
        # Every thread's store is done before one thread counts the program in; the count is
        # a release (what was stored before it is seen by whoever reads the count after it)
        # and an acquire (the last program sees every share counted before its own).
        tl.debug_barrier()
        arrived = tl.atomic_add(arrivals_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            for s in tl.static_range(SPLIT_K):
                if s != share:  # ".cg": from L2, where the other programs' stores are
                    acc += tl.load(shares + s * tile_size + slot, cache_modifier=".cg")
            tl.atomic_xchg(arrivals_ptr + tile, 0)
            _store_tile(c_ptr, acc.to(c_ptr.dtype.element_ty), rows, cols, stride_cm,
                        stride_cn, M, N, C_ALIGNED, VEC)
    else:
        _store_tile(c_ptr, acc.to(c_ptr.dtype.element_ty), rows, cols, stride_cm, stride_cn,
                    M, N, C_ALIGNED, VEC)


@triton.jit
def _in_k(at, end, K_RUNS: tl.constexpr, VEC: tl.constexpr):
    """Which of the positions ``at`` along A's rows (K) to load: those before ``end``. With
    ``K_RUNS`` the test is made on whole runs of VEC positions (a run is in if it starts before
    ``end``), so that the mask is constant over each run and Triton still loads 16 bytes at a
    time where K, say 1000 or 4097, is no multiple of 16 it can see. Exact where ``end`` is a
    multiple of VEC; otherwise it reads past ``end`` up to the run's end, which the launcher
    asks for only where those columns hold zeros (A's aligned copy, ``_pad_tile``), and B's
    rows there are masked to zero anyway."""
    if K_RUNS:
        return (at // VEC) < tl.cdiv(end, VEC)
    return at < end


@triton.jit
def _matmul(
    c_ptr,  # the output C, (M, N), in the inputs' dtype
    a_ptr,  # A, (M, K)
    b_ptr,  # B, (K, N)
    partial_ptr,  # SPLIT_K > 1: float32 workspace, a BLOCK_M x BLOCK_N slot per program
    arrivals_ptr,  # SPLIT_K > 1: int32, one counter per tile of C, zero at launch
    stride_cm, stride_cn,  # elements between neighbours down a column and along a row of C
    stride_am, stride_ak,  # the same for A
    stride_bk, stride_bn,  # the same for B
    M, N, K,  # C is M x N; the sum runs over K
    b_cols,  # columns of B the loads may read: N, or the width of B's aligned copy
    k_split,  # K elements each of the SPLIT_K programs of a tile sums (a multiple of BLOCK_K)
    BLOCK_M: tl.constexpr,  # rows of C per program
    BLOCK_N: tl.constexpr,  # columns of C per program
    BLOCK_K: tl.constexpr,  # the K step: one tile of A is BLOCK_M x BLOCK_K
    GROUP_M: tl.constexpr,  # tile rows visited together before moving on (L2 reuse)
    SPLIT_K: tl.constexpr,  # programs per tile of C, each summing k_split of K
    EVEN_K: tl.constexpr,  # every program's share of K is whole steps: no step needs a mask
    K_RUNS: tl.constexpr,  # A's K mask may go by runs of VEC (``_in_k``)
    ALIGNED: tl.constexpr,  # A and B row-major, their rows and b_cols multiples of VEC
    VEC: tl.constexpr,  # elements in 16 bytes: 8 in 16-bit, 4 in float32
    C_ALIGNED: tl.constexpr,  # N a multiple of VEC: C's rows start on 16-byte boundaries
    EARLY: tl.constexpr,  # launched early: wait for the kernel before (_after_the_kernel_before)
    a_span=0, b_span=0,  # PREFETCH: elements of A and of B, from their first to their last
    PREFETCH: tl.constexpr = False,  # launched early: A and B asked into L2 first (_into_l2)
):
    """One program computes one BLOCK_M x BLOCK_N tile of C = A @ B, or with SPLIT_K > 1 the
    part of it that one share of K contributes.

    Preconditions: every BLOCK a power of two, at least 16 (tl.dot's K on a GPU, and its M
    and N too before Triton 3.5); M and N at least 1; every offset below 2**31; k_split a
    multiple of BLOCK_K and every program's share of K non-empty. Any strides; ALIGNED only
    where the launcher checked what it claims.
    """
    if PREFETCH:
        _into_l2(a_ptr, a_span, 8 * VEC)
        _into_l2(b_ptr, b_span, 8 * VEC)
    _after_the_kernel_before(EARLY)
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    steps = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    # Rows past M read row r % M, a real one, and columns past b_cols wrap likewise, so the
    # loads need no M or N mask; the store below is masked, so what they compute is never
    # written.
    rows_a = rows % M
    cols_b = cols % b_cols

    # This program's share of the sum: K elements from k_start, k_len of them.
    if SPLIT_K == 1:
        k_start = 0
        k_len = K
    else:
        k_start = tl.program_id(1) * k_split
        k_len = min(k_split, K - k_start)
    ks = k_start + steps  # (BLOCK_K,)
    a_rows = rows_a * stride_am  # (BLOCK_M,): where the tile's rows of A start
    b_rows = ks * stride_bk  # (BLOCK_K,): the same for B
    if ALIGNED:
        # Promises the compiler cannot prove on its own when a row is, say, 1000 elements
        # long (Triton notices only multiples of 16 in its arguments): every row of A and B
        # starts on a 16-byte boundary, and the columns of B come in runs of VEC that start
        # on one. With them each thread loads 16 bytes at a time instead of one element.
        # (Made on the 1-D offsets: a promise on a broadcast (BLOCK, 1) column also speaks
        # for its one-wide axis, and Triton 3.6 then loads element by element.)
        a_rows = tl.multiple_of(a_rows, VEC)
        b_rows = tl.multiple_of(b_rows, VEC)
        cols_b = tl.max_contiguous(tl.multiple_of(cols_b, VEC), VEC)
    a_ptrs = a_ptr + a_rows[:, None] + ks[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + b_rows[:, None] + cols_b[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    end = k_start + k_len
    for step in range(0, tl.cdiv(k_len, BLOCK_K)):
        if EVEN_K:  # whole steps only: no load needs a mask
            a = tl.load(a_ptrs)  # (BLOCK_M, BLOCK_K)
            b = tl.load(b_ptrs)  # (BLOCK_K, BLOCK_N)
        else:
            # The last step is cut: every step is masked, positions in K before the share's
            # end real and the rest 0 on both operands (0 * anything adds nothing). One loop
            # with the mask only the last step needs, rather than that step peeled off the
            # loop: the peeled step made 4096 x 4096 x 4064 much slower with Triton 3.6 and no
            # faster with 3.9, and the mask costs next to nothing
            # (lab/probes/matmul_edges_probe.py).
            at = k_start + step * BLOCK_K + steps  # (BLOCK_K,): positions in K
            a = tl.load(a_ptrs, mask=_in_k(at, end, K_RUNS, VEC)[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=at[:, None] < end, other=0.0)
        acc = tl.dot(a, b, acc)  # acc += a @ b on the tensor cores, summed in float32
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # one rounding, at the end, of the whole sum (shares of K are added in float32)
    _finish_tile(c_ptr, acc, rows, cols, stride_cm, stride_cn, M, N, partial_ptr, arrivals_ptr,
                 BLOCK_M, BLOCK_N, SPLIT_K, C_ALIGNED, VEC)


@triton.jit
def _matmul_tma(
    c_ptr,  # as in _matmul
    a_tiles,  # a tensor descriptor of A, (M, K), in blocks of BLOCK_M x BLOCK_K
    b_tiles,  # a tensor descriptor of B, (K, N), in blocks of BLOCK_K x BLOCK_N
    partial_ptr, arrivals_ptr,  # as in _matmul
    a_ptr, b_ptr,  # A and B themselves, which only PREFETCH reads (_into_l2)
    stride_cm, stride_cn,  # as in _matmul
    M, N, K, k_split,  # as in _matmul
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
    VEC: tl.constexpr, C_ALIGNED: tl.constexpr, EARLY: tl.constexpr,  # as in _matmul
    a_span=0, b_span=0, PREFETCH: tl.constexpr = False,  # as in _matmul
):
    """``_matmul`` with its tiles of A and B moved by tensor descriptors. The launcher makes
    one per operand on the host, with the operand's own shape and strides: a load names the
    tile's first row and column, and on Hopper and later it is one TMA copy, which the
    compiler pipelines. The copy is bounded by the operand's shape in both dimensions: rows
    past M, columns past N and steps past K read as zeros, so no load needs a mask or a wrap.
    Shares of K are whole steps, so a share never reads into the next one.

    Preconditions as ``_matmul``, and A and B row-major with rows that start on 16-byte
    boundaries (``_Plan`` copies them where they do not).
    """
    if PREFETCH:
        _into_l2(a_ptr, a_span, 8 * VEC)
        _into_l2(b_ptr, b_span, 8 * VEC)
    _after_the_kernel_before(EARLY)
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    if SPLIT_K == 1:
        k_start = 0
        k_end = K
    else:
        k_start = tl.program_id(1) * k_split
        k_end = min(k_start + k_split, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        a = a_tiles.load([pid_m * BLOCK_M, k0])  # (BLOCK_M, BLOCK_K)
        b = b_tiles.load([k0, pid_n * BLOCK_N])  # (BLOCK_K, BLOCK_N)
        acc = tl.dot(a, b, acc)

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    _finish_tile(c_ptr, acc, rows, cols, stride_cm, stride_cn, M, N, partial_ptr, arrivals_ptr,
                 BLOCK_M, BLOCK_N, SPLIT_K, C_ALIGNED, VEC)


@triton.jit
def _matmul_persistent(
    c_ptr,  # as in _matmul
    a, b,  # tensor descriptors of A and B (TMA), as in _matmul_tma; or pointers, as in _matmul
    stride_cm, stride_cn, stride_am, stride_ak, stride_bk, stride_bn,  # as in _matmul
    M, N, K, b_cols,  # as in _matmul
    programs,  # programs launched: one per multiprocessor, or fewer where there are fewer tiles
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    TMA: tl.constexpr,  # a and b are tensor descriptors
    EVEN_K: tl.constexpr, K_RUNS: tl.constexpr, ALIGNED: tl.constexpr, VEC: tl.constexpr,
    C_ALIGNED: tl.constexpr, EARLY: tl.constexpr,  # as in _matmul
):
    """One program per multiprocessor, each computing tile after tile of C (``_tiles_in_turn``).
    Preconditions as ``_matmul`` (or ``_matmul_tma``), with no split of K."""
    _after_the_kernel_before(EARLY)
    _tiles_in_turn(c_ptr, a, b, stride_cm, stride_cn, stride_am, stride_ak, stride_bk,
                   stride_bn, M, N, K, b_cols, programs, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                   TMA, EVEN_K, K_RUNS, ALIGNED, VEC, C_ALIGNED)


@triton.jit
def _tiles_in_turn(c_ptr, a, b, stride_cm, stride_cn, stride_am, stride_ak, stride_bk,
                   stride_bn, M, N, K, b_cols, programs, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   TMA: tl.constexpr, EVEN_K: tl.constexpr, K_RUNS: tl.constexpr,
                   ALIGNED: tl.constexpr, VEC: tl.constexpr, C_ALIGNED: tl.constexpr):
    """This program's tiles of C, one after the other: the tile-th, then the
    (tile + programs)-th, ... Where K is short (4096 x 4096 x 512: eight steps per tile),
    a program per tile spends much of its life filling its pipeline and storing its tile; here
    the loop over tiles and K is one loop to the compiler (``flatten``), which then loads the
    next tile's first steps while this tile's last ones multiply and its sum is stored.

    With pointers, a K that is not whole steps is masked on every step, as in ``_matmul``.
    """
    steps = tl.cdiv(K, BLOCK_K)
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles, programs, flatten=True):
        pid_m, pid_n = _tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if TMA:
            for step in range(steps):
                a_tile = a.load([pid_m * BLOCK_M, step * BLOCK_K])
                b_tile = b.load([step * BLOCK_K, pid_n * BLOCK_N])
                acc = tl.dot(a_tile, b_tile, acc)
        else:  # as _matmul: rows past M and columns past b_cols wrap to real ones
            a_rows = (rows % M) * stride_am
            b_rows = ks * stride_bk
            cols_b = cols % b_cols
            if ALIGNED:
                a_rows = tl.multiple_of(a_rows, VEC)
                b_rows = tl.multiple_of(b_rows, VEC)
                cols_b = tl.max_contiguous(tl.multiple_of(cols_b, VEC), VEC)
            a_ptrs = a + a_rows[:, None] + ks[None, :] * stride_ak
            b_ptrs = b + b_rows[:, None] + cols_b[None, :] * stride_bn
            for step in range(steps):
                if EVEN_K:
                    a_tile = tl.load(a_ptrs)
                    b_tile = tl.load(b_ptrs)
                else:
                    at = step * BLOCK_K + ks
                    a_tile = tl.load(a_ptrs, mask=_in_k(at, K, K_RUNS, VEC)[None, :], other=0.0)
                    b_tile = tl.load(b_ptrs, mask=at[:, None] < K, other=0.0)
                acc = tl.dot(a_tile, b_tile, acc)
                a_ptrs += BLOCK_K * stride_ak
                b_ptrs += BLOCK_K * stride_bk
        _store_tile(c_ptr, acc.to(c_ptr.dtype.element_ty), rows, cols, stride_cm, stride_cn, M,
                    N, C_ALIGNED, VEC)


@triton.jit
def _pad_tile(src, dst, rows, cols, stride_r, stride_c, wide, tile, BLOCK_R: tl.constexpr,
              BLOCK_C: tl.constexpr, VEC: tl.constexpr):
    """Copy one BLOCK_R x BLOCK_C tile of ``src`` (rows x cols, any strides) into ``dst``,
    row-major with rows ``wide`` elements apart (a multiple of VEC, 16 bytes, as ``dst``'s
    start is). Loads are masked to the operand; stores go by whole runs of VEC, so that each
    is 16 bytes: the run that straddles ``cols`` writes zeros into the padding, never read."""
    tiles_c = tl.cdiv(cols, BLOCK_C)
    r = (tile // tiles_c) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = (tile % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)
    in_rows = r[:, None] < rows
    values = tl.load(src + r[:, None] * stride_r + c[None, :] * stride_c,
                     mask=in_rows & (c[None, :] < cols), other=0.0)
    dst_rows = tl.multiple_of(r * wide, VEC)
    tl.store(dst + dst_rows[:, None] + c[None, :], values,
             mask=in_rows & ((c // VEC) < tl.cdiv(cols, VEC))[None, :])


@triton.jit
def _pad_rows(
    src_0, dst_0, src_1, dst_1,  # the first operand to copy and its buffer; the second's
    rows_0, cols_0, stride_0r, stride_0c, wide_0,  # the first's shape, strides, buffer width
    rows_1, cols_1, stride_1r, stride_1c, wide_1,  # the same for the second
    tiles_0,  # programs that copy the first operand; the others copy the second
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, VEC: tl.constexpr,
):
    """The copies of A and B into rows on 16-byte boundaries (``_Plan``), in one launch: each
    launch costs the host microseconds on every call, and there are two operands."""
    tile = tl.program_id(0)
    if tile < tiles_0:
        _pad_tile(src_0, dst_0, rows_0, cols_0, stride_0r, stride_0c, wide_0, tile, BLOCK_R,
                  BLOCK_C, VEC)
    else:
        _pad_tile(src_1, dst_1, rows_1, cols_1, stride_1r, stride_1c, wide_1, tile - tiles_0,
                  BLOCK_R, BLOCK_C, VEC)


@triton.jit
def _all_arrived(barrier, programs):
    """Wait until every program of the launch has called this; what each stored before it is
    then seen by all. ``barrier`` holds two int32: how many have arrived (0 between launches)
    and a generation that the last to arrive moves on, which the others wait for. Nothing is
    reset by anyone still waiting, so the next launch may reuse both at once.

    Every program of the launch must be running at the same time, or the first ones wait for
    ever: the launch asks the driver for exactly that (``launch_cooperative_grid``, which
    fails rather than hangs where the grid cannot all be resident), and the interpreter, which
    runs one program after another, launches one."""
    tl.debug_barrier()  # every thread's stores are made before the program counts itself in
    generation = tl.atomic_add(barrier + 1, 0, sem="acquire", scope="gpu")
    arrived = tl.atomic_add(barrier, 1, sem="acq_rel", scope="gpu")
    if arrived == programs - 1:
        tl.atomic_xchg(barrier, 0, sem="relaxed", scope="gpu")
        tl.atomic_add(barrier + 1, 1, sem="release", scope="gpu")
    else:
        while tl.atomic_add(barrier + 1, 0, sem="acquire", scope="gpu") == generation:
            pass
    tl.debug_barrier()  # no thread reads before the program has seen the others arrive


@triton.jit
def _matmul_copied(
    c_ptr,  # as in _matmul
    a_src, b_src,  # A and B as given: the copies read them
    a_ptr, b_ptr,  # what the product reads: each operand's aligned copy, or the operand itself
    barrier,  # two int32 for _all_arrived, zeros before the first launch
    rows_0, cols_0, stride_0r, stride_0c, wide_0,  # A as given, and its copy's row width
    rows_1, cols_1, stride_1r, stride_1c, wide_1,  # the same for B
    tiles_0, tiles_1,  # copy tiles of A and of B (0 for an operand not copied)
    stride_cm, stride_cn, stride_am, stride_ak, stride_bk, stride_bn,  # as in _matmul
    M, N, K, b_cols,  # as in _matmul
    programs,  # programs launched: at most one per multiprocessor, all resident at once
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, K_RUNS: tl.constexpr, ALIGNED: tl.constexpr, VEC: tl.constexpr,
    C_ALIGNED: tl.constexpr,  # as in _matmul
    COPY_R: tl.constexpr, COPY_C: tl.constexpr,  # the copy's tile, as _pad_rows's
):
    """``_pad_rows`` and ``_matmul_persistent`` in one launch: a call of the reference costs
    the host one launch, as torch.matmul's does, where the copies would make it two. Every
    program copies its share of the tiles of A and B into their aligned rows, waits until all
    have (``_all_arrived``), then computes tile after tile of C from the copies, with
    pointers. Preconditions as ``_matmul_persistent`` with pointers, and every program resident
    at once."""
    tile = tl.program_id(0)
    while tile < tiles_0 + tiles_1:
        if tile < tiles_0:
            _pad_tile(a_src, a_ptr, rows_0, cols_0, stride_0r, stride_0c, wide_0, tile, COPY_R,
                      COPY_C, VEC)
        else:
            _pad_tile(b_src, b_ptr, rows_1, cols_1, stride_1r, stride_1c, wide_1,
                      tile - tiles_0, COPY_R, COPY_C, VEC)
        tile += programs
    _all_arrived(barrier, programs)
    _tiles_in_turn(c_ptr, a_ptr, b_ptr, stride_cm, stride_cn, stride_am, stride_ak, stride_bk,
                   stride_bn, M, N, K, b_cols, programs, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                   False, EVEN_K, K_RUNS, ALIGNED, VEC, C_ALIGNED)


_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _interpreted() -> bool:
    """True when the kernel was defined under TRITON_INTERPRET=1 and so runs on the CPU."""
    return not isinstance(_matmul, triton.runtime.jit.JITFunction)


_STAY = contextlib.nullcontext()  # reusable: entering it does nothing


def _on_device(t: torch.Tensor):
    """Make ``t``'s GPU the current one for the launch (Triton launches on the current one)."""
    device = t.device
    if device.type != "cuda" or device.index in (None, torch.cuda.current_device()):
        return _STAY
    return torch.cuda.device(device)


def _check(a: object, b: object) -> None:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"matmul: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.ndim != 2:
            raise ValueError(f"matmul: {name} must be 2-D, got shape {tuple(t.shape)}: for a "
                             "batch, loop over it or reshape to 2-D")
        if t.dtype not in _DTYPES:
            raise TypeError(f"matmul: {name} has dtype {t.dtype}; the kernel takes float32, "
                            f"float16 or bfloat16: convert with {name}.float()")
        wanted = "cpu" if _interpreted() else "cuda"
        if t.device.type != wanted:
            where = ("Triton's interpreter (TRITON_INTERPRET=1 was set when reference_matmul "
                     "was imported), which reads CPU memory" if wanted == "cpu"
                     else "the CUDA GPU")
            raise ValueError(f"matmul: {name} is on {t.device}, but the kernel runs in {where}: "
                             f"pass {name}.{wanted}()")
        offset = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
        if offset > MAX_OFFSET:
            raise ValueError(f"matmul: {name} spans {offset + 1} elements, more than the "
                             f"kernel's 32-bit offsets reach ({MAX_OFFSET + 1}): split the "
                             "product into smaller ones")
    if a.dtype != b.dtype:
        raise TypeError(f"matmul: a is {a.dtype} and b is {b.dtype}: convert one, e.g. "
                        f"b.to({a.dtype})")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's "
                         f"{a.shape[1]} columns must equal b's {b.shape[0]} rows")
    if a.device != b.device:
        raise ValueError(f"matmul: a is on {a.device} and b on {b.device}: put both on one")
    if a.shape[0] * b.shape[1] > MAX_OFFSET:
        raise ValueError(f"matmul: C would have {a.shape[0] * b.shape[1]} elements, more than "
                         f"the kernel's 32-bit offsets reach ({MAX_OFFSET + 1}): split the "
                         "product into smaller ones")


# ---------------------------------------------------------------------------------------------
# Launching: what the first call of a product works out, and what the next calls reuse.


def _silent(hook) -> bool:
    """No one listens on this launch hook: None, or a chain of hooks (Triton 3.4 and later)
    with none in it."""
    return hook is None or (isinstance(getattr(hook, "calls", None), list) and not hook.calls)


def _launch_hooks():
    """Where this Triton keeps the hooks a profiler adds to every launch (``triton.knobs``,
    3.4 and later), or None."""
    try:
        from triton import knobs
    except ImportError:
        return None
    runtime = getattr(knobs, "runtime", None)
    return runtime if hasattr(runtime, "launch_enter_hook") else None


def _direct_launcher(compiled, grid: tuple[int, int, int], device: torch.device,
                     describe: dict | None = None):
    """A launcher of the compiled kernel for this grid: it takes the kernel's tensors, then
    its other arguments in order (constexprs included, as Triton's launch path passes them),
    and goes straight to the driver, without the binding, specialization and cache lookup
    that ``kernel[grid](...)`` repeats on every call. None where there is no compiled kernel
    (the interpreter) or this Triton's compiled kernels launch some other way. ``describe``
    maps the positions of the tensors the kernel takes as tensor descriptors to the
    ``_Describe`` that makes each one's descriptor.

    Where the compiled kernel's parts are where Triton's own runner (``compiled[grid]``)
    finds them, it calls them as that runner does, less what it works out again on every
    call: the stream (asked of torch, not found through Triton's driver), the hooks'
    metadata and calls (skipped while no profiler listens: the runner then calls empty
    chains), and each pointer's check (given as an integer, the launcher neither asks the
    tensor for it nor asks the driver whether the GPU can reach it: the plan's key already
    says the tensors are on this GPU). While a hook listens, and on a Triton laid out
    otherwise, its runner launches."""
    if compiled is None or not hasattr(compiled, "function"):
        return None
    try:
        runner = compiled[grid]
    except Exception:  # noqa: BLE001 (any failure means: keep Triton's usual launch)
        return None
    describe = describe or {}

    def described(tensors: tuple) -> tuple:
        return tuple(describe[i](t) if i in describe else t for i, t in enumerate(tensors))

    hooks = _launch_hooks()
    run = getattr(compiled, "run", None)
    metadata = getattr(compiled, "packed_metadata", None)
    if hooks is None or run is None or metadata is None or device.type != "cuda":
        return lambda tensors, rest: runner(*described(tensors), *rest)
    function, (x, y, z) = compiled.function, grid
    encoded = _EncodedLaunch.of(run, describe) if describe else None

    def launch(tensors: tuple, rest: tuple) -> None:
        if not (_silent(hooks.launch_enter_hook) and _silent(hooks.launch_exit_hook)):
            # a profiler listens: the runner tells it what it needs
            runner(*described(tensors), *rest)
            return
        stream = _current_stream(device)
        if encoded is not None:
            encoded(x, y, z, stream, function, metadata, tensors, rest)
            return
        run(x, y, z, stream, function, metadata, None, None, None,
            *[t.data_ptr() if isinstance(t, torch.Tensor) else t for t in described(tensors)],
            *rest)

    launch.encoded = encoded
    return launch


#: Triton versions whose launchers ``_EncodedLaunch`` was run against on a GPU (the layout of
#: the launcher's insides is no public interface, and differs between these two)
ENCODED_ON = ("3.6.", "3.9.")
#: Descriptors an ``_EncodedLaunch`` keeps per operand, one per address, the latest ones
KEEP_ENCODED = 16


class _EncodedLaunch:
    """Launches a kernel that takes tensor descriptors, encoding each operand's descriptor
    once per address instead of on every call.

    Triton's launcher turns each host-side descriptor into the 128-byte map the TMA hardware
    reads (``cuTensorMapEncodeTiled``, through a Python layer) on every launch: for a small
    product, a third of the call. The map depends on nothing but the base address, the shape,
    the strides and the block, and a plan fixes all of these but the address: so the map for
    an address, once encoded, is the map for that address on every later call (a tensor freed
    and another allocated at the same place, with the plan's layout, has the same map). This
    keeps the last KEEP_ENCODED encodings per operand and hands the driver's launch function,
    beneath Triton's wrapper, the arguments that wrapper would have made. Only where the
    wrapper is laid out as on the Triton versions of ENCODED_ON; elsewhere ``of`` returns None
    and every call encodes, through Triton's wrapper."""

    def __init__(self, driver_launch, encode, meta: list, layout: str, run, describe: dict):
        self.driver_launch, self.encode, self.meta = driver_launch, encode, meta
        self.layout, self.run, self.describe = layout, run, describe
        self.kept: dict[int, dict[int, list]] = {i: {} for i in describe}

    @classmethod
    def of(cls, run, describe: dict) -> _EncodedLaunch | None:
        if not triton.__version__.startswith(ENCODED_ON):
            return None
        wrapper = getattr(run, "launch", None)
        code, cells = getattr(wrapper, "__code__", None), getattr(wrapper, "__closure__", None)
        if code is None or not cells:
            return None
        try:
            inside = dict(zip(code.co_freevars, (cell.cell_contents for cell in cells)))
        except ValueError:  # an empty cell
            return None
        driver_launch, meta = inside.get("launcher"), inside.get("tensordesc_meta")
        scratch = [getattr(run, f"{kind}_scratch_size", None) for kind in ("global", "profile")]
        if (driver_launch is None or not meta or any(m is None for m in meta)
                or len(meta) != len(describe) or scratch != [0, 0]
                or getattr(run, "gsan_enabled", False)):
            return None
        if "tensordesc_indices" in inside:  # 3.6: descriptors spliced into the arguments
            from triton.backends.nvidia import driver as nvidia
            make = getattr(nvidia, "make_tensordesc_arg", None)
            if make is None or getattr(nvidia, "_BASE_ARGS_FORMAT_LEN", None) != 13:
                return None
            return cls(driver_launch, lambda d, m: make(d, m), meta, "3.6", run,
                       describe)
        make = inside.get("make_tensordesc_arg")
        if "relevant_paths" in inside and make is not None and hasattr(run, "arg_annotations"):
            return cls(driver_launch, lambda d, m: make(d, m, None), meta, "3.9", run,
                       describe)
        return None

    def _arguments(self, i: int, index: int, t: torch.Tensor) -> list:
        """The launcher's arguments for the ``index``-th descriptor, the kernel's ``i``-th
        tensor: the encoded map, then the operand's shape and strides."""
        kept = self.kept[i]
        address = t.data_ptr()
        made = kept.get(address)
        if made is None:
            made = list(self.encode(self.describe[i](t), self.meta[index]))
            if len(kept) >= KEEP_ENCODED:
                del kept[next(iter(kept))]  # the oldest
            kept[address] = made
        return made

    def __call__(self, x, y, z, stream, function, metadata, tensors: tuple, rest: tuple):
        args, index = [], 0
        for i, t in enumerate(tensors):
            if i in self.describe:
                args += self._arguments(i, index, t)
                index += 1
            else:
                args.append(t.data_ptr() if isinstance(t, torch.Tensor) else t)
        args += rest
        run = self.run
        if self.layout == "3.6":
            self.driver_launch(x, y, z, stream, function, run.launch_cooperative_grid,
                               run.launch_pdl, None, None, metadata, None, None, None, *args)
        else:
            self.driver_launch(x, y, z, stream, function, run.launch_cooperative_grid,
                               run.launch_pdl, metadata, None, None, None, None, None,
                               run.arg_annotations, run.kernel_signature, tuple(args))


class _Launch:
    """One kernel with its grid, trailing arguments and options fixed: the first call goes
    through Triton's usual launch (compiling if need be) and keeps the compiled kernel's own
    launcher; later calls use that launcher. The tensors at the positions of ``describe`` are
    given as tensors and passed to the kernel as tensor descriptors."""

    def __init__(self, kernel, grid: tuple[int, int, int], fixed: tuple, options: dict,
                 device: torch.device, describe: dict | None = None):
        self.kernel, self.grid, self.fixed, self.options = kernel, grid, fixed, options
        self.device, self.describe = device, describe or {}
        self.direct = None

    def __call__(self, *tensors) -> None:
        if self.direct is not None:
            self.direct(tensors, self.fixed)
            return
        given = tuple(self.describe[i](t) if i in self.describe else t
                      for i, t in enumerate(tensors))
        compiled = self.kernel[self.grid](*given, *self.fixed, **self.options)
        self.direct = _direct_launcher(compiled, self.grid, self.device, self.describe)

    @property
    def encodes_once(self) -> bool:
        """Whether this launch's descriptors are encoded once per address (_EncodedLaunch)."""
        return getattr(self.direct, "encoded", None) is not None


def _row_major_aligned(t: torch.Tensor) -> bool:
    """Rows of ``t`` start on 16-byte boundaries and its elements along a row are adjacent."""
    return t.stride(1) == 1 and t.stride(0) % (16 // t.element_size()) == 0 and \
        t.data_ptr() % 16 == 0


def _padded_width(cols: int) -> int:
    """Elements between the rows of an operand's aligned copy: ``cols`` rounded up to PAD_TO."""
    return triton.cdiv(cols, PAD_TO) * PAD_TO


def _padded_buffer(shape: tuple[int, int], dtype, device) -> torch.Tensor:
    """A new row-major buffer for an operand of ``shape``, whose rows are ``_padded_width``
    elements apart, so that each starts on a 16-byte boundary. It is given to the kernels
    whole, not as a view of the operand's own columns: the copy writes zeros past them, and
    a tensor a kernel is given is its whole reach (the grader's bounds check holds the course's
    own kernels to that too). The kernels are told the operand's own shape: the columns past
    it are never read as values (only into C's columns past N, for B, or under the K mask,
    for A, and neither is stored), and descriptors stop at that shape."""
    rows, cols = shape
    return torch.empty((rows, _padded_width(cols)), dtype=dtype, device=device)


def _copies(a: torch.Tensor, b: torch.Tensor) -> tuple[bool, bool]:
    """Which operands to copy into aligned rows: those whose rows do not start on 16-byte
    boundaries (or, for B, whose columns do not come in runs of 16 bytes), where the product
    is large enough for the copy to pay (PAD_MIN_MACS)."""
    m, k = a.shape
    n = b.shape[1]
    if m * n * k < PAD_MIN_MACS:
        return False, False
    return (not _row_major_aligned(a),
            not (_row_major_aligned(b) and n % (16 // b.element_size()) == 0))


def _descriptor_class():
    """Triton's host-side tensor descriptor, or None where this Triton has none (before 3.4)."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        return None
    return TensorDescriptor


def _early_launch_available(device: torch.device) -> bool:
    """Whether a launch on ``device`` can be early (programmatic dependent launch): a Triton
    with ``gdc_wait`` (3.4 and later) and a GPU of compute capability 9.0 or later."""
    return (gdc_wait is not None and device.type == "cuda"
            and torch.cuda.get_device_capability(device)[0] >= 9)


def _descriptors_fit(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``_matmul_tma`` can run this product: a Triton with host-side tensor
    descriptors, a GPU with TMA (compute capability 9.0 or later; any in the interpreter),
    and A and B row-major with rows on 16-byte boundaries once ``_copies`` has copied them."""
    if _descriptor_class() is None:
        return False
    if a.device.type == "cuda" and torch.cuda.get_device_capability(a.device)[0] < 9:
        return False
    copy_a, copy_b = _copies(a, b)
    return (copy_a or _row_major_aligned(a)) and (copy_b or _row_major_aligned(b))


def _programs(device: torch.device) -> int:
    """How many programs a persistent kernel launches: one per multiprocessor (four in the
    interpreter, enough for each to walk several tiles in the tests)."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def _current_stream(device: torch.device) -> int:
    """The handle of ``device``'s current stream (0 for the CPU, where the interpreter runs)."""
    if device.type != "cuda":
        return 0
    if _RAW_STREAM is not None:  # what Triton's own launch asks: a fraction of a microsecond
        return _RAW_STREAM(device.index)
    return torch.cuda.current_stream(device).cuda_stream


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _capturing(device: torch.device) -> bool:
    """Whether ``device``'s current stream is being captured into a CUDA graph."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


class _Describe:
    """Makes the tensor descriptor of one operand for each call: a copy of a template checked
    once, with the call's tensor as its base. Building a descriptor checks its arguments again
    every time (about as long as the launch itself); the plan's key has already checked what
    they would (the shapes, the strides and the pointer's alignment)."""

    def __init__(self, dtype, device, shape: list, strides: list, block: list):
        sample = torch.empty(16, dtype=dtype, device=device)  # any base on 16 bytes will do
        self.cls = _descriptor_class()
        fields = dict(vars(self.cls(sample, shape, strides, block)))
        del fields["base"]
        self.fields = fields

    def __call__(self, t: torch.Tensor):
        described = object.__new__(self.cls)
        described.__dict__.update(self.fields)
        described.base = t
        return described


class _Plan:
    """How one product is computed, worked out on its first call: the configuration, which
    operands to copy for alignment, the grid, the kernel's arguments past its pointers, and
    the launches. ``copies``, ``aligned`` and ``k_runs`` left None follow the layout; False
    turns the copies, the alignment promises or A's K mask by runs (``_in_k``) off
    (lab/probes/matmul_edges_probe.py measures what each buys). ``early`` left None follows
    ``EARLY_LAUNCH`` and ``EARLY_MAX_MACS``; True launches early whatever the size, False the
    usual way; either only where the GPU and Triton allow it (lab/probes/matmul_early_probe.py
    measures both ways)."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, config: TileConfig, *,
                 copies: bool | None = None, aligned: bool | None = None,
                 k_runs: bool | None = None, early: bool | None = None,
                 prefetch: bool | None = None):
        m, k = a.shape
        n = b.shape[1]
        self.config, self.shape, self.dtype, self.device = config, (m, n), a.dtype, a.device
        self.k, self.pad_bytes = k, 0
        self.one_device = a.device.type != "cuda" or torch.cuda.device_count() == 1
        self.skipped: dict[str, str] = {}  # rows the choice skipped, and why (_choose)
        vec = 16 // a.element_size()
        self.copy_a, self.copy_b = _copies(a, b) if copies is not False else (False, False)
        # The strides the kernel will see: those of the copies where there are copies.
        a_strides = (_padded_width(k), 1) if self.copy_a else a.stride()
        b_strides = (_padded_width(n), 1) if self.copy_b else b.stride()
        b_cols = b_strides[0] if self.copy_b else n
        rows_aligned = (self.copy_a or _row_major_aligned(a)) and \
            (self.copy_b or _row_major_aligned(b))
        self.aligned = aligned is not False and rows_aligned and b_cols % vec == 0
        # A's K mask by runs of 16 bytes (_in_k): exact where K is whole runs; past K, the
        # copy's run holds zeros (_pad_tile)
        k_runs = k_runs is not False and (k % vec == 0 or self.copy_a)
        # K's shares: whole steps each, none of them empty.
        k_split = triton.cdiv(triton.cdiv(k, config.split_k), config.block_k) * config.block_k
        self.splits = triton.cdiv(k, k_split)
        grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n), self.splits, 1)
        options = {} if _interpreted() else {"num_warps": config.num_warps,
                                             "num_stages": config.num_stages}
        if config.cluster > 1 and not _interpreted():
            options["num_ctas"] = config.cluster
        # The product's launch made early where the GPU and Triton can (EARLY_LAUNCH) and the
        # product is small (EARLY_MAX_MACS), or where asked (early=True); never the cooperative
        # launch of the copies in the same launch (_matmul_copied)
        self.early = (early or (early is None and EARLY_LAUNCH and m * n * k <= EARLY_MAX_MACS)) \
            and not config.copy_inside and _early_launch_available(a.device)
        if self.early:
            options["launch_pdl"] = True
        # An early product asks for its operands into L2 before it waits (_into_l2), where
        # PREFETCH says so (or where asked), and its kernel is one program per tile
        self.prefetch = self.early and not config.persistent and not _interpreted() and \
            (PREFETCH if prefetch is None else prefetch)
        # the elements of A and of B the kernel reads, first to last (strides are >= 0)
        spans = tuple(1 + (rows - 1) * strides[0] + (cols - 1) * strides[1]
                      for (rows, cols), strides in (((m, k), a_strides), ((k, n), b_strides)))
        # (always given: the direct launch below passes every argument, defaults included)
        prefetched = (*(max(1, int(span * PREFETCH_SHARE)) for span in spans), True) \
            if self.prefetch else (0, 0, False)
        c_strides = (n, 1)  # C is contiguous
        tiles = (config.block_m, config.block_n, config.block_k, config.group_m, self.splits)
        self.tiles = grid[0]
        self.scratch: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # per stream (_scratch)
        self.barriers: dict[int, torch.Tensor] = {}  # per stream (_barrier)
        self.descriptors = self.describe = None
        if config.tma:
            if not rows_aligned or _descriptor_class() is None:
                raise ValueError(f"matmul: {config.label} moves tiles by tensor descriptors, "
                                 "which need Triton 3.4 or later and A and B row-major with "
                                 "rows that start on 16-byte boundaries; a has strides "
                                 f"{a.stride()} and b {b.stride()}, of {a.element_size()}-byte "
                                 "elements: pick a row without tma, or leave config out")
            # (shape, strides, block) of each operand's descriptor; only the base changes
            self.descriptors = (([m, k], list(a_strides), [config.block_m, config.block_k]),
                                ([k, n], list(b_strides), [config.block_k, config.block_n]))
            self.describe = tuple(_Describe(a.dtype, a.device, *d) for d in self.descriptors)
        self.pad, self.padded = self._copy_launch(a, b, vec), {}
        # A and B are the kernel's second and third tensors, after C
        described = dict(zip((1, 2), self.describe)) if self.describe else None
        if config.copy_inside:
            self.matmul = self._copied_launch(a, b, (
                *c_strides, *a_strides, *b_strides, m, n, k, b_cols, *tiles[:4],
                k % config.block_k == 0, k_runs, self.aligned, vec, n % vec == 0), options)
        elif config.persistent:
            if self.splits > 1:
                raise ValueError(f"matmul: {config.label}: a persistent row does not split K; "
                                 "drop split_k or persistent")
            programs = min(self.tiles, _programs(a.device))
            self.matmul = _Launch(_matmul_persistent, (programs, 1, 1), (
                *c_strides, *a_strides, *b_strides, m, n, k, b_cols, programs, *tiles[:4],
                config.tma, k % config.block_k == 0, k_runs, self.aligned, vec, n % vec == 0,
                self.early), options, a.device, described)
        elif config.tma:
            self.matmul = _Launch(_matmul_tma, grid, (*c_strides, m, n, k, k_split, *tiles,
                                                      vec, n % vec == 0, self.early,
                                                      *prefetched), options,
                                  a.device, described)
        else:
            self.matmul = _Launch(_matmul, grid, (
                *c_strides, *a_strides, *b_strides, m, n, k, b_cols, k_split, *tiles,
                k % config.block_k == 0, k_runs, self.aligned, vec, n % vec == 0, self.early,
                *prefetched), options, a.device)

    def _copy_launch(self, a: torch.Tensor, b: torch.Tensor, vec: int):
        """The launch of ``_pad_rows`` that copies the operands this plan copies, both in one
        launch (the one operand twice over, the second time with no programs, where only one
        is copied); None where none is, or where the product's launch copies them itself."""
        copied = [t for t, copy in ((a, self.copy_a), (b, self.copy_b)) if copy]
        self.pad_bytes = sum(t.shape[0] * _padded_width(t.shape[1]) for t in copied) * \
            a.element_size()
        if not copied or self.config.copy_inside:
            return None
        block_r, block_c = PAD_TILE
        shapes = [(*t.shape, *t.stride(), _padded_width(t.shape[1])) for t in copied]
        tiles = [triton.cdiv(t.shape[0], block_r) * triton.cdiv(t.shape[1], block_c)
                 for t in copied]
        if len(copied) == 1:
            shapes, tiles = shapes * 2, [tiles[0], 0]
        options = {} if _interpreted() else {"num_warps": PAD_WARPS}
        return _Launch(_pad_rows, (sum(tiles), 1, 1), (*shapes[0], *shapes[1], tiles[0], block_r,
                                                       block_c, vec), options, a.device)

    def _copied_launch(self, a: torch.Tensor, b: torch.Tensor, matmul_args: tuple,
                       options: dict) -> _Launch:
        """The one launch of ``_matmul_copied``: the copies of the operands this plan copies,
        then the product. ``matmul_args`` are ``_matmul_persistent``'s past its programs."""
        config = self.config
        if not config.persistent or config.tma or self.splits > 1:
            raise ValueError(f"matmul: {config.label}: copies in the same launch need a "
                             "persistent row with pointers and no split of K")
        if not (self.copy_a or self.copy_b):
            raise ValueError(f"matmul: {config.label} copies the operands in its own launch, "
                             f"and neither needs a copy here (a has strides {a.stride()}, "
                             f"b {b.stride()}): pick a row without copy_inside")
        block_r, block_c = COPY_INSIDE_TILE
        copies = []
        for t, copy in ((a, self.copy_a), (b, self.copy_b)):
            tiles = triton.cdiv(t.shape[0], block_r) * triton.cdiv(t.shape[1], block_c)
            copies.append(((*t.shape, *t.stride(), _padded_width(t.shape[1])),
                           tiles if copy else 0))
        # every program must be resident at once (_all_arrived): one per multiprocessor at
        # most, and one in the interpreter, which runs them one after another
        programs = 1 if _interpreted() else min(self.tiles, _programs(a.device))
        if not _interpreted() and COOPERATIVE:
            options = {**options, "launch_cooperative_grid": True}
        (shape_a, tiles_a), (shape_b, tiles_b) = copies
        return _Launch(_matmul_copied, (programs, 1, 1), (
            *shape_a, *shape_b, tiles_a, tiles_b, *matmul_args[:10], programs, *matmul_args[10:],
            block_r, block_c), options, a.device)

    def _where(self) -> tuple[int, bool]:
        """The current stream's handle, and whether it is being captured into a CUDA graph:
        what the kept buffers below are looked up by (each asks where not told), asked once
        per call."""
        return _current_stream(self.device), _capturing(self.device)

    def _buffers(self, stream: int | None = None, capturing: bool = False) -> tuple:
        """The buffers A and B are copied into (None for an operand not copied). One pair per
        stream, kept for the next calls where the pair is at most KEEP_PADDED_BYTES (launches on one
        stream run one after the other, so the next call's copy never overwrites what this
        call's product still reads); made for each call otherwise, and while a CUDA graph is
        being captured (the graph's own, as its scratch is: ``_scratch``)."""
        if stream is None:
            stream, capturing = self._where()
        kept = None if capturing else self.padded.get(stream)
        if kept is not None:
            return kept
        shapes = ((self.shape[0], self.k) if self.copy_a else None,
                  (self.k, self.shape[1]) if self.copy_b else None)
        views = tuple(None if shape is None else _padded_buffer(shape, self.dtype, self.device)
                      for shape in shapes)
        if self.pad_bytes <= KEEP_PADDED_BYTES and not capturing:
            self.padded[stream] = views
        return views

    def _scratch(self, stream: int | None = None,
                 capturing: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The split programs' workspace and arrival counters (``_finish_tile``), one pair per
        stream: launches on one stream run one after the other and leave the counters at zero,
        but launches on two streams may run at once. Made on a stream's first call; while a
        CUDA graph is being captured, a new pair is made for each call, the graph's own, and
        not kept (its zeros are written when the graph is replayed, not when it is captured;
        and the graph may be replayed on another stream while this one runs)."""
        if stream is None:
            stream, capturing = self._where()
        scratch = None if capturing else self.scratch.get(stream)
        if scratch is None:
            config = self.config
            partial = torch.empty(self.tiles * self.splits * config.block_m * config.block_n,
                                  dtype=torch.float32, device=self.device)
            arrivals = torch.zeros(self.tiles, dtype=torch.int32, device=self.device)
            scratch = (partial, arrivals)
            if not capturing:
                self.scratch[stream] = scratch
        return scratch

    def _barrier(self, stream: int | None = None, capturing: bool = False) -> torch.Tensor:
        """The two counters of ``_all_arrived``, one pair per stream, made and kept as the
        split's are (``_scratch``): every launch leaves them ready for the next."""
        if stream is None:
            stream, capturing = self._where()
        barrier = None if capturing else self.barriers.get(stream)
        if barrier is None:
            barrier = torch.zeros(2, dtype=torch.int32, device=self.device)
            if not capturing:
                self.barriers[stream] = barrier
        return barrier

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = a.new_empty(self.shape)  # a's dtype and device: cheaper to ask than torch.empty
        if self.config.copy_inside:
            where = self._where()
            view_a, view_b = self._buffers(*where)
            self.matmul(c, a, b, a if view_a is None else view_a,
                        b if view_b is None else view_b, self._barrier(*where))
            return c
        if self.pad is not None:  # the launch makes descriptors of what it is given
            view_a, view_b = self._buffers(*self._where())
            if view_a is None:
                self.pad(b, view_b, b, view_b)
                b = view_b
            elif view_b is None:
                self.pad(a, view_a, a, view_a)
                a = view_a
            else:
                self.pad(a, view_a, b, view_b)
                a, b = view_a, view_b
        if self.config.persistent:
            self.matmul(c, a, b)
        else:
            # no workspace where K is not split: the two pointers are never read
            scratch = (c, c) if self.splits == 1 else self._scratch(*self._where())
            if self.config.tma:  # the descriptors, then the scratch, then A and B themselves
                self.matmul(c, a, b, *scratch, a, b)
            else:
                self.matmul(c, a, b, *scratch)
        return c

    @property
    def launches(self) -> int:
        """Kernels launched per call: the product's, and the copies' where they have their own."""
        return 1 + (self.pad is not None)

    @property
    def direct(self) -> bool:
        """Whether the next call launches the compiled kernel directly."""
        return self.matmul.direct is not None


def _key(a: torch.Tensor, b: torch.Tensor) -> tuple:
    """What a plan holds for: the compiled kernel is specialized on the sizes, the strides
    and whether each pointer is a multiple of 16 bytes, and launched on one device."""
    return (a.dtype, b.dtype, a.device, b.device, a.shape, b.shape, a.stride(), b.stride(),
            a.data_ptr() % 16, b.data_ptr() % 16)


_PLANS: dict[tuple, _Plan] = {}


def _fitting(table, element_bytes: int, device) -> tuple[TileConfig, ...]:
    """The rows of ``table`` whose pipeline fits the GPU's shared memory for this dtype (the
    smallest row if none does)."""
    if device.type != "cuda":
        return tuple(table)
    limit = getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin",
                    0)
    if not limit:
        return tuple(table)
    kept = tuple(row for row in table if row.shared_bytes(element_bytes) <= limit)
    return kept or (min(table, key=lambda row: row.shared_bytes(element_bytes)),)


def _candidates(a: torch.Tensor, b: torch.Tensor) -> tuple[TileConfig, ...]:
    """The rows the first call of a product times: the skinny table for a few rows, and the
    rows with tensor descriptors only where they can run."""
    skinny = a.shape[0] <= SKINNY_M
    if _interpreted():
        return (INTERPRETER_SKINNY if skinny else INTERPRETER_CONFIG,)
    table = SKINNY_CONFIGS if skinny else CONFIGS
    if not _descriptors_fit(a, b):
        table = tuple(row for row in table if not row.tma)
    if not any(_copies(a, b)):
        table = tuple(row for row in table if not row.copy_inside)
    return _fitting(table, a.element_size(), a.device)


def _time_ms(fn) -> float:
    """Median milliseconds of fn() on the GPU (after a warm-up that also compiles)."""
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


def _host_ms(fn, calls: int = 50) -> float:
    """Milliseconds of the host's time per call of fn(), ``calls`` back to back: what a call
    costs the Python program that makes it, the GPU not waited for. Each call is timed alone
    and the median kept: a pause of the whole process (a garbage collection, another program
    on the CPU) lands in a call or two and moves a mean over a few calls by more than the
    difference between two launch paths, and the choice compares exactly such differences."""
    fn()
    torch.cuda.synchronize()
    clock = time.perf_counter
    took = []
    for _ in range(calls):
        start = clock()
        fn()
        took.append(clock() - start)
    torch.cuda.synchronize()
    took.sort()
    return took[len(took) // 2] * 1e3


#: Rows whose GPU time is within this factor of the fastest row's tie, and of those the one
#: whose call costs the host least wins: a program that replays its calls in a CUDA graph
#: pays only the GPU's time, and gives up at most this much of it; one that calls from Python
#: pays the host's time too, which for a small product can be the longer of the two.
TIE = 1.05

#: ... but only where its call is cheaper by more than this factor than the fastest row's: rows
#: that launch alike (one kernel, no descriptors) differ on the host by noise, and a choice made
#: on noise gives up GPU time for nothing (in one H200 run the decoding step's choice took a
#: row at 0.98 of torch.matmul's speed; an earlier run's choice was at 1.16).
HOST_GAIN = 0.85


#: Rounds in which the host's time per call of the rows tied on the GPU is measured in turns
#: (``_host_in_turns``).
HOST_ROUNDS = 5

#: The copies of a product's inputs an early plan is timed over (``_back_to_back_ms``): at
#: least twice the L2 cache together, at most this many; and the calls in its graph, at least
#: (the first waits for the kernel before it, which the rest do not).
MAX_INPUT_COPIES, GRAPH_CALLS = 16, 10


def _inputs_beyond_l2(a: torch.Tensor, b: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
    """(a, b) and as many copies as it takes for all of them together to be twice the L2
    cache: calls that go round them find each pair evicted, as a model's next layer would."""
    l2 = getattr(torch.cuda.get_device_properties(a.device), "L2_cache_size", 0) or 64 << 20
    one = a.numel() * a.element_size() + b.numel() * b.element_size()
    copies = min(MAX_INPUT_COPIES, max(1, -(-2 * l2 // one)))
    return [(a, b)] + [(_copy_of(a), _copy_of(b)) for _ in range(copies - 1)]


def _copy_of(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with ``t``'s strides, which the plan's arguments were worked out from
    (a clone of a view with gaps between its rows would be made contiguous); ``t`` itself
    where its elements overlap (stride 0), which no copy can keep."""
    copy = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    try:
        return copy.copy_(t)
    except RuntimeError:  # more than one element at one address
        return t


def _back_to_back_ms(plan: _Plan, a: torch.Tensor, b: torch.Tensor) -> float:
    """The GPU's milliseconds per call of ``plan``, its calls back to back over copies of
    the inputs (``_inputs_beyond_l2``), recorded into one CUDA graph and the graph replayed,
    as ``python -m learning.bench matmul`` times them. An early plan is timed so because the
    early launch acts only between calls: timed one call at a time after the L2 is cleared,
    its programs wait for the clearing kernel's end like any other kernel's. So timed, the
    choices of two H100 runs for the decoding step in bfloat16 took rows that the bench then
    measured 8 % apart (lab/results/matmul_h100_early*_2026-12-07.json)."""
    inputs = _inputs_beyond_l2(a, b)
    inputs = inputs * -(-GRAPH_CALLS // len(inputs))  # whole rounds over the copies
    stream = torch.cuda.Stream(a.device)
    stream.wait_stream(torch.cuda.current_stream(a.device))
    with torch.cuda.stream(stream):  # compiled and launched once before the capture
        plan(a, b)
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for x, y in inputs:
            plan(x, y)
    ms = _time_ms(graph.replay) / len(inputs)
    del graph  # its memory (the calls' outputs) back to the allocator
    return ms


def _times_ms(plan: _Plan, a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """The GPU's time for one call of this plan (for an early plan, back to back:
    ``_back_to_back_ms``), and the host's time to make one call."""
    device = _back_to_back_ms(plan, a, b) if plan.early else _time_ms(lambda: plan(a, b))
    return device, _call_ms(plan, a, b, device)


def _call_ms(plan: _Plan, a: torch.Tensor, b: torch.Tensor, device_ms: float) -> float:
    """The host's milliseconds per call of ``plan`` (``_host_ms``), as ``matmul`` calls it."""
    # about 2 ms of the GPU's work, 5 calls at least: a long product's host time per call is
    # as plain in a few calls, and its first call should not wait for many
    calls = max(5, min(50, int(2.0 / max(device_ms, 1e-3))))
    return _host_ms(lambda: (_PLANS.get(_key(a, b)), _launch(plan, a, b)), calls)


def _host_in_turns(device_ms: dict, a: torch.Tensor, b: torch.Tensor) -> dict:
    """The host's milliseconds per call of each plan in ``device_ms`` (plan: the GPU's ms for
    it), measured in turns: ``HOST_ROUNDS`` rounds, each timing every plan once, and the
    median round kept. The host's speed drifts (clocks, other programs) over many calls:
    measured one row after another, rows that launch alike came out up to twice apart in one
    H100 run (lab/results/matmul_choice_early_h100_2026-12-07.json); in turns, a drift lands
    on each row alike."""
    took = {plan: [] for plan in device_ms}
    for _ in range(HOST_ROUNDS):
        for plan, ms in device_ms.items():
            took[plan].append(_call_ms(plan, a, b, ms))
    return {plan: sorted(t)[len(t) // 2] for plan, t in took.items()}


def _choose(a: torch.Tensor, b: torch.Tensor) -> _Plan:
    """Time a plan for every candidate row (``_times_ms``), as triton.autotune would, and keep
    the fastest on the GPU, or, of the rows within ``TIE`` of it, one that makes fewer
    launches per call (the copies made in the product's own launch, not a launch of their
    own: a launch costs the host microseconds on every call, which no timing's noise can
    hide or fake), and of those the fastest, or the one cheapest to launch where its call
    costs the host less than ``HOST_GAIN`` times that fastest's (the tied rows' calls timed
    again, in turns: ``_host_in_turns``). A row
    that fails on this GPU (too much shared memory, a compiler's refusal) is skipped, and the
    chosen plan says which in ``skipped``; if every row fails, the first error is raised."""
    plans = [_Plan(a, b, row) for row in _candidates(a, b)]
    if len(plans) == 1:
        return plans[0]
    times, skipped = {}, {}
    for plan in plans:
        try:
            times[plan] = _times_ms(plan, a, b)
        except Exception as error:  # noqa: BLE001 (any failure rules the row out)
            skipped[plan.config] = error
    if not times:
        raise next(iter(skipped.values()))
    fastest = min(times, key=lambda plan: times[plan][0])
    tied = [plan for plan, (device, _) in times.items() if device <= times[fastest][0] * TIE]
    fewest = min(plan.launches for plan in tied)
    tied = [plan for plan in tied if plan.launches == fewest]
    fastest = min(tied, key=lambda plan: times[plan][0])
    host = _host_in_turns({plan: times[plan][0] for plan in tied}, a, b) \
        if len(tied) > 1 else {fastest: times[fastest][1]}
    cheapest = min(tied, key=lambda plan: host[plan])
    best = cheapest if host[cheapest] < host[fastest] * HOST_GAIN else fastest
    best.skipped = {row.label: f"{type(e).__name__}: {str(e)[:200]}" for row, e in skipped.items()}
    return best


def matmul(a: torch.Tensor, b: torch.Tensor, *, config: TileConfig | None = None) -> torch.Tensor:
    """C = A @ B for 2-D float tensors of one dtype and any strides; C has their dtype.

    The first call for a product (shapes, strides, dtype, device, pointers' alignment) checks
    the arguments and picks a row of ``CONFIGS`` (``SKINNY_CONFIGS`` for M <= SKINNY_M) by
    timing them; later calls for it launch the remembered choice directly. ``config`` runs
    that row instead, every time through the whole path. In the interpreter the row is
    ``INTERPRETER_CONFIG`` (``INTERPRETER_SKINNY``).
    """
    if config is None:
        try:
            plan = _PLANS.get(_key(a, b))
        except (AttributeError, TypeError):  # not tensors: the checks below say what is wrong
            plan = None
        if plan is not None:
            return _launch(plan, a, b)
    _check(a, b)
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0 or k == 0:  # nothing to launch; an empty sum is 0
        return torch.zeros((m, n), dtype=a.dtype, device=a.device)
    with _on_device(a):
        if config is not None:
            return _Plan(a, b, config)(a, b)
        plan = _choose(a, b)
        _PLANS[_key(a, b)] = plan
        return plan(a, b)


def _launch(plan: _Plan, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if plan.one_device:  # no other GPU to be current: nothing to ask or switch
        return plan(a, b)
    with _on_device(a):
        return plan(a, b)


def forget_choices() -> None:
    """Forget every product's plan: the next call of each times the table again."""
    _PLANS.clear()


def chosen_config(a: torch.Tensor, b: torch.Tensor) -> TileConfig | None:
    """The row the first call of this product chose, once there has been one."""
    plan = _PLANS.get(_key(a, b))
    return plan.config if plan is not None else None
