"""Every interpreted launch passes InterpretedFunction.run, on the interpreter's older layout too.

Triton 3.3 to 3.5 launch ``kernel[grid](...)`` past any method of the class, and give each
kernel a ``run`` of its own. The course's CI has Triton 3.9, so the older layout is rebuilt
here as it is in those versions' ``triton/runtime/interpreter.py``, and the launch counter's
wrapping of the class's ``run`` must see every way a learner launches on it.
"""

from __future__ import annotations

import types

from learning.grader import interpreter_launch


def _old_interpreter():
    """A module shaped like Triton 3.3's interpreter: the executor runs the grid, ``[grid]``
    makes one, and each kernel's own ``run`` (an autotuner calls it) makes one too."""
    ran = []

    class GridExecutor:
        def __init__(self, fn, arg_names, grid):
            self.fn, self.grid = fn, grid

        def __call__(self, *args, **kwargs):
            if kwargs.pop("warmup", False):
                return None
            kwargs.pop("grid", None)
            ran.append((self.grid, args, kwargs))
            return self.fn(*args, **kwargs)

    class InterpretedFunction:
        def __init__(self, fn, **kwargs):
            self.fn = fn
            self.arg_names = ["x"]

            def run(*args, **kwargs):
                return GridExecutor(self.rewrite(), self.arg_names, kwargs["grid"])(
                    *args, **kwargs)

            self.run = run

        def rewrite(self):
            return self.fn

        def __getitem__(self, grid):
            return GridExecutor(self.rewrite(), self.arg_names, grid)

    module = types.SimpleNamespace(InterpretedFunction=InterpretedFunction,
                                   GridExecutor=GridExecutor)
    return module, ran


def _count_runs(function_class) -> list:
    """Wrap the class's run as the launch counter does; the list of launches it saw."""
    seen = []
    original = function_class.run

    def run(self, *args, **kwargs):
        seen.append(kwargs["grid"])
        return original(self, *args, **kwargs)

    function_class.run = run
    return seen


def test_on_the_older_layout_every_launch_passes_the_class_run():
    interpreter, ran = _old_interpreter()
    made_before = interpreter.InterpretedFunction(lambda x: x + 1)
    assert interpreter_launch.unify(interpreter)
    made_after = interpreter.InterpretedFunction(lambda x: x * 2)
    seen = _count_runs(interpreter.InterpretedFunction)

    assert made_after[(4,)](3) == 6  # kernel[grid](...)
    assert made_before[(2,)](3) == 4  # a kernel made before the change
    assert made_after.run(5, grid=(1,), warmup=False) == 10  # an autotuner's call
    assert made_before.run(5, grid=(3,), warmup=False) == 6
    assert made_after.run(5, grid=(1,), warmup=True) is None  # a warmup runs no program
    assert seen == [(4,), (2,), (1,), (3,), (1,)]
    assert [grid for grid, _, _ in ran] == [(4,), (2,), (1,), (3,)]


def test_a_second_unify_and_a_module_without_an_interpreter_change_nothing():
    interpreter, _ = _old_interpreter()
    assert interpreter_launch.unify(interpreter)
    run, getitem = interpreter.InterpretedFunction.run, interpreter.InterpretedFunction.__getitem__
    assert interpreter_launch.unify(interpreter)  # a second time: already one method
    assert interpreter.InterpretedFunction.run is run
    assert interpreter.InterpretedFunction.__getitem__ is getitem
    assert not interpreter_launch.unify(types.SimpleNamespace())

