"""Plain-Python parts: the first function of torch, numpy or triton that a call ran.

A Python part is the lesson's derivation in plain Python (lists of floats, ``math``): a call
that hands the work to torch or numpy returns the right values and derives nothing. While the
call runs, a profile function notes the first call into those libraries made from code outside
them and outside Python's own library (the learner's module, or another package it uses),
whether the function called is written in Python (``np.max``, triton's launcher) or in C
(``np.array``, ``torch.softmax``, a tensor's or an array's method), in the calling thread or one
it starts; and a torch function mode notes torch's operators, which call no function the
profiler sees (``t + 1``); in a thread the call starts, a call that Python's own library makes
counts too (a ThreadPoolExecutor running torch.softmax: it runs what the learner handed it, and
torch's function mode is the calling thread's alone). Not counted: in the calling thread, a
library's code that Python's own library runs (torch replaces ``inspect.getfile`` with its
own), a finaliser a garbage collection runs in the middle of the call, and a ``tl.constexpr``
constant shared with the kernel, computed with or returned (its arithmetic gives more of
them). Not seen: numpy's ufuncs and operators on arrays or plain lists (``np.exp(values)``,
``a * 2.0``), whose results ``in_result`` finds where their numpy scalars are returned, and
tensors made by calling their class (``torch.Tensor(values)``) and never used by a torch
function. The learner's code can switch the profiler off (it is its own process): this is a
check on honest work, not a wall against a forger.

Runs in the learner's process (``learning.grader.calls``).
"""

from __future__ import annotations

import os
import sys
import threading

from learning.grader import lineage

#: The libraries a plain-Python part may not call: the ones the kernel parts use
LIBRARIES = frozenset({"torch", "numpy", "triton"})
#: Code whose calls into the libraries are not the learner's: Python's own library, and the
#: grader's (which runs beside the learner's call: its hooks, its threads)
_NOT_THE_LEARNERS = frozenset(sys.stdlib_module_names) | LIBRARIES | {"learning"}


#: Where triton's tl.constexpr is defined: a constant a module shares with its kernel, which a
#: plain-Python part may compute with (its arithmetic gives more of them)
_CONSTANT = ("triton.language.core", "constexpr")


def _constant(kind: type) -> bool:
    return (getattr(kind, "__module__", None), getattr(kind, "__name__", None)) == _CONSTANT


def _top(module: object) -> str:
    return module.partition(".")[0] if isinstance(module, str) else ""


def _library(module: object) -> str:
    """The library a module name belongs to, or ""."""
    top = _top(module)
    return top if top in LIBRARIES else ""


def _learners(frame) -> bool:
    """Whether ``frame`` runs code outside the libraries, Python's own and the grader's."""
    return frame is not None and _top(frame.f_globals.get("__name__")) not in _NOT_THE_LEARNERS


def _not_the_libraries(frame) -> bool:
    """Whether ``frame`` runs code outside the libraries and the grader (Python's own library
    included: in a thread the call started, it runs only what the learner's code handed it,
    torch.softmax given to a ThreadPoolExecutor, say)."""
    return frame is not None and _top(frame.f_globals.get("__name__")) not in \
        LIBRARIES | {"learning"}


def _where(frame) -> str:
    return f" at line {frame.f_lineno} of {os.path.basename(frame.f_code.co_filename)}"


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


def _python_function(frame) -> str:
    """The name of the library function ``frame`` runs, where it counts, else ""."""
    module = frame.f_globals.get("__name__")
    if not _library(module):
        return ""
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    if code.co_name == "__del__":  # something freed: a collection can run it anywhere
        return ""
    if module == _CONSTANT[0] and name.startswith(f"{_CONSTANT[1]}."):
        return ""  # arithmetic on a constant the module shares with its kernel
    return f"{module}.{name}"


class Watch:
    """A context in which the first call into torch, numpy or triton is noted in ``first``,
    with the learner's line that made it."""

    def __init__(self):
        self.first = ""
        self._previous = self._previous_threads = None
        self._caller = None  # the thread that makes the call; others are the call's own
        self._mode = _torch_mode(self)

    def __enter__(self) -> Watch:
        if self._mode is not None:
            self._mode.__enter__()
        self._caller = threading.get_ident()
        self._previous_threads = threading.getprofile()
        threading.setprofile(self._profile)  # threads the call starts
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)  # last: nothing of the watch's own is seen
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._previous)  # first, for the same reason
        threading.setprofile(self._previous_threads)
        if self._mode is not None:
            self._mode.__exit__(*exc)

    def note(self, name: str) -> None:
        if not self.first:
            self.first = name

    def _profile(self, frame, event, arg) -> None:
        if self.first or event not in ("c_call", "call"):
            return
        try:  # nothing the learner's objects do may reach the learner's call from here
            if event == "c_call":
                caller, name = frame, _c_function(arg)
            else:
                caller, name = frame.f_back, _python_function(frame)
            if name and (_learners(caller) or threading.get_ident() != self._caller and
                         _not_the_libraries(caller)):
                self.first = name + _where(caller)
        except Exception:  # noqa: BLE001 (a name that resists being read: not noted)
            pass


def _torch_mode(watch: Watch):
    """A torch function mode that notes the first torch function or operator the learner's
    code calls, or None where torch is not loaded (a plain-Python exercise's process need not
    load it)."""
    torch = sys.modules.get("torch")
    overrides = sys.modules.get("torch.overrides") if torch is not None else None
    mode = getattr(overrides, "TorchFunctionMode", None)
    if mode is None:
        return None

    class Noting(mode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            try:
                caller = sys._getframe(1)
                while caller is not None and _top(caller.f_globals.get("__name__")) in \
                        ("torch", "learning"):
                    caller = caller.f_back  # out of torch's dispatch, to who called it
                if _learners(caller):
                    watch.note(f"torch.{getattr(func, '__name__', 'function')}"
                               + _where(caller))
            except Exception:  # noqa: BLE001 (as in the profile function)
                pass
            return lineage.call_warning_at_caller(func, args, kwargs or {})

    return Noting()


def in_result(result, most: int = 10_000) -> str:
    """A library's values in what a plain-Python call returned: numpy's or torch's scalars or
    arrays among the items of the (nested) list, tuple or dict, or the result itself (a numpy
    float64 is a float, so the numbers alone do not tell), as "numpy.float64 values"; "" where
    there are none among the first ``most`` items."""
    left = [most]

    def walk(item, depth: int) -> str:
        try:
            kind = type(item)
            library = _library(getattr(kind, "__module__", None))
        except Exception:  # noqa: BLE001 (a type that resists being read: not a library's)
            return ""
        if library and not _constant(kind):
            return f"{library}.{kind.__name__} values"
        if depth >= 4 or kind not in (list, tuple, dict):
            return ""
        items = [v for pair in dict.items(item) for v in pair] if kind is dict else item
        for value in items:
            left[0] -= 1
            if left[0] < 0:
                return ""
            found = walk(value, depth + 1)
            if found:
                return found
        return ""

    return walk(result, 0)
