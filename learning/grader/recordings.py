"""The worker's two recording runs, which grade nothing: one case's memory map (``--map``) and
one case's named steps (``--steps``), the reference's recorded before the learner's module is
imported, so that nothing that import does can change it.
"""

from __future__ import annotations

import os

from learning.grader import mode as kernel_mode
from learning.grader import registry
from learning.grader.channel import Channel
from learning.grader.learner_code import import_learner_module
from learning.grader.loading import LockDown, prepare_import
from learning.grader.returned import ImportProblem, Skipped


def run_map(exercise_name: str, module_path: str, request: dict, channel: Channel,
            memory_gib: float = 0.0, lock_down: LockDown | None = None) -> int:
    """``python -m learning.grader.worker --map``: the case in the interpreter, the reference's
    module first (so that nothing the learner's import does can change it), then the learner's."""
    from learning.grader import gpu_arithmetic, memory_map, sanitizer

    selected = kernel_mode.select(True)
    channel.send("mode", True, selected.reason)
    if not sanitizer.install():
        channel.send("environment", "this Triton's interpreter lacks the hooks a memory map "
                     "records through")
        return 0
    gpu_arithmetic.install_interpreter()  # the values the check saw
    part = registry.find(exercise_name).part(request["part"])
    case = part.case(request["case"])
    args_spec = case.make_args()
    channel.send("importing")
    reference = None
    if request.get("reference"):
        module, problem = import_learner_module(request["reference"])
        if module is not None and callable(getattr(module, part.function, None)):
            reference = memory_map.record_call(getattr(module, part.function), args_spec)
        else:
            reference = {"problem": problem.message if problem else
                         f"the reference has no {part.function}"}
    prepare_import(module_path, memory_gib, lock_down, "cpu")
    module, problem = import_learner_module(module_path)
    channel.send("import", problem)
    if problem:
        channel.send("map", memory_map.REFERENCE, reference)
        return 0
    function = getattr(module, part.function, None)
    if not callable(function):
        channel.send("part-missing", part.name, ImportProblem(
            "missing-function", f"{os.path.basename(module_path)} has no function "
            f"{part.function}", function=part.function))
        channel.send("map", memory_map.REFERENCE, reference)
        channel.send("finished")
        return 0
    channel.send("start", part.name, case.name)
    learner = memory_map.record_call(function, args_spec)
    channel.send("map", memory_map.REFERENCE, reference)
    channel.send("map", memory_map.LEARNER, learner)
    channel.send("done", part.name, case.name, Skipped("recorded for a memory map"))
    channel.finish()
    return 0


def run_steps(exercise_name: str, module_path: str, request: dict, channel: Channel,
              memory_gib: float = 0.0, lock_down: LockDown | None = None) -> int:
    """``python -m learning.grader.worker --steps``: one case with its named steps recorded
    (learning.grader.named_steps), kernels in the interpreter (where their steps are Python):
    the reference's first, sent before the learner's module is imported (so that nothing it
    does can change them), then the learner's."""
    from learning.grader import named_steps

    part = registry.find(exercise_name).part(request["part"])
    if part.needs_kernels or request.get("interpret"):
        selected = kernel_mode.select(True)
        channel.send("mode", True, selected.reason)
        from learning.grader import gpu_arithmetic, sanitizer

        sanitizer.install()  # a load out of bounds raises, as in the check, and ends the steps
        gpu_arithmetic.install_interpreter()  # the values the check saw
    case = part.case(request["case"])
    traced = part.steps.function or part.function
    args_spec = case.make_args()
    channel.send("importing")
    module, problem = import_learner_module(request["reference"])
    reference = named_steps.record_call(module, part.function, traced, args_spec,
                                        part.steps.names) if module is not None else \
        {"problem": problem.message if problem else "the reference did not import"}
    channel.send("steps", named_steps.REFERENCE, reference)
    prepare_import(module_path, memory_gib, lock_down, "cpu")
    module, problem = import_learner_module(module_path)
    channel.send("import", problem)
    if problem:
        return 0
    channel.send("start", part.name, case.name)
    learner = named_steps.record_call(module, part.function, traced, args_spec,
                                      part.steps.names)
    channel.send("steps", named_steps.LEARNER, learner)
    channel.send("done", part.name, case.name, Skipped("recorded for its named steps"))
    channel.finish()
    return 0
