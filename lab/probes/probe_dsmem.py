"""A wide softmax row per thread-block cluster whose CTAs exchange (max, sum) in shared memory.

    PYTHONPATH=. python3 lab/probes/probe_dsmem.py --json /tmp/dsmem.json  # sm_90, 3.6 or 3.9

lab.gluon._softmax_split_shared gives each piece of a wide row its own program; the
pieces meet through L2 (a ticket, a publish, an atomic arrival, a spin and a load of the
partials), and each waits about as long for its row as it took to load its own piece
(lab/probes/split_timeline.py). QuACK's softmax meets in distributed shared memory instead: the
CTAs of one cluster hold the pieces of one row and read each other's partials directly. This
is that exchange, written around the shipped kernel's load and fold:

- the kernel is compiled as an ordinary one-CTA kernel (so that no layout is sharded over
  CTAs, which Triton 3.6 refuses for asynchronous copies) and launched with a cluster of CTAS
  CTAs: the launcher reads the cluster size from the compiled kernel's packed metadata, which
  ``clustered`` sets. CTA ``pid`` holds piece ``pid % CTAS`` of row ``pid // CTAS``, and the
  CTAs of a cluster are consecutive, so the piece is the CTA's rank in its cluster;
- each CTA folds its piece into (m_k, s_k), writes the pair to a word of its own shared memory,
  and one cluster barrier (arrive with release, wait with acquire) makes every pair visible;
- each thread then reads the CTAS pairs through ``mapa`` / ``ld.shared::cluster``, arrives at
  a second barrier phase, and waits on it only before it exits, so that no CTA leaves while a
  peer may still read its shared memory. That arrival must release: a relaxed one does not
  wait for the thread's remote reads, and a peer that leaves under one faults the launch
  (seen on the H200 with 2048 rows, never with one or two).

PUSH replaces that pull with the exchange that shipped in lab.gluon._softmax_cluster
(its PTX is taken from there): each CTA sends its pair into every peer's shared memory with
st.async, counted on the peer's mbarrier, and no cluster barrier releases anything. The pull's
release compiles to MEMBAR.GPU, and the pull was no faster than the exchange through L2.

No ticket, atomic, spin or scratch in global memory. Widths a multiple of PIECE, CTAS pieces,
16-byte aligned rows. Two forms of the piece:

- folded (as shipped): each chunk is folded into per-tile (max, sum) as it lands, and the
  second pass reads the piece from shared memory again and takes exp(x) a second time;
- REGS (as QuACK): once the whole piece has landed it is read into registers, exp(x) is taken
  once and kept, and the output is stored from registers.

EXCHANGE=False (each CTA normalises by its own pair: a wrong answer) and EXIT_WAIT=False (a
CTA may leave while a peer still reads it) exist only to find a fault; the probe times neither.
"""

from __future__ import annotations

import argparse
import json
import sys

from learning.bench import rowwise

