"""Rows wider than one cluster: clusters that meet in distributed shared memory, then in L2.

    PYTHONPATH=. python3 lab/probes/probe_cluster_groups.py --json /tmp/groups.json   # sm_90 GPU

At 2**20 16-bit columns the plan cuts a row into 32 pieces of 32768 columns, one program of
lab.gluon._softmax_split_shared each, which meet through L2: every piece waits for
the row's slowest (lab/probes/split_timeline.py). One cluster cannot hold such a row (sixteen CTAs
of 65536 columns ran at 0.66 of the copy ceiling), so this spans it with several clusters, a
copy of _softmax_cluster (its load, fold, exchange and stores): the CTAs of each cluster meet
in distributed shared memory as they do up to 2**18 columns, and each cluster's pair then meets
the row's other clusters' through L2, as split pieces do. A cluster learns its row from a
ticket that its first CTA takes and hands to the others over a full cluster barrier, so that
every cluster a row waits for is running or next in line; TICKET=False uses the cluster's
index instead (right only while every cluster waited on runs, timed to see what the ticket
costs). This times every (CTAs, columns per CTA, columns per chunk, warps) of --configs that
spans more than one cluster at each case's width, beside the plan triton_kernels.softmax takes
today, on 1 GiB inputs, after checking each against float64 (learning.bench's checks).
"""

from __future__ import annotations

import argparse
import json
import sys

from learning.bench import rowwise

CASES = (("bf16", 1048576), ("fp16", 1048576))
# (CTAs in a cluster, columns per CTA, columns per chunk, warps)
CONFIGS = ((2, 32768, 2048, 8), (2, 32768, 4096, 8), (4, 16384, 2048, 4), (2, 16384, 2048, 4),
           (16, 16384, 2048, 4))


_KERNEL = None


