"""Every tile row worth trying on the products where the reference falls short of cuBLAS, each
timed alone: the GPU's time per call and the host's, so that the tables keep the rows that win.

    PYTHONPATH=. python lab/probes/matmul_rows_probe.py --json lab/results/matmul_rows.json

For each product: the rows of the reference's own table for it, then rows it does not hold
(other tiles, stages, warps and K splits, with and without tensor descriptors). Each row runs as
the reference would run it (``reference_matmul._Plan``, the compiled kernel launched directly);
device time as ``python -m learning.bench matmul`` measures it (a CUDA graph of back-to-back
calls over inputs too large together for L2), host time per call back to back, both medians of
--rounds rounds; torch.matmul beside them. A row that fails to compile or run says why.
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

T = rm.TileConfig
MORE_SQUARE = (
    T(64, 64, 64, 8, 4, 4), T(64, 128, 64, 8, 4, 3), T(64, 128, 128, 8, 4, 3),
    T(64, 128, 128, 8, 4, 3, tma=True), T(128, 128, 64, 8, 8, 4, tma=True),
    T(256, 128, 64, 8, 8, 3, tma=True),
    # K split in the same launch (_finish_tile): larger tiles, every multiprocessor busy
    T(128, 128, 64, 8, 4, 4, split_k=2), T(128, 128, 64, 8, 8, 3, split_k=2),
    T(128, 256, 64, 8, 8, 3, split_k=4), T(64, 128, 64, 8, 4, 4, split_k=2),
    T(128, 128, 64, 8, 4, 4, split_k=2, tma=True), T(128, 128, 64, 8, 8, 4, split_k=2, tma=True),
    T(128, 128, 128, 8, 8, 3, split_k=2, tma=True), T(128, 256, 64, 8, 8, 3, split_k=2, tma=True),
    T(128, 256, 64, 8, 8, 3, split_k=4, tma=True), T(64, 128, 64, 8, 4, 4, split_k=2, tma=True),
    T(128, 64, 64, 8, 4, 4, split_k=2, tma=True), T(128, 128, 64, 8, 4, 4, split_k=4, tma=True),
    # one program per multiprocessor, tile after tile (_matmul_persistent)
    T(128, 256, 64, 8, 8, 3, tma=True, persistent=True),
    T(128, 256, 64, 8, 8, 4, tma=True, persistent=True),
    T(256, 128, 64, 8, 8, 3, tma=True, persistent=True),
    T(128, 128, 64, 8, 4, 4, tma=True, persistent=True),
    T(128, 128, 64, 8, 8, 4, tma=True, persistent=True),
    T(64, 128, 64, 8, 4, 4, tma=True, persistent=True),
    # around the small products' best rows: deeper, wider in K, two warpgroups, other groups
    T(64, 128, 128, 8, 4, 4, tma=True), T(64, 64, 128, 8, 4, 4, tma=True),
    T(64, 128, 128, 8, 8, 3, tma=True), T(64, 128, 128, 4, 4, 3, tma=True),
    T(64, 128, 128, 16, 4, 3, tma=True), T(64, 128, 128, 8, 4, 3, tma=True, persistent=True),
    T(64, 64, 128, 8, 4, 4, tma=True, persistent=True), T(64, 128, 64, 8, 4, 6, tma=True),
    # the persistent kernel with pointers (a cheaper launch), and pointer rows as deep as the
    # descriptor rows that won at 1024 cubed
    T(128, 256, 64, 8, 8, 3, persistent=True), T(128, 256, 64, 8, 8, 4, persistent=True),
    T(128, 128, 64, 8, 4, 4, persistent=True), T(256, 128, 64, 8, 8, 3, persistent=True),
    T(64, 128, 128, 8, 4, 4), T(64, 128, 64, 8, 4, 6),
)
MORE_SKINNY = (
    T(16, 32, 128, 1, 2, 8), T(16, 32, 256, 1, 4, 4, split_k=2),
    T(16, 64, 256, 1, 4, 4, split_k=4), T(16, 64, 512, 1, 4, 3, split_k=4),
    T(16, 128, 256, 1, 4, 3, split_k=8), T(16, 128, 128, 1, 4, 6, split_k=8),
    T(16, 256, 128, 1, 4, 4, split_k=8), T(16, 64, 128, 1, 4, 6, split_k=4),
    T(16, 32, 256, 1, 4, 6, tma=True), T(16, 64, 256, 1, 4, 4, split_k=4, tma=True),
    T(16, 128, 128, 1, 4, 4, split_k=8, tma=True), T(16, 128, 256, 1, 4, 3, split_k=4, tma=True),
    T(16, 256, 128, 1, 4, 4, split_k=8, tma=True), T(16, 64, 512, 1, 4, 3, split_k=4, tma=True),
    T(16, 128, 128, 1, 4, 6, split_k=8, tma=True), T(16, 64, 128, 1, 4, 8, split_k=4, tma=True),
    # around the decoding step's best row: deeper, longer steps, narrower strips
    T(16, 32, 256, 1, 4, 8, tma=True), T(16, 32, 128, 1, 4, 10, tma=True),
    T(16, 16, 512, 1, 4, 4, tma=True), T(16, 16, 256, 1, 2, 8, tma=True),
    T(16, 32, 512, 1, 4, 4, tma=True), T(16, 32, 256, 1, 2, 6, tma=True),
)
PRODUCTS = ((1024, 1024, 1024), (1000, 1000, 1000), (4096, 4096, 512), (8, 4096, 4096))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--products", help="e.g. 1024x1024x1024,8x4096x4096 (default: all)")
    parser.add_argument("--skip-table", action="store_true",
                        help="only the rows the tables do not hold, and torch.matmul")
    parser.add_argument("--tail", type=int, default=0,
                        help="only the last TAIL rows of each extra list (the rows added last)")
    options = parser.parse_args()
    env = environment()
    rows = []
    products = PRODUCTS if not options.products else \
        [tuple(int(x) for x in p.split("x")) for p in options.products.split(",")]
    for m, n, k in products:
        case = bench.make_case(m, n, k, options.dtype)
        a, b = case["args"]
        inputs = bench.input_copies(a, b, env.get("l2_bytes"))
        skinny = m <= rm.SKINNY_M
        table = rm.SKINNY_CONFIGS if skinny else rm.CONFIGS
        extra = [row for row in (MORE_SKINNY if skinny else MORE_SQUARE)[-options.tail:]
                 if row not in table]  # a row the table holds too is timed once, as (table)
        runs = [(row.label + (" (table)" if row in table else ""), row)
                for row in (*(() if options.skip_table else table), *extra)]
        runs.append(("torch.matmul", None))
        for name, row in runs:
            try:
                run = torch.matmul if row is None else rm._Plan(a, b, row)
                error = bench.relative_error(run(a, b)[case["picked"]], case["ref"])
                assert error <= bench.NORM_TOLERANCES[options.dtype], f"error {error:.2e}"
                for round_ in range(options.rounds):
                    rows.append({"M": m, "N": n, "K": k, "row": name, "round": round_,
                                 "device_us": bench.device_us(run, inputs, quick=False),
                                 "host_us": bench.call_us(run, a, b, quick=False)})
            except Exception as error:  # noqa: BLE001 (the row is reported, not fatal)
                rows.append({"M": m, "N": n, "K": k, "row": name,
                             "note": f"{type(error).__name__}: {str(error)[:160]}"})
                print(f"{m}x{n}x{k} {name}: {rows[-1]['note']}", flush=True)
        torch.cuda.empty_cache()
        if options.json:
            with open(options.json, "w", encoding="utf-8") as out:
                json.dump({"env": env, "dtype": options.dtype, "timing": bench.TIMING,
                           "command": "python lab/probes/matmul_rows_probe.py", "rows": rows},
                          out, indent=1)
    grouped: dict = {}
    for r in rows:
        if "device_us" in r:
            grouped.setdefault((r["M"], r["N"], r["K"]), {}).setdefault(r["row"], []).append(r)
    for (m, n, k), by_row in grouped.items():
        torch_us = bench._median([r["device_us"] for r in by_row.get("torch.matmul", [])])
        print(f"\n{m} x {n} x {k} ({options.dtype}): device us, torch over row, host us")
        ranked = sorted(by_row.items(), key=lambda kv: bench._median(
            [r["device_us"] for r in kv[1]]))
        for name, runs in ranked[:12]:
            device = bench._median([r["device_us"] for r in runs])
            host = bench._median([r["host_us"] for r in runs])
            print(f"  {device:8.1f}  {torch_us / device:5.2f}  {host:6.1f}  {name}")


if __name__ == "__main__":
    main()
