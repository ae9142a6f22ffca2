"""A wide softmax row per thread-block cluster, its pieces in shared memory, its exchange our own.

    PYTHONPATH=. python3 lab/probes/probe_cluster_shared.py --json /tmp/cs.json   # GPU, Triton 3.9

lab.gluon._softmax_split_shared gives each piece of a row its own program, and each
piece waits about as long for its row's other pieces as it takes to load its own
(lab/probes/split_timeline.py): a ticket, a publish, an atomic arrival and a spin, each a round trip
to L2 under full load. lab/probes/probe_cluster.py let the compiler reduce over a cluster, and its
cluster reductions were slower still. Here the row is one cluster of CTAS CTAs (Gluon's
``num_ctas``), the CTAs resident together by construction, so no ticket is needed:

- a layout shards a (CTAS, TILES, VEC) view of each chunk over the CTAs, so CTA c copies piece c
  of the row into its own shared memory (16-byte ``cp.async``) and folds it as in the shipped
  kernel;
- each CTA stores its piece's (max, sum) to a scratch in global memory, and one cluster barrier
  (``barrier.cluster`` arrive with release, wait with acquire, by inline assembly) makes them
  visible to the cluster: the only wait;
- every CTA loads the row's partials, combines them and writes its piece.

Triton 3.6 refuses asynchronous copies for a layout sharded over CTAs ("non-trivial block
dimension"), so this runs with Triton 3.9 (carried to the GPU machine as the developers' guide
says). Rows whose width is CTAS * PIECE exactly, 16-byte aligned; the shipped plan is timed
beside it.
"""

from __future__ import annotations

import argparse
import json
import sys

from learning.bench import rowwise

# (dtype, columns, CTAs in a cluster, columns per CTA, columns per chunk, warps)
CONFIGS = (
    ("bf16", 65536, 4, 16384, 2048, 4), ("bf16", 65536, 2, 32768, 4096, 8),
    ("bf16", 65536, 8, 8192, 2048, 4),
    ("bf16", 131072, 8, 16384, 2048, 4), ("bf16", 131072, 4, 32768, 4096, 8),
    ("bf16", 262144, 8, 32768, 4096, 8),
    ("fp16", 65536, 4, 16384, 2048, 4),
    ("fp32", 65536, 4, 16384, 2048, 4), ("fp32", 65536, 8, 8192, 2048, 4),
)


