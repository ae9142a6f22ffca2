"""1000 cubed: which operand's rows cost the time, and what the memory system counts.

    PYTHONPATH=. python lab/probes/matmul_counters_probe.py time --json OUT.json
    ncu --clock-control none --profile-from-start off --metrics ... \\
        python lab/probes/matmul_counters_probe.py profile

The stride probe (``matmul_stride_probe.py``) found 1000 cubed slow because of where rows of
1000 two-byte elements start (2000 bytes apart, so seven rows in eight start inside a 128-byte
line), with A, B and C all laid out so. This probe moves A's and B's rows apart separately
(1000 or 1024 elements between rows; C stays contiguous), to say which operand's loads lose
the time, and times the reference's two best rows there and torch.matmul beside them (device
time as the bench measures it, medians of --rounds rounds with the range).

``profile`` runs each layout's kernels once more between cudaProfilerStart and Stop, in the
order ``LAYOUTS`` x (torch.matmul, then each row), so that Nsight Compute, started with
``--profile-from-start off``, reads their counters: bytes read from DRAM, the L2's sectors
and requests, how busy the L2 and the multiprocessors were. ``matmul_counters_probe.sh``
runs both and keeps the counters as CSV.
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

SIZE = 1000
ROWS = (rm.TileConfig(64, 128, 128, 8, 4, 4, tma=True), rm.TileConfig(64, 128, 128, 8, 4, 4))
#: elements between rows of A and of B
LAYOUTS = ((1000, 1000), (1024, 1000), (1000, 1024), (1024, 1024))


def strided(stride: int, dtype, seed: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(SIZE, stride, device="cuda", generator=g).to(dtype)[:, :SIZE]


def run_row(config: rm.TileConfig):
    plans = {}

    def run(a, b):
        key = rm._key(a, b)
        if key not in plans:
            plans[key] = rm._Plan(a, b, config, copies=False)
        return plans[key](a, b)
    return run


def runs():
    return [("torch.matmul", torch.matmul)] + [(row.label, run_row(row)) for row in ROWS]


def timed(rounds: int, path: str | None) -> None:
    env = environment()
    rows = []
    for dname in ("fp16", "bf16"):
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dname]
        for stride_a, stride_b in LAYOUTS:
            one = SIZE * (stride_a + stride_b) * 2
            copies = max(1, -(-2 * (env.get("l2_bytes") or 0) // one))
            inputs = [(strided(stride_a, dtype, 2 * i), strided(stride_b, dtype, 2 * i + 1))
                      for i in range(copies)]
            a, b = inputs[0]
            want = a.double() @ b.double()
            for name, run in runs():
                error = float((run(a, b).double() - want).norm() / want.norm())
                assert error <= bench.NORM_TOLERANCES[dname], (stride_a, stride_b, name, error)
                for round_ in range(rounds):
                    us = bench.device_us(run, inputs, quick=False)
                    rows.append({"dtype": dname, "stride_a": stride_a, "stride_b": stride_b,
                                 "variant": name, "round": round_, "device_us": us})
            del inputs, a, b
            torch.cuda.empty_cache()
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"env": env, "timing": bench.TIMING["device"],
                       "command": "python lab/probes/matmul_counters_probe.py time",
                       "rows": rows}, out, indent=1)
    print("| dtype | A's rows apart | B's rows apart | variant | device us | lowest to highest |")
    print("|---:|---:|---:|---:|---:|---:|")
    grouped: dict = {}
    for r in rows:
        grouped.setdefault((r["dtype"], r["stride_a"], r["stride_b"], r["variant"]), []).append(
            r["device_us"])
    for (dname, sa, sb, name), values in grouped.items():
        print(f"| {dname} | {sa} | {sb} | {name} | {bench._median(values):.2f} | "
              f"{min(values):.2f} to {max(values):.2f} |")


def profiled() -> None:
    """Each layout's runs once, in a known order, inside the profiler's window."""
    order = []
    for stride_a, stride_b in LAYOUTS:
        a, b = strided(stride_a, torch.float16, 0), strided(stride_b, torch.float16, 1)
        for name, run in runs():
            run(a, b)  # the reference's first call builds its plan and compiles
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            run(a, b)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            order.append(f"A {stride_a}, B {stride_b}: {name}")
    for i, line in enumerate(order):
        print(f"profiled {i}: {line}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("time", "profile"))
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    if options.mode == "time":
        timed(options.rounds, options.json)
    else:
        profiled()


if __name__ == "__main__":
    main()
