"""How long the grader takes over each catalogued version of one exercise, and where it goes.

Grades every known-wrong (and right) version of an exercise's part in turn, one check at a
time, and prints per version: wall seconds, the part's status, the mistakes named, and the
slowest steps of the grader's timeline (each named by the event it starts from). On a GPU
this is the check a learner with that mistake waits for, compiles included.

    python lab/probes/catalogue_times.py attention [--part triton] [--only NAME,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python lab/probes/catalogue_times.py")
    parser.add_argument("exercise")
    parser.add_argument("--part", default="triton")
    parser.add_argument("--only", default="", help="comma-separated version names or mistake keys")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from learning.grader import mode, registry, runner
    from learning.grader.catalogue import versions

    exercise = registry.find(args.exercise)
    wanted = set(filter(None, args.only.split(",")))
    chosen = [v for v in versions(args.exercise) if v.part == args.part
              and (not wanted or v.name in wanted or v.bug in wanted)]
    print(f"{len(chosen)} versions of {args.exercise}/{args.part}; kernels "
          f"{'interpreted' if mode.select().interpret else 'compiled'}", flush=True)
    rows = []
    for version in chosen:
        folder = Path(tempfile.mkdtemp(prefix="catalogue-"))
        (folder / f"{args.exercise}.py").write_text(version.module_text(args.exercise))
        start = time.perf_counter()
        result = runner.grade(exercise, folder, [args.part])
        seconds = time.perf_counter() - start
        (part,) = result.parts
        named = sorted({bug.key for c in part.cases for bug in c.verdict.causes})
        statuses = {}
        for c in part.cases:
            statuses[c.verdict.status] = statuses.get(c.verdict.status, 0) + 1
        steps = sorted(((t_next - t, what) for (t, what), (t_next, _) in
                        zip(result.timeline, result.timeline[1:] + [(seconds, "end")])),
                       reverse=True)[:4]
        rows.append({"version": version.name, "bug": version.bug, "seconds": round(seconds, 2),
                     "status": part.status, "named": named, "cases": statuses,
                     "slowest": [[round(s, 2), w] for s, w in steps]})
        print(f"{seconds:7.2f} s  {version.name:28s} expects {str(version.bug):20s} "
              f"{part.status:8s} named {','.join(named) or '-'}  {statuses}", flush=True)
        for s, w in steps:
            print(f"           {s:6.2f} s from: {w}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
