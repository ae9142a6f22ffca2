"""Compare a fresh bench run with the committed one: per kernel, how many (dtype, cols) rows
both hold, the smallest and largest change in the reference's fraction of the copy ceiling
(new - old), and whether every fresh reference output was checked correct.

    python lab/probes/compare_results.py lab/results/softmax.json /path/to/new/softmax.json
"""

from __future__ import annotations

import json
import sys


def fractions(path: str) -> tuple[dict, bool]:
    data = json.load(open(path))
    rows = [r for r in data["results"] if r["impl"] == "reference"]
    return ({(r["dtype"], r["cols"]): r["frac"] for r in rows},
            all(r.get("correct", False) for r in rows))


def main(old_path: str, new_path: str) -> int:
    old, _ = fractions(old_path)
    new, correct = fractions(new_path)
    both = sorted(set(old) & set(new))
    if not both:
        print(f"no (dtype, cols) row in common between {old_path} and {new_path}")
        return 1
    change = {key: new[key] - old[key] for key in both}
    low = min(change, key=change.get)
    high = max(change, key=change.get)
    print(f"{new_path}: n {len(both)}, frac new-old min {change[low]:+.3f} {low}, "
          f"max {change[high]:+.3f} {high}, every output correct: {correct}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python lab/probes/compare_results.py OLD.json NEW.json", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(*sys.argv[1:]))
