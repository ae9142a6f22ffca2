"""Compile the learner's kernels for a GPU target, on a machine that has no GPU.

Triton's interpreter accepts code that the GPU compiler rejects: a ``break``, an ``if`` on a
block of values, a kernel that returns a value. So after the interpreter has run a part, the
kernels it launched are compiled for ``sm_90`` in a separate process without TRITON_INTERPRET,
with the argument types and constexpr values recorded from those launches; what the compiler
rejects fails the part, with the compiler's message and the kernel's line.

Two halves live here:

- ``LaunchRecorder`` runs in the learner's process (``learning.grader.worker``): it wraps the
  interpreter's launch and turns each launch of a kernel defined in the learner's file into a
  ``Launch`` (plain data: names, type strings, constexpr values);
- ``python -m learning.grader.gpu_compile`` is the compiling process: it imports the learner's
  module, reads the launches on stdin once the interpreter run is over, compiles each distinct
  one, and reports a ``Compiled`` per launch on a pipe, like the worker does.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import inspect
import os
import pickle
import re
import struct
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field

from learning.grader import kernel_ops, kernel_source
from learning.grader.learner_code import append_path

TARGET = ("cuda", 90, 32)  # backend, compute capability (sm_90), warp size
TARGET_LABEL = "sm_90"
# Every GPU the course is meant to run on, by compute capability: a T4 (the free notebook
# services' GPU), an A100, an L4 or RTX 40xx, an H100 or H200. The check compiles for sm_90;
# LEARNING_COMPILE_TARGET=sm_75,sm_80 (say) compiles for those instead, and the tests compile
# the reference solutions for all four.
TARGETS = {"sm_75": ("cuda", 75, 32), "sm_80": ("cuda", 80, 32), "sm_89": ("cuda", 89, 32),
           "sm_90": TARGET}
TARGET_SWITCH = "LEARNING_COMPILE_TARGET"
OFF_SWITCH = "LEARNING_COMPILE_CHECK"  # set to 0 to skip the check
MAX_MESSAGE = 1500

_TORCH_TYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}

# The compiler's words for an `if` on a block (learning.grader.runner blames failing cases on it)
IF_ON_A_BLOCK = "Boolean value of Tensor"
# What a compiler message means, in the course's words: (fragment of the message, advice).
HINTS = (
    ("Break", "a kernel cannot `break` out of a loop: loop over a fixed range and mask "
     "the elements past the end instead"),
    ("Continue", "a kernel cannot `continue`: mask the elements to skip instead"),
    (IF_ON_A_BLOCK, "an `if` on a block of values is not allowed on the GPU (the "
     "interpreter treats it as always true): use tl.where(condition, a, b), or a mask"),
    ("tt.return", "a kernel cannot return a value: store its results through an output "
     "pointer with tl.store"),
    # (Triton 3.5's words for the same)
    ("type of return operand", "a kernel cannot return a value: store its results through an "
     "output pointer with tl.store"),
    ("must be a power of 2", "block sizes (tl.arange bounds, BLOCK constants) must be powers "
     "of two: round up with triton.next_power_of_2"),
)

# tl.dot's size check names the smallest M (a's rows), N (b's columns) and K (the dimension a
# and b share) the target takes for the inputs' dtype. On NVIDIA GPUs Triton 3.3 and 3.4 want
# all three at least 16 (K at least 32 for 8-bit inputs); from 3.5 on M and N may be as small
# as 1 and only K has a floor (16 for 16-bit inputs, 32 for 8-bit; 3.9 takes 8 for float32).
# The advice reads the numbers from the message rather than assume them.
_DOT_SIZES = re.compile(r"Input shapes should have M >= (\d+), N >= (\d+) and K >= (\d+)")
_DIMENSIONS = (("M", "a's rows"), ("N", "b's columns"),
               ("K", "the dimension a and b share, which tl.dot sums over: BLOCK_K in a "
                "matmul; HEAD_DIM for q @ k^T; the block of keys for p @ v; the block of "
                "queries for p^T @ dO and dS^T @ q"))


# The compiler's words when a variable a loop updates changes type in the loop: the interpreter
# lets NumPy promote it (a float16 accumulator silently becomes float32 after one tl.dot), so
# only this check sees it. Both types are in the message; the element type is their last word.
_LOOP_TYPE = re.compile(r"Loop-carried variable (?P<name>\w+) has initial type (?P<start>.+?) "
                        r"but is re-assigned to (?P<loop>.+?) in loop")


def changes_type_in_a_loop(message: str) -> bool:
    """Whether the compiler's ``message`` says a variable changes type (or shape) in a loop."""
    return bool(_LOOP_TYPE.search(message))


def _loop_type_hint(message: str) -> str:
    found = _LOOP_TYPE.search(message)
    name = found["name"]
    start, loop = (re.findall(r"\w+", found[part])[-1] for part in ("start", "loop"))
    if start == loop:
        return (f"{name} changes shape inside the loop ({found['start']} before it, "
                f"{found['loop']} after one trip): a loop must give it back in the shape it "
                f"started with")
    named = _TL_DTYPES.get(loop)
    example = f" (tl.zeros(..., dtype=tl.{named}), say)" if named else ""
    why = "; tl.dot returns float32 by default" if loop == "fp32" else ""
    return (f"{name} starts as {start} and the loop makes it {loop}: create it with the type it "
            f"has in the loop{example} and convert it once, after the loop{why}")


_TL_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64",
              "i32": "int32", "i64": "int64"}


def _dot_size_hint(message: str) -> str:
    sizes = _DOT_SIZES.search(message)
    if sizes is None:
        return ""
    floors = [(name, meaning, int(size)) for (name, meaning), size
              in zip(_DIMENSIONS, sizes.groups())]
    needed = [f"{name} ({meaning}) of at least {size}" for name, meaning, size in floors
              if size > 1]
    free = [name for name, _, size in floors if size <= 1]
    advice = ("tl.dot(a, b) multiplies an M x K block by a K x N one, and for these inputs' "
              "dtype the GPU needs " + " and ".join(needed))
    if free:
        advice += f"; {' and '.join(free)} may be as small as 1"
    return advice + (": make that block" if len(needed) == 1 else ": make those blocks") + \
        " at least that size (a power of two)"


