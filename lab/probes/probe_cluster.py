"""A wide softmax row spread over the CTAs of a thread-block cluster, its reductions the compiler's.

    PYTHONPATH=. python3 lab/probes/probe_cluster.py --json /tmp/cluster.json   # Triton >= 3.8, GPU

lab.gluon._softmax_split_shared splits a wide row into programs that exchange their
partial maxima and sums through global memory, and that exchange is what bounds it
(lab/RESULTS.md, "Wide rows"). Here one program is a cluster of CTAS CTAs (Gluon's
``num_ctas``): a layout shards the row across them, each CTA holds its part in registers, and
the two reductions over the row become cluster barriers and loads from distributed shared
memory, which the compiler writes. No ticket, no spin: the CTAs of a cluster are resident
together by construction.

Each configuration runs the row as float32 or, in 16-bit, kept in its own dtype with the
exponential taken twice. Timed on an H200 with Triton 3.9 (lab/results/cluster_triton39.json,
RESULTS.md "Wide rows"): at best 0.73 of the copy ceiling in bfloat16 at 65536 columns and 0.50
at 2**18, well below the shared-memory split kernel, so the plan does not use it. Triton 3.6 and
3.7 refuse the reduction across CTAs, so on the H200 as installed it needs Triton 3.9 carried
there (the developers' guide says how).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

from learning.bench import rowwise

CASES = (("bf16", 65536), ("bf16", 131072), ("bf16", 262144), ("fp16", 65536),
         ("fp32", 65536))
# (CTAs in a cluster, warps per CTA): each thread holds BLOCK / (CTAS * 32 * warps) values
CONFIGS = tuple((ctas, warps) for ctas in (2, 4, 8) for warps in (4, 8, 16, 32))
MOST_VALUES_A_THREAD = 64  # float32 values a thread keeps in registers; more would spill
FEWEST_VALUES_A_THREAD = 8  # one 16-byte load of 16-bit values
# "float32": the row is converted once and kept as float32 across both reductions. "own dtype":
# the row stays in its own dtype (two 16-bit values a register) and exp is computed twice, the
# second time with 1/sum folded into the exponent so that the two cannot be merged.
VARIANTS = ("float32", "own dtype")


def kernel():
    """The cluster kernel, defined on first use (Gluon from Triton 3.8 on, compiled only)."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.constexpr_function
    def shard(ctas):
        """The layout's CTA bases: CTA c holds the c-th contiguous part of the row."""
        return [[1 << bit] for bit in range(max(ctas, 1).bit_length() - 1)]

    @gluon.jit
    def softmax_cluster(out_ptr, in_ptr, out_row_stride, in_row_stride, n_cols,
                        BLOCK: gl.constexpr, VEC: gl.constexpr, OWN_DTYPE: gl.constexpr = False):
        layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [gl.num_warps()], [0],
                                                shard(gl.num_ctas()))
        row = gl.program_id(0).to(gl.int64)
        cols = gl.arange(0, BLOCK, layout)
        mask = cols < n_cols
        x = gl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        if OWN_DTYPE:
            m = gl.max(x, axis=0).to(gl.float32)  # exact in any dtype
            t = x.to(gl.float32) * 1.4426950408889634 - m * 1.4426950408889634
            log2_sum = gl.log2(gl.sum(gl.exp2(t), axis=0))
            y = gl.exp2(x.to(gl.float32) * 1.4426950408889634 - (m * 1.4426950408889634
                                                                  + log2_sum))
        else:
            x = x.to(gl.float32)
            m = gl.max(x, axis=0)  # across the cluster: distributed shared memory
            e = gl.exp2((x - m) * 1.4426950408889634)
            y = e * (1.0 / gl.sum(e, axis=0))
        gl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty),
                 mask=mask)

    return softmax_cluster


def measure(ceiling: float, cases, configs) -> list[dict]:
    import torch
    import triton

    softmax_cluster = kernel()
    found = []
    for dname, width in cases:
        dtype = rowwise.torch_dtype(dname)
        case = rowwise.make_case(rowwise.KERNELS["softmax"],
                                 rowwise.GIB // (width * dtype.itemsize), width, dname)
        x = case["args"][0]
        out = torch.empty_like(x)
        block = triton.next_power_of_2(width)
        for (ctas, warps), variant in itertools.product(configs, VARIANTS):
            per_thread = block // (ctas * 32 * warps)
            if not FEWEST_VALUES_A_THREAD <= per_thread <= MOST_VALUES_A_THREAD or (
                    variant == "own dtype" and dname == "fp32"):
                continue
            row = {"variant": f"cluster of {ctas}, {warps} warps, {variant}", "dtype": dname,
                   "cols": width, "ctas": ctas, "warps": warps, "values_a_thread": per_thread}

            def launch(o=out, a=x, c=ctas, w=warps, b=block, own=variant == "own dtype"):
                return softmax_cluster[(a.shape[0],)](
                    o, a, o.stride(0), a.stride(0), a.shape[1], BLOCK=b,
                    VEC=16 // a.element_size(), OWN_DTYPE=own, num_warps=w, num_ctas=c)
            try:
                out.fill_(float("nan"))
                compiled = launch()
                torch.cuda.synchronize()
                ok, err = rowwise.compare(out[case["picked"]], case["ref"], dname)
                row.update(correct=ok, max_abs_err=err, registers=compiled.n_regs)
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
    args = ap.parse_args(argv)
    import torch
    import triton

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: Gluon kernels have no interpreter", file=sys.stderr)
        return 2
    version = tuple(int(p) for p in triton.__version__.split(".")[:2])
    if version < (3, 8):
        print(f"needs Triton 3.8 or later for reductions across a cluster; this is "
              f"{triton.__version__}", file=sys.stderr)
        return 2
    result = {"env": rowwise.environment(),
              "command": " ".join(["lab/probes/probe_cluster.py", *(argv or sys.argv[1:])]),
              "copy_gbps": rowwise.copy_ceiling()}
    result["rows"] = measure(result["copy_gbps"], CASES, CONFIGS)
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    for r in result["rows"]:
        speed = f"{r['gbps']:6.0f} {r['frac']:6.3f}" if "gbps" in r else r.get("error", "wrong")
        print(f"{r['variant']:<40} {r['dtype']:>5} {r['cols']:>7} {speed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
