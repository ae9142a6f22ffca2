"""The learner's process: import their module, call their functions on each case, report back.

Started by ``learning.grader.worker_run`` as ``python -m learning.grader.worker``; not a learner
command. It never judges anything: it sends plain data (``learning.grader.returned``) down a pipe,
one frame per event (``learning.grader.channel``), so the grader sees how far it got even when
the learner's code hangs or kills the process. Each call is ``learning.grader.calls``'s; a
worker asked for a memory map or named steps records instead (``learning.grader.recordings``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings
from dataclasses import dataclass

from learning.grader import (
    borrowed,
    containment,
    gpu_arithmetic,
    hooks,
    kernel_source,
    program_order,
    registry,
    stuck,
    tampering,
)
from learning.grader import mode as kernel_mode
from learning.grader.calls import InputNotBuilt, LaunchCounter, call_case
from learning.grader.channel import Channel
from learning.grader.childproc import GRADER_FAILED_STATUS, MEMORY_ALLOWANCE_GIB
from learning.grader.learner_code import import_learner_module
from learning.grader.loading import LockDown, load_launch_modules, prepare_import
from learning.grader.recordings import run_map, run_steps
from learning.grader.returned import ImportProblem, Raised, Returned, Skipped
from learning.grader.tensors import TensorSpec


@dataclass
class _Kernels:
    """Where this run's kernels run, and what watches them launch."""

    device: str = "cpu"
    # what the interpreter launched, sent for the GPU compile check (gpu_compile.LaunchRecorder)
    recorder: object = None
    launches: LaunchCounter | None = None  # None: no part of this run launches kernels
    # the grader's own code here, as it was before the learner's import (learning.grader.tampering)
    untouched: tampering.Snapshot | None = None
    # the order the interpreter runs a launch's programs in, or ALTERNATE: each case its own
    # (learning.grader.program_order); "" where kernels are compiled
    order: str = ""


def run(exercise_name: str, module_path: str, part_names: list[str], force_interpret: bool,
        channel: Channel, memory_gib: float = MEMORY_ALLOWANCE_GIB,
        only: dict[str, list[str]] | None = None, lock_down: LockDown | None = None,
        order: str = program_order.ALTERNATE) -> int:
    exercise = registry.find(exercise_name)
    parts = [exercise.part(name) for name in part_names]
    kernels = _kernels(parts, force_interpret, module_path, channel, order)
    if kernels is None:
        return 0
    # Build every input before the learner's code runs, so their import cannot change them.
    inputs = {(p.name, c.name): c.make_args() for p in parts for c in p.cases
              if only is None or p.name not in only or c.name in only[p.name]}
    # From here on the worker holds its parts as plain data, and no module holds the
    # declarations: every function of a declaration's module leads, through its globals, to the
    # exercise's float64 reference, which the learner's code could otherwise call unseen
    parts = [_PartToRun.of(part) for part in parts]
    del exercise
    prepare_import(module_path, memory_gib, lock_down, kernels.device)
    borrowed.forget_declarations()
    try:
        loaded_before = borrowed.loaded_reference_modules()
        # what it finds is sent at once: from a forked process too, and before the learner's code
        # could change what the watch holds
        watch = borrowed.Watch(module_path, report=lambda name: channel.send("borrowed", [name]))
        watch.install()
        interpreting = _interprets(os.environ.get("TRITON_INTERPRET"))
        if kernels.recorder is not None:
            kernel_source.remember_tritons_own()  # before the learner's statements run
        if kernels.launches is not None:
            # Triton's interpreter too, where it runs the kernels: a module that replaced its
            # store (or any of its builder's operations) with numpy's answer would pass a
            # kernel that only copies. Not triton.language: each launch patches that itself.
            kernels.untouched = tampering.Snapshot(families=tampering.interpreter_family(
                interpreting), instances=(
                ("the launch counter", kernels.launches, ("installed", "bypassed")),
                *((("the launch recorder", kernels.recorder,
                    ("learner_file", "folder", "send", "seen", "verified")),)
                  if kernels.recorder else ()),
                *_interpreter_builder(interpreting)))
            if kernels.recorder is not None:  # looked at as each launch starts, too
                kernels.recorder.untouched = kernels.untouched
        channel.send("importing")
        channel.drained()  # read before the learner's code could take it off the pipe
        module, problem = import_learner_module(module_path)
        # a builtin the import replaced, set back before the grader's code here calls it (and
        # said with the first case, as a hook left set: learning.grader.hooks)
        hooks.put_back()
        if problem is None and _interprets(os.environ.get("TRITON_INTERPRET")) != interpreting:
            problem = _mode_changed(module_path, interpreting)
        channel.send("import", problem)
        if problem:
            return 0
        completed = _run_cases(module, module_path, parts, inputs, kernels, channel)
        watch.check_wrapper()
        seen = (borrowed.loaded_reference_modules() - loaded_before) | watch.found
        if seen:
            channel.send("borrowed", sorted(seen))
        if not completed:
            return 0
        channel.finish()
        return 0
    finally:
        # frozen, the forgotten declarations would never be collected: a process that
        # exits normally (not forked) would then hear Triton's bindings report them leaked
        borrowed.thaw()


