"""One launch method for Triton's interpreter on every Triton the course supports.

The launch counter (``learning.grader.calls``) and the launch recorder
(``learning.grader.gpu_compile``) wrap the interpreter's ``InterpretedFunction.run``, the method
every launch goes through from Triton 3.6 on (``kernel[grid](...)``, an autotuner's trials).
Triton 3.3 to 3.5 have no such method on the class: ``kernel[grid]`` makes the grid's executor
itself, and each kernel gets a ``run`` of its own when it is made (an autotuner calls that). On
those versions ``unify`` gives the class the later versions' ``run``, sends ``kernel[grid]``
through it, and takes the per-kernel ``run`` off every kernel, made before or after, so that
each launch passes the one method the grader wraps. On 3.6 and later it changes nothing.
"""

from __future__ import annotations

import gc


def unify(interpreter=None) -> bool:
    """Route every interpreted launch through ``InterpretedFunction.run`` of ``interpreter``
    (Triton's ``triton.runtime.interpreter`` unless given); False where it has no interpreter
    the course knows (nothing changed)."""
    if interpreter is None:
        try:
            from triton.runtime import interpreter
        except ImportError:
            return False
    function_class = getattr(interpreter, "InterpretedFunction", None)
    executor = getattr(interpreter, "GridExecutor", None)
    if function_class is None or executor is None:
        return False
    if "run" in vars(function_class):
        return True  # Triton 3.6 on, or unified already
    original_init = function_class.__init__

    def run(self, *args, grid, warmup=False, **kwargs):
        return executor(self.rewrite(), self.arg_names, grid)(*args, warmup=warmup, **kwargs)

    def launcher(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def init(self, fn, **kwargs):
        original_init(self, fn, **kwargs)
        self.__dict__.pop("run", None)

    function_class.run = run
    function_class.__getitem__ = launcher
    function_class.__init__ = init
    # kernels made before now (the course's own modules, imported first) keep their own run
    for made in gc.get_objects():
        if type(made) is function_class:
            made.__dict__.pop("run", None)
    return True
