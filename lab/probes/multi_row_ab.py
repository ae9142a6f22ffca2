"""Time triton_kernels.softmax on narrow float32 rows against the same launcher as it was
before triton_kernels.py was split into the essay and lab/production.py (commit 507e901),
taken from git, in one process, interleaved.

    python lab/probes/multi_row_ab.py

Both pick the same plan (printed); a difference is the kernel's code. Needs a CUDA GPU and git.
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import lab.production  # noqa: F401,E402 (importing it installs the production layer)
import triton_kernels as new  # noqa: E402

BEFORE = "507e901^"


def load_before():
    text = subprocess.run(["git", "show", f"{BEFORE}:triton_kernels.py"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "triton_kernels_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("triton_kernels_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def main() -> int:
    old = load_before()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton "
          f"{triton.__version__}; 2 GiB float32 inputs; ms and GB/s (read + write)")
    for cols in (4, 16):
        x = torch.randn(2**31 // 8 // cols, cols, device="cuda")
        print(f"plan for {cols} columns: before {old._plan('softmax', cols)}, "
              f"now {new.fast._plan('softmax', cols)}")
        for repeat in range(3):
            for name, module in (("before", old), ("now", new)):
                ms = triton.testing.do_bench(functools.partial(module.softmax, x))
                print(cols, repeat, name, round(ms, 4), round(2 * x.numel() * 4 / ms / 1e6, 1),
                      "GB/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
