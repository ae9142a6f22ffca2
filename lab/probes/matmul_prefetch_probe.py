"""What does asking for the operands into L2 before the early launch's wait buy?

An early-launched product (``reference_matmul.EARLY_LAUNCH``) is placed on the multiprocessors
while the kernel before it still runs, and waits there (``gdc_wait``) before reading anything,
since that kernel may write A or B. Its first loads then go to memory only once that kernel has
ended. With ``PREFETCH`` it first asks for its share of A and B into L2 (``_into_l2``): only
L2, where every write of the kernel before lands, so the product reads the same values, but
the reads from memory overlap the end of the kernel before.

Each product, for a few of its tuning table's rows, with the prefetch and without, timed the
bench's way (a CUDA graph of back-to-back calls over copies of the inputs too large together
for L2) and after a small torch kernel that does not let the next launch early (its own time
taken off), beside torch.matmul; every run once a round.

    PYTHONPATH=. python lab/probes/matmul_prefetch_probe.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench import rowwise
from learning.bench.rowwise import environment

SHAPES = ((1000, 1000, 1000), (8, 4096, 4096), (1024, 1024, 1024))
#: the rows timed beside the choice's, where they can run
ROWS = {
    (1000, 1000, 1000): (rm.TileConfig(64, 128, 64, 8, 4, 4, tma=True),
                         rm.TileConfig(128, 64, 64, 8, 4, 4, tma=True),
                         rm.TileConfig(64, 128, 128, 8, 4, 4, tma=True)),
    (8, 4096, 4096): (rm.TileConfig(16, 32, 128, 1, 4, 6),
                      rm.TileConfig(16, 32, 256, 1, 4, 4, tma=True),
                      rm.TileConfig(16, 32, 512, 1, 4, 4, tma=True)),
    (1024, 1024, 1024): (rm.TileConfig(64, 128, 128, 8, 4, 4, tma=True),),
}

#: shares of each operand asked for, from its first element (``PREFETCH_SHARE``)
SHARES = (1.0, 0.5, 0.25)


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
            chosen = rm.chosen_config(a, b)
            configs = [chosen] + [row for row in ROWS[(m, n, k)] if row != chosen]
            runs = {"torch.matmul": (torch.matmul, "-")}
            for config in configs:
                tag = "choice" if config == chosen else "row"
                for share in SHARES:
                    rm.PREFETCH_SHARE = share
                    runs[f"{tag} {config.label}, prefetched {share:g}"] = (
                        rm._Plan(a, b, config, early=True, prefetch=True), config.label)
                rm.PREFETCH_SHARE = SHARES[0]
                runs[f"{tag} {config.label}, not prefetched"] = (
                    rm._Plan(a, b, config, early=True, prefetch=False), config.label)
            for name, (run, _) in runs.items():
                x, y = inputs[0]
                error = bench.relative_error(run(x, y)[case["picked"]], case["ref"])
                assert error <= bench.NORM_TOLERANCES[dname], f"{name}: error {error:.2e}"
            moved = bench.product_bytes(m, n, k, dname)
            for round_ in range(options.rounds):  # every run once a round: drift shared
                lone = bench.device_us(lambda a, b: one.add_(1), inputs, quick=False)
                for name, (run, label) in runs.items():
                    alone = bench.device_us(run, inputs, quick=False)
                    row = {"shape": [m, n, k], "dtype": dname, "run": name, "config": label,
                           "round": round_, "alone_us": alone,
                           "share_of_ceiling": moved / (alone * 1e-6) / 1e9 / ceiling}
                    if name == "torch.matmul" or name.startswith("choice"):
                        row["after_torch_us"] = bench.device_us(
                            lambda a, b, run=run: (one.add_(1), run(a, b)), inputs,
                            quick=False) - lone
                    rows.append(row)
            if options.json:
                with open(options.json, "w", encoding="utf-8") as out:
                    json.dump({"env": env, "timing": bench.TIMING, "copy_ceiling_gbps": ceiling,
                               "command": "python lab/probes/matmul_prefetch_probe.py "
                                          + " ".join(sys.argv[1:]),
                               "rows": rows}, out, indent=1)
            torch.cuda.empty_cache()
    print(f"\ndevice us per call, median of {options.rounds} rounds (range); ratio: torch's "
          "time over the run's, timed the same way; share: of the copy ceiling")
    for m, n, k in SHAPES:
        for dname in options.dtypes.split(","):
            mine = [r for r in rows if r["shape"] == [m, n, k] and r["dtype"] == dname]
            names = list(dict.fromkeys(r["run"] for r in mine))
            ref = {}
            for key in ("alone_us", "after_torch_us"):
                got = sorted(r[key] for r in mine if r["run"] == "torch.matmul")
                ref[key] = got[len(got) // 2]
            print(f"{m}x{n}x{k} {dname}")
            for name in names:
                runs = [r for r in mine if r["run"] == name]
                line = f"  {name:<66}"
                for key in ("alone_us", "after_torch_us"):
                    got = sorted(r[key] for r in runs if key in r)
                    if got:
                        mid = got[len(got) // 2]
                        line += f" {mid:6.2f} ({got[0]:5.2f}-{got[-1]:5.2f}) {ref[key] / mid:4.2f}"
                share = sorted(r["share_of_ceiling"] for r in runs)
                print(line + f"  share {share[len(share) // 2]:.2f}")


if __name__ == "__main__":
    main()
