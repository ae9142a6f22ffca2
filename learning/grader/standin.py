"""A stand-in for ``triton`` and ``triton.language`` where Triton cannot be installed (macOS).

An exercise module imports triton at its top and decorates its kernel with ``@triton.jit``, so
without Triton the module would not import and even its plain-Python part could not be graded.
The grader's process (``learning.grader.worker``) installs this stand-in first: every ``triton.*``
import resolves, the decorators return what they decorate, ``triton.cdiv`` and
``triton.next_power_of_2`` compute as Triton's do, and anything that would run a kernel
raises ``TritonUnavailable`` with the reason. Nothing here pretends to run a kernel.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

from learning.grader import mode


class TritonUnavailable(RuntimeError):
    """Code tried to run something of Triton's on a machine without Triton."""


def _refuse(what: str):
    raise TritonUnavailable(f"{what} needs Triton, which this machine does not have "
                            f"({mode.triton_missing() or 'Triton is missing'})")


class _Placeholder:
    """Any name of Triton's not provided below: usable in annotations and expressions that
    a module evaluates at import (``BLOCK: tl.constexpr``, ``tl.float32``); calling it refuses."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _Placeholder(f"{self._name}.{attribute}")

    def __call__(self, *args, **kwargs):
        _refuse(self._name)

    def __getitem__(self, key):
        return self

    def __repr__(self) -> str:
        return f"<stand-in for {self._name}>"


class _Kernel:
    """What ``@triton.jit`` gives here: the Python function, kept, that cannot be launched."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self.__module__ = getattr(fn, "__module__", None)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            _refuse(f"launching the kernel {self.__name__}")
        return launch

    def __call__(self, *args, **kwargs):
        _refuse(f"calling the kernel {self.__name__}")

    def __repr__(self) -> str:
        return f"<stand-in for the Triton kernel {self.__name__}>"


def _decorator(make):
    """A decorator usable bare (``@triton.jit``) or called (``@triton.jit(debug=True)``)."""
    def decorator(fn=None, *args, **kwargs):
        if callable(fn) and not args and not kwargs:
            return make(fn)
        return make
    return decorator


def _passes_through(*args, **kwargs):
    """``@triton.autotune(...)``, ``@triton.heuristics(...)``: the kernel, unchanged."""
    return lambda fn: fn


class Config:
    """``triton.Config``: keeps what it was given (an autotuning table is data)."""

    def __init__(self, kwargs=None, num_warps=4, num_stages=3, **options):
        self.kwargs = dict(kwargs or {})
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.options = options


class _Constexpr:
    """``tl.constexpr``: an annotation, and a wrapper of a value (``tl.constexpr(1.44)``)."""

    def __init__(self, value=None):
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"


def cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (0 for 0, as Triton's)."""
    n = int(n)
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def _module(name: str) -> types.ModuleType:
    module = types.ModuleType(name, f"Stand-in for {name}: Triton is not available here.")
    module.__stand_in__ = True
    module.__path__ = []  # a package: any submodule import resolves too
    module.__getattr__ = lambda attribute: _Placeholder(f"{name}.{attribute}")
    if name == "triton":
        module.__version__ = "0+stand-in"
        module.jit = _decorator(_Kernel)
        module.autotune = _passes_through
        module.heuristics = _passes_through
        module.Config = Config
        module.cdiv = cdiv
        module.next_power_of_2 = next_power_of_2
    elif name == "triton.language":
        module.constexpr = _Constexpr
        module.cdiv = cdiv
    return module


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves a stand-in module for every ``triton`` and ``triton.*`` import."""

    stands_in = True  # learning.grader.mode.triton_missing looks past it

    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _module(spec.name)

    def exec_module(self, module):
        parent, _, child = module.__name__.rpartition(".")
        if parent and parent in sys.modules:
            setattr(sys.modules[parent], child, module)


def install() -> None:
    """Make ``import triton`` (and every ``triton.*``) give the stand-in in this process."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def installed() -> bool:
    return getattr(sys.modules.get("triton"), "__stand_in__", False)
