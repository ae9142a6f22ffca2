"""The attention worked example: one query row walked over blocks of keys with a running maximum,
sum and accumulator, checked against the softmax of the whole row; the causal mask block by
block and where A1's guard is needed; what keeping the scores on chip saves; and the measured
speed of the reference kernel when a GPU run has been committed.

Plain Python only, like every explainer: it needs no torch, no triton and no NumPy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from learning.cli import ArgumentError
from learning.course import COURSE_ROOT
from learning.exercises.matmul.explainer import EXAMPLE_TENSOR_FLOPS
from learning.exercises.softmax.explainer import HUGE, number
from learning.exercises.traffic.explainer import EXAMPLE_BANDWIDTH
from learning.explainers.page import Heading, Page, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "one query row's scores, -inf allowed (1,-inf,3,0,4)"
WORKED_BLOCK = 2  # keys per block in the worked example (the Python case uses the same)
TRACED_ROW = 0  # the query row the page follows block by block
CAUSAL_LENGTH = 8  # queries and keys in the causal picture
RESULTS = COURSE_ROOT / "lab" / "results" / "attention.json"
VARIANTS = COURSE_ROOT / "lab" / "results" / "attention_variants.json"
ROUNDS = COURSE_ROOT / "lab" / "results" / "attention_target.json"
ROUNDS_TRITON_39 = COURSE_ROOT / "lab" / "results" / "attention_target_triton39.json"
TARGET = 0.8  # the reference against torch's SDPA at seq 4096, d = 128, bfloat16
TARGET_SIZE = (4096, 128, "bf16")
MEMORY_SEQS = (512, 1024, 2048, 4096, 8192, 16384)


def worked() -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """q (3 x 4), k and v (6 x 4), small whole numbers: d = 4, so the scale is exactly 1/2.
    Query 0's scores rise from block to block, so its maximum grows in every block."""
    q = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
    k = [[0, 1, 0, 1], [1, 0, 0, 0], [1, 1, 1, 0], [2, 0, 1, 1], [0, 0, 0, 0], [3, 1, 2, 0]]
    v = [[1, 0, 0, 2], [0, 1, 2, 0], [2, 2, 0, 1], [-1, 0, 1, 1], [0, -2, 1, 0], [1, 1, -1, 3]]
    return q, k, v


def values_for(n_keys: int) -> list[list[int]]:
    """The v rows that go with --input scores: two columns, key j's being (j + 1, 2 - j)."""
    return [[j + 1, 2 - j] for j in range(n_keys)]


def scores_of(q, k, causal: bool = False) -> list[list[float]]:
    """q k^T / sqrt(d), -inf where causal hides a key."""
    scale = 1 / math.sqrt(len(q[0]))
    return [[scale * sum(a * b for a, b in zip(row, key)) if not causal or j <= i
             else -math.inf for j, key in enumerate(k)] for i, row in enumerate(q)]


def run(scores, v, block: int, *, guard: bool = True) -> dict:
    """One query row over blocks of keys, every intermediate value kept for the trace."""
    m, total, acc = -math.inf, 0.0, [0.0] * len(v[0])
    steps = []
    for start in range(0, len(scores), block):
        s = scores[start:start + block]
        m_new = max(m, max(s))
        ref = m_new if m_new != -math.inf or not guard else 0.0
        alpha = math.exp(m - ref) if not math.isnan(m - ref) else math.nan
        p = [_exp(x - ref) for x in s]
        total = total * alpha + math.fsum(p)
        acc = [a * alpha + math.fsum(pj * v[start + j][c] for j, pj in enumerate(p))
               for c, a in enumerate(acc)]
        steps.append({"start": start, "scores": s, "m": m, "m_new": m_new, "alpha": alpha,
                      "p": p, "total": total, "acc": acc})
        m = m_new
    return {"steps": steps, "output": [a / total if total else math.nan for a in acc],
            "total": total, "m": m}