def kernel():
    """_softmax_cluster for rows of several clusters, defined on first use (Gluon): the load,
    fold, exchange and stores are the shipped kernel's; what differs is how a cluster learns its
    row (a ticket handed over the cluster barrier, or with TICKET=False the cluster's index,
    right only while every cluster waited on is running) and the meeting of a row's clusters
    through L2 after their own exchange."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    from lab import gluon as tg

    log2e = gl.constexpr(1.4426950408889634)

    @gluon.constexpr_function
    def ticket_asm(ctas):
        """Declare what the shipped exchange uses (its mbarrier, its CTAS slots) and a ticket
        word; thread 0 initialises the mbarrier and stores the ticket ($1, taken by rank 0
        only) in its word; a full cluster barrier (release, acquire) makes both visible, and
        every thread reads rank 0's ticket into $0."""
        ctas = ctas.value if hasattr(ctas, "value") else ctas
        return (f".shared .align 8 .b64 xbar; .shared .align 8 .b64 xbuf[{ctas}]; "
                ".shared .align 4 .b32 xtick; "
                "{ .reg .pred p; .reg .u32 a, k, t, r; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
                "mov.u32 a, xbar; @p mbarrier.init.shared::cta.b64 [a], 1; "
                "mov.u32 k, xtick; @p st.shared.u32 [k], $1; "
                "fence.mbarrier_init.release.cluster; barrier.cluster.arrive.aligned; "
                "barrier.cluster.wait.aligned; mapa.shared::cluster.u32 r, k, 0; "
                "ld.shared::cluster.u32 $0, [r]; }")

    @gluon.constexpr_function
    def exchange_asm(ctas, ticketed):
        """The shipped exchange; after the ticket's full barrier, without its cluster wait."""
        ctas = ctas.value if hasattr(ctas, "value") else ctas
        ticketed = ticketed.value if hasattr(ticketed, "value") else ticketed
        text = tg._cluster_exchange_asm(ctas)
        text = text.value if hasattr(text, "value") else text
        return text.replace("barrier.cluster.wait.aligned; ", "", 1) if ticketed else text

    @gluon.jit
    def softmax_cluster_groups(out_ptr, in_ptr, out_row_stride, in_row_stride, n_cols,
                               part_ptr, sync_ptr, CTAS: gl.constexpr, PIECE: gl.constexpr,
                               CHUNK: gl.constexpr, VEC: gl.constexpr, EVEN: gl.constexpr,
                               GROUPS: gl.constexpr, TICKET: gl.constexpr):
        WARPS: gl.constexpr = gl.num_warps()
        CHUNKS: gl.constexpr = PIECE // CHUNK
        TILES: gl.constexpr = CHUNK // VEC
        tiles: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
        flat: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
        shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        buf = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [CHUNKS * TILES, VEC], shared)
        pid = gl.program_id(0)
        rank = pid % CTAS
        n_groups = gl.cdiv(n_cols, CTAS * PIECE)
        if TICKET:
            mine = gl.atomic_add(sync_ptr, 1, mask=rank == 0)
            cluster = gl.inline_asm_elementwise(ticket_asm(CTAS), "=r,r", [mine],
                                                dtype=gl.int32, is_pure=False, pack=1)
        else:
            gl.inline_asm_elementwise(tg._cluster_init_asm(CTAS), "=r,r", [pid],
                                      dtype=gl.int32, is_pure=False, pack=1)
            cluster = pid // CTAS
        row = (cluster // n_groups).to(gl.int64)
        group = cluster % n_groups
        first = (group * CTAS + rank) * PIECE
        t = gl.arange(0, TILES, gl.SliceLayout(1, tiles))
        v = gl.arange(0, VEC, gl.SliceLayout(0, tiles))
        offs = t[:, None] * VEC + v[None, :]
        src = in_ptr + row * in_row_stride + first
        dst = out_ptr + row * out_row_stride + first
        for c in gl.static_range(CHUNKS):
            cols = c * CHUNK + offs
            if EVEN:
                tg._copy_to_shared(buf.slice(c * TILES, TILES), src + cols)
            else:
                tg._copy_to_shared(buf.slice(c * TILES, TILES), src + cols,
                                   mask=first + cols < n_cols)
            tg.async_copy.commit_group()
        m = gl.full([TILES], -float("inf"), gl.float32, gl.SliceLayout(1, tiles))
        s = gl.zeros([TILES], gl.float32, gl.SliceLayout(1, tiles))
        for c in gl.static_range(CHUNKS):
            tg.async_copy.wait_group(CHUNKS - 1 - c)
            tg._barrier()
            x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
            if not EVEN:
                x = gl.where(first + c * CHUNK + offs < n_cols, x, -float("inf"))
            m_c = gl.max(x, axis=1)
            m_ref = gl.where(m_c == -float("inf"), 0.0, m_c)
            s_c = gl.sum(gl.exp2((x - m_ref[:, None]) * log2e), axis=1)
            m, s = tg._combine_max_sum(m, s, m_c, s_c)
        m_k, s_k = gl.reduce((m, s), 0, tg._combine_max_sum)
        pairs = gl.inline_asm_elementwise(exchange_asm(CTAS, TICKET), tg._pair_constraints(CTAS),
                                          [m_k, s_k], dtype=tg._floats(2 * CTAS), is_pure=False,
                                          pack=1)
        m_row = pairs[0]
        s_row = pairs[CTAS]
        for j in gl.static_range(1, CTAS):
            m_row, s_row = tg._combine_max_sum(m_row, s_row, pairs[j], pairs[CTAS + j])
        # rank 0 publishes the cluster's pair and counts it in; every CTA waits for the row's
        # clusters and combines their pairs
        lead = rank == 0
        part = part_ptr + (row * GROUPS + group) * 2
        gl.store(part, m_row, mask=lead)
        gl.store(part + 1, s_row, mask=lead)
        tg._barrier()
        arrived = gl.atomic_add(sync_ptr + 1 + row, lead.to(gl.int32)) + lead.to(gl.int32)
        while arrived < n_groups:
            arrived = gl.atomic_add(sync_ptr + 1 + row, 0)
        k = gl.arange(0, GROUPS, flat)
        parts = part_ptr + (row * GROUPS + k) * 2
        m_all = gl.load(parts, mask=k < n_groups, other=-float("inf"), cache_modifier=".cg")
        s_all = gl.load(parts + 1, mask=k < n_groups, other=0.0, cache_modifier=".cg")
        m_row = gl.max(m_all, axis=0)
        inv = 1.0 / gl.sum(s_all * gl.exp2((m_all - m_row) * log2e), axis=0)
        for c in gl.static_range(CHUNKS):
            cols = c * CHUNK + offs
            x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
            y = (gl.exp2((x - m_row) * log2e) * inv).to(out_ptr.dtype.element_ty)
            if EVEN:
                gl.store(dst + cols, y)
            else:
                gl.store(dst + cols, y, mask=first + cols < n_cols)

    return softmax_cluster_groups


def launch_groups(out, x, ctas: int, piece: int, chunk: int, warps: int, ticket: bool) -> None:
    """One row as cdiv(width, ctas * piece) clusters of ctas CTAs."""
    global _KERNEL
    import triton

    from lab import gluon as tg
    from lab import production as fast

    if _KERNEL is None:
        _KERNEL = kernel()
    n_rows, n_cols = x.shape
    groups = triton.cdiv(n_cols, ctas * piece)
    part, sync = fast._split_scratch(n_rows, groups, 2, x.device)
    tg.launch_clustered(_KERNEL, n_rows * groups, ctas, out, x, out.stride(0), x.stride(0),
                        n_cols, part, sync, CTAS=ctas, PIECE=piece, CHUNK=chunk,
                        VEC=16 // x.element_size(), EVEN=n_cols % (ctas * piece) == 0,
                        GROUPS=triton.next_power_of_2(groups), TICKET=ticket, num_warps=warps)


def measure(ceiling: float, cases, configs) -> list[dict]:
    import torch

    import triton_kernels as tk
    from lab import production as fast

    found = []
    for dname, width in cases:
        dtype = rowwise.torch_dtype(dname)
        case = rowwise.make_case(rowwise.KERNELS["softmax"],
                                 rowwise.GIB // (width * dtype.itemsize), width, dname)
        x = case["args"][0]
        out = torch.empty_like(x)
        today = fast._plan("softmax", width, max_pieces=fast._max_pieces(x.device),
                           itemsize=x.element_size(), paired=fast._pairs_of_16_bits(x, out),
                           shared=fast._fits_shared_copies(x, out),
                           clusters=fast._clusters_available(x.device))
        launches = [(f"plan ({today.strategy} {today.block}, cluster {today.cluster})",
                     lambda p=today, o=out, a=x: tk._launch_softmax(o, a, p))]
        for ctas, piece, chunk, warps in configs:
            if piece * dtype.itemsize > 128 * 1024 or ctas * piece >= width:
                continue
            groups = -(-width // (ctas * piece))
            for ticket in (True, False):
                launches.append((f"{groups} x cluster of {ctas} x {piece}/{chunk}, {warps} warps"
                                 + ("" if ticket else " no ticket"),
                                 lambda c=ctas, p=piece, ch=chunk, w=warps, t=ticket, o=out,
                                 a=x: launch_groups(o, a, c, p, ch, w, t)))
        for name, launch in launches:
            row = {"variant": name, "dtype": dname, "cols": width}
            try:
                out.fill_(float("nan"))
                launch()
                torch.cuda.synchronize()
                ok, err = rowwise.compare(out[case["picked"]], case["ref"], dname)
                row.update(correct=ok, max_abs_err=err)
                if ok:
                    row["gbps"] = rowwise.gbps(case["nbytes"], rowwise.median_ms(launch))
                    row["frac"] = row["gbps"] / ceiling
            except Exception as error:  # the compiler or the launch refuses this shape
                row["error"] = f"{type(error).__name__}: {error}"[:300]
            print(json.dumps(row), flush=True)
            found.append(row)
        del x, out, case
        torch.cuda.empty_cache()
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--cases", default=None, metavar="DTYPE:COLS,...")
    ap.add_argument("--configs", default=None, metavar="CTAS:PIECE:CHUNK:WARPS,...")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("needs a Hopper GPU (compute capability 9.x)", file=sys.stderr)
        return 2
    cases = CASES if not args.cases else tuple(
        (item.split(":")[0], int(item.split(":")[1])) for item in args.cases.split(","))
    configs = CONFIGS if not args.configs else tuple(
        tuple(int(v) for v in item.split(":")) for item in args.configs.split(","))
    result = {"env": rowwise.environment(),
              "command": " ".join(["lab/probes/probe_cluster_groups.py", *(argv or sys.argv[1:])]),
              "copy_gbps": rowwise.copy_ceiling()}
    result["rows"] = measure(result["copy_gbps"], cases, configs)
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\ncopy ceiling {result['copy_gbps']:.0f} GB/s")
    for r in result["rows"]:
        speed = f"{r['gbps']:6.0f} {r['frac']:6.3f}" if "gbps" in r else \
            r.get("error", f"wrong, largest error {r.get('max_abs_err', 0):.2g}")
        print(f"{r['variant']:<48} {r['dtype']:>5} {r['cols']:>8} {speed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
