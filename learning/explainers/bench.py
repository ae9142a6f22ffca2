"""The course's measured figures: tables drawn from the committed results in lab/results/.

``python -m learning.bench`` writes one JSON file per kernel; the files the course measured
are committed under lab/results/, and this topic turns them into the tables that lesson 10
and lab/RESULTS.md show. Nothing here measures anything: it reads JSON, so it needs no GPU,
no torch and no triton, and every figure it prints carries the device, versions, date and
command that produced it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from learning.cli import ArgumentError
from learning.course import COURSE_ROOT
from learning.explainers.page import Heading, Page, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "none: it reads the committed measurements"
RESULTS = COURSE_ROOT / "lab" / "results"
KERNELS = ("softmax", "softmax_backward", "rmsnorm")
IMPLS = (("reference", "triton_kernels"), ("torch", "torch"), ("eager", "eager"))
EVERY_DTYPE, SIXTEEN_BIT = ("fp32", "bf16", "fp16"), ("bf16", "fp16")
# The course's goals for triton_kernels' softmax on this GPU, each stated once, as (what, goal,
# kernel, dtypes, low, high): the lowest fraction of the copy ceiling over those widths must
# reach the goal. Every table of goals (lesson 10, lab/RESULTS.md) reads this list.
GOALS = (
    ("softmax forward, 128 to 65536 columns, every dtype", 0.95, "softmax", EVERY_DTYPE, 128,
     65536),
    ("softmax forward, 16-bit, 32769 to 262144 columns", 0.92, "softmax", SIXTEEN_BIT, 32769,
     262144),
    ("softmax forward, 2**18 and 2**20 columns, every dtype", 0.90, "softmax", EVERY_DTYPE, 2**18,
     2**20),
    ("softmax backward, 512 to 32768 columns, every dtype", 0.97, "softmax_backward",
     EVERY_DTYPE, 512, 32768),
)
MEAN_GOAL = 0.96  # the geometric mean over MEAN_SWEEP


@cache
def load(kernel: str, directory: Path = RESULTS) -> dict:
    return json.loads((directory / f"{kernel}.json").read_text(encoding="utf-8"))


def _rows(data: dict) -> dict:
    """(dtype, cols) -> {impl: row}, in the order measured."""
    cases: dict = {}
    for r in data["results"]:
        cases.setdefault((r["dtype"], r["cols"]), {})[r["impl"]] = r
    return cases


def _cell(row) -> str:
    if not row or "gbps" not in row:
        return "-"
    return f"{row['gbps']:.0f} ({row['frac']:.2f})"


def provenance(kernel: str) -> str:
    data = load(kernel)
    env = data["env"]
    return (f"{env['device']} ({env['sms']} SMs), torch {env['torch']}, triton {env['triton']}, "
            f"CUDA {env['cuda']}, {env['date']}; command `{data['command']}`; copy ceiling "
            f"{data['copy_gbps']:.0f} GB/s at the start of the run, "
            f"{data['copy_gbps_end']:.0f} at its end.")


def sweep_table(kernel: str, dtypes=None) -> Table:
    """GB/s and fraction of the copy ceiling per width, for each implementation."""
    data = load(kernel)
    rows = []
    for (dtype, cols), case in _rows(data).items():
        if dtypes and dtype not in dtypes:
            continue
        ref, theirs = case.get("reference"), case.get("torch")
        ratio = f"{ref['gbps'] / theirs['gbps']:.2f}" if ref and theirs and "gbps" in ref \
            and "gbps" in theirs else "-"
        rows.append((dtype, str(cols), *(_cell(case.get(impl)) for impl, _ in IMPLS), ratio))
    columns = ("dtype", "cols", *(f"{label} GB/s (of copy)" for _, label in IMPLS),
               "triton_kernels / torch")
    return Table(columns, tuple(rows), provenance(kernel))


def latency_table(kernel: str) -> Table:
    data = load(kernel)
    cases: dict = {}
    for r in data["latency"]:
        cases.setdefault((r["dtype"], r["cols"], r["rows"]), {})[r["impl"]] = r
    rows = tuple(
        (dtype, str(cols), str(n), f"{c['reference']['us']:.1f}", f"{c['torch']['us']:.1f}",
         f"{c['reference']['graph_us']:.1f}", f"{c['torch']['graph_us']:.1f}")
        for (dtype, cols, n), c in cases.items())
    columns = ("dtype", "cols", "rows", "triton_kernels us", "torch us",
               "triton_kernels us (graph)", "torch us (graph)")
    return Table(columns, rows, provenance(kernel))


def _versus_torch(data: dict) -> tuple[float, str]:
    """The lowest ratio of triton_kernels.softmax to torch.softmax over the run, and its status:
    two kernels at the copy ceiling differ by the run's noise, so within 1 % is a tie."""
    worst = min(case["reference"]["gbps"] / case["torch"]["gbps"]
                for case in _rows(data).values()
                if "gbps" in case.get("reference", {}) and "gbps" in case.get("torch", {}))
    return worst, "met" if worst >= 1.0 else "level (within 1 %)" if worst >= 0.99 else "not met"