# (dtype, columns, CTAs in a cluster, columns per CTA, columns per chunk, warps, the piece in
# registers once landed (REGS) or folded chunk by chunk from shared memory, the pairs pushed
# (PUSH) or pulled)
CONFIGS = (
    ("bf16", 65536, 4, 16384, 2048, 4, False, False),
    ("bf16", 65536, 2, 32768, 4096, 8, False, False),
    ("bf16", 65536, 4, 16384, 2048, 4, False, True),
    ("bf16", 65536, 2, 32768, 4096, 8, False, True),
    ("bf16", 65536, 8, 8192, 2048, 4, False, True),
    ("bf16", 65536, 4, 16384, 2048, 8, True, False),
    ("bf16", 65536, 4, 16384, 2048, 8, True, True),
    ("bf16", 65536, 2, 32768, 4096, 16, True, False),
    ("bf16", 65536, 8, 8192, 2048, 4, True, False),
    ("bf16", 65536, 4, 16384, 2048, 16, True, False),
    ("fp16", 65536, 2, 32768, 4096, 8, False, False),
    ("fp16", 65536, 2, 32768, 4096, 8, False, True),
    ("fp16", 65536, 4, 16384, 2048, 4, False, True),
    ("fp16", 65536, 4, 16384, 2048, 8, True, False),
    ("bf16", 131072, 8, 16384, 2048, 4, False, False),
    ("bf16", 131072, 4, 32768, 4096, 8, False, False),
    ("bf16", 131072, 8, 16384, 2048, 4, False, True),
    ("bf16", 131072, 4, 32768, 4096, 8, False, True),
    ("bf16", 131072, 8, 16384, 2048, 8, True, False),
    ("bf16", 131072, 4, 32768, 4096, 16, True, False),
    ("bf16", 262144, 16, 16384, 2048, 4, False, False),
    ("bf16", 262144, 8, 32768, 4096, 8, False, False),
    ("bf16", 262144, 16, 16384, 2048, 4, False, True),
    ("bf16", 262144, 8, 32768, 4096, 8, False, True),
    ("bf16", 262144, 16, 16384, 2048, 8, True, False),
    ("bf16", 262144, 8, 32768, 4096, 16, True, False),
    ("fp32", 65536, 4, 16384, 2048, 4, False, False),
    ("fp32", 65536, 4, 16384, 2048, 4, False, True),
    ("fp32", 65536, 8, 8192, 2048, 4, False, True),
    ("fp32", 65536, 4, 16384, 2048, 8, True, False),
    ("fp32", 65536, 8, 8192, 2048, 8, True, False),
    # the shapes the plan took from a first run of pushed variants (_CLUSTER_PLANS)
    ("bf16", 32768, 2, 16384, 2048, 8, False, True),
    ("bf16", 65536, 2, 32768, 2048, 8, False, True),
    ("bf16", 131072, 2, 65536, 4096, 8, False, True),
    ("bf16", 131072, 16, 8192, 2048, 4, False, True),
    ("fp32", 65536, 2, 32768, 4096, 8, False, True),
)


NO_CLUSTERS = "plan without clusters"


