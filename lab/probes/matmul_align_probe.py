"""Why is 1000 cubed slower than 1024 cubed, for torch.matmul and the reference alike, when both
make the same number of tiles and K steps? The guess this probe tests: rows 2000 bytes apart
start on 16-byte boundaries but mostly not on 128-byte ones, so a tile's row of 128 bytes spans
two of the cache's 128-byte lines.

    PYTHONPATH=. python lab/probes/matmul_align_probe.py --json lab/results/matmul_align.json

For 1000 cubed in each dtype, each timed as ``python -m learning.bench matmul`` times a product
(a CUDA graph of back-to-back calls over copies too large together for L2, median of rounds),
device time and host time per call:

- torch.matmul and the reference's chosen row on contiguous A and B (rows 2000 bytes apart);
- the same two on A and B whose rows are 1024 elements apart (views of wider buffers: what the
  product costs where rows start on 128-byte boundaries);
- the reference's best small rows with A, B or both first copied into rows 1024 elements apart
  (``_pad_rows``, the copy 4097 cubed makes), copy included: whether the copy pays here.
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

T = rm.TileConfig
ROWS = (T(64, 128, 128, 8, 4, 4, tma=True), T(64, 128, 64, 8, 4, 4, tma=True),
        T(128, 128, 64, 8, 4, 4, tma=True), T(64, 128, 64, 8, 4, 6))
SIZE = 1000
WIDE = 1024


def wide_copies(inputs: list[tuple]) -> list[tuple]:
    """Each (a, b) again, as views of buffers whose rows are WIDE elements apart."""
    out = []
    for a, b in inputs:
        pair = []
        for t in (a, b):
            buffer = torch.zeros(t.shape[0], WIDE, dtype=t.dtype, device=t.device)
            buffer[:, :t.shape[1]] = t
            pair.append(buffer[:, :t.shape[1]])
        out.append(tuple(pair))
    return out


def forced(row, copy_a: bool, copy_b: bool):
    """The row's plan with the chosen operands copied into aligned rows first."""
    def plan(a, b):
        saved = rm._copies
        rm._copies = lambda a_, b_: (copy_a, copy_b)
        try:
            return rm._Plan(a, b, row)
        finally:
            rm._copies = saved
    return plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    env = environment()
    rows = []
    for dname in ("bf16", "fp16"):
        case = bench.make_case(SIZE, SIZE, SIZE, dname)
        a, b = case["args"]
        inputs = bench.input_copies(a, b, env.get("l2_bytes"))
        wide = wide_copies(inputs)
        rm.forget_choices()
        runs = [("torch.matmul", torch.matmul, inputs), ("reference (chosen)", rm.matmul, inputs),
                ("torch.matmul, rows 1024 apart", torch.matmul, wide),
                ("reference (chosen), rows 1024 apart", rm.matmul, wide)]
        for row in ROWS:
            runs.append((row.label, rm._Plan(a, b, row), inputs))
            runs.append((row.label + ", rows 1024 apart", rm._Plan(*wide[0], row), wide))
            for copy_a, copy_b, what in ((True, True, "A and B"), (True, False, "A"),
                                         (False, True, "B")):
                runs.append((f"{row.label}, {what} copied first", forced(row, copy_a, copy_b)(
                    a, b), inputs))
        for name, run, pairs in runs:
            try:
                x, y = pairs[0]
                error = bench.relative_error(run(x, y)[case["picked"]], case["ref"])
                assert error <= bench.NORM_TOLERANCES[dname], f"error {error:.2e}"
                for round_ in range(options.rounds):
                    rows.append({"dtype": dname, "run": name, "round": round_,
                                 "device_us": bench.device_us(run, pairs, quick=False),
                                 "host_us": bench.call_us(run, x, y, quick=False)})
            except Exception as error:  # noqa: BLE001 (the row is reported, not fatal)
                rows.append({"dtype": dname, "run": name,
                             "note": f"{type(error).__name__}: {str(error)[:160]}"})
                print(f"{dname} {name}: {rows[-1]['note']}", flush=True)
        torch.cuda.empty_cache()
        if options.json:
            with open(options.json, "w", encoding="utf-8") as out:
                json.dump({"env": env, "timing": bench.TIMING, "size": SIZE, "wide": WIDE,
                           "command": "python lab/probes/matmul_align_probe.py", "rows": rows},
                          out, indent=1)
    for dname in ("bf16", "fp16"):
        by_run: dict = {}
        for r in rows:
            if r["dtype"] == dname and "device_us" in r:
                by_run.setdefault(r["run"], []).append(r)
        torch_us = bench._median([r["device_us"] for r in by_run.get("torch.matmul", [])])
        print(f"\n{SIZE} cubed ({dname}): device us (range), torch over it, host us")
        for name, runs in sorted(by_run.items(),
                                 key=lambda kv: bench._median([r["device_us"] for r in kv[1]])):
            device = [r["device_us"] for r in runs]
            host = bench._median([r["host_us"] for r in runs])
            print(f"  {bench._median(device):7.2f} ({min(device):.2f}-{max(device):.2f})  "
                  f"{torch_us / bench._median(device):5.2f}  {host:6.1f}  {name}")


if __name__ == "__main__":
    main()
