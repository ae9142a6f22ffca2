"""Two questions of issue 36, on one GPU:

1. 4097 cubed: does copying the operands in the product's own launch (``_matmul_copied``,
   rows marked "copies in the same launch") bring the host's time per call to one launch's,
   and what does it cost the GPU beside the copy in a launch of its own? Each row is checked
   against float64 and timed as the bench times a product, in a CUDA graph too (a cooperative
   launch must survive capture); the copy's tile and the cooperative launch are varied.
2. 1000 cubed: which kernels does cuBLAS run (torch.profiler), and does moving only one of
   the operands by tensor descriptor (the other by pointers) lose less to rows 2000 bytes
   apart than moving both the same way?

    PYTHONPATH=. python lab/probes/matmul_one_launch_probe.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench.rowwise import environment
from reference_matmul import _in_k, _store_tile, _tile

T = rm.TileConfig
BIG = 4097
SMALL = 1000
SHAPES = ((1000, 1000, 1000), (1024, 1024, 1024), (4097, 4097, 4097), (8, 4096, 4096),
          (4096, 4096, 4096))


@triton.jit
def _mixed(c_ptr, a, b, stride_am, stride_bk, M, N, K, BLOCK_M: tl.constexpr,
           BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
           A_TMA: tl.constexpr, B_TMA: tl.constexpr, VEC: tl.constexpr):
    """C = A @ B with A and B each moved by tensor descriptor (TMA) or by pointers, row-major
    operands whose rows start on 16-byte boundaries, N a multiple of VEC."""
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_rows = tl.multiple_of((rows % M) * stride_am, VEC)
    cols_b = tl.max_contiguous(tl.multiple_of(cols % N, VEC), VEC)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        at = k0 + ks
        if A_TMA:
            x = a.load([pid_m * BLOCK_M, k0])
        else:
            x = tl.load(a + a_rows[:, None] + at[None, :],
                        mask=_in_k(at, K, True, VEC)[None, :], other=0.0)
        if B_TMA:
            y = b.load([k0, pid_n * BLOCK_N])
        else:
            b_rows = tl.multiple_of(at * stride_bk, VEC)
            y = tl.load(b + b_rows[:, None] + cols_b[None, :], mask=at[:, None] < K, other=0.0)
        acc = tl.dot(x, y, acc)
    _store_tile(c_ptr, acc.to(c_ptr.dtype.element_ty), rows, cols, N, 1, M, N, True, VEC)


def mixed(block_m, block_n, block_k, stages, a_tma, b_tma, warps=4):
    from triton.tools.tensor_descriptor import TensorDescriptor

    def run(a, b):
        m, k = a.shape
        n = b.shape[1]
        c = a.new_empty((m, n))
        x = TensorDescriptor.from_tensor(a, [block_m, block_k]) if a_tma else a
        y = TensorDescriptor.from_tensor(b, [block_k, block_n]) if b_tma else b
        grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
        _mixed[grid](c, x, y, a.stride(0), b.stride(0), m, n, k, block_m, block_n, block_k, 8,
                     a_tma, b_tma, 16 // a.element_size(), num_warps=warps, num_stages=stages)
        return c
    how = {(True, True): "A and B by descriptor", (True, False): "A by descriptor, B by pointers",
           (False, True): "A by pointers, B by descriptor", (False, False): "A and B by pointers"}
    label = f"{block_m}x{block_n}x{block_k}, {warps} warps, {stages} stages"
    return f"{label}, {how[a_tma, b_tma]}", run


def planned(row, tile=None, cooperative=True):
    """The row's plan for the first pair it sees, made with the copy's tile and launch given."""
    plans = {}

    def run(a, b):
        key = rm._key(a, b)
        if key not in plans:
            saved = rm.COPY_INSIDE_TILE, rm.COOPERATIVE
            rm.COPY_INSIDE_TILE = tile or saved[0]
            rm.COOPERATIVE = cooperative
            try:
                plans[key] = rm._Plan(a, b, row)
            finally:
                rm.COPY_INSIDE_TILE, rm.COOPERATIVE = saved
        return plans[key](a, b)
    label = row.label
    if row.copy_inside:
        label += f", copy tile {tile or rm.COPY_INSIDE_TILE}"
        label += "" if cooperative else ", not cooperative"
    return label, run


def cublas_kernels(rows: list) -> None:
    """The kernels torch.matmul launches for each shape and dtype, with their GPU time."""
    from torch.profiler import ProfilerActivity, profile
    for dname in ("fp16", "bf16"):
        for m, n, k in SHAPES:
            a, b = bench.make_case(m, n, k, dname)["args"]
            for _ in range(3):
                torch.matmul(a, b)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    torch.matmul(a, b)
                torch.cuda.synchronize()
            for event in prof.key_averages():
                if event.device_type.name == "CUDA" and event.count:
                    rows.append({"part": "cublas", "dtype": dname, "product": [m, n, k],
                                 "kernel": event.key, "calls": event.count,
                                 "device_us": event.device_time_total / event.count})
                    print(f"cublas {dname} {m}x{n}x{k}: {event.key} x{event.count} "
                          f"{rows[-1]['device_us']:.1f} us", flush=True)


def timed(rows: list, part: str, dname: str, product, runs, rounds: int, env) -> None:
    m, n, k = product
    case = bench.make_case(m, n, k, dname)
    a, b = case["args"]
    inputs = bench.input_copies(a, b, env.get("l2_bytes"))
    for name, run in runs:
        try:
            error = bench.relative_error(run(a, b)[case["picked"]], case["ref"])
            assert error <= bench.NORM_TOLERANCES[dname], f"error {error:.2e}"
            for round_ in range(rounds):
                device = bench.device_us(run, inputs, quick=False)
                rows.append({"part": part, "dtype": dname, "product": list(product), "run": name,
                             "round": round_, "device_us": device,
                             "host_us": bench.call_us(run, a, b, quick=False, device_us=device)})
        except Exception as error:  # noqa: BLE001 (the row is reported, not fatal)
            rows.append({"part": part, "dtype": dname, "product": list(product), "run": name,
                         "note": f"{type(error).__name__}: {str(error)[:300]}"})
            print(f"{part} {dname} {name}: {rows[-1]['note']}", flush=True)
    torch.cuda.empty_cache()


def summary(rows: list) -> None:
    groups: dict = {}
    for r in rows:
        if "device_us" in r and r["part"] != "cublas":
            groups.setdefault((r["part"], r["dtype"]), {}).setdefault(r["run"], []).append(r)
    for (part, dname), by_run in groups.items():
        torch_us = bench._median([r["device_us"] for r in by_run.get("torch.matmul", [])] or [0])
        torch_host = bench._median([r["host_us"] for r in by_run.get("torch.matmul", [])] or [0])
        print(f"\n{part} ({dname}): device us (range), torch / it, host us, host / torch's")
        for name, runs in sorted(by_run.items(),
                                 key=lambda kv: bench._median([r["device_us"] for r in kv[1]])):
            device = [r["device_us"] for r in runs]
            host = bench._median([r["host_us"] for r in runs])
            print(f"  {bench._median(device):8.2f} ({min(device):.2f}-{max(device):.2f}) "
                  f"{torch_us / bench._median(device):5.2f} {host:6.1f} "
                  f"{host / torch_host if torch_host else 0:5.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", default="cublas,copied,mixed")
    options = parser.parse_args()
    env = environment()
    rows: list = []
    parts = options.parts.split(",")

    def save():
        if options.json:
            with open(options.json, "w", encoding="utf-8") as out:
                json.dump({"env": env, "timing": bench.TIMING,
                           "command": "python lab/probes/matmul_one_launch_probe.py",
                           "rows": rows}, out, indent=1)

    if "cublas" in parts:
        cublas_kernels(rows)
        save()
    for dname in ("bf16", "fp16"):
        if "copied" in parts:
            rm.forget_choices()
            runs = [("torch.matmul", torch.matmul), ("reference (chosen)", rm.matmul)]
            runs += [planned(row) for row in (T(128, 256, 64, 8, 8, 3, persistent=True),
                                              T(128, 256, 64, 8, 8, 4, persistent=True),
                                              T(128, 128, 64, 8, 4, 4))]
            inside = T(128, 256, 64, 8, 8, 3, persistent=True, copy_inside=True)
            runs += [planned(inside, tile) for tile in ((16, 256), (32, 256), (64, 256))]
            runs += [planned(T(128, 256, 64, 8, 8, 4, persistent=True, copy_inside=True)),
                     planned(inside, cooperative=False)]
            timed(rows, f"{BIG} cubed", dname, (BIG, BIG, BIG), runs, options.rounds, env)
            chosen = rm.chosen_config(*bench.make_case(BIG, BIG, BIG, dname)["args"])
            rows.append({"part": "choice", "dtype": dname, "chosen": chosen and chosen.label})
            save()
        if "mixed" in parts:
            runs = [("torch.matmul", torch.matmul)]
            for block_m, block_n, block_k, stages in ((64, 128, 64, 4), (64, 128, 128, 3),
                                                      (64, 128, 128, 4), (128, 64, 128, 3)):
                for a_tma, b_tma in ((True, True), (True, False), (False, True), (False, False)):
                    runs.append(mixed(block_m, block_n, block_k, stages, a_tma, b_tma))
            timed(rows, f"{SMALL} cubed", dname, (SMALL, SMALL, SMALL), runs, options.rounds, env)
            save()
    summary(rows)


if __name__ == "__main__":
    main()