def targets_table(_numbers=None) -> Table:
    """Each goal with the lowest measured fraction in its range, and whether it is met."""
    rows = []
    for label, goal, kernel, dtypes, low, high in GOALS:
        worst = _lowest(load(kernel), dtypes, low, high)
        rows.append((label, f">= {goal:.2f}", f"{worst:.2f}", "met" if worst >= goal
                     else "not met"))
    worst, status = _versus_torch(load("softmax"))
    # four decimals: a ratio a hair under 1 must not print as 1.000 beside "level"
    rows.append(("softmax forward, never slower than torch.softmax (1 to 2**20 columns)",
                 ">= 1.00", f"{worst:.4f}", status))
    return Table(("goal (triton_kernels)", "target", "lowest measured", "status"),
                 tuple(rows), provenance("softmax"))


def summary_table(_numbers=None) -> Table:
    """A few widths of the forward pass in float32 and bfloat16: the short version."""
    cases = _rows(load("softmax"))
    rows = []
    for dtype in ("fp32", "bf16"):
        for cols in (128, 4096, 16384, 65536, 1048576):
            case = cases.get((dtype, cols))
            if case:
                rows.append((dtype, str(cols), _cell(case.get("reference")),
                             _cell(case.get("torch")), _cell(case.get("eager"))))
    return Table(("dtype", "cols", "triton_kernels GB/s (of copy)", "torch GB/s (of copy)",
                  "eager GB/s (of copy)"), tuple(rows), provenance("softmax"))


def probe_table(_numbers=None, keep=lambda row: True) -> Table:
    """lab/probes/whole_row_probe.py's variants of a wide 16-bit row, as measured (``keep``
    picks)."""
    data = load("whole_row")
    env = data["env"]
    rows = []
    for r in filter(keep, data["rows"]):
        speed = f"{r['gbps']:.0f} ({r['frac']:.2f})" if "gbps" in r else \
            r.get("error", "wrong answer")
        rows.append((r["variant"], r["dtype"], str(r["cols"]), speed,
                     str(r.get("registers", "-"))))
    note = (f"{env['device']}, torch {env['torch']}, triton {env['triton']}, {env['date']}; "
            f"command `{data['command']}`; inputs of 1 GiB; copy ceiling "
            f"{data['copy_gbps']:.0f} GB/s at the start, {data['copy_gbps_end']:.0f} at the end.")
    return Table(("variant", "dtype", "cols", "GB/s (of copy)", "registers a thread"),
                 tuple(rows), note)


def probe_summary(_numbers=None) -> Table:
    """The probe's 16-bit rows of 32768 columns: the kernels shipped, and the bound without exp."""
    return probe_table(keep=lambda r: r["cols"] == 32768 and r["dtype"] != "fp32"
                       and r["variant"].startswith(("shipped", "no_exp")))


