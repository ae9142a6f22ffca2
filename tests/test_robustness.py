"""The grader against everything a learner's code can do wrong: each test feeds it the bad code
and asserts the verdict, the message the learner reads, and that it ended in bounded time."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from learning.grader import (
    childproc,
    compare,
    gpu_compile,
    registry,
    runner,
    sanitizer,
    stopped,
    worker_run,
)
from learning.grader import mode as kernel_mode
from learning.grader.returned import Returned
from learning.grader.worker_events import CaseKey
from tests.helpers import (
    COURSE_ROOT,
    compiler_names_every_rejection,
    course_pythonpath,
    grade_text,
    solution_text,
    triton_version,
)

SOFTMAX = registry.find("softmax")
# Bounds on the wall time of one graded check, generous for a loaded 2-core machine: what they
# prove is that nothing waits for a limit it should not (120 s start-up, 60 s per kernel case).
PYTHON_PART_SECONDS = 60
KERNEL_PART_SECONDS = 90
WORKED = "[0.090030573, 0.244728471, 0.665240956]"


def with_code(body: str) -> str:
    """The reference solution, with ``body`` appended (later definitions win)."""
    return f"{solution_text('softmax')}\n\n{body}\n"


def grade(tmp_path, text: str, parts=("python",), **options):
    start = time.monotonic()
    result = grade_text(tmp_path, "softmax", text, list(parts), **options)
    return result, time.monotonic() - start


def rendered(result) -> str:
    """What the learner reads for ``result``, as plain text."""
    import io

    from rich.console import Console

    from learning.grader import report

    buffer = io.StringIO()
    report.render(Console(file=buffer, width=200, no_color=True, highlight=False), result)
    return buffer.getvalue()


def statuses(part_result) -> list[str]:
    return [c.verdict.status for c in part_result.cases]


# ---------------------------------------------------------------------------------------------
# 1. Isolation: loops, crashes and exits end in a verdict, never in a hung or dead grader.


@pytest.mark.interpreter
def test_endless_loop_inside_a_kernel_times_out_and_the_rest_is_not_run(tmp_path):
    text = solution_text("softmax").replace(
        "    row = tl.program_id(0)\n", "    row = tl.program_id(0)\n    while True:\n"
        "        pass\n")
    result, seconds = grade(tmp_path, text, ["triton"], case_seconds=2)
    (part,) = result.parts
    first = part.cases[0].verdict
    assert first.status == "timed-out"
    assert first.summary.startswith("did not finish within 2 s in case triton/width 3")
    assert not first.causes
    assert first.seconds == 2  # what it ran for, in --json too: not a case never run
    assert set(statuses(part)[1:]) <= {"not-run", "skipped"}
    assert "not run" in part.cases[1].verdict.summary
    assert not result.ok and seconds < KERNEL_PART_SECONDS


@pytest.mark.parametrize("signal_name, cause", [
    # a Python part has no loads or stores: its memory fault is native code's, or sent
    ("SIGSEGV", "a memory fault in native code the function called"),
    ("SIGKILL", "killed from outside: most often the system ran out of memory"),
])
def test_a_process_killed_by_a_signal_is_reported_with_the_signal_and_its_likely_cause(
        tmp_path, signal_name, cause):
    number = int(getattr(signal, signal_name))
    result, seconds = grade(tmp_path, with_code(
        "import os, signal\n\ndef softmax_python(values):\n"
        f"    os.kill(os.getpid(), signal.{signal_name})"))
    (part,) = result.parts
    verdict = part.cases[0].verdict
    assert verdict.status == "crashed"
    assert verdict.summary.startswith(f"the process crashed (signal {number}, {signal_name}) in "
                                      "case python/worked example: ")
    assert cause in verdict.summary
    assert set(statuses(part)[1:]) == {"not-run"}
    assert not result.ok and seconds < PYTHON_PART_SECONDS


# raise SystemExit and exit() raise the SystemExit sys.exit(0) raises: the quick run takes
# sys.exit(0) and os._exit(0), the other two are exhaustive
@pytest.mark.parametrize("call, status, message", [
    ("sys.exit(0)", "error", "the code called sys.exit()"),
    pytest.param("raise SystemExit", "error", "the code called sys.exit()",
                 marks=pytest.mark.exhaustive),
    pytest.param("exit()", "error", "the code called sys.exit()", marks=pytest.mark.exhaustive),
    ("os._exit(0)", "crashed", "the process exited (status 0) in case python/worked example"),
])
def test_any_exit_from_a_call_is_a_failure_never_a_pass(tmp_path, call, status, message):
    result, seconds = grade(tmp_path, with_code(
        f"import os, sys\n\ndef softmax_python(values):\n    {call}"))
    (part,) = result.parts
    verdict = part.cases[0].verdict
    assert verdict.status == status and message in verdict.summary
    assert verdict.bug is compare.COMMON_BUGS["exited"]
    assert part.status == "failed" and not result.ok
    assert seconds < PYTHON_PART_SECONDS


@pytest.mark.parametrize("call, message", [
    ("sys.exit(0)", "softmax.py ended the program while being imported (SystemExit: 0)"),
    ("os._exit(0)", "softmax.py ended the program while being imported (exit status 0)"),
])
def test_an_exit_at_import_is_a_failure_and_every_case_is_not_run(tmp_path, call, message):
    result, seconds = grade(tmp_path, with_code(f"import os, sys\n{call}"), ["python", "triton"])
    assert result.import_problem is not None
    assert result.import_problem.message.startswith(message)
    assert "do not call sys.exit" in result.import_problem.message or \
        "keep it inside functions" in result.import_problem.message
    for part in result.parts:
        # a case that cannot run here (GPU-only, in the interpreter) is skipped, not counted
        cannot = {c.name for c in part.part.cases if c.gpu_only} \
            if result.mode is not None and result.mode.interpret else set()
        assert {c.name for c in part.cases if c.verdict.status == "skipped"} == cannot
        assert {c.verdict.status for c in part.cases if c.name not in cannot} == {"not-run"}
        assert part.cases[0].verdict.summary == "the module could not be imported"
    assert not result.ok and seconds < PYTHON_PART_SECONDS


def test_a_module_that_hangs_at_import_times_out_on_the_import_limit(tmp_path):
    result, seconds = grade(tmp_path, with_code("while True:\n    pass"), import_seconds=2)
    assert result.import_problem.kind == "timed-out"
    assert result.import_problem.message.startswith(
        "importing softmax.py timed out after 2 s: code at the top level of the module runs on "
        "import")
    assert set(statuses(result.parts[0])) == {"not-run"}
    assert not result.ok and seconds < PYTHON_PART_SECONDS


def test_the_import_limit_follows_the_case_limit_with_a_floor():
    assert worker_run.import_limit(1) == worker_run.IMPORT_FLOOR_SECONDS == 30
    assert worker_run.import_limit(10) == 30
    assert worker_run.import_limit(200) == 200


# ---------------------------------------------------------------------------------------------
# 2. Import problems name what is missing; nothing runs.


@pytest.mark.parametrize("line, message", [
    ("import nonexistent_module", "importing softmax.py failed: no module named "
     "'nonexistent_module': is it installed, and is the name spelt right?"),
    ("from math import nothing", "importing softmax.py failed: module math has no name "
     "'nothing': check the spelling"),
])
def test_an_import_error_names_the_missing_module_or_name(tmp_path, line, message):
    result, seconds = grade(tmp_path, f"{line}\n{solution_text('softmax')}")
    problem = result.import_problem
    assert problem.kind == "import" and problem.message.startswith(message)
    assert 'softmax.py", line 1' in problem.traceback
    assert set(statuses(result.parts[0])) == {"not-run"}
    assert not result.ok and seconds < PYTHON_PART_SECONDS


# ---------------------------------------------------------------------------------------------
# 3. The interpreter's bounds checking degrades gracefully.


def test_sanitizer_install_returns_false_when_the_interpreter_lacks_its_hooks(monkeypatch):
    from triton.runtime import interpreter

    monkeypatch.setattr(sanitizer, "_installed", False)
    monkeypatch.delattr(interpreter.InterpreterBuilder, "create_masked_store")
    assert sanitizer.install() is False


def test_sanitizer_does_not_check_a_launch_whose_tensors_it_cannot_measure():
    class Pointer:  # a stand-in with an address but no storage, as some interpreters pass
        def data_ptr(self):
            return 64

    sanitizer._record_ranges([Pointer()])
    try:
        assert sanitizer._state.ranges is None
        sanitizer._check("load", None, None)  # returns before looking at the addresses
    finally:
        sanitizer._state.ranges = []


# ---------------------------------------------------------------------------------------------
# 4. Mistakes only a GPU compiler sees, caught without a GPU.

# Triton 3.3's compiler ends its process on these kernels (an assertion of LLVM's) where 3.4 and
# later reject them with words and a line; what the check says then is proven by
# test_a_compiler_that_crashes_on_a_kernel_is_said_to_be_tritons
named_rejections = pytest.mark.skipif(
    not compiler_names_every_rejection(),
    reason="Triton 3.3's compiler crashes on this kernel instead of naming the rejection")

_STORE = "    tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)\n"


def _kernel_line(text: str, fragment: str) -> int:
    """The first line holding ``fragment`` inside softmax_kernel."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines, 1) if line.startswith("def softmax_kernel"))
    return next(i for i, line in enumerate(lines, 1) if i > start and fragment in line)


@pytest.mark.parametrize("edit, fragment, message, cause", [
    (lambda t: t.replace("    row = tl.program_id(0)\n", "    row = tl.program_id(0)\n"
                         "    for step in range(0, 2):\n        if step > 0:\n"
                         "            break\n"),
     "            break", ("unsupported AST node type: Break",), "cannot `break`"),
    pytest.param(lambda t: t.replace("    output = numerator / denominator\n",
                                      "    output = numerator / denominator\n"
                                      "    if output > 0.5:\n        output = output * 1.0\n"),
                 "    if output > 0.5:", ("Boolean value of Tensor",),
                 "an `if` on a block of values", marks=named_rejections),
    # (Triton 3.5 says "type of return operand ... doesn't match function result type")
    pytest.param(lambda t: t.replace(_STORE, _STORE + "    return output\n"),
                 "    return output", ("tt.return", "type of return operand"),
                 "a kernel cannot return a value", marks=named_rejections),
], ids=["break", "if-on-a-block", "returns-a-value"])
@pytest.mark.compile_check
@pytest.mark.interpreter
def test_the_gpu_compiler_rejects_what_the_interpreter_accepts(tmp_path, edit, fragment,
                                                                message, cause):
    text = edit(solution_text("softmax"))
    assert text != solution_text("softmax")
    result, seconds = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.passed == part.graded  # the interpreter runs it fine
    assert part.status == "failed" and not result.ok
    check = part.compile_check
    assert check.ran and len(check.rejected) == 1
    (rejected,) = check.rejected
    assert rejected.kernel == "softmax_kernel"
    assert any(words in rejected.message for words in message), rejected.message
    assert rejected.line == _kernel_line(text, fragment)
    assert cause in rejected.hint
    assert seconds < KERNEL_PART_SECONDS
    shown = rendered(result)
    assert f"the compiler rejected softmax_kernel, line {rejected.line}: " in shown
    assert f"Grade: Triton {part.passed}/{part.graded} (rejected by the GPU compiler)" in shown


# What Triton 3.3.1's compiler printed before it ended its process on softmax's kernel with an
# `if` on a block (the start of it, as captured on CPU, 2026-12-07)
TRITON_33_ABORT = (
    "python: /source/llvm-project/llvm/include/llvm/Support/Casting.h:566: decltype(auto) "
    "llvm::cast(const From &) [To = mlir::detail::TypedValue<mlir::IntegerType>, From = "
    "mlir::Value]: Assertion `isa<To>(Val) && \"cast<Ty>() argument of incompatible type!\"' "
    "failed.\n\"builtin.module\"() ({\n")


