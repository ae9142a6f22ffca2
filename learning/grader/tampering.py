"""The grader's own code in the learner's process, looked at again after each case.

A kernel part's judgement rests on code that runs in the learner's process: the launch counter
(``learning.grader.calls``), the record of what torch computed (``learning.grader.lineage``),
the hooks on Triton's launches. The learner's code can reach all of it: a module that replaced
``LaunchCounter.taken`` made torch's answer pass as its kernel's. So the functions and classes
that code is made of are kept before the learner's import (``Snapshot``) and compared after
each case, by identity and by code: a case after which they changed is not judged as passed.

Their modules' data is kept too (a tolerance, a list of the functions that only copy): a
constant rebound or changed in place is a change like a function replaced; the few that are a
module's running state are compared by identity only.

This catches the grader's code patched; it cannot make the learner's process honest (its code
can write to the event pipe itself), which is why a pass is also checked against the float64
reference in the grader's own process.
"""

from __future__ import annotations

import copy
import sys
import types

# The grader's modules in the learner's process whose functions a kernel part's result passes
# through before it reaches the grader
WATCHED = ("learning.grader.calls", "learning.grader.lineage", "learning.grader.allocations",
           "learning.grader.summarise", "learning.grader.tensors", "learning.grader.channel",
           "learning.grader.worker", "learning.grader.borrowed", "learning.grader.tampering",
           "learning.grader.program_order", "learning.grader.gpu_compile",
           "learning.grader.kernel_source")
# Triton's classes whose launch method the launch counter wraps, and that method
LAUNCHERS = (("triton.runtime.jit", "JITFunction", "run"),
             ("triton.runtime.interpreter", "InterpretedFunction", "run"),
             ("triton.runtime.interpreter", "GridExecutor", "__call__"),
             ("triton.compiler.compiler", "CompiledKernel", "__getitem__"))


# torch's functions that the grader's code in the learner's process compares the arguments
# with, before and after the call (learning.grader.summarise): set to answer False, they made
# an input that was left alone look changed; True, they would hide one that was changed
TORCH_USED = (("torch", None, "equal"), ("torch", "Tensor", "nan_to_num"),
              ("torch", "Tensor", "clone"), ("torch", "Tensor", "__eq__"))


# Module data that changes as the grader runs (what was said, what is held): compared by
# identity, not by content
STATE = frozenset({"learning.grader.lineage._SAID", "learning.grader.tensors._STORED_ARRAY",
                   "learning.grader.borrowed._FROZEN", "learning.grader.borrowed._KEEPERS",
                   "learning.grader.borrowed._WRAPPED", "learning.grader.program_order._NOW",
                   "learning.grader.kernel_source._KEPT",
                   "learning.grader.kernel_source._PARSED",
                   "learning.grader.kernel_source._SHAPES",
                   # immutable, rebound only as Triton's objects are remembered: by identity
                   *(f"learning.grader.kernel_source.{name}" for name in (
                       "_OWN_IDS", "_OWN_CODE_IDS", "_OWN_GLOBALS_IDS", "_OWN_ATTRIBUTES",
                       "_CLASSES", "_NAMESPACES", "_MODULES"))})
# Data compared by content as well: containers whose insides the learner's code could change
_CONTAINERS = (dict, list, set, frozenset, tuple, types.MappingProxyType)


def _data(name: str, value):
    """What a module's data is compared by later: a copy of a container's content (a dict
    behind a read-only view can still be reached and changed), else nothing but itself."""
    if name in STATE or not isinstance(value, _CONTAINERS):
        return None
    try:
        return copy.deepcopy(dict(value) if isinstance(value, types.MappingProxyType)
                             else value)
    except Exception:  # noqa: BLE001 - a value that cannot be copied is compared by identity
        return None


def _live(name: str, value):
    """What ``_data`` would copy, as it is: compared with the copy kept (a read-only view as
    the dictionary behind it)."""
    if name in STATE or not isinstance(value, _CONTAINERS):
        return None
    return dict(value) if isinstance(value, types.MappingProxyType) else value


def _code_of(value):
    """What a function runs: its code, or for a method wrapper its function's."""
    inner = getattr(value, "__func__", value)
    return getattr(inner, "__code__", None)


# The libraries whose functions Triton's interpreter calls by name as it computes a kernel's
# values (np.exp for tl.exp, at each call): kept as their top modules alone, not with their
# submodules, some of which fill in lazily as they are first used
LIBRARIES = ("numpy", "math")


def _loaded(watched=WATCHED, families=()) -> list[str]:
    """The names of the ``watched`` modules and of those of ``families`` ("triton": it and its
    submodules; a library of LIBRARIES, its top module alone) loaded now."""
    family = [name for name in list(sys.modules) if any(
        name == top or name.startswith(top + ".") and top not in LIBRARIES
        for top in families)]
    return [name for name in [*watched, *family] if sys.modules.get(name) is not None]


