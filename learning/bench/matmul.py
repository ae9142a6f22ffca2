"""Time matrix products on a GPU: the reference, torch.matmul (cuBLAS) and yours.

    python -m learning.bench matmul
    python -m learning.bench matmul --dtypes bf16 --sizes 4096,8x4096x4096 --rounds 5 --json o.json

Reached through ``python -m learning.bench matmul`` (learning.bench hands the arguments on;
``learning.bench.rowwise`` holds the measuring they share).
For each size and dtype the command builds A and B of random normal values, checks every
implementation's C on sampled rows against float64 (by the norm of the error, so that cuBLAS's
own order of summation passes), and only then times it, two ways:

- device time: the GPU's own time per call. The calls are recorded back to back into one CUDA
  graph, cycling over enough copies of A and B that they do not fit in the L2 cache together
  (so each call reads its inputs from memory, as the first call of a new pair would), and the
  graph is replayed under ``triton.testing.do_bench`` (CUDA events around each replay, the L2
  cleared before each); the median replay over the number of calls. No host work is in it.
- call time: the host's wall time per call of the Python function, called back to back in
  eager mode with nothing waiting for the GPU; the clock stops before the one synchronize at
  the end. It is the price of the call itself, whatever the kernel. The implementations are
  timed in turns (a share of the calls each, ``CALL_TURNS`` times over, the median turn kept),
  so that a drift of the host's speed does not land on one of them only.

The first call of a product is the check, which is also when the reference chooses its tiles;
neither timing includes it. ``--rounds R`` repeats the whole sweep; tables show medians over
the rounds and the lowest and highest. TFLOP/s are 2 * M * N * K over the device time; for
products of at most 16 rows (a decode step) the bytes moved over the device time are also
given as a share of a device-to-device copy's speed measured in the same run. Afterwards each
row of the reference's tuning table (``reference_matmul.CONFIGS``) can be timed on its own at
one size. Timings need a CUDA GPU; without one the command says where the committed
measurements are and exits 1 (nothing was timed).
"""

from __future__ import annotations

import time
from pathlib import Path

from learning.bench import rowwise
from learning.cli import ArgumentError, CommandParser
from learning.course import COURSE_ROOT

DEVICE = "cuda"  # the tests point this at the CPU to run the measuring code in the interpreter
DTYPES = ("fp16", "bf16", "fp32")
# (M, N, K): square sizes, sizes that are not multiples of any tile (aligned to 16 elements,
# so rows still start on 16-byte boundaries, or to 8, or odd), and the shapes of a language
# model's layers (a batch of tokens times a weight; a few tokens times a weight; a short K).
SIZES = (
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (2000, 2000, 2000), (4000, 4000, 4000), (1000, 1000, 1000), (4097, 4097, 4097),
    (8192, 4096, 4096), (4096, 14336, 4096), (4096, 4096, 512), (8, 4096, 4096),
    (16, 4096, 4096), (128, 8192, 8192),
)
QUICK_SIZES = ((1024, 1024, 1024), (4096, 4096, 4096), (1000, 1000, 1000), (8, 4096, 4096))
CONFIG_SIZE = (4096, 4096, 4096)  # where every row of the tuning table is timed on its own
SAMPLE_ROWS = 64
# ||C - C64|| / ||C64|| allowed, C64 the float64 product of the same inputs: a float32 sum
# rounded once to the output's dtype (float32 with TF32 products) is far inside these.
NORM_TOLERANCES = {"fp16": 2e-3, "bf16": 1.6e-2, "fp32": 5e-3}
BUDGET_SECONDS = 240.0  # sizes left when this runs out are skipped, and the output says so
RESULTS = COURSE_ROOT / "lab" / "results" / "matmul.json"
SKINNY_M = 16  # products of at most this many rows are judged by bytes, not FLOPs
# The goals of issue 36, judged from the medians: device time of torch.matmul over the
# reference's (at least 1.0 for the decode step, which must also reach 0.75 of the copy
# ceiling), and the reference's call time over torch.matmul's (at most 1.5).
DEVICE_GOAL, SKINNY_DEVICE_GOAL, COPY_GOAL, CALL_GOAL = 0.9, 1.0, 0.75, 1.5
GRAPH_CALLS = 10  # calls per CUDA graph at least (more where more input copies are needed)
CALL_TURNS = 5  # the implementations' call times are taken in this many turns each
MAX_COPIES = 16
TIMING = {
    "device": "GPU time per call: the calls recorded back to back into one CUDA graph, cycling "
              "over copies of A and B too large together for the L2 cache, the graph replayed "
              "under triton.testing.do_bench (CUDA events, L2 cleared before each replay); "
              "median replay / calls",
    "call": "host wall time per call of the Python function, called back to back in eager "
            "mode; the clock stops before the one synchronize at the end; the implementations "
            f"timed in turns, {CALL_TURNS} each, the median turn kept",
}


