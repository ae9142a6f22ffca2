"""The attention backward worked example: 2 queries, 3 keys, d = 2, every step of the backward
pass as a table (D, P, dP, dS, then dV, dK and dQ), small enough to check by hand."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from learning.cli import ArgumentError
from learning.course import COURSE_ROOT
from learning.exercises.softmax.explainer import fixed
from learning.explainers.page import Heading, Page, Step, Steps, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "dO, 2 queries x 2 numbers (1,0,0,1)"
WORKED_Q = ((1.0, 0.0), (0.0, 2.0))
WORKED_K = ((1.0, 1.0), (0.0, 1.0), (2.0, 0.0))
WORKED_V = ((1.0, 2.0), (0.0, 1.0), (2.0, 0.0))
WORKED_DO = ((1.0, 0.0), (0.0, 1.0))
WORKED_BLOCK = 2


def worked() -> tuple[list[list[float]], ...]:
    """q, k, v and dO of the worked example, as lists a learner's function takes."""
    return tuple([list(row) for row in rows] for rows in (WORKED_Q, WORKED_K, WORKED_V, WORKED_DO))


def _dot(a, b) -> float:
    return math.fsum(x * y for x, y in zip(a, b))


def forward(q, k, v, causal: bool = False) -> dict:
    """The forward pass in float64: the scaled scores S, P, the log-sum-exp L and O = P V."""
    scale = 1.0 / math.sqrt(len(q[0]))
    scores = [[scale * _dot(row, key) if not causal or j <= i else -math.inf
               for j, key in enumerate(k)] for i, row in enumerate(q)]
    lse = []
    for row in scores:
        top = max(row)
        lse.append(top + math.log(math.fsum(math.exp(s - top) for s in row)))
    p = [[math.exp(s - m) for s in row] for row, m in zip(scores, lse)]
    o = [[math.fsum(pj * v[j][c] for j, pj in enumerate(row)) for c in range(len(v[0]))]
         for row in p]
    return {"scale": scale, "scores": scores, "lse": lse, "p": p, "o": o}


def backward(q, k, v, do, causal: bool = False) -> dict:
    """Every intermediate of the backward pass, each under its name (whole matrices: the
    kernels compute the same numbers a block at a time)."""
    f = forward(q, k, v, causal)
    scale, p, o = f["scale"], f["p"], f["o"]
    delta = [_dot(a, b) for a, b in zip(do, o)]  # D = rowsum(dO * O)
    dp = [[_dot(row, key) for key in v] for row in do]  # dP = dO V^T
    ds = [[pij * (dpij - di) for pij, dpij in zip(prow, dprow)]
          for prow, dprow, di in zip(p, dp, delta)]  # dS = P * (dP - D)
    dv = [[math.fsum(p[i][j] * do[i][c] for i in range(len(q))) for c in range(len(v[0]))]
          for j in range(len(k))]  # dV = P^T dO
    dk = [[scale * math.fsum(ds[i][j] * q[i][c] for i in range(len(q)))
           for c in range(len(q[0]))] for j in range(len(k))]  # dK = dS^T Q * scale
    dq = [[scale * math.fsum(ds[i][j] * k[j][c] for j in range(len(k)))
           for c in range(len(q[0]))] for i in range(len(q))]  # dQ = dS K * scale
    return dict(f, delta=delta, dp=dp, ds=ds, dv=dv, dk=dk, dq=dq)


def _matrix(rows, name: str, row_name: str, column_name: str, caption: str) -> Table:
    columns = (name, *(f"{column_name}{c}" for c in range(len(rows[0]))))
    return Table(columns, tuple((f"{row_name}{i}", *(fixed(x) for x in row))
                                for i, row in enumerate(rows)), caption)


def _do(numbers) -> list[list[float]]:
    """dO from --input: four numbers, query 0's two then query 1's."""
    if numbers is None:
        return [list(row) for row in WORKED_DO]
    if len(numbers) != 4:
        raise ArgumentError(f"--input: dO of 2 queries x d = 2 is 4 numbers, got {len(numbers)} "
                            "(e.g. --input 1,0,0,1)")
    return [list(numbers[:2]), list(numbers[2:])]


def inputs_table(numbers=None) -> Table:
    """The worked example's q, k, v and dO (``numbers``: dO, as --input gives it)."""
    q, k, v, do = worked()
    if numbers:
        do = [list(numbers[i:i + len(q[0])]) for i in range(0, len(numbers), len(q[0]))]

    def listed(rows) -> str:
        return "; ".join("[" + ", ".join(f"{x:g}" for x in row) + "]" for row in rows)

    rows = tuple((name, f"{len(m)} x {len(m[0])}", listed(m))
                 for name, m in (("q", q), ("k", k), ("v", v), ("dO", do)))
    return Table(("tensor", "shape", "rows"), rows,
                 "One head: a row per query (q, dO) or per key (k, v); every table below is "
                 "computed from these.")