@dataclass(frozen=True)
class Launch:
    """One kernel launch, as the GPU compiler needs it: no tensors, only types and constants."""

    part: str
    kernel: str  # the kernel's name at the top level of the learner's module
    # ((argument name, type string such as "*fp32", "i32", "constexpr"), ...); a tuple argument's
    # type is a tuple of its elements' types
    signature: tuple
    constexprs: tuple  # ((argument name, value), ...); a tl.dtype travels as ("dtype", "fp32")
    options: tuple = ()  # ((name, value), ...): num_warps, num_stages
    line: int = 0  # where the kernel is defined in the learner's file
    # the file of a kernel kept outside the learner's (its name is then "module.kernel"), or
    # NO_FILE for one whose source is in none
    path: str = ""
    # a digest of the source of the kernel that ran (``source_digest``): the compile check
    # compiles that kernel, not another its process was given under the same name
    code: str = ""
    # what in the kernel's source reached past Triton's language where it ran, read with that
    # process's globals (learning.grader.kernel_source), or ""
    past: str = ""
    # what the grader saw differ where the kernel ran from what the compiler is given (a global
    # changed as it ran, the interpreter's rewrite of it, Triton's modules), or ""
    ran_otherwise: str = ""
    # what the compiler is given of the kernel besides its arguments, as it was where the kernel
    # ran (kernel_source.reads): the compile check's process must find the same
    reads: tuple = ()

    @property
    def key(self) -> tuple:
        return (self.kernel, self.signature, self.constexprs, self.options)


@dataclass
class Compiled:
    """What the GPU compiler said about one launch."""

    kernel: str
    # "ok", "rejected" (the learner's code), "refused" (the learner's launch, which Triton's
    # launch on a GPU would refuse before compiling), "unvouched" (the learner's code changed
    # the check's own, or a kernel that ran could not be given to the compiler: nothing it says
    # stands) or "not-checked" (our side)
    status: str
    message: str = ""
    line: int | None = None  # the line of the learner's file the compiler pointed at
    hint: str = ""
    seconds: float = 0.0
    key: tuple = field(default=())
    target: str = TARGET_LABEL  # the GPU it was compiled for (a key of TARGETS)
    # the kinds of operation the compiled kernel runs (learning.grader.kernel_ops), where it
    # compiled
    ops: tuple = ()


# ---------------------------------------------------------------------------------------------
# In the learner's process: record the interpreter's launches.


class LaunchRecorder:
    """Wrap the interpreter's launch to describe each launch of a kernel from ``learner_file``."""

    def __init__(self, learner_file: str, send):
        self.learner_file = os.path.abspath(learner_file)
        self.folder = os.path.dirname(self.learner_file)
        self.send = send  # called with each new Launch
        self.part = ""
        self.seen: set = set()
        self.verified: dict = {}  # the interpreter's rewritten functions found to be their own
        # the grader's watch on its own code and the interpreter's (tampering.Snapshot), set by
        # the worker once made: looked at as each launch's programs begin (or, where none of
        # their loads and stores was seen, once the launch has run)
        self.untouched = None
        # [kernel, its Launch, whether its programs have begun, what changed by then]
        self.current: list | None = None

    def install(self) -> bool:
        try:
            from triton.runtime import interpreter
        except ImportError:
            return False
        function_class = getattr(interpreter, "InterpretedFunction", None)
        if function_class is None or not hasattr(function_class, "run"):
            return False
        original_run = function_class.run
        recorder = self

        def run(self, *args, **kwargs):
            launch = None
            try:
                launch = recorder.record(self.fn, args, kwargs, kernel=self)
            except Exception:  # recording is best effort and must never fail a launch
                pass
            recorder.current = [self, launch, False, ""]
            try:
                return original_run(self, *args, **kwargs)
            finally:
                with contextlib.suppress(Exception):
                    recorder.after(self, launch)
                recorder.current = None

        from learning.grader import sanitizer

        sanitizer.observers.append(self)  # to look again as a launch's programs begin

        function_class.run = run
        return True

    def record(self, fn, args, kwargs, kernel=None):
        """A launch of any kernel: one of the learner's file by its name, one kept in another
        file (a module of theirs beside it, a package, a file elsewhere) as "module.kernel"
        with its path, to be compiled from there, and one whose source is in no file (made with
        exec) with NO_FILE, which the compile check cannot vouch for."""
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        filename = code.co_filename
        path = os.path.abspath(filename) if not filename.startswith("<") else ""
        launch = describe_launch(self.part, fn, args, kwargs)
        if launch is None:  # an argument of no type the compiler takes: said, not skipped
            described = any(type(a).__name__ == "TensorDescriptor"
                            for a in (*args, *kwargs.values()))
            # a host-side tensor descriptor: the check cannot describe it yet, and says so
            launch = Launch(self.part, getattr(fn, "__name__", "a kernel"), (), (),
                            path=DESCRIPTOR if described else NO_TYPES)
        elif path != self.learner_file:
            if path and os.path.isfile(path):
                launch = dataclasses.replace(
                    launch, kernel=f"{_module_name(path, self.folder)}.{launch.kernel}",
                    path=path)
            else:
                launch = dataclasses.replace(launch, path=NO_FILE)
        if launch is None:
            return None
        if launch.path not in NOT_COMPILED:
            # read here, at every launch: a global can be one thing where the kernel runs and
            # another where it is compiled (an object of the learner's here, None there), or
            # another thing at the next launch
            changed = self._changed(kernel)
            launch = dataclasses.replace(
                launch, past="" if changed else kernel_source.past_the_language(fn),
                ran_otherwise=f"{', '.join(changed[:3])}, changed by the time the kernel was "
                "launched" if changed else "", reads=kernel_source.reads(fn))
        return self._send_once(launch)

    def _send_once(self, launch: Launch) -> Launch:
        seen = (launch.part, launch.key, launch.past, launch.ran_otherwise, launch.reads)
        if seen not in self.seen:
            self.seen.add(seen)
            self.send(launch)
        return launch

    def _changed(self, kernel, whole: bool = False) -> list[str]:
        """What of Triton's, the interpreter's or the grader's own code is not as it was: its
        language's classes and modules, the kernel objects' own attributes (an instance's cache
        of rewritten kernels), and with ``whole`` the interpreter and what it computes with and
        the grader's code (milliseconds: looked at once a launch, as its programs begin, when
        whatever ran before them has run and nothing of the learner's runs after)."""
        changed = kernel_source.tritons_changed()
        if whole and self.untouched is not None:
            changed += self.untouched.changes()
        if kernel is not None:
            changed += kernel_source.shadowed(kernel)
        return changed

    def launch(self, executor, args, names):
        """(A sanitizer observer: a launch's arguments are ready; its grid comes next.)"""

    def access(self, kind, builder, ptrs, mask):
        """(A sanitizer observer.) The first load or store of a launch: its grid, its hooks
        and its arguments' own code have all run, and what the kernel reads must still be what
        it read as it was launched."""
        current = self.current
        if current is None or current[2]:
            return
        current[2] = True
        kernel, launch = current[0], current[1]
        if launch is None or launch.path in NOT_COMPILED:
            return
        with contextlib.suppress(Exception):
            now = dict(kernel_source.reads(kernel.fn))
            differ = next((what for what, held in launch.reads if now.get(what) != held), None)
            changed = self._changed(kernel, whole=True)
            current[3] = f"{differ.split(': ', 1)[-1]}, which changed as the kernel's " \
                "programs began" if differ is not None else \
                f"{', '.join(changed[:3])}, changed as the kernel's programs began" \
                if changed else ""

    def after(self, kernel, launch: Launch | None):
        """Once a launch has run: what the kernel's globals hold must be what they held as it
        started (a grid function of the learner's runs between the two), and the interpreter
        must have run the kernel's own code (its cache of rewritten functions can be filled
        with another)."""
        if launch is None or launch.path in NOT_COMPILED:
            return
        from learning.grader import sanitizer

        why = "" if self in sanitizer.observers else \
            "the grader's watch on the launch's programs, which was taken away"
        if not why and self.current is not None and self.current[1] is launch:
            why = self.current[3]
        now = dict(kernel_source.reads(kernel.fn))
        differ = next((what for what, held in launch.reads if now.get(what) != held), None)
        if differ is not None and not why:
            why = f"{differ.split(': ', 1)[-1]}, which changed while the kernel ran"
        # (where no load or store of its programs was seen, the whole look is taken here)
        began = self.current is not None and self.current[1] is launch and self.current[2]
        why = why or _rewritten_elsewhere(type(kernel), self.verified) or ", ".join(
            self._changed(kernel, whole=not began)[:3])
        if why:
            self._send_once(dataclasses.replace(launch, ran_otherwise=why))


