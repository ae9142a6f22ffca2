"""1000 cubed: do copies into aligned rows pay when the product's own launch makes them?

Rows 2000 bytes apart cost the reference's small tiles much of their speed (the align probe,
``lab/results/matmul_align.json``: on rows 1024 elements apart the same rows are faster than
cuBLAS). Copying A and B into such rows in a launch of their own cost more than it won back.
``_matmul_copied`` (4097 cubed's rows "copies in the same launch") makes the copies inside the
product's launch: each program copies its share, waits for the others, then multiplies. This
probe times, for 1000 cubed in each dtype, as the bench times a product:

- torch.matmul and the table's fastest plain row here (128 x 128 tiles, tensor descriptors);
- persistent pointer rows with small tiles on rows 1024 elements apart (views of wider
  buffers): the product alone, as fast as it can be once the rows are aligned;
- the same rows copying A and B, B alone, or A alone in their own launch, copies included.

    PYTHONPATH=. python lab/probes/matmul_copy_inside_probe.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from lab.probes.matmul_align_probe import WIDE, wide_copies
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

T = rm.TileConfig
SIZE = 1000
TILES = ((64, 128, 64, 8, 4, 6), (64, 128, 128, 8, 4, 4), (64, 128, 64, 8, 4, 4),
         (128, 128, 64, 8, 4, 4), (128, 64, 64, 8, 4, 4))
COPIES = ((True, True, "A and B"), (False, True, "B"), (True, False, "A"))


def forced(a, b, row, copy_a: bool, copy_b: bool):
    """The row's plan with the chosen operands copied into aligned rows."""
    saved = rm._copies
    rm._copies = lambda a_, b_: (copy_a, copy_b)
    try:
        return rm._Plan(a, b, row)
    finally:
        rm._copies = saved


def save(path, env, rows) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"env": env, "timing": bench.TIMING, "size": SIZE, "wide": WIDE,
                       "command": "python lab/probes/matmul_copy_inside_probe.py",
                       "rows": rows}, out, indent=1)


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
        wide = wide_copies(inputs)
        best = T(128, 128, 64, 8, 4, 4, tma=True)
        # (name, row, copies of A and B or None for the plan's own, operands); no row: torch
        runs = [("torch.matmul", None, None, inputs), (best.label, best, None, inputs)]
        for tile in TILES:
            row = T(*tile, persistent=True)
            runs.append((f"{row.label}, rows 1024 apart", row, None, wide))
            inside = T(*tile, persistent=True, copy_inside=True)
            for copy_a, copy_b, what in COPIES:
                runs.append((f"{inside.label}, {what} copied", inside, (copy_a, copy_b),
                             inputs))
        for name, row, copies, pairs in runs:
            try:
                if row is None:
                    run = torch.matmul
                elif copies is None:
                    run = rm._Plan(*pairs[0], row)
                else:
                    run = forced(a, b, row, *copies)
                x, y = pairs[0]
                error = bench.relative_error(run(x, y)[case["picked"]], case["ref"])
                assert error <= bench.NORM_TOLERANCES[dname], f"error {error:.2e}"
                for round_ in range(options.rounds):
                    rows.append({"dtype": dname, "run": name, "round": round_,
                                 "device_us": bench.device_us(run, pairs, quick=False)})
                print(f"{dname} {name}: {rows[-1]['device_us']:.2f}", flush=True)
            except Exception as error:  # noqa: BLE001 (the row is reported, not fatal)
                rows.append({"dtype": dname, "run": name,
                             "note": f"{type(error).__name__}: {str(error)[:200]}"})
                print(f"{dname} {name}: {rows[-1]['note']}", flush=True)
            save(options.json, env, rows)
        torch.cuda.empty_cache()
    for dname in ("fp16", "bf16"):
        by_run: dict = {}
        for r in rows:
            if r["dtype"] == dname and "device_us" in r:
                by_run.setdefault(r["run"], []).append(r["device_us"])
        torch_us = bench._median(by_run.get("torch.matmul", [float("nan")]))
        print(f"\n{SIZE} cubed ({dname}): device us (range), torch over it")
        for name, times in sorted(by_run.items(), key=lambda kv: bench._median(kv[1])):
            print(f"  {bench._median(times):7.2f} ({min(times):.2f}-{max(times):.2f})  "
                  f"{torch_us / bench._median(times):5.2f}  {name}")


if __name__ == "__main__":
    main()
