"""Softmax for wide rows whose pieces wait in shared memory: a Gluon kernel (GPU only).

triton_kernels_fast._softmax_split_row cuts a wide row into pieces, one program each, and
keeps every piece in registers as float32 while the pieces exchange their partial maxima and
sums. Registers bound the piece, and so the bytes a program carries through that exchange: a
16-bit piece holds half the bytes of a float32 piece for the same registers. Here the piece
waits in shared memory instead, in its own dtype, which holds more of it: Triton's language
has no way to keep data in shared memory, so this kernel is written in Gluon, Triton's
lower-level dialect, where the program allocates shared memory and issues asynchronous copies
itself.

One program per piece of PIECE columns, CHUNK columns at a time:

1. it takes a ticket (an atomic counter), which names its row and piece, as the split kernel
   does, so that every piece it waits for is running or next in line;
2. it starts an asynchronous copy of every chunk of its piece into shared memory at once, so
   the whole piece is in flight before anything waits;
3. as each chunk lands it folds the chunk into per-tile (maximum, sum) pairs, each tile being
   the VEC columns of one 16-byte copy, combined as workshop A1 combines them;
4. it publishes the piece's (m_k, s_k), counts itself in at its row and spins until all of the
   row's pieces have, then combines them into the row's (M, S);
5. it reads the chunks from shared memory again and stores y = exp(x - M) / S.

Each element is read from device memory once and written once, and the exponential is taken
twice (steps 3 and 5) instead of being kept. Several programs share a multiprocessor, each
with its own shared memory, so that one copies while another waits for its row.

What bounds it (bench/split_shared_probe.py, bench/RESULTS.md): the shared memory a
multiprocessor has, divided by how long each piece holds it. Skipping the exchange of step 4
(a wrong answer, timed only as a bound) took bfloat16 rows of 65536 columns from 0.89 to 0.96
of the copy ceiling; removing the exponentials gained 1 to 2 %.

Gluon has no interpreter, and its API moved between versions; the launcher
(triton_kernels_fast) uses this kernel only where AVAILABLE, on a GPU, for tensors the copies
can read 16 bytes at a time, and the interpreter runs triton_kernels._softmax_looped instead.
"""

from __future__ import annotations

import triton

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
except ImportError:  # Triton before 3.5: no Gluon
    gluon = gl = async_copy = None

# Names that moved between versions: the copy into shared memory (async_load from Triton 3.7,
# where the old name raises) and the barrier between a program's threads (barrier in 3.9)
_copy_to_shared = getattr(async_copy, "async_load", None) or \
    getattr(async_copy, "async_copy_global_to_shared", None)
_barrier = getattr(gl, "thread_barrier", None) or getattr(gl, "barrier", None)
# The Triton versions the kernel is known to compile with (3.6 to 3.9 for sm_80, sm_89 and
# sm_90; run on an H200 with 3.6 and 3.9: tests/test_gluon.py). Gluon's API still moves between
# versions (3.5's lacks num_warps()), so elsewhere the plan keeps
# triton_kernels_fast._softmax_split_row rather than fail to compile: widen the range once the
# tests pass on a newer Triton.
TESTED = ((3, 6), (3, 9))


def tested_on(version: str) -> bool:
    """Whether a Triton version string ("3.9.0", "3.10.0+git1234") is in TESTED's range."""
    major_minor = tuple(int(part) for part in version.split(".")[:2])
    return TESTED[0] <= major_minor <= TESTED[1]


AVAILABLE = tested_on(triton.__version__) and None not in (_copy_to_shared, _barrier) \
    and hasattr(gl, "num_warps") and hasattr(async_copy, "commit_group")