def forward_table(numbers=None) -> Table:
    """S, P and L for the worked q and k, one row per query."""
    f = forward(*worked()[:3])
    rows = tuple((f"q{i}", *(f"{fixed(s)} → {fixed(p)}" for s, p in zip(srow, prow)),
                  fixed(lse)) for i, (srow, prow, lse) in enumerate(zip(f["scores"], f["p"],
                                                                          f["lse"])))
    columns = ("Query", *(f"S → P, k{j}" for j in range(len(WORKED_K))), "L")
    return Table(columns, rows, "S = q·k / sqrt(2); L = log of the row's sum of exp(S); "
                 "P = exp(S − L), which is what the backward pass recomputes from L.")


def delta_table(numbers=None) -> Table:
    do = _do(numbers)
    b = backward(*worked()[:3], do)
    rows = tuple((f"q{i}", ", ".join(fixed(x) for x in orow), ", ".join(fixed(x) for x in drow),
                  fixed(di)) for i, (orow, drow, di) in enumerate(zip(b["o"], do, b["delta"])))
    return Table(("Query", "O", "dO", "D = rowsum(dO·O)"), rows,
                 "D is lesson 11's dot, sum of y·dy, for every row of P at once: sum over j of "
                 "P·dP = dO·(P V) = dO·O.")


def gradients_tables(numbers=None) -> list[Table]:
    do = _do(numbers)
    b = backward(*worked()[:3], do)
    return [
        _matrix(b["dp"], "dP", "q", "k", "dP = dO Vᵀ: how the loss moves with each P."),
        _matrix(b["ds"], "dS", "q", "k", "dS = P·(dP − D): lesson 11's dx, row by row. Each "
                "row sums to 0."),
        _matrix(b["dv"], "dV", "k", "c", "dV = Pᵀ dO: a sum over the queries."),
        _matrix(b["dk"], "dK", "k", "c", "dK = dSᵀ Q / sqrt(2): a sum over the queries."),
        _matrix(b["dq"], "dQ", "q", "c", "dQ = dS K / sqrt(2): a sum over the keys."),
    ]


def steps(numbers=None) -> Steps:
    return Steps((
        Step("D", "D[i] = sum(dO[i] * O[i])", "reduction", "one number per query"),
        Step("P", "P = exp(S - L), S = q k^T * scale", "elementwise", "recomputed, never stored"),
        Step("dV", "dV += P^T dO", "matrix product", "over query blocks"),
        Step("dP", "dP = dO V^T", "matrix product", "a block of scores' shape"),
        Step("dS", "dS = P * (dP - D)", "elementwise", "lesson 11's step"),
        Step("dK", "dK += dS^T Q * scale", "matrix product", "over query blocks"),
        Step("dQ", "dQ += dS K * scale", "matrix product", "over key blocks"),
    ))


def page(row=None) -> Page:
    """The worked example, with dO from ``row`` (four numbers) where given."""
    do = _do(list(row) if row else None)
    q, k, v, _ = worked()
    result = Page("Attention backward: 2 queries, 3 keys, d = 2")
    result.add(
        Text(f"q = {q}, k = {k}, v = {v}, dO = {do}. The forward pass kept O and L, the "
             "log-sum-exp of each row's scores; the backward pass gets dO, the gradient of "
             "the loss with respect to O, and returns dQ, dK and dV."),
        Heading("The forward pass, as the backward pass sees it"),
        forward_table(),
        Heading("D: one dot product per query"),
        delta_table(do[0] + do[1]),
        Heading("The gradients"),
        *gradients_tables(do[0] + do[1]),
        Heading("The steps"),
        steps(),
    )
    if row:
        result.add(Text("Your dO replaced the worked one; q, k and v stay as above."))
    return result


# ---------------------------------------------------------------------------------------------
# How fast the reference's backward pass is: python -m learning.bench attention --backward.

SPEED = COURSE_ROOT / "lab" / "results" / "attention_backward.json"
SWEEP = COURSE_ROOT / "lab" / "results" / "attention_backward_sweep.json"
TARGET = 0.8  # the reference's backward against SDPA's, at seq 4096, d = 128, bfloat16
TARGET_SIZE = (4096, 128, "bf16")
_BACKENDS = ("flash", "efficient", "cudnn")