def test_a_compilers_failed_assertion_is_read_from_what_the_compile_left(tmp_path):
    assert gpu_compile.compiler_crash(str(tmp_path)) == ""
    kept = tmp_path / f"{gpu_compile.STDERR_PREFIX}1"
    kept.write_text(TRITON_33_ABORT, encoding="utf-8")
    said = gpu_compile.compiler_crash(str(tmp_path))
    assert said.startswith("Assertion `isa<To>(Val) &&") and said.endswith("failed."), said
    kept.write_text("error: a message, not an assertion that failed\n", encoding="utf-8")
    assert gpu_compile.compiler_crash(str(tmp_path)) == ""


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.skipif(compiler_names_every_rejection(),
                    reason="Triton 3.4 and later reject this kernel with a message and the line")
def test_a_compiler_that_crashes_on_a_kernel_is_said_to_be_tritons(tmp_path):
    text = solution_text("softmax").replace(*_IF_ON_A_BLOCK)
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.status == "failed", rendered(result)
    (unvouched,) = part.compile_check.rejected
    assert unvouched.status == "unvouched" and "compiler crashed while compiling it " \
        "(Assertion `" in unvouched.message and "your module's statements" not in \
        unvouched.message, unvouched.message


_IF_ON_A_BLOCK = ("    output = numerator / denominator\n",
                  "    output = numerator / denominator\n    if output > 0.5:\n"
                  "        output = output * 1.0\n")


@named_rejections
@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.parametrize("where", ["mykernels", "kernels.softmax"])
def test_a_kernel_kept_in_a_module_of_the_learners_own_is_compiled_too(tmp_path, where):
    # the kernel the GPU rejects lives in a file of the learner's beside softmax.py, or in a
    # package there, which softmax.py imports it from
    kernel = solution_text("softmax").replace(*_IF_ON_A_BLOCK)
    path = tmp_path / (where.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kernel, encoding="utf-8")
    text = solution_text("softmax").split("@triton.jit")[0] + \
        f"from {where} import softmax_kernel, softmax_triton  # noqa\n"
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.passed == part.graded and part.status == "failed", rendered(result)
    (rejected,) = part.compile_check.rejected
    assert rejected.kernel == f"{where}.softmax_kernel"
    assert "Boolean value of Tensor" in rejected.message
    line = kernel.splitlines().index("    if output > 0.5:") + 1
    assert rejected.line == line
    assert f"the compiler rejected {where}.softmax_kernel, line {line}: " in rendered(result)


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.parametrize("mistake", [False, pytest.param(True, marks=named_rejections)],
                         ids=["right", "if-on-a-block"])
def test_a_kernel_in_a_package_outside_the_learners_folder_is_compiled(tmp_path, mistake):
    # a package of theirs elsewhere, put on sys.path by their module, importing relatively
    kernel = solution_text("softmax")
    if mistake:
        kernel = kernel.replace(*_IF_ON_A_BLOCK)
    package = tmp_path.parent / f"{tmp_path.name}-lib" / "mylib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "consts.py").write_text("WIDEST = 1 << 16\n", encoding="utf-8")
    (package / "kern.py").write_text("from .consts import WIDEST  # noqa\n" + kernel,
                                     encoding="utf-8")
    text = solution_text("softmax").split("@triton.jit")[0] + \
        f"import sys\nsys.path.insert(0, {str(package.parent)!r})\n" \
        "from mylib.kern import softmax_kernel, softmax_triton  # noqa\n"
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.passed == part.graded, rendered(result)
    assert {c.kernel for c in part.compile_check.compiled} == {"kern.softmax_kernel"}
    statuses = {c.status for c in part.compile_check.compiled}
    assert statuses == ({"rejected"} if mistake else {"ok"}), rendered(result)


@named_rejections
@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_rejection_inside_a_jit_helper_names_the_helpers_line_and_words(tmp_path):
    helper = ("@triton.jit\ndef _clipped(v):\n    if v > 0.5:\n        v = v * 1.0\n"
              "    return v\n\n\n")
    text = solution_text("softmax").replace("@triton.jit\ndef softmax_kernel(",
                                            helper + "@triton.jit\ndef softmax_kernel(", 1)
    text = text.replace(_IF_ON_A_BLOCK[0], _IF_ON_A_BLOCK[0] + "    output = _clipped(output)\n")
    result, _ = grade(tmp_path, text, ["triton"])
    (rejected,) = result.parts[0].compile_check.rejected
    assert "Boolean value of Tensor" in rejected.message, rejected.message
    assert rejected.line == text.splitlines().index("    if v > 0.5:") + 1
    assert "an `if` on a block of values" in rejected.hint


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_module_that_gives_the_compile_check_another_kernel_passes_nothing(tmp_path):
    # a decorator that looks at which process it runs in: a right kernel for the compiler,
    # the one rejected on a GPU for the cases
    text = solution_text("softmax").replace(*_IF_ON_A_BLOCK)
    honest = solution_text("softmax").split("@triton.jit")[1].split("\n\n\n")[0]
    swap = ("import sys as _sys\n\n"
            "@triton.jit" + honest.replace("def softmax_kernel(", "def _shown(", 1) + "\n\n\n"
            "_compiling = 'gpu_compile' in _sys.argv[0]\n\n\n"
            "@(lambda f: _shown if _compiling else triton.jit(f))\n")
    text = text.replace("@triton.jit\ndef softmax_kernel(", swap + "def softmax_kernel(", 1)
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.passed == part.graded and part.status == "failed", rendered(result)
    (unvouched,) = part.compile_check.rejected
    assert unvouched.status == "unvouched" and "other code than the one that ran" in \
        unvouched.message, rendered(result)


_INTERPRETING = "_INTERPRETING = __import__('os').environ.get('TRITON_INTERPRET') == '1'\n\n\n"
_FILL = "def _fill(block):\n    block.handle.data[...] = 0.0\n    return block\n\n\n"
_HOOK = ("class _Hook:\n    def __add__(self, block):\n        return _fill(block)\n\n"
         "    __getitem__ = __add__\n\n    @property\n    def filled(self):\n"
         "        return _fill(self.block)\n\n\n" + _FILL + "_HOOK = _Hook()\n\n\n")


# Python only the interpreter runs, in a branch the GPU compiler evaluates while compiling and
# drops: numpy computing the answer into the loaded block, or a plain function of the module's
INTERPRETER_ONLY_BRANCHES = {
    "hasattr on the block's handle": (
        "    x = tl.load(",
        "    if hasattr(row.handle, 'data'):\n"
        "        values = row.handle.data\n"
        "        values[...] = values * 0 + 1.0 / values.size\n"),
    "a plain function under a module constant": (
        "@triton.jit\ndef softmax_kernel(",
        "_INTERPRETING = __import__('os').environ.get('TRITON_INTERPRET') == '1'\n\n\n"
        "def _into_the_block(block):\n    block.handle.data[...] = 0.0\n\n\n"),
    "a functools.partial under a module constant": (
        "@triton.jit\ndef softmax_kernel(",
        "_INTERPRETING = __import__('os').environ.get('TRITON_INTERPRET') == '1'\n\n\n"
        "def _fill(value, block):\n    block.handle.data[...] = value\n\n\n"
        "_into_the_block = __import__('functools').partial(_fill, 0.0)\n\n\n"),
    # called through an expression, not a name: a tuple's item, a namespace object's method
    "a tuple's item under a module constant": (
        "@triton.jit\ndef softmax_kernel(",
        "_INTERPRETING = __import__('os').environ.get('TRITON_INTERPRET') == '1'\n\n\n"
        "def _fill(block):\n    block.handle.data[...] = 0.0\n\n\n"
        "_HELPERS = (_fill,)\n\n\n", "_HELPERS[0]({x})"),
    "a namespace's method under a module constant": (
        "@triton.jit\ndef softmax_kernel(",
        "_INTERPRETING = __import__('os').environ.get('TRITON_INTERPRET') == '1'\n\n\n"
        "class _Helpers:\n    @staticmethod\n    def fill(block):\n"
        "        block.handle.data[...] = 0.0\n\n\n", "_Helpers.fill({x})"),
    # no call at all: Python run by an operator, an index or a property of an object
    "an operator on an object under a module constant": (
        "@triton.jit\ndef softmax_kernel(", _INTERPRETING + _HOOK, "{x} = _HOOK + {x}"),
    "an index into an object under a module constant": (
        "@triton.jit\ndef softmax_kernel(", _INTERPRETING + _HOOK, "{x} = _HOOK[{x}]"),
    "a property of an object under a module constant": (
        "@triton.jit\ndef softmax_kernel(", _INTERPRETING + _HOOK,
        "_HOOK.block = {x}\n        {x} = _HOOK.filled"),
    "a constexpr holding a function under a module constant": (
        "@triton.jit\ndef softmax_kernel(", _INTERPRETING + _FILL +
        "_FILLED = tl.constexpr(_fill)\n\n\n", "{x} = _FILLED({x})"),
    "a function that says it is Triton's under a module constant": (
        "@triton.jit\ndef softmax_kernel(", _INTERPRETING + _FILL +
        "_fill.__module__ = 'triton.language.standard'\n_fill.__triton_builtin__ = True\n\n\n",
        "{x} = _fill({x})"),
    # one thing where the kernel runs, another where it compiles: read in both processes
    "an object where it runs and None where it compiles under a module constant": (
        "@triton.jit\ndef softmax_kernel(", _INTERPRETING + _HOOK.replace(
            "_HOOK = _Hook()", "_HOOK = _Hook() if _INTERPRETING else None"),
        "{x} = _HOOK + {x}"),
    # Triton 3.4 on: plain Python the compiler runs on constants, given the block itself
    "a constexpr_function given the block under a module constant": (
        "@triton.jit\ndef softmax_kernel(", _INTERPRETING + "@triton.constexpr_function\n" +
        _FILL, "{x} = _fill({x})"),
}


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.parametrize("route", [*INTERPRETER_ONLY_BRANCHES, "an argument named input"])
def test_a_kernel_reaching_past_tritons_language_is_not_vouched_for(tmp_path, route):
    text = solution_text("softmax")
    if route == "an argument named input":  # a name that is also a builtin: its own
        text = text.replace("input_ptr", "input")
    elif route.endswith("under a module constant"):
        if "constexpr_function" in route and not hasattr(__import__("triton"),
                                                         "constexpr_function"):
            pytest.skip("Triton before 3.4 has no triton.constexpr_function")
        anchor, added, *statement = INTERPRETER_ONLY_BRANCHES[route]
        text = text.replace(anchor, added + anchor, 1)
        load = next(line for line in text.splitlines() if " = tl.load(" in line)
        name = load.split("=")[0].strip()
        done = (statement or ["_into_the_block({x})"])[0].format(x=name)
        text = text.replace(load, load + f"\n    if _INTERPRETING:\n        {done}", 1)
    else:
        load = next(line for line in text.splitlines() if " = tl.load(" in line)
        name = load.split("=")[0].strip()
        added = INTERPRETER_ONLY_BRANCHES[route][1].replace("row", name)
        text = text.replace(load, load + "\n" + added.rstrip("\n"), 1)
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    if route == "an argument named input":
        assert part.status == "passed", rendered(result)
        return
    assert part.status == "failed", rendered(result)
    # (Triton's compiler may refuse such a call too, where it sees it: a second rejection)
    unvouched = next(r for r in part.compile_check.rejected
                     if "reaches past Triton's language" in r.message)
    assert unvouched.status == "unvouched", rendered(result)
    if route == "hasattr on the block's handle":  # the line the learner wrote it on
        line = next(n for n, text_line in enumerate(text.splitlines(), 1)
                    if "hasattr(" in text_line)
        assert f"at line {line})" in unvouched.message, unvouched.message


