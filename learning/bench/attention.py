"""Time attention on a GPU: the reference, torch's scaled_dot_product_attention and yours, in
TFLOP/s.

    python -m learning.bench attention
    python -m learning.bench attention --seqs 4096 --dims 128 --dtypes bf16,fp16
    python -m learning.bench attention --backward --seqs 4096 --dims 128 --rounds 5

With ``--backward`` the backward pass is timed instead: learning.bench hands the options to
learning.bench.attention_backward, which parses them with ``parse`` below.

Reached through ``python -m learning.bench attention`` (learning.bench hands the arguments on;
``learning.bench.rowwise`` holds the measuring they share).
For each dtype, head dim, causal mask and sequence length the command builds q, k and v of
random normal values, shaped as FlashAttention's own benchmarks do (batch = 16384 / seq, heads =
2048 / d, so every size holds the same number of tokens), checks every implementation on
sampled query rows of two heads against float64, and only then times it with
``triton.testing.do_bench`` (the median of many runs after a warm-up, which is also when the
autotuner picks its tile shape). Speed is 4 * batch * heads * seq^2 * d floating-point
operations (q k^T and p @ v) divided by the time, halved for causal attention, as
FlashAttention's benchmarks count. The kernel torch ran is named from a profile of one call.
Afterwards each of torch's SDPA backends and each row of the reference's tuning table is timed
on its own at seq 4096, d = 128 in bfloat16. Timings need a CUDA GPU; without one the command
says where the committed measurements are and exits 1 (nothing was timed).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from learning.bench import rowwise
from learning.cli import ArgumentError, CommandParser
from learning.course import COURSE_ROOT

DEVICE = "cuda"  # the tests point this at the CPU to run the measuring code in the interpreter
DTYPES = ("bf16", "fp16", "fp32")
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
QUICK_SEQS = (1024, 4096)
DIMS = (64, 128)
TOKENS = 16384  # batch * seq for every size
MODEL_WIDTH = 2048  # heads * d
TARGET = (4096, 128, "bf16")  # where SDPA's backends and the tuning table are timed one by one
SAMPLE_ROWS = 64
# ||out - ref|| / ||ref|| allowed on the sampled rows, ref the float64 attention of the same
# inputs: p rounded once to the dtype (or to TF32 for float32) stays far inside these.
NORM_TOLERANCES = {"fp16": 3e-3, "bf16": 2e-2, "fp32": 5e-3}
BUDGET_SECONDS = 240.0  # sizes left when this runs out are skipped, and the output says so
RESULTS = COURSE_ROOT / "lab" / "results" / "attention.json"
DEFAULT_BACKWARD_ROUNDS = 3  # learning.bench.attention_backward's


def results_note(path: Path = RESULTS) -> str:
    """Where a learner without a GPU finds the measured figures (or that there are none)."""
    if path.exists():
        return ("Figures measured on a GPU are committed in lab/results/attention.json, and "
                "python -m learning.explain attention shows them.")
    return ("No GPU measurement of attention is committed yet (lab/results/attention.json); "
            "lesson 13 says so where its figures would be.")


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.bench attention",
                           description="Time softmax(q k^T / sqrt(d)) v on the GPU in "
                                       "TFLOP/s: the reference, torch's SDPA and yours.")
    parser.add_argument("--seqs", metavar="N,N,...",
                        help=f"sequence lengths (default: {','.join(map(str, SEQS))})")
    parser.add_argument("--dims", metavar="D,D", default=",".join(map(str, DIMS)),
                        help="head dims, powers of two from 16 to 128 (default: 64,128)")
    parser.add_argument("--dtypes", metavar="D,D", default="bf16",
                        help="some of bf16, fp16, fp32 (default: bf16; fp32 lets both sides "
                             "use TF32)")
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both",
                        help="causal attention, full attention or both (default: both)")
    parser.add_argument("--quick", action="store_true",
                        help="two lengths, d = 128 and shorter timing runs: a first look, not "
                             "a figure")
    parser.add_argument("--no-extras", action="store_true",
                        help="leave out timing SDPA's backends and the reference's tuning "
                             "table one by one")
    parser.add_argument("--budget-s", type=float, default=BUDGET_SECONDS, metavar="S",
                        help=f"stop starting new sizes after this many seconds (default "
                             f"{BUDGET_SECONDS:g})")
    parser.add_argument("--backward", action="store_true",
                        help="time the backward pass alone, the reference's against each of "
                             "SDPA's backends (learning.bench.attention_backward)")
    parser.add_argument("--rounds", type=int, metavar="R",
                        help="with --backward: time every implementation in turn R times; "
                             "tables show medians and the ratio's range (default "
                             f"{DEFAULT_BACKWARD_ROUNDS})")
    parser.add_argument("--json", metavar="PATH", help="write every measurement here")
    parser.add_argument("--root", metavar="DIR", default=str(COURSE_ROOT),
                        help="where your attention.py is (default: the course root)")
    return parser


def _numbers(text: str, what: str, allowed) -> tuple[int, ...]:
    values = []
    for item in text.split(","):
        item = item.strip()
        try:
            value = int(item)
        except ValueError:
            raise ArgumentError(f"--{what}: '{item}' is not a whole number") from None
        if not allowed(value):
            raise ArgumentError(f"--{what}: {value} is not allowed here")
        values.append(value)
    if not values:
        raise ArgumentError(f"--{what} needs at least one number")
    return tuple(values)


def parse(argv: list[str]):
    options = build_parser().parse_args(argv)
    if options.seqs is None:
        options.seq_list = QUICK_SEQS if options.quick else SEQS
    else:
        options.seq_list = _numbers(options.seqs, "seqs", lambda n: 1 <= n <= 65536)
    options.dim_list = (128,) if options.quick and options.dims == "64,128" else \
        _numbers(options.dims, "dims", lambda d: d in (16, 32, 64, 128))
    names = tuple(item.strip() for item in options.dtypes.split(",") if item.strip())
    for name in names:
        if name not in DTYPES:
            raise ArgumentError(f"--dtypes: unknown dtype '{name}'; choose from "
                                f"{', '.join(DTYPES)}")
    if not names:
        raise ArgumentError("--dtypes needs at least one of bf16, fp16, fp32")
    options.dtype_list = names
    options.causal_list = {"both": (False, True), "yes": (True,), "no": (False,)}[options.causal]
    if options.rounds is not None:
        if not options.backward:
            raise ArgumentError("--rounds goes with --backward (the forward's rounds are "
                                "lab/probes/attention_target.py)")
        if not 1 <= options.rounds <= 50:
            raise ArgumentError(f"--rounds: {options.rounds} is not allowed (1 to 50)")
    return options


# ---------------------------------------------------------------------------------------------
# measuring


def shape_for(seq: int, d: int) -> tuple[int, int]:
    """(batch, heads): the same number of tokens and the same model width at every size."""
    return max(1, TOKENS // seq), max(1, MODEL_WIDTH // d)


def flops(batch: int, heads: int, seq: int, d: int, causal: bool) -> float:
    """q k^T and p @ v, 2 * seq * seq * d each per head; causal attention counts half."""
    total = 4.0 * batch * heads * seq * seq * d
    return total / 2 if causal else total


def tflops(count: float, ms: float) -> float:
    return count / (ms * 1e-3) / 1e12


def reference_rows(q, k, v, causal: bool, batch: int, head: int, rows):
    """float64 attention of the sampled query rows of one (batch, head)."""
    import torch

    qs = q[batch, head, rows].double()  # (r, d)
    ks, vs = k[batch, head].double(), v[batch, head].double()
    scores = qs @ ks.T / math.sqrt(q.shape[-1])  # (r, seq_k)
    if causal:
        cols = torch.arange(ks.shape[0], device=scores.device)[None, :]
        scores = scores.masked_fill(cols > rows.to(scores.device)[:, None], -math.inf)
    return torch.softmax(scores, dim=-1) @ vs


def make_case(batch: int, heads: int, seq: int, d: int, dname: str, causal: bool,
              seed: int = 0) -> dict:
    """q, k and v of random normal values, and the float64 rows to check against: sampled
    query rows of the first and of the last (batch, head)."""
    import torch

    dtype = rowwise.torch_dtype(dname)
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, seq, d, device=DEVICE, generator=g).to(dtype)
               for _ in range(3))
    picked = rowwise.sample(seq, seed=seq + d).to(DEVICE)
    checks = [(b, h, reference_rows(q, k, v, causal, b, h, picked))
              for b, h in {(0, 0), (batch - 1, heads - 1)}]
    return {"args": (q, k, v, causal), "checks": checks, "picked": picked}


def relative_error(out, case: dict) -> float:
    """||out - ref|| / ||ref|| on the sampled rows; inf for a wrong shape or any NaN."""
    worst = 0.0
    q = case["args"][0]
    if tuple(out.shape) != tuple(q.shape):
        return float("inf")
    for b, h, ref in case["checks"]:
        got = out[b, h, case["picked"]].double()
        if bool(got.isnan().any()):
            return float("inf")
        worst = max(worst, float((got - ref).norm() / ref.norm().clamp_min(1e-30)))
    return worst


def sdpa(q, k, v, causal):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def implementations(learner) -> dict:
    import reference_attention

    table = {"reference": reference_attention.attention, "torch": sdpa}
    if learner is not None:
        table = {"yours": learner, **table}
    return table


BACKEND_WORDS = (("cudnn", "cuDNN"), ("flash", "FlashAttention-2"),
                 ("fmha", "memory-efficient (CUTLASS)"), ("mem_eff", "memory-efficient"),
                 ("efficient", "memory-efficient"))


def kernel_names(fn) -> list[str]:
    """Names of the GPU kernels one call of ``fn`` launched, from torch's profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for event in prof.events():
        kind = str(getattr(event, "device_type", ""))
        if "CUDA" in kind and event.name not in names:
            names.append(event.name)
    return names


