"""Where a piece of the Gluon split kernel spends its time: load, wait for its row, store.

    PYTHONPATH=. python3 lab/probes/split_timeline.py --json /tmp/timeline.json   # GPU only

lab/probes/probe_gluon.py's split_shared_variant (the shipped kernel with EVEN, when the width is a
multiple of the piece) is launched once more, after a warm-up, with ``stamps``: every program
writes the GPU's global timer after its ticket, after its last chunk landed and was folded,
after the row's exchange, and after its stores were issued, and the multiprocessor it ran on.
From those this prints, per case, the median and 90th percentile of

- load: ticket to last chunk folded (copying the piece and folding it into (m, s));
- wait: publishing its partials to the end of the spin, the exchange that bounds the kernel;
- store: reading the piece back from shared memory and issuing its stores;
- skew: per row, the latest ticket time of its pieces minus the earliest;

and the share of program-time spent waiting. The same kernel without the exchange (a wrong
answer; lab/probes/probe_gluon.py's no_exchange) is stamped beside it, and so is the exchange
through 64-bit words (probe_gluon's WORDS).
"""

from __future__ import annotations

import argparse
import json
import sys

from learning.bench import rowwise

CASES = (("bf16", 65536, 16384, 2048, 4), ("bf16", 262144, 16384, 2048, 4),
         ("bf16", 1048576, 32768, 4096, 8), ("fp32", 65536, 16384, 2048, 4))


def percentiles(values) -> dict:
    import torch

    v = torch.as_tensor(values, dtype=torch.float64)
    return {"median_us": round(v.median().item() / 1e3, 3),
            "p90_us": round(v.quantile(0.9).item() / 1e3, 3) if v.numel() else None}


EXCHANGES = ("counter", "words", "none")


def stamped(x, piece: int, chunk: int, warps: int, exchange: str) -> dict:
    import probe_gluon
    import torch
    import triton

    from lab import production as fast

    out = torch.empty_like(x)
    pieces = triton.cdiv(x.shape[1], piece)
    programs = x.shape[0] * pieces
    flags = exchange.split("+")  # e.g. words+own+sleep128: lab/probes/probe_gluon.py's flags
    sleep = [int(f[len("sleep"):]) for f in flags if f.startswith("sleep")]

    def launch(stamps=None):
        part, sync = fast._split_scratch(x.shape[0], pieces, 2, x.device)
        part.zero_()
        probe_gluon.split_shared_variant[(programs,)](
            out, x, out.stride(0), x.stride(0), x.shape[1], part, sync,
            PIECES=triton.next_power_of_2(pieces), PIECE=piece, CHUNK=chunk,
            VEC=16 // x.element_size(), NO_TICKET=False, NO_EXCHANGE=exchange == "none",
            NO_EXP=False, STREAM=False, EVEN=x.shape[1] % piece == 0,
            WORDS="words" in flags, OWN="own" in flags, SLEEP=sleep[0] if sleep else 0,
            stamps=stamps, num_warps=warps)

    stamps = torch.zeros(programs, 6, dtype=torch.int64, device=x.device)
    for _ in range(3):
        launch(stamps)
    torch.cuda.synchronize()
    stamps.zero_()
    launch(stamps)
    torch.cuda.synchronize()
    s = stamps.cpu()
    start, loaded, exchanged, end = s[:, 2], s[:, 3], s[:, 4], s[:, 5]
    rows = s[:, 0] // pieces
    first = torch.full((x.shape[0],), 2**62, dtype=torch.int64).scatter_reduce(
        0, rows, start, "amin")
    last = torch.zeros(x.shape[0], dtype=torch.int64).scatter_reduce(0, rows, start, "amax")
    span = (end.max() - start.min()).item()
    busy = (end - start).sum().item()
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    return {"load": percentiles(loaded - start), "wait": percentiles(exchanged - loaded),
            "store": percentiles(end - exchanged), "skew": percentiles(last - first),
            "wait_share": round((exchanged - loaded).sum().item() / busy, 3),
            "programs_per_sm": round(busy / span / sms, 2),
            "span_us": round(span / 1e3, 1),
            "gbps_from_span": round(2 * x.numel() * x.element_size() / span, 0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--exchanges", default=",".join(EXCHANGES), metavar="NAME,...",
                    help="counter, none, or words with probe_gluon's own and sleepN, e.g. "
                         "words+own+sleep128 (default: %(default)s)")
    ap.add_argument("--cases", default=None, metavar="DTYPE:COLS:PIECE:CHUNK:WARPS,...")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: Gluon kernels have no interpreter", file=sys.stderr)
        return 2
    result = {"env": rowwise.environment(),
              "command": " ".join(["lab/probes/split_timeline.py", *(argv or sys.argv[1:])]),
              "rows": []}
    cases = CASES if not args.cases else [
        (item.split(":")[0], *(int(v) for v in item.split(":")[1:]))
        for item in args.cases.split(",")]
    for dname, width, piece, chunk, warps in cases:
        dtype = rowwise.torch_dtype(dname)
        x = torch.randn(rowwise.GIB // (width * dtype.itemsize), width, device="cuda").to(dtype)
        for exchange in args.exchanges.split(","):
            row = {"dtype": dname, "cols": width, "piece": piece, "chunk": chunk,
                   "warps": warps, "exchange": exchange,
                   **stamped(x, piece, chunk, warps, exchange)}
            print(json.dumps(row), flush=True)
            result["rows"].append(row)
        del x
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\n{'case':<28} {'load':>13} {'wait':>13} {'store':>13} {'skew':>13} "
          f"{'wait%':>5} {'p/SM':>5} {'GB/s':>5}")
    for r in result["rows"]:
        cells = [f"{r[k]['median_us']:6.2f}/{r[k]['p90_us']:6.2f}"
                 for k in ("load", "wait", "store", "skew")]
        name = f"{r['dtype']} {r['cols']} {r['exchange']}"
        print(f"{name:<28} {' '.join(cells)} {r['wait_share']:5.2f} {r['programs_per_sm']:5.1f} "
              f"{r['gbps_from_span']:5.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