def _exp(x: float) -> float:
    return math.nan if math.isnan(x) else math.exp(x)


def full_softmax(scores, v) -> list[float]:
    """The softmax of the whole row at once (lesson 04's six steps), times v."""
    top = max(scores)
    weights = [math.exp(x - top) for x in scores]
    total = math.fsum(weights)
    return [math.fsum(w * row[c] for w, row in zip(weights, v)) / total
            for c in range(len(v[0]))]


def _vector(values, digits: int = 4) -> str:
    return "[" + ", ".join(_short(x, digits) for x in values) + "]"


def _short(x: float, digits: int = 4) -> str:
    if math.isnan(x) or math.isinf(x) or x == int(x) or abs(x) >= HUGE:
        return number(x)
    return f"{x:.{digits}f}"


def _keys(start: int, count: int) -> str:
    return str(start) if count == 1 else f"{start}-{start + count - 1}"


def _input(numbers):
    """(scores, v, block, described) for the page: the worked row, or --input scores."""
    if numbers is None:
        q, k, v = worked()
        return scores_of(q, k)[TRACED_ROW], v, WORKED_BLOCK, False
    scores = [float(x) for x in numbers]
    if any(math.isinf(x) and x > 0 for x in scores):
        raise ArgumentError("--input: a score of +inf has no softmax; use finite numbers or "
                            "-inf for hidden keys")
    if all(x == -math.inf for x in scores):
        raise ArgumentError("--input: every score is -inf, so the row sees no key and has no "
                            "softmax (its output is NaN); give at least one finite score")
    if len(scores) > 16:
        raise ArgumentError(f"--input: {len(scores)} scores is more than the 16 a trace can "
                            "show")
    return scores, values_for(len(scores)), WORKED_BLOCK, True


# ---------------------------------------------------------------------------------------------
# Blocks.


def keys_table(numbers=None) -> Table:
    """The worked example's keys and values, one row per key: what q is scored against and
    what the weights average, so every acc of the trace can be redone by hand."""
    _, k, v = worked()
    rows = tuple((str(j), _vector(key, 1), _vector(value, 1))
                 for j, (key, value) in enumerate(zip(k, v)))
    return Table(("Key j", "k[j]", "v[j]"), rows,
                 "Each query is scored against every k[j]; its output is the weighted average "
                 "of the v[j], weighted by the softmax of its scores.")


def scores_table(numbers=None) -> Table:
    """The worked example's scores, q k^T / sqrt(d), one row per query."""
    q, k, v = worked()
    rows = tuple((str(i), _vector(row, 1), " ".join(_short(x, 2) for x in s))
                 for i, (row, s) in enumerate(zip(q, scores_of(q, k))))
    caption = (f"d = {len(q[0])}, so every score is q[i] . k[j] (k[j] in the table above) "
               f"times 1 / sqrt({len(q[0])}) = {1 / math.sqrt(len(q[0])):g}.")
    return Table(("Query", "q[i]", "Scores with keys 0-5"), rows, caption)


def _matrix(rows) -> str:
    return "[" + ", ".join("[" + ", ".join(str(x) for x in row) + "]" for row in rows) + "]"


def trace(numbers=None) -> Table:
    """One query row, block by block: the worked example's query 0, or --input scores."""
    scores, v, block, _ = _input(numbers or None)
    result = run(scores, v, block)
    rows = []
    for step in result["steps"]:
        rows.append((_keys(step["start"], len(step["scores"])),
                     " ".join(number(x) if math.isinf(x) else _short(x, 2)
                              for x in step["scores"]),
                     number(step["m"]) if math.isinf(step["m"]) else _short(step["m"], 2),
                     _short(step["m_new"], 2), f"{step['alpha']:.6f}",
                     f"{step['total']:.6f}", _vector(step["acc"])))
    caption = ("alpha = exp(m before − m after) rescales what was measured from the old "
               "maximum; l after = l before × alpha + Σ exp(s − m after); acc after = acc "
               "before × alpha + Σ exp(s − m after) × v[j]. Before the first block m = -inf, "
               "l = 0 and acc = 0, so alpha multiplies nothing.")
    return Table(("Keys", "Scores", "m before", "m after", "alpha", "l after", "acc after"),
                 tuple(rows), caption)


