"""Facts the lessons state about the reference kernels, as computed sections: measured on a GPU
(lab/results/lesson_facts.json, written by lab/probes/lesson_facts.py), or read from
triton_kernels' own routing.

A lesson embeds them as ``<!-- computed: facts BLOCK numbers -->`` (see learning.computed).
The measured blocks read JSON only; until the file is committed they say how to make it. The
routing blocks call ``triton_kernels._plan``, the function the launchers use, so they import
torch and Triton (which is why this is not an ``explain`` topic).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from learning.course import COURSE_ROOT
from learning.explainers.page import Table, Text

RESULTS = COURSE_ROOT / "lab" / "results" / "lesson_facts.json"
GPU_RESULTS = COURSE_ROOT / "lab" / "results" / "softmax.json"  # the GPU the course measured
SCRIPT = "lab/probes/lesson_facts.py"
COMMAND = f"PYTHONPATH=. python {SCRIPT} --out lab/results/lesson_facts.json"


def load(path: Path | None = None) -> dict | None:
    """The measurements, or None while lab/results/lesson_facts.json is not committed."""
    path = RESULTS if path is None else path
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _missing() -> Text:
    return Text(f"Not measured yet: this section is drawn from lab/results/lesson_facts.json, "
                f"which `{COMMAND}` writes on a CUDA GPU; `python -m learning.computed` then "
                "fills it in.")


def provenance(data: dict) -> str:
    env = data["env"]
    where = env["device"] if env.get("mode") == "compiled" else \
        f"{env['device']} (not a GPU: these are not a GPU's figures)"
    cuda = f", CUDA {env['cuda']}" if env.get("cuda") else ""
    command = data["command"]
    # a run recorded before the script moved names it where it was then
    moved = "" if SCRIPT in command else f" (the script is now `{SCRIPT}`)"
    return (f"Measured on the {where}, torch {env['torch']}, triton {env['triton']}{cuda}, "
            f"{env['date']}, by `{command}`{moved}.")


def _ulp(value: float) -> str:
    return f"{value:.1f} ulp"


def _instructions(ptx: dict | None, form: str) -> str:
    if not ptx:
        return ""
    names = " and ".join(f"`{name}`" for name in ptx["ex2"])
    multiply = "a multiply by log2(e) and " if ptx["multiplies_by_log2e"] else ""
    return f"{form} compiled to {multiply}{names}"


def exp_error(_numbers=None) -> Table | Text:
    """The largest error of tl.exp and of tl.exp2(x * log2(e)) on ranges [-r, 0], in ulp."""
    data = load()
    if data is None:
        return _missing()
    exp = data["exp_error"]
    rows = tuple((f"[{r['low']:g}, 0]", _ulp(r["exp_max_ulp"]), _ulp(r["exp2_max_ulp"]))
                 for r in exp["ranges"])
    forms = (("exp", "`tl.exp(x)`"), ("exp2", "`tl.exp2(x * log2(e))`"))
    compiled = "; ".join(part for part in (_instructions(exp["ptx"][key], label)
                                           for key, label in forms) if part)
    caption = (f"The largest error over {exp['inputs']} ({exp['count']:,} values), each "
               "against float64's exp; an ulp is the float32 spacing at the true value, so a "
               "correctly rounded exp would be within 0.5. "
               + (f"{compiled}. " if compiled else "") + provenance(data))
    return Table(("x in", "tl.exp(x): largest error", "tl.exp2(x * log2(e)): largest error"),
                 rows, caption)


def _route(r: dict) -> str:
    if r.get("kernel"):
        return f"`softmax(x)`, `{r['kernel']}`"
    return f"`{r['route']}`" if r["route"].startswith("tl.") else r["route"]


def _x(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def underflow(_numbers=None) -> Table | Text:
    """Where each way of computing exp(x) in float32 starts giving 0."""
    data = load()
    if data is None:
        return _missing()
    scan = data["underflow"]
    rows = tuple((_route(r), _x(r["last_nonzero"]), _x(r["first_zero"]),
                  f"{r['subnormal_results']:,}") for r in scan["routes"])
    normal, subnormal = math.log(2.0**-126), math.log(2.0**-149)
    caption = (f"{scan['inputs'][0].upper()}{scan['inputs'][1:]} ({scan['count']:,} values). "
               f"float32's smallest normal number, 2**-126, is exp({normal:.2f}); its smallest "
               f"subnormal, 2**-149, is exp({subnormal:.2f}). The softmax rows are "
               "[0, x, -inf, ...], whose second output is exp(x) / (1 + exp(x)), in float32 "
               "exp(x) itself. " + provenance(data))
    return Table(("exp(x) computed by", "smallest x with a result above 0",
                  "largest x with a result of 0", "subnormal results"), rows, caption)


def underflow_summary(_numbers=None) -> Text:
    """One sentence: where tl.exp and the exp2 form give 0, and whether they keep subnormals."""
    data = load()
    if data is None:
        return _missing()
    routes = {r["route"]: r for r in data["underflow"]["routes"]}
    parts = []
    for name in ("tl.exp(x)", "tl.exp2(x * log2(e))"):
        r = routes[name]
        kept = "subnormal results included" if r["subnormal_results"] else \
            "no subnormal result: below the smallest normal number it gives 0"
        parts.append(f"`{name}` gave results above 0 down to x = {r['last_nonzero']:.2f} "
                     f"({kept})")
    where = data["env"]["device"]
    return Text(f"On the {where}, {parts[0]}, and {parts[1]}.")


def num_warps(_numbers=None) -> Table | Text:
    """How many outputs change in any bit when lesson 08's kernel gets more warps."""
    data = load()
    if data is None:
        return _missing()
    warps = data["num_warps"]
    rows = tuple((f"`{r['kernel']}`, {r['launch']}",
                  f"{r['differ']:,} of {r['of']:,} ({r['differ'] / r['of']:.0%})",
                  f"{r['max_rel_error']:.1e}") for r in warps["rows"])
    n_rows, n_cols = warps["shape"]
    base = f"`{warps['baseline']['kernel']}` with {warps['baseline']['launch']}"
    caption = (f"One {n_rows} x {n_cols} float32 input ({warps['input']}), compared bit for bit "
               f"with {base} (lesson 08's kernel), whose own largest relative error against "
               f"float64 is {warps['baseline_max_rel_error']:.1e}. " + provenance(data))
    return Table(("Launch", "outputs that differ in any bit",
                  "largest relative error against float64"), rows, caption)


