"""Where the reference matmul's host time per call goes, piece by piece.

    PYTHONPATH=. python lab/probes/matmul_host_probe.py --json lab/results/matmul_host_probe.json

One bfloat16 product of 1024 cubed (its kernel runs for about 6 us on an H200, far less than
any launch costs), each piece called 2000 times without synchronising, the host's time per call
reported: the argument checks, allocating C, the launch through the autotuner, through the
heuristics wrapper with one tile shape, straight to the kernel with every constexpr given, the
whole reference call, and torch.matmul.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import triton

import reference_matmul as rm
from learning.bench.rowwise import environment

CALLS = 2000


def host_us(fn) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / CALLS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    options = parser.parse_args()
    m = n = k = 1024
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    rm.matmul(a, b)  # the autotuner chooses once
    config = rm.chosen_config(a, b)
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    args = (c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1), b.stride(0),
            b.stride(1), m, n, k)
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
    tiles = dict(BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
                 GROUP_M=config.group_m, num_warps=config.num_warps,
                 num_stages=config.num_stages)

    def tuned_grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    pieces = [
        ("the argument checks (_check)", lambda: rm._check(a, b)),
        ("allocating C (torch.empty)", lambda: torch.empty((m, n), dtype=a.dtype,
                                                            device=a.device)),
        ("launch through the autotuner", lambda: rm._matmul_tuned[tuned_grid](*args)),
        ("launch through the heuristics, one tile shape",
         lambda: rm._matmul_even_k[grid](*args, **tiles)),
        ("launch of the kernel, every constexpr given",
         lambda: rm._matmul[grid](*args, EVEN_K=k % config.block_k == 0, **tiles)),
        ("the whole reference call, autotuned", lambda: rm.matmul(a, b)),
        ("the whole reference call, one tile shape", lambda: rm.matmul(a, b, config=config)),
        ("torch.matmul", lambda: torch.matmul(a, b)),
    ]
    rows = []
    for round_ in range(3):
        for name, fn in pieces:
            rows.append({"round": round_, "piece": name, "host_us": host_us(fn)})
    by_piece: dict = {}
    for r in rows:
        by_piece.setdefault(r["piece"], []).append(r["host_us"])
    print("| piece | host us per call, median of 3 rounds | lowest to highest |")
    for name, values in by_piece.items():
        values.sort()
        print(f"| {name} | {values[1]:.1f} | {values[0]:.1f} to {values[-1]:.1f} |")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as out:
            json.dump({"env": environment(), "config": config.label,
                       "command": "python lab/probes/matmul_host_probe.py", "rows": rows},
                      out, indent=1)


if __name__ == "__main__":
    main()