def check(numbers=None) -> Text:
    """acc / l after the last block against the softmax of the whole row times v."""
    scores, v, block, _ = _input(numbers or None)
    online = run(scores, v, block)["output"]
    direct = full_softmax(scores, v)
    worst = max(abs(a - b) for a, b in zip(online, direct))
    same = "the same to the last digit" if worst == 0 else \
        f"the same but for float64's rounding (the largest difference is {worst:.1e})"
    return Text(f"After the last block, acc / l = {_vector(online, 9)}. The softmax of the "
                f"whole row at once, times v, gives {_vector(direct, 9)}: {same}. Every "
                "rescaling multiplied acc and l by the same number, so their quotient never "
                "changed meaning.")


def rows_table(numbers=None) -> Table:
    """Every query of the worked example: the blocked result against the full softmax."""
    q, k, v = worked()
    rows = []
    for i, s in enumerate(scores_of(q, k)):
        online = run(s, v, WORKED_BLOCK)["output"]
        direct = full_softmax(s, v)
        grew = sum(1 for step in run(s, v, WORKED_BLOCK)["steps"]
                   if step["m_new"] > step["m"])
        rows.append((str(i), str(grew), _vector(online, 6), _vector(direct, 6),
                     f"{max(abs(a - b) for a, b in zip(online, direct)):.1e}"))
    return Table(("Query", "Blocks where m grew", "Blocked: acc / l", "Whole row: softmax @ v",
                  "Largest difference"), tuple(rows),
                 f"The worked example's three queries in blocks of {WORKED_BLOCK} keys.")


def _block_kind(i: int, start: int, block: int, n: int) -> str:
    keys = range(start, min(start + block, n))
    seen = sum(1 for j in keys if j <= i)
    return "all" if seen == len(keys) else "none" if seen == 0 else "some"


def causal_table(numbers=None) -> Table:
    """Which keys of each block every query sees under the causal mask: length,block."""
    n, block = (int(x) for x in (numbers or (CAUSAL_LENGTH, WORKED_BLOCK)))
    starts = list(range(0, n, block))
    rows = tuple((str(i), *(_block_kind(i, s, block, n) for s in starts)) for i in range(n))
    first_hidden = _rows_meeting_hidden_first(n, block)
    caption = (f"{n} queries and {n} keys in blocks of {block}: 'all' = every key of the block "
               "is visible, 'some' = the block holds the diagonal, 'none' = every key is "
               "hidden (-inf). Visiting blocks from key 0 upward, every row's first block holds "
               "key 0, which every query sees, so no row meets a hidden block while its "
               "maximum is still -inf. Visiting every block from the last one down, queries "
               f"{_span(first_hidden)} start with a hidden block.")
    return Table(("Query", *(f"Keys {_keys(s, min(block, n - s))}" for s in starts)), rows,
                 caption)


