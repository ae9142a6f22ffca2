"""Measure the facts the lessons state about Triton's float32 arithmetic on a GPU.

    PYTHONPATH=. python lab/probes/lesson_facts.py --out lab/results/lesson_facts.json   # a GPU
    PYTHONPATH=. python lab/probes/lesson_facts.py --smoke --out /tmp/facts.json  # the interpreter

Three measurements, each written to one JSON file with the device, versions and date, which
``python -m learning.computed`` turns into the lessons' tables (learning/explainers/facts.py):

1. exp_error (lesson 08): how far ``tl.exp(x)`` and the reference kernels' form
   ``tl.exp2(x * log2(e))`` are from float64's exp, in units in the last place (ulp: the
   float32 spacing at the true value), for every float32 x in [-87, 0], reported as the
   largest error on [-10, 0], [-20, 0], [-40, 0] and [-87, 0]; and which PTX instructions
   the two compiled to.
2. underflow (workshop A1, lesson 04): for every float32 x in [-105, -85], where each way of
   computing exp(x) starts giving 0: the two forms above, float32's correctly rounded exp,
   and triton_kernels.softmax itself on rows [0, x, -inf, ...] (whose second output is
   exp(x) / (1 + exp(x)), which is exp(x) in float32), one row per x, through each of its
   float32 kernels.
3. num_warps (lesson 08): the same 512 x 8192 float32 input through lesson 08's kernel
   (triton_kernels._softmax) with 4, 8, 16 and 32 warps, and through the looped and
   split-row kernels: how many outputs differ in any bit from 4 warps, and how far each is
   from float64.

``--smoke`` runs the same code in Triton's interpreter on a few values (a strided subset of
the inputs, 8 x 256 for the warps), so that a test can prove it runs; the interpreter ignores
num_warps and computes exp with numpy, so its numbers are not the GPU's. The table printed
last is the short version of the JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import struct
import sys
import time
import warnings
from pathlib import Path

# triton.language, imported by main() once the mode is chosen: the interpreter needs
# TRITON_INTERPRET set before Triton's own library functions (tl.max, ...) are defined
tl = None

EXP_RANGES = (10.0, 20.0, 40.0, 87.0)  # |x| bounds of the ranges [-r, 0]
UNDERFLOW_SCAN = (85.0, 105.0)  # |x| from, to
WARPS = (4, 8, 16, 32)
WARPS_SHAPE = (512, 8192)
SMOKE_WARPS_SHAPE = (8, 256)
CHUNK = 2**25  # float32 inputs per step of the exhaustive scan (about 1 GiB of temporaries)
SMALLEST_NORMAL = 2.0**-126


def _exp_values(out_ptr, in_ptr, n, BASE2: tl.constexpr, BLOCK: tl.constexpr):
    """out = exp(in) for n float32 values: tl.exp(x), or with BASE2 the reference kernels'
    tl.exp2(x * log2(e)). Decorated with triton.jit in main(), once the mode is chosen."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(in_ptr + offsets, mask=mask, other=0.0)
    if BASE2:
        y = tl.exp2(x * 1.4426950408889634)  # log2(e), as triton_kernels._LOG2E
    else:
        y = tl.exp(x)
    tl.store(out_ptr + offsets, y, mask=mask)


def _bits(value: float) -> int:
    """The float32 bit pattern of a non-negative value, as an int."""
    return struct.unpack("<i", struct.pack("<f", value))[0]


def negatives(low: float, high: float, step: int, device: str, start: int = 0, count=None):
    """-u for every float32 u in [low, high] (every ``step``-th one), as a float32 tensor:
    the bit patterns of non-negative floats increase with their value, so an arange of them
    enumerates the floats in order. ``start``, ``count``: a window of that enumeration."""
    import torch

    first, last = _bits(low), _bits(high) + 1
    first += start * step
    stop = last if count is None else min(last, first + count * step)
    return -torch.arange(first, stop, step, dtype=torch.int32, device=device).view(torch.float32)


