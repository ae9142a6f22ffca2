"""Softmax for wide rows whose pieces wait in shared memory: Gluon kernels (GPU only).

lab.production._softmax_split_row cuts a wide row into pieces, one program each, and
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

What bounds it (lab/probes/split_shared_probe.py, lab/RESULTS.md): the shared memory a
multiprocessor has, divided by how long each piece holds it. Skipping the exchange of step 4
(a wrong answer, timed only as a bound) took bfloat16 rows of 65536 columns from 0.89 to 0.96
of the copy ceiling; removing the exponentials gained 1 to 2 %.

On a Hopper GPU, _softmax_cluster (below) takes most of those rows instead: the pieces of a
row are the CTAs of one thread-block cluster, which push their partials into each other's
shared memory, so that no piece goes through L2 to meet the others.

Gluon has no interpreter, and its API moved between versions; the launcher
(lab.production) uses this kernel only where AVAILABLE, on a GPU, for tensors the copies
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
# lab.production._softmax_split_row rather than fail to compile: widen the range once the
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


# ---------------------------------------------------------------------------------------------
# A row per thread-block cluster: the pieces meet in distributed shared memory (sm_90)
# ---------------------------------------------------------------------------------------------
#
# _softmax_split_shared's pieces meet through L2: a ticket, an atomic arrival whose release
# drains the program's memory traffic, a spin, and a load of the partials, each a round trip
# under full load. Here the pieces of one row are the CTAS CTAs of one thread-block cluster,
# which run at the same time by construction (no ticket), and each CTA pushes its (m_k, s_k)
# straight into every peer's shared memory with st.async, which counts the bytes on the peer's
# mbarrier. A CTA waits on its own mbarrier until all CTAS pairs have landed: one message from
# multiprocessor to multiprocessor, and no fence at the scope of the whole GPU on the way
# (lab/probes/probe_dsmem.py first pulled the pairs behind a cluster barrier whose release compiles
# to MEMBAR.GPU, and was no faster than the L2 exchange).
#
# Triton lays tensors out over a cluster's CTAs only when it is compiled for one (num_ctas),
# and 3.6 refuses asynchronous copies for such layouts; so the kernel is compiled for one CTA
# and launch_clustered hands the cluster size to the launcher, which reads it from the
# compiled kernel's packed metadata (the only private interface the module relies on; TESTED
# covers the versions it was seen to work on). CTA pid holds piece pid % CTAS of row
# pid // CTAS: a cluster's CTAs are consecutive, so the piece is the CTA's rank in it.
#
# The inline PTX declares the mbarrier and the slots the peers' pairs land in (function-scope
# .shared variables, beside the allocation Triton makes), so each of its two blocks below must
# appear once in the kernel, as they do.

if AVAILABLE:

    @gluon.constexpr_function
    def _cluster_init_asm(ctas):
        """At the program's start: declare the mbarrier and CTAS 8-byte slots, have thread 0
        initialise the mbarrier (one arrival expected: its own), and arrive at the cluster
        barrier, relaxed (the initialisation is ordered by its own fence), so that by the time
        a peer waits on that barrier every mbarrier of the cluster is ready."""
        ctas = ctas.value if hasattr(ctas, "value") else ctas
        return (f".shared .align 8 .b64 xbar; .shared .align 8 .b64 xbuf[{ctas}]; "
                "{ .reg .pred p; .reg .u32 a, t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
                "mov.u32 a, xbar; @p mbarrier.init.shared::cta.b64 [a], 1; "
                "fence.mbarrier_init.release.cluster; barrier.cluster.arrive.relaxed.aligned; "
                "mov.u32 $0, $1; }")

    @gluon.constexpr_function
    def _cluster_exchange_asm(ctas):
        """Send this CTA's (m, s) ($2C, $2C+1) to slot <rank> of every peer, one thread per peer,
        after waiting at the cluster barrier for every peer's mbarrier; thread 0 expects the
        8 * CTAS bytes on this CTA's mbarrier; every thread waits for its phase and reads the
        CTAS pairs, m_j into $j and s_j into $(C + j)."""
        ctas = ctas.value if hasattr(ctas, "value") else ctas
        reads = "".join(f"ld.shared.v2.f32 {{${j}, ${ctas + j}}}, [a+{8 * j}]; "
                        for j in range(ctas))
        return ("{ .reg .pred p, q, done; .reg .u32 a, b, t, rank, slot, rs, rb; "
                ".reg .b64 state; barrier.cluster.wait.aligned; "
                "mov.u32 t, %tid.x; mov.u32 a, xbuf; mov.u32 b, xbar; setp.eq.u32 p, t, 0; "
                f"@p mbarrier.arrive.expect_tx.shared::cta.b64 state, [b], {8 * ctas}; "
                "mov.u32 rank, %cluster_ctarank; mad.lo.u32 slot, rank, 8, a; "
                f"setp.lt.u32 q, t, {ctas}; "
                "@q mapa.shared::cluster.u32 rs, slot, t; @q mapa.shared::cluster.u32 rb, b, t; "
                "@q st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [rs], "
                f"{{${2 * ctas}, ${2 * ctas + 1}}}, [rb]; "
                "XCHWAIT: mbarrier.try_wait.parity.shared::cta.b64 done, [b], 0; "
                "@!done bra XCHWAIT; " + reads + "}")

    @gluon.constexpr_function
    def _pair_constraints(ctas):
        ctas = ctas.value if hasattr(ctas, "value") else ctas
        return ",".join(["=f"] * (2 * ctas) + ["f", "f"])

    @gluon.constexpr_function
    def _floats(n):
        n = n.value if hasattr(n, "value") else n
        return [gl.float32] * n

    @gluon.jit
    def _softmax_cluster(
        out_ptr,  # *T: output rows, column stride 1
        in_ptr,  # *T: input rows, column stride 1, 16-byte aligned, row stride a multiple of 16
        out_row_stride,  # elements from one output row to the next, a multiple of 16
        in_row_stride,  # elements from one input row to the next
        n_cols,  # columns in a row, a multiple of 16, at most CTAS * PIECE
        CTAS: gl.constexpr,  # CTAs in a cluster: launch with launch_clustered(..., CTAS)
        PIECE: gl.constexpr,  # columns per CTA, a power of two
        CHUNK: gl.constexpr,  # columns per copy group and per step, a power of two <= PIECE
        VEC: gl.constexpr,  # columns in 16 bytes: one copy per thread and tile
        EVEN: gl.constexpr,  # n_cols == CTAS * PIECE: no piece needs a mask
    ):
        WARPS: gl.constexpr = gl.num_warps()
        CHUNKS: gl.constexpr = PIECE // CHUNK
        TILES: gl.constexpr = CHUNK // VEC
        tiles: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
        shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        buf = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [CHUNKS * TILES, VEC], shared)
        pid = gl.program_id(0)
        gl.inline_asm_elementwise(_cluster_init_asm(CTAS), "=r,r", [pid], dtype=gl.int32,
                                  is_pure=False, pack=1)
        row = (pid // CTAS).to(gl.int64)
        first = (pid % CTAS) * PIECE  # the piece's first column; past n_cols: an empty piece
        t = gl.arange(0, TILES, gl.SliceLayout(1, tiles))
        v = gl.arange(0, VEC, gl.SliceLayout(0, tiles))
        offs = t[:, None] * VEC + v[None, :]  # a chunk's columns, from its first
        src = in_ptr + row * in_row_stride + first
        dst = out_ptr + row * out_row_stride + first
        for c in gl.static_range(CHUNKS):
            cols = c * CHUNK + offs
            if EVEN:
                _copy_to_shared(buf.slice(c * TILES, TILES), src + cols)
            else:
                _copy_to_shared(buf.slice(c * TILES, TILES), src + cols, mask=first + cols < n_cols)
            async_copy.commit_group()
        # fold each chunk as it lands into per-tile (m, s), as _softmax_split_shared does
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
        # the cluster's pairs, pushed into each CTA's shared memory, combined in every thread
        pairs = gl.inline_asm_elementwise(_cluster_exchange_asm(CTAS), _pair_constraints(CTAS),
                                          [m_k, s_k], dtype=_floats(2 * CTAS), is_pure=False,
                                          pack=1)
        m_row = pairs[0]
        s_row = pairs[CTAS]
        for j in gl.static_range(1, CTAS):
            m_row, s_row = _combine_max_sum(m_row, s_row, pairs[j], pairs[CTAS + j])
        # y = exp(x - M) / S; a row of only -inf has M = -inf and S = 0: NaN, as in PyTorch
        inv = 1.0 / s_row
        for c in gl.static_range(CHUNKS):
            cols = c * CHUNK + offs
            x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
            y = (gl.exp2((x - m_row) * _LOG2E) * inv).to(out_ptr.dtype.element_ty)
            if EVEN:
                gl.store(dst + cols, y)
            else:
                gl.store(dst + cols, y, mask=first + cols < n_cols)


def launch_clustered(kernel, n_clusters: int, ctas: int, *args, **constants) -> None:
    """Launch ``kernel`` (compiled for one CTA) as ``n_clusters`` thread-block clusters of
    ``ctas`` CTAs each. Triton's launcher sizes the cluster, and the grid with it (grid x
    cluster), from the compiled kernel's packed metadata (num_warps, num_ctas, shared memory);
    ``warmup`` returns the very object the launch below finds in the kernel's cache, so setting
    num_ctas there sets it for this launch and every later one of the same specialization."""
    compiled = kernel.warmup(*args, grid=(n_clusters,), **constants)
    warps, _, shared = compiled.packed_metadata
    compiled.packed_metadata = (warps, ctas, shared)
    kernel[(n_clusters,)](*args, **constants)