# What a kernel may name: data globals (a tl.constexpr, a dtype, math.pi) and a @triton.jit
# helper
HONEST_GLOBALS = (
    "import math\n\n"
    "_ONE = tl.constexpr(1.0)\n_DTYPE = tl.float32\n_TWO = tl.constexpr(2)\n\n\n"
    "@triton.jit\ndef _shifted(v, m):\n    return v - m\n\n\n")


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_kernel_naming_data_globals_and_tritons_functions_is_vouched_for(tmp_path):
    text = solution_text("softmax").replace("@triton.jit\ndef softmax_kernel(",
                                            HONEST_GLOBALS + "@triton.jit\ndef softmax_kernel(", 1)
    load = next(line for line in text.splitlines() if " = tl.load(" in line)
    name = load.split("=")[0].strip()
    used = (f"\n    {name} = _shifted({name}.to(_DTYPE) * _ONE * (_TWO - 1),"
            f" 0.0 * math.pi)")
    text = text.replace(load, load + used, 1)
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    (part,) = result.parts
    assert part.status == "passed", rendered(result)
    assert {c.status for c in part.compile_check.compiled} == {"ok"}, rendered(result)


COMPILE_ROUTES = sorted(path.stem for path in (Path(__file__).parent / "compile_routes").glob(
    "*.py"))


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.parametrize("route", COMPILE_ROUTES)
def test_a_kernel_compiled_other_than_it_ran_is_not_vouched_for(tmp_path, route):
    # (tests/compile_routes/README.md: each passed every case, the compiled kernel wrong)
    if route == "globals_replaced_on_the_jit_object" and not hasattr(
            __import__("triton.runtime.jit").runtime.jit.JITFunction, "get_capture_scope"):
        pytest.skip("Triton before 3.5 looks a kernel's names up in its function's globals, "
                    "which this route leaves alone")
    text = (Path(__file__).parent / "compile_routes" / f"{route}.py").read_text(encoding="utf-8")
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    (part,) = result.parts
    assert part.status == "failed", rendered(result)
    assert part.compile_check is not None and any(
        c.status == "unvouched" for c in part.compile_check.rejected), rendered(result)
    if route == "helper_default_from_a_global_changed_after_its_def":
        # what the grader saw as the kernel ran is said as such, not as a reach past the
        # language: the kernel's source reaches nowhere
        (said,) = [c.message for c in part.compile_check.rejected if c.status == "unvouched"]
        assert "the interpreter did not run the kernel the compiler is given" in said, said
        assert "reaches past" not in said, said


# A module statement that, in the compile check's process, compiles an honest softmax_kernel
# (kept in a file beside the module) and files it in Triton's cache under the key of the
# module's own kernel, which the compiler rejects: Triton then finds that kernel compiled.
# (Made by exec in an assignment: that process runs assignments and decorated functions only.)
_PLANTED_IN_THE_CACHE = '''

_PLANT = """
def _plant(kernel):
    import hashlib
    import os
    import shutil
    import sys

    folder = os.environ.get("TRITON_CACHE_DIR")
    if os.environ.get("TRITON_INTERPRET") == "1" or not folder:
        return 0
    frame, launches = sys._getframe(1), None
    while frame is not None and launches is None:
        launches, frame = frame.f_locals.get("launches"), frame.f_back
    import planted_softmax
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import get_cache_invalidating_env_vars, get_cache_key
    from triton.compiler.compiler import make_backend
    from triton.runtime.cache import get_cache_manager

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    for launch in launches or ():
        signature, constants = dict(launch.signature), dict(launch.constexprs)
        good = triton.compile(ASTSource(planted_softmax.softmax_kernel, signature, constants),
                              target=target, options=dict(launch.options))
        source = ASTSource(kernel, signature, constants)
        options = backend.parse_options(dict(dict(launch.options), **source.parse_options()))
        key = get_cache_key(source, backend, options, env_vars=get_cache_invalidating_env_vars())
        bad = get_cache_manager(hashlib.sha256(key.encode()).hexdigest()).cache_dir
        os.makedirs(bad, exist_ok=True)
        shutil.copy(os.path.join(get_cache_manager(good.hash).cache_dir,
                                 "__grp__softmax_kernel.json"), bad)
    return len(launches or ())
"""
_planted = exec(_PLANT) or _plant(softmax_kernel)
'''


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_kernel_planted_in_tritons_cache_does_not_stand_for_the_one_that_ran(tmp_path):
    honest = solution_text("softmax")
    (tmp_path / "planted_softmax.py").write_text(honest, encoding="utf-8")
    store = "    tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)\n"
    assert honest.count(store) == 1
    # an `if` on a block: the interpreter takes it as true, the GPU compiler refuses it
    text = honest.replace(store, "    if mask:\n    " + store) + _PLANTED_IN_THE_CACHE
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    (part,) = result.parts
    assert part.status == "failed", rendered(result)
    assert not any(c.status == "ok" for c in part.compile_check.compiled), rendered(result)
    assert any("Boolean value of Tensor" in c.message for c in part.compile_check.rejected) \
        or triton_version() < (3, 4), rendered(result)


# A constexpr argument the launcher gives: data, a dtype or a @triton.jit function reach the
# compiler as they are; an object (or a number of a class of the module's own, whose operators
# are its code) runs Python on the block in the interpreter and is no constant a compiler takes
CONSTEXPR_ARGUMENTS = {
    "an object": ("_HOOK", False),
    "a number of the module's own class": ("_Sneaky(0)", False),
    "a @triton.jit function": ("_unchanged", True),
    # (Triton 3.3 indexes no constexpr tuple in a kernel)
    "a tuple of numbers": ("(1, 2)", True),
}


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.parametrize("given", CONSTEXPR_ARGUMENTS)
def test_a_constexpr_argument_is_compiled_as_given_or_not_vouched_for(tmp_path, given):
    value, honest = CONSTEXPR_ARGUMENTS[given]
    if given == "a tuple of numbers" and triton_version() < (3, 4):
        pytest.skip("Triton 3.3 indexes no constexpr tuple in a kernel")
    helpers = (_FILL + _HOOK + "class _Sneaky(int):\n    def __add__(self, block):\n"
               "        return _fill(block)\n\n\n"
               "@triton.jit\ndef _unchanged(v):\n    return v\n\n\n")
    text = solution_text("softmax").replace("@triton.jit\ndef softmax_kernel(",
                                            helpers + "@triton.jit\ndef softmax_kernel(", 1)
    text = text.replace("    BLOCK: tl.constexpr,",
                        "    BLOCK: tl.constexpr,\n    H: tl.constexpr,", 1)
    use = {"a @triton.jit function": "x = H(x)", "a tuple of numbers": "x = x * (H[1] - H[0])"}
    text = text.replace("    x = x.to(tl.float32)\n", "    x = x.to(tl.float32)\n    " + use.get(
        given, "x = H + x") + "\n", 1)
    text = text.replace("BLOCK=block)", f"BLOCK=block, H={value})", 1)
    assert text.count("H=") == 1 and "H + x" in text or given in use
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    (part,) = result.parts
    if honest:
        assert part.status == "passed", rendered(result)
        return
    assert part.status == "failed", rendered(result)
    (unvouched,) = part.compile_check.rejected
    assert unvouched.status == "unvouched" and "an object" in unvouched.message, \
        rendered(result)


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_tritons_functions_the_interpreter_stands_in_for_are_vouched_for(tmp_path):
    # as a launch runs, tl.multiple_of is the interpreter's functools.partial and
    # tl.static_range its own range: Triton's still, not a global changed under the kernel
    text = solution_text("softmax").replace(
        "    x = x.to(tl.float32)\n", "    x = x.to(tl.float32)\n    for _ in tl.static_range(2):\n"
        "        x = x + 0.0\n    x = tl.multiple_of(x, 1) if False else x\n", 1)
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    (part,) = result.parts
    assert part.status == "passed", rendered(result)


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_jit_function_of_a_helper_module_given_as_a_constexpr_is_compiled(tmp_path):
    # found in the compile check's process by its module, not only at the kernel's top level
    (tmp_path / "softmax_helpers.py").write_text(
        "import triton\nimport triton.language as tl  # noqa: F401 (the interpreter looks)\n\n\n"
        "@triton.jit\ndef unchanged(v):\n    return v\n", encoding="utf-8")
    text = "import softmax_helpers as H\n" + solution_text("softmax")
    text = text.replace("    BLOCK: tl.constexpr,",
                        "    BLOCK: tl.constexpr,\n    OP: tl.constexpr,", 1)
    text = text.replace("    x = x.to(tl.float32)\n", "    x = x.to(tl.float32)\n    x = OP(x)\n",
                        1)
    text = text.replace("BLOCK=block)", "BLOCK=block, OP=H.unchanged)", 1)
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    (part,) = result.parts
    assert part.status == "passed", rendered(result)


# torch's answer handed to a kernel in disguise (doubled and shifted), which undoes it: no value
# a kernel is given is the answer, and the kernel does run; but it computes no exponential
DISGUISED_ANSWER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(input_ptr + row * input_row_stride + cols, mask=cols < n_cols)
    tl.store(output_ptr + row * output_row_stride + cols, (v - 3.0) * 0.5, mask=cols < n_cols)


