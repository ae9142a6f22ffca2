"""What does launching the product early (programmatic dependent launch) buy, shape by shape?

A kernel launched the usual way is placed on the multiprocessors only once the kernel before
it on the stream has ended, and the gap between the two is paid on every call: for a product
of ten microseconds, a tenth of it or more. Launched early (``reference_matmul.EARLY_LAUNCH``,
Hopper and later, Triton 3.4 and later), its programs are placed as the kernel before leaves,
and each waits there (``gdc_wait``) until that kernel's writes are seen, before reading
anything: the product is the same, only the gap shrinks.

The gap shrinks most where the kernel before lets the next launch early too, as the
reference does (``gdc_launch_dependents``), which is what back-to-back products in the bench
are. A kernel that does not (most of torch's) gives the next its place only when it ends.
So each product is timed two ways, the bench's way (a CUDA graph of back-to-back calls, over
copies of the inputs too large together for L2):

- ``alone``: calls back to back, as ``python -m learning.bench matmul`` times them;
- ``after torch``: each call after a small torch kernel (one float added to), minus that
  kernel's own time timed alone: the product where the kernel before it does not signal;

for torch.matmul and for the reference's chosen row, launched early and not.

    PYTHONPATH=. python lab/probes/matmul_early_probe.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json

import torch

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench import rowwise
from learning.bench.rowwise import environment

SHAPES = ((1000, 1000, 1000), (8, 4096, 4096), (1024, 1024, 1024), (2048, 2048, 2048),
          (4096, 4096, 512), (4096, 4096, 4096))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dtypes", default="fp16,bf16")
    options = parser.parse_args()
    env = environment()
    ceiling = rowwise.copy_ceiling(False)
    one = torch.zeros(1, device="cuda")
    rows = []
    for m, n, k in SHAPES:
        for dname in options.dtypes.split(","):
            case = bench.make_case(m, n, k, dname)
            a, b = case["args"]
            inputs = bench.input_copies(a, b, env.get("l2_bytes"))
            rm.forget_choices()
            rm.matmul(a, b)
            config = rm.chosen_config(a, b)
            runs = {"torch.matmul": torch.matmul,
                    "reference, early": rm._Plan(a, b, config, early=True),
                    "reference, not early": rm._Plan(a, b, config, early=False)}
            for name, run in runs.items():
                x, y = inputs[0]
                error = bench.relative_error(run(x, y)[case["picked"]], case["ref"])
                assert error <= bench.NORM_TOLERANCES[dname], f"{name}: error {error:.2e}"
            moved = bench.product_bytes(m, n, k, dname)
            for round_ in range(options.rounds):  # every run once a round: drift shared
                lone = bench.device_us(lambda a, b: one.add_(1), inputs, quick=False)
                for name, run in runs.items():
                    alone = bench.device_us(run, inputs, quick=False)
                    after = bench.device_us(lambda a, b, run=run: (one.add_(1), run(a, b)),
                                            inputs, quick=False) - lone
                    rows.append({"shape": [m, n, k], "dtype": dname, "run": name,
                                 "round": round_, "config": config.label, "alone_us": alone,
                                 "after_torch_us": after, "small_kernel_us": lone,
                                 "share_of_ceiling": moved / (alone * 1e-6) / 1e9 / ceiling})
            if options.json:
                with open(options.json, "w", encoding="utf-8") as out:
                    json.dump({"env": env, "timing": bench.TIMING, "copy_ceiling_gbps": ceiling,
                               "command": "python lab/probes/matmul_early_probe.py",
                               "rows": rows}, out, indent=1)
            torch.cuda.empty_cache()
    print(f"\ndevice us per call, median of {options.rounds} rounds (range); ratio: torch's "
          "time over the row's, same way")
    print(f"{'shape':>16} {'dtype':>5} {'run':>21} {'alone':>20} {'ratio':>5} "
          f"{'after torch':>20} {'ratio':>5} {'share':>5}")
    for m, n, k in SHAPES:
        for dname in options.dtypes.split(","):
            mine = [r for r in rows if r["shape"] == [m, n, k] and r["dtype"] == dname]
            med = {}
            for name in ("torch.matmul", "reference, early", "reference, not early"):
                runs = [r for r in mine if r["run"] == name]
                med[name] = {key: sorted(r[key] for r in runs) for key in
                             ("alone_us", "after_torch_us", "share_of_ceiling")}
            for name, got in med.items():
                alone, after = got["alone_us"], got["after_torch_us"]
                mid = len(alone) // 2
                torch_alone = med["torch.matmul"]["alone_us"][mid]
                torch_after = med["torch.matmul"]["after_torch_us"][mid]
                print(f"{m}x{n}x{k:<6} {dname:>5} {name:>21} "
                      f"{alone[mid]:6.2f} ({alone[0]:5.2f}-{alone[-1]:5.2f}) "
                      f"{torch_alone / alone[mid]:5.2f} "
                      f"{after[mid]:6.2f} ({after[0]:5.2f}-{after[-1]:5.2f}) "
                      f"{torch_after / after[mid]:5.2f} {got['share_of_ceiling'][mid]:5.2f}")


if __name__ == "__main__":
    main()
