"""Warps for the softmax backward pass kept whole on a GPU: triton_kernels.softmax_backward with
its plan, and with one program per row of 32, 16 or 8 warps, at 16384 to 65536 columns.

    python lab/probes/backward_warps.py

Each cell is the fraction of the copy ceiling (a clone of y, measured beside it) and the
largest error against float32 torch; 1 GiB inputs. Needs a CUDA GPU.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import triton_kernels as tk  # noqa: E402
from lab import production as fast  # noqa: E402

VARIANTS = (("plan", None, None), ("one row, 32 warps", "single_block", 32),
            ("one row, 16 warps", "single_block", 16), ("one row, 8 warps", "single_block", 8))


def gbps(fn, nbytes: int) -> float:
    return nbytes / triton.testing.do_bench(fn, rep=200) / 1e6


def with_warps(warps: int | None, cols: int):
    """_WARPS with at most ``warps`` for blocks of ``cols`` columns and wider."""
    if warps is None:
        return fast._WARPS
    return tuple((limit, warps if limit >= cols else w) for limit, w in fast._WARPS)


def main() -> int:
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton "
          f"{triton.__version__}")
    print("dtype", "cols", "copy GB/s", *(name for name, _, _ in VARIANTS), sep=" | ")
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for cols in (16384, 32768, 65536):
            rows = 2**30 // (cols * dtype.itemsize)
            y = torch.softmax(torch.randn(rows, cols, device="cuda"), -1).to(dtype)
            dy = torch.randn(rows, cols, device="cuda").to(dtype)
            want = y.float() * (dy.float() - (y.float() * dy.float()).sum(-1, keepdim=True))
            copy = gbps(y.clone, 2 * y.numel() * y.element_size())
            cells = [str(dtype).removeprefix("torch."), str(cols), f"{copy:.0f}"]
            for _, strategy, warps in VARIANTS:
                if strategy and cols > fast.MAX_GPU_SINGLE_BLOCK:
                    cells.append("-")
                    continue
                saved, fast._WARPS = fast._WARPS, with_warps(warps, cols)
                saved_reload = fast._RELOAD_WARPS
                fast._RELOAD_WARPS = warps or saved_reload
                try:
                    run = functools.partial(tk.softmax_backward, y, dy, strategy=strategy)
                    err = (run().float() - want).abs().max().item()
                    fraction = gbps(run, 3 * y.numel() * y.element_size()) / copy
                    cells.append(f"{fraction:.3f} ({err:.0e})")
                finally:
                    fast._WARPS = saved
                    fast._RELOAD_WARPS = saved_reload
            print(*cells, sep=" | ", flush=True)
            del y, dy, want
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
