"""Decide where Triton kernels run: compiled on a CUDA GPU, or in Triton's interpreter on the CPU.

Triton reads TRITON_INTERPRET when ``@triton.jit`` decorates a function, so the choice has to be
made before any module that defines a kernel (the learner's or ``triton_kernels``) is imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
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


def env_asks_for_interpreter() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUE


def select(force_interpret: bool = False) -> Mode:
    """Pick the mode and set TRITON_INTERPRET to match; imports torch but no kernel module."""
    mode = choose(force_interpret)
    if mode.interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    return mode


def choose(force_interpret: bool = False) -> Mode:
    """The mode select() would pick, without setting anything; imports torch."""
    if force_interpret:
        mode = Mode(True, "the interpreter was asked for (--interpret)")
    elif env_asks_for_interpreter():
        mode = Mode(True, "TRITON_INTERPRET=1 is set in the environment")
    else:
        import torch

        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            mode = Mode(False, f"CUDA GPU found ({name})")
        else:
            mode = Mode(True, "no CUDA GPU found")
    return mode


def cuda_driver_sees_a_gpu() -> bool:
    """Whether the CUDA driver reports a device, asked through ctypes in about a tenth of a
    second, where importing torch to ask takes seconds. False means kernels are interpreted;
    True that they may not be (a CPU build of torch cannot use the GPU)."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            driver = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return False
    count = ctypes.c_int(0)
    try:
        return driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0 \
            and count.value > 0
    except AttributeError:
        return False


# The interpreters of Triton 3.6 and older turn a loop bound computed in the kernel (such as
# tl.program_id(0)) into a Python int with int() of a one-element array (their tensor
# __index__); numpy 2.4 made that an error, so a loop over program ids (the persistent and
# looped kernels) stops with "only 0-dimensional arrays can be converted to Python scalars".
# Measured: 3.5.1 and 3.6.0 fail with numpy 2.4.6; 3.7.1, 3.8.0 and 3.9.0 do not; 3.6.0 with
# numpy 2.3.5 passes the kernel tests.
_FIRST_FIXED_TRITON = (3, 7)
_FIRST_BREAKING_NUMPY = (2, 4)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


def interpreter_problem() -> str | None:
    """Why Triton's interpreter cannot run the course's kernels with the installed packages,
    with the fix; None when it can. Reads package versions only (imports nothing)."""
    try:
        triton_version = importlib.metadata.version("triton")
        numpy_version = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        return None  # a missing package has its own message (python -m learning.doctor)
    if _release(triton_version) < _FIRST_FIXED_TRITON and \
            _release(numpy_version) >= _FIRST_BREAKING_NUMPY:
        return (f"Triton {triton_version}'s interpreter cannot run loops over program ids with "
                f"numpy {numpy_version} (numpy 2.4 made its conversion of a one-element array "
                f"to int an error): python -m pip install \"numpy<2.4\", or Triton 3.7 or newer")
    return None
