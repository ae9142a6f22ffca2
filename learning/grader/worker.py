"""The learner's process: import their module, call their functions on each case, report back.

Started by ``learning.grader.runner`` as ``python -m learning.grader.worker``; not a learner
command. It never judges anything: it sends plain data (``learning.grader.returned``) down a pipe,
one frame per event, so the grader sees how far it got even when the learner's code hangs or
kills the process.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import math
import os
import pickle
import struct
import sys
import time
import warnings
from numbers import Real

from learning.grader import allocations, borrowed, containment, registry, stuck
from learning.grader import mode as kernel_mode
from learning.grader.childproc import MEMORY_ALLOWANCE_GIB, load_event
from learning.grader.declarations import Case
from learning.grader.handover import inherited_fd
from learning.grader.learner_code import cut as _cut
from learning.grader.learner_code import (
    dot_shapes,
    import_learner_module,
    learner_traceback,
    root_cause,
    safe_str,
    suggestion,
)
from learning.grader.returned import ImportProblem, Raised, Returned, Skipped
from learning.grader.tensors import TensorSpec

# Libraries a learner's module usually imports: loaded before the clock on the learner's import
# starts, so that its limit measures their code, not torch's start-up on a slow machine.
WARM_IMPORTS = ("numpy", "torch", "triton", "triton.language")
# Written over fresh allocations on the second run of a case that came back with NaN: an element
# still holding it was never written. Negative, so no softmax or norm output can equal it.
UNWRITTEN_SENTINEL = -12345.0
# Values read from one returned output at most: ten times the largest case's input (3.2
# million elements), so that an output far larger than any case asks for cannot make the
# grader copy gigabytes (tests/test_hostile.py checks the margin against every case)
MAX_VALUES = 1 << 25


class Channel:
    """Length-prefixed pickle frames on a pipe the grader reads: ``fd`` is the number the
    grader handed it over by (learning.grader.handover.spawn_options). An event is read back
    here, as the grader will read it, before it is sent: one that holds anything but plain
    data (a value the learner's code made that slipped through ``summarise``) is replaced by
    a note that says so, and never reaches the grader as something it cannot read."""

    def __init__(self, fd: int):
        self._file = os.fdopen(inherited_fd(fd), "wb", buffering=0)

    def send(self, *event):
        try:
            payload = pickle.dumps(event, protocol=pickle.HIGHEST_PROTOCOL)
            load_event(payload)
        except Exception as exc:  # noqa: BLE001 - whatever keeps the grader from reading it
            payload = pickle.dumps(_unsendable(event, exc), protocol=pickle.HIGHEST_PROTOCOL)
        self._file.write(struct.pack("<Q", len(payload)) + payload)


def _unsendable(event: tuple, exc: Exception) -> tuple:
    """What to send instead of an event the grader could not read: for a case's result, a
    result with no values that says why; anything else is the grader's own and is a bug."""
    why = f"what it returned could not be passed to the grader as plain data " \
          f"({type(exc).__name__}: {safe_str(exc)[:200]})"
    if event[0] == "done" and len(event) == 4:
        return ("done", event[1], event[2], Returned("object", None, note=why))
    raise RuntimeError(f"the worker made an event the grader cannot read: {why}")


def warm_up(path: str) -> None:
    """Import the heavy libraries ``path`` imports at its top level, ahead of the learner's
    own import (whose time limit should not pay for them). Errors are left for that import."""
    import ast

    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return
    wanted = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            wanted.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            wanted.add(node.module)
    for name in WARM_IMPORTS:
        if name in wanted or any(w.startswith(name + ".") for w in wanted):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the learner's import reports it
                pass


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def summarise(result, args, args_before) -> Returned:
    """Reduce whatever the learner returned to plain data. A subclass of float, int, str,
    list, tuple or Tensor is read by its plain value, through the base class's own methods,
    so that overriding __float__, __iter__ or __torch_function__ changes nothing."""
    import numpy as np

    type_name = _plain_type_name(result)
    changed = _changed_args(args, args_before)
    mutated = bool(changed)
    autograd = _autograd_changed(args, args_before)
    if _is_tensor(result):
        tensor = _plain_tensor(result).detach()
        try:
            if tensor.numel() > MAX_VALUES:
                values, note = None, _too_many(tensor.numel())
            else:
                values = tensor.to("cpu", dtype=_torch().float64).numpy().copy()
                note = ""
        except (RuntimeError, TypeError) as exc:
            values, note = None, f"could not read the tensor's values: {exc}"
        aliases = any(_is_tensor(a) and _shares_memory(tensor, a) for a in args)
        return Returned(
            type_name="Tensor",
            values=values,
            shape=tuple(tensor.shape),
            dtype=str(tensor.dtype).removeprefix("torch."),
            device=tensor.device.type,
            note=note,
            input_mutated=mutated,
            changed_args=changed,
            input_autograd_changed=autograd,
            aliases_input=aliases,
        )
    raw = _plain_copy(result) if _is_plain(result) else None
    if _is_number(result):
        return Returned(type_name, np.array(_plain_float(result)), shape=(),
                        input_mutated=mutated, changed_args=changed,
                        input_autograd_changed=autograd, raw=raw)
    if isinstance(result, (list, tuple)):
        aliases = any(result is a for a in args)
        items = _items(result)
        values, note = _nested_numbers(items)
        shape = values.shape if values is not None else (len(items),)
        return Returned(type_name, values, shape=tuple(shape), note=note, input_mutated=mutated,
                        changed_args=changed, input_autograd_changed=autograd,
                        aliases_input=aliases, raw=raw)
    note = _cut(repr(result), 200)
    return Returned(type_name, None, note=note, input_mutated=mutated, changed_args=changed,
                    input_autograd_changed=autograd, raw=raw)


_PLAIN_TYPES = (bool, int, float, str, list, tuple, dict)


def _plain_type_name(value) -> str:
    """The name a value is judged by: a subclass of a built-in type (a numpy float64, a list
    subclass, a namedtuple) by the built-in type it extends, anything else by its own."""
    kind = type(value)
    if kind not in _PLAIN_TYPES:
        kind = next((base for base in _PLAIN_TYPES if isinstance(value, base)), kind)
    return kind.__name__


def _items(sequence) -> list:
    """The elements a list or tuple (or a subclass of one) holds, read through the base
    class: an overridden __iter__ or __getitem__ is not asked."""
    return list(list.__iter__(sequence) if isinstance(sequence, list)
                else tuple.__iter__(sequence))


def _too_many(count: int, at_least: bool = False) -> str:
    return (f"it holds {'more than ' if at_least else ''}{count - (1 if at_least else 0):,} "
            f"values, more than any case's output ({MAX_VALUES:,}): not read")


def _plain_float(value) -> float:
    """A number's value as a plain float: a float subclass's own value, not its __float__."""
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, int):
        return float(int.__int__(value))
    return float.__float__(float(value))  # numpy scalars and other Reals, as they say