def _rewritten_elsewhere(function_class, verified: dict) -> str:
    """Where the interpreter's cache of rewritten kernels (the Python each launch runs) holds
    for a function something other than what Triton's rewriter makes of its source: the
    kernel that ran is then not the one the compile check reads. "" where all agree.
    ``verified``: {id(function): (function, what it was found to run, that one's defaults)},
    each pair rewritten again once (a rewrite costs milliseconds, and launches are many); the
    defaults, which can be set on it at any time, are compared at every launch."""
    from triton.runtime import interpreter

    cache = vars(function_class).get("rewritten_fn")
    rewriter = getattr(interpreter, "FunctionRewriter", None)
    if not isinstance(cache, dict) or rewriter is None:
        return ""
    for source, made in list(cache.items()):
        if type(source) is not types.FunctionType:
            continue
        if type(made) is not types.FunctionType or made.__globals__ is not source.__globals__:
            return f"what the interpreter ran for {source.__qualname__}, which is not its code"
        seen = verified.get(id(source))
        if seen is None or seen[0] is not source or seen[1] is not made:
            try:
                fresh = rewriter(source).rewrite_ast()
            except Exception:  # noqa: BLE001 - Triton could not rewrite it again: not compared
                continue
            if fresh.__code__ != made.__code__:
                return f"what the interpreter ran for {source.__qualname__}, which is not its " \
                    "code"
            seen = verified[id(source)] = (source, made, _defaults(fresh))
        if _defaults(made) != seen[2]:  # (its defaults can be set on it at any time)
            return f"the default arguments of what the interpreter ran for " \
                f"{source.__qualname__}, which are not its source's"
        if seen[2] != _defaults(source):
            # the interpreter runs the def again as it first launches it, so a default that
            # names a global takes the global's value then; the compiler binds the value the
            # def gave as the module was imported
            return f"the default arguments of {source.__qualname__}, which the interpreter " \
                "took from globals changed since its def ran, and the compiler takes as the " \
                "def gave them"
    return ""


def _defaults(function) -> tuple:
    return (tuple(kernel_source.fingerprint(v) for v in function.__defaults__ or ()),
            tuple(sorted((k, kernel_source.fingerprint(v))
                         for k, v in (function.__kwdefaults__ or {}).items())))


#: The path of a launch whose kernel's source is in no file, and of one whose arguments the
#: compile check could not describe
NO_FILE = "<no file>"
NO_TYPES = "<no types>"
DESCRIPTOR = "<a tensor descriptor>"
#: ... and of one given keywords that are neither its parameters nor options of Triton's launch
#: (in ``options``: (name, what was given)), which a GPU's launch refuses
UNKNOWN_KEYWORDS = "<unknown keywords>"
NOT_COMPILED = (DESCRIPTOR, NO_TYPES, UNKNOWN_KEYWORDS)  # launches no compiler is given


@functools.cache
def launch_option_names() -> frozenset | None:
    """The keywords Triton's launch takes besides the kernel's parameters: its own (grid,
    warmup) and the NVIDIA backend's options (num_warps, num_stages, launch_pdl, ...); None
    where that backend cannot be read, and then no keyword is called unknown."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions

        return frozenset(f.name for f in dataclasses.fields(CUDAOptions)) | {"grid", "warmup"}
    except Exception:  # noqa: BLE001 - another backend's Triton, or a changed module
        return None


def _given(value) -> str:
    """What a keyword was given, for a message: a plain value as written, else its type."""
    if type(value) in (int, float, bool, str) or value is None:
        return _cut(repr(value), 40)
    return f"a {type(value).__name__}"


def _module_name(path: str, folder: str) -> str:
    """A kernel's file as a module name: dotted from the learner's folder where it lies inside
    it ("mykernels", "kernels.softmax"), else the file's own name."""
    relative = os.path.relpath(path, folder)
    if relative.startswith(".."):
        return os.path.splitext(os.path.basename(path))[0]
    return os.path.splitext(relative)[0].replace(os.sep, ".")


def describe_launch(part: str, fn, args, kwargs) -> Launch | None:
    """The Launch for ``fn(*args, **kwargs)``, or None when an argument has no GPU type."""
    kwargs = dict(kwargs)  # the launch's own arguments stay as they were
    parameters = inspect.signature(fn).parameters
    known = launch_option_names()
    unknown = [k for k in kwargs if known is not None and k not in known and k not in parameters]
    if unknown:  # the interpreter ignores them; a GPU's launch raises KeyError
        return Launch(part, fn.__name__, (), (), tuple((k, _given(kwargs[k])) for k in unknown),
                      line=_definition_line(fn), path=UNKNOWN_KEYWORDS)
    options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
    for name in known or ("grid", "warmup", "num_ctas", "maxnreg", "enable_fp_fusion"):
        if name not in parameters:
            kwargs.pop(name, None)
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    signature, constexprs = [], []
    for name, value in bound.arguments.items():
        annotation = parameters[name].annotation
        if _is_constexpr_annotation(annotation) or _is_constexpr_value(value):
            signature.append((name, "constexpr"))
            constexprs.append((name, _plain_constant(value)))
            continue
        kind = _type_string(value)
        if kind is None:
            return None
        if kind == "constexpr":
            constexprs.append((name, None))
        signature.append((name, kind))
    if any(_unplain(value) for _, value in constexprs):
        return None  # a constexpr holding an object: no compiler is given one
    return Launch(part, fn.__name__, tuple(signature), tuple(constexprs),
                  tuple(sorted(options.items())), line=_definition_line(fn),
                  code=source_digest(fn))


