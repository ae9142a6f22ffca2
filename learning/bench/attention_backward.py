"""Time attention's backward pass on a GPU: the reference's and torch's SDPA's (its default and
each of its backends), in TFLOP/s, over rounds.

    python -m learning.bench attention --backward --seqs 4096 --dims 128 --rounds 5

Reached through ``python -m learning.bench attention --backward`` (learning.bench hands the
arguments on; they are learning.bench.attention's, parsed by its ``parse``). For each dtype,
head dim, causal mask and sequence length the command builds q, k, v and an output gradient dout
of random normal values, shaped as the forward's bench shapes them (batch = 16384 / seq, heads =
2048 / d). Each implementation runs its forward once with autograd recording it: the reference
through ``reference_attention.attention`` (its ``AttentionFunction``), SDPA as torch picks its
backend, then with each backend forced (flash, efficient, cudnn). What is timed is the backward
pass alone, given what the forward saved: ``torch.autograd.grad(out, (q, k, v), dout,
retain_graph=True)``, the same call for every implementation (with the reference: its
preprocess, dK/dV and dQ kernels and the three allocations). Every implementation's gradients
are first checked against float64 autograd on the first and the last (batch, head), and only
then timed with ``triton.testing.do_bench`` (medians of many runs, the L2 cache cleared before
each). With ``--rounds R`` the implementations are timed in turn R times, so that drift in the
GPU's clock reaches them all alike; the table shows the median over the rounds and the range of
the reference's ratio to SDPA's default. The kernels SDPA's default ran are named from a profile
of one backward call. Afterwards (unless ``--no-extras``) each row of the reference's two tables
is timed on its own at seq 4096, d = 128 in bfloat16, through
``reference_attention.attention_backward`` directly, as is the autotuned launcher. Timings need
a CUDA GPU; without one the command says so and exits 1 (nothing was timed).
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

from learning.bench import attention as forward
from learning.bench import rowwise
from learning.course import COURSE_ROOT

DEVICE = "cuda"  # the tests point this at the CPU to run the measuring code in the interpreter
# SDPA's backends forced one at a time: (the table's name, torch's SDPBackend member)
BACKENDS = (("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"),
            ("cudnn", "CUDNN_ATTENTION"))
IMPLEMENTATIONS = ("reference", "torch", *(name for name, _ in BACKENDS))
DEFAULT_ROUNDS = forward.DEFAULT_BACKWARD_ROUNDS
# ||grad - ref|| / ||ref|| allowed for each of dq, dk and dv on the checked heads, ref from float64
# autograd of the same inputs: P and dS rounded to the dtype before their products (bfloat16
# 8 bits, float16 11, TF32 for float32) stay well inside these; a wrong mask or scale gives tens
# of per cent.
NORM_TOLERANCES = {"bf16": 5e-2, "fp16": 1e-2, "fp32": 2e-2}
# The backward pass computes five seq x seq x d products per head (the scores Q K^T again,
# dP = dO V^T, dV = P^T dO, dQ = dS K and dK = dS^T Q) to the forward's two (Q K^T and P V):
# 2.5 times the forward's floating-point operations, as FlashAttention's and Triton's own
# benchmarks count them. Causal attention counts half, as in the forward.
BACKWARD_FACTOR = 2.5
FLOPS_TEXT = "2.5 * 4 * batch * heads * seq^2 * d, halved when causal"


def flops(batch: int, heads: int, seq: int, d: int, causal: bool) -> float:
    return BACKWARD_FACTOR * forward.flops(batch, heads, seq, d, causal)


# ---------------------------------------------------------------------------------------------
# measuring


def make_inputs(batch: int, heads: int, seq: int, d: int, dname: str, seed: int = 0):
    """q, k, v and dout of random normal values, on the bench's device."""
    import torch

    dtype = rowwise.torch_dtype(dname)
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return tuple(torch.randn(batch, heads, seq, d, device=DEVICE, generator=g).to(dtype)
                 for _ in range(4))


def float64_gradients(q, k, v, dout, causal: bool, b: int, h: int):
    """(dq, dk, dv) of one (batch, head) from torch autograd of a float64 attention."""
    import torch

    leaves = [t[b, h].double().requires_grad_() for t in (q, k, v)]  # (seq, d) each
    scores = leaves[0] @ leaves[1].T / math.sqrt(q.shape[-1])
    if causal:
        n = scores.shape[-1]
        hidden = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(hidden, -math.inf)
    (torch.softmax(scores, dim=-1) @ leaves[2]).backward(dout[b, h].double())
    return tuple(t.grad for t in leaves)


