"""What was tried on a GPU for the two products the reference matmul leaves short of its goals
(1000 cubed, and one decoding step), and lost: tables lesson 12 embeds, computed from the
probes' committed results. Each table keeps, of every kind of row a probe timed, the fastest,
beside torch.matmul timed in the same run, and says each row that failed why.

Plain Python only, like every explainer.
"""

from __future__ import annotations

import json
from pathlib import Path

from learning.course import COURSE_ROOT
from learning.exercises.matmul.explainer import _env_said, _median, _not_committed, _spread
from learning.explainers.page import Table

RESULTS = COURSE_ROOT / "lab" / "results"
# Each kind of row a probe times, as (words in the row's name, the kind): the first that a
# row's name contains names its kind
CLUSTER_KINDS = (("clusters of 4", "clusters of 4 CTAs"), ("clusters of 2", "clusters of 2 CTAs"),
                 ("reference (chosen)", "the reference's choice"), ("", "one CTA per program"))
# (file, the command that writes it, its kinds)
SMALL_PROBES = (
    ("matmul_cluster.json", "python lab/probes/matmul_cluster_probe.py", CLUSTER_KINDS),
    ("matmul_cluster_h100.json", "python lab/probes/matmul_cluster_probe.py", CLUSTER_KINDS),
    ("matmul_specialize_h100.json", "python lab/probes/matmul_specialize_probe.py",
     (("warp-specialized", "loads in a warp of their own"),
      ("C by descriptor", "C stored by tensor descriptor"), ("", "C stored by pointers"))),
    ("matmul_copy_inside_h100.json", "python lab/probes/matmul_copy_inside_probe.py",
     (("rows 1024 apart", "rows 1024 apart, no copy (the bound)"),
      ("A and B copied", "A and B copied in the same launch"),
      ("B copied", "B copied in the same launch"), ("A copied", "A copied in the same launch"),
      ("", "rows 2000 bytes apart"))),
)
DECODE = RESULTS / "matmul_decode.json"
SMALL_SIZE = 1000


def _kind(run: str, kinds: tuple) -> str:
    for words, kind in kinds:
        if words in run:
            return kind
    return run


def _failure(note: str) -> str:
    """A probe's note on a row with no time, in the table's words."""
    if note.startswith("AssertionError: error"):
        return f"wrong answer (relative error {note.split()[-1]})"
    return note


def _short(device: str) -> str:
    return " ".join(word for word in device.split() if not word.endswith("GB") and
                    word not in ("NVIDIA", "HBM3"))


def small_tried(_numbers=None, results: Path = RESULTS):
    """1000 cubed: clusters, warp specialization, C stored by descriptor, copies into aligned
    rows in the product's own launch; the fastest row of each kind per GPU and dtype."""
    rows, said = [], []
    for name, command, kinds in SMALL_PROBES:
        path = results / name
        if not path.exists():
            return _not_committed(path, command)
        data = json.loads(path.read_text(encoding="utf-8"))
        gpu = _short(data["env"]["device"])
        said.append(f"{name}: " + _env_said(data))
        for dtype in ("fp16", "bf16"):
            mine = [r for r in data["rows"] if r.get("dtype") == dtype and
                    r.get("size", SMALL_SIZE) == SMALL_SIZE]
            torch_times = [r["device_us"] for r in mine
                           if r["run"] == "torch.matmul" and "device_us" in r]
            if not torch_times:
                continue
            torch_us = _median(torch_times)
            fastest: dict = {}
            for r in mine:
                if r["run"] == "torch.matmul":
                    continue
                kind = _kind(r["run"], kinds)
                times = [x["device_us"] for x in mine if x["run"] == r["run"] and
                         "device_us" in x]
                if not times:  # it failed: said on a row of its own
                    fastest[f"{kind}: {_failure(r.get('note', 'no time'))}"] = (
                        float("inf"), r["run"], "-", "-")
                    continue
                us = _median(times)
                if us < fastest.get(kind, (float("inf"),))[0]:
                    fastest[kind] = (us, r["run"], _spread(times), f"{torch_us / us:.2f}")
            rows.append((gpu, dtype, "torch.matmul", "", f"{torch_us:.2f}",
                         _spread(torch_times), "1.00"))
            for kind, (us, run, spread, ratio) in sorted(fastest.items(),
                                                         key=lambda kv: kv[1][0]):
                time = "-" if us == float("inf") else f"{us:.2f}"
                rows.append((gpu, dtype, kind, run, time, spread, ratio))
    return Table(("GPU", "dtype", "what runs", "fastest row of its kind", "GPU us",
                  "lowest to highest", "GPU time: torch / it"), tuple(rows),
                 f"{SMALL_SIZE} cubed; medians over each probe's rounds, GPU time as the bench "
                 "measures it, torch.matmul timed in the same run; a row with no time says "
                 "why it has none. " + " ".join(said))


