"""How the reference's choice of a tile row agrees with the bench, row by row, and what another
way of timing the rows would choose.

    PYTHONPATH=. python lab/probes/matmul_choice_probe.py --json lab/results/matmul_choice.json

For each product and dtype, every row the reference's first call times (``_candidates``) is
measured four ways: as the choice times it (``reference_matmul._times_ms``: a plan launched
early back to back over copies of the inputs, any other one call at a time), one call at a time
between CUDA events (``reference_matmul._time_ms``, how every row was timed before early
plans were timed back to back), as the same calls replayed back to back from a CUDA graph on the
same inputs, and as ``python -m learning.bench matmul`` times it (a graph over copies of the
inputs too large together for L2; median of --rounds); and the host's time per call as the
choice measures it. Then each rule's pick (the fastest on the GPU, and of the rows within the
tie of it the one cheapest to launch) with the bench's figures for it beside torch.matmul's:
the row ``reference_matmul._choose`` picks when run again (its own timings; the host's
timed again in turns for the tied rows), the rule on the choice's first timings, on the
events', on the bench's own, and on the graph's times with today's tie and a wider one. On an
H200 with Triton 3.6 the rule of 2026-12-05 picked, at 1024 and 2048 cubed, rows the bench measured
at 0.88-0.89 of torch.matmul (lab/results/matmul.json, 2026-12-05); at 1024 cubed in bf16 the row
it picked timed 9 % slower, in the same probe run, than the fastest row there
(lab/results/matmul_rows.json).
"""

from __future__ import annotations

import argparse
import json

import torch
import triton

import reference_matmul as rm
from learning.bench import matmul as bench
from learning.bench.rowwise import environment

PRODUCTS = "1024,2048,1000,4097"
GRAPH_CALLS = 10
TIES = (rm.TIE, 1.10)


def graph_ms(run, a, b, calls: int = GRAPH_CALLS) -> float:
    """Milliseconds per call of run(a, b), ``calls`` of them replayed from one CUDA graph."""
    run(a, b)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(calls):
            run(a, b)
    ms = triton.testing.do_bench(graph.replay, warmup=10, rep=40, return_mode="median")
    del graph
    return ms / calls


def pick(rows: dict, device_key: str, tie: float) -> str:
    """The row a rule picks: of those within ``tie`` of the fastest, the cheapest launch."""
    fastest = min(r[device_key] for r in rows.values())
    return min((name for name, r in rows.items() if r[device_key] <= fastest * tie),
               key=lambda name: rows[name]["host_ms"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--dtypes", default="fp16,bf16")
    parser.add_argument("--rounds", type=int, default=3, help="bench timings per row")
    parser.add_argument("--sizes", default=PRODUCTS, help="products as the bench takes them")
    options = parser.parse_args()
    env = environment()
    report = []
    for dtype in options.dtypes.split(","):
        for m, n, k in bench.parse_sizes(options.sizes):
            case = bench.make_case(m, n, k, dtype)
            a, b = case["args"]
            inputs = bench.input_copies(a, b, env.get("l2_bytes"))
            measured = {}
            for row in rm._candidates(a, b):
                try:
                    plan = rm._Plan(a, b, row)
                    choice, host = rm._times_ms(plan, a, b)  # what the choice measures
                    measured[row.label] = {
                        "event_ms": rm._time_ms(lambda p=plan, x=a, y=b: p(x, y)),
                        "choice_ms": choice,
                        "early": plan.early, "host_ms": host, "graph_ms": graph_ms(plan, a, b),
                        "bench_us": bench._median([bench.device_us(plan, inputs, quick=False)
                                                   for _ in range(options.rounds)]),
                        "call_us": bench.call_us(plan, a, b, quick=False)}
                except Exception as error:  # noqa: BLE001 (a row that fails is said, not fatal)
                    print(f"{dtype} {m}x{n}x{k} {row.label}: {type(error).__name__}: "
                          f"{str(error)[:160]}", flush=True)
            torch_us = bench._median([bench.device_us(torch.matmul, inputs, quick=False)
                                      for _ in range(options.rounds)])
            torch_call = bench.call_us(torch.matmul, a, b, quick=False)
            rules = {"matmul's own choice": rm._choose(a, b).config.label,
                     f"choice, tie {rm.TIE:.2f}": pick(measured, "choice_ms", rm.TIE),
                     f"events, tie {rm.TIE:.2f}": pick(measured, "event_ms", rm.TIE),
                     f"bench, tie {rm.TIE:.2f}": pick(measured, "bench_us", rm.TIE)}
            for tie in TIES:
                rules[f"graph, tie {tie:.2f}"] = pick(measured, "graph_ms", tie)
            report.append({"dtype": dtype, "M": m, "N": n, "K": k, "torch_us": torch_us,
                           "torch_call_us": torch_call, "rows": measured, "picks": rules})
            torch.cuda.empty_cache()
            if options.json:
                with open(options.json, "w", encoding="utf-8") as out:
                    json.dump({"env": env, "timing": bench.TIMING, "products": report,
                               "command": "python lab/probes/matmul_choice_probe.py"}, out,
                              indent=1)
    print("\nproduct, rule: row picked | bench: torch over row | call: row over torch")
    for entry in report:
        shape = f"{entry['dtype']} {entry['M']}x{entry['N']}x{entry['K']}"
        fastest = min(r["bench_us"] for r in entry["rows"].values())
        print(f"{shape}: torch {entry['torch_us']:.2f} us, the bench's fastest row "
              f"{fastest:.2f} us")
        for rule, name in entry["picks"].items():
            row = entry["rows"][name]
            print(f"  {rule:22s} {entry['torch_us'] / row['bench_us']:5.2f} "
                  f"{row['call_us'] / entry['torch_call_us']:5.2f}  {name}")


if __name__ == "__main__":
    main()
