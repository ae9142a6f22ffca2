"""Softmax rows streamed through a ring of shared memory by persistent programs: correctness
on awkward rows, then speed on 1 GiB inputs beside the plan's kernel.

    PYTHONPATH=. python3 lab/probes/probe_ring.py --json /tmp/ring.json  # a GPU, Triton 3.6-3.9

The kernel keeps a program's piece of a row in shared memory while it reduces it, as
lab.gluon._softmax_split_shared does, but a program stays resident over many rows
and copies its next row into the slots its last one empties. A 16-bit row of 65536 columns
(128 KiB) fits one multiprocessor whole, so PIECES=1 needs no exchange at all; wider rows are
shared by PIECES programs that exchange (max, sum) through memory as the split kernel does.
Measured on an H200 (lab/RESULTS.md, "A ring of shared memory per multiprocessor"): right
everywhere, slower than the shipped kernel everywhere, 0.915 of the copy ceiling at best at
65536 bfloat16 columns even without exponentials; so it stays a probe.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

from learning.bench import rowwise

try:  # module-level: Triton resolves the helpers' constexpr annotations in this module
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except ImportError:  # Triton before 3.5
    gluon = gl = None

# (dtype, columns, pieces, chunks a piece, columns a chunk, front slots, back slots, warps,
#  programs a multiprocessor)
CONFIGS = (
    ("bf16", 65536, 1, 16, 4096, 16, 8, 8, 1), ("bf16", 65536, 1, 16, 4096, 16, 8, 16, 1),
    ("bf16", 65536, 1, 16, 4096, 16, 8, 4, 1), ("bf16", 65536, 1, 16, 4096, 16, 4, 8, 1),
    ("bf16", 65536, 1, 32, 2048, 32, 16, 8, 1), ("bf16", 65536, 2, 8, 4096, 8, 4, 8, 2),
    ("fp16", 65536, 1, 16, 4096, 16, 8, 8, 1),
    ("bf16", 131072, 2, 16, 4096, 16, 8, 8, 1),
    ("bf16", 262144, 4, 16, 4096, 16, 8, 8, 1), ("bf16", 262144, 8, 8, 4096, 8, 4, 8, 2),
    ("bf16", 262144, 8, 8, 4096, 8, 8, 8, 1),
    ("bf16", 1048576, 16, 16, 4096, 16, 8, 8, 1),
    ("fp32", 65536, 2, 16, 2048, 16, 8, 8, 1), ("fp32", 65536, 4, 8, 2048, 8, 4, 8, 2),
    ("fp32", 262144, 8, 16, 2048, 16, 8, 8, 1),
)


def kernel():
    """The ring kernel, defined on first use (Gluon: compiled kernels only)."""
    from lab import gluon as tg

    @gluon.jit
    def ring_slot_copy(front, back, slot, pointers, mask, FRONT: gl.constexpr):
        """Start copying a chunk into the ring's slot ``slot`` (slots 0 to FRONT - 1 are in
        ``front``, the rest in ``back``: shared memory allocations need power-of-two shapes)."""
        if slot < FRONT:
            tg._copy_to_shared(front.index(slot), pointers, mask=mask)
        else:
            tg._copy_to_shared(back.index(slot - FRONT), pointers, mask=mask)

    @gluon.jit
    def ring_load(front, back, slot, layout: gl.constexpr, FRONT: gl.constexpr):
        """The chunk in the ring's slot ``slot``, in registers as float32."""
        if slot < FRONT:
            x = front.index(slot).load(layout).to(gl.float32)
        else:
            x = back.index(slot - FRONT).load(layout).to(gl.float32)
        return x

    @gluon.jit
    def ring_copy(front, back, slot, in_ptr, in_row_stride, row, n_rows, n_cols, first, offs,
                   c: gl.constexpr, CHUNK: gl.constexpr, FRONT: gl.constexpr):
        """Start copying chunk c of a piece (from column ``first``) of ``row`` into ring slot
        ``slot`` as one commit group; a row past the last copies nothing but still commits, so
        that every program counts the same groups."""
        cols = first + c * CHUNK + offs
        limit = gl.where(row < n_rows, n_cols, 0)
        ring_slot_copy(front, back, slot, in_ptr + row * in_row_stride + cols, cols < limit,
                        FRONT)
        tg.async_copy.commit_group()

    @gluon.jit
    def softmax_ring(
        out_ptr,  # *T: output rows, column stride 1
        in_ptr,  # *T: input rows, column stride 1, 16-byte aligned, row stride a multiple of 16
        out_row_stride,  # elements from one output row to the next, a multiple of 16
        in_row_stride,  # elements from one input row to the next
        n_rows,
        n_cols,  # columns in a row, a multiple of 16, at most PIECES * CHUNKS * CHUNK
        part_ptr,  # *fp32: scratch, (n_rows, PIECES, 2): each piece's (max, sum); PIECES > 1
        sync_ptr,  # *i32: zeroed, 1 + n_rows: [0] hands out tickets, [1 + r] counts arrivals
        PIECES: gl.constexpr,  # programs that share a row; the grid is a multiple of it
        CHUNKS: gl.constexpr,  # chunks in a program's piece of a row
        CHUNK: gl.constexpr,  # columns per copy group, a power of two
        FRONT: gl.constexpr,  # ring slots in the first allocation, a power of two
        BACK: gl.constexpr,  # ring slots in the second, a power of two; FRONT + BACK > CHUNKS
        VEC: gl.constexpr,  # columns in 16 bytes: one copy per thread and tile
        EVEN: gl.constexpr,  # n_cols == PIECES * CHUNKS * CHUNK: no column needs a mask
        NO_EXP: gl.constexpr = False,  # a bound, not a softmax: no exponential anywhere
    ):
        """A persistent softmax whose programs stream their rows through a ring of shared
        memory: CHUNKS slots hold the piece being reduced, AHEAD more are already copying the
        next row, and each slot that step 3 empties starts its next copy at once."""
        WARPS: gl.constexpr = gl.num_warps()
        TILES: gl.constexpr = CHUNK // VEC
        SLOTS: gl.constexpr = FRONT + BACK
        AHEAD: gl.constexpr = SLOTS - CHUNKS  # chunks of its next row a program copies early
        tiles: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
        flat: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
        shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])  # each slot's
        front = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [FRONT, TILES, VEC], shared)
        back = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [BACK, TILES, VEC], shared)

        if PIECES == 1:
            group = gl.program_id(0)
            piece = 0
        else:  # tickets: every program whose piece this one waits for is running or next
            ticket = gl.atomic_add(sync_ptr, 1)
            group = ticket // PIECES
            piece = ticket % PIECES
        groups = gl.num_programs(0) // PIECES
        mine = gl.cdiv(gl.maximum(n_rows - group, 0), groups)  # rows group, group + groups, ...
        t = gl.arange(0, TILES, gl.SliceLayout(1, tiles))
        v = gl.arange(0, VEC, gl.SliceLayout(0, tiles))
        offs = t[:, None] * VEC + v[None, :]
        first = piece * (CHUNKS * CHUNK)
        # 1. fill the ring: the first row's chunks, then AHEAD of the next's
        for j in gl.static_range(SLOTS):
            ring_copy(front, back, j, in_ptr, in_row_stride,
                       (group + (j // CHUNKS) * groups).to(gl.int64), n_rows, n_cols, first, offs,
                       j % CHUNKS, CHUNK, FRONT)
        for i in range(mine):
            row = (group + i * groups).to(gl.int64)
            base = (i * CHUNKS) % SLOTS  # the ring slot of this row's chunk 0
            # 2. fold each chunk as it lands into per-tile (m, s); CHUNKS - 1 - c chunks of this
            # row and AHEAD of the next were committed after chunk c
            m = gl.full([TILES], -float("inf"), gl.float32, gl.SliceLayout(1, tiles))
            s = gl.zeros([TILES], gl.float32, gl.SliceLayout(1, tiles))
            for c in gl.static_range(CHUNKS):
                tg.async_copy.wait_group(CHUNKS - 1 - c + AHEAD)
                tg._barrier()
                slot = (base + c) % SLOTS
                x = ring_load(front, back, slot, tiles, FRONT)
                if not EVEN:
                    x = gl.where(first + c * CHUNK + offs < n_cols, x, -float("inf"))
                m_c = gl.max(x, axis=1)
                m_ref = gl.where(m_c == -float("inf"), 0.0, m_c)
                if NO_EXP:
                    s_c = gl.sum(x - m_ref[:, None], axis=1)
                else:
                    s_c = gl.sum(gl.exp2((x - m_ref[:, None]) * tg._LOG2E), axis=1)
                m, s = tg._combine_max_sum(m, s, m_c, s_c)
            m_row, s_row = gl.reduce((m, s), 0, tg._combine_max_sum)
            if PIECES > 1:  # publish, count in, wait for the row's other pieces, combine
                part = part_ptr + (row * PIECES + piece) * 2
                gl.store(part, m_row)
                gl.store(part + 1, s_row)
                tg._barrier()
                arrived = gl.atomic_add(sync_ptr + 1 + row, 1) + 1
                while arrived < PIECES:
                    arrived = gl.atomic_add(sync_ptr + 1 + row, 0)
                k = gl.arange(0, PIECES, flat)
                m_all = gl.load(part_ptr + (row * PIECES + k) * 2, cache_modifier=".cg")
                s_all = gl.load(part_ptr + (row * PIECES + k) * 2 + 1, cache_modifier=".cg")
                m_row = gl.max(m_all, axis=0)
                s_row = gl.sum(s_all * gl.exp2((m_all - m_row) * tg._LOG2E), axis=0)
            # 3. y = exp(x - M) / S chunk by chunk; each emptied slot starts copying the chunk
            # SLOTS further on (of the next row or the one after); a row of only -inf gives NaN
            inv = 1.0 / s_row
            dst = out_ptr + row * out_row_stride + first
            for c in gl.static_range(CHUNKS):
                slot = (base + c) % SLOTS
                x = ring_load(front, back, slot, tiles, FRONT)
                if NO_EXP:
                    y = ((x - m_row) * inv).to(out_ptr.dtype.element_ty)
                else:
                    y = (gl.exp2((x - m_row) * tg._LOG2E) * inv).to(out_ptr.dtype.element_ty)
                if EVEN:
                    gl.store(dst + c * CHUNK + offs, y)
                else:
                    gl.store(dst + c * CHUNK + offs, y, mask=first + c * CHUNK + offs < n_cols)
                tg._barrier()  # every thread has read the slot before the copy overwrites it
                ring_copy(front, back, slot, in_ptr, in_row_stride,
                           row + (1 + (c + AHEAD) // CHUNKS) * groups, n_rows, n_cols, first,
                           offs, (c + AHEAD) % CHUNKS, CHUNK, FRONT)
        tg.async_copy.wait_group(0)  # the copies for rows past the last commit nothing to wait for

    return softmax_ring


@functools.cache
def ring():
    return kernel()


def launch(out, x, config, sms):
    """Run the ring kernel on (rows, cols) views ``out`` and ``x`` with ``config``:
    (pieces, chunks, chunk, front, back, warps, programs per multiprocessor[, no_exp])."""
    import torch

    pieces, chunks, chunk, front, back, warps, per_sm, *bound = config
    n_rows, n_cols = x.shape
    programs = max(pieces, min(n_rows * pieces, sms * per_sm) // pieces * pieces)
    part = torch.empty(n_rows * pieces * 2, dtype=torch.float32, device=x.device)
    sync = torch.zeros(1 + n_rows, dtype=torch.int32, device=x.device)
    return ring()[(programs,)](
        out, x, out.stride(0), x.stride(0), n_rows, n_cols, part, sync,
        PIECES=pieces, CHUNKS=chunks, CHUNK=chunk, FRONT=front, BACK=back,
        VEC=16 // x.element_size(), EVEN=n_cols == pieces * chunks * chunk,
        NO_EXP=bool(bound and bound[0]), num_warps=warps,
    )  # fmt: skip


def awkward(dname: str, cols: int, rows: int, stride: int):
    """Rows a kernel gets wrong first: one of only -inf (NaN out), one +1000 and one -1000
    everywhere, one hot element, one -inf among finite values; the rest random; every row
    ``stride`` elements from the last (a view into a wider tensor)."""
    import torch

    dtype = rowwise.torch_dtype(dname)
    g = torch.Generator(device="cuda").manual_seed(cols + rows)
    wide = (torch.randn(rows, stride, device="cuda", generator=g) * 3).to(dtype)
    x = wide[:, :cols]
    x[0] = float("-inf")
    x[1] = 1000.0
    x[2] = -1000.0
    x[3] = 0.0
    x[3, cols - 1] = 50.0
    x[4, cols // 3] = float("-inf")
    return x


def check(dname: str, cols: int, config, sms) -> tuple[bool, float]:
    """The kernel against float64 torch on awkward rows whose count is no multiple of the
    grid, the output a strided view too; the last piece masked where cols is not even."""
    import torch

    ok_all, worst = True, 0.0
    for rows, extra in ((sms * config[6] + 7, 32), (5, 0)):
        x = awkward(dname, cols, rows, cols + extra)
        out_wide = torch.full((rows, cols + 16), float("nan"), dtype=x.dtype, device="cuda")
        out = out_wide[:, :cols]
        launch(out, x, config, sms)
        torch.cuda.synchronize()
        ref = torch.softmax(x.double(), dim=-1)
        ok, err = rowwise.compare(out, ref, dname)
        untouched = bool(torch.isnan(out_wide[:, cols:]).all())
        ok_all, worst = ok_all and ok and untouched, max(worst, err)
    return ok_all, worst


def measure(ceiling: float, configs, sms: int) -> list[dict]:
    import torch

    import triton_kernels as tk
    from lab import production as fast

    found = []
    cases = {}
    for dname, width, *config in configs:
        cases.setdefault((dname, width), []).append(tuple(config))
    for (dname, width), shapes in cases.items():
        dtype = rowwise.torch_dtype(dname)
        case = rowwise.make_case(rowwise.KERNELS["softmax"],
                                 rowwise.GIB // (width * dtype.itemsize), width, dname)
        x = case["args"][0]
        out = torch.empty_like(x)
        plan = fast._plan("softmax", width, max_pieces=sms, itemsize=x.element_size(),
                          shared=fast._fits_shared_copies(x, out))
        runs = [("plan (triton_kernels.softmax)", None,
                 lambda o=out, a=x, p=plan: tk._launch_softmax(o, a, p))]
        for config in shapes:
            pieces, chunks, chunk, front, back, warps, per_sm, *bound = config
            runs.append((f"ring {pieces} x {chunks}x{chunk}, slots {front}+{back}, "
                         f"{warps} warps, {per_sm}/SM" + (" no_exp" if any(bound) else ""),
                         config, lambda o=out, a=x, c=config: launch(o, a, c, sms)))
        for name, config, run in runs:
            row = {"variant": name, "dtype": dname, "cols": width}
            try:
                if config is not None and not any(config[7:]):
                    row["awkward_rows_right"], row["awkward_err"] = check(dname, width, config,
                                                                          sms)
                    # the masked form too: a width that is no multiple of the chunk
                    row["masked_right"], _ = check(dname, width - 48, config, sms)
                out.fill_(float("nan"))
                compiled = run()
                torch.cuda.synchronize()
                ok, err = rowwise.compare(out[case["picked"]], case["ref"], dname)
                row.update(correct=ok and row.get("awkward_rows_right", True)
                           and row.get("masked_right", True), max_abs_err=err)
                if config is not None:
                    row.update(registers=compiled.n_regs, shared_bytes=compiled.metadata.shared,
                               spills=compiled.n_spills)
                row["gbps"] = rowwise.gbps(case["nbytes"], rowwise.median_ms(run))
                row["frac"] = row["gbps"] / ceiling
            except Exception as error:  # the compiler or the launch refuses this shape
                row["error"] = f"{type(error).__name__}: {error}"[:300]
            print(json.dumps(row), flush=True)
            found.append(row)
        del x, out, case
        torch.cuda.empty_cache()
    return found


def parse_configs(text: str | None):
    if not text:
        return CONFIGS
    found = []
    for item in text.split(","):
        dname, *numbers = item.split(":")
        found.append((dname, *map(int, numbers)))
    return tuple(found)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--configs", default=None,
                    help="dtype:cols:pieces:chunks:chunk:front:back:warps:per_sm,...")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: Gluon kernels have no interpreter", file=sys.stderr)
        return 2
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    result = {"env": rowwise.environment(),
              "command": " ".join(["lab/probes/probe_ring.py", *(argv or sys.argv[1:])]),
              "copy_gbps": rowwise.copy_ceiling()}
    result["rows"] = measure(result["copy_gbps"], parse_configs(args.configs), sms)
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\ncopy ceiling {result['copy_gbps']:.0f} GB/s")
    for r in result["rows"]:
        speed = f"{r['gbps']:6.0f} {r['frac']:6.3f}" if "gbps" in r else r.get("error", "")
        right = "" if r.get("correct", True) else " WRONG"
        print(f"{r['variant']:<52} {r['dtype']:>5} {r['cols']:>7} {speed}{right}"
              f" {r.get('registers', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
