"""Time the Gluon split-row kernel (pieces waiting in shared memory) against the one it replaced.

    PYTHONPATH=. python3 lab/probes/split_shared_probe.py --json lab/results/split_shared.json
    PYTHONPATH=. python3 lab/probes/split_shared_probe.py --cases bf16:65536 --configs 16384:2048:4

lab.gluon._softmax_split_shared keeps each piece of a wide row in shared memory in
its own dtype while the row's pieces exchange their partial maxima and sums, where
_softmax_split_row keeps it in registers as float32. This times it for every
(piece, chunk, warps) in --configs, on 1 GiB inputs, after checking each against float64
(learning.bench's checks), beside the plan for rows that kernel cannot copy (_softmax_split_row,
pieces in registers; at 32768 columns the one-program kernels). --variants adds
lab/probes/probe_gluon.py's variants and bounds. GPU only: Gluon has no interpreter.
"""

from __future__ import annotations

import argparse
import json
import sys

from learning.bench import rowwise

CASES = (("bf16", 65536), ("fp16", 65536), ("bf16", 131072), ("bf16", 262144),
         ("bf16", 1048576), ("fp32", 65536), ("fp32", 262144), ("fp32", 1048576),
         ("bf16", 32768))
# (columns per piece, columns per chunk, warps); 16-bit and float32 pieces alike
CONFIGS = ((8192, 2048, 4), (16384, 2048, 4), (16384, 4096, 4), (16384, 4096, 8),
           (32768, 4096, 4), (32768, 4096, 8), (65536, 4096, 8))


# How the first row of each case is named: the plan for rows that the shared-memory kernel
# cannot copy (runs before this name was chosen called it "shipped", which it then was).
REGISTERS = "registers"
# lab/probes/probe_gluon.py's flags, timed whatever their answer: no_exchange and no_exp give
# a wrong one, no_ticket the right one only while every program fits on the GPU at once.
# "persistent" (alone) names probe_gluon.split_shared_persistent instead, with as many programs
# per multiprocessor as its two slots of shared memory allow ("persistentN": N of them).
FLAGS = ("no_ticket", "no_exchange", "no_exp", "stream")
# the flags of lab/probes/probe_gluon.py timed without masks where the width allows, as shipped
TUNING = ("fold", "local", "no_bar", "words", "own")
# "sleepN" (with words): a poll waits N nanoseconds before the next
# "prefetchN": probe_gluon's PREFETCH, N tickets ahead (no masks: widths a multiple of the piece)
# "masked" (alone) runs the shipped kernel with EVEN=False where the row would allow True;
# "hybrid" (alone) names probe_gluon.split_hybrid, four chunks of each piece in registers