def kernel():
    """The cluster kernel, defined on first use (Gluon; compiled with Triton 3.9, refused by
    3.6)."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    from lab import gluon as tg

    log2e = gl.constexpr(1.4426950408889634)

    @gluon.constexpr_function
    def tile_layout(vec, warps, ctas):
        """(CTAS, TILES, VEC): CTA c holds row c, each thread whole 16-byte tiles."""
        return gl.BlockedLayout([1, 1, vec], [1, 32, 1], [1, warps, 1], [2, 1, 0],
                                [[1 << bit, 0, 0] for bit in range(ctas.bit_length() - 1)])

    @gluon.constexpr_function
    def shared_layout(ctas):
        """(CTAS, rows, VEC) in shared memory: CTA c holds row c."""
        return gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0],
                                       [[1 << bit, 0, 0] for bit in range(ctas.bit_length() - 1)])

    @gluon.constexpr_function
    def every_cta(warps, ctas):
        """A 1-D layout that every CTA holds whole."""
        return gl.BlockedLayout([1], [32], [warps], [0],
                                [[0] for bit in range(ctas.bit_length() - 1)])

    @gluon.jit
    def cluster_barrier(dummy):
        """Every thread of every CTA of the cluster arrives, memory released, and waits."""
        return gl.inline_asm_elementwise(
            "barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned; "
            "mov.u32 $0, 0;", "=r,r", [dummy], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def softmax_cluster_shared(out_ptr, in_ptr, out_row_stride, in_row_stride, part_ptr,
                               PIECE: gl.constexpr, CHUNK: gl.constexpr, VEC: gl.constexpr):
        WARPS: gl.constexpr = gl.num_warps()
        CTAS: gl.constexpr = gl.num_ctas()
        CHUNKS: gl.constexpr = PIECE // CHUNK
        TILES: gl.constexpr = CHUNK // VEC
        tiles: gl.constexpr = tile_layout(VEC, WARPS, CTAS)
        buf = gl.allocate_shared_memory(in_ptr.dtype.element_ty, [CTAS, CHUNKS * TILES, VEC],
                                        shared_layout(CTAS))
        row = gl.program_id(0).to(gl.int64)  # the cluster's
        k = gl.arange(0, CTAS, gl.SliceLayout(1, gl.SliceLayout(2, tiles)))
        t = gl.arange(0, TILES, gl.SliceLayout(0, gl.SliceLayout(2, tiles)))
        v = gl.arange(0, VEC, gl.SliceLayout(0, gl.SliceLayout(1, tiles)))
        offs = k[:, None, None] * PIECE + t[None, :, None] * VEC + v[None, None, :]
        src = in_ptr + row * in_row_stride
        for c in gl.static_range(CHUNKS):
            tg._copy_to_shared(buf.slice(c * TILES, TILES, dim=1), src + c * CHUNK + offs)
            tg.async_copy.commit_group()
        m = gl.full([CTAS, TILES], -float("inf"), gl.float32, gl.SliceLayout(2, tiles))
        s = gl.zeros([CTAS, TILES], gl.float32, gl.SliceLayout(2, tiles))
        for c in gl.static_range(CHUNKS):
            tg.async_copy.wait_group(CHUNKS - 1 - c)
            tg._barrier()
            x = buf.slice(c * TILES, TILES, dim=1).load(tiles).to(gl.float32)
            m_c = gl.max(x, axis=2)
            m_ref = gl.where(m_c == -float("inf"), 0.0, m_c)
            s_c = gl.sum(gl.exp2((x - m_ref[:, :, None]) * log2e), axis=2)
            m, s = tg._combine_max_sum(m, s, m_c, s_c)
        m_k, s_k = gl.reduce((m, s), 1, tg._combine_max_sum)  # one pair a CTA, within it
        part = part_ptr + (row * CTAS + k) * 2
        gl.store(part, m_k)
        gl.store(part + 1, s_k)
        cluster_barrier(row.to(gl.int32))
        j = gl.arange(0, CTAS, every_cta(WARPS, CTAS))
        parts = part_ptr + (row * CTAS + j) * 2
        m_all = gl.load(parts, cache_modifier=".cg")
        s_all = gl.load(parts + 1, cache_modifier=".cg")
        m_row = gl.max(m_all, axis=0)
        inv = 1.0 / gl.sum(s_all * gl.exp2((m_all - m_row) * log2e), axis=0)
        dst = out_ptr + row * out_row_stride
        for c in gl.static_range(CHUNKS):
            x = buf.slice(c * TILES, TILES, dim=1).load(tiles).to(gl.float32)
            y = gl.exp2((x - m_row) * log2e) * inv
            gl.store(dst + c * CHUNK + offs, y.to(out_ptr.dtype.element_ty))

    return softmax_cluster_shared


def measure(ceiling: float, configs) -> list[dict]:
    import torch

    import triton_kernels as tk
    from lab import production as fast

    softmax_cluster_shared = kernel()
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
        part = torch.empty(x.shape[0] * 8 * 2, dtype=torch.float32, device=x.device)
        launches = [("plan (triton_kernels.softmax)", None, lambda o=out, a=x: tk._launch_softmax(
            o, a, fast._plan("softmax", a.shape[1], max_pieces=fast._max_pieces(a.device),
                             itemsize=a.element_size(), shared=fast._fits_shared_copies(a, o))))]
        for ctas, piece, chunk, warps in shapes:
            def launch(o=out, a=x, c=ctas, p=piece, ch=chunk, w=warps, scratch=part):
                return softmax_cluster_shared[(a.shape[0],)](
                    o, a, o.stride(0), a.stride(0), scratch, PIECE=p, CHUNK=ch,
                    VEC=16 // a.element_size(), num_warps=w, num_ctas=c)
            launches.append((f"cluster of {ctas} x {piece}/{chunk}, {warps} warps",
                             (ctas, piece, chunk, warps), launch))
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
        del x, out, case, part
        torch.cuda.empty_cache()
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: Gluon kernels have no interpreter", file=sys.stderr)
        return 2
    result = {"env": rowwise.environment(),
              "command": " ".join(["lab/probes/probe_cluster_shared.py", *(argv or sys.argv[1:])]),
              "copy_gbps": rowwise.copy_ceiling()}
    result["rows"] = measure(result["copy_gbps"], CONFIGS)
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\ncopy ceiling {result['copy_gbps']:.0f} GB/s")
    for r in result["rows"]:
        speed = f"{r['gbps']:6.0f} {r['frac']:6.3f}" if "gbps" in r else \
            r.get("error", f"wrong, largest error {r.get('max_abs_err', 0):.2g}")
        print(f"{r['variant']:<40} {r['dtype']:>5} {r['cols']:>7} {speed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
