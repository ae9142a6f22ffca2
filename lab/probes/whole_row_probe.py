"""Probe why a 16-bit row of 32768 columns in one program stops short of the copy ceiling.

    PYTHONPATH=. python3 lab/probes/whole_row_probe.py --json lab/results/whole_row.json
    PYTHONPATH=. python3 lab/probes/whole_row_probe.py --smoke   # the kernels, in the interpreter

triton_kernels kept a 16-bit row of up to 32768 columns whole in one program of 32 warps
(_softmax_one_pass), and on an H200 that ran at 0.86 of the copy ceiling. The program holds
128 KiB of float32 values in registers, half the register file, so one program runs per
multiprocessor and its load, reductions and store follow one another with nothing to fill
the gaps. Each variant here attacks one suspected cause, and the last removes the
exponential altogether:

- pipelined: a persistent program per multiprocessor whose loop the compiler software-
  pipelines, loading the next rows into shared memory while it works on this one (16-bit rows
  are read as 32-bit words, and also as they are). The word form won at 32768 columns and
  became lab.production._softmax_pipelined: the "shipped" plan there, beside the one-pass
  kernel that rows which cannot be read as words still take;
- packed: the row held in registers as 16-bit pairs in 32-bit words, half the registers,
  unpacked twice (a runtime zero xor-ed in between stops the compiler from keeping the
  first unpacking alive);
- tiles: a maximum and then a sum over per-thread tiles (two reductions, no exponentials in
  the combine);
- mixed_exp: half of the exponentials computed by a polynomial on the FMA units instead of
  the special-function unit;
- no_exp: the one-pass kernel with exp2 replaced by an affine function. Its output is wrong
  and not checked; it is timed to bound what any change to its arithmetic could gain;
- split packed (rows wider than 32768 columns): the split-row kernel with each piece kept in
  registers as 16-bit pairs in 32-bit words while it waits for the row's other pieces, half
  the registers of its float32 values, so that twice the pieces fit on a multiprocessor
  (``--cases bf16:65536,...`` picks the widths; in the smoke test a row is one piece, since
  the interpreter runs one program at a time and a piece would wait for ever);
- looped (rows wider than 32768 columns, GPU only): triton_kernels._softmax_looped, which reads
  the row twice, with the loop pipeliner's stages and the programs per multiprocessor varied,
  so that the second read finds the row in L2 with enough loads in flight.

Every other variant is checked against float64 before it is timed (learning.bench's checks).
"""

from __future__ import annotations

import argparse
import json
import sys

from learning.bench import rowwise


def describe(plan) -> str:
    kind = " one-pass" if plan.one_pass else f" pipelined, {plan.stages} stages" \
        if plan.pipelined else ""
    return f"{plan.strategy}{kind}, {plan.num_warps} warps"


