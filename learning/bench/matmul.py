"""Time matrix products on a GPU: the reference, torch.matmul (cuBLAS) and yours, in TFLOP/s.

    python -m learning.bench matmul
    python -m learning.bench matmul --dtypes bf16 --sizes 4096,1000x4096x333 --json out.json

Reached through ``python -m learning.bench matmul`` (learning.bench hands the arguments on;
``learning.bench.rowwise`` holds the measuring they share).
For each size and dtype the command builds A and B of random normal values, checks every
implementation's C on sampled rows against float64 (by the norm of the error, so that cuBLAS's
own order of summation passes), and only then times it with ``triton.testing.do_bench`` (the
median of many runs after a warm-up, which is also when the autotuner picks its tile shape).
Speed is 2 * M * N * K floating-point operations divided by the time. Afterwards each row of
the reference's tuning table (``reference_matmul.CONFIGS``) is timed on its own at one size,
so that the table can be judged row by row. Timings need a CUDA GPU; without one the command
says where the committed measurements are and exits 0.
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
# so rows still start on 16-byte boundaries, and odd ones, which are not), and the shapes of
# a language model's layers (a batch of tokens times a weight; a few tokens times a weight).
SIZES = (
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (2000, 2000, 2000), (4000, 4000, 4000), (1000, 1000, 1000), (4097, 4097, 4097),
    (8192, 4096, 4096), (4096, 14336, 4096), (16, 4096, 4096), (128, 8192, 8192),
)
QUICK_SIZES = ((1024, 1024, 1024), (4096, 4096, 4096), (4000, 4000, 4000), (1000, 1000, 1000))
CONFIG_SIZE = (4096, 4096, 4096)  # where every row of the tuning table is timed on its own
SAMPLE_ROWS = 64
# ||C - C64|| / ||C64|| allowed, C64 the float64 product of the same inputs: a float32 sum
# rounded once to the output's dtype (float32 with TF32 products) is far inside these.
NORM_TOLERANCES = {"fp16": 2e-3, "bf16": 1.6e-2, "fp32": 5e-3}
BUDGET_SECONDS = 240.0  # sizes left when this runs out are skipped, and the output says so
RESULTS = COURSE_ROOT / "lab" / "results" / "matmul.json"


def results_note(path: Path = RESULTS) -> str:
    """Where a learner without a GPU finds the measured figures (or that there are none)."""
    if path.exists():
        return ("Figures measured on a GPU are committed in lab/results/matmul.json, and "
                "python -m learning.explain matmul shows them.")
    return ("No GPU measurement of the matrix product is committed yet "
            "(lab/results/matmul.json); lesson 12 says so where its figures would be.")


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.bench matmul",
                           description="Time C = A @ B on the GPU in TFLOP/s: the reference, "
                                       "torch.matmul and yours.")
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
                        help="time the whole sweep R times, the autotuner choosing afresh in "
                             "each; tables show medians and the ratio's range (default 1)")
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


def _median_ms(fn, quick: bool) -> float:
    return rowwise.median_ms(fn, quick)


def measure_size(m: int, n: int, k: int, dname: str, quick: bool, learner, say) -> list[dict]:
    """One row per implementation: checked on sampled rows first, then timed."""
    import reference_matmul

    case = make_case(m, n, k, dname)
    a, b = case["args"]
    rows = []
    for name, function in implementations(learner).items():
        row = {"impl": name, "dtype": dname, "M": m, "N": n, "K": k}
        try:
            out = function(a, b)
            error = relative_error(out[case["picked"]], case["ref"])
            del out
        except Exception as exc:  # a size the learner's kernel refuses, say
            error = float("nan")
            row["note"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        row["rel_err"] = error
        row["correct"] = error <= NORM_TOLERANCES[dname]
        if row["correct"]:
            ms = _median_ms(lambda f=function: f(a, b), quick)
            row.update(ms=ms, tflops=tflops(m, n, k, ms))
            if name == "reference":
                chosen = reference_matmul.chosen_config(a, b)
                row["config"] = chosen.label if chosen else "-"
        else:
            row.setdefault("note", f"wrong (relative error {error:.3g}): not timed")
        rows.append(row)
        say(row)
    return rows


def measure_configs(dname: str, quick: bool, say, size=CONFIG_SIZE) -> list[dict]:
    """Each row of the reference's tuning table launched on its own: checked, then timed."""
    import torch

    import reference_matmul

    m, n, k = size
    case = make_case(m, n, k, dname)
    a, b = case["args"]
    limit = 0
    if DEVICE == "cuda":
        limit = getattr(torch.cuda.get_device_properties(a.device),
                        "shared_memory_per_block_optin", 0)
    rows = []
    for row_config in reference_matmul.CONFIGS:
        row = {"dtype": dname, "M": m, "N": n, "K": k, "config": row_config.label}
        if limit and row_config.shared_bytes(a.element_size()) > limit:
            row["note"] = "needs more shared memory than the GPU has"
        else:
            def run(c=row_config):
                return reference_matmul.matmul(a, b, config=c)

            try:
                error = relative_error(run()[case["picked"]], case["ref"])
            except Exception as exc:
                error, row["note"] = float("nan"), f"{type(exc).__name__}: {str(exc)[:160]}"
            if error <= NORM_TOLERANCES[dname]:
                ms = _median_ms(run, quick)
                row.update(ms=ms, tflops=tflops(m, n, k, ms))
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