def split_table(name: str, keep=lambda row: True) -> Table:
    """A run of lab/probes/split_shared_probe.py (lab/results/NAME.json): the split-row kernels of
    wide rows, variants and bounds, as measured (``keep`` picks rows)."""
    data = load(name)
    env = data["env"]
    rows = []
    for r in filter(keep, data["rows"]):
        speed = f"{r['gbps']:.0f} ({r['frac']:.2f})" if "gbps" in r else \
            r.get("error", "wrong answer")[:60]
        right = "yes" if r.get("correct") else "no"
        # runs before the shared-memory kernel shipped named the plan they compared it with
        # "shipped": the split kernel with its pieces in registers, as later runs name it
        variant = r["variant"].replace("shipped (", "registers (")
        rows.append((variant, r["dtype"], str(r["cols"]), speed, right,
                     str(r.get("registers", "-"))))
    note = (f"{env['device']}, torch {env['torch']}, triton {env['triton']}, {env['date']}; "
            f"command `{data['command']}`; inputs of 1 GiB; copy ceiling "
            f"{data['copy_gbps']:.0f} GB/s at the start, {data['copy_gbps_end']:.0f} at the end.")
    return Table(("variant", "dtype", "cols", "GB/s (of copy)", "right answer",
                  "registers a thread"), tuple(rows), note)


def paired_split_table(name: str, name39: str, keep=lambda row: True) -> Table:
    """Two runs of one probe, with Triton 3.6 (lab/results/NAME.json) and 3.9 (NAME39.json),
    row beside row: a variant, its speed under each, and whether both gave the right answer
    (``keep`` picks rows of the first run)."""
    runs = [load(name), load(name39)]
    later = {(r["variant"], r["dtype"], r["cols"]): r for r in runs[1]["rows"]}

    def speed(r):
        if r is None:
            return "-"
        # three decimals: the variants that matter sit within 0.01 of the plan and of a goal
        return f"{r['gbps']:.0f} ({r['frac']:.3f})" if "gbps" in r else \
            r.get("error", "wrong answer")[:60]

    rows = []
    for r in filter(keep, runs[0]["rows"]):
        r39 = later.get((r["variant"], r["dtype"], r["cols"]))
        right = "yes" if r.get("correct") and (r39 is None or r39.get("correct")) else "no"
        rows.append((r["variant"], r["dtype"], str(r["cols"]), speed(r), speed(r39), right,
                     str(r.get("registers", "-"))))
    notes = []
    for data in runs:
        env = data["env"]
        notes.append(f"triton {env['triton']}: {env['device']}, torch {env['torch']}, "
                     f"{env['date']}; command `{data['command']}`; copy ceiling "
                     f"{data['copy_gbps']:.0f} GB/s at the start, "
                     f"{data['copy_gbps_end']:.0f} at the end.")
    return Table(("variant", "dtype", "cols", f"GB/s (of copy), {runs[0]['env']['triton']}",
                  f"GB/s (of copy), {runs[1]['env']['triton']}", "right answer",
                  "registers a thread (3.6)"), tuple(rows),
                 "Inputs of 1 GiB. " + " ".join(notes))


def dsmem_summary(_numbers=None) -> Table:
    """Lesson 10's rows of the cluster probe: 16-bit rows of 65536 and 2**18 columns, the plan
    without clusters beside the shapes the plan took, pulled and pushed."""
    shapes = ("2 x 32768/4096, 8 warps", "16 x 16384/2048, 4 warps")
    return paired_split_table("dsmem", "dsmem_triton39", keep=lambda r: (
        r["dtype"] == "bf16" and r["cols"] in (65536, 2**18)
        and (r["variant"] == "plan without clusters"
             or any(r["variant"] in (f"dsmem cluster of {s}", f"dsmem cluster of {s}, pushed")
                    for s in shapes))))


