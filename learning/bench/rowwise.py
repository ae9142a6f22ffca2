"""Time kernels against their reference, torch and the eager decomposition, on a GPU.

    python -m learning.bench softmax
    python -m learning.bench softmax_backward rmsnorm --dtypes fp32 --widths 1024,32768
    python -m learning.bench softmax --quick --json out.json --plot out.png

For each width and dtype the command builds an input of about 1 GiB (far more than any L2
cache), checks every implementation's output against torch in float64 on a sample of rows,
and only then times it with ``triton.testing.do_bench`` (the median of many runs, after a
warm-up). Speed is reported in GB/s of the fewest bytes the operation must move, and as a
fraction of a device-to-device copy of 1 GiB measured in the same run: the copy ceiling.

The implementations, in order: yours (the function in the module at the course root, skipped
with a note while it raises NotImplementedError or gives a wrong answer), the course's
reference (``triton_kernels``), torch's own kernel, and the eager decomposition (one torch
operation per step, each a kernel of its own). Timings need a CUDA GPU; without one the
command says so and exits 1 (nothing was timed).
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.course import COURSE_ROOT

GIB = 2**30
DEVICE = "cuda"  # the tests point this at the CPU to run the measuring code in the interpreter
DTYPE_NAMES = ("fp32", "bf16", "fp16")
# |out - ref| <= atol + rtol * |ref| against float64, as in tests/test_triton_kernels.py
TOLERANCES = {"fp32": (1e-6, 1e-5), "fp16": (1e-5, 2e-3), "bf16": (1e-5, 1.6e-2)}
# torch and the eager decomposition round their 16-bit intermediates (torch's bfloat16
# backward computes dy - sum(y * dy) in bfloat16), so they are held to the norm of the error,
# ||out - ref|| / ||ref||, instead of every element
NORM_TOLERANCES = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 3e-2}
SAMPLE_ROWS = 64  # rows of each output checked in float64 (first, last and random ones)
LATENCY_ROWS = (1, 8, 64)
LATENCY_WIDTHS = (1024, 32768)
IMPLEMENTATIONS = ("yours", "reference", "torch", "eager")


@dataclass(frozen=True)
class Kernel:
    """One benchmarked operation: its widths, how many full passes it moves, its learner hook."""

    name: str
    module: str  # the learner's module at the course root
    function: str  # the learner's function in it
    widths: tuple[int, ...]
    passes: int  # arrays of rows x cols read or written: 2 for y = f(x), 3 for dx = f(y, dy)
    step: str  # the eager decomposition, for the notes


KERNELS = {
    "softmax": Kernel(
        "softmax", "softmax", "softmax_triton",
        (1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 262144,
         1048576),
        2, "max, subtract, exp, sum, divide"),
    "softmax_backward": Kernel(
        "softmax_backward", "softmax_backward", "softmax_backward_triton",
        (128, 512, 1024, 4096, 8192, 16384, 32768, 65536), 3,
        "multiply, sum, subtract, multiply"),
    "rmsnorm": Kernel(
        "rmsnorm", "rmsnorm", "rmsnorm_triton",
        (128, 512, 1024, 4096, 8192, 16384, 32768), 2,
        "square, mean, add-eps-and-rsqrt, multiply, multiply by the weight"),
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------------------------


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m learning.bench",
                           description="Time a kernel on the GPU against the memory roofline.")
    parser.add_argument("kernels", nargs="+", metavar="kernel",
                        help=f"one or more of: {', '.join(KERNELS)}; or matmul or attention "
                             "alone (TFLOP/s: python -m learning.bench matmul --help)")
    parser.add_argument("--widths", metavar="N,N,...", help="columns per row (default: a sweep)")
    parser.add_argument("--dtypes", metavar="D,D", default="fp32,bf16,fp16",
                        help="some of fp32, bf16, fp16 (default: all three)")
    parser.add_argument("--quick", action="store_true",
                        help="256 MiB inputs and shorter timing runs: a first look, not a figure")
    parser.add_argument("--no-latency", action="store_true",
                        help="leave out the small-batch table (1, 8, 64 rows)")
    parser.add_argument("--json", metavar="PATH", help="write every measurement here")
    parser.add_argument("--plot", metavar="PATH",
                        help="draw GB/s per width here (needs matplotlib)")
    parser.add_argument("--root", metavar="DIR", default=str(COURSE_ROOT),
                        help="where your module is (default: the course root)")
    return parser


def parse_widths(text: str | None, kernel: Kernel) -> tuple[int, ...]:
    if text is None:
        return kernel.widths
    widths = []
    for item in text.split(","):
        try:
            width = int(item.strip())
        except ValueError:
            raise ArgumentError(f"--widths: '{item.strip()}' is not a whole number "
                                "(expected e.g. 1024,4096)") from None
        if not 1 <= width <= 2**20:
            raise ArgumentError(f"--widths: {width} is outside 1..1048576 (2**20) columns")
        widths.append(width)
    return tuple(widths)


def parse_dtypes(text: str) -> tuple[str, ...]:
    names = tuple(item.strip() for item in text.split(",") if item.strip())
    for name in names:
        if name not in DTYPE_NAMES:
            raise ArgumentError(f"--dtypes: unknown dtype '{name}'; choose from "
                                f"{', '.join(DTYPE_NAMES)}")
    if not names:
        raise ArgumentError("--dtypes needs at least one of fp32, bf16, fp16")
    return names


def parse(argv: list[str]):
    options = build_parser().parse_args(argv)
    for name in options.kernels:
        if name in ("matmul", "attention"):
            raise ArgumentError(f"{name} is timed on its own, in TFLOP/s: python -m "
                                f"learning.bench {name}")
        if name not in KERNELS:
            raise ArgumentError(f"unknown kernel '{name}'; choose from {', '.join(KERNELS)} "
                                "(together), or matmul or attention (each on its own)")
    options.dtypes = parse_dtypes(options.dtypes)
    options.width_lists = {name: parse_widths(options.widths, KERNELS[name])
                           for name in options.kernels}
    return options


# ---------------------------------------------------------------------------------------------
# measuring (also used by lab/probes/softmax_sweep.py)
# ---------------------------------------------------------------------------------------------


def torch_dtype(name: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def timing(quick: bool) -> tuple[int, int]:
    """do_bench's warm-up and measuring time, in milliseconds."""
    return (5, 25) if quick else (10, 60)


