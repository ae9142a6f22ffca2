"""Do clusters of two CTAs close 1000 cubed's gap to cuBLAS? cuBLAS's kernels at 1000 and 1024
cubed run tiles of 64 x 128 in clusters of two (the ``2x1`` in their names, the kernels table
of lesson 12). Triton launches a program as a cluster where ``num_ctas`` > 1 (Hopper and
later) and shares the program's tile out among the cluster's CTAs; whether it then fetches the
operand tile both CTAs need once for both (multicast) is the compiler's choice, not the
course's, and this probe measures what it gives.

    PYTHONPATH=. python lab/probes/matmul_cluster_probe.py --json lab/results/matmul_cluster.json

For 1000 and 1024 cubed in each dtype, each timed as ``python -m learning.bench matmul`` times
a product (a CUDA graph of back-to-back calls over copies too large together for L2, median
of rounds): torch.matmul, the reference's chosen row, the table's fastest small rows, and
rows whose tile is twice theirs launched as clusters of two (so that each CTA holds one of
the small tiles) or of four. Every row's product is checked against float64 first; a row that
fails to compile or is wrong is reported, not timed.
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

T = rm.TileConfig
ROWS = (
    T(64, 128, 128, 8, 4, 4, tma=True), T(64, 128, 64, 8, 4, 6, tma=True),
    T(128, 128, 64, 8, 4, 4, tma=True),
    T(128, 128, 64, 8, 4, 4, tma=True, cluster=2), T(128, 128, 128, 8, 4, 4, tma=True, cluster=2),
    T(128, 128, 64, 8, 4, 6, tma=True, cluster=2), T(128, 128, 64, 8, 8, 4, tma=True, cluster=2),
    T(128, 256, 64, 8, 8, 3, tma=True, cluster=2), T(256, 128, 64, 8, 8, 3, tma=True, cluster=2),
    T(256, 128, 64, 8, 4, 4, tma=True, cluster=4), T(128, 256, 64, 8, 4, 4, tma=True, cluster=4),
    T(128, 128, 64, 8, 4, 4, cluster=2), T(64, 128, 64, 8, 4, 6),
)
SIZES = (1000, 1024)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    env = environment()
    rows, chosen = [], {}
    for size in SIZES:
        for dname in ("fp16", "bf16"):
            case = bench.make_case(size, size, size, dname)
            a, b = case["args"]
            inputs = bench.input_copies(a, b, env.get("l2_bytes"))
            rm.forget_choices()
            runs = [("torch.matmul", torch.matmul), ("reference (chosen)", rm.matmul)]
            for row in ROWS:
                try:
                    runs.append((row.label, rm._Plan(a, b, row)))
                except Exception as error:  # noqa: BLE001 (reported, not fatal)
                    rows.append({"size": size, "dtype": dname, "run": row.label,
                                 "note": f"{type(error).__name__}: {str(error)[:200]}"})
            for name, run in runs:
                try:
                    x, y = inputs[0]
                    error = bench.relative_error(run(x, y)[case["picked"]], case["ref"])
                    assert error <= bench.NORM_TOLERANCES[dname], f"error {error:.2e}"
                    for round_ in range(options.rounds):
                        rows.append({"size": size, "dtype": dname, "run": name, "round": round_,
                                     "device_us": bench.device_us(run, inputs, quick=False),
                                     "host_us": bench.call_us(run, x, y, quick=False)})
                except Exception as error:  # noqa: BLE001 (the row is reported, not fatal)
                    rows.append({"size": size, "dtype": dname, "run": name,
                                 "note": f"{type(error).__name__}: {str(error)[:200]}"})
                    print(f"{size} {dname} {name}: {rows[-1]['note']}", flush=True)
            chosen[f"{size} {dname}"] = getattr(rm.chosen_config(a, b), "label", "none")
            torch.cuda.empty_cache()
            if options.json:
                with open(options.json, "w", encoding="utf-8") as out:
                    json.dump({"env": env, "timing": bench.TIMING, "sizes": SIZES,
                               "command": "python lab/probes/matmul_cluster_probe.py",
                               "chosen": chosen,
                               "rows": rows}, out, indent=1)
    for size in SIZES:
        for dname in ("fp16", "bf16"):
            by_run: dict = {}
            for r in rows:
                if r["size"] == size and r["dtype"] == dname and "device_us" in r:
                    by_run.setdefault(r["run"], []).append(r)
            torch_us = bench._median([r["device_us"] for r in by_run.get("torch.matmul", [])])
            print(f"\n{size} cubed ({dname}): device us (range), torch over it, host us")
            for name, runs in sorted(by_run.items(),
                                     key=lambda kv: bench._median([r["device_us"]
                                                                   for r in kv[1]])):
                device = [r["device_us"] for r in runs]
                host = bench._median([r["host_us"] for r in runs])
                print(f"  {bench._median(device):7.2f} ({min(device):.2f}-{max(device):.2f})  "
                      f"{torch_us / bench._median(device):5.2f}  {host:6.1f}  {name}")


if __name__ == "__main__":
    main()