def split_bounds_table(_numbers=None) -> Table:
    """The split kernels at pieces of 16384 columns, and what removing each step gives."""
    return split_table("split_shared_bounds",
                       keep=lambda r: "8192/" not in r["variant"])


def cluster_table(_numbers=None) -> Table:
    """lab/probes/probe_cluster.py's run: the fastest configuration of each case, and how many
    ran."""
    data = load("cluster_triton39")
    env = data["env"]
    best, timed = {}, {}
    for r in data["rows"]:
        key = (r["dtype"], r["cols"])
        timed[key] = timed.get(key, 0) + 1
        if "frac" in r and (key not in best or r["frac"] > best[key]["frac"]):
            best[key] = r
    rows = tuple((dtype, str(cols), r["variant"], f"{r['gbps']:.0f} ({r['frac']:.2f})",
                  str(r.get("registers", "-")), str(timed[dtype, cols]))
                 for (dtype, cols), r in best.items())
    note = (f"{env['device']}, torch {env['torch']}, triton {env['triton']}, {env['date']}; "
            f"command `{data['command']}`; inputs of 1 GiB; copy ceiling "
            f"{data['copy_gbps']:.0f} GB/s at the start, {data['copy_gbps_end']:.0f} at the end.")
    return Table(("dtype", "cols", "fastest configuration", "GB/s (of copy)",
                  "registers a thread", "configurations timed"), rows, note)


def timeline_table(_numbers=None) -> Table:
    """lab/probes/split_timeline.py's run: where a piece of the split kernel spends its time."""
    data = load("split_timeline")
    env = data["env"]
    rows = []
    for r in data["rows"]:
        spans = [f"{r[k]['median_us']:.2f} / {r[k]['p90_us']:.2f}"
                 for k in ("load", "wait", "store", "skew")]
        rows.append((r["dtype"], str(r["cols"]), str(r["exchange"]), *spans,
                     f"{r['wait_share']:.2f}", f"{r['programs_per_sm']:.1f}",
                     f"{r['gbps_from_span']:.0f}"))
    note = (f"{env['device']}, torch {env['torch']}, triton {env['triton']}, {env['date']}; "
            f"command `{data['command']}`; one stamped launch after three, 1 GiB inputs; times "
            "in microseconds, median / 90th percentile over the programs; 'none' gives a wrong "
            "answer and is a bound.")
    return Table(("dtype", "cols", "exchange", "load", "wait", "store", "skew of a row's starts",
                  "share waiting", "programs a multiprocessor", "GB/s over the launch"),
                 tuple(rows), note)


def backward_variants_table(_numbers=None) -> Table:
    """lab/probes/backward_variants.py with Triton 3.6 and 3.9: its 16-bit rows of 32768 columns."""
    rows, notes = [], []
    for name in ("backward_variants", "backward_variants_triton39"):
        data = load(name)
        env = data["env"]
        for r in (r for r in data["rows"] if r["cols"] == 32768):
            rows.append((env["triton"], r["dtype"], str(r["cols"]), r["variant"],
                         str(r["warps"]), f"{r['frac']:.3f}", str(r["registers"]),
                         str(r["spills"])))
        notes.append(f"triton {env['triton']}: {env['device']}, torch {env['torch']}, "
                     f"{env['date']}, command `{data['command']}`, copy ceiling "
                     f"{data['copy_gbps']:.0f} GB/s.")
    return Table(("triton", "dtype", "cols", "variant", "warps", "of copy", "registers",
                  "spilled bytes"), tuple(rows), " ".join(notes))


# The widths past what one program keeps whole, and the sweep whose geometric mean the course
# tracks for them: 128 to 2**18 columns in float32 and bfloat16.
WIDE = (32768, 65536, 262144, 1048576)
MEAN_SWEEP = (("fp32", "bf16"), 128, 2**18)


