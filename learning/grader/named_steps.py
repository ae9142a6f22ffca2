"""The values a function gives the lesson's named steps, recorded as it runs.

Runs in the learner's process (``learning.grader.worker --steps``), on the learner's function and
on the reference's alike. Each statement that assigns one of the named variables (``m = ...``,
``acc[i] += ...``, ``shifted.append(...)``) adds an event when it completes: the name, a plain
copy of its value, and the loop variables around the statement (the reference's say where the
step ran). Consecutive events of one name are one event, holding the last value: a loop that
builds ``shifted`` one element at a time gives the same events as a comprehension. The
recording is bounded in events and in numbers kept; past either it stops, marked as cut.
``learning.grader.first_step`` compares two recordings.
"""

from __future__ import annotations

import ast
import math
import sys
from dataclasses import dataclass, field

from learning.grader import program_order

REFERENCE, LEARNER = "reference", "learner"  # whose steps a recording holds
MAX_EVENTS = 5_000  # events kept before the recording is cut
MAX_NUMBERS = 500_000  # numbers kept over a whole recording
MAX_VALUE_NUMBERS = 20_000  # a larger value is recorded as too large to keep
# Methods that change the list they are called on: shifted.append(x) is a step of shifted.
MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort",
                      "reverse", "__setitem__", "fill_", "copy_", "add_", "mul_"})


@dataclass
class Event:
    """One named value as a statement left it."""

    name: str
    value: object  # a float, a nested list of floats, or a short string saying what it was
    loops: dict  # the enclosing loops' variables (plain numbers only) when it was set
    line: int
    parts: int = 1  # the statements it stands for, one after another (see first_step.merged)
    last: int = 0  # the first line of the last of them, where it is not ``line``'s

    @property
    def last_line(self) -> int:
        return self.last or self.line


@dataclass
class Recording:
    """What one call set its named variables to, in order; ``problem`` says why there is
    nothing (the source could not be read), ``cut`` that the bounds stopped it early."""

    events: list = field(default_factory=list)
    names: tuple = ()  # the named variables the function assigns anywhere
    cut: bool = False
    problem: str = ""
    raised: str = ""  # the exception the call ended with, if any

    def as_data(self) -> dict:
        return {"events": [(e.name, e.value, e.loops, e.line, e.last) for e in self.events],
                "names": list(self.names), "cut": self.cut, "problem": self.problem,
                "raised": self.raised}

    @classmethod
    def from_data(cls, data) -> Recording | None:
        if not isinstance(data, dict):
            return None
        try:
            events = [Event(str(n), v, dict(loops), int(line), last=int(last))
                      for n, v, loops, line, last in data.get("events", [])]
            return cls(events, tuple(str(n) for n in data.get("names", ())),
                       bool(data.get("cut")), str(data.get("problem", "")),
                       str(data.get("raised", "")))
        except (TypeError, ValueError):
            return None


@dataclass
class _Statement:
    names: tuple  # the named variables it sets
    loops: tuple  # the names the loops around it bind, outermost first
    first: int  # its first line