def _plain_copy(value):
    """Small plain data (``_is_plain``) rebuilt of exactly bool, int, float, str, list, tuple
    and dict, whatever subclasses the learner's code returned."""
    if value is None or type(value) is bool:
        return value
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (list, tuple)):
        items = [_plain_copy(v) for v in _items(value)]
        return items if isinstance(value, list) else tuple(items)
    return {_plain_copy(k): _plain_copy(v) for k, v in dict.items(value)}


def _nested_numbers(items: list):
    """A float64 array of a (possibly nested) list of numbers, or None and why not."""
    import numpy as np

    def plain(item):
        if isinstance(item, (list, tuple)):
            return [plain(v) for v in _items(item)]
        if not _is_number(item):
            odd.add(type(item).__name__)
            return 0.0
        return _plain_float(item)

    odd: set[str] = set()
    count, stack = 0, list(items)
    while stack:  # counted before anything is copied
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(_items(item))
        else:
            count += 1
            if count > MAX_VALUES:
                return None, _too_many(count, at_least=True)
    values = [plain(v) for v in items]
    if odd:
        return None, f"it holds {', '.join(sorted(odd))} values, not numbers"
    try:
        return np.array(values, dtype=np.float64), ""
    except ValueError:
        return None, "its rows have different lengths"


def _plain_tensor(value):
    """A tensor subclass seen as a plain torch.Tensor on the same memory, so that reading
    it runs none of the subclass's methods."""
    torch = _torch()
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(value, torch.Tensor)


def _is_plain(value, depth: int = 0) -> bool:
    """Small plain data (what an exact-answer part returns) that can cross to the grader."""
    if depth > 4:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return not isinstance(value, str) or len(value) <= 1000
    if isinstance(value, (list, tuple)) and len(_items(value)) <= 1000:
        return all(_is_plain(v, depth + 1) for v in _items(value))
    if isinstance(value, dict) and dict.__len__(value) <= 100:
        return all(_is_plain(k, depth + 1) and _is_plain(v, depth + 1)
                   for k, v in dict.items(value))
    return False