def _geometric_mean(data: dict) -> float:
    dtypes, low, high = MEAN_SWEEP
    fracs = [r["frac"] for r in data["results"]
             if r["impl"] == "reference" and r["dtype"] in dtypes and low <= r["cols"] <= high]
    product = 1.0
    for f in fracs:
        product *= f
    return product ** (1 / len(fracs))


def versions_table(_numbers=None) -> Table:
    """triton_kernels.softmax on wide rows, measured with Triton 3.6 and with Triton 3.9."""
    runs = (load("softmax"), load("softmax_triton39"))
    cases = [_rows(run) for run in runs]
    rows = []
    for dtype in ("fp32", "bf16", "fp16"):
        for cols in WIDE:
            cells = [_cell(case.get((dtype, cols), {}).get("reference")) for case in cases]
            rows.append((dtype, str(cols), *cells))
    note = ("Runs: " + " ".join(f"triton {run['env']['triton']}: {run['env']['device']}, torch "
                       f"{run['env']['torch']}, {run['env']['date']}, command `{run['command']}`, "
                       f"copy ceiling {run['copy_gbps']:.0f} GB/s at the start."
                       for run in runs))
    return Table(("dtype", "cols", *(f"triton {run['env']['triton']} GB/s (of copy)"
                                    for run in runs)), tuple(rows), note)


def _lowest(data: dict, dtypes, low: int, high: int) -> float:
    return min(r["frac"] for r in data["results"]
               if r["impl"] == "reference" and r["dtype"] in dtypes and low <= r["cols"] <= high)


def wide_targets_table(_numbers=None) -> Table:
    """Every softmax goal against the committed runs with Triton 3.6 and with Triton 3.9."""
    runs = {kernel: (load(kernel), load(f"{kernel}_triton39"))
            for kernel in ("softmax", "softmax_backward")}
    rows = []
    for what, goal, kernel, dtypes, low, high in GOALS:
        found = [_lowest(run, dtypes, low, high) for run in runs[kernel]]
        rows.append((what, f">= {goal:.2f}", *(f"{f:.3f}" for f in found),
                     "met" if min(found) >= goal else "not met"))
    dtypes, low, high = MEAN_SWEEP
    means = [_geometric_mean(run) for run in runs["softmax"]]
    rows.append((f"softmax forward, geometric mean over {' and '.join(dtypes)}, {low} to {high} "
                 "columns", f">= {MEAN_GOAL:.2f}", *(f"{m:.3f}" for m in means),
                 "met" if min(means) >= MEAN_GOAL else "not met"))
    versions = [run["env"]["triton"] for run in runs["softmax"]]
    note = " ".join(
        f"{kernel}, triton {run['env']['triton']}: {run['env']['device']}, torch "
        f"{run['env']['torch']}, {run['env']['date']}, command `{run['command']}`."
        for kernel, pair in runs.items() for run in pair)
    return Table(("goal (triton_kernels, lowest over the widths)", "target",
                  *(f"triton {v}" for v in versions), "status"), tuple(rows), note)


