"""1000 cubed again: do warp specialization or a store by tensor descriptor close the gap to
cuBLAS that no row of the tuning table closes?

    PYTHONPATH=. python lab/probes/matmul_specialize_probe.py \
        --json lab/results/matmul_specialize.json

One kernel, the reference's ``_matmul_tma`` cut down to what 1000 cubed needs (no split of K),
in four versions: its K loop as it is, or marked ``warp_specialize`` (Triton then gives the
loads to a warp of their own, which runs ahead of the warps that multiply, where the loop
allows it); and C stored with masked pointers, as the reference stores it, or by a tensor
descriptor of C (one copy instruction per tile, clipped to M x N by the hardware). Each at the
tiles the tuning table offers for small products, timed as ``python -m learning.bench matmul``
times a product, beside torch.matmul, in rounds. A version this Triton refuses is reported,
not timed.
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl

from learning.bench import matmul as bench
from learning.bench.rowwise import environment
from reference_matmul import _descriptor_class, _tile

TILES = ((128, 128, 64, 4, 4), (128, 128, 64, 3, 4), (128, 128, 64, 5, 4), (128, 128, 128, 3, 4),
         (128, 128, 64, 4, 8), (64, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 6, 4))
SIZES = ((1000, "fp16"), (1000, "bf16"), (1024, "fp16"))


@triton.jit
def _product(c, a_tiles, b_tiles, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SPECIALIZE: tl.constexpr,
             STORE_BY_DESCRIPTOR: tl.constexpr):
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, warp_specialize=SPECIALIZE):
        a = a_tiles.load([pid_m * BLOCK_M, k0])
        b = b_tiles.load([k0, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    if STORE_BY_DESCRIPTOR:
        c.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c.dtype))
    else:
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ptrs = c + rows[:, None] * N + cols[None, :]
        tl.store(ptrs, acc.to(c.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def runner(tile, specialize: bool, by_descriptor: bool):
    bm, bn, bk, stages, warps = tile
    describe = _descriptor_class()

    def run(a, b):
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
        c_arg = describe(c, [m, n], [n, 1], [bm, bn]) if by_descriptor else c
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        _product[grid](c_arg, describe(a, [m, k], [k, 1], [bm, bk]),
                       describe(b, [k, n], [n, 1], [bk, bn]), m, n, k, bm, bn, bk, 8,
                       specialize, by_descriptor, num_warps=warps, num_stages=stages)
        return c
    return run


def save(path: str | None, env: dict, rows: list) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"env": env, "timing": bench.TIMING,
                       "command": "python lab/probes/matmul_specialize_probe.py",
                       "rows": rows}, out, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--specialize", choices=("no", "yes", "both"), default="both")
    options = parser.parse_args()
    specializations = {"no": (False,), "yes": (True,), "both": (False, True)}[options.specialize]
    env = environment()
    rows = []
    for size, dname in SIZES:
        case = bench.make_case(size, size, size, dname)
        a, b = case["args"]
        inputs = bench.input_copies(a, b, env.get("l2_bytes"))
        runs = [("torch.matmul", torch.matmul)]
        for tile in TILES:
            for specialize in specializations:
                for by_descriptor in (False, True):
                    bm, bn, bk, stages, warps = tile
                    name = (f"{bm}x{bn}x{bk}, {warps} warps, {stages} stages"
                            f"{', warp-specialized' if specialize else ''}"
                            f"{', C by descriptor' if by_descriptor else ''}")
                    runs.append((name, runner(tile, specialize, by_descriptor)))
        for name, run in runs:
            try:
                x, y = inputs[0]
                error = bench.relative_error(run(x, y)[case["picked"]], case["ref"])
                assert error <= bench.NORM_TOLERANCES[dname], f"error {error:.2e}"
                for round_ in range(options.rounds):
                    rows.append({"size": size, "dtype": dname, "run": name, "round": round_,
                                 "device_us": bench.device_us(run, inputs, quick=False)})
                print(f"{size} {dname} {name}: {rows[-1]['device_us']:.2f} us", flush=True)
                save(options.json, env, rows)  # after each row: a run cut short keeps the rest
            except Exception as error:  # noqa: BLE001 (the row is reported, not fatal)
                rows.append({"size": size, "dtype": dname, "run": name,
                             "note": f"{type(error).__name__}: {str(error)[:200]}"})
                print(f"{size} {dname} {name}: {rows[-1]['note']}", flush=True)
        torch.cuda.empty_cache()
    for size, dname in SIZES:
        by_run: dict = {}
        for r in rows:
            if r["size"] == size and r["dtype"] == dname and "device_us" in r:
                by_run.setdefault(r["run"], []).append(r["device_us"])
        torch_us = bench._median(by_run.get("torch.matmul", [float("nan")]))
        print(f"\n{size} cubed ({dname}): device us (range), torch over it")
        for name, times in sorted(by_run.items(), key=lambda kv: bench._median(kv[1]))[:12]:
            print(f"  {bench._median(times):7.2f} ({min(times):.2f}-{max(times):.2f})  "
                  f"{torch_us / bench._median(times):5.2f}  {name}")


if __name__ == "__main__":
    main()
