"""What each off-tile remedy of the reference matmul buys, in the GPU's own time.

    PYTHONPATH=. python lab/probes/matmul_edges_probe.py --json lab/results/matmul_edges.json

Every variant of a product runs the same tiles (``WIDE`` for the large products, ``SMALL``
for 1000 cubed: rows of the reference's table), so that only the remedy differs. Device time
as ``python -m learning.bench matmul`` measures it (``learning.bench.matmul.device_us``: a CUDA
graph of back-to-back calls over inputs too large together for the L2 cache), TFLOP/s from
it, medians of --rounds rounds (3) with the range. The remedies:

- the K edge: a K of 4064 (63.5 steps of 64) masked on every step (the reference), against
  the same tiles with the whole steps unmasked and the last one peeled off the loop and masked
  alone (``_peeled``, the reference before 2026-12-05); K = 4096 beside them for scale;
- A's K mask by runs of 16 bytes (``_in_k``) at 1000 cubed, against the mask that ends at K
  itself (1000, no multiple of 16 that Triton can see);
- alignment promises: rows of 1000 and of 4104 elements (multiples of 8, not of 16, so Triton
  cannot see that they start on 16-byte boundaries) with and without ``ALIGNED``;
- copies into aligned rows: 4097 cubed with and without the copies of A and B (``_pad_rows``);
- tensor descriptors (``_matmul_tma``, the same tiles), where the hardware fills every edge
  with zeros: beside the K of 4064, 4096 and the copies of 4097.

torch.matmul is timed beside each product.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import torch
import triton
import triton.language as tl

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

WIDE = rm.TileConfig(128, 256, 64, 8, 8, 3)
SMALL = rm.TileConfig(64, 128, 64, 8, 4, 4)


@triton.jit
def _peeled(c_ptr, a_ptr, b_ptr, stride_cm, stride_cn, stride_am, stride_ak, stride_bk,
            stride_bn, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """The reference's kernel as it was before 2026-12-05: the whole steps with no mask, then
    the last, cut step peeled off the loop and masked alone."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    height = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % height
    pid_n = (pid % per_group) // height
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    steps = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + steps[None, :] * stride_ak
    b_ptrs = b_ptr + steps[:, None] * stride_bk + (cols % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    last = (K // BLOCK_K) * BLOCK_K + steps
    a = tl.load(a_ptrs, mask=last[None, :] < K, other=0.0)
    b = tl.load(b_ptrs, mask=last[:, None] < K, other=0.0)
    acc = tl.dot(a, b, acc)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def peeled(config: rm.TileConfig):
    def run(a, b):
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), dtype=a.dtype, device=a.device)
        grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
        _peeled[grid](c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1), b.stride(0),
                      b.stride(1), m, n, k, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                      BLOCK_K=config.block_k, GROUP_M=config.group_m,
                      num_warps=config.num_warps, num_stages=config.num_stages)
        return c
    return run


def plan(config, **switches):
    """The reference's plan for this config, built once per layout, with copies or alignment
    promises switched off where asked."""
    plans = {}

    def run(a, b):
        key = rm._key(a, b)
        if key not in plans:
            plans[key] = rm._Plan(a, b, config, **switches)
        return plans[key](a, b)
    return run


def descriptors(config):
    return plan(dataclasses.replace(config, tma=True))


# product -> (tiles, [(variant, how to build it from the tiles)])
PRODUCTS = {
    (4096, 4096, 4064): (WIDE, [("K mask on every step (reference)", plan),
                                ("last K step peeled off the loop and masked", peeled),
                                ("tensor descriptors", descriptors)]),
    (4096, 4096, 4096): (WIDE, [("whole steps only (reference)", plan),
                                ("tensor descriptors", descriptors)]),
    (1000, 1000, 1000): (SMALL, [("alignment promised (reference)",
                                  lambda c: plan(c, copies=False)),
                                 ("K masked at K itself, not by runs of 16 bytes",
                                  lambda c: plan(c, copies=False, k_runs=False)),
                                 ("no promise", lambda c: plan(c, copies=False, aligned=False))]),
    (4104, 4104, 4104): (WIDE, [("alignment promised (reference)",
                                 lambda c: plan(c, copies=False)),
                                ("no promise", lambda c: plan(c, copies=False, aligned=False))]),
    (4097, 4097, 4097): (WIDE, [("A and B copied into aligned rows (reference)", plan),
                                ("no copies", lambda c: plan(c, copies=False)),
                                ("copies, then tensor descriptors", descriptors)]),
}


def write(path: str, env: dict, dtype: str, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"env": env, "dtype": dtype, "timing": bench.TIMING["device"],
                   "command": "python lab/probes/matmul_edges_probe.py", "rows": rows},
                  out, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    env = environment()
    rows = []
    for (m, n, k), (config, variants) in PRODUCTS.items():
        case = bench.make_case(m, n, k, options.dtype)
        a, b = case["args"]
        inputs = bench.input_copies(a, b, env.get("l2_bytes"))
        named = [(name, build(config)) for name, build in variants] + \
            [("torch.matmul", torch.matmul)]
        for name, run in named:
            error = bench.relative_error(run(a, b)[case["picked"]], case["ref"])
            assert error <= bench.NORM_TOLERANCES[options.dtype], (m, n, k, name, error)
            for round_ in range(options.rounds):
                us = bench.device_us(run, inputs, quick=False)
                rows.append({"M": m, "N": n, "K": k, "variant": name, "config": config.label,
                             "round": round_, "device_us": us,
                             "tflops": bench.tflops(m, n, k, us / 1e3)})
                print(f"{m}x{n}x{k} {name}: {us:.1f} us", flush=True)
        torch.cuda.empty_cache()
        if options.json:  # what is measured so far, should the run be cut short
            write(options.json, env, options.dtype, rows)
    print("| M x N x K | variant | device us | TFLOP/s | lowest to highest TFLOP/s | tiles |")
    print("|---:|---:|---:|---:|---:|---:|")
    grouped: dict = {}
    for r in rows:
        grouped.setdefault((r["M"], r["N"], r["K"], r["variant"], r["config"]), []).append(r)
    for (m, n, k, name, config), runs in grouped.items():
        us = bench._median([r["device_us"] for r in runs])
        speeds = [r["tflops"] for r in runs]
        print(f"| {m} x {n} x {k} | {name} | {us:.1f} | {bench._median(speeds):.0f} | "
              f"{bench._spread(speeds, 0)} | {config} |")


if __name__ == "__main__":
    main()
