"""Time kernels on a GPU: ``python -m learning.bench NAME [options]``.

- ``rowwise``: softmax, its backward and RMSNorm, in GB/s against a device-to-device copy (the
  memory roofline), and the measuring the other two share;
- ``matmul``: matrix products, in TFLOP/s (``python -m learning.bench matmul``);
- ``attention``: attention, in TFLOP/s (``python -m learning.bench attention``), and with
  ``--backward`` its backward pass (``attention_backward``).
"""

from __future__ import annotations

import sys

from learning.bench import attention, attention_backward, matmul, rowwise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["matmul"]:  # the compute-bound kernel has a bench of its own
        return matmul.main(argv[1:])
    if argv[:1] == ["attention"]:  # so has attention, and its backward pass
        if "--backward" in argv[1:]:
            return attention_backward.main(argv[1:])
        return attention.main(argv[1:])
    return rowwise.main(argv)