def checked_heads(batch: int, heads: int) -> list[tuple[int, int]]:
    return sorted({(0, 0), (batch - 1, heads - 1)})


def gradient_errors(grads, references: dict) -> dict:
    """The worst norm-relative error of each of dq, dk and dv over the checked heads (inf for
    a NaN or a wrong shape)."""
    worst = {}
    for name, grad, index in zip(("dq", "dk", "dv"), grads, range(3)):
        for (b, h), ref in references.items():
            got = grad[b, h].double()
            if got.shape != ref[index].shape or bool(got.isnan().any()):
                error = math.inf
            else:
                error = float((got - ref[index]).norm() / ref[index].norm().clamp_min(1e-30))
            worst[name] = max(worst.get(name, 0.0), error)
    return worst


def record(name: str, q, k, v, causal: bool):
    """The forward of ``name`` with autograd recording it: (leaves, out)."""
    import torch

    import reference_attention

    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    if name == "reference":
        return leaves, reference_attention.attention(*leaves, causal)
    if name == "torch":
        return leaves, forward.sdpa(*leaves, causal)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    member = getattr(SDPBackend, dict(BACKENDS)[name], None)
    if member is None:
        raise RuntimeError(f"this torch ({torch.__version__}) has no SDPBackend."
                           f"{dict(BACKENDS)[name]}")
    with sdpa_kernel(member):
        return leaves, forward.sdpa(*leaves, causal)


def backward_call(leaves, out, dout):
    """The timed call: the backward pass alone, from what the forward saved."""
    import torch

    return lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)


def measure_size(seq: int, d: int, dname: str, causal: bool, rounds: int, quick: bool, say,
                 names=IMPLEMENTATIONS) -> list[dict]:
    """One row per implementation and round: each checked first, then timed in turn."""
    import torch

    import reference_attention

    batch, heads = forward.shape_for(seq, d)
    q, k, v, dout = make_inputs(batch, heads, seq, d, dname)
    references = {(b, h): float64_gradients(q, k, v, dout, causal, b, h)
                  for b, h in checked_heads(batch, heads)}
    count = flops(batch, heads, seq, d, causal)
    base = {"dtype": dname, "seq": seq, "d": d, "causal": causal, "batch": batch,
            "heads": heads}
    calls, facts, notes = {}, {}, {}
    for name in names:
        try:
            leaves, out = record(name, q, k, v, causal)
            call = backward_call(leaves, out, dout)
            errors = gradient_errors(call(), references)
        except Exception as exc:  # a backend this GPU, torch or these shapes do not support
            notes[name] = f"not available: {type(exc).__name__}: {str(exc)[:160]}"
            continue
        facts[name] = {"rel_err": errors, "grad_fn": type(out.grad_fn).__name__}
        if max(errors.values()) > NORM_TOLERANCES[dname]:
            worst = max(errors, key=errors.get)
            notes[name] = f"wrong ({worst} relative error {errors[worst]:.3g}): not timed"
            continue
        calls[name] = call
    if "reference" in calls and DEVICE == "cuda":
        chosen = reference_attention.chosen_backward_config(q, k, causal)
        facts["reference"]["config"] = chosen.label if chosen else "-"
    if "torch" in calls and DEVICE == "cuda":
        try:
            facts["torch"]["kernel"] = forward.backend_of(forward.kernel_names(calls["torch"]))
        except Exception as exc:  # the profiler is a nicety, not a measurement
            facts["torch"]["kernel"] = f"unknown ({type(exc).__name__})"
    rows = []
    for name in names:
        if name in notes:
            row = dict(base, impl=name, round=0, note=notes[name], **facts.get(name, {}))
            rows.append(row)
            say(row)
    for round_ in range(rounds):
        for name, call in calls.items():
            ms = rowwise.median_ms(call, quick)
            row = dict(base, impl=name, round=round_, ms=ms,
                       tflops=forward.tflops(count, ms), **facts[name])
            rows.append(row)
            say(row)
    del calls
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return rows


