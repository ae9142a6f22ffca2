"""How fast can any kernel read the decoding step's B at all? The GPU time of reading a 32 MiB
operand once, measured as ``python -m learning.bench matmul`` measures a product, beside the
reference's 8 x 4096 x 4096 and torch.matmul's.

    PYTHONPATH=. python lab/probes/matmul_stream_floor_probe.py \
        --json lab/results/matmul_stream_floor.json

The bench's copy ceiling is a copy of 1 GiB: a stream long enough that starting and ending it
costs nothing. A decoding step reads 32 MiB, a few microseconds of streaming, and starting the
kernel, filling every multiprocessor's loads and waiting for the last ones are no longer
negligible. Here, each timed the bench's way (a CUDA graph of back-to-back calls over copies
too large together for L2):

- ``read``: a kernel that only reads B and sums it (one float per program), for several
  program sizes and warps: the fastest is what a kernel that does nothing but read can reach;
- ``copy``: torch's copy of B (32 MiB read, 32 MiB written);
- the reference's decoding step and torch.matmul's.

Each in GB/s of what it must move and as a share of the 1 GiB copy ceiling.
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench import rowwise
from learning.bench.rowwise import environment


@triton.jit
def _read(x_ptr, out_ptr, BLOCK: tl.constexpr, LOADS: tl.constexpr):
    """Sum LOADS blocks of BLOCK elements, one after the other in memory, into one float."""
    start = tl.program_id(0).to(tl.int64) * BLOCK * LOADS
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(LOADS):  # every load issued before the first sum needs it
        total += tl.load(x_ptr + start + i * BLOCK + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(total))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    env = environment()
    m, n, k = 8, 4096, 4096
    case = bench.make_case(m, n, k, options.dtype)
    a, b = case["args"]
    inputs = bench.input_copies(a, b, env.get("l2_bytes"))
    ceiling = rowwise.copy_ceiling(False)
    b_bytes = b.numel() * b.element_size()
    product_bytes = b_bytes + (m * k + m * n) * a.element_size()
    runs = []  # (name, function of (a, b), bytes it moves)
    for block, loads, warps in ((4096, 4, 4), (4096, 8, 8), (8192, 4, 8), (2048, 8, 4),
                                (8192, 8, 8), (4096, 16, 8)):
        per_program = block * loads
        out = torch.empty(b.numel() // per_program, dtype=torch.float32, device="cuda")

        def read(a, b, block=block, loads=loads, warps=warps, out=out):
            _read[(out.numel(),)](b, out, BLOCK=block, LOADS=loads, num_warps=warps)

        runs.append((f"read: {out.numel()} programs of {loads} x {block}, {warps} warps", read,
                     b_bytes))
    copies = [torch.empty_like(b) for _ in range(len(inputs))]
    runs.append(("copy: torch's copy of B", lambda a, b: copies[0].copy_(b), 2 * b_bytes))
    runs.append(("reference matmul", rm.matmul, product_bytes))
    runs.append(("torch.matmul", torch.matmul, product_bytes))
    rows = []
    for name, function, moved in runs:
        for round_ in range(options.rounds):
            us = bench.device_us(function, inputs, quick=False)
            rows.append({"run": name, "round": round_, "device_us": us, "bytes": moved,
                         "gbps": moved / us / 1e3, "share_of_ceiling": moved / us / 1e3 / ceiling})
    if options.json:
        with open(options.json, "w", encoding="utf-8") as out:
            json.dump({"env": env, "dtype": options.dtype, "timing": bench.TIMING,
                       "copy_ceiling_gbps": ceiling, "product": [m, n, k],
                       "reference_row": rm.chosen_config(a, b).label,
                       "command": "python lab/probes/matmul_stream_floor_probe.py",
                       "rows": rows}, out, indent=1)
    print(f"copy ceiling (1 GiB copy): {ceiling:,.0f} GB/s; {m} x {n} x {k} {options.dtype}")
    for name, _, _ in runs:
        mine = [r for r in rows if r["run"] == name]
        us = bench._median([r["device_us"] for r in mine])
        share = bench._median([r["share_of_ceiling"] for r in mine])
        print(f"  {us:7.2f} us  {share:5.2f} of the ceiling  {name}")


if __name__ == "__main__":
    main()