def headline_table(_numbers=None) -> Table:
    """Every goal the course sets its reference kernels, one per row: the figure measured, and
    whether it is met. Softmax figures are the lowest over each range with Triton 3.6 and 3.9;
    matmul and attention figures are medians over rounds, each round timing the reference and
    its peer one after the other."""
    from learning.exercises.attention import explainer as attention
    from learning.exercises.matmul import explainer as matmul

    rows = [(row[0], row[1], f"{row[2]} (3.6), {row[3]} (3.9)", row[4], "lab/results/softmax*")
            for row in wide_targets_table().rows]
    worst, status = _versus_torch(load("softmax"))
    rows.append(("softmax forward, never slower than torch.softmax (1 to 2**20 columns)",
                 ">= 1.00", f"{worst:.4f}", status, "lab/results/softmax.json"))
    for dtype, goal, median, spread, status in matmul.target().rows:
        rows.append((f"matmul {dtype} 4096 x 4096 x 4096, against torch.matmul (cuBLAS)", goal,
                     f"{median} (rounds: {spread})", status, "lab/results/matmul.json"))
    rows.extend(_matmul_shape_rows(matmul))
    seq, d, dtype = attention.TARGET_SIZE
    for causal, _rounds, _ours, _sdpa, median, spread in attention.rounds().rows:
        met = "met" if float(median) >= attention.TARGET else "not met"
        rows.append((f"attention forward {dtype}, seq {seq}, d {d}, causal {causal}, against "
                     "torch's SDPA", f">= {attention.TARGET:.2f}",
                     f"{median} (rounds: {spread})", met, "lab/results/attention_target.json"))
    from learning.exercises.attention_backward import explainer as backward

    seq, d, dtype = backward.TARGET_SIZE
    goal = backward.target()
    for causal, target, measured, status in getattr(goal, "rows", ()):
        rows.append((f"attention backward {dtype}, seq {seq}, d {d}, causal {causal}, against "
                     "SDPA's backward", target, measured, status,
                     "lab/results/attention_backward.json"))
    return Table(("goal", "target", "measured", "status", "results"), tuple(rows),
                 "Fractions of the copy ceiling for softmax; ratios to the peer for matmul and "
                 "attention. Each results file names the device, versions, date and command. "
                 f"GPUs: {_devices()}.")


def _devices() -> str:
    """Which GPU each headline run was measured on, as its results file records it."""
    runs = ("softmax", "softmax_triton39", "softmax_backward", "softmax_backward_triton39",
            "matmul", "matmul_triton39", "attention_target", "attention_backward")
    found = {}
    for name in runs:
        try:
            device = load(name)["env"]["device"]
        except (OSError, KeyError, ValueError):
            continue
        found.setdefault(device, []).append(name)
    return "; ".join(f"{', '.join(names)} on {device}" for device, names in found.items())


def _matmul_shape_rows(matmul) -> list[tuple]:
    """The goals for the products models use, one per row: the GPU's time against
    torch.matmul's per product, the host's time per call, the decoding step's share of the copy
    ceiling; each figure with Triton 3.6 and 3.9 (medians over the rounds)."""
    from learning.bench import matmul as bench

    runs = [(data["env"]["triton"], bench.summarise(data["results"]))
            for data in (matmul.load_results(matmul.RESULTS),
                         matmul.load_results(matmul.RESULTS_TRITON39))
            if data is not None and "timing" in data]
    if not runs:
        return []
    where = "lab/results/matmul*.json"
    rows = []
    for m, n, k in dict.fromkeys(key[1:] for _, shapes in runs for key in shapes):
        if (m, n, k) == matmul.TARGET_SIZE:  # its own rows above
            continue
        skinny = m <= bench.SKINNY_M
        goal = bench.SKINNY_DEVICE_GOAL if skinny else bench.DEVICE_GOAL
        cells, met = [], True
        for version, shapes in runs:
            figures = []
            for dtype in ("fp16", "bf16"):
                ratios = shapes.get((dtype, m, n, k), {}).get("device_ratios")
                if ratios:
                    figures.append(f"{dtype} {bench._median(ratios):.3f}")
                    met = met and bench._median(ratios) >= goal
            cells.append(f"{', '.join(figures)} ({version})")
        rows.append((f"matmul {m} x {n} x {k}, fp16 and bf16, GPU time against torch.matmul",
                     f">= {goal:.2f}", "; ".join(cells), "met" if met else "not met", where))
    cells, met = [], True
    for version, shapes in runs:
        ratios = [bench._median(s["call_ratios"]) for s in shapes.values() if s["call_ratios"]]
        within = sum(r <= bench.CALL_GOAL for r in ratios)
        met = met and within == len(ratios)
        cells.append(f"{within} of {len(ratios)} within, worst {max(ratios):.2f} ({version})")
    rows.append(("matmul, the products above, host time per call against torch.matmul's",
                 f"<= {bench.CALL_GOAL:.2f}", "; ".join(cells), "met" if met else "not met",
                 where))
    cells, met = [], True
    for version, shapes in runs:
        shares = [f"{key[0]} {bench._median(s['copy']):.2f}" for key, s in shapes.items()
                  if s["copy"]]
        met = met and all(float(s.split()[1]) >= bench.COPY_GOAL for s in shares)
        cells.append(f"{', '.join(shares)} ({version})")
    rows.append(("matmul decoding step (16 rows or fewer), share of the copy ceiling",
                 f">= {bench.COPY_GOAL:.2f}", "; ".join(cells), "met" if met else "not met",
                 where))
    return rows


