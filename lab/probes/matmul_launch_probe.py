"""Where the reference matmul's time goes at sizes whose kernel runs for tens of microseconds.

    python lab/probes/matmul_launch_probe.py --json lab/results/matmul_launch_probe.json

For each size, in one process: the reference through its autotuner timed by do_bench (as the
bench times it), the host's time per call (200 calls, no synchronisation, so the GPU's time
is hidden unless the host outruns it), the same through one fixed tile shape (no autotuner),
and the GPU's own time per call from a CUDA graph of 20 calls (no host work at all). Then the
autotuner's picks are forgotten, it chooses again, and the same is measured: the bench's later
rounds do this. torch.matmul is timed beside each.

Its committed results (lab/results/matmul_launch_probe.json) are of the reference before
issue 36, whose autotuner ran on every call. Run now, "tuned" is the reference's remembered
plan, launched directly, and "fixed" is ``config=``: the checks, a new plan and Triton's own
launch on every call. lab/probes/matmul_host_probe.py takes the call apart piece by piece.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from triton.testing import do_bench

import reference_matmul as rm
from learning.bench.rowwise import environment

SIZES = ((1024, 1024, 1024), (2048, 2048, 2048), (16, 4096, 4096), (4096, 4096, 4096))


def host_us(fn, calls: int = 200) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def graph_us(fn, calls: int = 20) -> float:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(calls):
            fn()
    return do_bench(graph.replay, return_mode="median") * 1e3 / calls


def measure(m, n, k, dtype, phase):
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    tuned = lambda: rm.matmul(a, b)  # noqa: E731
    tuned()
    chosen = rm.chosen_config(a, b)
    fixed = lambda: rm.matmul(a, b, config=chosen)  # noqa: E731
    theirs = lambda: torch.matmul(a, b)  # noqa: E731
    row = {"phase": phase, "M": m, "N": n, "K": k, "dtype": str(dtype).split(".")[-1],
           "config": chosen.label if chosen else "-"}
    for name, fn in (("tuned", tuned), ("fixed", fixed), ("torch", theirs)):
        row[f"{name}_do_bench_us"] = do_bench(fn, return_mode="median") * 1e3
        row[f"{name}_host_us"] = host_us(fn)
        row[f"{name}_graph_us"] = graph_us(fn)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    options = parser.parse_args()
    rows = []
    for phase in ("first choice", "after forget_choices", "after forget_choices again"):
        if phase != "first choice":
            rm.forget_choices()
        for dtype in (torch.bfloat16,):
            for m, n, k in SIZES:
                rows.append(measure(m, n, k, dtype, phase))
    keys = ("do_bench", "host", "graph")
    print("| phase | M x N x K | config | " + " | ".join(
        f"{impl} {key} us" for impl in ("tuned", "fixed", "torch") for key in keys) + " |")
    for r in rows:
        print(f"| {r['phase']} | {r['M']}x{r['N']}x{r['K']} | {r['config']} | " + " | ".join(
            f"{r[f'{impl}_{key}_us']:.1f}" for impl in ("tuned", "fixed", "torch")
            for key in keys) + " |")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as out:
            json.dump({"env": environment(), "command": "python lab/probes/matmul_launch_probe.py",
                       "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