def _rows_meeting_hidden_first(n: int, block: int) -> list[int]:
    last = ((n - 1) // block) * block
    return [i for i in range(n) if _block_kind(i, last, block, n) == "none"]


def _span(rows: list[int]) -> str:
    if not rows:
        return "none"
    return str(rows[0]) if len(rows) == 1 else f"{rows[0]} to {rows[-1]}"


def guard_table(numbers=None) -> Table:
    """A hidden block measured from its own maximum, with and without A1's guard."""
    n, block = (int(x) for x in (numbers or (CAUSAL_LENGTH, WORKED_BLOCK)))
    scores = [0.5 * (j + 1) if j == 0 else -math.inf for j in range(n)]  # query 0, causal
    rows = []
    for start in range(0, n, block):
        s = scores[start:start + block]
        own = max(s)
        without = [_exp(x - own) for x in s]
        ref = own if own != -math.inf else 0.0
        with_guard = [_exp(x - ref) for x in s]
        rows.append((_keys(start, len(s)), " ".join(_short(x, 2) for x in s), _short(own, 2),
                     " ".join(number(x) if math.isnan(x) else f"{x:.6f}" for x in without),
                     " ".join(f"{x:.6f}" for x in with_guard)))
    caption = (f"Query 0 under the causal mask sees key 0 only (its score here is "
               f"{_short(scores[0], 2)}, not the worked example's: any finite score gives the "
               "same NaNs). A kernel that measures each "
               "block from the block's own maximum (and then rescales the block's sums to the "
               "running maximum) computes exp((-inf) − (-inf)) = exp(NaN) in every later "
               "block: one NaN makes the whole row NaN. With the guard a block whose maximum "
               "is -inf is measured from 0 instead: exp(-inf − 0) = 0, and the row is right.")
    return Table(("Keys", "Scores", "Block's maximum", "exp(s − block max)",
                  "With the guard"), tuple(rows), caption)


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f}"


def memory_table(numbers=None) -> Table:
    """Bytes of one head's score matrix against its q, k, v and output: d,element_bytes."""
    d, element_bytes = (int(x) for x in (numbers or (128, 2)))
    ridge = EXAMPLE_TENSOR_FLOPS / EXAMPLE_BANDWIDTH
    rows = []
    for seq in MEMORY_SEQS:
        flops = 4 * seq * seq * d  # q k^T and p v: 2 * seq * seq * d each
        qkvo = 4 * seq * d * element_bytes
        scores = seq * seq * element_bytes
        # Three kernels (scores, softmax, p @ v) write S, read it, write P and read it again.
        unfused = qkvo + 4 * scores
        rows.append((f"{seq:,}", _mib(scores), _mib(qkvo), f"{flops / unfused:,.0f}",
                     f"{flops / qkvo:,.0f}"))
    caption = (f"One head, d = {d}, {element_bytes}-byte elements. Unfused attention writes the "
               "scores S and the probabilities P to memory and reads each back; a fused kernel "
               "at best reads q, k and v once and writes the output (a real one reads k and v "
               "again for every block of queries, from L2 if it can). FLOPs: 4 × seq² × d "
               "(q k^T and p @ v). Lesson 12's example GPU "
               f"({EXAMPLE_TENSOR_FLOPS / 1e12:,.0f} TFLOP/s on its tensor cores, "
               f"{EXAMPLE_BANDWIDTH / 1e12:g} TB/s; lesson 02 counted plain float32 "
               "arithmetic, far slower) turns from memory-bound to "
               f"compute-bound at {ridge:,.0f} FLOP per byte.")
    return Table(("seq", "Scores of one head (MiB)", "q, k, v and output (MiB)",
                  "FLOP per byte, unfused", "FLOP per byte, fused"), tuple(rows), caption)


# ---------------------------------------------------------------------------------------------
# The committed measurements (python -m learning.bench attention on a GPU).


def load_results(path: Path = RESULTS) -> dict | None:
    """The committed GPU run, or None while there is none."""
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _provenance(data: dict) -> str:
    env = data["env"]
    return (f"{env['device']} ({env['sms']} SMs), torch {env['torch']}, triton "
            f"{env['triton']}, CUDA {env['cuda']}, {env['date']}; command "
            f"`{data['command']}`.")


NOT_MEASURED = ("Not yet measured on a GPU: lab/results/attention.json is not committed. On a "
                "CUDA GPU, python -m learning.bench attention --json "
                "lab/results/attention.json writes it; python -m learning.computed then fills "
                "this section.")


NOT_IN_RUN = ("Not measured: the committed run did not time {what} on their own (run without "
              "--no-extras to do so). ")