def _parts(watched=WATCHED, families=(), copies: bool = True) -> dict[str, tuple]:
    """{name: (the object, its code, or a copy of its content)} of every function, class,
    method and piece of module data of the ``watched`` modules, and every function and class
    of the modules of ``families`` ("triton": it and its submodules) loaded now. Without
    ``copies``, a container is given as itself: compared with the copy kept, it says the same,
    without a deep copy of every table at every look."""
    found = {}
    for module_name in _loaded(watched, families):
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, types.ModuleType) or name.startswith("__"):
                continue
            if not callable(value):
                if module_name not in watched:  # a library's data: its caches change
                    continue
                key = f"{module_name}.{name}"
                found[key] = (value, _data(key, value) if copies else
                              _live(key, value))
                continue
            found[f"{module_name}.{name}"] = (value, _code_of(value))
            if isinstance(value, type) and value.__module__ == module_name:
                for attribute, inner in list(vars(value).items()):
                    found[f"{module_name}.{name}.{attribute}"] = (inner, _code_of(inner))
    for module_name, class_name, method in (*LAUNCHERS, *TORCH_USED):
        module = sys.modules.get(module_name)
        owner = module if class_name is None else getattr(module, class_name, None)
        run = getattr(owner, method, None) if owner is not None else None
        if run is not None:
            name = ".".join(n for n in (module_name, class_name, method) if n)
            found[name] = (run, _code_of(run))
    return found


# The modules of triton.language whose functions a kernel calls (tl.sum, tl.exp, ...): under the
# interpreter they run as Python, so a module that set tl.sum to numpy's softmax of its input
# would have a kernel store the answer
LANGUAGE = ("triton.language", "triton.language.core", "triton.language.standard",
            "triton.language.math")


def _language() -> dict[str, object]:
    """{name: function} of the public functions of LANGUAGE's modules loaded now."""
    found = {}
    for module_name in LANGUAGE:
        module = sys.modules.get(module_name)
        for name, value in list(vars(module).items()) if module is not None else ():
            if callable(value) and not isinstance(value, type) and not name.startswith("_"):
                found[f"{module_name}.{name}"] = value
    return found


def _the_interpreters(value) -> bool:
    """Whether ``value`` is what Triton's interpreter puts in triton.language as it launches
    (a function of its own module, or of Python's builtins)."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    where = getattr(interpreter, "__file__", None)
    inner = getattr(value, "func", value)  # functools.partial
    code = getattr(getattr(inner, "__func__", inner), "__code__", None)
    if code is not None:
        return where is not None and code.co_filename == where
    return getattr(inner, "__module__", None) == "builtins"


def _builtins_shadowed(modules) -> list[str]:
    """The globals of ``modules`` named as a builtin is, as ``_parts`` names them."""
    import builtins

    found = []
    for module_name in modules:
        module = sys.modules.get(module_name)
        if module is None or module is builtins:  # (its own are kept as they are)
            continue
        found += [f"{module_name}.{name}" for name in list(vars(module))
                  if hasattr(builtins, name) and not name.startswith("__")]
    return found


def interpreter_family(interpreting: bool) -> tuple[str, ...]:
    """The modules kept whole where Triton's interpreter runs the kernels: the interpreter's
    own (its builder, whose operations compute every value a kernel stores, and its tensors),
    and the functions of the libraries it computes them with (a module that set np.exp to a
    table of the answer's rows would have tl.exp store the answer). Stable from launch to
    launch, unlike ``triton.language``, whose functions each launch patches for the
    interpreter afresh."""
    if not interpreting:
        return ()
    try:
        import triton.runtime.interpreter  # noqa: F401 (loaded, so that it is kept)
    except ImportError:
        return ()
    return ("triton.runtime.interpreter", *LIBRARIES)


class Snapshot:
    """The grader's code as it was when made; ``changes()`` names what differs now.

    ``instances``: (label, object, names) of the grader's objects that hold its state in the
    learner's process (the launch counter, reachable from a frame or a closure): a method of
    theirs shadowed by one set on the object, or an attribute of ``names`` (what it was made
    with) given another value, is a change too."""

    def __init__(self, watched=WATCHED, families=(), instances=()):
        self.watched, self.families = tuple(watched), tuple(families)
        self.kept = _parts(self.watched, self.families)
        # where the interpreter runs the kernels: the functions of triton.language, which
        # each launch's patches may replace only with the interpreter's own
        self.language = _language() if "triton.runtime.interpreter" in self.families else {}
        self.modules = frozenset(_loaded(self.watched, self.families))
        self.instances = tuple(instances)
        self.made_with = {(label, name): vars(thing).get(name)
                          for label, thing, names in self.instances for name in names}

    def changes(self) -> list[str]:
        return sorted(self._code_and_data() + self._instances() + self._language_changes())

    def _language_changes(self) -> list[str]:
        now = _language() if self.language else {}
        return [name for name, value in self.language.items()
                if now.get(name) is not value and not _the_interpreters(now.get(name))]

    def _instances(self) -> list[str]:
        changed = []
        for label, thing, names in self.instances:
            own, kind = vars(thing), type(thing)
            changed += [f"{label}.{name}" for name in own
                        if callable(getattr(kind, name, None)) and not name.startswith("__")]
            changed += [f"{label}.{name}" for name in names
                        if own.get(name) is not self.made_with[(label, name)]]
        return changed

    def _code_and_data(self) -> list[str]:
        now = _parts(self.watched, self.families, copies=False)
        changed = [name for name, (value, code) in self.kept.items()
                   if name not in now or now[name][0] is not value or
                   not _same(now[name][1], code)]
        # and a global added to a module kept then that shadows a builtin its code calls (a
        # range that runs the interpreter's grid loop backwards); other new globals are no
        # name its code looks up (Triton adds some of its own as it runs)
        return changed + [name for name in _builtins_shadowed(self.modules)
                          if name not in self.kept]


def _same(now, kept) -> bool:
    """A function's code is the same object; a container's copy holds the same content
    (kept None: compared by identity alone, which the caller does)."""
    if kept is None:
        return True
    if isinstance(kept, types.CodeType):
        return now is kept
    try:
        return type(now) is type(kept) and bool(now == kept)
    except Exception:  # noqa: BLE001 - content that cannot be compared is not the same
        return False