def _targets(node) -> list[str]:
    """The variables an assignment target binds or changes: x, x[i], x.attr, (a, b)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for element in node.elts for n in _targets(element)]
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    if isinstance(node, (ast.Subscript, ast.Attribute)):
        return _targets(node.value)
    return []


def _sets(statement) -> list[str]:
    """The variables a statement sets or changes in place."""
    if isinstance(statement, ast.Assign):
        return [n for target in statement.targets for n in _targets(target)]
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        return _targets(statement.target) if getattr(statement, "value", 1) is not None else []
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        function = statement.value.func
        if isinstance(function, ast.Attribute) and function.attr in MUTATORS:
            return _targets(function.value)
    return []


def _loop_names(loop) -> tuple[str, ...]:
    return tuple(_targets(loop.target)) if isinstance(loop, (ast.For, ast.AsyncFor)) else ()


def statements(function_node, watched) -> tuple[dict[int, _Statement], set[str]]:
    """{line: the statement that line belongs to} for the statements of ``function_node``
    that set a watched name, and every watched name the function sets anywhere."""
    by_line: dict[int, _Statement] = {}
    used: set[str] = set()

    def visit(body, loops):
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            named = tuple(n for n in dict.fromkeys(_sets(statement)) if n in watched)
            inner = loops + _loop_names(statement)
            if isinstance(statement, (ast.For, ast.AsyncFor)):
                named = tuple(n for n in _targets(statement.target) if n in watched)
            end = statement.end_lineno or statement.lineno
            children = [getattr(statement, f, []) for f in ("body", "orelse", "finalbody")]
            children += [h.body for h in getattr(statement, "handlers", [])]
            if any(children):  # a compound statement: its header is the lines before its body
                end = min(b[0].lineno for b in children if b) - 1
                end = max(end, statement.lineno)
            record = _Statement(named, loops if not isinstance(statement, ast.For) else inner,
                                statement.lineno)
            for line in range(statement.lineno, end + 1):
                by_line.setdefault(line, record)
            used.update(named)
            for child in children:
                visit(child, inner)

    visit(function_node.body, ())
    return by_line, used


def find_function(source: str, name: str, first_line: int):
    """The def of ``name`` that starts at ``first_line`` (its first decorator's line)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if start == first_line or node.lineno == first_line:
                return node
    return None


def uses_names(source: bytes | None, function: str, watched) -> bool:
    """Whether the module text ``source`` defines ``function`` and it sets any of the names
    ``watched`` (read without running anything)."""
    try:
        tree = ast.parse(source or b"")
    except (SyntaxError, ValueError):
        return False
    defined = [node for node in tree.body if isinstance(node, (ast.FunctionDef,
               ast.AsyncFunctionDef)) and node.name == function]
    # the last definition is the one the module keeps
    return bool(defined) and bool(statements(defined[-1], set(watched))[1])


def _kernel_value(value):
    """A value of Triton's interpreter as NumPy: a block's data, a scalar's one number, a
    constexpr's value; ``value`` itself when it is none of these."""
    handle = getattr(value, "handle", None)
    data = getattr(handle, "data", None)
    if data is not None and hasattr(value, "shape"):
        import numpy as np

        data = np.asarray(data)
        return data.reshape(()) if not list(value.shape) and data.size == 1 else data
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return value.value
    return value


def plain(value, budget: int):
    """A copy of ``value`` that crosses the pipe: a float, nested lists of floats, or a short
    note of what it was; and how many numbers it holds. It never raises: it runs inside the
    learner's code (range(10**15) would raise MemoryError there, an int past float's range
    OverflowError, as if their code had)."""
    try:
        return _plain(value, budget)
    except Exception:  # noqa: BLE001 - whatever the value does, the learner's code goes on
        return f"a value of type {type(value).__name__} that could not be read", 0


def _plain(value, budget: int):
    value = _kernel_value(value)
    if isinstance(value, bool):
        return float(value), 1
    if isinstance(value, (int, float)):
        return float(value), 1
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - the worker has numpy
        np = None
    if np is not None and (isinstance(value, np.generic) or
                           isinstance(value, np.ndarray) and value.ndim == 0):
        try:
            return float(value), 1
        except (TypeError, ValueError):
            return f"a {value.dtype} value", 0
    if isinstance(value, (list, tuple, range)) or (np is not None and
                                                   isinstance(value, np.ndarray)):
        if len(value) > min(budget, MAX_VALUE_NUMBERS):  # before a copy of all of it
            return f"a {type(value).__name__} of {len(value)} items (too many to keep)", 0
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return f"a {type(value).__name__} of other things than numbers", 0
        if array.size > min(budget, MAX_VALUE_NUMBERS):
            return f"a {type(value).__name__} of {array.size} numbers (too many to keep)", 0
        return array.tolist(), int(array.size)
    return f"a {type(value).__name__}", 0


class Recorder:
    """Records the named variables of calls of one code object while it is installed."""

    def __init__(self, function, watched, program=None):
        self.code = function.__code__
        # a kernel's steps also say which program took them: () -> (x, y, z)
        self.program = program
        self.watched = tuple(watched)
        self.recording = Recording()
        self.numbers = 0
        self.by_line: dict[int, _Statement] = {}
        try:
            with open(self.code.co_filename, encoding="utf-8") as handle:
                node = find_function(handle.read(), self.code.co_name,
                                     self.code.co_firstlineno)
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError) as exc:
            self.recording.problem = f"its source could not be read ({type(exc).__name__})"
            return
        if node is None:
            self.recording.problem = "its source could not be found"
            return
        self.by_line, used = statements(node, set(self.watched))
        self.recording.names = tuple(n for n in self.watched if n in used)

    def call(self, function, *args):
        """Call ``function`` with the recorder tracing its frames; what it returns, or the
        exception it raised."""
        if not self.recording.names:
            return None
        previous = sys.gettrace()
        sys.settrace(self._global)
        try:
            return function(*args)
        except BaseException as exc:  # noqa: BLE001 - recorded, the steps before it stand
            # the learner's own exception, not the wrapper Triton's interpreter raises it in
            for _ in range(8):  # a chain, bounded: a cause may name its effect again
                if exc.__cause__ is None:
                    break
                exc = exc.__cause__
            self.recording.raised = type(exc).__name__
            return None
        finally:
            sys.settrace(previous)

    def _global(self, frame, event, arg):
        # by file and name: Triton's interpreter runs a kernel as a function compiled anew
        # from the same source, with the same line numbers
        code = frame.f_code
        if event != "call" or code.co_name != self.code.co_name or \
                code.co_filename != self.code.co_filename:
            return None
        state = {"current": None, "raised": False}

        def local(frame, event, arg):
            if self.recording.cut:
                return None
            if event == "line":
                statement = self.by_line.get(frame.f_lineno)
                current = state["current"]
                if current is not None and statement is not current:
                    self._flush(frame, current)
                if statement is not current or (statement is not None and
                                                frame.f_lineno == statement.first):
                    state["current"] = statement
                state["raised"] = False
            elif event == "exception":  # the statement did not complete: nothing it set
                state["raised"] = True
                state["current"] = None
            elif event == "return":
                if state["current"] is not None and not state["raised"]:
                    self._flush(frame, state["current"])
                state["current"] = None
            return local

        return local

    def _flush(self, frame, statement: _Statement):
        if not statement.names:
            return
        values = frame.f_locals
        loops = {} if self.program is None else {"program": self.program()}
        for name in statement.loops:
            value, _ = plain(values.get(name), 1)
            if isinstance(value, float) and math.isfinite(value):
                loops[name] = int(value) if value.is_integer() else value
        for name in statement.names:
            if name not in values:
                continue
            value, count = plain(values[name], MAX_NUMBERS - self.numbers)
            events = self.recording.events
            if events and events[-1].name == name and (
                    events[-1].last_line == statement.first or
                    one_round(events[-1].loops, loops)):
                # one step, done in parts: its last value
                self.numbers -= _count(events[-1].value)
                # and its last place: a loop that sets only this name merges its iterations,
                # and the value is the last iteration's, to be compared at that iteration
                events[-1].value, events[-1].loops = value, loops
                events[-1].last = statement.first
            else:
                if len(events) >= MAX_EVENTS:
                    self.recording.cut = True
                    return
                events.append(Event(name, value, loops, statement.first))
            self.numbers += count
            if self.numbers >= MAX_NUMBERS:
                self.recording.cut = True
                return


