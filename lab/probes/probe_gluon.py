"""Variants of lab.gluon._softmax_split_shared that lab/probes/split_shared_probe.py
times to find what bounds it (GPU only). Each flag removes or changes one step; the ones that
remove a step give wrong output and are timed only as bounds:

- NO_TICKET: the program id names the row and piece, not a ticket (no atomic before the load;
  correct here only because the grid's programs all fit on the GPU at once, which the probe
  does not check);
- NO_EXCHANGE: each piece normalises by its own (max, sum): no publish, arrival or spin;
- NO_EXP: the exponentials replaced by an affine function;
- STREAM: the output stored with the streaming cache hint (.cs);
- EVEN: no masks (the width is a multiple of the piece), as the shipped kernel does there; the
  flags below were timed with it:
- FOLD: 1 / S folded into the exponent of the second pass, exp2((x - M) log2 e - log2 S),
  one multiplication an element fewer;
- LOCAL: every thread loads all the row's partials and combines them itself, instead of one
  reduction across the program's warps each for M and S;
- NO_BAR: no barrier between a chunk's copy landing and its read (each thread reads back only
  the bytes it copied itself, with the same layout);
- WORDS: each piece publishes its (max, sum) as one 64-bit word (max in the low half) to a
  zeroed scratch and the pieces poll their row's words until none is zero, instead of storing
  the pair, counting in with an atomic (whose release waits for those stores) and then loading
  the pairs: one round trip to L2 after the publish instead of three. No published word is
  zero: a piece's sum is at least 1 unless its max is -inf;
- OWN (with WORDS): every thread loads all of its row's words and tests them itself, so that a
  poll needs no reduction across warps (nor the barrier that comes with one); each warp leaves
  the spin on its own;
- SLEEP (with WORDS, nanoseconds): the time a poll waits before the next (nanosleep), so that
  the polls of the waiting pieces do not crowd the loads of the others out of L2;
- PREFETCH (with EVEN, a distance D in tickets): once its own piece has landed, and before it
  publishes and waits, a program asks L2 for the piece of ticket + D with one bulk prefetch
  (cp.async.bulk.prefetch.L2, sm_90), so that the DRAM the waiting programs leave idle reads
  ahead for the programs that start later; n_rows bounds the tickets;
- stamps (a pointer, not a flag): each program writes (ticket, multiprocessor, and the global
  timer in ns after its ticket, after its last chunk landed, after the exchange and at the end)
  to stamps[ticket], for lab/probes/split_timeline.py.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from lab import gluon as tg

_LOG2E = tg._LOG2E
_combine = tg._combine_max_sum
_copy = tg._copy_to_shared
_barrier = tg._barrier
async_copy = tg.async_copy


@gluon.jit
def _exp2(z, NO_EXP: gl.constexpr):
    if NO_EXP:
        return z * 0.001 + 1.0
    else:
        return gl.exp2(z)


@gluon.jit
def _now(dummy):
    """The GPU's global timer in nanoseconds (dummy only gives the asm an operand)."""
    return gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dummy],
                                     dtype=gl.int64, is_pure=False, pack=1)


@gluon.jit
def _sm_id(dummy):
    """The multiprocessor this program runs on."""
    return gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dummy], dtype=gl.int32,
                                     is_pure=False, pack=1).to(gl.int64)


