"""One call of the learner's function on a case: its input built, its outputs pre-filled with NaN
where the case asks, kernel launches counted, and what happened described as plain data.

Runs in the learner's process (``learning.grader.worker``).
"""

from __future__ import annotations

import contextlib
import copy
import math
import time

from learning.grader import allocations
from learning.grader.declarations import Case
from learning.grader.learner_code import cut as _cut
from learning.grader.learner_code import (
    dot_shapes,
    learner_traceback,
    root_cause,
    safe_str,
    suggestion,
)
from learning.grader.returned import Raised, Returned
from learning.grader.summarise import is_tensor, summarise
from learning.grader.tensors import TensorSpec

# Written over fresh allocations on the second run of a case that came back with NaN: an element
# still holding it was never written. Negative, so no softmax or norm output can equal it.
UNWRITTEN_SENTINEL = -12345.0


def _materialise(args: tuple, device: str) -> tuple:
    return tuple(a.build(device) if isinstance(a, TensorSpec) else copy.deepcopy(a) for a in args)


def _snapshot(args: tuple) -> tuple:
    return tuple(a.clone() if is_tensor(a) else copy.deepcopy(a) for a in args)


class LaunchCounter:
    """Counts launches of any @triton.jit function, compiled or interpreted, so that the grader
    can tell a kernel part's result that no kernel computed (torch.softmax, say)."""

    def __init__(self):
        self.count = 0
        self.installed = False

    def install(self) -> bool:
        classes = []
        with contextlib.suppress(ImportError):
            from triton.runtime.jit import JITFunction

            classes.append(JITFunction)
        with contextlib.suppress(ImportError):
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        for function_class in classes:
            if hasattr(function_class, "run"):
                function_class.run = self._counted(function_class.run)
                self.installed = True
        return self.installed

    def _counted(self, original_run):
        counter = self

        def run(self, *args, **kwargs):
            counter.count += 1
            return original_run(self, *args, **kwargs)

        return run

    def taken(self) -> int | None:
        """Launches since the last call, or None when launches cannot be seen here."""
        count, self.count = self.count, 0
        return count if self.installed else None


def _synchronise(device: str):
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def call_case(function, case: Case, args_spec: tuple, device: str, uses_tensors: bool,
              learner_file: str, launches: LaunchCounter | None = None):
    """Run one case and describe what happened."""
    try:
        args = _materialise(args_spec, device)
        before = _snapshot(args)
    except Exception as exc:  # noqa: BLE001 - the grader's own step, not the learner's code
        raise InputNotBuilt(_cut(f"{type(exc).__name__}: {safe_str(exc)}", 300)) from exc
    fill = uses_tensors and case.fill_outputs_with_nan
    record = None
    if launches is not None:
        launches.taken()  # launches the grader's own steps made do not count
    start = time.perf_counter()
    try:
        with allocations.controlled(math.nan, device == "cuda") if fill else \
                contextlib.nullcontext() as record:
            result = function(*args)
            _synchronise(device)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from the learner's code too
        seconds = time.perf_counter() - start
        cause = root_cause(exc)
        not_started = isinstance(cause, NotImplementedError)
        name = type(cause).__name__
        # By its words (on a CPU only code imitating CUDA says them): a bad address, or
        # another CUDA error, after which the context can run nothing more.
        fault = _gpu_fault(cause)
        if fault == "address":
            name = "CudaFault"
        return Raised(name, _cut(safe_str(cause) + suggestion(cause) + dot_shapes(exc)),
                      learner_traceback(exc, learner_file),
                      not_started=not_started, seconds=seconds, gpu_lost=bool(fault))
    seconds = time.perf_counter() - start
    try:
        returned = summarise(result, args, before)
    except Exception as exc:  # noqa: BLE001 - a returned object that resists being read
        returned = Returned(_type_name(result), None,
                            note=_cut(f"could not read it: {type(exc).__name__}: "
                                      f"{safe_str(exc)}", 300))
    returned.seconds = seconds
    returned.kernel_launches = launches.taken() if launches is not None else None
    returned.guard_damage = record.damaged() if record is not None else 0
    if fill and returned.values is not None and _has_nan(returned.values):
        returned.unwritten = _find_unwritten(function, args_spec, device, returned.values)
    return returned


def _type_name(value) -> str:
    try:
        return type(value).__name__
    except Exception:  # noqa: BLE001
        return "object"


def _has_nan(values) -> bool:
    import numpy as np

    return bool(np.isnan(values).any())


_ADDRESS_FAULTS = ("illegal memory access", "illegal address", "address space")
_CONTEXT_LOST = ("cuda error", "misaligned", "unspecified launch failure")


def _gpu_fault(exc: BaseException) -> str:
    """"address" for a load or store at a bad address, "lost" for another CUDA error (the
    context may be unusable after it), "" for anything else."""
    text = safe_str(exc).lower()
    if any(s in text for s in _ADDRESS_FAULTS):
        return "address"
    return "lost" if any(s in text for s in _CONTEXT_LOST) else ""


class InputNotBuilt(Exception):
    """The grader could not build a case's input (the GPU stopped working, say)."""


def _find_unwritten(function, args_spec, device, first_values):
    """Run again with a different fill: elements NaN before and holding the fill now were never
    written by the learner's code (as opposed to computed as NaN)."""
    import numpy as np

    args = _materialise(args_spec, device)
    try:
        with allocations.controlled(UNWRITTEN_SENTINEL, False):
            result = function(*args)
            _synchronise(device)
        import torch

        again = result.detach().to("cpu", dtype=torch.float64).numpy()
        stored = torch.tensor(UNWRITTEN_SENTINEL, dtype=result.dtype).item()
    except BaseException:
        return None
    if again.shape != first_values.shape:
        return None
    unwritten = np.isnan(first_values) & (again == stored)
    return unwritten if unwritten.any() else None