def _key(r: dict) -> tuple:
    return (r["dtype"], r["seq"], r["d"], r["causal"])


def _tflops(row: dict | None) -> str:
    if row and "tflops" in row:
        return f"{row['tflops']:,.0f}"
    return (row or {}).get("note", "-") or "-"


CUT_NAME = 80  # runs before the bench kept kernel names whole recorded this many characters


def _kernel_shown(backend: str) -> str:
    """SDPA's kernel as the bench recorded it, marked " ..." where the run recorded it cut
    (results measured before the bench kept names whole hold exactly CUT_NAME characters)."""
    kind, _, name = backend.partition(": ")
    if len(name) == CUT_NAME:
        return f"{kind}: {name} ..."
    return backend


def _kernel_labels(backends) -> dict[str, str]:
    """A short label per distinct kernel, "cuDNN 1", "cuDNN 2", ...: a kernel's name runs past
    100 characters, too long for a column of an 80-column table, so the table shows the label
    and the caption names each kernel whole, once."""
    labels: dict[str, str] = {}
    counts: dict[str, int] = {}
    for backend in backends:
        if backend in labels or backend == "-":
            continue
        kind = backend.partition(": ")[0]
        counts[kind] = counts.get(kind, 0) + 1
        labels[backend] = f"{kind} {counts[kind]}"
    return labels


def measured(_numbers=None, data: dict | None = None):
    """TFLOP/s of the reference and of torch's SDPA per shape, as measured. A dtype shared by
    every row is said once in the caption rather than in a column, so the table fits 80
    columns."""
    data = data if data is not None else load_results()
    if data is None:
        return Text(NOT_MEASURED)
    cases_: dict = {}
    for r in data["results"]:
        cases_.setdefault(_key(r), {})[r["impl"]] = r
    labels = _kernel_labels(case.get("torch", {}).get("backend", "-") for case in cases_.values())
    dtypes = {dtype for dtype, *_ in cases_}
    rows = []
    for (dtype, seq, d, causal), case in cases_.items():
        ref, theirs = case.get("reference", {}), case.get("torch", {})
        ratio = f"{ref['tflops'] / theirs['tflops']:.2f}" if "tflops" in ref and \
            "tflops" in theirs else "-"
        kernel = theirs.get("backend", "-")
        row = (f"{seq:,}", str(d), "yes" if causal else "no",
               f"{ref.get('batch', '-')} x {ref.get('heads', '-')}", _tflops(ref),
               _tflops(theirs), ratio, labels.get(kernel, kernel))
        rows.append(row if len(dtypes) == 1 else (dtype, *row))
    columns = ("seq", "d", "causal", "batch x heads", "reference TFLOP/s", "SDPA TFLOP/s",
               "reference / SDPA", "SDPA's kernel")
    caption = _provenance(data)
    if labels:
        caption += " SDPA's kernels: " + "; ".join(
            f"{label} = {_kernel_shown(kernel).partition(': ')[2] or kernel}"
            for kernel, label in labels.items()) + "."
    if len(dtypes) == 1:
        return Table(columns, tuple(rows), f"Every row {dtypes.pop()}. {caption}")
    return Table(("dtype", *columns), tuple(rows), caption)


def target(_numbers=None, data: dict | None = None):
    """The goal: the reference at 0.8x SDPA or better at seq 4096, d = 128, bfloat16."""
    data = data if data is not None else load_results()
    if data is None:
        return Text(NOT_MEASURED)
    seq, d, dtype = TARGET_SIZE
    lines = []
    for causal in (False, True):
        pair = {r["impl"]: r for r in data["results"] if _key(r) == (dtype, seq, d, causal)}
        ref, theirs = pair.get("reference", {}), pair.get("torch", {})
        if "tflops" in ref and "tflops" in theirs:
            ratio = ref["tflops"] / theirs["tflops"]
            lines.append(("yes" if causal else "no", f">= {TARGET:.2f}", f"{ratio:.2f}",
                          "met" if ratio >= TARGET else "not met"))
        else:
            lines.append(("yes" if causal else "no", f">= {TARGET:.2f}", "-", "not measured"))
    return Table((f"causal ({dtype}, seq {seq}, d = {d})", "reference / SDPA, goal",
                  "measured", "status"), tuple(lines), _provenance(data))