def ceiling_text(_numbers=None) -> Text:
    data = load("softmax")
    env = data["env"]
    return Text(f"Copy ceiling measured on the {env['device']} at the start of the softmax run: "
                f"{data['copy_gbps']:.0f} GB/s (1 GiB copied, read plus write), "
                f"{data['copy_gbps_end']:.0f} GB/s at its end.")


def latency_bytes_text(_numbers=None) -> Text:
    """How long the bytes of the latency cases take at the copy ceiling: the largest one."""
    data = load("softmax")
    element = {"fp32": 4, "bf16": 2, "fp16": 2}
    largest = max(data["latency"], key=lambda r: r["rows"] * r["cols"] * element[r["dtype"]])
    moved = 2 * largest["rows"] * largest["cols"] * element[largest["dtype"]]  # read + write
    seconds = moved / (data["copy_gbps"] * 1e9)
    return Text(f"The largest of these cases, {largest['rows']} rows of {largest['cols']} "
                f"{largest['dtype']} values, reads and writes {moved / 1e6:.1f} MB: "
                f"{seconds * 1e6:.2f} us at the copy ceiling of {data['copy_gbps']:.0f} GB/s.")


def _latency_case(row: dict) -> str:
    rows = f"{row['rows']} row" + ("" if row["rows"] == 1 else "s")
    return f"{rows} of {row['cols']} {row['dtype']} columns"


def latency_swing_text(_numbers=None) -> Text:
    """How far triton_kernels' times without a graph spread over the latency table, overall and
    between neighbouring rows, beside the spread of torch's."""
    data = load("softmax")
    ours = [r for r in data["latency"] if r["impl"] == "reference"]  # in the table's order
    theirs = [r["us"] for r in data["latency"] if r["impl"] == "torch"]
    low, high = min(ours, key=lambda r: r["us"]), max(ours, key=lambda r: r["us"])
    a, b = max(zip(ours, ours[1:]), key=lambda pair: max(pair[0]["us"] / pair[1]["us"],
                                                         pair[1]["us"] / pair[0]["us"]))
    jump = max(a["us"], b["us"]) / min(a["us"], b["us"])
    return Text(f"Softmax forward without a graph, in the committed run: triton_kernels took "
                f"from {low['us']:.1f} us ({_latency_case(low)}) to {high['us']:.1f} us "
                f"({_latency_case(high)}), {high['us'] / low['us']:.1f} times as long, and two "
                f"neighbouring rows of its table differ by up to {jump:.1f} times "
                f"({a['us']:.1f} us for {_latency_case(a)}, {b['us']:.1f} us for "
                f"{_latency_case(b)}); torch took from {min(theirs):.1f} to {max(theirs):.1f} us.")