def source_digest(fn) -> str:
    """A digest of a function's source from its ``def`` on (its decorators left out), as
    read from its file; "" where it has none. Not of its bytecode, which depends on what
    else was compiled with it (a module's imports change how a call on them is compiled)."""
    import hashlib
    import textwrap

    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return ""
    found = re.search(r"^(async\s+)?def\s", text, re.MULTILINE)
    return hashlib.sha256(text[found.start() if found else 0:].encode()).hexdigest()


def _is_constexpr_annotation(annotation) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return "constexpr" in str(text)


def _is_constexpr_value(value) -> bool:
    return type(value).__name__ == "constexpr" and type(value).__module__.startswith("triton")


def _plain_constant(value, depth: int = 0):
    """A constexpr argument as the compile process is given it: plain data as it is (of
    exactly its type: a subclass of int brings code of its own, which the interpreter runs on
    the kernel's blocks and the compiler never sees), a dtype by name, a @triton.jit function by
    its name in the kernel's module; anything else as ("repr", ...), which the compile check
    cannot give the compiler."""
    if _is_constexpr_value(value):
        value = value.value
    kind = type(value)
    if kernel_source.tritons(kind) and any(c.__name__ == "dtype" for c in kind.__mro__):
        return ("dtype", str(value))
    if value is None or kind in (bool, int, float, str):
        return value
    if kind.__module__ == "numpy" and hasattr(value, "item") and not hasattr(value, "shape") \
            or kind.__module__ == "numpy" and getattr(value, "shape", None) == ():
        with contextlib.suppress(Exception):  # NumPy's scalar: its plain value
            plain = value.item()
            if type(plain) in (bool, int, float):
                return plain
    if kind is tuple and depth < 4:
        items = tuple(_plain_constant(item, depth + 1) for item in value)
        if not any(_unplain(item) for item in items):
            return ("tuple", items)
    function = kernel_source.kernel_function(value)
    if function is not None:
        return ("jit", function.__name__, function.__module__)
    return ("repr", repr(value))


def _unplain(constant) -> bool:
    """A constant ``_plain_constant`` could not make plain data of."""
    return type(constant) is tuple and len(constant) == 2 and constant[0] == "repr"


def _type_string(value) -> str | tuple | None:
    if value is None:
        return "constexpr"
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return "i32"
        return "i64" if -(2**63) <= value < 2**63 else "u64"
    if isinstance(value, float):
        return "fp32"
    if type(value) is tuple:
        # Triton (3.3 on) takes a tuple of values as one argument, typed element by element:
        # (x.stride(0), x.stride(1)) is ("i32", "i32"); one of constants is left undescribed
        kinds = tuple(_type_string(element) for element in value)
        if not kinds or any(kind is None or kind == "constexpr" for kind in kinds):
            return None
        return kinds
    dtype = getattr(value, "dtype", None)
    if dtype is not None and hasattr(value, "data_ptr"):
        element = _TORCH_TYPES.get(str(dtype).removeprefix("torch."))
        return f"*{element}" if element else None
    return None


def _definition_line(fn) -> int:
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return 0
    for offset, text in enumerate(lines):
        if re.match(r"\s*def\s", text):
            return start + offset
    return start


# ---------------------------------------------------------------------------------------------
# In the compiling process.


def targets() -> list[str]:
    """The targets to compile for: LEARNING_COMPILE_TARGET's, else sm_90. A name that is not
    one of TARGETS is kept, for unavailable() to refuse with the list."""
    asked = os.environ.get(TARGET_SWITCH, "").replace(" ", "")
    return [name for name in asked.split(",") if name] or [TARGET_LABEL]


def unavailable() -> str | None:
    """Why the compile check cannot run here (None when it can)."""
    if os.environ.get(OFF_SWITCH, "").strip().lower() in ("0", "off", "no", "false"):
        return f"it was turned off ({OFF_SWITCH}=0)"
    unknown = [name for name in targets() if name not in TARGETS]
    if unknown:
        return f"{TARGET_SWITCH}={os.environ.get(TARGET_SWITCH)} names {', '.join(unknown)}, " \
               f"not one of {', '.join(TARGETS)}"
    try:
        import triton
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.compiler import ASTSource  # noqa: F401
    except ImportError as exc:
        return f"this Triton has no compiler API for it ({exc})"
    version = tuple(int(p) for p in re.findall(r"\d+", triton.__version__)[:2])
    if version < (3, 3):
        return f"Triton {triton.__version__} is older than 3.3"
    try:
        from triton.backends import backends
    except ImportError:
        backends = {}
    if "nvidia" not in backends:
        return "this Triton has no NVIDIA backend"
    if _ptxas_path() is None:
        return "no ptxas was found (Triton's bundled one, or TRITON_PTXAS_PATH)"
    return None


def _ptxas_path() -> str | None:
    import triton

    bundled = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    for path in (os.environ.get("TRITON_PTXAS_PATH"), bundled):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _speed_up_cache_key():
    """Triton hashes its own source tree (about 1.5 s) for its cache key; the compile check
    uses a private cache per check, so a constant key is as good and much cheaper."""
    try:
        from triton.runtime import cache
    except ImportError:
        return
    if hasattr(cache, "triton_key"):
        cache.triton_key = lambda: "learning-compile-check"


# The compiler's entry points as they were before the learner's statements ran (_hold): a
# module that replaced triton.compile with a function that accepts everything would otherwise
# pass the check it is meant to fail. (Code in this process could still reach deeper; the
# plain route is closed.)
_HELD: dict = {}


def _hold():
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError
    from triton.runtime.jit import JITFunction

    kernel_source.remember_tritons_own()
    _HELD.update(compile=triton.compile, GPUTarget=GPUTarget, ASTSource=ASTSource,
                 CompilationError=CompilationError, JITFunction=JITFunction,
                 source_digest=source_digest, kinds_in=kernel_ops.kinds_in,
                 settings=_tritons_settings())


