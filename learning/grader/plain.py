"""Plain-Python parts: the first function of torch, numpy or triton that a call ran.

A Python part is the lesson's derivation in plain Python (lists of floats, ``math``): a call
that hands the work to torch or numpy returns the right values and derives nothing. While the
call runs, a profile function notes the first call into those libraries, whether the function
is written in Python (``np.max``, triton's launcher) or in C (``np.array``, ``torch.softmax``,
a tensor's or an array's method), and a torch function mode notes torch's operators, which
call no function the profiler sees (``t + 1``). What neither sees: numpy's ufuncs given plain
lists (``np.exp([1.0, 2.0])``), whose results ``learning.grader.summarise`` finds by their
numpy scalars in the list returned. The learner's code can switch the profiler off (it is its
own process): this is a check on honest work, not a wall against a forger.

Runs in the learner's process (``learning.grader.calls``).
"""

from __future__ import annotations

import sys

#: The libraries a plain-Python part may not call: the ones the kernel parts use
LIBRARIES = frozenset({"torch", "numpy", "triton"})


def _library(module: object) -> str:
    """The library a module name belongs to, or ""."""
    if not isinstance(module, str):
        return ""
    top = module.partition(".")[0]
    return top if top in LIBRARIES else ""


def _c_function(function) -> str:
    """A C function's name, where it is one of the libraries' (``torch.softmax``,
    ``numpy.ndarray.max``), else ""."""
    module = _library(getattr(function, "__module__", None))
    owner = getattr(function, "__self__", None)
    if not module and owner is not None:
        module = _library(getattr(type(owner), "__module__", None))
        if module:
            return f"{module}.{type(owner).__name__}.{getattr(function, '__name__', '?')}"
    return f"{module}.{getattr(function, '__name__', '?')}" if module else ""


class Watch:
    """A context in which the first call into torch, numpy or triton is noted in ``first``."""

    def __init__(self):
        self.first = ""
        self._previous = None
        self._mode = _torch_mode(self)

    def __enter__(self) -> Watch:
        if self._mode is not None:
            self._mode.__enter__()
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)  # last: nothing of the watch's own is seen
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._previous)  # first, for the same reason
        if self._mode is not None:
            self._mode.__exit__(*exc)

    def note(self, name: str) -> None:
        if not self.first:
            self.first = name

    def _profile(self, frame, event, arg) -> None:
        if self.first:
            return
        if event == "c_call":
            name = _c_function(arg)
        elif event == "call":
            module = frame.f_globals.get("__name__")
            if not _library(module) or _finaliser(frame):
                return
            name = f"{module}.{frame.f_code.co_name}"
        else:
            return
        if name:
            self.first = name


def _finaliser(frame) -> bool:
    """A library's code run because something was freed (``__del__``, a weakref's callback):
    a garbage collection can run it in the middle of any call, plain Python's too."""
    back = frame.f_back
    return frame.f_code.co_name == "__del__" or \
        (back is not None and back.f_globals.get("__name__") == "weakref")


def _torch_mode(watch: Watch):
    """A torch function mode that notes the first torch function or operator it sees, or None
    where torch is not loaded (a plain-Python exercise's process need not load it)."""
    torch = sys.modules.get("torch")
    overrides = sys.modules.get("torch.overrides") if torch is not None else None
    mode = getattr(overrides, "TorchFunctionMode", None)
    if mode is None:
        return None

    class Noting(mode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            watch.note(f"torch.{getattr(func, '__name__', 'function')}")
            return func(*args, **(kwargs or {}))

    return Noting()


def in_result(result, most: int = 10_000) -> str:
    """A library's values in what a plain-Python call returned: numpy's or torch's scalars or
    arrays among the items of the (nested) list or tuple, or the result itself (a numpy
    float64 is a float, so the numbers alone do not tell), as "numpy.float64 values"; "" where
    there are none among the first ``most`` items."""
    left = [most]

    def walk(item, depth: int) -> str:
        library = _library(getattr(type(item), "__module__", None))
        if library:
            return f"{library}.{type(item).__name__} values"
        if depth < 4 and type(item) in (list, tuple):
            for value in item:
                left[0] -= 1
                if left[0] < 0:
                    return ""
                found = walk(value, depth + 1)
                if found:
                    return found
        return ""

    return walk(result, 0)
