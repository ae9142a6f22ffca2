"""The course's goal for the reference attention, measured so that SDPA's own drift shows:
the reference against torch's scaled_dot_product_attention at seq 4096, d = 128, bfloat16,
causal and not.

    python lab/probes/attention_target.py [--rounds 5] [--json PATH]

SDPA's time on one GPU moves by several per cent from one measurement to the next (its cuDNN
kernel ran at 599 and 667 TFLOP/s within one run of ``python -m learning.bench attention``),
so one ratio of two single measurements says little about a goal of 0.8. Here the two are
timed in turn, ``--rounds`` times each (``triton.testing.do_bench`` medians, L2 cleared before
every run, the reference through its autotuner as ``attention`` is called), and the ratio of
each round is printed with the median and the range over the rounds. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
from pathlib import Path

import torch
import triton
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import reference_attention as ra  # noqa: E402

SEQ, HEAD_DIM = 4096, 128
BATCH, HEADS = 16384 // SEQ, 2048 // HEAD_DIM  # as learning.bench attention shapes it


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    torch.manual_seed(0)
    q, k, v = (torch.randn(BATCH, HEADS, SEQ, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    results = []
    for causal in (False, True):
        flops = 4 * BATCH * HEADS * SEQ * SEQ * HEAD_DIM / (2 if causal else 1)

        def ours(causal=causal):
            return ra.attention(q, k, v, causal)

        def sdpa(causal=causal):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

        want = sdpa()
        error = float((ours().float() - want.float()).norm() / want.float().norm())
        for round_ in range(options.rounds):
            ours_ms = do_bench(ours, warmup=10, rep=60, return_mode="median")
            sdpa_ms = do_bench(sdpa, warmup=10, rep=60, return_mode="median")
            results.append(dict(causal=causal, round=round_, ours_tflops=flops / ours_ms / 1e9,
                                sdpa_tflops=flops / sdpa_ms / 1e9, ratio=sdpa_ms / ours_ms,
                                rel_err=error))
        chosen = ra.chosen_config(q, k, causal)
        results[-1]["config"] = chosen.label if chosen else "-"
    env = dict(date=datetime.date.today().isoformat(), device=torch.cuda.get_device_name(),
               torch=torch.__version__, triton=triton.__version__,
               python=platform.python_version(), seq=SEQ, d=HEAD_DIM, batch=BATCH, heads=HEADS,
               dtype="bf16", rounds=options.rounds)
    print(f"# {env}")
    print(f"{'causal':>7}{'round':>6}{'reference':>11}{'SDPA':>7}{'ratio':>7}")
    for row in results:
        print(f"{'yes' if row['causal'] else 'no':>7}{row['round']:>6}"
              f"{row['ours_tflops']:>11.0f}{row['sdpa_tflops']:>7.0f}{row['ratio']:>7.3f}")
    summary = {}
    for causal in (False, True):
        ratios = [r["ratio"] for r in results if r["causal"] == causal]
        summary["causal" if causal else "full"] = dict(median=statistics.median(ratios),
                                                       low=min(ratios), high=max(ratios))
        print(f"{'causal' if causal else 'full'}: median {statistics.median(ratios):.3f} of "
              f"SDPA over {len(ratios)} rounds (from {min(ratios):.3f} to {max(ratios):.3f})")
    if options.json:
        options.json.write_text(json.dumps(dict(env=env, results=results, summary=summary),
                                           indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