@dataclass(frozen=True)
class _CaseToRun:
    """What running a case needs of its declaration, as plain data."""

    name: str
    gpu_only: bool
    fill_outputs_with_nan: bool


@dataclass(frozen=True)
class _PartToRun:
    """What running a part's cases needs of its declaration, as plain data (see run)."""

    name: str
    function: str
    needs_kernels: bool
    cases: tuple[_CaseToRun, ...]
    plain_python: bool = False
    torch_answers: frozenset = frozenset()

    @classmethod
    def of(cls, part) -> _PartToRun:
        return cls(part.name, part.function, part.needs_kernels,
                   tuple(_CaseToRun(c.name, c.gpu_only, c.fill_outputs_with_nan)
                         for c in part.cases), part.plain_python,
                   frozenset(part.torch_answers))


def _kernels(parts: list, force_interpret: bool, module_path: str, channel: Channel,
             order: str = program_order.ALTERNATE) -> _Kernels | None:
    """Choose where kernels run and say so ("mode"); None when a kernel part cannot run here
    at all (the "environment" event sent says why, and nothing is imported). In the
    interpreter a launch's programs run in ``order``, or each case in its own
    (``learning.grader.program_order``)."""
    kernels = _Kernels()
    if kernel_mode.triton_missing():
        # The learner's module imports triton: the stand-in lets it import, so that its plain
        # Python is graded as anywhere; a part that launches kernels cannot run at all here.
        from learning.grader import standin

        standin.install()
        names = [part.name for part in parts if part.needs_kernels]
        if names:
            channel.send("environment", kernel_mode.triton_unavailable_line(names))
            return None
    if any(part.needs_kernels for part in parts) or force_interpret:
        mode = kernel_mode.select(force_interpret)
        kernels.device = mode.device
        reason = mode.reason
        if mode.interpret:
            from learning.grader import gpu_compile, interpreter_launch, sanitizer

            # every launch through the one method the counter and recorder wrap (Triton 3.3
            # to 3.5 launch past it), before any kernel of the learner's is made
            interpreter_launch.unify()
            if any(part.needs_kernels for part in parts):
                load_launch_modules()  # before anything counts or records launches

            if not sanitizer.install():
                reason += "; bounds checking is unavailable for this Triton version"
            # the GPU's arithmetic where Triton's interpreter computes otherwise
            gpu_arithmetic.install_interpreter()
            # before the tampering snapshot, which keeps the method this replaces
            if program_order.install(program_order.chosen(order, 0)):
                kernels.order = order
                sanitizer.observers.append(program_order.WATCH)
            kernels.recorder = gpu_compile.LaunchRecorder(
                module_path, lambda launch: channel.send("launch", launch))
            if not kernels.recorder.install():
                kernels.recorder = None
        # said before the learner's import: a bfloat16 case reported skipped later is believed
        # only where this says the GPU lacks it
        bfloat16 = mode.interpret or not _gpu_lacks_bfloat16()
        channel.send("mode", mode.interpret, reason, bfloat16)
        problem = kernel_mode.interpreter_problem() if mode.interpret else None
        if problem and any(part.needs_kernels for part in parts):
            channel.send("environment", problem)  # every kernel part would fail, not by them
            return None
        kernels.launches = LaunchCounter()
        kernels.launches.install()
    return kernels


def _interpreter_builder(interpreting: bool) -> tuple:
    """The interpreter's builder, as a tampering snapshot's instance, where it runs the
    kernels: a method set on the object itself (the order of a launch's programs put back,
    a store replaced) shadows the class's, which the snapshot keeps."""
    interpreter = sys.modules.get("triton.runtime.interpreter") if interpreting else None
    builder = getattr(interpreter, "interpreter_builder", None)
    return (("Triton's interpreter builder", builder, ()),) if builder is not None else ()