def shared_launch(piece: int, chunk: int, warps: int, flags: frozenset = frozenset()):
    import triton

    from lab import gluon as tg
    from lab import production as fast

    def launch(out, x):
        pieces = triton.cdiv(x.shape[1], piece)
        part, sync = fast._split_scratch(x.shape[0], pieces, 2, x.device)
        if "words" in flags:
            part.zero_()
        args = (out, x, out.stride(0), x.stride(0), x.shape[1], part, sync)
        constants = dict(PIECES=triton.next_power_of_2(pieces), PIECE=piece, CHUNK=chunk,
                         VEC=16 // x.element_size(), num_warps=warps)
        if not flags or flags == {"masked"}:
            even = x.shape[1] % piece == 0 and not flags
            return tg._softmax_split_shared[(x.shape[0] * pieces,)](*args, **constants,
                                                                     EVEN=even)
        import probe_gluon

        persistent = [f for f in flags if f.startswith("persistent")]
        if persistent:
            import torch

            props = torch.cuda.get_device_properties(x.device)
            per_sm = int(persistent[0][len("persistent"):] or 0) or max(
                1, props.shared_memory_per_multiprocessor // (2 * piece * x.element_size() + 2048))
            grid = (min(x.shape[0] * pieces, per_sm * props.multi_processor_count),)
            return probe_gluon.split_shared_persistent[grid](
                out, x, out.stride(0), x.stride(0), x.shape[0], x.shape[1], part, sync,
                **constants)

        if flags == {"hybrid"}:  # 16-bit rows, widths a multiple of the piece only
            if x.element_size() != 2 or x.shape[1] % piece or piece < 5 * chunk:
                raise ValueError("hybrid: 16-bit rows a multiple of the piece, piece >= 5 chunks")
            return probe_gluon.split_hybrid[(x.shape[0] * pieces,)](*args, **constants)

        tuned = {f.upper(): f in flags for f in TUNING}
        sleep = [int(f[len("sleep"):]) for f in flags if f.startswith("sleep")]
        ahead = [int(f[len("prefetch"):]) for f in flags if f.startswith("prefetch")]
        if ahead and x.shape[1] % piece:
            raise ValueError("prefetch: widths a multiple of the piece only")
        return probe_gluon.split_shared_variant[(x.shape[0] * pieces,)](
            *args, **constants, **{f.upper(): f in flags for f in FLAGS}, **tuned,
            SLEEP=sleep[0] if sleep else 0, PREFETCH=ahead[0] if ahead else 0,
            n_rows=x.shape[0], EVEN=(any(tuned.values()) or bool(ahead))
            and x.shape[1] % piece == 0)
    return launch


def measure(ceiling: float, cases, configs, variants=((),)) -> list[dict]:
    import torch

    import triton_kernels as tk
    from lab import production as fast

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    rows = []
    for dname, width in cases:
        dtype = rowwise.torch_dtype(dname)
        case = rowwise.make_case(rowwise.KERNELS["softmax"],
                                 rowwise.GIB // (width * dtype.itemsize), width, dname)
        x = case["args"][0]
        out = torch.empty_like(x)
        # the plan for rows the shared-memory kernel cannot copy: the kernel it replaced
        plan = fast._plan("softmax", width, max_pieces=sms, itemsize=dtype.itemsize,
                        paired=dtype.itemsize == 2, shared=False)
        found = [(f"{REGISTERS} ({plan.strategy}, {plan.block}, {plan.num_warps} warps)",
                  lambda o, a, p=plan: tk._launch_softmax(o, a, p))]
        for piece, chunk, warps in configs:
            if piece * dtype.itemsize > smem or -(-width // piece) > sms or chunk > piece:
                continue
            for flags in variants:
                found.append((" ".join([f"shared {piece}/{chunk}, {warps} warps", *flags]),
                              shared_launch(piece, chunk, warps, frozenset(flags))))
        for name, launch in found:
            out.fill_(float("nan"))
            row = {"variant": name, "dtype": dname, "cols": width}
            try:
                compiled = launch(out, x)
                torch.cuda.synchronize()
                ok, err = rowwise.compare(out[case["picked"]], case["ref"], dname)
                row.update(correct=ok, max_abs_err=err)
                wrong = any(f in name for f in FLAGS if f != "stream")
                row["checked"] = not wrong
                if ok or wrong:
                    row["gbps"] = rowwise.gbps(case["nbytes"], rowwise.median_ms(
                        lambda f=launch, o=out, a=x: f(o, a)))
                    row["frac"] = row["gbps"] / ceiling
                if compiled is not None:
                    row.update(registers=compiled.n_regs, spills=compiled.n_spills)
            except Exception as error:  # a variant the compiler rejects
                row["error"] = f"{type(error).__name__}: {error}"[:300]
            print(json.dumps(row), flush=True)
            rows.append(row)
        del x, out, case
        torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--cases", default=None, metavar="DTYPE:COLS,...")
    ap.add_argument("--configs", default=None, metavar="PIECE:CHUNK:WARPS,...")
    ap.add_argument("--variants", default=None, metavar="FLAG+FLAG,...",
                    help="lab/probes/probe_gluon.py's flags to time, e.g. none,no_exchange+no_exp "
                         f"(flags: {', '.join(FLAGS + TUNING)}; default: none, the shipped kernel)")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: Gluon kernels have no interpreter", file=sys.stderr)
        return 2
    cases = CASES if not args.cases else tuple(
        (item.split(":")[0], int(item.split(":")[1])) for item in args.cases.split(","))
    configs = CONFIGS if not args.configs else tuple(
        tuple(int(v) for v in item.split(":")) for item in args.configs.split(","))
    variants = ((),) if not args.variants else tuple(
        () if item == "none" else tuple(item.split("+")) for item in args.variants.split(","))
    result = {"env": rowwise.environment(),
              "command": " ".join(["lab/probes/split_shared_probe.py", *(argv or sys.argv[1:])])}
    result["copy_gbps"] = rowwise.copy_ceiling()
    print(f"copy ceiling {result['copy_gbps']:.0f} GB/s", flush=True)
    result["rows"] = measure(result["copy_gbps"], cases, configs, variants)
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\n{'variant':<60} {'dtype':>5} {'cols':>7} {'GB/s':>6} {'of copy':>7} regs")
    for r in result["rows"]:
        if "gbps" in r:
            print(f"{r['variant']:<60} {r['dtype']:>5} {r['cols']:>7} {r['gbps']:6.0f} "
                  f"{r['frac']:7.3f} {r.get('registers', '')}")
        else:
            why = r.get("error", f"wrong, largest error {r.get('max_abs_err', 0):.2g}")
            print(f"{r['variant']:<60} {r['dtype']:>5} {r['cols']:>7} {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