def _tritons_settings() -> dict:
    """Triton's settings as they are before the learner's statements run: the TRITON_*
    environment and each group of triton.knobs (3.4 and later) with what was set on it."""
    groups = []
    try:
        from triton import knobs

        # by name: the check's own tables keep no object that compiling changes
        groups = [(name, dict(vars(group))) for name, group in vars(knobs).items()
                  if isinstance(group, knobs.base_knobs)]
    except (ImportError, AttributeError):
        pass
    return {"env": {k: v for k, v in os.environ.items() if k.startswith("TRITON_")},
            "groups": groups, "home": os.environ.get("TRITON_CACHE_DIR")}


@contextlib.contextmanager
def _as_held(settings: dict):
    """Compile with Triton's settings as they were before the learner's statements ran, into
    a cache folder made now and read by nothing: the statements ran in this process, and a
    compiled kernel planted in the cache folder (or a folder of kernels to override with, a
    hook on the compiler's stages) made a kernel the compiler rejects pass."""
    import shutil

    for key in [k for k in os.environ if k.startswith("TRITON_")]:
        if key not in settings["env"]:
            del os.environ[key]
    os.environ.update(settings["env"])
    home = settings["home"]
    folder = tempfile.mkdtemp(prefix="compile-", dir=home if home and os.path.isdir(home)
                              else None)
    os.environ.update(TRITON_CACHE_DIR=folder, TRITON_ALWAYS_COMPILE="1",
                      TRITON_KERNEL_OVERRIDE="0")
    with contextlib.suppress(ImportError, AttributeError):
        from triton import knobs

        for name, kept in settings["groups"]:
            vars(getattr(knobs, name)).clear()
            vars(getattr(knobs, name)).update(kept)
        knobs.cache.dir = folder
        knobs.compilation.always_compile = True
        knobs.compilation.override = False
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def compile_launch(module, launch: Launch, learner_file: str,
                   target: str = TARGET_LABEL) -> Compiled:
    """What the compiler for ``target`` (a key of TARGETS) says about one launch."""
    if not _HELD:
        _hold()
    compile_ = _HELD["compile"]
    GPUTarget, ASTSource = _HELD["GPUTarget"], _HELD["ASTSource"]  # noqa: N806 (classes)
    CompilationError = _HELD["CompilationError"]  # noqa: N806 (a class)

    start = time.perf_counter()
    # "helper.kernel": the helper module's own kernel
    fn = _jit_function(getattr(module, launch.kernel.rpartition(".")[2], None))
    if fn is None:
        # it ran as a kernel, yet the compile process finds none under its name (made inside
        # a function, or interpreted there too): the check cannot vouch for it
        return Compiled(launch.kernel, "unvouched", f"not compiled: {launch.kernel} is not a "
                        "@triton.jit function at the top level of the module in the compile "
                        "check's process (define kernels at the top level of a module, and "
                        "leave TRITON_INTERPRET to the check), so it could not vouch for it",
                        key=launch.key)
    if launch.code and _HELD["source_digest"](fn.fn) != launch.code:
        return Compiled(launch.kernel, "unvouched", OTHER_CODE, key=launch.key)
    try:
        constexprs = {name: _rebuild_constant(value, module) for name, value in
                      launch.constexprs}
    except LookupError as missing:
        return Compiled(launch.kernel, "unvouched", f"not compiled: it was given the "
                        f"@triton.jit function {missing.args[0]} as a constexpr, which the "
                        "compile check's process does not find at the top level of the "
                        "module, so it could not vouch for it", key=launch.key)
    diagnostics = ""
    try:
        with _captured_stderr(_HELD["settings"]["home"]) as captured, \
                _as_held(_HELD["settings"]):
            source = ASTSource(fn, dict(launch.signature), constexprs)
            kernel = compile_(source, target=GPUTarget(*TARGETS[target]),
                              options=dict(launch.options))
    except CompilationError as exc:
        result = _from_compilation_error(exc, launch, learner_file)
    except Exception as exc:
        diagnostics = captured.text()
        result = _from_diagnostics(exc, diagnostics, launch, learner_file)
    else:
        ttir = getattr(kernel, "asm", {}).get("ttir", "")
        result = Compiled(launch.kernel, "ok", ops=tuple(sorted(_HELD["kinds_in"](
            ttir if isinstance(ttir, str) else ""))))
    result.seconds = time.perf_counter() - start
    result.key = launch.key
    result.target = target
    return result


def _rebuild_constant(value, module=None):
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "dtype":
        import triton.language as tl

        return tl.dtype(value[1])
    if isinstance(value, tuple) and len(value) == 3 and value[0] == "jit":
        found = vars(module).get(value[1]) if module is not None else None
        if kernel_source.kernel_function(found) is None:  # a module of theirs beside it
            found = vars(sys.modules.get(value[2]) or types.ModuleType("-")).get(value[1])
        if kernel_source.kernel_function(found) is None:
            raise LookupError(value[1])
        return found
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "tuple":
        return tuple(_rebuild_constant(item, module) for item in value[1])
    return value


def _from_compilation_error(exc, launch: Launch, learner_file: str) -> Compiled:
    # an error in a @triton.jit helper the kernel calls is the cause of one at the call: the
    # helper's says what is wrong, and where in the helper
    outer = exc
    while getattr(exc.__cause__, "node", None) is not None:
        exc = exc.__cause__
    message = (getattr(exc, "error_message", None) or "").strip()
    node = getattr(exc, "node", None)
    relative = getattr(node, "lineno", None)
    line = None
    if relative is not None:
        start = _def_line_of(getattr(exc, "src", None), learner_file) or \
            (launch.line if exc is outer else None)
        line = start + relative - 1 if start else None
    if not message:
        text = str(exc)
        message = text.split("^")[-1].strip()
    if not message and exc.__cause__ is not None:
        # Triton 3.3 keeps the words in the error it wraps (its own text ends at the caret),
        # where it has any: a bare assert of its own has none
        message = str(exc.__cause__).strip() or f"{type(exc.__cause__).__name__} in Triton's " \
            "compiler, with no words of its own"
    if not message:
        message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    # A nested error (a helper's) carries the helper's own error below the first line.
    message = _cut(message.splitlines()[-1] if message.count("\n") > 6 else message)
    return Compiled(launch.kernel, "rejected", message, line, _hint(message))