def kernel():
    """The cluster kernel and its end-of-program wait, defined on first use (Gluon)."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    from lab import gluon as tg

    log2e = gl.constexpr(1.4426950408889634)

    @gluon.constexpr_function
    def asm_text(ctas):
        """Pull: PTX that publishes this CTA's (m, s) ($2C, $2C+1) and reads the cluster's (m_j
        into $j, s_j into $(C + j)), then arrives (with release) at the phase waited on before
        exit."""
        ctas = ctas.value if hasattr(ctas, "value") else ctas
        reads = "".join(f"mapa.shared::cluster.u32 r, a, {j}; "
                        f"ld.shared::cluster.v2.f32 {{${j}, ${ctas + j}}}, [r]; "
                        for j in range(ctas))
        return ("{ .shared .align 8 .b32 xch[2]; .reg .u32 a, r; mov.u32 a, xch; "
                f"st.shared.v2.f32 [a], {{${2 * ctas}, ${2 * ctas + 1}}}; "
                "barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned; "
                + reads + "barrier.cluster.arrive.release.aligned; }")

    @gluon.jit
    def row_max_sum(m_k, s_k, CTAS: gl.constexpr, PUSH: gl.constexpr):
        """The row's (max, sum) from every CTA's (m_k, s_k), pulled or pushed."""
        if PUSH:
            # the exchange that shipped: lab.gluon._softmax_cluster's
            pairs = gl.inline_asm_elementwise(tg._cluster_exchange_asm(CTAS),
                                              tg._pair_constraints(CTAS), [m_k, s_k],
                                              dtype=tg._floats(2 * CTAS), is_pure=False, pack=1)
        else:
            pairs = gl.inline_asm_elementwise(asm_text(CTAS), tg._pair_constraints(CTAS),
                                              [m_k, s_k], dtype=tg._floats(2 * CTAS),
                                              is_pure=False, pack=1)
        m_row = pairs[0]
        s_row = pairs[CTAS]
        for j in gl.static_range(1, CTAS):
            m_row, s_row = tg._combine_max_sum(m_row, s_row, pairs[j], pairs[CTAS + j])
        return m_row, s_row

    @gluon.jit
    def softmax_dsmem(out_ptr, in_ptr, out_row_stride, in_row_stride,
                      CTAS: gl.constexpr, PIECE: gl.constexpr, CHUNK: gl.constexpr,
                      VEC: gl.constexpr, EXCHANGE: gl.constexpr = True,
                      EXIT_WAIT: gl.constexpr = True, REGS: gl.constexpr = False,
                      PUSH: gl.constexpr = False):
        WARPS: gl.constexpr = gl.num_warps()
        CHUNKS: gl.constexpr = PIECE // CHUNK
        TILES: gl.constexpr = CHUNK // VEC
        tiles: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
        shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        buf = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [CHUNKS * TILES, VEC], shared)
        pid = gl.program_id(0)
        if PUSH:
            gl.inline_asm_elementwise(tg._cluster_init_asm(CTAS), "=r,r", [pid], dtype=gl.int32,
                                      is_pure=False, pack=1)
        row = (pid // CTAS).to(gl.int64)
        first = (pid % CTAS) * PIECE
        t = gl.arange(0, TILES, gl.SliceLayout(1, tiles))
        v = gl.arange(0, VEC, gl.SliceLayout(0, tiles))
        offs = t[:, None] * VEC + v[None, :]
        src = in_ptr + row * in_row_stride + first
        for c in gl.static_range(CHUNKS):
            tg._copy_to_shared(buf.slice(c * TILES, TILES), src + c * CHUNK + offs)
            tg.async_copy.commit_group()
        if REGS:  # as QuACK: the whole piece in registers once it has landed, exp(x) kept
            whole: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [WARPS, 1], [1, 0])
            tw = gl.arange(0, CHUNKS * TILES, gl.SliceLayout(1, whole))
            vw = gl.arange(0, VEC, gl.SliceLayout(0, whole))
            offs_w = tw[:, None] * VEC + vw[None, :]
            tg.async_copy.wait_group(0)
            tg._barrier()
            xw = buf.load(whole).to(gl.float32)
            m_k = gl.max(gl.max(xw, axis=1), axis=0)
            m_ref = gl.where(m_k == -float("inf"), 0.0, m_k)
            e = gl.exp2((xw - m_ref) * log2e)
            s_k = gl.sum(gl.sum(e, axis=1), axis=0)
            m_row, s_row = row_max_sum(m_k, s_k, CTAS, PUSH)
            scale = gl.exp2((m_ref - m_row) * log2e) / s_row
            gl.store(out_ptr + row * out_row_stride + first + offs_w,
                     (e * scale).to(out_ptr.dtype.element_ty))
        else:
            m = gl.full([TILES], -float("inf"), gl.float32, gl.SliceLayout(1, tiles))
            s = gl.zeros([TILES], gl.float32, gl.SliceLayout(1, tiles))
            for c in gl.static_range(CHUNKS):
                tg.async_copy.wait_group(CHUNKS - 1 - c)
                tg._barrier()
                x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
                m_c = gl.max(x, axis=1)
                m_ref = gl.where(m_c == -float("inf"), 0.0, m_c)
                s_c = gl.sum(gl.exp2((x - m_ref[:, None]) * log2e), axis=1)
                m, s = tg._combine_max_sum(m, s, m_c, s_c)
            m_k, s_k = gl.reduce((m, s), 0, tg._combine_max_sum)
            if EXCHANGE:
                m_row, s_row = row_max_sum(m_k, s_k, CTAS, PUSH)
            else:
                m_row = m_k
                s_row = s_k
            inv = 1.0 / s_row
            dst = out_ptr + row * out_row_stride + first
            for c in gl.static_range(CHUNKS):
                x = buf.slice(c * TILES, TILES).load(tiles).to(gl.float32)
                y = gl.exp2((x - m_row) * log2e) * inv
                gl.store(dst + c * CHUNK + offs, y.to(out_ptr.dtype.element_ty))
        # pulled: no CTA leaves while a peer may still read its pair (pushed pairs are the
        # receiver's own, and it waits for all of them)
        if EXIT_WAIT and not PUSH:
            gl.inline_asm_elementwise("barrier.cluster.wait.aligned; mov.u32 $0, $1;", "=r,r",
                                      [pid], dtype=gl.int32, is_pure=False, pack=1)

    return softmax_dsmem


_KERNEL = None


def clustered(out, x, ctas: int, piece: int, chunk: int, warps: int, **flags):
    """Launch one cluster of ctas CTAs per row (the compiled kernel's packed metadata carries
    the cluster size to the launcher); returns the compiled kernel."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = kernel()
    args = (out, x, out.stride(0), x.stride(0))
    constants = dict(CTAS=ctas, PIECE=piece, CHUNK=chunk, VEC=16 // x.element_size(),
                     num_warps=warps, **flags)
    compiled = _KERNEL.warmup(*args, grid=(x.shape[0],), **constants)
    warps_, _, shared = compiled.packed_metadata
    compiled.packed_metadata = (warps_, ctas, shared)
    _KERNEL[(x.shape[0],)](*args, **constants)
    return compiled