def backend_of(names: list[str]) -> str:
    """The SDPA backend a list of kernel names shows, and the attention kernel's name."""
    for name in names:
        lowered = name.lower()
        for word, backend in BACKEND_WORDS:
            if word in lowered:
                return f"{backend}: {name}"
    return "math (no fused attention kernel)" if names else "unknown"


def _median_ms(fn, quick: bool) -> float:
    return rowwise.median_ms(fn, quick)


def measure_size(seq: int, d: int, dname: str, causal: bool, quick: bool, learner,
                 say) -> list[dict]:
    """One row per implementation: checked on sampled rows first, then timed."""
    import reference_attention

    batch, heads = shape_for(seq, d)
    case = make_case(batch, heads, seq, d, dname, causal)
    args = case["args"]
    rows = []
    for name, function in implementations(learner).items():
        row = {"impl": name, "dtype": dname, "seq": seq, "d": d, "causal": causal,
               "batch": batch, "heads": heads}
        try:
            out = function(*args)
            error = relative_error(out, case)
            del out
        except Exception as exc:  # a size the learner's kernel refuses, say
            error = float("nan")
            row["note"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        row["rel_err"] = error
        row["correct"] = error <= NORM_TOLERANCES[dname]
        if row["correct"]:
            ms = _median_ms(lambda f=function: f(*args), quick)
            row.update(ms=ms, tflops=tflops(flops(batch, heads, seq, d, causal), ms))
            if name == "reference" and DEVICE == "cuda":
                chosen = reference_attention.chosen_config(args[0], args[1], causal)
                row["config"] = chosen.label if chosen else "-"
            if name == "torch" and DEVICE == "cuda":
                try:
                    row["backend"] = backend_of(kernel_names(lambda f=function: f(*args)))
                except Exception as exc:  # the profiler is a nicety, not a measurement
                    row["backend"] = f"unknown ({type(exc).__name__})"
        else:
            row.setdefault("note", f"wrong (relative error {error:.3g}): not timed")
        rows.append(row)
        say(row)
    return rows


def measure_backends(quick: bool, say, causal_list=(False, True)) -> list[dict]:
    """Each of SDPA's backends forced on its own at the target size."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    seq, d, dname = TARGET
    batch, heads = shape_for(seq, d)
    rows = []
    for causal in causal_list:
        case = make_case(batch, heads, seq, d, dname, causal)
        for backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
            which = getattr(SDPBackend, backend, None)
            row = {"backend": backend.lower().replace("_", " "), "dtype": dname, "seq": seq,
                   "d": d, "causal": causal, "batch": batch, "heads": heads}
            if which is None:
                row["note"] = "this torch has no such backend"
            else:
                def run(which=which, case=case):
                    with sdpa_kernel(which):
                        return sdpa(*case["args"])

                try:
                    error = relative_error(run(), case)
                    if error <= NORM_TOLERANCES[dname]:
                        ms = _median_ms(run, quick)
                        row.update(ms=ms, tflops=tflops(flops(batch, heads, seq, d, causal),
                                                        ms))
                    else:
                        row["note"] = f"wrong (relative error {error:.3g})"
                except Exception as exc:  # a backend this GPU or these shapes do not support
                    row["note"] = f"not available: {type(exc).__name__}: {str(exc)[:120]}"
            rows.append(row)
            say(row)
        torch.cuda.empty_cache()
    return rows


def measure_configs(quick: bool, say, causal_list=(False, True), target=TARGET) -> list[dict]:
    """Each row of the reference's tuning table launched on its own at the target size."""
    import reference_attention

    seq, d, dname = target
    batch, heads = shape_for(seq, d)
    rows = []
    for causal in causal_list:
        case = make_case(batch, heads, seq, d, dname, causal)
        for config in reference_attention.CONFIGS:
            row = {"config": config.label, "dtype": dname, "seq": seq, "d": d,
                   "causal": causal, "batch": batch, "heads": heads}

            def run(c=config, case=case):
                return reference_attention.attention(*case["args"], config=c)

            try:
                error = relative_error(run(), case)
            except Exception as exc:  # e.g. more shared memory than the GPU has
                error, row["note"] = float("nan"), f"{type(exc).__name__}: {str(exc)[:120]}"
            if error <= NORM_TOLERANCES[dname]:
                ms = _median_ms(run, quick)
                row.update(ms=ms, tflops=tflops(flops(batch, heads, seq, d, causal), ms))
            else:
                row.setdefault("note", f"wrong (relative error {error:.3g})")
            rows.append(row)
            say(row)
    return rows


def load_learner(root: Path):
    return rowwise.load_learner(root, rowwise.Kernel("attention", "attention",
                                                     "attention_triton", (), 0, ""))


def try_small(function) -> str:
    """'' if ``function`` is right on a small attention, else why it is skipped."""
    case = make_case(2, 3, 77, 64, "fp16", True)
    try:
        out = function(*case["args"])
    except NotImplementedError:
        return "not started (it raises NotImplementedError)"
    except Exception as exc:
        return f"raises {type(exc).__name__}: {str(exc)[:120]}"
    error = relative_error(out, case)
    return "" if error <= NORM_TOLERANCES["fp16"] else \
        f"wrong on a causal (2, 3, 77, 64) float16 attention (relative error {error:.3g}): " \
        "fix it first"


# ---------------------------------------------------------------------------------------------
# output


def _cell(row: dict | None) -> str:
    return f"{row['tflops']:.0f}" if row and "tflops" in row else "-"


def table_lines(results: list[dict]) -> list[str]:
    present = [name for name in ("yours", "reference", "torch")
               if any(r["impl"] == name for r in results)]
    head = ["dtype", "seq", "d", "causal", "batch x heads"] + \
        [f"{name} TFLOP/s" for name in present]
    lines = ["| " + " | ".join(head + ["reference / torch", "SDPA's kernel"]) + " |",
             "|" + "|".join("---:" for _ in range(len(head) + 2)) + "|"]
    keys = []
    for r in results:
        key = (r["dtype"], r["seq"], r["d"], r["causal"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        case = {r["impl"]: r for r in results if (r["dtype"], r["seq"], r["d"], r["causal"]) ==
                key}
        ref, theirs = case.get("reference"), case.get("torch")
        ratio = f"{ref['tflops'] / theirs['tflops']:.2f}" if ref and theirs and \
            "tflops" in ref and "tflops" in theirs else "-"
        any_row = next(iter(case.values()))
        cells = [key[0], str(key[1]), str(key[2]), "yes" if key[3] else "no",
                 f"{any_row['batch']} x {any_row['heads']}",
                 *(_cell(case.get(n)) for n in present), ratio,
                 (theirs or {}).get("backend", "-")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str]) -> int:
    import json

    opened = rowwise.opening(argv, parse, "attention", " attention", results_note())
    if isinstance(opened, int):
        return opened
    console, options, env, command = opened
    if options.backward:  # learning.bench hands --backward to learning.bench.attention_backward
        console.print("bench: the backward pass is timed by learning.bench.attention_backward: "
                      "run python -m learning.bench attention --backward")
        return 2
    import torch

    start = time.monotonic()
    result = {"env": env, "command": command, "results": [], "backends": [], "configs": [],
              "notes": [], "flops": "4 * batch * heads * seq^2 * d, halved when causal"}

    def say(row):
        what = row.get("impl") or row.get("config") or row.get("backend")
        size = f"seq {row['seq']} d {row['d']}{' causal' if row['causal'] else ''}"
        if "tflops" in row:
            extra = f" ({row['backend']})" if row.get("impl") == "torch" and "backend" in row \
                else f" ({row['config']})" if row.get("impl") and "config" in row else ""
            console.print(f"  {row['dtype']} {size} {what}: {row['tflops']:.0f} TFLOP/s{extra}",
                          highlight=False)
        else:
            console.print(f"  {row['dtype']} {size} {what}: {row.get('note', '')}",
                          highlight=False)

    function, why = load_learner(Path(options.root))
    if function is not None:
        why = try_small(function)
    if why:
        note = f"attention.attention_triton skipped: {why}"
        result["notes"].append(note)
        console.print(note)
        function = None
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
                        result["results"] += measure_size(seq, d, dname, causal, options.quick,
                                                          function, say)
                        torch.cuda.empty_cache()
        if not options.no_extras:
            result["backends"] = measure_backends(options.quick, say, options.causal_list)
            result["configs"] = measure_configs(options.quick, say, options.causal_list)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    result["seconds"] = round(time.monotonic() - start, 1)
    if options.json:
        Path(options.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    console.print(f"\n{env['device']}, torch {env['torch']}, triton {env['triton']}, "
                  f"{env['date']}: {result['command']} ({result['seconds']} s)")
    console.print(f"TFLOP/s = {result['flops']} / median time; every output checked against "
                  "float64 on sampled rows first")
    for note in result["notes"]:
        console.print(note)
    console.print("\n".join(table_lines(result["results"])), markup=False)
    return 0