def median_ms(fn, quick: bool = False) -> float:
    """Median milliseconds of fn() on the GPU: warm-up first, then many timed runs with events
    (do_bench also clears the L2 cache before each run)."""
    from triton.testing import do_bench

    warmup, rep = timing(quick)
    return do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / ms / 1e6


def environment() -> dict:
    """Device, versions and date: printed next to every figure."""
    import torch
    import triton

    props = torch.cuda.get_device_properties(0)
    return {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(0),
        "sms": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        **_ptxas_chosen(),
    }


def _ptxas_chosen() -> dict:
    """The ptxas a run was told to use instead of the one its Triton brings, where it was:
    the PTX assembler is part of what a figure measures."""
    chosen = {key: os.environ[key] for key in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")
              if os.environ.get(key)}
    return {"ptxas": ", ".join(f"{key}={value}" for key, value in chosen.items())} if chosen \
        else {}


def copy_ceiling(quick: bool = False) -> float:
    """GB/s of a device-to-device copy of 1 GiB, counting its read and its write."""
    import torch

    src = torch.empty(GIB // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), quick)
    return gbps(2 * GIB, ms)


def random_rows(rows: int, cols: int, dtype, seed: int, scale: float = 3.0):
    import torch

    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return (torch.randn(rows, cols, device=DEVICE, generator=g) * scale).to(dtype)


def sample(rows: int, seed: int = 0):
    """Row indices to check: the first, the last and random ones in between."""
    import torch

    if rows <= SAMPLE_ROWS:
        return torch.arange(rows)
    g = torch.Generator().manual_seed(seed)
    middle = torch.randint(1, rows - 1, (SAMPLE_ROWS - 2,), generator=g)
    return torch.cat([torch.tensor([0]), middle, torch.tensor([rows - 1])])


def compare(out, ref, dname: str, strict: bool = True) -> tuple[bool, float]:
    """(NaN only where the reference is, and every checked element within tolerance, or with
    ``strict=False`` the norm of the error within NORM_TOLERANCES; the largest error)."""
    import torch

    atol, rtol = TOLERANCES[dname]
    out = out.double().cpu()
    ref = ref.cpu()
    if out.shape != ref.shape:
        return False, float("inf")
    err = (out - ref).abs()
    same_nan = bool(torch.equal(torch.isnan(out), torch.isnan(ref)))
    finite = ~torch.isnan(ref)
    if strict:
        ok = bool((err[finite] <= atol + rtol * ref[finite].abs()).all())
    else:
        size = float(ref[finite].norm())
        ok = float(err[finite].norm()) <= NORM_TOLERANCES[dname] * max(size, 1e-30)
    ok = ok and same_nan
    return ok, float(err[finite].max()) if finite.any() else 0.0


def poison_allocator(like) -> None:
    """Fill a block of ``like``'s size with NaN and free it: torch's caching allocator hands
    the same block to the next output of that size, so an element the kernel forgets to write
    reads NaN instead of a correct value left over from the previous implementation."""
    import torch

    torch.empty_like(like).fill_(float("nan"))


# ---------------------------------------------------------------------------------------------
# the implementations of each kernel
# ---------------------------------------------------------------------------------------------


def load_learner(root: Path, kernel: Kernel):
    """The learner's function, or (None, why not)."""
    path = root / f"{kernel.module}.py"
    if not path.exists():
        return None, f"{path} does not exist"
    spec = importlib.util.spec_from_file_location(f"_bench_{kernel.module}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the learner's file may not even import yet
        return None, f"importing {path.name} failed: {type(error).__name__}: {error}"
    function = getattr(module, kernel.function, None)
    if function is None:
        return None, f"{path.name} has no function {kernel.function}"
    return function, ""


def make_case(kernel: Kernel, rows: int, cols: int, dname: str) -> dict:
    """Inputs (random, never zeros), the float64 reference on the sampled rows, and the
    arguments every implementation takes."""
    import torch

    dtype = torch_dtype(dname)
    picked = sample(rows, seed=cols)
    if kernel.name == "softmax":
        x = random_rows(rows, cols, dtype, seed=cols)
        args = (x,)
        ref = torch.softmax(x[picked].double(), dim=-1)
    elif kernel.name == "softmax_backward":
        y = torch.softmax(random_rows(rows, cols, torch.float32, seed=cols), dim=-1).to(dtype)
        dy = random_rows(rows, cols, dtype, seed=cols + 1, scale=1.0)
        args = (y, dy)
        y64, dy64 = y[picked].double(), dy[picked].double()
        ref = y64 * (dy64 - (y64 * dy64).sum(-1, keepdim=True))
    else:
        x = random_rows(rows, cols, dtype, seed=cols, scale=1.0)
        w = random_rows(1, cols, dtype, seed=cols + 1, scale=1.0)[0] + 1.0
        args = (x, w)
        x64 = x[picked].double()
        ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    extra = cols * args[-1].element_size() if kernel.name == "rmsnorm" else 0
    nbytes = kernel.passes * rows * cols * args[0].element_size() + extra
    return {"args": args, "ref": ref, "picked": picked, "nbytes": nbytes}


def implementations(kernel: Kernel, learner) -> dict:
    """name -> function of the case's arguments."""
    import torch

    import triton_kernels as tk

    try:  # the reference as the course measures it: with the lab's production layer
        import lab.production  # noqa: F401 (importing it installs the layer)
    except ImportError:
        pass
    if kernel.name == "softmax":

        def eager(x):
            m = x.amax(dim=-1, keepdim=True)  # kernel 1: the row maxima
            s = x - m  # kernel 2: subtract
            e = torch.exp(s)  # kernel 3: exponentials
            return e / e.sum(dim=-1, keepdim=True)  # kernels 4 and 5: sum, divide

        table = {"reference": tk.softmax, "torch": lambda x: torch.softmax(x, dim=-1),
                 "eager": eager}
    elif kernel.name == "softmax_backward":

        def eager(y, dy):
            s = (y * dy).sum(dim=-1, keepdim=True)  # multiply, then sum
            return y * (dy - s)  # subtract, multiply

        table = {"reference": tk.softmax_backward,
                 "torch": lambda y, dy: torch._softmax_backward_data(dy, y, -1, y.dtype),
                 "eager": eager}
    else:

        def eager(x, w):
            ms = x.pow(2).mean(dim=-1, keepdim=True)  # square, mean
            return x * torch.rsqrt(ms + 1e-6) * w  # add eps and rsqrt, two multiplies

        def torch_rms(x, w):
            return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps=1e-6)

        table = {"reference": tk.rmsnorm, "torch": torch_rms, "eager": eager}
    if learner is not None:
        table = {"yours": learner, **table}
    return table


def try_small(kernel: Kernel, function) -> str:
    """'' if ``function`` is right on a small case, else why it is skipped."""
    case = make_case(kernel, 37, 781, "fp32")
    try:
        out = function(*case["args"])
    except NotImplementedError:
        return "not started (it raises NotImplementedError)"
    except Exception as error:
        return f"raises {type(error).__name__}: {str(error)[:120]}"
    ok, err = compare(out[case["picked"]], case["ref"], "fp32")
    return "" if ok else f"wrong on a 37 x 781 float32 input (max error {err:.3g}): fix it first"


def measure(kernel: Kernel, widths, dtypes, ceiling: float, quick: bool, learner, say) -> list:
    """One row per (dtype, width, implementation): checked first, then timed."""
    import torch

    results = []
    budget = GIB // 4 if quick else GIB
    for dname in dtypes:
        itemsize = torch_dtype(dname).itemsize
        for cols in widths:
            rows = max(1, budget // (cols * itemsize))
            case = make_case(kernel, rows, cols, dname)
            for name, function in implementations(kernel, learner).items():
                row = {"kernel": kernel.name, "impl": name, "dtype": dname, "cols": cols,
                       "rows": rows, "bytes": case["nbytes"]}
                poison_allocator(case["args"][0])
                try:
                    out = function(*case["args"])
                    strict = name in ("yours", "reference")
                    ok, err = compare(out[case["picked"]], case["ref"], dname, strict)
                    del out
                except Exception as error:  # e.g. a width the learner's kernel refuses
                    ok, err = False, float("nan")
                    row["note"] = f"{type(error).__name__}: {str(error)[:160]}"
                row.update(correct=ok, max_abs_err=err)
                if ok:
                    ms = median_ms(lambda f=function, a=case["args"]: f(*a), quick)
                    row.update(ms=ms, gbps=gbps(case["nbytes"], ms),
                               frac=gbps(case["nbytes"], ms) / ceiling)
                else:
                    row.setdefault("note", f"wrong (max error {err:.3g}): not timed")
                results.append(row)
                say(row)
            del case
            if DEVICE == "cuda":
                torch.cuda.empty_cache()
    return results


def latency(kernel: Kernel, dtypes, say) -> list:
    """Small batches, where launching costs more than moving the bytes: microseconds per call
    of the reference and of torch, launched one by one and replayed from a CUDA graph."""
    from triton.testing import do_bench, do_bench_cudagraph

    results = []
    for dname in dtypes:
        for cols in LATENCY_WIDTHS:
            for rows in LATENCY_ROWS:
                case = make_case(kernel, rows, cols, dname)
                for name, function in implementations(kernel, None).items():
                    if name == "eager":
                        continue
                    def fn(f=function, a=case["args"]):
                        return f(*a)

                    row = {"kernel": kernel.name, "impl": name, "dtype": dname, "cols": cols,
                           "rows": rows,
                           "us": 1e3 * do_bench(fn, warmup=5, rep=25, return_mode="median"),
                           "graph_us": 1e3 * do_bench_cudagraph(fn, rep=25,
                                                                return_mode="median")}
                    results.append(row)
                    say(row)
    return results


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------


def table_lines(results: list, impls=IMPLEMENTATIONS) -> list[str]:
    """One Markdown row per (kernel, dtype, width): GB/s and fraction of the copy ceiling for
    each implementation, and the reference over torch."""
    present = [name for name in impls if any(r["impl"] == name for r in results)]
    head = ["kernel", "dtype", "cols"] + [f"{name} GB/s (/copy)" for name in present]
    lines = ["| " + " | ".join(head + ["reference / torch"]) + " |",
             "|" + "|".join("---:" for _ in range(len(head) + 1)) + "|"]
    keys = []
    for r in results:
        key = (r["kernel"], r["dtype"], r["cols"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        case = {r["impl"]: r for r in results if (r["kernel"], r["dtype"], r["cols"]) == key}
        cells = [key[0], key[1], str(key[2])]
        for name in present:
            r = case.get(name)
            cells.append(f"{r['gbps']:.0f} ({r['frac']:.2f})" if r and "gbps" in r else "-")
        ref, torch_row = case.get("reference"), case.get("torch")
        if ref and torch_row and "gbps" in ref and "gbps" in torch_row:
            cells.append(f"{ref['gbps'] / torch_row['gbps']:.2f}")
        else:
            cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def latency_lines(results: list) -> list[str]:
    lines = ["| kernel | dtype | cols | rows | reference us | torch us | reference us (graph) "
             "| torch us (graph) |", "|" + "|".join("---:" for _ in range(8)) + "|"]
    keys = []
    for r in results:
        key = (r["kernel"], r["dtype"], r["cols"], r["rows"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        case = {r["impl"]: r for r in results
                if (r["kernel"], r["dtype"], r["cols"], r["rows"]) == key}
        ref, theirs = case["reference"], case["torch"]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {ref['us']:.1f} | "
                     f"{theirs['us']:.1f} | {ref['graph_us']:.1f} | {theirs['graph_us']:.1f} |")
    return lines


def plot(result: dict, path: str) -> str:
    """GB/s against width, one panel per kernel and dtype; '' or why no plot was drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install -e '.[plot]')"
    panels = []
    for r in result["results"]:
        if (r["kernel"], r["dtype"]) not in panels:
            panels.append((r["kernel"], r["dtype"]))
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, 3.2 * len(panels)), squeeze=False)
    for ax, (kname, dname) in zip(axes[:, 0], panels):
        for impl in IMPLEMENTATIONS:
            rows = [r for r in result["results"] if (r["kernel"], r["dtype"], r["impl"]) ==
                    (kname, dname, impl) and "gbps" in r]
            if rows:
                ax.plot([r["cols"] for r in rows], [r["gbps"] for r in rows], marker="o",
                        label=impl)
        ax.axhline(result["copy_gbps"], color="grey", linestyle="--", label="copy ceiling")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_title(f"{kname}, {dname}")
        ax.set_xlabel("columns per row")
        ax.set_ylabel("GB/s")
        ax.legend(fontsize="small", loc="lower left")
    env = result["env"]
    figure.suptitle(f"{env['device']}, torch {env['torch']}, triton {env['triton']}, "
                    f"{env['date']}", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return ""


def opening(argv: list[str], parse, topic: str, check_hint: str, results_note: str):
    """What every bench command does first: parse its arguments (one line and status 2 for a
    bad one), refuse to time in the interpreter (status 1: nothing was timed; with where the
    measured figures are), print the run's machine and versions. Returns (console, options,
    env, command), or the exit status when there is nothing to time."""
    console = make_console()
    try:
        options = parse(argv)
    except HelpShown as shown:
        return shown.code
    except ArgumentError as error:
        console.print(f"bench: {error}", style="red")
        return 2
    from learning.grader import mode as kernel_mode

    mode = kernel_mode.select()
    if mode.interpret:
        console.print(f"bench: timings need a CUDA GPU, and kernels would run in the "
                      f"{mode.describe()}. The interpreter's times say nothing about a GPU; "
                      f"check correctness with python -m learning.check{check_hint} instead. "
                      f"{results_note}", highlight=False)
        return 1  # nothing was timed: a script that asked for timings must not read success
    env = environment()
    command = " ".join(["python -m learning.bench", topic, *argv]).replace("  ", " ").strip()
    console.print(f"{env['device']}, torch {env['torch']}, triton {env['triton']}, {env['date']}")
    return console, options, env, command


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opened = opening(argv, parse, "", "", "Figures measured on an H200 are in "
                     "lab/RESULTS.md, and python -m learning.explain bench reads them with you.")
    if isinstance(opened, int):
        return opened
    console, options, env, command = opened
    import torch

    start = time.monotonic()
    ceiling = copy_ceiling(options.quick)
    console.print(f"copy ceiling: {ceiling:.0f} GB/s (1 GiB device-to-device, read + write)")
    result = {"env": env, "command": command, "copy_gbps": ceiling, "results": [],
              "latency": [], "notes": []}

    def say(row):
        if "us" in row:
            console.print(f"  {row['kernel']} {row['impl']} {row['dtype']} {row['rows']}x"
                          f"{row['cols']}: {row['us']:.1f} us, {row['graph_us']:.1f} us in a graph")
        elif "gbps" in row:
            console.print(f"  {row['kernel']} {row['impl']} {row['dtype']} {row['cols']}: "
                          f"{row['gbps']:.0f} GB/s ({row['frac']:.3f} of copy)")
        else:
            console.print(f"  {row['kernel']} {row['impl']} {row['dtype']} {row['cols']}: "
                          f"{row.get('note', '')}")

    for name in options.kernels:
        kernel = KERNELS[name]
        function, why = load_learner(Path(options.root), kernel)
        if function is not None:
            why = try_small(kernel, function)
        if why:
            note = f"{kernel.module}.{kernel.function} skipped: {why}"
            result["notes"].append(note)
            console.print(note)
            function = None
        widths = options.width_lists[name]
        result["results"] += measure(kernel, widths, options.dtypes, ceiling, options.quick,
                                     function, say)
        if not options.no_latency and name != "rmsnorm":
            result["latency"] += latency(kernel, options.dtypes[:2], say)
        torch.cuda.empty_cache()
    result["copy_gbps_end"] = copy_ceiling(options.quick)
    result["seconds"] = round(time.monotonic() - start, 1)
    if options.json:
        Path(options.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    if options.plot:
        why = plot(result, options.plot)
        if why:
            result["notes"].append(why)
            console.print(why)
    console.print(f"\n{env['device']}, torch {env['torch']}, triton {env['triton']}, "
                  f"{env['date']}: {command}")
    console.print(f"copy ceiling {ceiling:.0f} GB/s at the start, "
                  f"{result['copy_gbps_end']:.0f} at the end; GB/s counts the fewest bytes "
                  f"(each input read once, each output written once)")
    for note in result["notes"]:
        console.print(note)
    console.print("\n".join(table_lines(result["results"])), markup=False)
    if result["latency"]:
        console.print("\nSmall batches (microseconds per call, median):")
        console.print("\n".join(latency_lines(result["latency"])), markup=False)
    return 0

