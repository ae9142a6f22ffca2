"""How far lesson 14's catalogued Triton mistakes, run compiled, land from their replays.

On a GPU, tl.dot rounds float32 operands to TF32, and a 16-bit kernel rounds P and dS to its
dtype; a replay (float64) matches only within a tolerance. For each catalogued wrong version of
the Triton part and each case that declares its mistake, this prints the smallest ratio, over
the mistake's replayed forms, of the largest difference to what that form's comparison allows
(below 1: the replay explains the output), beside the same ratio for the correct answer. The
replay's ratio is given three ways: each entry against its own tolerance, against rtol of the
largest entry of its gradient (dq, dk or dv), and against rtol of the largest entry anywhere.

    PYTHONPATH=. python lab/probes/backward_replay_probe.py   # on a CUDA machine
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from learning.exercises.attention.exercise import _REPLAY_TOLERANCE, _out_dtype
from learning.grader import registry
from learning.grader.catalogue import versions
from learning.grader.tensors import TensorSpec


def _module(text: str):
    path = Path(tempfile.mkdtemp()) / "attention_backward.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"probe_{id(path)}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


def _largest(x) -> float:
    with np.errstate(all="ignore"):
        return float(np.nanmax(np.abs(np.where(np.isfinite(x), x, 0.0)), initial=0.0))


def _ratio(got, target, atol, rtol, scale: str = "entry", seq_q: int = 0) -> float:
    """The largest difference over what the comparison allows: ``entry`` the plain one (atol
    plus rtol of each entry), ``whole`` also rtol of the largest entry anywhere, ``gradient``
    rtol of the largest entry of the same gradient (dq, then dk and dv, down the rows)."""
    with np.errstate(all="ignore"):
        floor = np.full(np.shape(target), float(atol))
        if scale == "whole":
            floor = np.maximum(floor, rtol * _largest(target))
        elif scale == "gradient":
            seq_k = (np.shape(target)[-2] - seq_q) // 2
            for rows in (slice(0, seq_q), slice(seq_q, seq_q + seq_k), slice(seq_q + seq_k, None)):
                floor[..., rows, :] = max(atol, rtol * _largest(target[..., rows, :]))
        allowed = floor + rtol * np.abs(target)
        return float(np.nanmax(np.abs(got - target) / allowed))


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    part = registry.find("attention_backward").part("triton")
    for version in versions("attention_backward"):
        if version.part != "triton" or version.bug is None:
            continue
        module = _module(version.module_text("attention_backward"))
        bug = part.bug(version.bug) if version.bug in {b.key for b in part.bugs} else None
        for case in part.cases:
            if version.bug not in case.catches or (case.gpu_only and device == "cpu"):
                continue
            specs = case.make_args()
            args = tuple(a.stored() if isinstance(a, TensorSpec) else a for a in specs)
            built = tuple(a.build(device) if isinstance(a, TensorSpec) else a for a in specs)
            try:
                got = module.attention_backward_triton(*built).double().cpu().numpy()
            except Exception as error:  # noqa: BLE001 - a mistake may raise; say so
                print(f"{version.name[:40]:40} {case.name[:28]:28} raised {error!r:.60}")
                continue
            want = np.asarray(part.reference(*args), dtype=np.float64)
            atol, rtol = _REPLAY_TOLERANCE[_out_dtype(args)]
            named = bug is not None and bug.detect is not None and bool(bug.detect(got, args, want))
            forms = getattr(bug.detect, "detects", ()) if bug is not None else ()
            replays = [b for b in (f._buggy(args) for f in forms)
                       if b is not None and b.shape == got.shape]
            seq_q = np.shape(args[0])[-2]
            best = {scale: min((_ratio(got, b, atol, rtol, scale, seq_q) for b in replays),
                               default=float("nan")) for scale in ("entry", "gradient", "whole")}
            print(f"{version.name[:40]:40} {case.name[:28]:28} {version.bug:16} "
                  f"named={named!s:5} vs right {_ratio(got, want, atol, rtol):9.3g} "
                  "vs replay " + " ".join(f"{k} {v:9.3g}" for k, v in best.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
