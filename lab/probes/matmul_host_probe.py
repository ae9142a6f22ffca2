"""Where the reference matmul's host time per call goes, piece by piece.

    PYTHONPATH=. python lab/probes/matmul_host_probe.py --json lab/results/matmul_host_probe.json

For each product (1024 cubed, 1000 cubed, the decode step 8 x 4096 x 4096 and 4097 cubed, in
bfloat16 by default), after its first call has chosen: each piece called CALLS times back to
back without synchronising (FEW_CALLS for 4097 cubed, whose kernel runs for a third of a
millisecond: the GPU's queue of launches never fills), the host's time per call reported (the
clock stops before the final synchronize). The pieces: the plan's key and lookup, allocating C
(three ways), Triton's runner of the compiled kernel (``compiled[grid]``: what a remembered
product ran before the course's launcher), the course's launcher of it (what a remembered
product runs now; where the kernel takes tensor descriptors, also the same launcher encoding
them on every call, as Triton's wrapper does, instead of once per address), Triton's usual
launch of the same kernel with every argument given (what the first call runs), the whole
reference call (for 4097 cubed also the copies of A and B into aligned rows, one launch of
``_pad_rows`` into the buffers the plan keeps), the whole call with ``config=`` (checks and a
new plan every time), and torch.matmul. Three rounds; the median and the range.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import reference_matmul as rm
from learning.bench.rowwise import environment

CALLS = 2000
FEW_CALLS = 60
# 1000 cubed: a product whose plan takes tensor descriptors, made on every call; 4097 cubed:
# one whose operands are copied first
SIZES = ((1024, 1024, 1024), (1000, 1000, 1000), (8, 4096, 4096), (4097, 4097, 4097))


def host_us(fn, calls: int = CALLS) -> float:
    for _ in range(min(20, calls)):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def pieces(m: int, n: int, k: int, dtype) -> tuple[str, list]:
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    rm.matmul(a, b)  # the first call chooses
    plan = rm._PLANS[rm._key(a, b)]
    c = torch.empty((m, n), dtype=dtype, device="cuda")
    # what the kernel takes past C: the split programs' workspace and counters, where it does
    scratch = () if plan.config.persistent else plan._scratch() if plan.splits > 1 else (c, c)
    launch = plan.matmul
    assert launch.direct is not None, "this Triton's compiled kernel has no launcher of its own"
    operands, extra = (a, b), []
    if plan.pad is not None:  # the operands are copied first, into buffers the plan keeps
        view_a, view_b = operands = plan._buffers()
        assert view_a is not None and view_b is not None, "the probe expects both copied"
        extra = [("copying A and B into aligned rows (_pad_rows, one launch)",
                  lambda: plan.pad(a, view_a, b, view_b))]
    if plan.describe is not None:  # the kernel takes tensor descriptors of A and B
        def described():
            return plan.describe[0](operands[0]), plan.describe[1](operands[1])

        extra.append(("making the two tensor descriptors", described))
    tensors = (c, *operands, *scratch)  # what the course's launcher takes: tensors
    given = tuple(launch.describe[i](t) if i in launch.describe else t  # what Triton's take
                  for i, t in enumerate(tensors))
    compiled = launch.kernel[launch.grid](*given, *launch.fixed, **launch.options)
    runner = compiled[launch.grid]
    if launch.encodes_once:  # the same launcher, encoding both descriptors on every call
        kept, rm.ENCODED_ON = rm.ENCODED_ON, ()
        every_call = rm._direct_launcher(compiled, launch.grid, launch.device, launch.describe)
        rm.ENCODED_ON = kept
        extra.append(("the course's launcher, descriptors encoded on every call",
                      lambda: every_call(tensors, launch.fixed)))
    return plan.config.label, [
        ("the plan's key and lookup", lambda: rm._PLANS.get(rm._key(a, b))),
        ("allocating C (torch.empty)", lambda: torch.empty((m, n), dtype=dtype, device="cuda")),
        ("allocating C (torch.empty, the plan's device)",
         lambda: torch.empty(plan.shape, dtype=plan.dtype, device=plan.device)),
        ("allocating C (a.new_empty)", lambda: a.new_empty((m, n))),
        *extra,
        ("Triton's runner of the compiled kernel (compiled[grid])",
         lambda: runner(*given, *launch.fixed)),
        ("the course's launcher of the compiled kernel",
         lambda: launch.direct(tensors, launch.fixed)),
        ("Triton's usual launch, every argument given",
         lambda: launch.kernel[launch.grid](*given, *launch.fixed, **launch.options)),
        ("the whole reference call", lambda: rm.matmul(a, b)),
        ("the whole call with config= (checks and a new plan each time)",
         lambda: rm.matmul(a, b, config=plan.config)),
        ("torch.matmul", lambda: torch.matmul(a, b)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    options = parser.parse_args()
    dtype = getattr(torch, options.dtype)
    rows, configs = [], {}
    for m, n, k in SIZES:
        label, named = pieces(m, n, k, dtype)
        configs[f"{m}x{n}x{k}"] = label
        calls = FEW_CALLS if m * n * k > rm.PAD_MIN_MACS * 64 else CALLS
        for round_ in range(3):
            for name, fn in named:
                rows.append({"round": round_, "M": m, "N": n, "K": k, "piece": name,
                             "host_us": host_us(fn, calls)})
    print("| M x N x K | piece | host us per call, median of 3 rounds | lowest to highest |")
    print("|---:|---:|---:|---:|")
    by_piece: dict = {}
    for r in rows:
        by_piece.setdefault((f"{r['M']}x{r['N']}x{r['K']}", r["piece"]), []).append(r["host_us"])
    for (size, name), values in by_piece.items():
        values.sort()
        print(f"| {size} | {name} | {values[1]:.1f} | {values[0]:.1f} to {values[-1]:.1f} |")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as out:
            json.dump({"env": environment(), "dtype": options.dtype, "configs": configs,
                       "command": "python lab/probes/matmul_host_probe.py", "rows": rows},
                      out, indent=1)


if __name__ == "__main__":
    main()
