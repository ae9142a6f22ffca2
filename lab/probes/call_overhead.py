"""Microseconds of host time one triton_kernels.softmax call spends before and in its launch.

    PYTHONPATH=. python3 lab/probes/call_overhead.py > lab/results/call_overhead.txt

A (1, 1024) row moves 8 KiB, so the GPU finishes long before Python does: what is timed
(calls back to back, then one synchronise) is host time. Each line is a fresh process, as
in the bench's latency table: "plain" as shipped; "no_shared" with the shared-memory check
(_fits_shared_copies) replaced by False; "import_gluon_first" with Gluon imported before the
first call, so that an import hook, if it had one, would show. Also the check and the plan on
their own. GPU only.
"""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import sys, time
import torch
import triton, triton_kernels as tk
from lab import production as fast

def per_call_us(fn, calls=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6

x = torch.randn(1, 1024, device="cuda")
out, x16 = torch.empty_like(x), x.bfloat16()
mode = sys.argv[1]
if mode == "import_gluon_first":
    import lab.gluon  # noqa: F401
if mode == "no_shared":
    fast._fits_shared_copies = lambda *tensors: False
print(f"{mode:<19} softmax fp32 {per_call_us(lambda: tk.softmax(x)):6.1f} us, "
      f"bf16 {per_call_us(lambda: tk.softmax(x16)):6.1f} us; "
      f"_fits_shared_copies {per_call_us(lambda: fast._fits_shared_copies(x, out)):5.2f} us, "
      f"_plan {per_call_us(lambda: fast._plan('softmax', 1024, None, None, 132, 4)):5.2f} us")
"""


def main() -> int:
    import torch
    import triton

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton "
          f"{triton.__version__}; host time per call, 2000 calls after 50 warm-up")
    for mode in ("plain", "no_shared", "import_gluon_first", "plain"):
        sys.stdout.flush()
        subprocess.run([sys.executable, "-c", CHILD, mode], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