# ---------------------------------------------------------------------------------------------
# Which kernel the launchers pick, from triton_kernels._plan itself


def _gpu() -> tuple[int, str]:
    """(multiprocessors, name) of the GPU the course measured, from its committed results."""
    env = json.loads(GPU_RESULTS.read_text(encoding="utf-8"))["env"]
    return env["sms"], env["device"]


def _describe(fn: str, plan, n_cols: int) -> str:
    prefix = "_rmsnorm" if fn == "rmsnorm" else "_softmax"
    if plan.strategy == "single_block":
        name = f"{prefix}_pipelined" if plan.pipelined else \
            f"{prefix}_one_pass" if plan.one_pass else prefix
        return f"`{name}`, {plan.num_warps} warps"
    if plan.strategy == "multi_row":
        return f"`{prefix}_multi_row`, {plan.rows} rows a program, {plan.num_warps} warps"
    if plan.strategy == "looped":
        return f"`{prefix}_looped`, chunks of {plan.block}, {plan.num_warps} warps"
    if plan.cluster:
        return (f"`{prefix}_cluster`, clusters of {plan.cluster} CTAs of {plan.block}, "
                f"{plan.num_warps} warps")
    pieces = -(-n_cols // plan.block)
    name = f"{prefix}_split_shared" if plan.in_shared else f"{prefix}_split_row"
    return f"`{name}`, {pieces} pieces of {plan.block}, {plan.num_warps} warps"


def plan_for(fn: str, n_cols: int, max_pieces: int, itemsize: int, fresh: bool = True):
    """The plan the launcher ``fn`` picks for a contiguous tensor of rows of ``n_cols``: a fresh
    one (aligned), or with ``fresh=False`` one whose rows cannot be read in 16-byte copies."""
    import triton_kernels as tk
    from lab import production as fast

    if fn == "rmsnorm":
        # the rmsnorm launcher's own rule (it has no split kernel): the looped kernel past the
        # widest row it keeps whole, 32768 columns on a GPU and MAX_SINGLE_BLOCK elsewhere
        widest = fast._GPU_WHOLE_ROW[("rmsnorm", itemsize)] if max_pieces else tk.MAX_SINGLE_BLOCK
        strategy = "looped" if n_cols > widest else None
        return fast._plan("rmsnorm", n_cols, strategy, None, max_pieces, itemsize)
    # a freshly allocated 16-bit tensor of an even width reads as aligned 32-bit words, and one
    # of a width that is a multiple of 16 is copied into shared memory 16 bytes at a time on a
    # GPU where Gluon runs (the measured one, a Hopper: thread-block clusters too)
    shared = fresh and max_pieces > 0 and n_cols % 16 == 0
    return fast._plan(fn, n_cols, None, None, max_pieces, itemsize,
                    paired=fresh and itemsize == 2 and n_cols % 2 == 0, shared=shared,
                    clusters=shared)


def routing(fn: str, widths) -> Table:
    """The kernel ``fn``'s launcher picks for each width: interpreter, and the measured GPU."""
    from lab import production as fast

    sms, device = _gpu()
    rows = []
    for n_cols in (int(w) for w in widths):
        rows.append((f"{n_cols:,}", _describe(fn, plan_for(fn, n_cols, 0, 4), n_cols),
                     _describe(fn, plan_for(fn, n_cols, sms, 4), n_cols),
                     _describe(fn, plan_for(fn, n_cols, sms, 2), n_cols)))
    caption = (f"From the plan `{fn}(x)` asks for with the lab's production layer installed "
               "(importing lab.production installs it, as the bench does); without it, "
               "`triton_kernels._plan` gives the interpreter's column on a GPU too. The GPU "
               f"columns are for {sms} multiprocessors, as many as the {device} the course "
               "measured has.")
    if fn == "rmsnorm":
        caption += (" The launcher first sends rows wider than it keeps whole to the looped "
                    "kernel: RMSNorm has no split-row kernel.")
    if fn == "softmax":
        widest = max(int(w) for w in widths)
        pieces = -(-widest // fast._SPLIT_BLOCK)
        fewer = plan_for(fn, widest, pieces - 1, 4, fresh=False)
        caption += (" Rows here are a fresh tensor's, which the kernels can read in 16-byte "
                    "copies (16-bit rows also as 32-bit words). Rows that cannot be (a width "
                    "that is not a multiple of 16, a view that starts off a 16-byte boundary, "
                    "a GPU older than compute capability 8.0 or a Triton older than 3.6) are "
                    "split by `_softmax_split_row` instead, in pieces of "
                    f"{fast._SPLIT_BLOCK}.")
        caption += (f" A row of {widest:,} columns is then {pieces} pieces; a GPU with fewer "
                    f"multiprocessors than that takes {_describe(fn, fewer, widest)}.")
    return Table(("Columns", "Interpreter", "GPU, float32", "GPU, 16-bit"), tuple(rows), caption)


BLOCKS = {
    "exp_error": exp_error,
    "underflow": underflow,
    "underflow_summary": underflow_summary,
    "num_warps": num_warps,
    "routing_softmax": lambda widths: routing("softmax", widths),
    "routing_rmsnorm": lambda widths: routing("rmsnorm", widths),
}