def _torch():
    import torch

    return torch


def _is_tensor(value) -> bool:
    return "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor)


def _shares_memory(a, b) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except RuntimeError:
        return False


def _changed_args(now, before) -> tuple[int, ...]:
    """The positions of the arguments the call changed."""
    changed = []
    for index, (a, b) in enumerate(zip(now, before)):
        if _is_tensor(a):
            same = a.shape == b.shape and _torch().equal(a.nan_to_num(0.5), b.nan_to_num(0.5))
        elif isinstance(a, list):
            same = len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
        else:
            same = a == b
        if not same:
            changed.append(index)
    return tuple(changed)


def _autograd_changed(now, before) -> bool:
    """Whether the call turned a tensor argument's requires_grad on or off, or left a .grad on
    it (``before`` holds clones taken before the call, which keep the flag; the arguments are
    leaves, the only tensors whose .grad autograd fills)."""
    return any(_is_tensor(a) and (a.requires_grad != b.requires_grad
                                  or (a.is_leaf and a.grad is not None))
               for a, b in zip(now, before))


def _same_value(x, y) -> bool:
    if _is_number(x) and _is_number(y) and math.isnan(float(x)) and math.isnan(float(y)):
        return True
    return x == y


def _materialise(args: tuple, device: str) -> tuple:
    return tuple(a.build(device) if isinstance(a, TensorSpec) else copy.deepcopy(a) for a in args)


def _snapshot(args: tuple) -> tuple:
    return tuple(a.clone() if _is_tensor(a) else copy.deepcopy(a) for a in args)


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
        _torch().cuda.synchronize()


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
        again = result.detach().to("cpu", dtype=_torch().float64).numpy()
        stored = _torch().tensor(UNWRITTEN_SENTINEL, dtype=result.dtype).item()
    except BaseException:
        return None
    if again.shape != first_values.shape:
        return None
    unwritten = np.isnan(first_values) & (again == stored)
    return unwritten if unwritten.any() else None


def cap_memory(allowance_gib: float) -> bool:
    """Limit this process's address space to what it maps now plus ``allowance_gib`` (Linux
    only; never where CUDA runs, which reserves far more address space than it uses). Where
    it cannot (no /proc on macOS, no resource module on Windows) nothing is capped: the time
    limit still ends a runaway allocation, and check says so when --memory is asked for."""
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[0])
        limit = pages * os.sysconf("SC_PAGE_SIZE") + int(allowance_gib * (1 << 30))
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        # Hard as well as soft: the learner's code may not lift it (nor, where the filter of
        # learning.grader.containment holds, try: setrlimit is refused there)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, OSError, ValueError):
        return False
    return True


class _LockDown:
    """The last step before the learner's code runs: the memory cap, then the filter that keeps
    it from the grader's processes (learning.grader.containment). Either may be missing here;
    the grader's own limits hold without them."""

    def __init__(self, grader_pid: int, channel: Channel):
        self.grader_pid = grader_pid
        self.channel = channel

    def __call__(self, memory_gib: float, device: str):
        if device == "cpu" and memory_gib > 0:
            cap_memory(memory_gib)
        if containment.available():
            containment.limit_tasks()
        why = containment.lock_down(containment.grader_processes(self.grader_pid)) \
            if containment.available() else "no guard on this system"
        self.channel.send("contained", why)