def table_lines(results: list[dict]) -> list[str]:
    """The run as a Markdown table: medians over its rounds, the ratio's median and range."""
    from learning.exercises.matmul.explainer import _median, _spread, summarise

    shapes = summarise(results)
    present = [name for name in ("yours", "reference", "torch")
               if any(r["impl"] == name for r in results)]
    head = ["dtype", "M x N x K", *(f"{name} TFLOP/s" for name in present),
            "reference / torch", "lowest to highest", "reference's tiles"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
    for (dtype, m, n, k), shape in shapes.items():
        cells = [f"{_median(shape['tflops'][name]):.0f}" if shape["tflops"].get(name) else "-"
                 for name in present]
        ratios = shape["ratios"]
        lines.append("| " + " | ".join([
            dtype, f"{m} x {n} x {k}", *cells, f"{_median(ratios):.2f}" if ratios else "-",
            _spread(ratios), ", ".join(dict.fromkeys(shape["configs"])) or "-"]) + " |")
    return lines


def main(argv: list[str]) -> int:
    import json

    opened = rowwise.opening(argv, parse, "matmul", " matmul", results_note())
    if isinstance(opened, int):
        return opened
    console, options, env, command = opened
    import torch

    import reference_matmul

    start = time.monotonic()
    result = {"env": env, "command": command.strip(), "results": [], "configs": [], "notes": [],
              "tf32": "fp32" in options.dtypes, "rounds": options.rounds}

    def say(row):
        what = row.get("impl") or row.get("config")
        size = f"{row['M']}x{row['N']}x{row['K']}"
        if "tflops" in row:
            tiles = f" ({row['config']})" if row.get("impl") and "config" in row else ""
            console.print(f"  {row['dtype']} {size} {what}: {row['tflops']:.0f} TFLOP/s{tiles}",
                          highlight=False)
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
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # float32: torch may use TF32 like tl.dot
    try:
        for round_ in range(options.rounds):
            if round_:
                reference_matmul.forget_choices()
                console.print(f"round {round_ + 1} of {options.rounds}")
            for dname in options.dtypes:
                for m, n, k in options.size_list:
                    if time.monotonic() - start > options.budget_s:
                        note = (f"{dname} {m}x{n}x{k} round {round_ + 1} skipped: the "
                                f"{options.budget_s:g} s budget ran out")
                        result["notes"].append(note)
                        console.print(note)
                        continue
                    rows = measure_size(m, n, k, dname, options.quick, function, say)
                    result["results"] += [dict(row, round=round_) for row in rows]
                    torch.cuda.empty_cache()
            if not options.no_configs:
                for dname in options.dtypes:
                    if dname != "fp32":
                        rows = measure_configs(dname, options.quick, say)
                        result["configs"] += [dict(row, round=round_) for row in rows]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    result["seconds"] = round(time.monotonic() - start, 1)
    if options.json:
        Path(options.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    console.print(f"\n{env['device']}, torch {env['torch']}, triton {env['triton']}, "
                  f"{env['date']}: {result['command']} ({result['seconds']} s)")
    console.print("TFLOP/s = 2 * M * N * K / median time; every C checked against float64 "
                  f"on sampled rows first; medians over {options.rounds} round(s)")
    for note in result["notes"]:
        console.print(note)
    console.print("\n".join(table_lines(result["results"])), markup=False)
    return 0
