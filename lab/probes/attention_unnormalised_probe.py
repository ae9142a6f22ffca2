"""Why a check on a GPU does or does not name "never divided by l" for attention's Triton part.

Grades the catalogued version (the reference kernel ending with ``out = acc``) once, in one
worker, and prints for every case: the verdict and the causes named, and, where the output is
wrong, how far it is from the bug's float64 replay, as a multiple of the replay's tolerance for
the case's dtype (1 or less: within it), plainly and with both divided by each row's l (as the
grader compares them: learning.exercises.attention.exercise.unnormalised), with the largest
running sum l of the case, which the kernel's rounding of p before p @ v is relative to. A case
the replay does not explain makes the grader drop the bug from every case
(judging._drop_contradicted).

    python lab/probes/attention_unnormalised_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from learning.exercises.attention import exercise as declared
from learning.grader import judging, registry, runner
from learning.grader.catalogue import versions
from learning.grader.numbers import close
from learning.grader.tensors import TensorSpec
from learning.grader.worker_run import Settings, WorkerRun

NAME, PART, KEY = "never divided by l", "triton", "not-normalised"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    options = parser.parse_args(argv)
    exercise = registry.find("attention")
    version = next(v for v in versions("attention") if v.name == NAME and v.part == PART)
    folder = Path(tempfile.mkdtemp(prefix="unnormalised-"))
    (folder / "attention.py").write_text(version.module_text("attention"), encoding="utf-8")
    part = exercise.part(PART)
    bug = next(b for b in part.bugs if b.key == KEY)
    result = runner.grade(exercise, folder, [PART])
    run = WorkerRun(Settings(exercise, folder / "attention.py"), [part])
    run.execute()
    rows = []
    for case, graded in zip(part.cases, result.parts[0].cases):
        outcome = run.heard.outcomes.get((PART, case.name))
        row = {"case": case.name, "status": graded.verdict.status,
               "named": sorted(b.key for b in graded.verdict.causes)}
        values = getattr(outcome, "values", None)
        if values is not None and graded.verdict.status == "failed":
            args = tuple(a.stored() if isinstance(a, TensorSpec) else a for a in case.make_args())
            want = judging.reference(part, args)
            dtype = declared._out_dtype(args)
            atol, rtol = declared._REPLAY_TOLERANCE[dtype]
            forms = [d for d in bug.detect.detects]
            ratios, scaled = [], []
            _, sums = declared.unnormalised(None)._per_row(values, args)
            for form in forms:
                buggy = form._buggy(args)
                if buggy is None or buggy.shape != values.shape:
                    continue
                with np.errstate(all="ignore"):
                    ratio = np.abs(values - buggy) / (atol + rtol * np.abs(buggy))
                    per_row = np.abs(values - buggy) / sums / (atol + rtol * np.abs(buggy / sums))
                ratios.append(_worst(ratio))
                scaled.append(_worst(per_row))
            exact = forms[0]._buggy(args)
            row.update(dtype=dtype, worst_over_tolerance=min(ratios) if ratios else None,
                       worst_divided_by_l=min(scaled) if scaled else None,
                       explained=bool(bug.detect(values, args, want)),
                       largest_l=_largest_sum(args),
                       within_case=bool(close(values, exact, atol, rtol).all())
                       if exact is not None and exact.shape == values.shape else None)
        rows.append(row)
    print(f"{NAME} ({PART}): named {sorted({k for r in rows for k in r['named']})}")
    for row in rows:
        extra = "" if "dtype" not in row else (
            f"  {row['dtype']:>8}  replay x{row['worst_over_tolerance']:.3g} of its tolerance"
            f" (x{row['worst_divided_by_l']:.3g} divided by l)  largest l "
            f"{row['largest_l']:.3g}  explained={row['explained']}")
        print(f"  {row['status']:<8} {row['case']:<40} {','.join(row['named']) or '-':<16}"
              f"{extra}")
    if options.json:
        options.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


def _worst(ratio) -> float:
    return float(np.nanmax(ratio)) if np.isfinite(ratio).any() else float("inf")


def _largest_sum(args) -> float:
    """The largest softmax denominator of the case, exp(s - max s) summed over the keys."""
    q, k, v, causal = (np.asarray(a, dtype=np.float64) if i < 3 else a
                       for i, a in enumerate(args))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        lq, lk = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((lq, lk), bool)), scores, -np.inf)
    with np.errstate(all="ignore"):
        sums = np.exp(scores - scores.max(axis=-1, keepdims=True)).sum(axis=-1)
    return float(np.nanmax(sums))


if __name__ == "__main__":
    sys.exit(main())