def _label(chosen: str) -> str:
    """A row as the tables name it, from a probe's record of the reference's choice: its
    label, or the dataclass's repr that the first runs recorded."""
    if not chosen.startswith("TileConfig("):
        return chosen
    fields = dict(part.split("=") for part in chosen[len("TileConfig("):-1].split(", "))
    words = [f"{fields['block_m']}x{fields['block_n']}x{fields['block_k']} group "
             f"{fields['group_m']}", f"{fields['num_warps']} warps",
             f"{fields['num_stages']} stages"]
    if fields.get("split_k", "1") != "1":
        words.append(f"K split in {fields['split_k']}")
    words += [said for flag, said in (("tma", "tensor descriptors"), ("persistent", "persistent"),
                                      ("copy_inside", "copies in the same launch"))
              if fields.get(flag) == "True"]
    return ", ".join(words)


def _width(run: str) -> str:
    if run in ("torch.matmul", "reference (chosen)"):
        return run
    columns = run.split("x")[1]
    split = " K split" if "K split" in run else ""
    return f"strips of {columns} columns{split}"


def decode_tried(_numbers=None, path: Path = DECODE):
    """One decoding step: the fastest row for each strip width of B, with and without K
    split, beside torch.matmul, each with its share of the copy ceiling."""
    if not path.exists():
        return _not_committed(path, "python lab/probes/matmul_decode_probe.py")
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for dtype in ("fp16", "bf16"):
        mine = [r for r in data["rows"] if r.get("dtype") == dtype and "device_us" in r]
        by_run: dict = {}
        for r in mine:
            by_run.setdefault(r["run"], []).append(r)
        if "torch.matmul" not in by_run:
            continue
        torch_us = _median([r["device_us"] for r in by_run["torch.matmul"]])
        fastest: dict = {}
        for run, runs in by_run.items():
            us = _median([r["device_us"] for r in runs])
            kind = _width(run)
            if us < fastest.get(kind, (float("inf"),))[0]:
                fastest[kind] = (us, run, runs)
        chosen = next((r["chosen"] for r in data["rows"] if r.get("dtype") == dtype and
                       "chosen" in r), "")
        for kind, (us, run, runs) in sorted(fastest.items(), key=lambda kv: kv[1][0]):
            share = _median([r["share_of_ceiling"] for r in runs])
            named = {"torch.matmul": "", "reference (chosen)": _label(chosen)}.get(run, run)
            rows.append((dtype, kind, named, f"{us:.2f}",
                         _spread([r["device_us"] for r in runs]), f"{torch_us / us:.2f}",
                         f"{share:.2f}"))
    m, n, k = data["product"]
    return Table(("dtype", "what runs", "fastest row of its kind", "GPU us", "lowest to highest",
                  "GPU time: torch / it", "share of the copy ceiling"), tuple(rows),
                 f"{m} x {n} x {k}; medians over the probe's rounds, GPU time as the bench "
                 f"measures it; the copy ceiling is a 1 GiB copy, "
                 f"{data['copy_ceiling_gbps']:,.0f} GB/s. " + _env_said(data))

