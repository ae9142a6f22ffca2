"""One decoding step (8 x 4096 x 4096): do wider strips of B, with K split to keep every
multiprocessor busy, stream B faster than the skinny table's 32-column strips?

A strip of 32 columns reads 64 bytes of each row of B per step: many short pieces, 8 KiB
apart. A strip of 128 or 256 columns reads 256 or 512 bytes of each row, in pieces that fill
whole cache lines; there are then too few strips for 132 multiprocessors, so K is split among
programs (the last program of a tile adds the others' partial sums, ``_finish_tile``). This
probe times the skinny table's rows beside such rows and torch.matmul, as the bench times a
product, with each one's share of the copy ceiling (a 1 GiB device-to-device copy).

    PYTHONPATH=. python lab/probes/matmul_decode_probe.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench import rowwise
from learning.bench.rowwise import environment

T = rm.TileConfig
SHAPE = (8, 4096, 4096)
WIDE = (
    T(16, 128, 128, 1, 4, 4, split_k=4, tma=True), T(16, 128, 256, 1, 4, 4, split_k=4, tma=True),
    T(16, 128, 128, 1, 4, 6, split_k=4, tma=True), T(16, 256, 128, 1, 4, 4, split_k=8, tma=True),
    T(16, 256, 64, 1, 4, 6, split_k=8, tma=True), T(16, 128, 128, 1, 4, 4, split_k=8, tma=True),
    T(16, 64, 256, 1, 4, 4, split_k=4, tma=True), T(16, 128, 128, 1, 4, 4, split_k=4),
    T(16, 128, 64, 1, 4, 8, split_k=4), T(16, 256, 64, 1, 8, 6, split_k=8),
)


def save(path, env, ceiling, rows) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"env": env, "timing": bench.TIMING, "product": SHAPE,
                       "copy_ceiling_gbps": ceiling,
                       "command": "python lab/probes/matmul_decode_probe.py", "rows": rows},
                      out, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    env = environment()
    ceiling = rowwise.copy_ceiling(False)
    rows = []
    for dname in ("fp16", "bf16"):
        case = bench.make_case(*SHAPE, dname)
        a, b = case["args"]
        inputs = bench.input_copies(a, b, env.get("l2_bytes"))
        rm.forget_choices()
        runs = [("torch.matmul", None), ("reference (chosen)", None)]
        runs += [(row.label, row) for row in (*rm.SKINNY_CONFIGS, *WIDE)]
        moved = bench.product_bytes(*SHAPE, dname)
        for name, row in runs:
            try:
                if row is None:
                    run = torch.matmul if name == "torch.matmul" else rm.matmul
                else:
                    run = rm._Plan(a, b, row)
                x, y = inputs[0]
                error = bench.relative_error(run(x, y)[case["picked"]], case["ref"])
                assert error <= bench.NORM_TOLERANCES[dname], f"error {error:.2e}"
                for round_ in range(options.rounds):
                    us = bench.device_us(run, inputs, quick=False)
                    rows.append({"dtype": dname, "run": name, "round": round_, "device_us": us,
                                 "share_of_ceiling": moved / (us * 1e-6) / 1e9 / ceiling})
            except Exception as error:  # noqa: BLE001 (the row is reported, not fatal)
                rows.append({"dtype": dname, "run": name,
                             "note": f"{type(error).__name__}: {str(error)[:200]}"})
                print(f"{dname} {name}: {rows[-1]['note']}", flush=True)
            save(options.json, env, ceiling, rows)
        rows.append({"dtype": dname, "chosen": getattr(rm.chosen_config(a, b), "label", "none")})
        torch.cuda.empty_cache()
    save(options.json, env, ceiling, rows)
    for dname in ("fp16", "bf16"):
        by_run: dict = {}
        for r in rows:
            if r["dtype"] == dname and "device_us" in r:
                by_run.setdefault(r["run"], []).append(r)
        torch_us = bench._median([r["device_us"] for r in by_run.get("torch.matmul", [])])
        print(f"\n{SHAPE} ({dname}), copy ceiling {ceiling:,.0f} GB/s: device us (range), "
              "torch over it, share of the ceiling")
        for name, runs in sorted(by_run.items(),
                                 key=lambda kv: bench._median([r["device_us"] for r in kv[1]])):
            times = [r["device_us"] for r in runs]
            share = bench._median([r["share_of_ceiling"] for r in runs])
            print(f"  {bench._median(times):7.2f} ({min(times):.2f}-{max(times):.2f})  "
                  f"{torch_us / bench._median(times):5.2f}  {share:5.3f}  {name}")


if __name__ == "__main__":
    main()