def exp_launch(kernel, x, base2: bool):
    """(exp(x) by the kernel, the compiled kernel or None in the interpreter)."""
    import torch

    out = torch.empty_like(x)
    block = 1024
    grid = (-(-x.numel() // block),)
    compiled = kernel[grid](out, x, x.numel(), BASE2=base2, BLOCK=block)
    return out, compiled


def ulp_error(y, x):
    """|y - exp(x)| in units of the float32 spacing at exp(x) (float64 for the true value)."""
    import torch

    exact = torch.exp(x.double())
    _, exponent = torch.frexp(exact)  # exact = m * 2**exponent, m in [0.5, 1)
    # the float32 spacing in [2**(e-1), 2**e) is 2**(e-24); below the normals it is 2**-149
    spacing = torch.pow(2.0, (exponent - 24).clamp(min=-149).double())
    return (y.double() - exact).abs() / spacing


def ptx_instructions(compiled) -> dict | None:
    """The ex2 instructions a compiled kernel uses, and whether it multiplies by log2(e)."""
    import re

    if compiled is None or not hasattr(compiled, "asm") or "ptx" not in compiled.asm:
        return None
    ptx = compiled.asm["ptx"]
    return {"ex2": sorted(set(re.findall(r"\bex2\.[a-z0-9.]+", ptx))),
            "multiplies_by_log2e": re.search(r"0f3fb8aa3b", ptx, re.IGNORECASE) is not None}


def measure_exp_error(kernel, device: str, step: int) -> dict:
    """The largest ulp error of tl.exp and tl.exp2(x * log2(e)) on each range [-r, 0]."""
    import torch

    worst = {(form, r): (-1.0, 0.0) for form in ("exp", "exp2") for r in EXP_RANGES}
    compiled = {}
    total = (_bits(max(EXP_RANGES)) + 1 + step - 1) // step
    done = 0
    while done < total:
        x = negatives(0.0, max(EXP_RANGES), step, device, start=done, count=CHUNK)
        done += x.numel()
        for form in ("exp", "exp2"):
            y, compiled[form] = exp_launch(kernel, x, form == "exp2")
            err = ulp_error(y, x)
            for r in EXP_RANGES:
                inside = torch.where(x >= -r, err, torch.full_like(err, -1.0))
                at = int(torch.argmax(inside))
                value = float(inside[at])
                if value > worst[(form, r)][0]:
                    worst[(form, r)] = (value, float(x[at]))
    ranges = [{"low": -r, "high": 0.0,
               "exp_max_ulp": worst[("exp", r)][0], "exp_max_at": worst[("exp", r)][1],
               "exp2_max_ulp": worst[("exp2", r)][0], "exp2_max_at": worst[("exp2", r)][1]}
              for r in EXP_RANGES]
    return {"inputs": "every float32 in [-87, 0]" if step == 1 else
                      f"one float32 in {step} of [-87, 0]",
            "count": total, "ranges": ranges,
            "ptx": {form: ptx_instructions(compiled.get(form)) for form in ("exp", "exp2")}}


def _threshold(route: str, x, y, kernel: str | None = None) -> dict:
    """Where y = exp(x) (x running from -85 down to -105) stops being nonzero."""
    import torch

    nonzero = y > 0
    subnormal = nonzero & (y < SMALLEST_NORMAL)
    row = {"route": route, "kernel": kernel,
           "last_nonzero": float(x[nonzero].min()) if bool(nonzero.any()) else None,
           "first_zero": float(x[~nonzero].max()) if bool((~nonzero).any()) else None,
           "subnormal_results": int(subnormal.sum()),
           "smallest_result": float(y[nonzero].min()) if bool(nonzero.any()) else None}
    assert not bool(torch.isnan(y).any()), f"{route}: NaN in the underflow scan"
    return row


def measure_underflow(kernel, tk, device: str, step: int) -> dict:
    """Each route's last nonzero exp(x) on [-105, -85]."""
    import torch

    x = negatives(*UNDERFLOW_SCAN, step, device)  # -85 down to -105
    routes = [
        _threshold("float32 exp, correctly rounded", x, torch.exp(x.double()).float()),
        _threshold("tl.exp(x)", x, exp_launch(kernel, x, False)[0]),
        _threshold("tl.exp2(x * log2(e))", x, exp_launch(kernel, x, True)[0]),
    ]
    # rows [0, x, -inf, ...]: the second output is exp(x) / (1 + exp(x)) = exp(x) in float32
    from lab import production as fast  # after the mode was chosen, like tk

    plans = [(None, None, 2), ("single_block", None, 2), ("looped", 32, 64)]
    if device == "cuda":  # the interpreter cannot run a row's pieces at once
        plans.append(("split_row", 32, 64))
    for strategy, block, width in plans:
        rows = torch.full((x.numel(), width), -float("inf"), dtype=torch.float32, device=device)
        rows[:, 0] = 0.0
        rows[:, 1] = x
        out = tk.softmax(rows, strategy=strategy, block=block)
        plan = fast._plan("softmax", width, strategy, block, fast._max_pieces(rows.device), 4)
        routes.append(_threshold("triton_kernels.softmax", x, out[:, 1], _kernel_name(plan)))
        del rows, out
    return {"inputs": "every float32 in [-105, -85]" if step == 1 else
                      f"one float32 in {step} of [-105, -85]",
            "count": x.numel(), "smallest_normal": SMALLEST_NORMAL, "routes": routes}


def _kernel_name(plan) -> str:
    if plan.strategy == "single_block":
        return "_softmax_pipelined" if plan.pipelined else \
            "_softmax_one_pass" if plan.one_pass else "_softmax"
    return f"_softmax_{plan.strategy}"


def measure_num_warps(tk, device: str, shape: tuple[int, int]) -> dict:
    """Outputs that differ in any bit from num_warps=4, for lesson 08's kernel and others."""
    import torch

    from lab import production as fast  # after the mode was chosen, like tk

    n_rows, n_cols = shape
    torch.manual_seed(0)
    x = torch.randn(n_rows, n_cols).to(device)  # drawn on the CPU: the same input everywhere
    reference = torch.softmax(x.double(), dim=-1)
    block = 1 << (n_cols - 1).bit_length()  # the next power of two >= n_cols

    def lesson_08(warps):
        out = torch.empty_like(x)
        tk._softmax[(n_rows,)](out, x, out.stride(0), x.stride(0), n_cols, BLOCK=block,
                               num_warps=warps)
        return out

    base = lesson_08(WARPS[0])
    # (kernel, how it was launched, launch): the first repeats the baseline's launch
    launches = [("_softmax", f"num_warps={w}" + (", again" if w == WARPS[0] else ""),
                 lambda w=w: lesson_08(w)) for w in WARPS]
    looped = fast._plan("softmax", n_cols, "looped", None, 0, 4)
    launches.append(("_softmax_looped", f"chunks of {looped.block}, {looped.num_warps} warps",
                     lambda: tk.softmax(x, strategy="looped")))
    if device == "cuda":  # the interpreter cannot run a row's pieces at once
        piece = n_cols // 4
        split = fast._plan("softmax", n_cols, "split_row", piece, fast._max_pieces(x.device), 4)
        detail = f"4 pieces of {piece}, {split.num_warps} warps"
        for again in ("", ", again"):
            launches.append(("_softmax_split_row", detail + again,
                             lambda: tk.softmax(x, strategy="split_row", block=piece)))
    rows = []
    for kernel, detail, launch in launches:
        out = launch()
        differ = int((out.view(torch.int32) != base.view(torch.int32)).sum())
        error = float(((out.double() - reference).abs() / reference).max())
        rows.append({"kernel": kernel, "launch": detail, "differ": differ, "of": out.numel(),
                     "max_rel_error": error})
    return {"shape": [n_rows, n_cols], "dtype": "float32", "input": "torch.randn, seed 0",
            "baseline": {"kernel": "_softmax", "launch": f"num_warps={WARPS[0]}"},
            "baseline_max_rel_error": float(((base.double() - reference).abs()
                                             / reference).max()),
            "rows": rows}


def environment(interpret: bool) -> dict:
    import torch
    import triton

    env = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
           "triton": triton.__version__, "python": platform.python_version()}
    if interpret:
        env.update(device=f"CPU ({platform.machine()}), Triton's interpreter", mode="interpreter")
    else:
        props = torch.cuda.get_device_properties(0)
        env.update(device=torch.cuda.get_device_name(0), sms=props.multi_processor_count,
                   cuda=torch.version.cuda, mode="compiled")
    return env


def print_table(result: dict) -> None:
    print(f"\n{result['env']['device']}, torch {result['env']['torch']}, "
          f"triton {result['env']['triton']}, {result['env']['date']}")
    exp = result["exp_error"]
    print(f"\nlargest error against float64, ulp ({exp['inputs']})")
    print(f"{'x in':<14} {'tl.exp':>8} {'tl.exp2(x*log2e)':>17}")
    for r in exp["ranges"]:
        label = f"[{r['low']:g}, 0]"
        print(f"{label:<14} {r['exp_max_ulp']:8.2f} {r['exp2_max_ulp']:17.2f}")
    for form, ptx in exp["ptx"].items():
        if ptx:
            print(f"  {form}: {', '.join(ptx['ex2'])}; multiply by log2(e): "
                  f"{ptx['multiplies_by_log2e']}")
    print(f"\nunderflow ({result['underflow']['inputs']})")
    print(f"{'route':<44} {'last nonzero':>13} {'first zero':>11} {'subnormal':>9}")
    for r in result["underflow"]["routes"]:
        last = "-" if r["last_nonzero"] is None else f"{r['last_nonzero']:.4f}"
        first = "-" if r["first_zero"] is None else f"{r['first_zero']:.4f}"
        route = f"{r['route']}: {r['kernel']}" if r["kernel"] else r["route"]
        print(f"{route:<44} {last:>13} {first:>11} {r['subnormal_results']:>9}")
    warps = result["num_warps"]
    base = warps["baseline"]
    print(f"\n{warps['shape'][0]} x {warps['shape'][1]} float32: outputs differing bitwise from "
          f"{base['kernel']}, {base['launch']}")
    for r in warps["rows"]:
        launch = f"{r['kernel']}, {r['launch']}"
        print(f"{launch:<52} {r['differ']:>10,} of {r['of']:,}  "
              f"max rel err {r['max_rel_error']:.1e}")


def output_path(option: str | None, environ) -> Path:
    """--out if given, else $OUT/lesson_facts.json if OUT is set, else lab/results/."""
    if option:
        return Path(option)
    if environ.get("OUT"):
        return Path(environ["OUT"]) / "lesson_facts.json"
    return Path(__file__).resolve().parents[1] / "results" / "lesson_facts.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None,
                        help="the JSON to write (default: $OUT/lesson_facts.json if OUT is set, "
                             "else lab/results/lesson_facts.json)")
    parser.add_argument("--smoke", action="store_true",
                        help="a few values in Triton's interpreter on the CPU (for the tests)")
    args = parser.parse_args(argv)
    from learning.grader import mode as kernel_mode

    mode = kernel_mode.select(force_interpret=args.smoke)
    if args.smoke:  # the interpreter computes both sides of a tl.where: (-inf) - (-inf) warns
        warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
    elif mode.interpret:
        print("needs a CUDA GPU (or --smoke, which runs a few values in the interpreter)",
              file=sys.stderr)
        return 2
    out_path = output_path(args.out, os.environ)

    global tl
    import triton
    import triton.language as tl

    import triton_kernels as tk

    kernel = triton.jit(_exp_values)
    device = mode.device
    # the smoke run takes every 2**20th float32 of [-87, 0] and every 8192nd of [-105, -85]
    exp_step, scan_step = (2**20, 8192) if args.smoke else (1, 1)
    started = time.perf_counter()
    result = {"env": environment(mode.interpret),
              "command": " ".join(["lab/probes/lesson_facts.py", *(argv if argv is not None
                                                               else sys.argv[1:])]),
              "smoke": args.smoke}
    result["exp_error"] = measure_exp_error(kernel, device, exp_step)
    result["underflow"] = measure_underflow(kernel, tk, device, scan_step)
    result["num_warps"] = measure_num_warps(tk, device,
                                            SMOKE_WARPS_SHAPE if args.smoke else WARPS_SHAPE)
    result["seconds"] = round(time.perf_counter() - started, 1)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out_path} in {result['seconds']} s")
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