@gluon.jit
def _pause(ns):
    """Sleep about ns nanoseconds (an int32 scalar)."""
    return gl.inline_asm_elementwise("nanosleep.u32 $1; mov.u32 $0, $1;", "=r,r", [ns],
                                     dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _prefetch_l2(address, NBYTES: gl.constexpr):
    """Thread 0 asks L2 for the NBYTES from ``address`` (an int64) on; nothing lands in this
    program."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        f"@p cp.async.bulk.prefetch.L2.global [$1], {NBYTES}; mov.u32 $0, 0; }}",
        "=r,l", [address], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def split_shared_variant(out_ptr, in_ptr, out_row_stride, in_row_stride, n_cols, part_ptr,
                         sync_ptr, PIECES: gl.constexpr, PIECE: gl.constexpr,
                         CHUNK: gl.constexpr, VEC: gl.constexpr, NO_TICKET: gl.constexpr,
                         NO_EXCHANGE: gl.constexpr, NO_EXP: gl.constexpr,
                         STREAM: gl.constexpr, EVEN: gl.constexpr = False,
                         FOLD: gl.constexpr = False, LOCAL: gl.constexpr = False,
                         NO_BAR: gl.constexpr = False, WORDS: gl.constexpr = False,
                         OWN: gl.constexpr = False, SLEEP: gl.constexpr = 0, stamps=None,
                         PREFETCH: gl.constexpr = 0, n_rows=1):
    WARPS: gl.constexpr = gl.num_warps()
    CHUNKS: gl.constexpr = PIECE // CHUNK
    TILES: gl.constexpr = CHUNK // VEC
    tiles: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
    flat: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [CHUNKS * TILES, VEC], shared)
    n_pieces = gl.cdiv(n_cols, PIECE)
    if NO_TICKET:
        ticket = gl.program_id(0)
    else:
        ticket = gl.atomic_add(sync_ptr, 1)
    if stamps is not None:
        gl.store(stamps + ticket * 6, ticket.to(gl.int64))
        gl.store(stamps + ticket * 6 + 1, _sm_id(ticket))
        gl.store(stamps + ticket * 6 + 2, _now(ticket))
    row = (ticket // n_pieces).to(gl.int64)
    piece = ticket % n_pieces
    t = gl.arange(0, TILES, gl.SliceLayout(1, tiles))
    v = gl.arange(0, VEC, gl.SliceLayout(0, tiles))
    offs = t[:, None] * VEC + v[None, :]
    first = piece * PIECE
    src = in_ptr + row * in_row_stride + first
    for c in gl.static_range(CHUNKS):
        if EVEN:
            _copy(buf.slice(c * TILES, TILES), src + c * CHUNK + offs)
        else:
            _copy(buf.slice(c * TILES, TILES), src + c * CHUNK + offs,
                  mask=first + c * CHUNK + offs < n_cols)
        async_copy.commit_group()
    m = gl.full([TILES], -float("inf"), gl.float32, gl.SliceLayout(1, tiles))
    s = gl.zeros([TILES], gl.float32, gl.SliceLayout(1, tiles))
    for c in gl.static_range(CHUNKS):
        async_copy.wait_group(CHUNKS - 1 - c)
        if not NO_BAR:
            _barrier()
        x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
        if not EVEN:
            x = gl.where(first + c * CHUNK + offs < n_cols, x, -float("inf"))
        m_c = gl.max(x, axis=1)
        m_ref = gl.where(m_c == -float("inf"), 0.0, m_c)
        s_c = gl.sum(_exp2((x - m_ref[:, None]) * _LOG2E, NO_EXP), axis=1)
        m, s = _combine(m, s, m_c, s_c)
    m_k, s_k = gl.reduce((m, s), 0, _combine)
    if PREFETCH > 0:
        ahead = ticket + PREFETCH
        if ahead < n_rows * n_pieces:
            a_row = (ahead // n_pieces).to(gl.int64)
            a_src = in_ptr + a_row * in_row_stride + (ahead % n_pieces) * PIECE
            _prefetch_l2(a_src.to(gl.int64, bitcast=True),
                         PIECE * in_ptr.dtype.element_ty.primitive_bitwidth // 8)
    if stamps is not None:
        gl.store(stamps + ticket * 6 + 3, _now(ticket))
    if NO_EXCHANGE:
        m_row = m_k
        s_row = s_k
    elif WORDS:
        words = part_ptr.to(gl.pointer_type(gl.int64)) + row * PIECES
        low = m_k.to(gl.int32, bitcast=True).to(gl.int64) & 0xFFFFFFFF
        gl.store(words + piece, low | (s_k.to(gl.int32, bitcast=True).to(gl.int64) << 32))
        if OWN:
            k = gl.arange(0, PIECES, gl.BlockedLayout([PIECES], [32], [WARPS], [0]))
        else:
            k = gl.arange(0, PIECES, flat)
        # past the row's pieces: (-inf, 0), whose low half 0xFF800000 is not zero
        w = gl.load(words + k, mask=k < n_pieces, other=0xFF800000, volatile=True)
        while gl.min((w != 0).to(gl.int32), axis=0) == 0:
            if SLEEP > 0:
                _pause(piece * 0 + SLEEP)
            w = gl.load(words + k, mask=k < n_pieces, other=0xFF800000, volatile=True)
        m_all = w.to(gl.int32).to(gl.float32, bitcast=True)
        s_all = (w >> 32).to(gl.int32).to(gl.float32, bitcast=True)
        m_row = gl.max(m_all, axis=0)
        s_row = gl.sum(s_all * gl.exp2((m_all - m_row) * _LOG2E), axis=0)
    else:
        part = part_ptr + (row * PIECES + piece) * 2
        gl.store(part, m_k)
        gl.store(part + 1, s_k)
        _barrier()
        arrived = gl.atomic_add(sync_ptr + 1 + row, 1) + 1
        while arrived < n_pieces:
            arrived = gl.atomic_add(sync_ptr + 1 + row, 0)
        if LOCAL:  # all PIECES partials in every thread: the reductions stay in the thread
            own: gl.constexpr = gl.BlockedLayout([PIECES], [32], [WARPS], [0])
            k = gl.arange(0, PIECES, own)
        else:
            k = gl.arange(0, PIECES, flat)
        parts = part_ptr + (row * PIECES + k) * 2
        m_all = gl.load(parts, mask=k < n_pieces, other=-float("inf"), cache_modifier=".cg")
        s_all = gl.load(parts + 1, mask=k < n_pieces, other=0.0, cache_modifier=".cg")
        m_row = gl.max(m_all, axis=0)
        s_row = gl.sum(s_all * gl.exp2((m_all - m_row) * _LOG2E), axis=0)
    if stamps is not None:
        gl.store(stamps + ticket * 6 + 4, _now(ticket))
    inv = 1.0 / s_row
    log2_s = gl.log2(s_row)
    dst = out_ptr + row * out_row_stride + first
    for c in gl.static_range(CHUNKS):
        x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
        if FOLD:
            y = _exp2((x - m_row) * _LOG2E - log2_s, NO_EXP)
        else:
            y = _exp2((x - m_row) * _LOG2E, NO_EXP) * inv
        if EVEN:
            gl.store(dst + c * CHUNK + offs, y.to(out_ptr.dtype.element_ty))
        elif STREAM:
            gl.store(dst + c * CHUNK + offs, y.to(out_ptr.dtype.element_ty),
                     mask=first + c * CHUNK + offs < n_cols, cache_modifier=".cs")
        else:
            gl.store(dst + c * CHUNK + offs, y.to(out_ptr.dtype.element_ty),
                     mask=first + c * CHUNK + offs < n_cols)
    if stamps is not None:
        gl.store(stamps + ticket * 6 + 5, _now(ticket))


# ---------------------------------------------------------------------------------------------
# Persistent: each program loads its next piece while it waits for this one's row
# ---------------------------------------------------------------------------------------------


@gluon.jit
def _copy_piece(buf, slot, src, first, n_cols, valid, offs, CHUNKS: gl.constexpr,
                CHUNK: gl.constexpr):
    """Start copying a piece (or nothing, if not valid) into buf's slot, a group per chunk."""
    for c in gl.static_range(CHUNKS):
        _copy(buf.index(slot * CHUNKS + c), src + c * CHUNK + offs,
              mask=(first + c * CHUNK + offs < n_cols) & valid)
        async_copy.commit_group()


@gluon.jit
def _piece_max_sum(buf, slot, first, n_cols, offs, LATER: gl.constexpr, CHUNKS: gl.constexpr,
                   CHUNK: gl.constexpr, TILES: gl.constexpr, layout: gl.constexpr):
    """(max, sum of exp(x - max)) over the piece in buf's slot, each chunk folded in as it
    lands; LATER is the copy groups committed after this piece's."""
    m = gl.full([TILES], -float("inf"), gl.float32, gl.SliceLayout(1, layout))
    s = gl.zeros([TILES], gl.float32, gl.SliceLayout(1, layout))
    for c in gl.static_range(CHUNKS):
        async_copy.wait_group(LATER + CHUNKS - 1 - c)
        _barrier()
        x = buf.index(slot * CHUNKS + c).load(layout).to(gl.float32)
        x = gl.where(first + c * CHUNK + offs < n_cols, x, -float("inf"))
        m_c = gl.max(x, axis=1)
        m_ref = gl.where(m_c == -float("inf"), 0.0, m_c)
        s_c = gl.sum(gl.exp2((x - m_ref[:, None]) * _LOG2E), axis=1)
        m, s = _combine(m, s, m_c, s_c)
    return gl.reduce((m, s), 0, _combine)


@gluon.jit
def _publish(part_ptr, sync_ptr, row, piece, m_k, s_k, PIECES: gl.constexpr):
    part = part_ptr + (row * PIECES + piece) * 2
    gl.store(part, m_k)
    gl.store(part + 1, s_k)
    _barrier()
    gl.atomic_add(sync_ptr + 1 + row, 1)


@gluon.jit
def split_shared_persistent(out_ptr, in_ptr, out_row_stride, in_row_stride, n_rows, n_cols,
                            part_ptr, sync_ptr, PIECES: gl.constexpr, PIECE: gl.constexpr,
                            CHUNK: gl.constexpr, VEC: gl.constexpr):
    WARPS: gl.constexpr = gl.num_warps()
    CHUNKS: gl.constexpr = PIECE // CHUNK
    TILES: gl.constexpr = CHUNK // VEC
    tiles: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
    flat: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [2 * CHUNKS, TILES, VEC], shared)
    n_pieces = gl.cdiv(n_cols, PIECE)
    total = n_rows * n_pieces
    t = gl.arange(0, TILES, gl.SliceLayout(1, tiles))
    v = gl.arange(0, VEC, gl.SliceLayout(0, tiles))
    offs = t[:, None] * VEC + v[None, :]

    cur = gl.atomic_add(sync_ptr, 1)
    row = (cur // n_pieces).to(gl.int64)
    first = (cur % n_pieces) * PIECE
    _copy_piece(buf, 0, in_ptr + row * in_row_stride + first, first, n_cols, cur < total,
                offs, CHUNKS, CHUNK)
    slot = 0
    ahead = False  # whether this piece's partials were published on the previous step
    while cur < total:
        row = (cur // n_pieces).to(gl.int64)
        piece = cur % n_pieces
        first = piece * PIECE
        nxt = gl.atomic_add(sync_ptr, 1)
        n_row = (nxt // n_pieces).to(gl.int64)
        n_first = (nxt % n_pieces) * PIECE
        _copy_piece(buf, 1 - slot, in_ptr + n_row * in_row_stride + n_first, n_first, n_cols,
                    nxt < total, offs, CHUNKS, CHUNK)
        if not ahead:
            m_k, s_k = _piece_max_sum(buf, slot, first, n_cols, offs, CHUNKS, CHUNKS, CHUNK,
                                      TILES, tiles)
            _publish(part_ptr, sync_ptr, row, piece, m_k, s_k, PIECES)
        # the next piece in this same row would be waited for by this very program: publish it
        ahead = (nxt < total) & (n_row == row)
        if ahead:
            m_n, s_n = _piece_max_sum(buf, 1 - slot, n_first, n_cols, offs, 0, CHUNKS, CHUNK,
                                      TILES, tiles)
            _publish(part_ptr, sync_ptr, n_row, nxt % n_pieces, m_n, s_n, PIECES)
        arrived = gl.atomic_add(sync_ptr + 1 + row, 0)
        while arrived < n_pieces:
            arrived = gl.atomic_add(sync_ptr + 1 + row, 0)
        k = gl.arange(0, PIECES, flat)
        parts = part_ptr + (row * PIECES + k) * 2
        m_all = gl.load(parts, mask=k < n_pieces, other=-float("inf"), cache_modifier=".cg")
        s_all = gl.load(parts + 1, mask=k < n_pieces, other=0.0, cache_modifier=".cg")
        m_row = gl.max(m_all, axis=0)
        inv = 1.0 / gl.sum(s_all * gl.exp2((m_all - m_row) * _LOG2E), axis=0)
        dst = out_ptr + row * out_row_stride + first
        for c in gl.static_range(CHUNKS):
            x = buf.index(slot * CHUNKS + c).load(tiles).to(gl.float32)
            y = gl.exp2((x - m_row) * _LOG2E) * inv
            gl.store(dst + c * CHUNK + offs, y.to(out_ptr.dtype.element_ty),
                     mask=first + c * CHUNK + offs < n_cols)
        _barrier()  # every thread is done with this slot before it is copied into again
        slot = 1 - slot
        cur = nxt


# ---------------------------------------------------------------------------------------------
# Hybrid: part of each piece waits in registers, the rest in shared memory
# ---------------------------------------------------------------------------------------------
#
# A multiprocessor has 228 KiB of shared memory and 256 KiB of registers; the shipped kernel
# keeps its pieces in the first only, so about six pieces of 32 KiB wait on a multiprocessor at
# once, and a piece spends as long waiting for its row as loading (lab/probes/split_timeline.py).
# Here the first 4 * CHUNK columns of a piece are loaded into registers in their own dtype,
# two 16-bit values a register, and the rest copied into shared memory as before. The second
# pass converts the register chunks again from their 16-bit values, after an opaque copy
# (inline assembly), so that the compiler cannot keep the float32 values of the first pass
# alive through the wait instead.


@gluon.jit
def _opaque(x):
    """x, through an instruction the compiler cannot see into: a value it must keep as is."""
    return gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=x.dtype,
                                     is_pure=False, pack=2)


@gluon.jit
def _fold(x, m, s):
    """(m, s) per tile with the (TILES, VEC) chunk x (float32) folded in."""
    m_c = gl.max(x, axis=1)
    m_ref = gl.where(m_c == -float("inf"), 0.0, m_c)
    s_c = gl.sum(gl.exp2((x - m_ref[:, None]) * _LOG2E), axis=1)
    return _combine(m, s, m_c, s_c)


@gluon.jit
def split_hybrid(out_ptr, in_ptr, out_row_stride, in_row_stride, n_cols, part_ptr, sync_ptr,
                 PIECES: gl.constexpr, PIECE: gl.constexpr, CHUNK: gl.constexpr,
                 VEC: gl.constexpr):
    # 16-bit rows whose width is a multiple of PIECE only (no masks); PIECE >= 5 * CHUNK
    WARPS: gl.constexpr = gl.num_warps()
    REG: gl.constexpr = 4 * CHUNK  # columns kept in registers, the piece's first
    CHUNKS: gl.constexpr = (PIECE - REG) // CHUNK  # chunks copied into shared memory
    TILES: gl.constexpr = CHUNK // VEC
    tiles: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
    flat: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [CHUNKS * TILES, VEC], shared)
    n_pieces = n_cols // PIECE
    ticket = gl.atomic_add(sync_ptr, 1)
    row = (ticket // n_pieces).to(gl.int64)
    piece = ticket % n_pieces
    t = gl.arange(0, TILES, gl.SliceLayout(1, tiles))
    v = gl.arange(0, VEC, gl.SliceLayout(0, tiles))
    offs = t[:, None] * VEC + v[None, :]
    first = piece * PIECE
    src = in_ptr + row * in_row_stride + first
    for c in gl.static_range(CHUNKS):
        _copy(buf.slice(c * TILES, TILES), src + REG + c * CHUNK + offs)
        async_copy.commit_group()
    r0 = gl.load(src + offs)
    r1 = gl.load(src + CHUNK + offs)
    r2 = gl.load(src + 2 * CHUNK + offs)
    r3 = gl.load(src + 3 * CHUNK + offs)
    m = gl.full([TILES], -float("inf"), gl.float32, gl.SliceLayout(1, tiles))
    s = gl.zeros([TILES], gl.float32, gl.SliceLayout(1, tiles))
    m, s = _fold(r0.to(gl.float32), m, s)
    m, s = _fold(r1.to(gl.float32), m, s)
    m, s = _fold(r2.to(gl.float32), m, s)
    m, s = _fold(r3.to(gl.float32), m, s)
    for c in gl.static_range(CHUNKS):
        async_copy.wait_group(CHUNKS - 1 - c)
        _barrier()
        m, s = _fold(buf.slice(c * TILES, TILES).load(tiles).to(gl.float32), m, s)
    m_k, s_k = gl.reduce((m, s), 0, _combine)
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
    inv = 1.0 / gl.sum(s_all * gl.exp2((m_all - m_row) * _LOG2E), axis=0)
    dst = out_ptr + row * out_row_stride + first
    DT: gl.constexpr = out_ptr.dtype.element_ty
    gl.store(dst + offs, (gl.exp2((_opaque(r0).to(gl.float32) - m_row) * _LOG2E) * inv).to(DT))
    gl.store(dst + CHUNK + offs,
             (gl.exp2((_opaque(r1).to(gl.float32) - m_row) * _LOG2E) * inv).to(DT))
    gl.store(dst + 2 * CHUNK + offs,
             (gl.exp2((_opaque(r2).to(gl.float32) - m_row) * _LOG2E) * inv).to(DT))
    gl.store(dst + 3 * CHUNK + offs,
             (gl.exp2((_opaque(r3).to(gl.float32) - m_row) * _LOG2E) * inv).to(DT))
    for c in gl.static_range(CHUNKS):
        x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
        gl.store(dst + REG + c * CHUNK + offs, (gl.exp2((x - m_row) * _LOG2E) * inv).to(DT))