if AVAILABLE:
    _LOG2E = gl.constexpr(1.4426950408889634)

    @gluon.jit
    def _combine_max_sum(m_a, s_a, m_b, s_b):
        """Two (maximum, sum of exp(x - maximum)) pairs as one; a pair of only -inf is (-inf, 0)."""
        m = gl.maximum(m_a, m_b)
        m_ref = gl.where(m == -float("inf"), 0.0, m)
        return m, s_a * gl.exp2((m_a - m_ref) * _LOG2E) + s_b * gl.exp2((m_b - m_ref) * _LOG2E)

    @gluon.jit
    def _softmax_split_shared(
        out_ptr,  # *T: output rows, column stride 1
        in_ptr,  # *T: input rows, column stride 1, 16-byte aligned, row stride a multiple of 16
        out_row_stride,  # elements from one output row to the next, a multiple of 16
        in_row_stride,  # elements from one input row to the next
        n_cols,  # columns in a row, a multiple of 16; cdiv(n_cols, PIECE) pieces
        part_ptr,  # *fp32: scratch, (n_rows, PIECES, 2): each piece's (max, sum)
        sync_ptr,  # *i32: zeroed, 1 + n_rows: [0] hands out tickets, [1 + r] counts arrivals
        PIECES: gl.constexpr,  # a power of two >= the pieces of a row
        PIECE: gl.constexpr,  # columns per program, a power of two
        CHUNK: gl.constexpr,  # columns per copy group and per step, a power of two <= PIECE
        VEC: gl.constexpr,  # columns in 16 bytes: one copy per thread and tile
        EVEN: gl.constexpr,  # n_cols is a multiple of PIECE: no piece needs a mask
    ):
        WARPS: gl.constexpr = gl.num_warps()
        CHUNKS: gl.constexpr = PIECE // CHUNK
        TILES: gl.constexpr = CHUNK // VEC
        # a chunk as (TILES, VEC): each thread holds whole 16-byte tiles, neighbours adjacent
        tiles: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
        flat: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
        shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        buf = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [CHUNKS * TILES, VEC], shared)

        n_pieces = gl.cdiv(n_cols, PIECE)
        ticket = gl.atomic_add(sync_ptr, 1)
        row = (ticket // n_pieces).to(gl.int64)
        piece = ticket % n_pieces
        t = gl.arange(0, TILES, gl.SliceLayout(1, tiles))
        v = gl.arange(0, VEC, gl.SliceLayout(0, tiles))
        offs = t[:, None] * VEC + v[None, :]  # a chunk's columns, from its first
        first = piece * PIECE  # the piece's first column
        src = in_ptr + row * in_row_stride + first
        dst = out_ptr + row * out_row_stride + first
        # every chunk's copy in flight at once, one commit group per chunk
        for c in gl.static_range(CHUNKS):
            cols = c * CHUNK + offs  # from the piece's first column
            if EVEN:
                _copy_to_shared(buf.slice(c * TILES, TILES), src + cols)
            else:
                _copy_to_shared(buf.slice(c * TILES, TILES), src + cols, mask=first + cols < n_cols)
            async_copy.commit_group()
        # fold each chunk as it lands into per-tile (m, s); past n_cols the copy wrote zeros
        m = gl.full([TILES], -float("inf"), gl.float32, gl.SliceLayout(1, tiles))
        s = gl.zeros([TILES], gl.float32, gl.SliceLayout(1, tiles))
        for c in gl.static_range(CHUNKS):
            async_copy.wait_group(CHUNKS - 1 - c)
            _barrier()
            x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
            if not EVEN:
                x = gl.where(first + c * CHUNK + offs < n_cols, x, -float("inf"))
            m_c = gl.max(x, axis=1)
            m_ref = gl.where(m_c == -float("inf"), 0.0, m_c)
            s_c = gl.sum(gl.exp2((x - m_ref[:, None]) * _LOG2E), axis=1)
            m, s = _combine_max_sum(m, s, m_c, s_c)
        m_k, s_k = gl.reduce((m, s), 0, _combine_max_sum)
        # publish (m_k, s_k), count this piece in, wait for the row's other pieces
        part = part_ptr + (row * PIECES + piece) * 2
        gl.store(part, m_k)
        gl.store(part + 1, s_k)
        _barrier()
        arrived = gl.atomic_add(sync_ptr + 1 + row, 1) + 1
        while arrived < n_pieces:
            arrived = gl.atomic_add(sync_ptr + 1 + row, 0)
        k = gl.arange(0, PIECES, flat)
        parts = part_ptr + (row * PIECES + k) * 2
        m_all = gl.load(parts, mask=k < n_pieces, other=-float("inf"), cache_modifier=".cg")
        s_all = gl.load(parts + 1, mask=k < n_pieces, other=0.0, cache_modifier=".cg")
        m_row = gl.max(m_all, axis=0)
        # y = exp(x - M) / S; a row of only -inf has M = -inf and S = NaN: NaN, as in PyTorch
        inv = 1.0 / gl.sum(s_all * gl.exp2((m_all - m_row) * _LOG2E), axis=0)
        for c in gl.static_range(CHUNKS):
            cols = c * CHUNK + offs
            x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
            y = (gl.exp2((x - m_row) * _LOG2E) * inv).to(out_ptr.dtype.element_ty)
            if EVEN:
                gl.store(dst + cols, y)
            else:
                gl.store(dst + cols, y, mask=first + cols < n_cols)
