"""Does a narrower K step help 1000 cubed, whose rows (2000 bytes apart) mostly start off the
128-byte lines? With tensor descriptors a K step of 64 16-bit values is one 128-byte row per
load, which such a start splits over two lines; a step of 32 is a 64-byte row, which three
starts in eight split. This probe times the tensor-descriptor rows with K steps of 32 beside
the chosen row and torch.matmul, as ``python -m learning.bench matmul`` times a product.

    PYTHONPATH=. python lab/probes/matmul_box_probe.py --json lab/results/matmul_box.json
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from lab.probes.matmul_align_probe import SIZE
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

T = rm.TileConfig
ROWS = (T(64, 128, 32, 8, 4, 6, tma=True), T(64, 128, 32, 8, 4, 8, tma=True),
        T(128, 64, 32, 8, 4, 8, tma=True), T(128, 128, 32, 8, 4, 6, tma=True),
        T(128, 128, 32, 8, 8, 8, tma=True), T(64, 64, 32, 8, 4, 8, tma=True),
        T(64, 128, 64, 8, 4, 4, tma=True), T(128, 128, 64, 8, 8, 4, tma=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    env = environment()
    rows = []
    for dname in ("fp16", "bf16"):
        case = bench.make_case(SIZE, SIZE, SIZE, dname)
        a, b = case["args"]
        inputs = bench.input_copies(a, b, env.get("l2_bytes"))
        rm.forget_choices()
        runs = [("torch.matmul", torch.matmul), ("reference (chosen)", rm.matmul)]
        runs += [(row.label, rm._Plan(a, b, row)) for row in ROWS]
        for name, run in runs:
            try:
                x, y = inputs[0]
                error = bench.relative_error(run(x, y)[case["picked"]], case["ref"])
                assert error <= bench.NORM_TOLERANCES[dname], f"error {error:.2e}"
                for round_ in range(options.rounds):
                    rows.append({"dtype": dname, "run": name, "round": round_,
                                 "device_us": bench.device_us(run, inputs, quick=False)})
            except Exception as error:  # noqa: BLE001 (the row is reported, not fatal)
                rows.append({"dtype": dname, "run": name,
                             "note": f"{type(error).__name__}: {str(error)[:160]}"})
        torch.cuda.empty_cache()
    if options.json:
        with open(options.json, "w", encoding="utf-8") as out:
            json.dump({"env": env, "timing": bench.TIMING, "size": SIZE,
                       "command": "python lab/probes/matmul_box_probe.py", "rows": rows},
                      out, indent=1)
    for dname in ("fp16", "bf16"):
        by_run: dict = {}
        for r in rows:
            if r["dtype"] == dname:
                by_run.setdefault(r["run"], []).append(r)
        timed = {k: [r["device_us"] for r in v if "device_us" in r] for k, v in by_run.items()}
        torch_us = bench._median(timed.get("torch.matmul") or [float("nan")])
        print(f"\n{SIZE} cubed ({dname}): device us (range), torch over it")
        for name, device in sorted(timed.items(), key=lambda kv: bench._median(kv[1] or [1e9])):
            if not device:
                print(f"  {'-':>7}  {name}: {by_run[name][0].get('note')}")
                continue
            print(f"  {bench._median(device):7.2f} ({min(device):.2f}-{max(device):.2f})  "
                  f"{torch_us / bench._median(device):5.2f}  {name}")


if __name__ == "__main__":
    main()
