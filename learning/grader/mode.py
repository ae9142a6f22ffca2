"""Decide where Triton kernels run: compiled on a CUDA GPU, or in Triton's interpreter on the CPU.

Triton reads TRITON_INTERPRET when ``@triton.jit`` decorates a function, so the choice has to be
made before any module that defines a kernel (the learner's or ``triton_kernels``) is imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import os
import re
import sys
from dataclasses import dataclass

_TRUE = {"1", "true", "yes", "on"}
# Set to 1, every course process behaves as on a machine without Triton (macOS): the tests run
# that mode here, and a learner can see what it does. Honoured by hide_triton_if_asked().
WITHOUT_TRITON = "LEARNING_WITHOUT_TRITON"
# Where the Triton parts can be taken, for the one line that says they cannot be here.
WHERE_TRITON_RUNS = ("take the Triton parts on Linux (a GPU is optional), in the devcontainer "
                     "(.devcontainer/devcontainer.json) or on a free cloud GPU "
                     "(notebooks/free_gpu.ipynb)")


@dataclass(frozen=True)
class Mode:
    """Where kernels run, and why that was chosen."""

    interpret: bool
    reason: str
    # compiled only: whether the GPU has bfloat16 arithmetic (compute capability 8.0 and up)
    bfloat16: bool = True

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


# ---------------------------------------------------------------------------------------------
# Machines without Triton: macOS, where there is no release of it, or a Windows machine without
# triton-windows. Everything that needs none still works there (learning.grader.standin).


def hidden_on_purpose() -> bool:
    return os.environ.get(WITHOUT_TRITON, "").strip().lower() in _TRUE


class _NoTriton(importlib.abc.MetaPathFinder):
    """Answers an import of triton as Python does where it is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def hide_triton_if_asked() -> None:
    """With LEARNING_WITHOUT_TRITON=1, make triton unimportable in this process, forgetting a
    copy already imported (a worker forked from a warm process has one)."""
    if not hidden_on_purpose():
        return
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        if not getattr(sys.modules[name], "__stand_in__", False):
            del sys.modules[name]
    if not any(isinstance(finder, _NoTriton) for finder in sys.meta_path):
        # After learning.grader.standin's finder, if it is there: the stand-in is what is wanted.
        stand_ins = [i for i, f in enumerate(sys.meta_path) if getattr(f, "stands_in", False)]
        sys.meta_path.insert(stand_ins[-1] + 1 if stand_ins else 0, _NoTriton())


def stop_hiding_triton() -> None:
    """Undo hide_triton_if_asked in this process: a warm process (learning.grader.forkserver)
    imports triton for the workers it forks, and each of them hides it again if its own
    environment asks."""
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _NoTriton)]


def triton_missing() -> str | None:
    """Why Triton cannot be imported here, or None when it can; imports nothing."""
    if hidden_on_purpose():
        return f"Triton is hidden from the course ({WITHOUT_TRITON}=1)"
    loaded = sys.modules.get("triton")
    if loaded is not None and not getattr(loaded, "__stand_in__", False):
        return None
    if _findable("triton"):
        return None
    if sys.platform == "darwin":
        return "Triton has no release for macOS"
    if sys.platform == "win32":
        return "Triton is not installed (on Windows it is the triton-windows package: " \
               "python -m pip install triton-windows)"
    return "Triton is not installed (python -m pip install -e . installs it)"


def _findable(name: str) -> bool:
    """Whether an import of ``name`` would find a real module: the finders of sys.meta_path
    asked in turn, less the course's own (the blocker above and learning.grader.standin's)."""
    for finder in sys.meta_path:
        if isinstance(finder, _NoTriton) or getattr(finder, "stands_in", False):
            continue
        find = getattr(finder, "find_spec", None)
        try:
            if find is not None and find(name, None) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def python_parts_done_line() -> str:
    """What is left once every part that runs without Triton passes, where Triton is missing."""
    return f"Every part that runs here passes; the Triton parts need Triton " \
           f"({triton_missing() or 'Triton is missing'}): {WHERE_TRITON_RUNS}."


def triton_unavailable_line(parts: list[str]) -> str:
    """The one line that says which parts were not run here, why, and where to take them."""
    named = ", ".join(parts)
    noun = "part" if len(parts) == 1 else "parts"
    return f"Triton {noun} not run here ({named}): {triton_missing() or 'Triton is missing'}; " \
           f"{WHERE_TRITON_RUNS}."