def measure_configs(quick: bool, say, causal_list=(False, True),
                    target=forward.TARGET) -> list[dict]:
    """The autotuned launcher at the target size, then each row of the reference's two tables on
    its own, the other kernel on the row its autotuner chose, all through
    ``attention_backward`` directly (no autograd)."""
    import reference_attention as ra

    seq, d, dname = target
    batch, heads = forward.shape_for(seq, d)
    q, k, v, dout = make_inputs(batch, heads, seq, d, dname)
    rows = []
    for causal in causal_list:
        count = flops(batch, heads, seq, d, causal)
        references = {(b, h): float64_gradients(q, k, v, dout, causal, b, h)
                      for b, h in checked_heads(batch, heads)}
        out, lse = ra.attention_forward(q, k, v, causal)

        def timed(label: str, config, other: str, causal=causal, out=out, lse=lse,
                  references=references, count=count) -> dict:
            row = {"config": label, "with": other, "dtype": dname, "seq": seq, "d": d,
                   "causal": causal, "batch": batch, "heads": heads}

            def run():
                return ra.attention_backward(q, k, v, out, dout, lse, causal, config=config)

            try:
                errors = gradient_errors(run(), references)
            except Exception as exc:  # e.g. more shared memory than the GPU has
                row["note"] = f"{type(exc).__name__}: {str(exc)[:120]}"
            else:
                if max(errors.values()) <= NORM_TOLERANCES[dname]:
                    ms = rowwise.median_ms(run, quick)
                    row.update(ms=ms, tflops=forward.tflops(count, ms))
                else:
                    row["note"] = f"wrong (relative errors {errors})"
            rows.append(row)
            say(row)
            return row

        autotuned = timed("autotuned", None, "-")
        chosen = ra.chosen_backward_config(q, k, causal) if DEVICE == "cuda" else None
        autotuned["with"] = chosen.label if chosen else "-"
        dkdv_row = chosen.dkdv if chosen else ra.DKDV_CONFIGS[0]
        dq_row = chosen.dq if chosen else ra.DQ_CONFIGS[0]
        for row in ra.DKDV_CONFIGS:
            timed(f"dkdv {row.label}", ra.BackwardConfig(row, dq_row), f"dq {dq_row.label}")
        for row in ra.DQ_CONFIGS:
            timed(f"dq {row.label}", ra.BackwardConfig(dkdv_row, row), f"dkdv {dkdv_row.label}")
    return rows


# ---------------------------------------------------------------------------------------------
# output


def _median(values):
    return statistics.median(values) if values else None


def summarise(results: list[dict]) -> dict:
    """Per size: each implementation's TFLOP/s over the rounds, the reference's ratio to SDPA's
    default in each round (SDPA's time / the reference's), and what each side ran."""
    sizes = {}
    for r in results:
        key = (r["dtype"], r["seq"], r["d"], r["causal"])
        size = sizes.setdefault(key, {"tflops": {}, "ms": {}, "rows": r, "facts": {}})
        if "tflops" in r:
            size["tflops"].setdefault(r["impl"], []).append(r["tflops"])
            size["ms"].setdefault(r["impl"], {})[r["round"]] = r["ms"]
        size["facts"].setdefault(r["impl"], r)
    for size in sizes.values():
        ours, theirs = size["ms"].get("reference", {}), size["ms"].get("torch", {})
        size["ratios"] = [theirs[i] / ours[i] for i in ours if i in theirs]
    return sizes