def one_round(before: dict, now: dict) -> bool:
    """Two statements ran in one round of every loop they share. Not so for a name set at
    the end of one query's loop and again at the start of the next (attention's m): two
    steps, however close, since the second starts the next round afresh."""
    return all(now[name] == value for name, value in before.items() if name in now)


def _count(value) -> int:
    if isinstance(value, float):
        return 1
    if isinstance(value, list):
        return sum(_count(v) for v in value)
    return 0


def record(function, args, watched, traced=None, program=None) -> Recording:
    """Call ``function(*args)`` and record the named variables ``watched`` that ``traced``
    (``function`` itself unless given: a kernel it launches, whose steps ``program()`` says
    the program of) sets."""
    recorder = Recorder(traced or function, watched, program)
    if recorder.recording.names:
        recorder.call(function, *args)
    return recorder.recording


def record_call(module, entry: str, traced: str, args_spec: tuple, watched) -> dict:
    """The recording of ``module.entry`` called on a case's arguments, with the named steps
    of ``module.traced`` (the same function, or the kernel it launches), as plain data."""
    import copy

    from learning.grader.tensors import TensorSpec

    function, inner = getattr(module, entry, None), getattr(module, traced, None)
    kernel = hasattr(inner, "fn")  # a @triton.jit kernel: the Python function it holds
    inner = getattr(inner, "fn", inner)
    if not callable(function) or not hasattr(inner, "__code__"):
        return Recording(problem=f"no function {traced}").as_data()
    args = tuple(a.build("cpu") if isinstance(a, TensorSpec) else copy.deepcopy(a)
                 for a in args_spec)
    with program_order.first_to_last():
        return record(function, args, watched, inner, _program if kernel else None).as_data()


def _program() -> tuple:
    """The program Triton's interpreter is running: (x, y, z)."""
    from triton.runtime.interpreter import interpreter_builder

    return tuple(int(i) for i in interpreter_builder.grid_idx)