def results_note(path: Path = RESULTS) -> str:
    """Where a learner without a GPU finds the measured figures (or that there are none)."""
    if path.exists():
        return ("Figures measured on a GPU are committed in lab/results/matmul.json, and "
                "python -m learning.explain matmul shows them.")
    return ("No GPU measurement of the matrix product is committed yet "
            "(lab/results/matmul.json); lesson 12 says so where its figures would be.")


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.bench matmul",
                           description="Time C = A @ B on the GPU, the device's time and the "
                                       "call's: the reference, torch.matmul and yours.")
    parser.add_argument("--sizes", metavar="S,MxNxK,...",
                        help="products to time: 4096 for 4096x4096x4096, or MxNxK (default: "
                             "a sweep)")
    parser.add_argument("--dtypes", metavar="D,D", default="fp16,bf16",
                        help="some of fp16, bf16, fp32 (default: fp16,bf16; fp32 lets both "
                             "sides use TF32)")
    parser.add_argument("--quick", action="store_true",
                        help="four sizes and shorter timing runs: a first look, not a figure")
    parser.add_argument("--no-configs", action="store_true",
                        help="leave out timing each row of the tuning table on its own")
    parser.add_argument("--rounds", type=int, default=1, metavar="R",
                        help="time the whole sweep R times; tables show medians and the "
                             "lowest and highest round (default 1)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_SECONDS, metavar="S",
                        help=f"stop starting new sizes after this many seconds (default "
                             f"{BUDGET_SECONDS:g})")
    parser.add_argument("--json", metavar="PATH", help="write every measurement here")
    parser.add_argument("--root", metavar="DIR", default=str(COURSE_ROOT),
                        help="where your matmul.py is (default: the course root)")
    return parser


def parse_sizes(text: str | None, quick: bool = False) -> tuple[tuple[int, int, int], ...]:
    if text is None:
        return QUICK_SIZES if quick else SIZES
    sizes = []
    for item in text.split(","):
        item = item.strip().lower()
        parts = item.split("x")
        try:
            numbers = [int(p) for p in parts]
        except ValueError:
            raise ArgumentError(f"--sizes: '{item}' is not a size (expected 4096 or "
                                "1000x4096x333)") from None
        if len(numbers) == 1:
            numbers *= 3
        if len(numbers) != 3 or not all(1 <= v <= 65536 for v in numbers):
            raise ArgumentError(f"--sizes: '{item}' needs one size or M x N x K, each 1 to "
                                "65536")
        sizes.append(tuple(numbers))
    return tuple(sizes)


def parse_dtypes(text: str) -> tuple[str, ...]:
    names = tuple(item.strip() for item in text.split(",") if item.strip())
    for name in names:
        if name not in DTYPES:
            raise ArgumentError(f"--dtypes: unknown dtype '{name}'; choose from "
                                f"{', '.join(DTYPES)}")
    if not names:
        raise ArgumentError("--dtypes needs at least one of fp16, bf16, fp32")
    return names


def parse(argv: list[str]):
    options = build_parser().parse_args(argv)
    options.size_list = parse_sizes(options.sizes, options.quick)
    options.dtypes = parse_dtypes(options.dtypes)
    if not 1 <= options.rounds <= 50:
        raise ArgumentError(f"--rounds: {options.rounds} is not allowed (1 to 50)")
    return options


# ---------------------------------------------------------------------------------------------
# measuring


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def product_bytes(m: int, n: int, k: int, dname: str) -> int:
    """Bytes a product must move at least: A and B read once, C written once."""
    return (m * k + k * n + m * n) * {"fp16": 2, "bf16": 2, "fp32": 4}[dname]