def _sizes(data: dict) -> dict:
    """{(dtype, seq, d, causal): {implementation: [TFLOP/s per round]}, with "ratios": SDPA's
    time over the reference's, round by round (the two timed one after the other)."""
    sizes: dict = {}
    for r in data["results"]:
        if "tflops" not in r:
            continue
        size = sizes.setdefault((r["dtype"], r["seq"], r["d"], r["causal"]),
                                {"ms": {}, "tflops": {}})
        size["tflops"].setdefault(r["impl"], []).append(r["tflops"])
        size["ms"].setdefault(r["impl"], {})[r["round"]] = r["ms"]
        if r["impl"] == "torch":
            size["sdpa"] = str(r.get("kernel") or r.get("grad_fn", "")).split(":")[0]
    for size in sizes.values():
        ours, theirs = size["ms"].get("reference", {}), size["ms"].get("torch", {})
        size["ratios"] = sorted(theirs[i] / ours[i] for i in ours if i in theirs)
    return sizes


def _median(values) -> str:
    return f"{statistics.median(values):,.0f}" if values else "-"


def _backward_provenance(data: dict) -> str:
    env = data["env"]
    return (f"TFLOP/s of the backward pass alone (2.5 forwards' work), medians over "
            f"{data['rounds']} rounds, each timing the reference and then SDPA; SDPA's "
            f"backends each forced as well. {env['device']} ({env['sms']} SMs), torch "
            f"{env['torch']}, triton {env['triton']}, CUDA {env['cuda']}, {env['date']}; "
            f"command `{data['command'].replace('/root/out/', 'lab/results/')}`.")


def _not_measured(path: Path) -> Text:
    return Text(f"Not measured: lab/results/{path.name} is not committed; on a CUDA GPU, "
                f"python -m learning.bench attention --backward --json lab/results/{path.name} "
                "writes it.")


def speed(_numbers=None, path: Path = SPEED):
    """Each size of the run: the reference's backward beside SDPA's, as torch picks its
    backend and with each backend forced, and the ratio over the rounds."""
    if not path.exists():
        return _not_measured(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for (dtype, seq, d, causal), size in _sizes(data).items():
        ratios = size["ratios"]
        rows.append((f"{dtype}, seq {seq}, d {d}", "yes" if causal else "no",
                     _median(size["tflops"].get("reference")),
                     f"{_median(size['tflops'].get('torch'))} ({size.get('sdpa', '-')})",
                     *(_median(size["tflops"].get(name)) for name in _BACKENDS),
                     f"{statistics.median(ratios):.2f}" if ratios else "-",
                     f"{ratios[0]:.2f} to {ratios[-1]:.2f}" if ratios else "-"))
    return Table(("size", "causal", "reference", "SDPA (as torch picks)", "flash", "efficient",
                  "cuDNN", "reference / SDPA, median", "lowest to highest"), tuple(rows),
                 _backward_provenance(data))


def target(_numbers=None, path: Path = SPEED):
    """The goal, one row per causal: the median ratio over the rounds and whether it is met."""
    if not path.exists():
        return _not_measured(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    seq, d, dtype = TARGET_SIZE
    sizes = _sizes(data)
    rows = []
    for causal in (False, True):
        ratios = sizes.get((dtype, seq, d, causal), {}).get("ratios")
        median = statistics.median(ratios) if ratios else None
        rows.append(("yes" if causal else "no", f">= {TARGET:.2f}",
                     f"{median:.2f} (rounds: {ratios[0]:.2f} to {ratios[-1]:.2f})"
                     if ratios else "-",
                     "not measured" if median is None else
                     "met" if median >= TARGET else "not met"))
    return Table((f"causal ({dtype}, seq {seq}, d = {d})", "reference / SDPA, goal",
                  "measured", "status"), tuple(rows), _backward_provenance(data))


# Blocks a lesson can embed by name, each taking the marker's numbers as dO (none: the worked
# one). See learning.computed.
BLOCKS = {
    "inputs": lambda numbers: inputs_table(numbers or None),
    "forward": lambda numbers: forward_table(numbers or None),
    "delta": lambda numbers: delta_table(numbers or None),
    "dp": lambda numbers: gradients_tables(numbers or None)[0],
    "ds": lambda numbers: gradients_tables(numbers or None)[1],
    "dv": lambda numbers: gradients_tables(numbers or None)[2],
    "dk": lambda numbers: gradients_tables(numbers or None)[3],
    "dq": lambda numbers: gradients_tables(numbers or None)[4],
    "steps": lambda numbers: steps(numbers or None),
    "speed": speed,
    "sweep": lambda _numbers=None: speed(path=SWEEP),
    "target": target,
}
