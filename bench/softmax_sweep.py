"""Time triton_kernels' softmax (forward and backward) against torch and the copy ceiling.

Run on a CUDA GPU from the repository root:

    PYTHONPATH=. python3 bench/softmax_sweep.py --tables --json results.json
    PYTHONPATH=. python3 bench/softmax_sweep.py --tune --budget-s 150 --json tune.json

Every case holds about 1 GiB of input (rows x cols), far more than the L2, and is timed with
triton.testing.do_bench (median, milliseconds). GB/s counts the fewest bytes the operation must
move: one read and one write (forward), two reads and one write (backward). The copy ceiling is
a device-to-device copy of 1 GiB measured in the same run, counting its read and its write.
Each timed kernel's output is checked against torch in float32 first (the launches that can be
poisoned are: the output is filled with NaN before the kernel writes it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from dataclasses import asdict

import torch
import triton
from triton.testing import do_bench

import triton_kernels as tk

GIB = 2**30
DEVICE = "cuda"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# |out - ref| <= atol + rtol * |ref| against torch in float32
TOL = {torch.float32: (1e-6, 1e-4), torch.float16: (1e-5, 2e-3), torch.bfloat16: (1e-5, 1.6e-2)}
FWD_WIDTHS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 262144, 1048576]
BWD_WIDTHS = [128, 512, 1024, 4096, 8192, 16384, 32768, 65536]


def timed(fn, quick: bool) -> float:
    """Median milliseconds of fn() on the GPU."""
    if DEVICE == "cpu":  # --smoke: check the script itself, on tiny tensors, in the interpreter
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    warmup, rep = (5, 30) if quick else (10, 60)
    return do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / ms / 1e6


def env() -> dict:
    if DEVICE == "cpu":
        return {"date": datetime.date.today().isoformat(), "device": "cpu (smoke test)",
                "torch": torch.__version__, "triton": triton.__version__}  # fmt: skip
    props = torch.cuda.get_device_properties(0)
    return {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(0),
        "sms": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }


def copy_ceiling() -> float:
    src = torch.empty(GIB // 4, dtype=torch.float32, device=DEVICE).uniform_()
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), quick=False)
    return gbps(2 * GIB, ms)


def inputs(width: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    rows = max(1, GIB // (width * dtype.itemsize))
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return (torch.randn(rows, width, device=DEVICE, generator=g) * 3).to(dtype)


def close(out: torch.Tensor, ref: torch.Tensor) -> tuple[bool, float]:
    """(all elements within TOL and finite, largest absolute error)."""
    atol, rtol = TOL[out.dtype]
    err = (out.float() - ref).abs()
    ok = bool(torch.isfinite(out).all()) and bool((err <= atol + rtol * ref.abs()).all())
    return ok, float(err.max())


def backward_ref(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y32, dy32 = y.float(), dy.float()
    return y32 * (dy32 - (y32 * dy32).sum(-1, keepdim=True))


# ---------------------------------------------------------------------------------------------
# main tables: the launchers as a user calls them, against torch
# ---------------------------------------------------------------------------------------------


def forward_case(dname: str, width: int, ceiling: float, quick: bool) -> dict:
    x = inputs(width, DTYPES[dname])
    nbytes = 2 * x.numel() * x.element_size()
    ref = torch.softmax(x.float(), dim=-1)
    plan = tk._plan(
        "softmax", width, max_pieces=tk._max_pieces(x.device), itemsize=x.element_size()
    )
    poisoned = torch.full_like(x, float("nan"))
    tk._launch_softmax(poisoned, x, plan)
    ok, err = close(poisoned, ref)
    ok_api, _ = close(tk.softmax(x), ref)
    del poisoned, ref
    ours = timed(lambda: tk.softmax(x), quick)
    theirs = timed(lambda: torch.softmax(x, dim=-1), quick)
    return row_of(dname, width, x.shape[0], plan, ok and ok_api, err, nbytes, ours, theirs, ceiling)


def backward_case(dname: str, width: int, ceiling: float, quick: bool) -> dict:
    dtype = DTYPES[dname]
    y = torch.softmax(inputs(width, dtype, seed=1).float(), dim=-1).to(dtype)
    dy = inputs(width, dtype, seed=2)
    nbytes = 3 * y.numel() * y.element_size()
    ref = backward_ref(y, dy)
    plan = tk._plan(
        "softmax_backward", width, max_pieces=tk._max_pieces(y.device), itemsize=y.element_size()
    )
    poisoned = torch.full_like(y, float("nan"))
    tk._launch_softmax_backward(poisoned, y, dy, plan)
    ok, err = close(poisoned, ref)
    del poisoned, ref
    ours = timed(lambda: tk.softmax_backward(y, dy), quick)
    theirs = timed(lambda: torch._softmax_backward_data(dy, y, -1, y.dtype), quick)
    return row_of(dname, width, y.shape[0], plan, ok, err, nbytes, ours, theirs, ceiling)


def row_of(dname, width, rows, plan, ok, err, nbytes, ours, theirs, ceiling) -> dict:
    return {
        "dtype": dname,
        "cols": width,
        "rows": rows,
        "plan": asdict(plan),
        "correct": ok,
        "max_abs_err": err,
        "ms": ours,
        "gbps": gbps(nbytes, ours),
        "frac": gbps(nbytes, ours) / ceiling,
        "torch_ms": theirs,
        "torch_gbps": gbps(nbytes, theirs),
        "torch_frac": gbps(nbytes, theirs) / ceiling,
    }


def table(kind: str, case, dtypes, widths, ceiling, quick) -> list[dict]:
    rows = []
    for dname in dtypes:
        for width in widths:
            r = case(dname, width, ceiling, quick)
            rows.append(r)
            print(
                f"{kind} {dname} {width}: {r['gbps']:.0f} GB/s ({r['frac']:.3f}), "
                f"torch {r['torch_gbps']:.0f}, correct={r['correct']}",
                flush=True,
            )
    return rows


# ---------------------------------------------------------------------------------------------
# tuning sweep: candidate plans per width, each checked then timed
# ---------------------------------------------------------------------------------------------


def candidates(width: int, backward: bool) -> list[tk.Plan]:
    block = triton.next_power_of_2(width)
    plans = []
    if width <= tk.MAX_SINGLE_BLOCK:
        for tile in (1024, 2048, 4096, 8192):
            if tile > block:
                for warps in (4, 8):
                    plans.append(tk.Plan("multi_row", block, rows=tile // block, num_warps=warps))
        if block >= 1024:
            for warps in (4, 8, 16):
                plans.append(tk.Plan("single_block", block, num_warps=warps))
        return plans
    for piece, warps in [(4096, 4), (8192, 4), (8192, 8), (16384, 8), (16384, 16)]:
        if triton.cdiv(width, piece) <= tk._max_pieces(torch.device(DEVICE)):  # 0 on the CPU
            plans.append(tk.Plan("split_row", piece, num_warps=warps))
    plans.append(tk._plan("softmax", width, "looped"))  # the looped kernel's defaults
    plans.append(tk.Plan("looped", 4096, num_warps=8, programs_per_sm=2, stages=3))
    return plans


def tune_case(kind: str, dname: str, width: int, ceiling: float, deadline: float) -> list[dict]:
    dtype = DTYPES[dname]
    backward = kind == "bwd"
    if backward:
        y = torch.softmax(inputs(width, dtype, seed=1).float(), dim=-1).to(dtype)
        dy = inputs(width, dtype, seed=2)
        ref = backward_ref(y, dy)
        nbytes = 3 * y.numel() * y.element_size()
    else:
        x = inputs(width, dtype)
        ref = torch.softmax(x.float(), dim=-1)
        nbytes = 2 * x.numel() * x.element_size()
    out = torch.empty(ref.shape, dtype=dtype, device=DEVICE)

    def launch(plan):
        if backward:
            tk._launch_softmax_backward(out, y, dy, plan)
        else:
            tk._launch_softmax(out, x, plan)

    fn = "softmax_backward" if backward else "softmax"
    default = tk._plan(fn, width, max_pieces=tk._max_pieces(out.device), itemsize=dtype.itemsize)
    plans = candidates(width, backward)
    if default not in plans:
        plans.insert(0, default)
    rows = []
    for plan in plans:
        if time.monotonic() > deadline:
            break
        out.fill_(float("nan"))
        try:
            launch(plan)
            ok, err = close(out, ref)
            ms = timed(lambda p=plan: launch(p), quick=True) if ok else float("nan")
        except Exception as e:  # a configuration the compiler rejects (shared memory, registers)
            print(f"tune {kind} {dname} {width} {plan}: {type(e).__name__}: {e}"[:300])
            ok, err, ms = False, float("nan"), float("nan")
        rows.append(
            {
                "kind": kind,
                "dtype": dname,
                "cols": width,
                "plan": asdict(plan),
                "default": plan == default,
                "correct": ok,
                "max_abs_err": err,
                "ms": ms,
                "gbps": gbps(nbytes, ms),
                "frac": gbps(nbytes, ms) / ceiling,
            }
        )
    best = max((r for r in rows if r["correct"]), key=lambda r: r["gbps"], default=None)
    if best:
        print(f"tune {kind} {dname} {width}: best {best['gbps']:.0f} GB/s ({best['frac']:.3f})")
    return rows


def tune(groups, ceiling, deadline) -> list[dict]:
    rows = []
    for kind, dname, width in groups:
        if time.monotonic() > deadline:
            print(f"tune: budget spent before {kind} {dname} {width}", flush=True)
            break
        rows += tune_case(kind, dname, width, ceiling, deadline)
    return rows


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------


def plan_name(p: dict) -> str:
    name = f"{p['strategy']} b{p['block']}"
    if p["strategy"] == "multi_row":
        name += f" r{p['rows']}"
    name += f" w{p['num_warps']}"
    if p["strategy"] == "looped":
        name += f" p{p['programs_per_sm']} s{p['stages']}"
    return name


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print("| dtype | cols | plan | GB/s | /copy | torch GB/s | torch /copy | ours/torch | ok |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['dtype']} | {r['cols']} | {plan_name(r['plan'])} | {r['gbps']:.0f} | "
            f"{r['frac']:.3f} | {r['torch_gbps']:.0f} | {r['torch_frac']:.3f} | "
            f"{r['gbps'] / r['torch_gbps']:.2f} | {'yes' if r['correct'] else 'NO'} |"
        )


def print_tuning(rows: list[dict]) -> None:
    print("\nTuning: the best plan per case, against the default plan")
    print("| kind | dtype | cols | default GB/s | best GB/s | best /copy | best plan |")
    print("|---|---|---:|---:|---:|---:|---|")
    seen = []
    for r in rows:
        key = (r["kind"], r["dtype"], r["cols"])
        if key not in seen:
            seen.append(key)
    for key in seen:
        case = [r for r in rows if (r["kind"], r["dtype"], r["cols"]) == key]
        best = max((r for r in case if r["correct"]), key=lambda r: r["gbps"], default=None)
        if best is None:
            continue
        default = next((r for r in case if r["default"] and r["correct"]), None)
        d = f"{default['gbps']:.0f}" if default else "-"
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {d} | {best['gbps']:.0f} | "
            f"{best['frac']:.3f} | {plan_name(best['plan'])} |"
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", action="store_true", help="forward and backward against torch")
    ap.add_argument("--tune", action="store_true", help="sweep candidate plans")
    ap.add_argument("--dtypes", default="fp32,bf16,fp16")
    ap.add_argument("--budget-s", type=float, default=150.0, help="time limit for --tune")
    ap.add_argument("--quick", action="store_true", help="shorter timing runs for the tables")
    ap.add_argument("--json", default=None, help="write all results here")
    ap.add_argument("--smoke", action="store_true", help="tiny CPU run (TRITON_INTERPRET=1)")
    args = ap.parse_args(argv)
    if args.smoke:
        global GIB, DEVICE, FWD_WIDTHS, BWD_WIDTHS
        GIB, DEVICE = 2**17, "cpu"
        FWD_WIDTHS, BWD_WIDTHS = [128, 16384], [512, 16384]
    elif not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    dtypes = args.dtypes.split(",")
    result = {"env": env()}
    result["defaults"] = {
        "MAX_SINGLE_BLOCK": tk.MAX_SINGLE_BLOCK,
        "ROW_TILE_BYTES": tk._ROW_TILE_BYTES,
        "WARPS": tk._WARPS,
        "LOOPED_BLOCK": tk._LOOPED_BLOCK,
        "LOOPED_PROGRAMS_PER_SM": tk._LOOPED_PROGRAMS_PER_SM,
        "LOOPED_STAGES": tk._LOOPED_STAGES,
        "LOOPED_WARPS": tk._LOOPED_WARPS,
        "SPLIT_BLOCK": tk._SPLIT_BLOCK,
        "SPLIT_WARPS": tk._SPLIT_WARPS,
    }
    print(json.dumps(result["env"]), flush=True)
    ceiling = copy_ceiling()
    result["copy_gbps_start"] = ceiling
    print(f"copy ceiling: {ceiling:.0f} GB/s", flush=True)
    if args.tune:
        deadline = time.monotonic() + args.budget_s
        tune_dtypes = [d for d in ("fp32", "bf16") if d in dtypes]
        if args.smoke:
            order = [("fwd", (16384, 512)), ("bwd", (16384, 512))]
        else:  # the least certain choices first, in case the budget runs out
            order = [("fwd", (16384, 65536, 262144)), ("bwd", (16384, 65536))]
            order += [("fwd", (128, 2048))]
        groups = [(kind, d, w) for kind, widths in order for w in widths for d in tune_dtypes]
        result["tuning"] = tune(groups, ceiling, deadline)
    if args.tables:
        result["forward"] = table("fwd", forward_case, dtypes, FWD_WIDTHS, ceiling, args.quick)
        result["backward"] = table("bwd", backward_case, dtypes, BWD_WIDTHS, ceiling, args.quick)
    result["copy_gbps_end"] = copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    e = result["env"]
    print(f"\n{e['device']}, torch {e['torch']}, triton {e['triton']}, {e['date']}; copy ceiling "
          f"{ceiling:.0f} GB/s at the start, {result['copy_gbps_end']:.0f} at the end")  # fmt: skip
    if "tuning" in result:
        print_tuning(result["tuning"])
    if "forward" in result:
        print_table("Forward (GB/s = one read + one write)", result["forward"])
        print_table("Backward (GB/s = two reads + one write)", result["backward"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