def _interprets(value: str | None) -> bool:
    """Whether a TRITON_INTERPRET value turns Triton's interpreter on, as Triton reads it."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on", "y")


def _mode_changed(module_path: str, interpreting: bool) -> ImportProblem:
    """The learner's module switched Triton's interpreter while it was imported: its kernels
    were then decorated for the other mode than the tensors the check passes them."""
    now = "on" if not interpreting else "off"
    where = "in Triton's interpreter" if interpreting else "compiled on the GPU"
    return ImportProblem(
        "mode-changed", f"{os.path.basename(module_path)} set TRITON_INTERPRET while it was "
        f"imported, turning the interpreter {now}, but this check runs kernels {where} "
        "(it chooses: compiled on a CUDA GPU, interpreted without one): remove that line")


def _run_cases(module, module_path: str, parts: list, inputs: dict, kernels: _Kernels,
               channel: Channel) -> bool:
    """Every chosen case of every part (those ``inputs`` holds), each reported as it ends;
    False when it stopped early because this process can run nothing more (a GPU fault, an
    input it could not build)."""
    for part in parts:
        function = getattr(module, part.function, None)
        if not callable(function):
            name = os.path.basename(module_path)
            message = f"{name} has no function {part.function}; did you rename it?"
            if function is not None:
                message = (f"{name} defines {part.function} as a value of type "
                           f"{type(function).__name__}, not a function: write it with def")
            channel.send("part-missing", part.name, ImportProblem(
                "missing-function", message, function=part.function))
            continue
        if kernels.recorder is not None:
            kernels.recorder.part = part.name
        for index, case in enumerate(part.cases):
            if (part.name, case.name) not in inputs:
                continue  # it ran in an earlier process
            if case.gpu_only and kernels.device != "cuda":
                channel.send("done", part.name, case.name, Skipped("needs a CUDA GPU"))
                continue
            lacking = _lacks_bfloat16(inputs[(part.name, case.name)], kernels.device)
            if lacking:
                channel.send("done", part.name, case.name, Skipped(lacking))
                continue
            order = _set_order(kernels.order, index) if part.needs_kernels else ""
            bfloat16_before = gpu_arithmetic.bfloat16_operations()
            channel.send("start", part.name, case.name)
            try:
                outcome = call_case(function, case, inputs[(part.name, case.name)],
                                    kernels.device, part.needs_kernels, module_path,
                                    kernels.launches if part.needs_kernels else None,
                                    lambda part=part, case=case: channel.send(
                                        "evidence", part.name, case.name),
                                    plain_python=part.plain_python,
                                    torch_answers=part.torch_answers,
                                    call_again=part.needs_kernels and index == 0)
            except InputNotBuilt as exc:
                channel.send("done", part.name, case.name, Skipped(
                    f"not run: its input could not be built in the process that imported your "
                    f"module ({exc}); what the module does when imported (changing torch or "
                    f"numpy, say) may be why"))
                channel.send("abandon", part.name, "not run: the grader could not build an "
                             "earlier case's input")
                return False
            if part.needs_kernels and kernels.untouched is not None and \
                    isinstance(outcome, Returned):
                outcome.grader_changed = tuple(kernels.untouched.changes())
                if order and program_order.installed() != order:  # put back, say
                    outcome.grader_changed += ("learning.grader.program_order._NOW",)
                if order:
                    outcome.races = tuple(program_order.WATCH.finish())
                if order and program_order.WATCH.broken:  # ... or put back during the call
                    outcome.grader_changed += ("the order of a launch's programs, put back "
                                               "during the call (learning.grader.program_order)",)
            if part.needs_kernels and isinstance(outcome, Returned):
                outcome.bfloat16_arithmetic = gpu_arithmetic.bfloat16_operations() > bfloat16_before
            channel.send("done", part.name, case.name, outcome)
            if isinstance(outcome, Raised) and outcome.gpu_lost:
                # Nothing more can run on this GPU context; later parts get a fresh process.
                channel.send("abandon", part.name, "not run: the GPU faulted in an earlier case")
                return False
            if isinstance(outcome, Raised) and outcome.not_started:
                break
    return True


def _set_order(order: str, index: int) -> str:
    """Run the launches of the case at ``index`` as the worker's ``order`` has it
    (``program_order.chosen``); the order set ("" where kernels are compiled)."""
    if not order:
        return ""
    chosen = program_order.chosen(order, index)
    program_order.install(chosen)
    program_order.WATCH.start(chosen)
    return chosen


def _lacks_bfloat16(args_spec: tuple, device: str) -> str:
    """Why a case with bfloat16 tensors cannot run on this GPU ("" when it can): bfloat16
    arithmetic came with compute capability 8.0 (the A100); a T4 (7.5) has none."""
    if device != "cuda" or not any(isinstance(a, TensorSpec) and a.dtype == "bfloat16"
                                   for a in args_spec):
        return ""
    return _gpu_lacks_bfloat16()


def _gpu_lacks_bfloat16() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    if (major, minor) >= (8, 0):
        return ""
    return (f"needs bfloat16, which the {torch.cuda.get_device_name()} (sm_{major}{minor}) "
            "lacks: GPUs of compute capability 8.0 (sm_80, the A100) and newer have it")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m learning.grader.worker")
    parser.add_argument("--exercise", required=True)
    parser.add_argument("--module-path", required=True)
    parser.add_argument("--parts", required=True)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--interpret", action="store_true")
    parser.add_argument("--memory-gib", type=float, default=MEMORY_ALLOWANCE_GIB)
    parser.add_argument("--cases", type=json.loads, default=None,
                        help="JSON {part: [case, ...]}: run only these cases of those parts")
    parser.add_argument("--map", type=json.loads, default=None,
                        help="JSON {part, case, reference}: record that case's memory map "
                        "(learning.grader.memory_map) instead of grading")
    parser.add_argument("--steps", type=json.loads, default=None,
                        help="JSON {part, case, reference}: record that case's named steps "
                        "(learning.grader.named_steps) instead of grading")
    parser.add_argument("--program-order",
                        choices=(program_order.ALTERNATE, program_order.OPPOSITE,
                                 *program_order.ORDERS),
                        default=program_order.ALTERNATE,
                        help="the order the interpreter runs a launch's programs in (alternate: "
                        "last to first and first to last, case by case; opposite: each case "
                        "the other order than alternate gives it)")
    parser.add_argument("--stack-file", default="",
                        help="write the stack here on SIGUSR1 (learning.grader.stuck)")
    parser.add_argument("--grader-pid", type=int, default=0,
                        help="the check's process, which the learner's code may not signal")
    options = parser.parse_args(argv)
    # Everything the learner's code starts stays below a guard (learning.grader.containment)
    return containment.run_guarded(lambda: _work_or_say(options))


def _work_or_say(options) -> int:
    """``_work``, whose own failures end the process with ``GRADER_FAILED_STATUS`` and their
    traceback: the learner's code runs under handlers that catch everything it raises
    (``calls``, ``learner_code``), so what reaches here is the grader's, and the report must
    not take it for the learner's code ending the program."""
    try:
        return _work(options)
    except Exception:  # noqa: BLE001 - any error of the grader's own, said as one
        traceback.print_exc()
        return GRADER_FAILED_STATUS