def softmax_triton(x):
    disguised = (torch.softmax(x.float(), dim=-1) * 2.0 + 3.0).contiguous()
    output = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    softmax_kernel[(x.shape[0],)](output, disguised, output.stride(0), disguised.stride(0),
                                  x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return output
'''


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_kernels_that_compile_into_none_of_what_the_answer_takes_are_not_vouched_for(tmp_path):
    result, _ = grade(tmp_path, DISGUISED_ANSWER, ["triton"])
    (part,) = result.parts
    assert part.status == "failed", rendered(result)
    (unvouched,) = part.compile_check.rejected
    assert unvouched.status == "unvouched", rendered(result)
    assert "never computes an exponential (tl.exp or tl.exp2)" in unvouched.message
    assert "a reduction" in unvouched.message  # the sum of each row, also missing


def test_the_kinds_of_operation_are_read_from_the_compilers_output():
    from learning.grader import kernel_ops

    ttir = ('%1 = math.exp2 %0 : tensor<32xf32>\n%2 = "tt.reduce"(%1) ({\n'
            '  %3 = arith.addf %a, %b : f32\n}) {axis = 0 : i32}\n'
            '%4 = tt.extern_elementwise %2 {libname = "", symbol = "__nv_rsqrtf"}\n')
    found = kernel_ops.kinds_in(ttir)
    assert found == {"exp", "sum", "add", "sqrt"}, found
    assert kernel_ops.missing((("exp", "sum"),), found) == ()
    assert kernel_ops.missing((("dot",), ("mul", "add")), found) == ("dot",)  # the first nearest
    assert kernel_ops.kinds_in("tt.load\ntt.store\narith.subf") == frozenset()
    # an atomic read-modify-write adds (or takes the maximum) across programs: a reduction
    atomics = ("%1 = tt.atomic_rmw fadd, acq_rel, gpu, %0, %x, %m : (tensor<16x!tt.ptr<f32>>)\n"
               "%2 = tt.atomic_rmw max, acq_rel, gpu, %0, %y, %m : (tensor<16x!tt.ptr<i32>>)")
    assert kernel_ops.kinds_in(atomics) == {"add", "sum", "max"}


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.parametrize("how", [
    pytest.param("TRITON_INTERPRET set by the module", marks=pytest.mark.skipif(
        triton_version() < (3, 4), reason="Triton 3.3 has no knobs to keep the compile check's "
        "process compiling once a module sets TRITON_INTERPRET: its kernels are not vouched for")),
    "a kernel made in a function"])
def test_the_compile_check_compiles_or_refuses_what_it_cannot_find(tmp_path, how):
    text = solution_text("softmax")
    if how == "a kernel made in a function":
        head, kernel = text.split("@triton.jit\n", 1)
        body, rest = kernel.split("\n\n\n", 1)
        indented = "\n".join("    " + line if line else line for line in body.splitlines())
        text = (head + "def _made():\n    @triton.jit\n" + indented +
                "\n    return softmax_kernel\n\n\n" + rest.replace("softmax_kernel[", "_made()["))
        assert "_made()[" in text
    else:  # as notebooks do: honest, and compiled all the same
        text = "import os\nos.environ['TRITON_INTERPRET'] = '1'\n" + text
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.passed == part.graded, rendered(result)
    statuses = {c.status for c in part.compile_check.compiled}
    if how == "a kernel made in a function":
        assert statuses == {"unvouched"} and part.status == "failed", rendered(result)
        assert "not a @triton.jit function at the top level" in \
            part.compile_check.rejected[0].message
    else:
        assert statuses == {"ok"} and part.status == "passed", rendered(result)


# A kernel wrapped by Triton's own decorators: the compile check compiles the kernel inside
WRAPPED_KERNELS = {
    "heuristics": ('@triton.heuristics({"EVEN": lambda args: args["n_cols"] == args["BLOCK"]})\n',
                   "    EVEN: tl.constexpr,\n"),
    "autotune": ("@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=['n_cols'])\n",
                 ""),
}


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.parametrize("decorator", [
    "heuristics", pytest.param("autotune", marks=pytest.mark.skipif(
        triton_version() < (3, 4), reason="Triton 3.3's autotuner looks for a GPU driver as "
        "the module is imported, which the interpreter has none of"))])
@pytest.mark.parametrize("mistake", [False, pytest.param(True, marks=named_rejections)],
                         ids=["right", "if-on-a-block"])
def test_a_kernel_under_autotune_or_heuristics_is_compiled(tmp_path, decorator, mistake):
    above, parameter = WRAPPED_KERNELS[decorator]
    text = solution_text("softmax").replace("@triton.jit\ndef softmax_kernel(",
                                            above + "@triton.jit\ndef softmax_kernel(", 1)
    block = "    BLOCK: tl.constexpr,  # lanes per program: a power of two >= n_cols\n"
    assert block in text
    text = text.replace(block, block + parameter, 1)
    if mistake:
        text = text.replace(*_IF_ON_A_BLOCK)
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.passed == part.graded, rendered(result)
    statuses = {c.status for c in part.compile_check.compiled}
    assert statuses == ({"rejected"} if mistake else {"ok"}), rendered(result)


@pytest.mark.interpreter  # on a GPU the autotuner times its configurations and picks one
def test_lesson_10s_autotune_in_the_interpreter_is_explained_as_needing_a_gpu(tmp_path):
    text = solution_text("softmax").replace(
        "@triton.jit\ndef softmax_kernel(",
        "@triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (4, 8)], "
        "key=['n_cols'])\n@triton.jit\ndef softmax_kernel(", 1)
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.status == "failed"
    raised = [c.verdict for c in part.cases if c.verdict.status not in ("passed", "skipped")]
    assert raised and {v.meaning_key for v in raised} == {"no-gpu-driver"}, rendered(result)
    assert "@triton.autotune cannot time its configurations" in rendered(result)


_KERNEL_IN_A_STRING = '''
import linecache

_SOURCE = """
@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(input_ptr + row * input_row_stride + cols, mask=cols < n_cols,
                other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    output = numerator / tl.sum(numerator, axis=0)
    tl.store(output_ptr + row * output_row_stride + cols, output, mask=cols < n_cols)
"""
linecache.cache["<kernel>"] = (len(_SOURCE), None, _SOURCE.splitlines(True), "<kernel>")
exec(compile(_SOURCE, "<kernel>", "exec"), globals())
'''
# Ways a module's statements keep the compile check from vouching for its kernels: each must
# keep the part from passing, with the words of what happened
NOT_VOUCHED = {
    "a kernel in no file": (lambda t: t.split("@triton.jit")[0] + _KERNEL_IN_A_STRING +
                            "def softmax_triton" + t.split("def softmax_triton")[1],
                            "its source is in no file"),
    "pickle.dumps replaced": (lambda t: t.replace("@triton.jit", (
        "import pickle as _pickle\n"
        "_dumps = _pickle.dumps\n"
        "_pickle.dumps = lambda event, protocol=None, **k: _dumps(tuple(\n"
        "    type(x)(x.kernel, 'ok') if type(x).__name__ == 'Compiled' else x for x in event)\n"
        "    if isinstance(event, tuple) else event, protocol, **k)\n\n\n@triton.jit"), 1),
        "own code (pickle.dumps)"),
    "an argument of no type": (lambda t: t.replace(
        "    BLOCK: tl.constexpr,  # lanes per program", "    spare,\n    BLOCK: tl.constexpr,  #"
        " lanes per program", 1).replace("BLOCK=block)", "torch.zeros(1, dtype=torch.uint32), "
                                         "BLOCK=block)", 1),
        "a type the compile check cannot give the GPU compiler"),
    "its process ended": (lambda t: t.replace("@triton.jit", (
        "_gone = __import__('os')._exit(0) if 'gpu_compile' in __import__('sys').argv[0] "
        "else 0\n\n\n@triton.jit"), 1), "its process stopped before it finished"),
}


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.parametrize("route", [
    pytest.param(route, marks=named_rejections) if route == "pickle.dumps replaced" else route
    for route in NOT_VOUCHED])
def test_a_compile_check_that_cannot_vouch_for_the_kernels_passes_nothing(tmp_path, route):
    edit, words = NOT_VOUCHED[route]
    text = edit(solution_text("softmax").replace(*_IF_ON_A_BLOCK))
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.passed == part.graded and part.status == "failed", rendered(result)
    assert {c.status for c in part.compile_check.rejected} == {"unvouched"}
    shown = " ".join(rendered(result).split())
    assert words in shown and "(the GPU compile check could not vouch for it)" in shown, shown


@named_rejections
@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_compile_check_the_module_changed_says_so_and_passes_nothing(tmp_path):
    # statements of the module run in the compiling process: ones that replace the check's
    # compile function (or Triton's) with one that says "ok" get no verdict from it
    # (an assignment: the compiling process runs the module's assignments, not its loops; in
    # that process alone: where the kernels run, a change to the grader's code fails the cases)
    patch = ("import sys as _sys\n"
             "_said = [setattr(m, 'compile_launch', lambda *a, m=m, **k: m.Compiled(a[1].kernel, "
             "'ok')) for m in [_sys.modules.get(n) for n in ('__main__', "
             "'learning.grader.gpu_compile')] if hasattr(m, 'compile_launch') and "
             "'gpu_compile' in _sys.argv[0]]\n")
    text = solution_text("softmax").replace(*_IF_ON_A_BLOCK).replace(
        "@triton.jit", patch + "\n\n@triton.jit", 1)
    result, _ = grade(tmp_path, text, ["triton"])
    (part,) = result.parts
    assert part.passed == part.graded and part.status == "failed", rendered(result)
    assert {c.status for c in part.compile_check.rejected} == {"unvouched"}
    shown = " ".join(rendered(result).split())
    assert "your module changed the compile check's own code " \
        "(learning.grader.gpu_compile.compile_launch)" in shown, shown
    assert "(the GPU compile check could not vouch for it)" in shown


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_the_reference_kernel_compiles_and_the_check_costs_little(tmp_path):
    result, seconds = grade(tmp_path, solution_text("softmax"), ["triton"])
    (part,) = result.parts
    assert part.status == "passed"
    check = part.compile_check
    assert check.ran and not check.rejected and check.note == ""
    assert {c.kernel for c in check.compiled} == {"softmax_kernel"}
    assert all(c.status == "ok" for c in check.compiled)
    # One compile per argument types (float32 and float16 here), not one per block size.
    assert len(check.compiled) == 2
    assert sum(c.seconds for c in check.compiled) < 20
    assert seconds < KERNEL_PART_SECONDS


@pytest.mark.interpreter
def test_the_check_says_plainly_when_the_compile_check_could_not_run(tmp_path, monkeypatch):
    monkeypatch.setenv(gpu_compile.OFF_SWITCH, "0")
    result, _ = grade(tmp_path, solution_text("softmax"), ["triton"])
    (part,) = result.parts
    assert part.status == "passed"  # not running the check is no failure of the learner's
    assert part.compile_check.ran is False
    assert part.compile_check.note == f"it was turned off ({gpu_compile.OFF_SWITCH}=0)"


def test_a_missing_ptxas_is_named(monkeypatch):
    monkeypatch.delenv(gpu_compile.OFF_SWITCH, raising=False)
    monkeypatch.setattr(gpu_compile, "_ptxas_path", lambda: None)
    assert gpu_compile.unavailable() == ("no ptxas was found (Triton's bundled one, or "
                                         "TRITON_PTXAS_PATH)")


# ---------------------------------------------------------------------------------------------
# 5. Wrong results each get a named message, and nothing floods the terminal.


def test_nan_outputs_are_counted_by_name(tmp_path):
    result, seconds = grade(tmp_path, with_code(
        "def softmax_python(values):\n    return [float('nan')] * len(values)"))
    verdict = result.parts[0].cases[0].verdict
    assert verdict.status == "failed"
    assert verdict.summary.endswith("; 3 outputs are NaN where the reference is finite")
    assert verdict.expected == WORKED
    assert seconds < PYTHON_PART_SECONDS


def test_special_values_name_each_direction():
    import numpy as np

    nan, inf = float("nan"), float("inf")
    want = np.array([0.5, nan, nan, 1.0, inf])
    got = np.array([inf, 0.1, 0.2, nan, 2.0])
    assert compare.special_values(got, want) == (
        "1 output is NaN where the reference is finite; 1 output is infinite where the "
        "reference is finite; the reference is NaN at 2 places where your output is finite; "
        "the reference is infinite at 1 place where your output is finite")
    assert compare.special_values(want, want) == ""


def test_the_reference_nan_at_an_all_minus_inf_row_is_named():
    import numpy as np

    part = SOFTMAX.part("triton")
    case = part.case("all -inf row")
    args = tuple(a.exact() for a in case.make_args())
    want = part.reference(*args)
    got = np.where(np.isnan(want), 0.0, want)  # the learner wrote 0 where there is no softmax
    returned = Returned("Tensor", got, shape=got.shape, dtype="float32", device="cpu")
    verdict = compare.judge(part, case, returned, args, want, {"dtype": "float32",
                                                              "device": "cpu"})
    assert verdict.status == "failed"
    assert "the reference is NaN at 20 places where your output is finite" in verdict.summary


def test_a_huge_exception_message_is_cut_and_says_so(tmp_path):
    result, _ = grade(tmp_path, with_code(
        "def softmax_python(values):\n    raise ValueError('x' * 100000)"))
    verdict = result.parts[0].cases[0].verdict
    assert verdict.status == "error"
    assert verdict.summary.startswith("raised ValueError: xxx")
    assert "[cut: 98000 more characters]" in verdict.summary and len(verdict.summary) < 2200
    assert len(verdict.traceback) < 4 * 2000 + 200


def test_an_exception_message_of_many_lines_is_cut_and_says_so(tmp_path):
    result, _ = grade(tmp_path, with_code(
        "def softmax_python(values):\n"
        "    raise ValueError('\\n'.join(f'line {i}' for i in range(5000)))"))
    summary = result.parts[0].cases[0].verdict.summary
    assert "line 0" in summary and "line 4999" not in summary
    assert "more lines]" in summary and summary.count("\n") <= 31


def test_an_exception_whose_str_raises_still_gets_a_verdict(tmp_path):
    result, _ = grade(tmp_path, with_code(
        "class Odd(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n\n"
        "def softmax_python(values):\n    raise Odd()"))
    verdict = result.parts[0].cases[0].verdict
    assert verdict.status == "error"
    assert verdict.summary == "raised Odd: <could not be shown: its __str__ raised RuntimeError>"
    assert set(statuses(result.parts[0])) == {"error"}  # every case ran


def test_a_mismatch_list_is_capped(tmp_path):
    result, _ = grade(tmp_path, with_code(
        "def softmax_python(values):\n    return [0.5] * len(values)"))
    verdict = next(c.verdict for c in result.parts[0].cases if c.name == "long row")
    assert verdict.mismatch_count == 200
    assert len(verdict.mismatches) == compare.MAX_MISMATCHES_SHOWN
    assert verdict.got.endswith("... (192 more)]")


def test_printing_without_end_is_cut_and_the_grader_stays_bounded(tmp_path):
    result, seconds = grade(tmp_path, with_code(
        "def softmax_python(values):\n    while True:\n        print('spam ' * 2000)"),
        case_seconds=2)
    verdict = result.parts[0].cases[0].verdict
    assert verdict.status == "timed-out"
    assert "It also printed" in verdict.summary  # megabytes by then, and it says so
    assert "[output cut:" in result.learner_output
    assert len(result.learner_output) < childproc.MAX_OUTPUT_CHARS + 200
    assert seconds < PYTHON_PART_SECONDS


def test_the_output_note_counts_what_was_printed_not_what_was_left_after_a_first_cut():
    printed = ("x" * 201 + "\n") * 100  # 100 lines: cut by lines first, then by characters
    shown = childproc.cap_output(printed)
    body, note = shown.rsplit("\n", 1)
    assert len(body) == childproc.MAX_OUTPUT_CHARS and printed.startswith(body)
    hidden = len(printed.rstrip("\n")) - len(body)
    assert note == f"[output cut: {hidden} more characters " \
                   f"({100 - len(body.splitlines())} more lines) not shown]"
    # a worker's capture keeps only so much and says how much it dropped: that count survives
    captured = "z" * 100 + "\n[output cut: 5000 more bytes]"
    assert childproc.cap_output(captured + captured) == \
        "z" * 200 + "\n[output cut: 10000 more bytes printed and not kept]"
    assert childproc.cap_output("a\nb\n") == "a\nb"


def test_one_enormous_line_is_cut(tmp_path):
    result, _ = grade(tmp_path, with_code(
        "import sys\n_solution = softmax_python\n\ndef softmax_python(values):\n"
        "    sys.stdout.write('z' * 3_000_000)\n    return _solution(values)"))
    assert result.parts[0].status == "passed"
    assert result.learner_output.startswith("zzz")
    assert "[output cut:" in result.learner_output
    assert len(result.learner_output) < childproc.MAX_OUTPUT_CHARS + 200


# ---------------------------------------------------------------------------------------------
# 6. The reference cannot be fooled from the learner's process.

_SABOTAGE = """
import builtins
import math

import numpy
import torch

import learning.grader.compare
import learning.exercises.softmax.exercise as exercise

math.exp = lambda v: 1.0
numpy.exp = lambda v: numpy.ones_like(v)
torch.softmax = lambda x, dim=-1: torch.full_like(x, 1.0 / x.shape[dim])
builtins.max = lambda *a, **k: 0.0
builtins.sum = lambda *a, **k: 1.0
exercise.reference_rows = lambda x: numpy.full(numpy.shape(x), 1.0 / numpy.shape(x)[-1])
learning.grader.compare._close = lambda got, want, atol, rtol: numpy.ones(numpy.shape(want), bool)


def softmax_python(values):
    numerator = [math.exp(v - max(values)) for v in values]
    return [n / sum(numerator) for n in numerator]  # 1 each, under the patches
"""


def test_patching_math_numpy_torch_builtins_or_the_grader_does_not_change_the_expected_values(
        tmp_path):
    result, seconds = grade(tmp_path, with_code(_SABOTAGE))
    (part,) = result.parts
    worked = part.cases[0].verdict
    assert worked.status == "failed"
    assert worked.expected == WORKED
    # the builtins it replaced (max, sum) are put back before any case, and said
    assert worked.bug.key == "hook-left" and "builtins.max" in worked.summary
    # math.exp stays patched (a module's own attribute): the outputs it gives are wrong (but
    # where every value of a row is equal), judged against the expected values
    later = [c.verdict for c in part.cases[1:] if c.verdict.status == "failed"]
    assert later and all(v.expected != v.got for v in later)
    assert part.status == "failed" and not result.ok
    assert seconds < PYTHON_PART_SECONDS


# the kernel is launched (with a wrong answer stored), then other code puts the right one in
@pytest.mark.parametrize("overwrite", [
    "y.copy_(torch.softmax(x.float(), dim=-1).to(x.dtype))",
    pytest.param("y.data[:] = torch.softmax(x.float(), dim=-1).to(x.dtype)",
                 marks=pytest.mark.exhaustive),
    # the whole storage copied over (on a GPU the check puts guard bands around y, in it)
    pytest.param("whole = torch.empty(0, dtype=y.dtype, device=y.device).set_("
                 "y.untyped_storage()).clone(); whole[y.storage_offset():y.storage_offset() + "
                 "y.numel()] = torch.softmax(x.float(), dim=-1).to(x.dtype).flatten(); "
                 "y.untyped_storage().copy_(whole.untyped_storage())",
                 marks=pytest.mark.exhaustive),
], ids=["copy_", "data", "storage"])
def test_a_kernel_whose_output_is_overwritten_after_its_launch_fails(tmp_path, overwrite):
    result, seconds = grade(tmp_path, with_code(f"""
_right = softmax_triton


def softmax_triton(x):
    y = _right(x - x)  # launches the reference's kernel: 1/n everywhere, wrong
    {overwrite}
    return y
"""), parts=("triton",))
    (part,) = result.parts
    # where the right answer is 1/n (a single column) the bits stored are the bits returned
    ran = [c for c in part.cases if c.verdict.status != "skipped" and c.name != "single column"]
    assert ran and all(c.verdict.status == "failed" for c in ran), \
        [(c.name, c.verdict.summary) for c in ran]
    assert {c.verdict.bug.key for c in ran} == {"changed-after-kernel"}
    assert "changed after the last kernel launch" in ran[0].verdict.summary


# a kernel is launched, and what is returned was computed in plain Python and wrapped as a
# tensor by torch.tensor, which the function mode sees (torch.from_numpy it does not see: below)
@pytest.mark.parametrize("body, named", [
    ("    import math\n    _right(x)\n    rows = []\n"
     "    for row in x.float().tolist():\n        m = max(row)\n"
     "        e = [math.exp(v - m) for v in row]\n"
     "        rows.append([v / sum(e) for v in e])\n"
     "    return torch.tensor(rows, dtype=x.dtype, device=x.device)",
     "the tensor returned was made by torch.tensor during the call from values computed "
     "outside torch"),
], ids=["plain Python"])
def test_a_result_computed_outside_torch_and_wrapped_fails(tmp_path, body, named):
    result, _ = grade(tmp_path, with_code(f"_right = softmax_triton\n\n\n"
                                          f"def softmax_triton(x):\n{body}\n"), parts=("triton",))
    (part,) = result.parts
    ran = [c for c in part.cases if c.verdict.status != "skipped"]
    assert ran and {getattr(c.verdict.bug, "key", c.verdict.status) for c in ran} == \
        {"computed-by-torch"}, [(c.name, c.verdict.summary) for c in ran]
    assert named in ran[0].verdict.summary


NUMPY_SOFTMAX = ("    import numpy\n    v = x.float().cpu().numpy()\n"
                 "    e = numpy.exp(v - v.max(axis=-1, keepdims=True))\n"
                 "    y = torch.from_numpy(e / e.sum(axis=-1, keepdims=True))\n"
                 "    return y.to(device=x.device, dtype=x.dtype)\n")


# a kernel is launched (one that computes, or one that stores nothing), and what is returned was
# computed where the check does not see it (numpy, torch with its function mode off, a thread):
# the same when what the launches stored is changed
@pytest.mark.parametrize("launch, answer", [
    ("    _right(x)\n", NUMPY_SOFTMAX),
    pytest.param("    _nothing[(1,)](x)\n", NUMPY_SOFTMAX, marks=pytest.mark.exhaustive),
    # torch's work the function mode does not see: switched off, or in another thread
    pytest.param("    _nothing[(1,)](x)\n",
                 "    out = torch.empty_like(x)\n"
                 "    with torch._C.DisableTorchFunction():\n"
                 "        out.copy_(torch.softmax(x.float(), -1).to(x.dtype))\n"
                 "    return out\n", marks=pytest.mark.exhaustive),
    pytest.param("    _nothing[(1,)](x)\n",
                 "    import threading\n    box = []\n"
                 "    work = threading.Thread(target=lambda: box.append(\n"
                 "        torch.softmax(x.float(), -1).to(x.dtype)))\n"
                 "    work.start()\n    work.join()\n    return box[0]\n",
                 marks=pytest.mark.exhaustive),
    # the kernel given a clone of the input, which it only reads: numpy computes from the clone
    pytest.param("    xc = x.clone()\n    _reads[(1,)](xc)\n",
                 NUMPY_SOFTMAX.replace("x.float().cpu().numpy()", "xc.float().cpu().numpy()"),
                 marks=pytest.mark.exhaustive),
], ids=["numpy, a kernel that computes", "numpy, a kernel that stores nothing",
        "torch unseen, into an allocation", "torch in a thread", "numpy, from a clone only read"])
def test_a_result_made_unseen_beside_a_launch_fails_with_the_evidence(tmp_path, launch, answer):
    nothing = "@triton.jit\ndef _nothing(x):\n    pass\n\n\n@triton.jit\ndef _reads(x):\n" \
              "    tl.load(x + tl.arange(0, 2))\n"
    result, _ = grade(tmp_path, with_code(f"_right = softmax_triton\n\n\n{nothing}\n\n"
                                          f"def softmax_triton(x):\n{launch}{answer}"),
                      parts=("triton",))
    (part,) = result.parts
    ran = [c for c in part.cases if c.verdict.status != "skipped"]
    assert ran and {getattr(c.verdict.bug, "key", c.verdict.status) for c in ran} == \
        {"not-from-kernels"}, [(c.name, c.verdict.summary) for c in ran]
    assert "run again with what each launch stored changed just after it, the call returned " \
        "the same values" in ran[0].verdict.summary
    assert part.status == "failed" and not result.ok


# a kernel is launched, and what is returned is torch's: left in from debugging, or copied
@pytest.mark.parametrize("body, passes", [
    ("    _right(x)\n    return torch.softmax(x.float(), dim=-1).to(x.dtype)", False),
    pytest.param("    _right(x)\n    z = torch.empty_like(x)\n"
                 "    z.copy_(torch.softmax(x, dim=-1))\n    return z", False,
                 marks=pytest.mark.exhaustive),
    ("    return _right(x).clone()", True),  # a copy of what the kernel stored
    pytest.param("    return _right(x.float()).to(x.dtype)", True, marks=pytest.mark.exhaustive),
], ids=["returned", "copied into a fresh tensor", "clone of the kernel's", "cast of the kernel's"])
def test_a_result_torch_computed_beside_a_launch_fails_and_names_the_operation(tmp_path, body,
                                                                               passes):
    result, _ = grade(tmp_path, with_code(f"_right = softmax_triton\n\n\n"
                                          f"def softmax_triton(x):\n{body}\n"), parts=("triton",))
    (part,) = result.parts
    ran = [c for c in part.cases if c.verdict.status != "skipped"]
    if passes:
        assert part.status == "passed", [(c.name, c.verdict.summary) for c in ran]
        return
    assert ran and {c.verdict.bug.key for c in ran} == {"computed-by-torch"}
    assert "computed by torch's softmax during the call" in ran[0].verdict.summary


COPY_KERNEL = """
@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n), mask=i < n)


@triton.jit
def _scale(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + i, mask=i < n) * 1.0000001 + 1e-30
    tl.store(dst + i, v.to(dst.dtype.element_ty), mask=i < n)


@triton.jit
def _nothing(x):
    pass


@triton.jit
def _copy_rows(src, dst, cols, src_row_stride, first, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    v = tl.load(src + row * src_row_stride + first + i, mask=i < cols)
    tl.store(dst + row * cols + i, v, mask=i < cols)


def _from_columns(wide, rows, cols, first):
    out = torch.empty(rows, cols, dtype=wide.dtype, device=wide.device)
    _copy_rows[(rows,)](wide, out, cols, wide.stride(0), first,
                        BLOCK=triton.next_power_of_2(cols))
    return out


def _through_a_kernel(y):
    y = y.contiguous()
    out = torch.empty_like(y)
    _copy[(triton.cdiv(y.numel(), 256),)](y, out, y.numel(), BLOCK=256)
    return out
"""


# the answer is computed outside the kernel, then a kernel that only copies passes it on
@pytest.mark.parametrize("body, named", [
    ("    return _through_a_kernel(torch.softmax(x.float(), dim=-1).to(x.dtype))",
     "a tensor torch's softmax computed during the call, which your code gave a kernel"),
    pytest.param("    import numpy\n    v = x.float().cpu().numpy()\n"
                 "    e = numpy.exp(v - v.max(axis=-1, keepdims=True))\n"
                 "    y = torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).to(x.device)\n"
                 "    return _through_a_kernel(y.to(x.dtype))",
                 "a tensor your code gave a kernel that is no input and whose values no torch "
                 "function the check saw computed during the call",
                 marks=pytest.mark.exhaustive),
    # numpy's answer, or torch's unseen, written into the output a kernel that stores nothing
    # is then given (numpy writes only into memory on the CPU: the interpreter's)
    pytest.param("    out = torch.empty_like(x)\n    import numpy\n    v = x.float().numpy()\n"
                 "    e = numpy.exp(v - v.max(axis=-1, keepdims=True))\n"
                 "    out.numpy()[...] = e / e.sum(axis=-1, keepdims=True)\n"
                 "    _nothing[(1,)](out)\n    return out",
                 "a tensor your code gave a kernel that is no input and whose values no torch "
                 "function the check saw computed during the call",
                 marks=pytest.mark.skipif(not kernel_mode.select().interpret,
                                          reason="numpy views only memory on the CPU")),
    pytest.param("    out = torch.empty_like(x)\n"
                 "    with torch._C.DisableTorchFunction():\n"
                 "        out.copy_(torch.softmax(x.float(), -1))\n"
                 "    _nothing[(1,)](out)\n    return out",
                 "a tensor your code gave a kernel that is no input and whose values no torch "
                 "function the check saw computed during the call",
                 marks=pytest.mark.exhaustive),
    # a kernel that only nudges torch's answer, or casts it from float64 as it stores it
    pytest.param("    y = torch.softmax(x.float(), dim=-1)\n    out = torch.empty_like(x)\n"
                 "    _scale[(triton.cdiv(y.numel(), 256),)](y, out, y.numel(), BLOCK=256)\n"
                 "    return out",
                 "a tensor torch's softmax computed during the call, which your code gave a "
                 "kernel", marks=pytest.mark.exhaustive),
    # the answer within a larger tensor: one value appended; the far columns of a wider one
    ("    y = torch.softmax(x.float(), dim=-1).to(x.dtype).flatten()\n"
     "    return _through_a_kernel(torch.cat([y, y[:1]]))[:y.numel()].view(x.shape)",
     "a tensor torch's softmax computed during the call, which your code gave a kernel"),
    ("    rows, cols = x.shape\n"
     "    wide = torch.zeros(rows, 2 * cols, dtype=x.dtype, device=x.device)\n"
     "    wide[:, cols:] = torch.softmax(x.float(), dim=-1)\n"
     "    return _from_columns(wide, rows, cols, cols)",
     "a tensor torch's softmax computed during the call, which your code gave a kernel"),
    # a kernel that computes, given a tensor torch computed: what honest launchers do
    ("    return _right(x * 1)", ""),
], ids=["torch's softmax", "numpy's", "numpy's written into the output",
        "torch's written unseen into the output", "nudged and cast", "with a value appended",
        "in the far columns", "an input torch made, a kernel computing"])
def test_values_computed_outside_a_kernel_and_passed_through_one_fail(tmp_path, body, named):
    result, _ = grade(tmp_path, with_code(f"_right = softmax_triton\n{COPY_KERNEL}\n\n"
                                          f"def softmax_triton(x):\n{body}\n"),
                      parts=("triton",))
    (part,) = result.parts
    ran = [c for c in part.cases if c.verdict.status != "skipped"]
    if not named:
        assert part.status == "passed", [(c.name, c.verdict.summary) for c in ran]
        return
    # a single column's answer is all ones, which could match by chance: not judged so
    judged = [c for c in ran if c.name != "single column"]
    assert judged and {getattr(c.verdict.bug, "key", c.verdict.status) for c in judged} == \
        {"passed-through"}, [(c.name, c.verdict.summary) for c in judged]
    assert f"holds the values (to within 1e-3 of each) of {named}" in judged[0].verdict.summary
    assert "the kernel passed them on (made again with those values changed" in \
        judged[0].verdict.summary
    assert part.status == "failed" and not result.ok


# honest kernels that compute softmax themselves, beside torch work the grader must not blame
HONEST = {
    # torch's answer handed to the kernel for debugging, never read: equal bits are no evidence
    "an unread argument": """
@triton.jit
def _softmax_with_ref(out, x, ref, out_stride, x_stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    v = tl.load(x + row * x_stride + i, mask=i < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out + row * out_stride + i, e / tl.sum(e, axis=0), mask=i < n)


def softmax_triton(x):
    ref = torch.softmax(x.float(), dim=-1).to(x.dtype)
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    _softmax_with_ref[(x.shape[0],)](y, x, ref, y.stride(0), x.stride(0), x.shape[1],
                                     BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
""",
    # in-place methods that change only metadata write no values
    "requires_grad_ on the result": """
def softmax_triton(x):
    return _right(x.float()).to(x.dtype).requires_grad_(x.requires_grad)
""",
    "unsqueeze_ and squeeze_ on the result": """
def softmax_triton(x):
    out = _right(x.float()).to(x.dtype)
    out.unsqueeze_(0).squeeze_(0)
    return out
""",
    # the kernel's own output, taken through numpy and back: made by nothing seen, but it
    # follows what the kernel stored (through float32: numpy has no bfloat16, the GPU's cases)
    "the kernel's output copied through numpy": """
def softmax_triton(x):
    out = _right(x)
    return torch.from_numpy(out.cpu().float().numpy().copy()).to(x.device, x.dtype)
""",
    "the kernel's output through tolist() and torch.tensor": """
def softmax_triton(x):
    out = _right(x)
    return torch.tensor(out.tolist(), dtype=x.dtype, device=x.device).reshape(x.shape)
""",
    "the kernel's output through numpy and torch.as_tensor": """
def softmax_triton(x):
    out = _right(x)
    return torch.as_tensor(out.cpu().float().numpy().copy()).to(x.device, x.dtype)
""",
    # a kernel's parameters packed in a tensor of plain values: made outside torch, but far
    # fewer than the result holds, so no answer could be in them (its argument not named
    # params: Triton 3.6's compiled launch binds a dict of its own under that name)
    "parameters packed in torch.tensor": """
@triton.jit
def _softmax_scaled(out, x, packed, out_stride, x_stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    scale = tl.load(packed)
    shift = tl.load(packed + 1)
    v = tl.load(x + row * x_stride + i, mask=i < n, other=-float("inf")).to(tl.float32)
    v = v * scale + shift
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out + row * out_stride + i, e / tl.sum(e, axis=0), mask=i < n)


def softmax_triton(x):
    packed = torch.tensor([1.0, 0.0], dtype=torch.float32, device=x.device)
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    _softmax_scaled[(x.shape[0],)](y, x, packed, y.stride(0), x.stride(0), x.shape[1],
                                   BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
""",
    # on a GPU the check's allocations sit between guard bands: not as views, which refuse it
    "detach_ on the result": """
def softmax_triton(x):
    out = _right(x.float()).to(x.dtype)
    out.detach_()
    return out
""",
}


@pytest.mark.parametrize("code", list(HONEST.values()), ids=list(HONEST))
def test_a_kernel_that_computes_is_not_blamed_for_torch_work_beside_it(tmp_path, code):
    result, _ = grade(tmp_path, with_code(f"_right = softmax_triton\n{code}"), parts=("triton",))
    (part,) = result.parts
    assert part.status == "passed", [(c.name, c.verdict.summary) for c in part.cases]


# tensors whose memory cannot be followed: judged, never a failure of the grader's own code
@pytest.mark.parametrize("returned", ["_right(x).to_sparse()",
                                      "torch.nested.nested_tensor([_right(x)[0], _right(x)[0]])"],
                         ids=["sparse", "nested"])
def test_a_sparse_or_nested_result_is_judged_not_a_grader_failure(tmp_path, returned):
    result, _ = grade(tmp_path, with_code(f"_right = softmax_triton\n\n\n"
                                          f"def softmax_triton(x):\n    return {returned}\n"),
                      parts=("triton",))
    (part,) = result.parts
    ran = [c for c in part.cases if c.verdict.status != "skipped"]
    assert ran and all(c.verdict.status == "failed" for c in ran), \
        [(c.name, c.verdict.status, c.verdict.summary) for c in ran]
    assert not any("grader's own code" in note for note in result.notes), result.notes


def test_a_guarded_allocation_is_a_tensor_of_its_own_whose_stores_past_its_end_are_seen():
    import torch

    from learning.grader import allocations

    with allocations.controlled(0.0, guard=True) as record:
        out = torch.empty((3, 5))
    assert out._base is None and out.is_contiguous() and out.shape == (3, 5)
    out.detach_()  # refused by a view: "Can't detach views in-place"
    assert torch.equal(out, torch.zeros(3, 5)) and record.damaged() == 0
    (guarded,) = record.guarded
    torch.as_strided(out, (16,), (1,)).fill_(7.0)  # one element past the end
    assert record.damaged() == 1 and guarded.buffer[allocations.GUARD_ELEMENTS + 15] == 7.0


@pytest.mark.parametrize("guard", [False, True], ids=["interpreter", "guarded as on a GPU"])
def test_the_checks_own_fill_of_new_tensors_is_not_the_learners_in_the_record(guard):
    # the record of the learner's torch calls sees torch.empty's memory as an allocation (not
    # as memory nothing made: values from outside torch), and a learner's padding fill by the
    # constant it put, not by the check's NaN
    import torch

    from learning.grader import allocations, lineage

    x = torch.randn(3, 4)
    inputs = {x.untyped_storage().data_ptr()}
    record = lineage.function_mode()
    with allocations.controlled(math.nan, guard), record:
        out = torch.empty((3, 4))
        filled = torch.empty((3, 8))
        filled.fill_(-math.inf)
        filled[:, :4] = x
        sliced = x.new_empty((3, 8))
        sliced[:, 4:] = -math.inf
        sliced[:, :4] = x
    assert record.made[out.untyped_storage().data_ptr()][0] == "empty"
    for padded in (filled, sliced):
        assert lineage.fill_values(padded, record.made, set(), inputs) == {-math.inf}


def test_what_the_check_keeps_of_a_call_is_bounded_however_many_launches_it_makes():
    # a launcher feeding torch's results to kernel after kernel: the copies kept of what the
    # launches were given, and the memories the record holds alive, stop at their caps
    import torch

    from learning.grader import calls, lineage

    counter = calls.LaunchCounter()
    counter.recorder = lineage.function_mode()
    step = 16 * 2**20
    with counter.recorder:
        for _ in range(20):  # 320 MiB fed, 640 MiB made, in all
            fed = torch.ones(step // 4) * 2.0
            counter._note_fed([fed])
    kept = sum(f.numel() * f.element_size() for _, f in counter.fed)
    assert 0 < kept <= calls.FED_BYTES
    assert 0 < counter.recorder.held_bytes <= lineage.HELD_BYTES


def test_a_kernel_part_computed_by_torch_alone_fails_as_launching_no_kernel(tmp_path):
    result, seconds = grade(tmp_path, with_code(
        "def softmax_triton(x):\n"
        "    return torch.softmax(x.float(), dim=-1).to(x.dtype)"), parts=("triton",))
    (part,) = result.parts
    ran = [c for c in part.cases if c.verdict.status != "skipped"]
    assert ran and all(c.verdict.status == "failed" for c in ran)
    assert all(c.verdict.bug.key == "no-kernel" for c in ran)
    assert "softmax_triton returned without launching a kernel" in rendered(result)
    assert part.status == "failed" and not result.ok
    assert seconds < KERNEL_PART_SECONDS


def test_a_pass_computed_by_the_reference_solution_is_said_to_be_so(tmp_path):
    result, _ = grade(tmp_path, "from learning.exercises.softmax.solution import softmax_python "
                      "as _ref\n\ndef softmax_python(values):\n    return _ref(values)\n")
    assert result.borrowed == ["learning.exercises.softmax.solution"]
    assert "your code loaded the course's reference code (learning.exercises.softmax.solution)" in \
        rendered(result)


def test_a_module_that_rewrites_its_own_file_is_said_to_have_changed(tmp_path):
    result, _ = grade(tmp_path, with_code(
        "_solution = softmax_python\n\ndef softmax_python(values):\n"
        "    open(__file__, 'w').write('# gone\\n')\n    return _solution(values)"))
    assert result.module_changed == "rewritten"
    assert "softmax.py was rewritten while it was checked" in rendered(result)
    assert "the grades above are not recorded" in " ".join(rendered(result).split())
    # the Python part passed on the text read first, but the file was read again after it
    # changed (a kernel's source is): nothing is recorded for any part
    from learning import check
    from learning.grader import state

    assert any(p.status == "passed" for p in result.parts)
    progress, saved = check._record(tmp_path, result)
    assert saved and all(progress.grade("softmax", p.part.name) is None for p in result.parts)
    assert state.load(tmp_path).grade("softmax", "python") is None


def test_a_module_that_switches_the_interpreter_on_import_is_told_so(tmp_path):
    # The check chooses where kernels run; a module that flips TRITON_INTERPRET while it is
    # imported decorates its kernels for the other mode (each case then failed on a bare
    # AssertionError). Flip whichever way this machine runs.
    value = "0" if kernel_mode.select().interpret else "1"
    result, _ = grade(tmp_path, f"import os\nos.environ['TRITON_INTERPRET'] = '{value}'\n"
                      + solution_text("softmax"), parts=("python", "triton"))
    problem = result.import_problem
    assert problem is not None and problem.kind == "mode-changed"
    assert "softmax.py set TRITON_INTERPRET while it was imported" in problem.message
    assert "remove that line" in " ".join(rendered(result).split())
    assert not result.ok


def test_a_module_that_sets_the_interpreter_as_it_already_is_imports(tmp_path):
    value = "1" if kernel_mode.select().interpret else "0"
    result, _ = grade(tmp_path, f"import os\nos.environ['TRITON_INTERPRET'] = '{value}'\n"
                      + solution_text("softmax"))
    assert result.import_problem is None and result.ok


def test_code_of_its_own_loads_no_reference_code(tmp_path):
    result, _ = grade(tmp_path, solution_text("softmax"))
    assert result.ok and result.borrowed == []
    assert "reference code" not in rendered(result)


# ---------------------------------------------------------------------------------------------
# 7. The learner's folder, concurrent checks, and the learner's environment.


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


def test_grading_never_writes_the_folder_not_even_a_pycache(tmp_path):
    (tmp_path / "helpers_of_mine.py").write_text("SCALE = 1.0\n", encoding="utf-8")
    text = with_code("import helpers_of_mine  # noqa: F401  (a module of the learner's own)")
    (tmp_path / "softmax.py").write_text(text, encoding="utf-8")
    before = _tree(tmp_path)
    result = runner.grade(SOFTMAX, tmp_path, ["python", "triton"])
    assert result.ok
    assert _tree(tmp_path) == before
    assert not list(tmp_path.rglob("__pycache__"))


def _check_command(root: Path, *parts: str) -> list[str]:
    argv = [sys.executable, "-m", "learning.check", "softmax", "--root", str(root)]
    for part in parts:
        argv += ["--part", part]
    return argv


def _environment(**changes) -> dict:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    # the course first; what the suite's own environment adds stays (a numpy put first on the
    # path, say), so that the check runs with the packages the test itself judges by
    env["PYTHONPATH"] = course_pythonpath()
    env.pop("LEARNING_FORKSERVER", None)  # the command as a learner runs it: fresh workers
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def test_two_checks_of_one_folder_at_once_do_not_interfere(tmp_path):
    (tmp_path / "softmax.py").write_text(solution_text("softmax"), encoding="utf-8")
    learner_files = {p.name: p.read_bytes() for p in tmp_path.glob("*.py")}
    outputs = [None, None]

    def check(index: int):
        outputs[index] = subprocess.run(_check_command(tmp_path, "python"), capture_output=True,
                                        text=True, env=_environment(), cwd=str(COURSE_ROOT),
                                        timeout=300)

    start = time.monotonic()
    threads = [threading.Thread(target=check, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for done in outputs:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Grade: Python 11/11" in done.stdout
        assert "Traceback" not in done.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.py")} == learner_files
    assert not list(tmp_path.rglob("__pycache__"))
    assert time.monotonic() - start < 2 * PYTHON_PART_SECONDS


# The quick run keeps the settings that changed what a check did (the mode, the encoding,
# warnings raised as errors); the exhaustive set adds those the terminal's settings cover.
@pytest.mark.parametrize("changes, part, expect", [
    pytest.param({"TRITON_INTERPRET": "1"}, "triton",
                 "because TRITON_INTERPRET=1 is set in the environment", id="TRITON_INTERPRET"),
    pytest.param({"CUDA_VISIBLE_DEVICES": ""}, "python", "Grade: Python 11/11", id="no-GPU",
                 marks=pytest.mark.exhaustive),
    pytest.param({"NO_COLOR": "1", "TERM": "dumb"}, "python", "Grade: Python 11/11",
                 id="NO_COLOR", marks=pytest.mark.exhaustive),
    pytest.param({"COLUMNS": "40"}, "python", "Grade:", id="COLUMNS=40",
                 marks=pytest.mark.exhaustive),
    pytest.param({"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}, "python",
                 "Grade: Python 11/11", id="ascii"),
    pytest.param({"PYTHONWARNINGS": "error"}, "python", "Grade: Python 11/11",
                 id="warnings-as-errors"),
])
def test_the_learners_environment_does_not_break_the_check(tmp_path, changes, part, expect):
    (tmp_path / "softmax.py").write_text(solution_text("softmax"), encoding="utf-8")
    start = time.monotonic()
    done = subprocess.run(_check_command(tmp_path, part), capture_output=True,
                          env=_environment(**changes), cwd=str(COURSE_ROOT), timeout=300)
    seconds = time.monotonic() - start
    out = done.stdout.decode("utf-8")
    if part == "triton" and kernel_mode.interpreter_problem():
        # This machine's interpreter cannot run the kernels (Triton <= 3.6 with numpy >= 2.4):
        # the check must say so in one line, with the fix, instead of failing every case.
        assert done.returncode == 2 and 'pip install "numpy<2.4"' in out, out
        return
    assert done.returncode == 0, out + done.stderr.decode("utf-8", "replace")
    assert expect in out
    assert "Traceback" not in out and not done.stderr.strip()
    if changes.get("PYTHONIOENCODING") == "ascii":
        done.stdout.decode("ascii")  # every character could be shown
    assert seconds < KERNEL_PART_SECONDS


@pytest.mark.interpreter
def test_forked_and_fresh_workers_give_the_same_verdicts(tmp_path, monkeypatch):
    """The test suite forks workers from a warm process; learners start each one afresh."""
    text = solution_text("softmax").replace('other=-float("inf")', "other=0.0")
    verdicts = {}
    for switch in ("1", "0"):
        monkeypatch.setenv("LEARNING_FORKSERVER", switch)
        result = grade_text(tmp_path, "softmax", text, ["triton"])
        verdicts[switch] = [(c.name, c.verdict.status, c.verdict.bug and c.verdict.bug.key)
                            for c in result.parts[0].cases]
    assert verdicts["1"] == verdicts["0"]
    assert ("width 3", "failed", "zero-padding") in verdicts["1"]


def test_a_child_the_learners_module_starts_does_not_outlive_the_check(tmp_path, monkeypatch):
    monkeypatch.delenv("LEARNING_FORKSERVER", raising=False)  # a fresh worker, as a learner's
    marker = tmp_path / "child.pid"
    module = solution_text("softmax") + f'''

import os as _os
import time as _time

if _os.fork() == 0:  # a child that would sleep for ten minutes
    with open({str(marker)!r}, "w") as _handle:
        _handle.write(str(_os.getpid()))
    _time.sleep(600)
    _os._exit(0)
'''
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.parts[0].status == "passed"
    deadline = time.monotonic() + 2
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not (marker.exists() and marker.read_text()):
        return  # ended with the worker's process group before it could write its pid
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _running(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError("the learner's child process outlived the check")
        time.sleep(0.1)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs: a process that ended but that whoever adopted it has not yet
    reaped (a zombie, state Z in /proc) still answers kill(pid, 0), yet it runs nothing."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_thread_left_running_does_not_hold_the_check_up(tmp_path, monkeypatch):
    monkeypatch.delenv("LEARNING_FORKSERVER", raising=False)  # a fresh worker, as a learner's
    module = solution_text("softmax") + '''

import threading as _threading
import time as _time

_threading.Thread(target=_time.sleep, args=(600,)).start()  # not a daemon: it keeps the
                                                           # process alive after the cases
'''
    start = time.monotonic()
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.parts[0].status == "passed"
    assert time.monotonic() - start < 9  # about 3 s of start-up and work, 1.5 s of grace


def test_a_python_part_gets_the_python_limit_beside_kernel_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(worker_run, "PYTHON_CASE_SECONDS", 2.0)
    module = solution_text("softmax") + '''

def softmax_python(values):
    while True:
        pass
'''
    result = grade_text(tmp_path, "softmax", module)  # both parts, one process to start with
    python, triton = result.parts
    stopped = [c.verdict for c in python.cases if c.verdict.status == "timed-out"]
    assert stopped and "did not finish within 2 s" in stopped[0].summary
    assert triton.status == "passed"  # later parts get a fresh process


def test_memory_past_the_cap_is_a_memory_error_on_the_learners_line(tmp_path, mode):
    if not mode.interpret:
        pytest.skip("the cap applies on the CPU only: CUDA reserves far more address space")
    module = solution_text("softmax") + '''

def softmax_python(values):
    rows = []
    while True:
        rows.append([0.0] * 1_000_000)  # about 8 MB a step, without end
'''
    start = time.monotonic()
    result = grade_text(tmp_path, "softmax", module, ["python"], memory_gib=0.5)
    verdicts = [c.verdict for c in result.parts[0].cases]
    first = verdicts[0]
    assert first.status == "error" and "MemoryError" in first.summary, first.summary
    assert first.meaning_key == "out-of-memory" and not first.causes
    assert "rows.append" in first.where
    assert time.monotonic() - start < 60  # long before ten cases' time limits


def test_check_passes_its_memory_cap_to_the_learners_process(tmp_path, capsys, mode):
    if not mode.interpret:
        pytest.skip("the cap applies on the CPU only: CUDA reserves far more address space")
    from learning import check

    (tmp_path / "softmax.py").write_text(solution_text("softmax") + """

def softmax_python(values):
    return [0.0] * 200_000_000 + values  # 1.6 GB of list, past a cap of 0.5 GiB
""", encoding="utf-8")
    assert check.main(["softmax", "--part", "python", "--memory", "0.5", "--root",
                       str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "raised MemoryError" in out and "--memory GIB raises the cap" in out


def test_a_worker_whose_forking_process_ended_gets_a_verdict_not_a_traceback(tmp_path):
    class Orphan:  # a forked worker whose warm process was killed: no exit status comes
        pid = 2 ** 22 + 1  # no such process group: killing it does nothing

        def poll(self):
            return None

        def wait(self, timeout=None):
            raise subprocess.TimeoutExpired("worker", timeout)

    run = worker_run.WorkerRun(worker_run.Settings(SOFTMAX, tmp_path / "softmax.py"),
                               [SOFTMAX.part("python")])
    run.heard.finished, run.heard.current = True, CaseKey("python", "worked example")
    pipes = childproc.PipeReader()  # no pipe open: nothing left to read
    run._stop(Orphan(), pipes)
    verdict = stopped.failure_verdict(run)
    assert run.ended.status_lost and verdict.status == "crashed" and not verdict.causes
    assert "how it ended is unknown" in verdict.summary


def test_the_graders_own_failure_in_a_worker_is_said_as_the_graders_never_as_an_exit(tmp_path):
    # a real worker whose grader code raises (an exercise the registry lacks): it ends with the
    # status kept for that, its traceback on its output
    read_end, write_end = os.pipe()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "learning.grader.worker", "--exercise", "no-such-exercise",
             "--module-path", str(tmp_path / "softmax.py"), "--parts", "python",
             "--fd", str(write_end)], pass_fds=(write_end,), capture_output=True, text=True,
            timeout=120, cwd=COURSE_ROOT, env={**os.environ, "PYTHONPATH": course_pythonpath()})
    finally:
        os.close(read_end)
        os.close(write_end)
    assert done.returncode == childproc.GRADER_FAILED_STATUS, (done.returncode, done.stderr)
    assert "Traceback" in done.stderr and "no-such-exercise" in done.stderr, done.stderr
    # what the check then says, in a case and at the import: the grader's, not the learner's
    run = worker_run.WorkerRun(worker_run.Settings(SOFTMAX, tmp_path / "softmax.py"),
                               [SOFTMAX.part("python")])
    run.ended.returncode = childproc.GRADER_FAILED_STATUS
    run.heard.phase, run.heard.current = "cases", CaseKey("python", "worked example")
    verdict = stopped.failure_verdict(run)
    assert verdict.status == "error" and not verdict.causes, verdict
    assert "the grader's own code failed" in verdict.summary
    assert "sys.exit" not in verdict.summary and "exited" not in verdict.summary
    run.heard.phase = "import"
    problem = stopped.import_failure(run)
    assert problem.kind == "grader-failed" and "the grader's own code failed" in problem.message
    assert "sys.exit" not in problem.message
    # any other status in a case is still said as the code ending the program
    run.ended.returncode = 3
    assert "sys.exit" in stopped.failure_verdict(run).summary


# --- a library the commands need, damaged ----------------------------------------------------

@pytest.mark.parametrize("command", ["check", "progress"])
def test_a_library_with_a_file_set_aside_is_named_in_one_line(tmp_path, command):
    # as after a check set aside one of rich's files: the package is there, a module of it not
    broken = tmp_path / "broken"
    (broken / "rich").mkdir(parents=True)
    (broken / "rich" / "__init__.py").write_text("")
    env = _environment()
    env["PYTHONPATH"] = os.pathsep.join([str(broken), env["PYTHONPATH"]])
    argv = [sys.executable, "-m", f"learning.{command}", *(["softmax"] if command == "check"
                                                          else []), "--root", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(COURSE_ROOT),
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "the installed package rich cannot be imported" in line
    assert line.endswith("python -m pip install --force-reinstall rich")


def test_a_library_not_installed_for_this_python_is_said_so_not_damaged(tmp_path):
    # the command run with another Python than the course's (its virtual environment not
    # activated): rich is nowhere on this one's path, and nothing was set aside
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(
        "import sys\nsys.path[:] = [p for p in sys.path if 'site-packages' not in p or "
        "'rich' not in __import__('os').listdir(p)]\n")
    env = _environment()
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), env["PYTHONPATH"]])
    done = subprocess.run([sys.executable, "-m", "learning.progress", "--root", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=str(COURSE_ROOT),
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("learning: the package rich is not installed for this Python ("), line
    assert "damaged" not in line and "activate its virtual environment" in line


@pytest.mark.parametrize("command", ["check", "progress"])
def test_a_course_file_removed_by_hand_is_named_in_one_line(tmp_path, command):
    # the exercises are listed before the course's files are compared with their digests: a
    # file of another exercise moved away by hand stopped every command in a traceback
    import shutil

    root = tmp_path / "course"
    shutil.copytree(COURSE_ROOT / "learning", root / "learning",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "learning" / "exercises" / "softmax" / "exercise.py").unlink()
    env = _environment()
    env["PYTHONPATH"] = str(root)
    argv = [sys.executable, "-m", f"learning.{command}",
            *(["elementwise"] if command == "check" else []), "--root", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(root),
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "the course's own module learning.exercises.softmax.exercise cannot be " \
           "imported (learning/exercises/softmax/exercise.py" in line, line
    assert line.endswith("git checkout -- learning puts the course's files back")


def test_only_a_module_the_course_lists_is_called_the_courses_own():
    # an import of a name under learning. that the course never had (a learner's typo in code
    # a command imports) is not said to be a course file gone missing
    from learning import broken_install

    def named(name):
        error = ImportError(f"No module named {name!r}")
        error.name = name
        return broken_install.course_module(error)

    assert named("learning.exercises.softmax.exercise") == "learning.exercises.softmax.exercise"
    assert named("learning.grader") == "learning.grader"  # a package: its files are listed
    assert named("triton_kernels") == "triton_kernels"
    assert named("learning.no_such_module") is None and named("numpy") is None


def test_ctrl_c_while_a_command_is_still_importing_ends_in_one_line():
    # before the command's own handling of Ctrl-C is in place (its imports take a moment)
    done = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['-m']; "
                           "import learning; raise KeyboardInterrupt"],
                          capture_output=True, text=True, env=_environment(), timeout=60)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == "learning: stopped (Ctrl-C)"


def test_only_a_command_turns_an_import_error_into_one_line():
    # imported as a library, learning leaves Python's excepthook alone; an import error that
    # names no installed library is left to its traceback
    from learning import broken_install

    done = subprocess.run([sys.executable, "-c", "import sys, learning; "
                           "print(sys.excepthook is sys.__excepthook__)"],
                          capture_output=True, text=True, env=_environment(), timeout=60)
    assert done.stdout.strip() == "True", done.stderr
    as_if_in = str(COURSE_ROOT / "learning" / "check.py")
    for statement, named in (("import no_such_library", None), ("import rich.no_such", "rich")):
        try:
            exec(compile(statement, as_if_in, "exec"), {})
        except ImportError as error:
            assert broken_install.broken_package(error, error.__traceback__) == named
        else:
            raise AssertionError(f"{statement} imported")


# --- a process that stops itself -------------------------------------------------------------

def _doing(statement: str, where: str) -> str:
    """Module text that runs ``statement`` as it is imported ("import"), or in the Python
    part's first call ("case") before answering rightly."""
    imports = "\n\nimport os as _os\nimport signal as _signal\n"
    if where == "import":
        return f"{imports}{statement}\n"
    return (f"{imports}_right = softmax_python\n\n\n"
            f"def softmax_python(values):\n    {statement}\n    return _right(values)\n")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="a stopped process is seen in /proc")
@pytest.mark.parametrize("where", ["case", pytest.param("import", marks=pytest.mark.exhaustive)])
def test_a_module_that_stops_its_own_process_is_said_to_be_stopped_not_looping(tmp_path, where):
    body = _doing("_os.kill(_os.getpid(), _signal.SIGSTOP)", where)
    result, seconds = grade(tmp_path, with_code(body))
    text = " ".join(rendered(result).split())
    assert "was stopped" in text and "SIGSTOP" in text, text
    assert "loop" not in text and "sys.exit" not in text, text
    if where == "case":
        assert result.parts[0].cases[0].verdict.status == "crashed"
    else:
        assert result.import_problem is not None and result.import_problem.kind == "crashed"
    assert seconds < PYTHON_PART_SECONDS  # seen stopped, not waited on to the time limit


@pytest.mark.skipif(sys.platform == "win32", reason="descriptors above 2 are the pipes on POSIX")
@pytest.mark.parametrize("where", ["case", pytest.param("import", marks=pytest.mark.exhaustive)])
def test_a_module_that_closes_the_grader_s_descriptors_is_told_so_not_sys_exit(tmp_path, where):
    result, seconds = grade(tmp_path, with_code(_doing("_os.closerange(3, 1024)", where)))
    text = " ".join(rendered(result).split())
    assert "lost its channel to the grader" in text and "os.closerange" in text, text
    assert "sys.exit" not in text and "loop" not in text, text
    assert seconds < PYTHON_PART_SECONDS


def test_a_warning_torch_raises_in_the_learners_call_is_said_at_the_learners_line(tmp_path):
    # torch says a warning of its C++ code at the innermost Python frame: inside the grader's
    # function mode, the grader's own line, which the learner cannot act on
    result, _ = grade(tmp_path, with_code("_right = softmax_triton\n\n\n"
                                          "def softmax_triton(x):\n    out = _right(x)\n"
                                          "    torch.tensor(out)  # warns: copy with clone()\n"
                                          "    return out\n"), parts=("triton",))
    said = result.learner_output
    assert "To copy construct from a tensor" in said
    assert "learning/grader" not in said and "lineage.py" not in said, said
    assert "softmax.py:" in said and "torch.tensor(out)  # warns" in said
    assert said.count("To copy construct from a tensor") <= 2, said  # once per process


@pytest.mark.interpreter
def test_a_warning_numpy_raises_in_the_interpreter_names_the_learners_line(tmp_path):
    # a float16 sum that overflows: NumPy warns from a file of its own, which the learner
    # never wrote; the warning names their line, with the line's text
    text = solution_text("reductions").replace("        x = x.to(tl.float32)\n",
                                               "        pass\n")
    result = grade_text(tmp_path, "reductions", text, ["triton"])
    printed = result.learner_output
    assert "RuntimeWarning: overflow encountered in reduce (raised inside numpy)" in printed, \
        printed
    assert "reductions.py:" in printed and "tl.sum(x, axis=1" in printed, printed
    assert "fromnumeric" not in printed, printed
