"""Tune triton_kernels' softmax plans: every candidate checked, then timed, on a CUDA GPU.

    PYTHONPATH=. python3 lab/probes/softmax_sweep.py --budget-s 150 --json tune.json
    PYTHONPATH=. python3 lab/probes/softmax_sweep.py --smoke  # the script, in the interpreter

The tables that compare the launchers with torch are ``python -m learning.bench``; this script
times the plans the launchers could choose, by calling the kernels directly, so that the
tables in lab.production (warps, piece sizes, the split-row options) rest on measurements.
It shares the measuring code (inputs of about 1 GiB, do_bench medians, the copy ceiling,
float64 checks on sampled rows) with learning.bench.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict

from learning.bench import rowwise

DEVICE = "cuda"
GROUPS = [  # the least certain choices first, in case the budget runs out
    ("fwd", (16384, 32768, 65536, 262144, 1048576)),
    ("bwd", (16384, 32768, 65536)),
]


def candidates(tk, width: int, backward: bool, itemsize: int, max_pieces: int) -> list:
    """Plans worth timing for rows of ``width`` columns."""
    plans = []
    if width <= 32768:  # one row per program, many warps (the whole row in registers)
        for warps in (16, 32):
            if not (backward and width > 16384):
                plans.append(tk.Plan("single_block", width, num_warps=warps))
            if not backward:  # the same with the two reductions made one
                plans.append(tk.Plan("single_block", width, num_warps=warps, one_pass=True))
            if not backward and itemsize == 2 and width > tk.MAX_SINGLE_BLOCK:
                for stages in (3, 4):  # next rows in shared memory (the inputs are paired)
                    plans.append(tk.Plan("single_block", width, num_warps=warps,
                                         programs_per_sm=1, stages=stages, pipelined=True))
    for piece, warps in ((4096, 4), (8192, 4), (8192, 8), (16384, 8)):
        if piece < width and -(-width // piece) <= max(max_pieces, 1):
            plans.append(tk.Plan("split_row", piece, num_warps=warps))
    return plans


def tune_case(tk, kind: str, dname: str, width: int, ceiling: float, deadline: float,
              quick: bool) -> list[dict]:
    import torch

    from lab import production as fast  # imported by tk already, after the mode was chosen

    kernel = rowwise.KERNELS["softmax_backward" if kind == "bwd" else "softmax"]
    dtype = rowwise.torch_dtype(dname)
    rows = max(1, (rowwise.GIB // (4 if quick else 1)) // (width * dtype.itemsize))
    case = rowwise.make_case(kernel, rows, width, dname)
    args = case["args"]
    out = torch.empty_like(args[0])
    backward = kind == "bwd"

    def launch(plan):
        if backward:
            tk._launch_softmax_backward(out, args[0], args[1], plan)
        else:
            tk._launch_softmax(out, args[0], plan)

    fn = "softmax_backward" if backward else "softmax"
    max_pieces = fast._max_pieces(out.device)
    default = fast._plan(fn, width, max_pieces=max_pieces, itemsize=dtype.itemsize,
                       paired=not backward and fast._pairs_of_16_bits(args[0], out))
    plans = candidates(tk, width, backward, dtype.itemsize, max_pieces)
    if default not in plans:
        plans.insert(0, default)
    results = []
    for plan in plans:
        if time.monotonic() > deadline:
            break
        out.fill_(float("nan"))
        try:
            launch(plan)
            ok, err = rowwise.compare(out[case["picked"]], case["ref"], dname)
            ms = rowwise.median_ms(lambda p=plan: launch(p), quick=True) if ok else float("nan")
        except Exception as e:  # a configuration the compiler rejects (shared memory, registers)
            print(f"tune {kind} {dname} {width} {plan}: {type(e).__name__}: {e}"[:300])
            ok, err, ms = False, float("nan"), float("nan")
        g = rowwise.gbps(case["nbytes"], ms)
        print(f"  {kind} {dname} {width} {plan_name(asdict(plan))}: {g:.0f} GB/s "
              f"({g / ceiling:.3f}) ok={ok}", flush=True)
        results.append({"kind": kind, "dtype": dname, "cols": width, "plan": asdict(plan),
                        "default": plan == default, "correct": ok, "max_abs_err": err,
                        "ms": ms, "gbps": g, "frac": g / ceiling})
    best = max((r for r in results if r["correct"]), key=lambda r: r["gbps"], default=None)
    if best:
        print(f"tune {kind} {dname} {width}: best {best['gbps']:.0f} GB/s "
              f"({best['frac']:.3f}) {plan_name(best['plan'])}", flush=True)
    return results


def plan_name(p: dict) -> str:
    name = f"{p['strategy']} b{p['block']}"
    if p["strategy"] == "multi_row":
        name += f" r{p['rows']}"
    name += f" w{p['num_warps']}"
    if p.get("one_pass"):
        name += " one-pass"
    if p.get("pipelined"):
        name += f" pipelined s{p['stages']}"
    if p["strategy"] == "looped":
        name += f" p{p['programs_per_sm']} s{p['stages']}"
    return name


def print_tuning(rows: list[dict]) -> None:
    print("\n| kind | dtype | cols | default GB/s | best GB/s | best /copy | best plan | "
          "runner-up |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    keys = []
    for r in rows:
        if (r["kind"], r["dtype"], r["cols"]) not in keys:
            keys.append((r["kind"], r["dtype"], r["cols"]))
    for key in keys:
        case = sorted((r for r in rows if (r["kind"], r["dtype"], r["cols"]) == key
                       and r["correct"]), key=lambda r: -r["gbps"])
        if not case:
            print(f"| {key[0]} | {key[1]} | {key[2]} | - | - | - | none correct | |")
            continue
        default = next((r for r in case if r["default"]), None)
        d = f"{default['gbps']:.0f}" if default else "-"
        second = f"{plan_name(case[1]['plan'])} {case[1]['gbps']:.0f}" if len(case) > 1 else ""
        print(f"| {key[0]} | {key[1]} | {key[2]} | {d} | {case[0]['gbps']:.0f} | "
              f"{case[0]['frac']:.3f} | {plan_name(case[0]['plan'])} | {second} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--budget-s", type=float, default=150.0, help="stop starting cases after")
    ap.add_argument("--quick", action="store_true", help="256 MiB inputs")
    ap.add_argument("--json", default=None, help="write all results here")
    ap.add_argument("--smoke", action="store_true", help="check the script in the interpreter")
    args = ap.parse_args(argv)
    from learning.grader import mode as kernel_mode

    mode = kernel_mode.select()
    import triton_kernels as tk

    if args.smoke:  # the candidate lists and plan names, without a GPU
        for width in (16384, 65536, 2**20):
            for backward in (False, True):
                names = [plan_name(asdict(p)) for p in candidates(tk, width, backward, 2, 132)]
                print(width, "bwd" if backward else "fwd", len(names), names[:3])
        return 0
    if mode.interpret:
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    result = {"env": rowwise.environment()}
    print(json.dumps(result["env"]), flush=True)
    ceiling = rowwise.copy_ceiling()
    result["copy_gbps"] = ceiling
    print(f"copy ceiling: {ceiling:.0f} GB/s", flush=True)
    deadline = time.monotonic() + args.budget_s
    rows = []
    for kind, widths in GROUPS:
        for width in widths:
            for dname in args.dtypes.split(","):
                if time.monotonic() > deadline:
                    print(f"tune: budget spent before {kind} {dname} {width}", flush=True)
                    break
                rows += tune_case(tk, kind, dname, width, ceiling, deadline, args.quick)
    result["tuning"] = rows
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    e = result["env"]
    print(f"\n{e['device']}, torch {e['torch']}, triton {e['triton']}, {e['date']}; copy ceiling "
          f"{ceiling:.0f} GB/s at the start, {result['copy_gbps_end']:.0f} at the end")
    print_tuning(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