def run(exercise_name: str, module_path: str, part_names: list[str], force_interpret: bool,
        channel: Channel, memory_gib: float = MEMORY_ALLOWANCE_GIB,
        only: dict[str, list[str]] | None = None, lock_down=None) -> int:
    exercise = registry.find(exercise_name)
    parts = [exercise.part(name) for name in part_names]
    device = "cpu"
    recorder = None
    launches = None
    if kernel_mode.triton_missing():
        # The learner's module imports triton: the stand-in lets it import, so that its plain
        # Python is graded as anywhere; a part that launches kernels cannot run at all here.
        from learning.grader import standin

        standin.install()
        kernels = [part.name for part in parts if part.needs_kernels]
        if kernels:
            channel.send("environment", kernel_mode.triton_unavailable_line(kernels))
            return 0
    if any(part.needs_kernels for part in parts) or force_interpret:
        mode = kernel_mode.select(force_interpret)
        device = mode.device
        reason = mode.reason
        if mode.interpret:
            from learning.grader import gpu_compile, sanitizer

            if not sanitizer.install():
                reason += "; bounds checking is unavailable for this Triton version"
            recorder = gpu_compile.LaunchRecorder(
                module_path, lambda launch: channel.send("launch", launch))
            if not recorder.install():
                recorder = None
        channel.send("mode", mode.interpret, reason)
        problem = kernel_mode.interpreter_problem() if mode.interpret else None
        if problem and any(part.needs_kernels for part in parts):
            channel.send("environment", problem)  # every kernel part would fail, not by them
            return 0
        launches = LaunchCounter()
        launches.install()
    # Build every input before the learner's code runs, so their import cannot change them.
    inputs = {(p.name, c.name): c.make_args() for p in parts for c in p.cases
              if only is None or p.name not in only or c.name in only[p.name]}
    course_root = os.path.dirname(os.path.abspath(module_path))
    sys.path.insert(0, course_root)
    warm_up(module_path)
    if lock_down is not None:
        lock_down(memory_gib, device)
    elif device == "cpu" and memory_gib > 0:
        cap_memory(memory_gib)
    loaded_before = borrowed.loaded_reference_modules()
    watch = borrowed.Watch(module_path)
    watch.install()
    interpreting = _interprets(os.environ.get("TRITON_INTERPRET"))
    channel.send("importing")
    module, problem = import_learner_module(module_path)
    if problem is None and _interprets(os.environ.get("TRITON_INTERPRET")) != interpreting:
        problem = _mode_changed(module_path, interpreting)
    channel.send("import", problem)
    if problem:
        return 0
    completed = _run_parts(module, module_path, parts, inputs, only, device, recorder,
                           launches, channel)
    seen = (borrowed.loaded_reference_modules() - loaded_before) | watch.found
    if seen:
        channel.send("borrowed", sorted(seen))
    if not completed:
        return 0
    for stream in (sys.stdout, sys.stderr):  # the grader stops reading at "finished"
        with contextlib.suppress(Exception):
            stream.flush()
    channel.send("finished")
    return 0


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


def _run_parts(module, module_path, parts, inputs, only, device, recorder, launches,
               channel) -> bool:
    """Every chosen case of every part, each reported as it ends; False when it stopped early
    because this process can run nothing more (a GPU fault, an input it could not build)."""
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
        if recorder is not None:
            recorder.part = part.name
        for case in part.cases:
            if only is not None and part.name in only and case.name not in only[part.name]:
                continue  # it ran in an earlier process
            if case.gpu_only and device != "cuda":
                channel.send("done", part.name, case.name, Skipped("needs a CUDA GPU"))
                continue
            lacking = _lacks_bfloat16(inputs[(part.name, case.name)], device)
            if lacking:
                channel.send("done", part.name, case.name, Skipped(lacking))
                continue
            channel.send("start", part.name, case.name)
            try:
                outcome = call_case(function, case, inputs[(part.name, case.name)], device,
                                    part.needs_kernels, module_path,
                                    launches if part.needs_kernels else None)
            except InputNotBuilt as exc:
                channel.send("done", part.name, case.name, Skipped(
                    f"not run: its input could not be built in the process that imported your "
                    f"module ({exc}); what the module does when imported (changing torch or "
                    f"numpy, say) may be why"))
                channel.send("abandon", part.name, "not run: the grader could not build an "
                             "earlier case's input")
                return False
            channel.send("done", part.name, case.name, outcome)
            if isinstance(outcome, Raised) and outcome.gpu_lost:
                # Nothing more can run on this GPU context; later parts get a fresh process.
                channel.send("abandon", part.name, "not run: the GPU faulted in an earlier case")
                return False
            if isinstance(outcome, Raised) and outcome.not_started:
                break
    return True


def _lacks_bfloat16(args_spec: tuple, device: str) -> str:
    """Why a case with bfloat16 tensors cannot run on this GPU ("" when it can): bfloat16
    arithmetic came with compute capability 8.0 (the A100); a T4 (7.5) has none."""
    if device != "cuda" or not any(isinstance(a, TensorSpec) and a.dtype == "bfloat16"
                                   for a in args_spec):
        return ""
    torch = _torch()
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) >= (8, 0):
        return ""
    return (f"needs bfloat16, which the {torch.cuda.get_device_name()} (sm_{major}{minor}) "
            "lacks: GPUs of compute capability 8.0 (sm_80, the A100) and newer have it")


