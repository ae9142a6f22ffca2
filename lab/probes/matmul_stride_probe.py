"""Why 1000 cubed runs slower than 1024 cubed: the sizes, or where the rows start.

    PYTHONPATH=. python lab/probes/matmul_stride_probe.py --json lab/results/matmul_stride.json

1000 cubed and 1024 cubed launch the same number of tiles and K steps with the reference's
small rows, yet every row, and cuBLAS, is slower at 1000. Two things differ: the edges (the
last tile row, tile column and K step are cut) and the rows' starts (rows of 1000 two-byte
elements are 2000 bytes apart, so most start inside a 128-byte line of memory, and each
row of a tile spans one line more). This probe separates them: 1000 cubed with A and B as
views of wider buffers, rows STRIDES elements apart (1000: the usual layout; 1008: 32-byte
steps; 1024: every row on a 128-byte line, as at 1024 cubed), and 1024 cubed beside them.
Each layout runs two rows of the reference's table (a pointer row and a tensor-descriptor
row, ``ROWS``) and torch.matmul on the same views; rows 1000 apart also run the remedy of
padding them: the descriptor row on copies of A and B whose rows are 1008 apart, the copies
timed too. Device time as ``python -m learning.bench
matmul`` measures it (a CUDA graph over copies too large together for the L2 cache), medians
of --rounds rounds with the range, in float16 and bfloat16.
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

ROWS = (rm.TileConfig(64, 128, 128, 8, 4, 4), rm.TileConfig(64, 128, 64, 8, 4, 4, tma=True))
#: (M = N = K, the rows' stride in elements) of each layout
LAYOUTS = ((1000, 1000), (1000, 1008), (1000, 1024), (1024, 1024))
#: the rows' stride, in elements, of the copies the padding remedy makes
PADDED = 1008


def strided(rows: int, cols: int, stride: int, dtype, seed: int) -> torch.Tensor:
    """A rows x cols tensor of random normal values whose rows are ``stride`` elements apart."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    buffer = torch.randn(rows, stride, device="cuda", generator=g).to(dtype)
    return buffer[:, :cols]


def run_row(config: rm.TileConfig):
    plans = {}

    def run(a, b):
        key = rm._key(a, b)
        if key not in plans:
            plans[key] = rm._Plan(a, b, config, copies=False)
        return plans[key](a, b)
    return run


def copied_first(config: rm.TileConfig, stride: int):
    """The row ``config`` on copies of A and B whose rows are ``stride`` elements apart: the
    remedy of padding the rows, its two copies counted in the time."""
    run = run_row(config)

    def padded(t: torch.Tensor) -> torch.Tensor:
        rows, cols = t.shape
        copy = torch.empty((rows, stride), dtype=t.dtype, device=t.device)[:, :cols]
        copy.copy_(t)
        return copy

    return lambda a, b: run(padded(a), padded(b))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    env = environment()
    rows = []
    for dname in ("fp16", "bf16"):
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dname]
        for size, stride in LAYOUTS:
            one = 2 * size * stride * 2
            copies = max(1, -(-2 * (env.get("l2_bytes") or 0) // one))
            inputs = [(strided(size, size, stride, dtype, 2 * i),
                       strided(size, size, stride, dtype, 2 * i + 1)) for i in range(copies)]
            a, b = inputs[0]
            want = a.double() @ b.double()
            named = [(row.label, run_row(row)) for row in ROWS] + [("torch.matmul", torch.matmul)]
            if stride % 16:  # rows off the 32-byte grid: the padding remedy, copies included
                named += [(f"{ROWS[1].label}, A and B first copied into rows {PADDED} apart",
                           copied_first(ROWS[1], PADDED))]
            for name, run in named:
                error = float((run(a, b).double() - want).norm() / want.norm())
                assert error <= bench.NORM_TOLERANCES[dname], (size, stride, name, error)
                for round_ in range(options.rounds):
                    us = bench.device_us(run, inputs, quick=False)
                    rows.append({"dtype": dname, "size": size, "stride": stride, "variant": name,
                                 "round": round_, "device_us": us})
                    print(f"{dname} {size} cubed, rows {stride} apart, {name}: {us:.2f} us",
                          flush=True)
            del inputs, a, b
            torch.cuda.empty_cache()
            if options.json:  # what is measured so far, should the run be cut short
                with open(options.json, "w", encoding="utf-8") as out:
                    json.dump({"env": env, "timing": bench.TIMING["device"],
                               "command": "python lab/probes/matmul_stride_probe.py",
                               "rows": rows}, out, indent=1)
    print("| dtype | size | rows apart (elements) | variant | device us | lowest to highest |")
    print("|---:|---:|---:|---:|---:|---:|")
    grouped: dict = {}
    for r in rows:
        grouped.setdefault((r["dtype"], r["size"], r["stride"], r["variant"]), []).append(
            r["device_us"])
    for (dname, size, stride, name), values in grouped.items():
        print(f"| {dname} | {size} | {stride} | {name} | {bench._median(values):.2f} | "
              f"{min(values):.2f} to {max(values):.2f} |")


if __name__ == "__main__":
    main()