def _shown_at_the_learners_line(module_path: str):
    """Python's way of printing a warning, except that one raised inside NumPy or Triton (a
    kernel's float16 sum overflowing, run by the interpreter with NumPy) names the learner's
    line that led to it, not a file of NumPy's they never wrote."""
    mine = os.path.abspath(module_path)
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        folders = os.path.abspath(str(filename)).split(os.sep)
        library = next((name for name in ("numpy", "triton") if name in folders), "")
        frame = sys._getframe(1) if library else None
        while frame is not None and os.path.abspath(frame.f_code.co_filename) != mine:
            frame = frame.f_back
        if frame is not None:
            message = f"{message} (raised inside {library})"
            filename, lineno, line = mine, frame.f_lineno, None
        original(message, category, filename, lineno, file, line)

    return show


def _work(options) -> int:
    if options.stack_file:
        stuck.arm(options.stack_file)
    sys.dont_write_bytecode = True
    kernel_mode.hide_triton_if_asked()  # a worker forked from a warm process has triton
    # The interpreter evaluates masked-off lanes too (exp of -inf - -inf, say); NumPy's warnings
    # about them are not the learner's output.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.")
    warnings.showwarning = _shown_at_the_learners_line(options.module_path)
    channel = Channel(options.fd)
    # The grader ends this process directly should its guard stop answering.
    channel.send("pid", os.getpid())
    locked = LockDown(options.grader_pid, channel)
    if options.map is not None:
        return run_map(options.exercise, options.module_path, options.map, channel,
                       options.memory_gib, locked)
    if options.steps is not None:
        return run_steps(options.exercise, options.module_path, options.steps, channel,
                         options.memory_gib, locked)
    parts = [p for p in options.parts.split(",") if p]
    return run(options.exercise, options.module_path, parts, options.interpret, channel,
               options.memory_gib, options.cases, locked, options.program_order)


if __name__ == "__main__":
    sys.exit(main())