def run_map(exercise_name: str, module_path: str, request: dict, channel: Channel,
            memory_gib: float = 0.0, lock_down=None) -> int:
    """``python -m learning.grader.worker --map``: the case in the interpreter, the reference's
    module first (so that nothing the learner's import does can change it), then the learner's."""
    from learning.grader import memory_map, sanitizer

    selected = kernel_mode.select(True)
    channel.send("mode", True, selected.reason)
    if not sanitizer.install():
        channel.send("environment", "this Triton's interpreter lacks the hooks a memory map "
                     "records through")
        return 0
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
    sys.path.insert(0, os.path.dirname(os.path.abspath(module_path)))
    warm_up(module_path)
    if lock_down is not None:
        lock_down(memory_gib, "cpu")
    elif memory_gib > 0:
        cap_memory(memory_gib)
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
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    channel.send("finished")
    return 0


def run_steps(exercise_name: str, module_path: str, request: dict, channel: Channel,
              memory_gib: float = 0.0, lock_down=None) -> int:
    """``python -m learning.grader.worker --steps``: one case with its named steps recorded
    (learning.grader.named_steps), kernels in the interpreter (where their steps are Python):
    the reference's first, sent before the learner's module is imported (so that nothing it
    does can change them), then the learner's."""
    from learning.grader import named_steps

    part = registry.find(exercise_name).part(request["part"])
    if part.needs_kernels or request.get("interpret"):
        selected = kernel_mode.select(True)
        channel.send("mode", True, selected.reason)
        from learning.grader import sanitizer

        sanitizer.install()  # a load out of bounds raises, as in the check, and ends the steps
    case = part.case(request["case"])
    traced = part.steps.function or part.function
    args_spec = case.make_args()
    channel.send("importing")
    module, problem = import_learner_module(request["reference"])
    reference = named_steps.record_call(module, part.function, traced, args_spec,
                                        part.steps.names) if module is not None else \
        {"problem": problem.message if problem else "the reference did not import"}
    channel.send("steps", named_steps.REFERENCE, reference)
    sys.path.insert(0, os.path.dirname(os.path.abspath(module_path)))
    warm_up(module_path)
    if lock_down is not None:
        lock_down(memory_gib, "cpu")
    elif memory_gib > 0:
        cap_memory(memory_gib)
    module, problem = import_learner_module(module_path)
    channel.send("import", problem)
    if problem:
        return 0
    channel.send("start", part.name, case.name)
    learner = named_steps.record_call(module, part.function, traced, args_spec,
                                      part.steps.names)
    channel.send("steps", named_steps.LEARNER, learner)
    channel.send("done", part.name, case.name, Skipped("recorded for its named steps"))
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    channel.send("finished")
    return 0


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
    parser.add_argument("--stack-file", default="",
                        help="write the stack here on SIGUSR1 (learning.grader.stuck)")
    parser.add_argument("--grader-pid", type=int, default=0,
                        help="the check's process, which the learner's code may not signal")
    options = parser.parse_args(argv)
    # Everything the learner's code starts stays below a guard (learning.grader.containment)
    return containment.run_guarded(lambda: _work(options))


def _work(options) -> int:
    if options.stack_file:
        stuck.arm(options.stack_file)
    sys.dont_write_bytecode = True
    kernel_mode.hide_triton_if_asked()  # a worker forked from a warm process has triton
    # The interpreter evaluates masked-off lanes too (exp of -inf - -inf, say); NumPy's warnings
    # about them are not the learner's output.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.")
    channel = Channel(options.fd)
    # The grader ends this process directly should its guard stop answering.
    channel.send("pid", os.getpid())
    locked = _LockDown(options.grader_pid, channel)
    if options.map is not None:
        return run_map(options.exercise, options.module_path, options.map, channel,
                       options.memory_gib, locked)
    if options.steps is not None:
        return run_steps(options.exercise, options.module_path, options.steps, channel,
                         options.memory_gib, locked)
    parts = [p for p in options.parts.split(",") if p]
    return run(options.exercise, options.module_path, parts, options.interpret, channel,
               options.memory_gib, options.cases, locked)


if __name__ == "__main__":
    sys.exit(main())