def variants(tk, pk, dname: str, width: int, sms: int) -> list[tuple[str, bool, object]]:
    """(name, checked, launch(out, x) -> the compiled kernel or None) for one dtype and width;
    ``tk`` is triton_kernels, ``pk`` the probe's kernels."""
    from lab import production as fast  # imported by tk already, after the mode was chosen

    block = 1 << (width - 1).bit_length()
    vec = 16 // (4 if dname == "fp32" else 2)
    itemsize = 4 if dname == "fp32" else 2
    plan = fast._plan("softmax", width, max_pieces=sms, itemsize=itemsize, paired=itemsize == 2)
    unpaired = fast._plan("softmax", width, max_pieces=sms, itemsize=itemsize)

    def plan_launch(p):
        def launch(out, x):
            tk._launch_softmax(out, x, p)
        return launch

    def persistent(stages, warps, words=True):
        def launch(out, x):
            grid = (min(x.shape[0], sms),)
            args = (out, x, out.stride(0), x.stride(0), x.shape[0], x.shape[1])
            if dname == "fp32" or not words:
                return pk.pipelined_rows[grid](*args, BLOCK=block, STAGES=stages,
                                               num_warps=warps)
            return fast._softmax_pipelined[grid](*args, NEG_INF_PAIR=fast._NEG_INF_PAIR[x.dtype],
                                                 BLOCK=block, STAGES=stages, num_warps=warps)
        return launch

    def per_row(kernel, warps, **constants):
        def launch(out, x):
            return kernel[(x.shape[0],)](out, x, out.stride(0), x.stride(0), x.shape[1],
                                         **constants, num_warps=warps)
        return launch

    def packed_row(warps):
        def launch(out, x):
            return pk.packed[(x.shape[0],)](out, x, out.stride(0), x.stride(0), x.shape[1], 0,
                                         BLOCK=block, VEC=4, NEG=fast._NEG_INF_PAIR[x.dtype],
                                         num_warps=warps)
        return launch

    def split(kernel_block, warps, packed=False):
        def launch(out, x):
            import triton  # here: the probe picks where kernels run before triton is imported

            pieces = triton.cdiv(x.shape[1], kernel_block)
            part, sync = fast._split_scratch(x.shape[0], pieces, 2, x.device)
            grid = (x.shape[0] * pieces,)
            if packed:
                return pk.split_packed[grid](
                    out, x, out.stride(0), x.stride(0), x.shape[1], part, sync, 0,
                    NEG=fast._NEG_INF_PAIR[x.dtype], PIECES=triton.next_power_of_2(pieces),
                    BLOCK=kernel_block, num_warps=warps)
            return fast._softmax_split_row[grid](
                out, x, out.stride(0), x.stride(0), x.shape[1], part, sync,
                PIECES=triton.next_power_of_2(pieces), BLOCK=kernel_block, num_warps=warps)
        return launch

    warps = 32 if block >= 32768 else 16
    found = [(f"shipped ({describe(plan)})", True, plan_launch(plan))]
    if width > 32768 or sms <= 2:  # rows split across programs (sms <= 2: the smoke test)
        piece = min(8192, block)
        found += [(f"looped, {b} columns, {w} warps, {per_sm}/SM, {st} stages", True,
                   plan_launch(fast.Plan("looped", b, num_warps=w, programs_per_sm=per_sm,
                                         stages=st)))
                  for b, w, per_sm, st in ((4096, 16, 1, 3), (4096, 16, 2, 3), (4096, 16, 1, 4),
                                           (8192, 16, 1, 3), (2048, 8, 2, 4), (4096, 8, 2, 3))
                  if sms > 2]
        if dname != "fp32":
            found += [(f"split packed, {b} columns, {w} warps", True, split(b, w, packed=True))
                      for b, w in ((piece, 4), (2 * piece, 4), (piece, 2))
                      if b <= block and -(-width // b) <= max(sms, 1)]
    if unpaired != plan:  # what rows that cannot be read as words take
        found.append((f"shipped, rows not in words ({describe(unpaired)})", True,
                      plan_launch(unpaired)))
    if dname == "fp32" and block <= 32768:  # 128 KiB a row: two stages at most
        found += [("pipelined, 2 stages", True, persistent(2, warps))]
    elif block <= 32768:
        found += [(f"pipelined, {s} stages, {w} warps", True, persistent(s, w))
                  for s, w in ((2, warps), (3, warps), (4, warps), (4, warps // 2))]
        found += [(f"pipelined 16-bit loads, {s} stages, {warps} warps", True,
                   persistent(s, warps, words=False)) for s in (3, 4)]
    if dname != "fp32" and block <= 65536:  # one program per row: no wider
        found += [(f"packed, {w} warps", True, packed_row(w))
                  for w in ((32,) if block >= 32768 else (16, 32))]
    if block <= 32768:
        found += [("tiles", True, per_row(pk.tiles, warps, BLOCK=block, VEC=vec)),
                  ("mixed_exp", True, per_row(pk.one_pass_variant, warps, BLOCK=block, VEC=vec,
                                              MODE=1)),
                  ("no_exp (not checked)", False, per_row(pk.one_pass_variant, warps, BLOCK=block,
                                                          VEC=vec, MODE=2))]
    return found


CASES = (("bf16", 32768), ("fp16", 32768), ("bf16", 16384), ("bf16", 65536), ("fp32", 32768))


def measure(tk, pk, ceiling: float, cases=CASES) -> list[dict]:
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for dname, width in cases:
        dtype = rowwise.torch_dtype(dname)
        case = rowwise.make_case(rowwise.KERNELS["softmax"],
                                 rowwise.GIB // (width * dtype.itemsize), width, dname)
        x = case["args"][0]
        out = torch.empty_like(x)
        for name, checked, launch in variants(tk, pk, dname, width, sms):
            out.fill_(float("nan"))
            row = {"variant": name, "dtype": dname, "cols": width, "checked": checked}
            try:
                compiled = launch(out, x)
                ok, err = rowwise.compare(out[case["picked"]], case["ref"], dname)
                row.update(correct=ok, max_abs_err=err)
                if ok or not checked:
                    row["gbps"] = rowwise.gbps(case["nbytes"], rowwise.median_ms(
                        lambda f=launch, o=out, a=x: f(o, a)))
                    row["frac"] = row["gbps"] / ceiling
                if compiled is not None:
                    row.update(registers=compiled.n_regs, spills=compiled.n_spills)
            except Exception as error:  # a variant the compiler rejects
                row["error"] = f"{type(error).__name__}: {error}"[:200]
            print(json.dumps(row), flush=True)
            rows.append(row)
        del x, out, case
        torch.cuda.empty_cache()
    return rows


def smoke() -> int:
    """Run every checked kernel on small rows in the interpreter against torch."""
    import probe_kernels as pk
    import torch

    import triton_kernels as tk

    failures = 0
    for dname in ("bf16", "fp16", "fp32"):
        dtype = rowwise.torch_dtype(dname)
        x = (torch.randn(5, 60) * 3).to(dtype)
        x[1, :16] = -float("inf")  # a run of masked scores, a whole tile of them
        x[2] += 1000.0
        x[3] -= 30.0  # all negative: padding that is not -inf would win the maximum
        ref = torch.softmax(x.double(), dim=-1)
        for name, checked, launch in variants(tk, pk, dname, 60, 2):
            if not checked:
                continue
            out = torch.full_like(x, float("nan"))
            launch(out, x)
            ok, err = rowwise.compare(out, ref, dname)
            failures += not ok
            print(f"{dname} {name}: {'ok' if ok else 'WRONG'} (largest error {err:.1e})")
    return 1 if failures else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--smoke", action="store_true", help="check the kernels in the interpreter")
    ap.add_argument("--cases", default=None, metavar="DTYPE:COLS,...",
                    help="the dtypes and widths to time (default: "
                         + ",".join(f"{d}:{c}" for d, c in CASES) + ")")
    args = ap.parse_args(argv)
    from learning.grader import mode as kernel_mode

    mode = kernel_mode.select(force_interpret=args.smoke)
    if args.smoke:
        return smoke()
    if mode.interpret:
        print("needs a CUDA GPU (or --smoke)", file=sys.stderr)
        return 2
    import probe_kernels as pk

    import triton_kernels as tk

    result = {"env": rowwise.environment(), "command": " ".join(["lab/probes/whole_row_probe.py",
                                                                  *(argv or sys.argv[1:])])}
    result["copy_gbps"] = rowwise.copy_ceiling()
    print(f"copy ceiling {result['copy_gbps']:.0f} GB/s", flush=True)
    cases = CASES if not args.cases else tuple(
        (item.split(":")[0], int(item.split(":")[1])) for item in args.cases.split(","))
    result["rows"] = measure(tk, pk, result["copy_gbps"], cases)
    result["copy_gbps_end"] = rowwise.copy_ceiling()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\n{'variant':<36} {'dtype':>5} {'cols':>6} {'GB/s':>6} {'of copy':>7} regs")
    for r in result["rows"]:
        if "gbps" in r:
            print(f"{r['variant']:<36} {r['dtype']:>5} {r['cols']:>6} {r['gbps']:6.0f} "
                  f"{r['frac']:7.3f} {r.get('registers', '')}")
        else:
            print(f"{r['variant']:<36} {r['dtype']:>5} {r['cols']:>6} {r.get('error', 'wrong')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
