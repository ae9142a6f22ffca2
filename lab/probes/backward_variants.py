"""Ways to write the softmax backward pass for a whole 16-bit row of 32768 columns (GPU only).

    PYTHONPATH=. python3 lab/probes/backward_variants.py --json /tmp/backward_variants.json

One program per row holds y and dy (two rows) from their loads to the store of
dx = y * (dy - sum(y * dy)). At 32768 columns and 16 warps that is 64 values of each a thread,
128 float32 registers, the most a thread of 16 warps can have, and the compilers spill: a few
bytes with Triton 3.6, more with 3.9, whose 16-bit rows ran at 0.96 of the copy ceiling
against 1.02 (lab/results/backward_warps*.txt). Each variant here changes what a thread keeps
across the reduction:

- reference: triton_kernels._softmax_backward as it is;
- products: p = y * dy is kept with y, and dx = p - y * dot;
- reload: y and dy are loaded again after the reduction (from L2, where the first load left
  them), so that only dot is kept;
- reload y: p is kept and only y is loaded again.

Each is checked against float32 torch and timed on 1 GiB inputs beside the copy ceiling, with
its registers and spilled bytes.
"""

from __future__ import annotations

import argparse
import json
import sys

import triton
import triton.language as tl

from learning.bench import rowwise

CASES = (("bf16", 32768), ("fp16", 32768), ("bf16", 16384))
WARPS = (8, 16, 32)
VARIANTS = ("reference", "products", "reload", "reload y")


@triton.jit
def backward_variant(dx_ptr, y_ptr, dy_ptr, dx_row_stride, y_row_stride, dy_row_stride, n_cols,
                     BLOCK: tl.constexpr, KEEP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    y_at = y_ptr + row * y_row_stride + offsets
    dy_at = dy_ptr + row * dy_row_stride + offsets
    y = tl.load(y_at, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    dy = tl.load(dy_at, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    p = y * dy
    dot = tl.sum(p, axis=0)
    if KEEP == "products":
        dx = p - y * dot
    elif KEEP == "reload":
        y = tl.load(y_at, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dy = tl.load(dy_at, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dx = y * (dy - dot)
    else:  # "reload y"
        y = tl.load(y_at, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dx = p - y * dot
    tl.store(dx_ptr + row * dx_row_stride + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    import torch

    import lab.production  # noqa: F401,E402 (importing it installs the production layer)
    import triton_kernels as tk

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    result = {"env": rowwise.environment(),
              "command": " ".join(["lab/probes/backward_variants.py", *(argv or sys.argv[1:])]),
              "copy_gbps": rowwise.copy_ceiling(), "rows": []}
    for dname, cols in CASES:
        dtype = rowwise.torch_dtype(dname)
        rows = rowwise.GIB // (cols * dtype.itemsize)
        y = torch.softmax(torch.randn(rows, cols, device="cuda"), -1).to(dtype)
        dy = torch.randn(rows, cols, device="cuda").to(dtype)
        want = y.float() * (dy.float() - (y.float() * dy.float()).sum(-1, keepdim=True))
        dx = torch.empty_like(y)
        for variant in VARIANTS:
            for warps in WARPS:
                kernel = tk._softmax_backward if variant == "reference" else backward_variant
                extra = {} if variant == "reference" else {"KEEP": variant}

                def launch(k=kernel, e=extra, w=warps, tensors=(dx, y, dy), n=cols):
                    strides = [t.stride(0) for t in tensors]
                    return k[(tensors[1].shape[0],)](*tensors, *strides, n, BLOCK=n,
                                                     num_warps=w, **e)
                dx.fill_(float("nan"))
                compiled = launch()
                torch.cuda.synchronize()
                err = (dx.float() - want).abs().max().item()
                ms = rowwise.median_ms(launch)
                row = {"dtype": dname, "cols": cols, "variant": variant, "warps": warps,
                       "max_abs_err": err, "registers": compiled.n_regs,
                       "spills": compiled.n_spills,
                       "gbps": rowwise.gbps(3 * y.numel() * y.element_size(), ms)}
                row["frac"] = row["gbps"] / result["copy_gbps"]
                print(json.dumps(row), flush=True)
                result["rows"].append(row)
        del y, dy, want, dx
        torch.cuda.empty_cache()
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\n{'dtype':>5} {'cols':>6} {'variant':<10} {'warps':>5} {'of copy':>7} "
          f"{'regs':>4} {'spill':>5} {'error':>7}")
    for r in result["rows"]:
        print(f"{r['dtype']:>5} {r['cols']:>6} {r['variant']:<10} {r['warps']:>5} "
              f"{r['frac']:7.3f} {r['registers']:>4} {r['spills']:>5} {r['max_abs_err']:7.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