def _def_line_of(src: str | None, learner_file: str) -> int | None:
    """The line of ``learner_file`` where the function whose source is ``src`` starts."""
    if not src:
        return None
    first = src.strip().splitlines()[0].strip()
    try:
        with open(learner_file, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for number, text in enumerate(lines, start=1):
        if text.strip() == first:
            return number
    return None


_DIAGNOSTIC = re.compile(r"^(?P<path>[^\n:]+):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$",
                         re.MULTILINE)


def _from_diagnostics(exc, diagnostics: str, launch: Launch, learner_file: str) -> Compiled:
    """An MLIR pass failed: its diagnostics (written to stderr) name the learner's line."""
    learner = os.path.abspath(learner_file)
    for match in _DIAGNOSTIC.finditer(diagnostics):
        if os.path.abspath(match["path"]) == learner and "Failures have been detected" \
                not in match["msg"]:
            # MLIR appends the operation in its own notation: types and layouts, not for people.
            message = _cut(re.split(r':\s+"|\(%', match["msg"])[0].strip())
            return Compiled(launch.kernel, "rejected", message, int(match["line"]),
                            _hint(message))
    text = f"{type(exc).__name__}: {exc}"
    if "ptxas" in text.lower() and "error" not in text.lower():
        return Compiled(launch.kernel, "not-checked", _cut(f"ptxas could not run: {text}"))
    if _DIAGNOSTIC.search(diagnostics) or "PassManager" in text:
        first = _DIAGNOSTIC.search(diagnostics)
        message = _cut(first["msg"] if first else text)
        return Compiled(launch.kernel, "rejected", message, None, _hint(message))
    # a failure of no kind the check knows: it cannot vouch for the kernel either way
    return Compiled(launch.kernel, "unvouched", _cut(f"not compiled: the compiler failed: "
                                                     f"{text}"))


def _hint(message: str) -> str:
    if _DOT_SIZES.search(message):
        return _dot_size_hint(message)
    if _LOOP_TYPE.search(message):
        return _loop_type_hint(message)
    return next((advice for fragment, advice in HINTS if fragment in message), "")


def _cut(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [cut: {len(text) - limit} more]"


#: The start of the name of the file a compile's diagnostics go to, in the compile process's
#: Triton cache folder: where the compiler ends the process (Triton 3.3 aborts on an assertion
#: of LLVM's where later releases raise), the check's own process reads what it said there
STDERR_PREFIX = "learning-compile-stderr-"


class _captured_stderr:
    """Redirect file descriptor 2 (where MLIR writes its diagnostics) to a file, in the Triton
    cache folder the check's process made for this one (so that it outlives a crash)."""

    def __init__(self, folder: str | None = None):
        self._folder = folder  # as the check's process gave it, whatever the module set since

    def __enter__(self):
        sys.stderr.flush()
        folder = self._folder or os.environ.get("TRITON_CACHE_DIR")
        self._file = tempfile.NamedTemporaryFile(prefix=STDERR_PREFIX, dir=folder,
                                                 delete=False) \
            if folder and os.path.isdir(folder) else tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        self._text = None
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self._text = self._file.read().decode("utf-8", errors="replace")
        self._file.close()
        name = getattr(self._file, "name", None)
        if isinstance(name, str):
            with contextlib.suppress(OSError):
                os.unlink(name)
        return False

    def text(self) -> str:
        return self._text or ""


def _sender():
    """``_send`` with what it pickles and packs with taken now, before the learner's
    statements run in this process (they could replace pickle.dumps with one that rewrites a
    rejection as a pass)."""
    dumps, pack, protocol = pickle.dumps, struct.pack, pickle.HIGHEST_PROTOCOL

    def send(channel, *event):
        payload = dumps(event, protocol=protocol)
        channel.write(pack("<Q", len(payload)) + payload)
        channel.flush()

    return send


def _send(channel, *event):
    payload = pickle.dumps(event, protocol=pickle.HIGHEST_PROTOCOL)
    channel.write(struct.pack("<Q", len(payload)) + payload)
    channel.flush()


def run(module_path: str, channel, grader_pid: int = 0) -> int:
    import warnings

    from learning.grader import containment

    warnings.filterwarnings("ignore")
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    why = unavailable()
    module = None
    if why is None:
        _speed_up_cache_key()
        # last on the path, as where the kernels ran (loading.prepare_import): no file beside
        # the learner's module shadows what this process imports later
        append_path(os.path.dirname(os.path.abspath(module_path)))
        if containment.available():  # what follows runs the learner's statements
            containment.lock_down(containment.grader_processes(grader_pid))
    _pin_compiled_mode()  # before the learner's statements: one that sets TRITON_INTERPRET
    _send(channel, "ready", why)
    launches = chosen(pickle.load(sys.stdin.buffer))
    if why is not None:
        return 0
    _hold()  # before any statement of the learner's
    # What runs after the learner's statements is taken now, and the check's code and
    # Triton's are looked at again after each compile: a module that replaced compile_launch
    # (or Triton's compiler) with one that says "ok" gets no verdict from it
    send, compile_one, full_import = _sender(), compile_launch, _full_import
    has_kernel, helper_module, aims = _has_kernel, _helper_module, targets()
    other_reads = _other_reads
    reaches, jit_class = _reaches_past_the_language, _HELD["JITFunction"]
    not_as_made = kernel_source.not_as_made
    from learning.grader import tampering

    untouched = tampering.Snapshot((__name__, kernel_source.__name__, kernel_ops.__name__),
                                   families=(
        "triton", "pickle", "_pickle", "struct", "copyreg", "dataclasses", "importlib", "ast",
        "linecache", "builtins"))  # not inspect: torch replaces its getfile when imported
    # The learner's statements run only now, once the check's other runs have ended: run
    # earlier, a thread of theirs could change files while the check still reads them.
    module = kernels_only(module_path)
    full = False  # the module imported whole, not only its kernels
    for launch in launches:
        home, where = module, module_path  # a kernel kept in another file: that one
        if launch.path == DESCRIPTOR:
            send(channel, "compiled", Compiled(launch.kernel, "not-checked", DESCRIPTOR_CHECK,
                                               key=launch.key))
            continue
        if launch.path == UNKNOWN_KEYWORDS:
            send(channel, "compiled", Compiled(launch.kernel, "refused", unknown_keywords(
                launch), key=launch.key))
            continue
        if launch.path in (NO_FILE, NO_TYPES):
            send(channel, "unvouched", launch.kernel,
                 NO_FILE_CHECK if launch.path == NO_FILE else NO_TYPES_CHECK, launch.key)
            continue
        if launch.path:
            home, where = helper_module(module_path, launch), launch.path
        elif module is None or not has_kernel(module, launch.kernel):
            module, full = full_import(module_path), True
            home = module
        if isinstance(home, str):
            # a kernel that ran and cannot be compiled here: not vouched for (the learner's
            # statements can make an import fail in this process alone)
            send(channel, "unvouched", launch.kernel, f"not compiled: {home}", launch.key)
            module = None if home is module else module
            continue
        if launch.ran_otherwise:  # seen where the kernel ran
            send(channel, "unvouched", launch.kernel, RAN_OTHERWISE.format(
                launch.ran_otherwise), launch.key)
            continue
        if launch.past:  # read where the kernel ran, with that process's globals
            send(channel, "unvouched", launch.kernel, PAST_THE_LANGUAGE.format(launch.past),
                 launch.key)
            continue
        differs = other_reads(home, launch)
        if differs and not full and home is module:
            # a global made by a statement kernels_only leaves out: the whole module says
            whole = full_import(module_path)
            if not isinstance(whole, str):
                module = home = whole
                full = True
                differs = other_reads(home, launch)
        if differs:
            send(channel, "unvouched", launch.kernel, OTHER_READS.format(*differs), launch.key)
            continue
        past = reaches(home, launch, jit_class)
        if past and not full and home is module:
            # a name the kernel calls may be made by a statement kernels_only leaves out (a
            # jit helper imported from a module of theirs): the whole module says
            whole = full_import(module_path)
            if not isinstance(whole, str):
                module = home = whole
                full = True
                past = reaches(home, launch, jit_class)
        if past:
            send(channel, "unvouched", launch.kernel, PAST_THE_LANGUAGE.format(past),
                 launch.key)
            continue
        kernel = _jit_function(getattr(home, launch.kernel.rpartition(".")[2], None))
        other = not_as_made(kernel, jit_class) if kernel is not None else ""
        if other:
            send(channel, "unvouched", launch.kernel, NOT_AS_MADE.format(other), launch.key)
            continue
        for target in aims:
            compiled = compile_one(home, launch, where, target)
            if not full and home is module and compiled.status == "rejected" and \
                    "NameError" in compiled.message:
                # a global the kernel reads, made by a statement kernels_only leaves out (a
                # constant computed by a function, say): not the compiler's rejection
                whole = full_import(module_path)
                if not isinstance(whole, str):
                    module = home = whole
                    full = True
                    compiled = compile_one(home, launch, where, target)
            changed = untouched.changes()
            if changed:  # said in plain words, which no class of the process's pickles
                send(channel, "unvouched", launch.kernel, CHANGED_CHECK.format(
                    ", ".join(changed[:3]) + (f" and {len(changed) - 3} more"
                                              if len(changed) > 3 else "")), launch.key)
                continue
            send(channel, "compiled", compiled)
    send(channel, "finished")
    return 0


#: What a kernel's compile check says when the learner's statements changed the check's own
#: code or Triton's compiler in that process
CHANGED_CHECK = ("not compiled: your module changed the compile check's own code ({}), so "
                 "nothing it said could stand")
#: ... when its process ended, stalled or sent what is not an event once it was ready ({}: how)
UNANSWERED = ("not compiled: the compile check could not vouch for it (your module's "
              "statements run in its process too, and your code can reach it): {}")
#: ... when Triton's compiler ended its process mid-compile with a failed assertion of its own
#: ({0}: Triton's version, {1}: the assertion it printed)
COMPILER_CRASHED = ("not compiled: Triton {0}'s compiler crashed while compiling it ({1}) "
                    "instead of saying what it refuses, so the check could not vouch for it; "
                    "Triton 3.4 and later name the line and the reason for kernels {0}'s "
                    "compiler crashes on")


def compiler_crash(folder: str) -> str:
    """The failed assertion a compile that ended its process left in ``folder`` (what
    ``_captured_stderr`` kept there), or ""."""
    import glob

    for path in sorted(glob.glob(os.path.join(glob.escape(folder), STDERR_PREFIX + "*"))):
        try:
            with open(path, "rb") as handle:
                text = handle.read(1 << 20).decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            at = line.find("Assertion `")
            if at >= 0 and "failed" in line:
                return _cut(line[at:].strip(), 160)
    return ""
#: ... where the module, imported for the compiler, gave another kernel under the name of the
#: one that ran (a decorator or an assignment that looks at which process it runs in, say)
OTHER_CODE = ("not compiled: your module gave the compile check a kernel of this name with "
              "other code than the one that ran, so it could not vouch for the one that ran")
#: ... of a kernel whose source reaches past Triton's language (learning.grader.kernel_source)
PAST_THE_LANGUAGE = ("not compiled: the kernel's source reaches past Triton's language into "
                     "the interpreter's own objects or plain Python ({}), which the GPU "
                     "compiler does not run as the interpreter does, so the check could not "
                     "vouch for what it computed")
#: ... of a kernel the interpreter ran otherwise than the compiler is given it (what the
#: grader saw change as it ran, or run in its stead)
RAN_OTHERWISE = ("not compiled: the interpreter did not run the kernel the compiler is given "
                 "({}), so the check could not vouch for what it computed")
#: ... of a kernel that reads a global (or a helper's source) other than the process that ran it
OTHER_READS = ("not compiled: {0} was {1} where the kernel ran and is {2} where the compile "
               "check compiles it, so the compiled kernel is not the one that ran: what a kernel "
               "reads must not depend on which process reads it")
#: ... of a kernel object (or a helper's) that gives the compiler other than its function
#: (kernel_source.not_as_made)
NOT_AS_MADE = ("not compiled: a @triton.jit object would give the compiler {}, so the kernel "
               "compiled would not be the one that ran: leave the objects @triton.jit makes as "
               "it makes them")
#: ... of a kernel given an argument of a type the compiler takes none of
NO_TYPES_CHECK = ("not compiled: it was given an argument of a type the compile check cannot "
                  "give the GPU compiler (a tensor of unsigned integers, a string, a tuple "
                  "holding one, an object), so it could not vouch for it")
#: ... of a kernel given a host-side tensor descriptor
DESCRIPTOR_CHECK = ("not compiled: it takes a tensor descriptor, which the compile check cannot "
                    "give the GPU compiler yet")
#: ... and of a kernel whose source is in no file
NO_FILE_CHECK = ("not compiled: it ran, but its source is in no file (made with exec, say), "
                 "so the GPU compiler could not be given it; define it in a module")


def unknown_keywords(launch: Launch) -> str:
    """What a launch given keywords Triton's launch does not take is told (UNKNOWN_KEYWORDS)."""
    import difflib

    said = ", ".join(f"{name}={given}" for name, given in launch.options)
    names = [name for name, _ in launch.options]
    meant = [difflib.get_close_matches(name, sorted(launch_option_names() or ()), 1)
             for name in names]
    guess = "; ".join(f"did you mean {m[0]}?" for m in meant if m)
    plural = len(names) > 1
    return (f"the launch passes {said}, which {'are' if plural else 'is'} "
            f"neither {'parameters' if plural else 'a parameter'} of {launch.kernel} nor "
            f"{'options' if plural else 'an option'} of Triton's launch"
            f"{f' ({guess})' if guess else ''}: the interpreter ignores "
            f"{'them' if plural else 'it'}, but on a GPU Triton refuses the launch (KeyError: "
            f"Keyword argument {names[0]} was specified but unrecognised)")


def _other_reads(module, launch: Launch) -> tuple[str, str, str] | None:
    """The first thing the kernel reads that this process finds other than the process that
    ran it did (what, there, here), or None."""
    fn = _jit_function(getattr(module, launch.kernel.rpartition(".")[2], None))
    if fn is None or not launch.reads or launch.code and source_digest(fn.fn) != launch.code:
        return None  # (another kernel under its name: compile_launch says so in its words)
    ours = dict(kernel_source.reads(fn))
    theirs = dict(launch.reads)
    # a name both read, held as two things, says more than a helper one of them never reached
    both = sorted(what for what in set(ours) & set(theirs) if ours[what] != theirs[what])
    either = sorted(set(ours) ^ set(theirs))
    for what in both + either:
        return (what, theirs.get(what, "not read"), ours.get(what, "not read"))
    return None


def _reaches_past_the_language(module, launch: Launch, jit_class,
                               past_the_language=kernel_source.past_the_language) -> str:
    """What in the launched kernel's source (or a @triton.jit function it calls) is not
    Triton's language (learning.grader.kernel_source), or ""."""
    fn = _jit_function(getattr(module, launch.kernel.rpartition(".")[2], None))
    if fn is None:
        return ""
    return past_the_language(fn, jit_class)


def _pin_compiled_mode() -> None:
    """Make @triton.jit give compiled kernels in this process whatever the environment says
    later (a module that sets TRITON_INTERPRET, as notebooks do, made every kernel an
    interpreted one here, which the check could not compile): set on Triton's knobs (3.4 and
    later), which the environment no longer overrides once set."""
    try:
        from triton import knobs

        knobs.runtime.interpret = False
    except (ImportError, AttributeError):
        pass


def _helper_module(module_path: str, launch: Launch):
    """The module of a kernel kept in a file of its own, imported by its name: from the
    learner's folder where it lies there (a module of theirs beside theirs, a package), else
    from the folder above its package (a package elsewhere, its relative imports working); a
    sentence saying why not where it cannot be."""
    import importlib

    name = launch.kernel.rpartition(".")[0]
    if os.path.relpath(launch.path, os.path.dirname(os.path.abspath(module_path))) \
            .startswith(".."):
        top, parts = os.path.dirname(launch.path), [os.path.splitext(
            os.path.basename(launch.path))[0]]
        while os.path.isfile(os.path.join(top, "__init__.py")):
            top, package = os.path.split(top)
            parts.insert(0, package)
        sys.path.insert(0, top)
        name = ".".join(parts)
    try:
        return importlib.import_module(name)
    except BaseException as error:  # noqa: BLE001 - the learner's module, whatever it raises
        return f"{os.path.basename(launch.path)} could not be imported in the compile " \
               f"check's process ({type(error).__name__}: {_cut(str(error), 200)})"


def chosen(launches: list) -> list:
    """The launches worth compiling: one per kernel and argument types (the constexpr values
    of the first launch), since a rejection rarely depends on a block size, and compiling
    every block size would cost a third of a second each."""
    picked = {}
    for launch in launches:
        types = tuple((n, t) for n, t in launch.signature if t != "constexpr")
        # (a launch that read other globals, or was read as past the language, is its own)
        picked.setdefault((launch.kernel, types, launch.past, launch.ran_otherwise,
                           launch.reads), launch)
    return list(picked.values())


def _jit_function(kernel):
    """The @triton.jit function ``kernel`` is or wraps (@triton.autotune and
    @triton.heuristics wrap it, and have arg_names of their own); None when it is neither."""
    if not _HELD:
        _hold()
    jit_function = _HELD["JITFunction"]
    while kernel is not None and not isinstance(kernel, jit_function):
        kernel = getattr(kernel, "fn", None)
    return kernel


def _has_kernel(module, name: str) -> bool:
    return _jit_function(getattr(module, name, None)) is not None


def _full_import(module_path: str):
    from learning.grader.learner_code import import_learner_module

    module, problem = import_learner_module(module_path)
    if problem is not None:
        return f"the module could not be imported in the compile check's process " \
               f"({_cut(problem.message, 200)})"
    return module


_HEAVY = ("torch", "numpy")


def kernels_only(module_path: str):
    """The learner's kernels without the rest of the module: its imports of Triton and math,
    its constants and its decorated functions, run one statement at a time (what fails is left
    out). Importing torch would cost the check seconds, and kernels never need it. None if the
    file cannot be read; a kernel missing from the result sends ``run`` to a full import."""
    import ast
    import types

    try:
        with open(module_path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=module_path)
    except (OSError, SyntaxError, ValueError):
        return None
    name = os.path.splitext(os.path.basename(module_path))[0]
    module = types.ModuleType(name)
    module.__file__ = module_path
    sys.modules[name] = module
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            roots = [alias.name.split(".")[0] for alias in node.names] \
                if isinstance(node, ast.Import) else [(node.module or "").split(".")[0]]
            if any(root in _HEAVY for root in roots) or getattr(node, "level", 0):
                continue
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            if not node.decorator_list:
                continue
        elif not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        # compiled as an import compiles it: without this module's own __future__ flags
        code = compile(ast.Module(body=[node], type_ignores=[]), module_path, "exec",
                       dont_inherit=True)
        try:
            exec(code, module.__dict__)
        except Exception:  # noqa: BLE001 - a statement that needs what was left out
            continue
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m learning.grader.gpu_compile")
    parser.add_argument("--module-path", required=True)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--grader-pid", type=int, default=0)
    options = parser.parse_args(argv)
    sys.dont_write_bytecode = True
    from learning.grader import containment
    from learning.grader.handover import inherited_fd

    def compile_all() -> int:
        channel = os.fdopen(inherited_fd(options.fd), "wb", buffering=0)
        return run(options.module_path, channel, options.grader_pid)

    # the learner's module is imported here too: whatever it starts stays below a guard
    return containment.run_guarded(compile_all)


if __name__ == "__main__":
    # Run the module's own copy, so that what it pickles is learning.grader.gpu_compile.Compiled.
    from learning.grader import gpu_compile

    sys.exit(gpu_compile.main())