def check_latency_text(_numbers=None) -> Text:
    """How long a check of the softmax reference took on a GPU (lab/probes/check_phases.py)."""
    data = load("check_phases_softmax")
    wall = {row["what"]: row["median"] for row in data["wall_seconds"]}
    imports = next(row["runs"] for row in data["wall_seconds"]
                   if row["what"] == "python -c 'import torch'")
    return Text(f"On the {data['device']} (torch {data['torch']}, Triton {data['triton']}, "
                f"{data['date']}), importing torch alone took {min(imports):.1f} to "
                f"{max(imports):.1f} s, so a check in a fresh process cannot be fast there. "
                f"With the warm process, a check of a finished {data['exercise']}.py took "
                f"{wall['check, warm kernel cache']:.1f} s with a warm kernel cache and "
                f"{wall['check, after an edit to the kernel']:.1f} s after an edit to the kernel, "
                f"against {wall['check, warm kernel cache, LEARNING_WARM=0']:.1f} s with "
                f"LEARNING_WARM=0; the first check, which starts the warm process and compiles "
                f"every kernel, took "
                f"{wall['first check: empty kernel cache, starts the warm process']:.1f} s.")


def page(row=None) -> Page:
    if row is not None:
        raise ArgumentError("bench shows the committed measurements and takes no --input")
    result = Page("What the course measured: triton_kernels against torch and eager")
    result.add(Text("Read from lab/results/*.json, written by python -m learning.bench on a "
                    "GPU. GB/s counts each input read once and each output written once; the "
                    "fraction in brackets divides by the copy ceiling of the same run."),
               Heading("Targets"), targets_table(),
               Heading("Softmax forward"), sweep_table("softmax"),
               Heading("Softmax backward"), sweep_table("softmax_backward"),
               Heading("RMSNorm"), sweep_table("rmsnorm"),
               Heading("Small batches"), latency_table("softmax"), latency_swing_text())
    return result


BLOCKS = {
    "ceiling": ceiling_text,
    "check_latency": check_latency_text,
    "latency_bytes": latency_bytes_text,
    "latency_swing": latency_swing_text,
    "probe": probe_table,
    "probe32768": probe_summary,
    "split_shared": lambda _numbers=None: split_table("split_shared"),
    "split_bounds": split_bounds_table,
    "split_masks": lambda _numbers=None: split_table("split_shared_masks"),
    "split_persistent": lambda _numbers=None: split_table("split_shared_persistent"),
    "split_fold": lambda _numbers=None: split_table("split_shared_fold"),
    "split_words": lambda _numbers=None: split_table("split_shared_words"),
    "split_hybrid": lambda _numbers=None: split_table("split_shared_hybrid"),
    "split_timeline": timeline_table,
    "cluster": cluster_table,
    "cluster_shared": lambda _numbers=None: split_table("cluster_shared_triton39"),
    "dsmem": lambda _numbers=None: paired_split_table("dsmem", "dsmem_triton39"),
    "dsmem_summary": dsmem_summary,
    "words_sleep": lambda _numbers=None: split_table("words_sleep"),
    "split_2_20_configs": lambda _numbers=None: split_table("split_2_20_configs"),
    "split_prefetch": lambda _numbers=None: split_table("split_prefetch"),
    "cluster_groups": lambda _numbers=None: paired_split_table("cluster_groups",
                                                               "cluster_groups_triton39"),
    # the first ring run's plan rows failed in the probe itself (fixed for the second run)
    "ring": lambda _numbers=None: split_table("ring", keep=lambda r: "error" not in r),
    "ring_warps": lambda _numbers=None: split_table("ring_warps"),
    "backward_variants": backward_variants_table,
    "versions": versions_table,
    "wide_targets": wide_targets_table,
    "summary": summary_table,
    "targets": targets_table,
    "headline": headline_table,
    "forward": lambda _numbers=None: sweep_table("softmax"),
    "forward32": lambda _numbers=None: sweep_table("softmax", ("fp32",)),
    "backward": lambda _numbers=None: sweep_table("softmax_backward"),
    "rmsnorm": lambda _numbers=None: sweep_table("rmsnorm"),
    "latency": lambda _numbers=None: latency_table("softmax"),
    "latency_backward": lambda _numbers=None: latency_table("softmax_backward"),
}