def backends(_numbers=None, data: dict | None = None):
    """Each of SDPA's backends timed on its own at the target size."""
    data = data if data is not None else load_results()
    if data is None:
        return Text(NOT_MEASURED)
    rows = tuple((r["backend"], "yes" if r["causal"] else "no", _tflops(r))
                 for r in data.get("backends", ()))
    seq, d, dtype = TARGET_SIZE
    if not rows:
        return Text(NOT_IN_RUN.format(what="SDPA's backends") + _provenance(data))
    return Table(("SDPA backend", "causal", "TFLOP/s"), rows,
                 f"{dtype}, seq {seq}, d = {d}. " + _provenance(data))


def configs(_numbers=None, data: dict | None = None):
    """Every row of the reference's tuning table timed on its own at the target size."""
    data = data if data is not None else load_results()
    if data is None:
        return Text(NOT_MEASURED)
    rows = tuple((r["dtype"], f"{r['seq']:,}", str(r["d"]), "yes" if r["causal"] else "no",
                  r["config"], _tflops(r)) for r in data.get("configs", ()))
    if not rows:
        return Text(NOT_IN_RUN.format(what="the tuning table's rows") + _provenance(data))
    return Table(("dtype", "seq", "d", "causal", "configuration", "TFLOP/s"), rows,
                 _provenance(data))


def variants(_numbers=None, path: Path = VARIANTS):
    """lab/probes/attention_variants.py's runs: each form of the kernel at its best tile shape."""
    if not path.exists():
        return Text("Not measured: lab/results/attention_variants.json is not committed; on a CUDA "
                    "GPU, python lab/probes/attention_variants.py --out lab/results writes it.")
    data = json.loads(path.read_text(encoding="utf-8"))
    best: dict = {}
    sdpa: dict = {}
    envs = []
    for run in data["runs"]:
        envs.append(run["env"])
        for r in run["results"]:
            key = (r["d"], r["causal"])
            if r["variant"] in ("sdpa", "sdpa-again"):  # SDPA before and after the variants
                sdpa.setdefault(key, []).append(r["tflops"])
            elif "tflops" in r and r["err"] < 2e-2 and \
                    r["tflops"] > best.get((r["variant"], *key), {}).get("tflops", 0):
                best[(r["variant"], *key)] = r
    rows = tuple((variant, str(d), "yes" if causal else "no", r["tile"],
                  f"{r['tflops']:,.0f}",
                  f"{min(sdpa[(d, causal)]):,.0f} to {max(sdpa[(d, causal)]):,.0f}")
                 for (variant, d, causal), r in sorted(best.items(),
                                                       key=lambda i: (-i[0][1], i[0][2], i[0][0])))
    env = envs[0]
    return Table(("form", "d", "causal", "best tile (BMxBNxwarpsxstages)", "TFLOP/s",
                  "SDPA TFLOP/s in the runs"), rows,
                 f"bfloat16, seq {env['seq']}, batch x heads = {16384 // env['seq']} x 2048/d; "
                 f"the fastest right tile of each form over {len(envs)} runs of "
                 f"lab/probes/attention_variants.py. {env['device']}, torch {env['torch']}, triton "
                 f"{env['triton']}, {env['date']}. 'pointers' is the kernel before it took the "
                 "multiply-add form of 'pointers-fma'; 'descriptors' is the descriptor kernel "
                 "as it was when each program made its own descriptors; 'host4d' is "
                 "_attention_tma now.")