def table_lines(results: list[dict]) -> list[str]:
    head = ["dtype", "seq", "d", "causal", "batch x heads", "reference TFLOP/s",
            "SDPA TFLOP/s", "reference / SDPA", "lowest to highest",
            *(f"{name} TFLOP/s" for name, _ in BACKENDS), "SDPA's backward", "reference's tiles"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
    for (dname, seq, d, causal), size in summarise(results).items():
        def cell(name, size=size):
            value = _median(size["tflops"].get(name, []))
            return f"{value:.0f}" if value is not None else "-"

        ratios = size["ratios"]
        torch_facts = size["facts"].get("torch", {})
        sdpa = torch_facts.get("kernel") or torch_facts.get("grad_fn", "-")
        lines.append("| " + " | ".join([
            dname, str(seq), str(d), "yes" if causal else "no",
            f"{size['rows']['batch']} x {size['rows']['heads']}", cell("reference"),
            cell("torch"), f"{_median(ratios):.2f}" if ratios else "-",
            f"{min(ratios):.2f} to {max(ratios):.2f}" if ratios else "-",
            *(cell(name) for name, _ in BACKENDS), sdpa,
            size["facts"].get("reference", {}).get("config", "-")]) + " |")
    return lines


def config_lines(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = ["| causal | launch | TFLOP/s | ms | with |", "|---:|---:|---:|---:|---:|"]
    for r in rows:
        timed = "tflops" in r
        lines.append(f"| {'yes' if r['causal'] else 'no'} | {r['config']} | "
                     f"{r['tflops']:.0f} | {r['ms']:.3f} | {r.get('with', '-')} |" if timed else
                     f"| {'yes' if r['causal'] else 'no'} | {r['config']} | - | - | "
                     f"{r.get('note', '')} |")
    return lines


def results_note(path: Path = COURSE_ROOT / "lab" / "results" / "attention_backward.json") -> str:
    """Where a learner without a GPU finds the measured figures (or that there are none)."""
    if path.exists():
        return (f"Figures measured on a GPU are committed in lab/results/{path.name}; lesson 14, "
                "'How fast it is', shows them.")
    return ("No GPU measurement of attention's backward pass is committed yet; the tests check "
            "it in the interpreter (tests/test_reference_attention_backward.py).")


def main(argv: list[str]) -> int:
    """``python -m learning.bench attention --backward ...`` (argv without "attention")."""
    opened = rowwise.opening(argv, forward.parse, "attention", " attention_backward",
                             results_note())
    if isinstance(opened, int):
        return opened
    return run(*opened)


def run(console, options, env: dict, command: str) -> int:
    """Time, print the tables, write --json: options as learning.bench.attention parses them."""
    import json

    import torch

    start = time.monotonic()
    rounds = options.rounds or DEFAULT_ROUNDS
    result = {"env": env, "command": command, "pass": "backward", "rounds": rounds,
              "results": [], "configs": [], "notes": [], "flops": FLOPS_TEXT,
              "timed": "torch.autograd.grad(out, (q, k, v), dout, retain_graph=True): the "
                       "backward pass alone"}

    def say(row):
        what = row.get("impl") or row.get("config")
        size = f"seq {row['seq']} d {row['d']}{' causal' if row['causal'] else ''}"
        if "tflops" in row:
            extra = f" ({row['kernel']})" if row.get("kernel") and row.get("round") == 0 \
                else f" ({row['config']})" if row.get("impl") == "reference" and \
                row.get("round") == 0 and "config" in row else ""
            when = f" round {row['round'] + 1}" if "round" in row else ""
            console.print(f"  {row['dtype']} {size} {what}{when}: {row['tflops']:.0f} TFLOP/s"
                          f"{extra}", highlight=False)
        else:
            console.print(f"  {row['dtype']} {size} {what}: {row.get('note', '')}",
                          highlight=False)

    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # float32: torch may use TF32 like tl.dot
    try:
        for dname in options.dtype_list:
            for d in options.dim_list:
                for causal in options.causal_list:
                    for seq in options.seq_list:
                        if time.monotonic() - start > options.budget_s:
                            note = (f"{dname} seq {seq} d {d}{' causal' if causal else ''} "
                                    f"skipped: the {options.budget_s:g} s budget ran out")
                            result["notes"].append(note)
                            console.print(note)
                            continue
                        result["results"] += measure_size(seq, d, dname, causal, rounds,
                                                          options.quick, say)
        if not options.no_extras:
            result["configs"] = measure_configs(options.quick, say, options.causal_list)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    result["seconds"] = round(time.monotonic() - start, 1)
    if options.json:
        Path(options.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    console.print(f"\n{env['device']}, torch {env['torch']}, triton {env['triton']}, "
                  f"{env['date']}: {command} ({result['seconds']} s)")
    console.print(f"Backward pass alone ({result['timed']}); TFLOP/s = {FLOPS_TEXT} / median "
                  f"time; medians over {rounds} round(s); every implementation's dq, dk and dv "
                  "checked against float64 on two heads first")
    for note in result["notes"]:
        console.print(note)
    console.print("\n".join(table_lines(result["results"])), markup=False)
    if result["configs"]:
        console.print(f"\nThe reference's tables one row at a time ({forward.TARGET[2]}, seq "
                      f"{forward.TARGET[0]}, d {forward.TARGET[1]}), through "
                      "attention_backward directly:")
        console.print("\n".join(config_lines(result["configs"])), markup=False)
    return 0
