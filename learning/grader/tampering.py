"""The grader's own code in the learner's process, looked at again after each case.

A kernel part's judgement rests on code that runs in the learner's process: the launch counter
(``learning.grader.calls``), the record of what torch computed (``learning.grader.lineage``),
the hooks on Triton's launches. The learner's code can reach all of it: a module that replaced
``LaunchCounter.taken`` made torch's answer pass as its kernel's. So the functions and classes
that code is made of are kept before the learner's import (``Snapshot``) and compared after
each case, by identity and by code: a case after which they changed is not judged as passed.

This catches the grader's code patched; it cannot make the learner's process honest (its code
can write to the event pipe itself), which is why a pass is also checked against the float64
reference in the grader's own process.
"""

from __future__ import annotations

import sys

# The grader's modules in the learner's process whose functions a kernel part's result passes
# through before it reaches the grader
WATCHED = ("learning.grader.calls", "learning.grader.lineage", "learning.grader.allocations",
           "learning.grader.summarise", "learning.grader.tensors", "learning.grader.channel",
           "learning.grader.worker", "learning.grader.borrowed", "learning.grader.tampering")
# Triton's classes whose launch method the launch counter wraps
LAUNCHERS = (("triton.runtime.jit", "JITFunction"),
             ("triton.runtime.interpreter", "InterpretedFunction"))


def _code_of(value):
    """What a function runs: its code, or for a method wrapper its function's."""
    inner = getattr(value, "__func__", value)
    return getattr(inner, "__code__", None)


def _parts() -> dict[str, tuple]:
    """{name: (the object, its code)} of every function, class and method watched."""
    found = {}
    for module_name in WATCHED:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for name, value in list(vars(module).items()):
            if not callable(value):
                continue
            found[f"{module_name}.{name}"] = (value, _code_of(value))
            if isinstance(value, type) and value.__module__ == module_name:
                for attribute, inner in list(vars(value).items()):
                    found[f"{module_name}.{name}.{attribute}"] = (inner, _code_of(inner))
    for module_name, class_name in LAUNCHERS:
        launcher = getattr(sys.modules.get(module_name), class_name, None)
        run = getattr(launcher, "run", None) if launcher is not None else None
        if run is not None:
            found[f"{module_name}.{class_name}.run"] = (run, _code_of(run))
    return found


class Snapshot:
    """The grader's code as it was when made; ``changes()`` names what differs now."""

    def __init__(self):
        self.kept = _parts()

    def changes(self) -> list[str]:
        now = _parts()
        changed = [name for name, (value, code) in self.kept.items()
                   if name not in now or now[name][0] is not value or now[name][1] is not code]
        return sorted(changed)