# ---------------------------------------------------------------------------------------------
# The page.


def rounds(_numbers=None, path: Path = ROUNDS):
    """lab/probes/attention_target.py: the target's ratio in several rounds, SDPA timed in each."""
    if not path.exists():
        return Text(f"Not measured: lab/results/{path.name} is not committed; on a "
                    "CUDA GPU, python lab/probes/attention_target.py --json "
                    f"lab/results/{path.name} writes it.")
    data = json.loads(path.read_text(encoding="utf-8"))
    env = data["env"]
    rows = []
    for causal in (False, True):
        these = [r for r in data["results"] if r["causal"] == causal]
        ratios = sorted(r["ratio"] for r in these)
        rows.append(("yes" if causal else "no", str(len(these)),
                     f"{min(r['ours_tflops'] for r in these):,.0f} to "
                     f"{max(r['ours_tflops'] for r in these):,.0f}",
                     f"{min(r['sdpa_tflops'] for r in these):,.0f} to "
                     f"{max(r['sdpa_tflops'] for r in these):,.0f}",
                     f"{ratios[len(ratios) // 2]:.2f}", f"{ratios[0]:.2f} to {ratios[-1]:.2f}"))
    return Table(("causal", "rounds", "reference TFLOP/s", "SDPA TFLOP/s",
                  "reference / SDPA, median", "lowest to highest"), tuple(rows),
                 f"{env['dtype']}, seq {env['seq']}, d = {env['d']}, batch x heads = "
                 f"{env['batch']} x {env['heads']}; each round times the reference (through "
                 "its autotuner) and then SDPA, with triton.testing.do_bench. "
                 f"{env['device']}, torch {env['torch']}, triton {env['triton']}, "
                 f"{env['date']}; command `python lab/probes/attention_target.py --rounds "
                 f"{env['rounds']}`.")


def page(row=None) -> Page:
    """The whole worked example; ``row`` is one query row's scores (-inf allowed), traced with
    v rows (j + 1, 2 - j) in blocks of 2."""
    scores, v, block, own = _input(list(row) if row else None)
    if own:
        result_page = Page(f"Attention for one query row with scores {_vector(scores, 2)}, "
                           f"in blocks of {block} keys")
        result_page.add(Text(f"v's rows are (j + 1, 2 - j) for key j: {_matrix(v)}."),
                        trace(scores), check(scores))
        return result_page
    q, k, _ = worked()
    result_page = Page("Attention, one block of keys at a time")
    result_page.add(
        Text("out[i] = softmax over j of (q[i] . k[j] / sqrt(d)), times v: a weighted average "
             "of v's rows. The kernel never holds a whole row of scores: it walks the keys in "
             f"blocks, here of {block}, keeping for each query the largest score so far (m), "
             "the sum of exp(score - m) so far (l) and the weighted sum of v's rows so far "
             "(acc), and divides acc by l once, at the end."),
        keys_table(),
        scores_table(),
        Heading(f"Query {TRACED_ROW}, block by block"),
        trace(),
        check(),
        Heading("Every query"),
        rows_table(),
        Heading("The causal mask, block by block"),
        causal_table(),
        Heading("Where A1's guard matters"),
        guard_table(),
        Heading("Why a fused kernel: the scores never reach memory"),
        memory_table(),
        Heading("Measured on a GPU"),
        measured(),
    )
    return result_page


# Blocks a lesson can embed by name; each takes the marker's numbers as one list.
BLOCKS = {
    "keys": keys_table,
    "scores": scores_table,
    "trace": trace,
    "check": check,
    "rows": rows_table,
    "causal": causal_table,
    "guard": guard_table,
    "memory": memory_table,
    "measured": measured,
    "target": target,
    "backends": backends,
    "configs": configs,
    "variants": variants,
    "rounds": rounds,
    "rounds_triton39": lambda numbers=None: rounds(numbers, path=ROUNDS_TRITON_39),
}