def make_case(m: int, n: int, k: int, dname: str, seed: int = 0) -> dict:
    """A and B of random normal values in the dtype, and the float64 rows to check against."""
    import torch

    dtype = rowwise.torch_dtype(dname)
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    a = torch.randn(m, k, device=DEVICE, generator=g).to(dtype)
    b = torch.randn(k, n, device=DEVICE, generator=g).to(dtype)
    picked = rowwise.sample(m, seed=m + n + k).to(DEVICE)
    ref = a[picked].double() @ b.double()
    return {"args": (a, b), "ref": ref, "picked": picked}


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| on the sampled rows; inf for a wrong shape or any NaN."""
    import torch

    out = out.double()
    if out.shape != ref.shape or bool(torch.isnan(out).any()):
        return float("inf")
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def implementations(learner) -> dict:
    import torch

    import reference_matmul

    table = {"reference": reference_matmul.matmul, "torch": torch.matmul}
    if learner is not None:
        table = {"yours": learner, **table}
    return table


def input_copies(a, b, l2_bytes: int | None) -> list[tuple]:
    """(a, b) and as many clones as it takes for all of them to be twice the L2 cache (at
    most MAX_COPIES in all): a call that follows its own inputs around the list finds them
    evicted, as a new product's would be."""
    one = a.numel() * a.element_size() + b.numel() * b.element_size()
    copies = min(MAX_COPIES, max(1, -(-2 * (l2_bytes or 0) // one)))
    return [(a, b)] + [(a.clone(), b.clone()) for _ in range(copies - 1)]


def device_us(function, inputs: list[tuple], quick: bool) -> float:
    """The GPU's microseconds per call (TIMING["device"]): at least GRAPH_CALLS calls, a whole
    number of rounds over ``inputs``, recorded into one CUDA graph and replayed."""
    import torch

    calls = [inputs[i % len(inputs)] for i in range(-(-GRAPH_CALLS // len(inputs)) *
                                                      len(inputs))]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm: choices made, kernels compiled, memory pooled
        for a, b in inputs:
            function(a, b)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for a, b in calls:
            function(a, b)
    ms = rowwise.median_ms(graph.replay, quick)
    del graph
    return ms * 1e3 / len(calls)


def call_us(function, a, b, quick: bool, device_us: float = 0.0, share: int = 1) -> float:
    """The host's microseconds per call (TIMING["call"]): 200 calls (50 with --quick), fewer
    where the GPU needs more than 20 ms for them (the host's figure is the same; only the wait
    at the end grows), 20 at least; a ``share`` of that where the calls are timed in turns."""
    import torch

    calls = max(20, min(50 if quick else 200, int(20_000 / max(device_us, 1.0))) // share)
    function(a, b)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        function(a, b)
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def measure_size(m: int, n: int, k: int, dname: str, quick: bool, learner, say,
                 l2_bytes: int | None = None, ceiling_gbps: float | None = None) -> list[dict]:
    """One row per implementation: checked on sampled rows first, then timed both ways."""
    import reference_matmul

    case = make_case(m, n, k, dname)
    a, b = case["args"]
    inputs = None
    rows = []
    for name, function in implementations(learner).items():
        row = {"impl": name, "dtype": dname, "M": m, "N": n, "K": k}
        try:
            out = function(a, b)  # the reference chooses its tiles here
            error = relative_error(out[case["picked"]], case["ref"])
            del out
        except Exception as exc:  # a size the learner's kernel refuses, say
            error = float("nan")
            row["note"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        row["rel_err"] = error
        row["correct"] = error <= NORM_TOLERANCES[dname]
        if row["correct"]:
            inputs = inputs or input_copies(a, b, l2_bytes)
            try:
                row.update(device_us=device_us(function, inputs, quick), device_timing="graph")
            except Exception as exc:  # not capturable (a learner's sync, say): events instead
                row.update(device_us=1e3 * _median_ms(lambda f=function: f(a, b), quick),
                           device_timing="events",
                           note=f"no CUDA graph ({type(exc).__name__}): device time from "
                                "events around each call, host time included")
            row["input_copies"] = len(inputs)
            row.update(ms=row["device_us"] / 1e3, tflops=tflops(m, n, k, row["device_us"] / 1e3),
                       gbps=product_bytes(m, n, k, dname) / row["device_us"] / 1e3)
            if ceiling_gbps and m <= SKINNY_M:
                row["copy_fraction"] = row["gbps"] / ceiling_gbps
            if name == "reference":
                chosen = reference_matmul.chosen_config(a, b)
                row["config"] = chosen.label if chosen else "-"
        else:
            row.setdefault("note", f"wrong (relative error {error:.3g}): not timed")
        rows.append((row, function))
    time_calls_in_turns([(row, f) for row, f in rows if row["correct"]], a, b, quick)
    for row, _ in rows:
        say(row)
    return [row for row, _ in rows]


def time_calls_in_turns(timed: list[tuple[dict, object]], a, b, quick: bool) -> None:
    """Each row's call_us (TIMING["call"]): the implementations' calls timed in turns, a
    share of the calls each, CALL_TURNS times over, and the median turn kept. The host's speed
    drifts (clocks, other programs) over a run: timed one implementation after the other, a
    drift lands on one of them, and the ratio of the two calls moves with it."""
    took = {id(row): [] for row, _ in timed}
    for _ in range(CALL_TURNS):
        for row, function in timed:
            took[id(row)].append(call_us(function, a, b, quick, row["device_us"], CALL_TURNS))
    for row, _ in timed:
        row["call_us"] = _median(took[id(row)])


def _median_ms(fn, quick: bool) -> float:
    return rowwise.median_ms(fn, quick)


def measure_configs(dname: str, quick: bool, say, size=CONFIG_SIZE,
                    l2_bytes: int | None = None) -> list[dict]:
    """Each row of the reference's tuning table launched on its own (``config=``, so through
    the whole path every call): checked, then its device time."""
    import torch

    import reference_matmul

    m, n, k = size
    case = make_case(m, n, k, dname)
    a, b = case["args"]
    inputs = input_copies(a, b, l2_bytes)
    limit = 0
    if DEVICE == "cuda":
        limit = getattr(torch.cuda.get_device_properties(a.device),
                        "shared_memory_per_block_optin", 0)
    rows = []
    for row_config in reference_matmul.CONFIGS:
        row = {"dtype": dname, "M": m, "N": n, "K": k, "config": row_config.label}
        if limit and row_config.shared_bytes(a.element_size()) > limit:
            row["note"] = "needs more shared memory than the GPU has"
        elif row_config.copy_inside and not any(reference_matmul._copies(a, b)):
            row["note"] = "not run: it copies the operands, and neither needs a copy here"
        else:
            def run(x, y, c=row_config):
                return reference_matmul.matmul(x, y, config=c)

            try:
                error = relative_error(run(a, b)[case["picked"]], case["ref"])
            except Exception as exc:
                error, row["note"] = float("nan"), f"{type(exc).__name__}: {str(exc)[:160]}"
            if error <= NORM_TOLERANCES[dname]:
                us = device_us(run, inputs, quick)
                row.update(device_us=us, ms=us / 1e3, tflops=tflops(m, n, k, us / 1e3))
            else:
                row.setdefault("note", f"wrong (relative error {error:.3g})")
        rows.append(row)
        say(row)
    return rows


def load_learner(root: Path):
    return rowwise.load_learner(root, rowwise.Kernel("matmul", "matmul", "matmul_triton", (), 0,
                                                     ""))


def try_small(function) -> str:
    """'' if ``function`` is right on a small product, else why it is skipped."""
    case = make_case(37, 29, 61, "fp16")
    try:
        out = function(*case["args"])
    except NotImplementedError:
        return "not started (it raises NotImplementedError)"
    except Exception as exc:
        return f"raises {type(exc).__name__}: {str(exc)[:120]}"
    error = relative_error(out[case["picked"]], case["ref"])
    return "" if error <= NORM_TOLERANCES["fp16"] else \
        f"wrong on a 37 x 29 x 61 float16 product (relative error {error:.3g}): fix it first"


# ---------------------------------------------------------------------------------------------
# output


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _spread(values: list[float], digits: int = 2) -> str:
    return "-" if not values else f"{min(values):.{digits}f}" if len(values) == 1 else \
        f"{min(values):.{digits}f} to {max(values):.{digits}f}"


def summarise(results: list[dict]) -> dict:
    """Per (dtype, M, N, K), in the order measured: each implementation's device and call
    microseconds over the rounds, the two ratios of each round (the reference and torch timed
    in that round, one after the other), the reference's share of the copy ceiling, and the
    configurations it chose."""
    shapes: dict = {}
    for r in results:
        shape = shapes.setdefault((r["dtype"], r["M"], r["N"], r["K"]), {
            "device": {}, "call": {}, "rounds": {}, "configs": [], "copy": [], "notes": {}})
        if "device_us" in r:
            shape["device"].setdefault(r["impl"], []).append(r["device_us"])
            shape["call"].setdefault(r["impl"], []).append(r["call_us"])
            shape["rounds"].setdefault(r.get("round", 0), {})[r["impl"]] = r
        else:
            shape["notes"].setdefault(r["impl"], r.get("note", "-"))
        if r["impl"] == "reference" and r.get("config"):
            shape["configs"].append(r["config"])
        if r["impl"] == "reference" and "copy_fraction" in r:
            shape["copy"].append(r["copy_fraction"])
    for shape in shapes.values():
        pairs = [p for p in shape["rounds"].values() if "reference" in p and "torch" in p]
        # speed ratio: torch's device time over the reference's (above 1: the reference is
        # faster); cost ratio: the reference's call time over torch's (above 1: it costs more)
        shape["device_ratios"] = sorted(p["torch"]["device_us"] / p["reference"]["device_us"]
                                        for p in pairs)
        shape["call_ratios"] = sorted(p["reference"]["call_us"] / p["torch"]["call_us"]
                                      for p in pairs)
    return shapes


def most_chosen(configs: list[str]) -> str:
    """The configuration the autotuner chose most often, with how often when it wavered."""
    if not configs:
        return "-"
    best = max(dict.fromkeys(configs), key=configs.count)
    count = configs.count(best)
    return best if count == len(configs) else f"{best} ({count} of {len(configs)} rounds)"


def goal(m: int, shape: dict) -> str:
    """Whether the medians meet issue 36's goals for this product, and which one fails."""
    device, call = shape["device_ratios"], shape["call_ratios"]
    if not device:
        return "not measured"
    wanted = SKINNY_DEVICE_GOAL if m <= SKINNY_M else DEVICE_GOAL
    missed = []
    if _median(device) < wanted:
        missed.append(f"device {_apart(_median(device), wanted)} < {wanted:.2f}")
    if _median(call) > CALL_GOAL:
        missed.append(f"call {_apart(_median(call), CALL_GOAL)} > {CALL_GOAL:.2f}")
    if m <= SKINNY_M and shape["copy"] and _median(shape["copy"]) < COPY_GOAL:
        missed.append(f"copy {_apart(_median(shape['copy']), COPY_GOAL)} < {COPY_GOAL:.2f}")
    return "met" if not missed else "not met: " + ", ".join(missed)


def _apart(value: float, goal: float) -> str:
    """``value`` with the digits that tell it from ``goal``: 0.897 misses 0.90, and "0.90 <
    0.90" would say it does not."""
    for digits in (2, 3, 4):
        shown = f"{value:.{digits}f}"
        if float(shown) != goal:
            return shown
    return f"{value:.6f}"


def table_lines(results: list[dict]) -> list[str]:
    """The run as a Markdown table: medians over its rounds, each ratio's lowest and highest
    round, and the goal."""
    shapes = summarise(results)
    present = [name for name in ("yours", "reference", "torch")
               if any(r["impl"] == name for r in results)]
    head = ["dtype", "M x N x K", *(f"{name} device us" for name in present),
            "torch / reference device (range)", *(f"{name} call us" for name in present),
            "reference / torch call (range)", "reference TFLOP/s", "share of copy",
            "reference's tiles", "goal"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
    def cells(shape, kind):
        return [f"{_median(shape[kind][name]):,.1f}" if shape[kind].get(name)
                else shape["notes"].get(name, "-")[:40] for name in present]

    def ratio(values):
        return f"{_median(values):.2f} ({_spread(values)})" if values else "-"

    for (dtype, m, n, k), shape in shapes.items():
        reference = shape["device"].get("reference")
        lines.append("| " + " | ".join([
            dtype, f"{m} x {n} x {k}", *cells(shape, "device"), ratio(shape["device_ratios"]),
            *cells(shape, "call"), ratio(shape["call_ratios"]),
            f"{tflops(m, n, k, _median(reference) / 1e3):.0f}" if reference else "-",
            ratio(shape["copy"]), most_chosen(shape["configs"]), goal(m, shape)]) + " |")
    return lines


def main(argv: list[str]) -> int:
    import json

    opened = rowwise.opening(argv, parse, "matmul", " matmul", results_note())
    if isinstance(opened, int):
        return opened
    console, options, env, command = opened
    import torch

    start = time.monotonic()
    result = {"env": env, "command": command.strip(), "timing": TIMING, "results": [],
              "configs": [], "notes": [], "tf32": "fp32" in options.dtypes,
              "rounds": options.rounds}

    def say(row):
        what = row.get("impl") or row.get("config")
        size = f"{row['M']}x{row['N']}x{row['K']}"
        if "device_us" in row:
            tiles = f" ({row['config']})" if row.get("impl") and "config" in row else ""
            call = f", call {row['call_us']:.1f} us" if "call_us" in row else ""
            console.print(f"  {row['dtype']} {size} {what}: device {row['device_us']:.1f} us "
                          f"({row['tflops']:.0f} TFLOP/s){call}{tiles}", highlight=False)
        else:
            console.print(f"  {row['dtype']} {size} {what}: {row.get('note', '')}",
                          highlight=False)

    function, why = load_learner(Path(options.root))
    if function is not None:
        why = try_small(function)
    if why:
        note = f"matmul.matmul_triton skipped: {why}"
        result["notes"].append(note)
        console.print(note)
        function = None
    ceiling = None
    if any(m <= SKINNY_M for m, _, _ in options.size_list):
        ceiling = rowwise.copy_ceiling(options.quick)
        result["copy_ceiling_gbps"] = ceiling
        console.print(f"copy ceiling: {ceiling:,.0f} GB/s (a device-to-device copy of 1 GiB)")
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # float32: torch may use TF32 like tl.dot
    try:
        for round_ in range(options.rounds):
            if round_:
                console.print(f"round {round_ + 1} of {options.rounds}")
            for dname in options.dtypes:
                for m, n, k in options.size_list:
                    if time.monotonic() - start > options.budget_s:
                        note = (f"{dname} {m}x{n}x{k} round {round_ + 1} skipped: the "
                                f"{options.budget_s:g} s budget ran out")
                        result["notes"].append(note)
                        console.print(note)
                        continue
                    rows = measure_size(m, n, k, dname, options.quick, function, say,
                                        env.get("l2_bytes"), ceiling)
                    result["results"] += [dict(row, round=round_) for row in rows]
                    torch.cuda.empty_cache()
                    if options.json:  # what is measured so far, should the run be cut short
                        result["seconds"] = round(time.monotonic() - start, 1)
                        Path(options.json).write_text(json.dumps(result, indent=1),
                                                      encoding="utf-8")
            if not options.no_configs:
                for dname in options.dtypes:
                    if dname != "fp32":
                        rows = measure_configs(dname, options.quick, say,
                                               l2_bytes=env.get("l2_bytes"))
                        result["configs"] += [dict(row, round=round_) for row in rows]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    result["seconds"] = round(time.monotonic() - start, 1)
    if options.json:
        Path(options.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    console.print(f"\n{env['device']}, torch {env['torch']}, triton {env['triton']}, "
                  f"{env['date']}: {result['command']} ({result['seconds']} s)")
    console.print(f"device: {TIMING['device']}.\ncall: {TIMING['call']}.\nEvery C checked "
                  f"against float64 on sampled rows first; medians over {options.rounds} "
                  "round(s), each ratio's lowest and highest round in brackets. Goals: torch / "
                  f"reference device >= {DEVICE_GOAL} (>= {SKINNY_DEVICE_GOAL} and >= "
                  f"{COPY_GOAL} of the copy ceiling for M <= {SKINNY_M}); reference / torch "
                  f"call <= {CALL_GOAL}.", highlight=False)
    for note in result["notes"]:
        console.print(note)
    console.print("\n".join(table_lines(result["results"])), markup=False, highlight=False)
    return 0
