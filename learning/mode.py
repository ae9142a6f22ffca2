"""Decide where Triton kernels run: compiled on a CUDA GPU, or in Triton's interpreter on the CPU.

Triton reads TRITON_INTERPRET when ``@triton.jit`` decorates a function, so the choice has to be
made before any module that defines a kernel (the learner's or ``triton_kernels``) is imported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Mode:
    """Where kernels run, and why that was chosen."""

    interpret: bool
    reason: str

    @property
    def device(self) -> str:
        """The torch device that kernel arguments must live on."""
        return "cpu" if self.interpret else "cuda"

    @property
    def label(self) -> str:
        return "Triton interpreter (CPU)" if self.interpret else "compiled on the GPU"

    def describe(self) -> str:
        return f"{self.label}: {self.reason}"


def _env_asks_for_interpreter() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUE


def select(force_interpret: bool = False) -> Mode:
    """Pick the mode and set TRITON_INTERPRET to match; imports torch but no kernel module."""
    if force_interpret:
        mode = Mode(True, "the interpreter was asked for (--interpret)")
    elif _env_asks_for_interpreter():
        mode = Mode(True, "TRITON_INTERPRET=1 is set in the environment")
    else:
        import torch

        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            mode = Mode(False, f"CUDA GPU found ({name})")
        else:
            mode = Mode(True, "no CUDA GPU found")
    if mode.interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    return mode