def measure(ceiling: float, configs) -> list[dict]:
    import torch

    import triton_kernels as tk
    from lab import production as fast

    found = []
    cases = {}
    for dname, width, *shape in configs:
        cases.setdefault((dname, width), []).append(shape)
    for (dname, width), shapes in cases.items():
        dtype = rowwise.torch_dtype(dname)
        case = rowwise.make_case(rowwise.KERNELS["softmax"],
                                 rowwise.GIB // (width * dtype.itemsize), width, dname)
        x = case["args"][0]
        out = torch.empty_like(x)
        # what triton_kernels.softmax launched before _softmax_cluster (runs before it shipped
        # called this row "plan (triton_kernels.softmax)")
        launches = [(NO_CLUSTERS, None, lambda o=out, a=x: tk._launch_softmax(
            o, a, fast._plan("softmax", a.shape[1], max_pieces=fast._max_pieces(a.device),
                             itemsize=a.element_size(), paired=fast._pairs_of_16_bits(a, o),
                             shared=fast._fits_shared_copies(a, o))))]
        for ctas, piece, chunk, warps, regs, push in shapes:
            if ctas * piece != width:
                continue
            launches.append((f"dsmem cluster of {ctas} x {piece}/{chunk}, {warps} warps"
                             + (", registers" if regs else "") + (", pushed" if push else ""),
                             (ctas, piece, chunk, warps),
                             lambda o=out, a=x, c=ctas, p=piece, ch=chunk, w=warps, r=regs,
                             u=push: clustered(o, a, c, p, ch, w, REGS=r, PUSH=u)))
        for name, shape, launch in launches:
            row = {"variant": name, "dtype": dname, "cols": width}
            try:
                out.fill_(float("nan"))
                compiled = launch()
                torch.cuda.synchronize()
                ok, err = rowwise.compare(out[case["picked"]], case["ref"], dname)
                row.update(correct=ok, max_abs_err=err)
                if shape is not None:
                    row.update(registers=compiled.n_regs, shared_bytes=compiled.metadata.shared)
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
    ap.add_argument("--configs", default=None,
                    metavar="DTYPE:COLS:CTAS:PIECE:CHUNK:WARPS[:regs][:push],...",
                    help="the configurations to time (default: CONFIGS)")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU of compute capability 9.0 or later", file=sys.stderr)
        return 2
    result = {"env": rowwise.environment(),
              "command": " ".join(["lab/probes/probe_dsmem.py", *(argv or sys.argv[1:])]),
              "copy_gbps": rowwise.copy_ceiling()}
    configs = CONFIGS if not args.configs else tuple(
        (item.split(":")[0], *(int(v) for v in item.split(":")[1:6]),
         "regs" in item.split(":")[6:], "push" in item.split(":")[6:])
        for item in args.configs.split(","))
    result["rows"] = measure(result["copy_gbps"], configs)
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\ncopy ceiling {result['copy_gbps']:.0f} GB/s")
    for r in result["rows"]:
        speed = f"{r['gbps']:6.0f} {r['frac']:6.3f}" if "gbps" in r else \
            r.get("error", f"wrong, largest error {r.get('max_abs_err', 0):.2g}")
        print(f"{r['variant']:<44} {r['dtype']:>5} {r['cols']:>7} {speed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
