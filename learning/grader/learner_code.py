"""The learner's code as the grader's child processes meet it: importing their module, and
what it raised, put into words.

Used in the learner's process (``learning.grader.worker``, the memory map's run) and in the GPU
compile check's (``learning.grader.gpu_compile``), which imports the module once more.
"""

from __future__ import annotations

import builtins
import difflib
import importlib.machinery
import importlib.util
import os
import re
import sys
import traceback

from learning.grader.returned import ImportProblem


def append_path(folder: str) -> None:
    """``folder`` (the learner's) last on the path, taken from anywhere before: their module
    can import a file of theirs beside it, and no file there shadows a module of Python's or
    an installed one that the grader's code imports after it (copy, numpy, triton)."""
    while folder in sys.path:
        sys.path.remove(folder)
    sys.path.append(folder)

MAX_MESSAGE = 2000
MAX_MESSAGE_LINES = 30


def cut(text: str, limit: int = MAX_MESSAGE, max_lines: int = MAX_MESSAGE_LINES) -> str:
    """At most ``limit`` characters and ``max_lines`` lines, saying what was cut."""
    text = str.__str__(text)  # plain, whatever subclass of str the learner's code made
    lines = text.splitlines()
    if len(lines) > max_lines:
        text = "\n".join(lines[:max_lines]) + f"\n... [cut: {len(lines) - max_lines} more lines]"
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [cut: {len(text) - limit} more characters]"


def safe_str(value) -> str:
    """str() of something the learner made, which may itself raise (a broken __str__)."""
    try:
        # a str subclass made plain: it must cross to the grader as data, nothing more
        return str.__str__(str(value))
    except BaseException as exc:  # noqa: BLE001 - anything the learner's __str__ raises
        return f"<could not be shown: its __str__ raised {type(exc).__name__}>"


def suggestion(exc: BaseException) -> str:
    """"; did you mean 'maximum'?" for a misspelt name: a NameError whose name is close to one
    the failing line could see (its function's variables, its module's names, the builtins),
    or an AttributeError of a module or object close to one of its attributes (tl.maximun).
    Python 3.12's own traceback says as much; earlier versions print it only at the top level.
    "" where no name is close, or where the exception or object resists being read."""
    try:
        return _closest_name(exc)
    except BaseException:  # noqa: BLE001 - the learner's exception or object may raise anything
        return ""


def dot_shapes(exc: BaseException) -> str:
    """"; tl.dot was given blocks of shape (16, 32) and (16, 16)" when ``exc`` (or an
    exception it wraps) was raised inside Triton's ``tl.dot``, whose own message names no
    shape; "" otherwise. Read from the frame of ``dot`` in triton.language.core."""
    try:
        seen, current = set(), exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            trace = current.__traceback__
            while trace is not None:
                frame = trace.tb_frame
                if frame.f_code.co_name == "dot" and \
                        frame.f_code.co_filename.replace("\\", "/").endswith(
                            "triton/language/core.py"):
                    shapes = [_shape(frame.f_locals.get(n)) for n in ("input", "other")]
                    if all(shapes):
                        return f"; tl.dot was given blocks of shape {shapes[0]} and {shapes[1]}"
                trace = trace.tb_next
            current = current.__cause__ or current.__context__
    except Exception:  # noqa: BLE001 - a detail, never worth a failure of its own
        pass
    return ""


def _shape(value) -> str:
    shape = getattr(value, "shape", None)
    if shape is None:
        return ""
    return "(" + ", ".join(str(getattr(d, "value", d)) for d in shape) + ")"


def _closest_name(exc: BaseException) -> str:
    wrong = getattr(exc, "name", None)
    if not isinstance(wrong, str) or not wrong:
        return ""
    if isinstance(exc, NameError):
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        # the failing frame's names, and those of the frames of its file that called it (a
        # list comprehension before Python 3.12 is a frame of its own, inside the function)
        own = [f for f in frames if f.f_code.co_filename == frames[-1].f_code.co_filename]
        names = [name for f in own for name in (*f.f_locals, *f.f_globals)] + dir(builtins)
    elif isinstance(exc, AttributeError) and getattr(exc, "obj", None) is not None:
        names = dir(exc.obj)
    else:
        return ""
    names = [n for n in names if isinstance(n, str) and n != wrong and not n.startswith("__")]
    close = difflib.get_close_matches(wrong, names, n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""


def root_cause(exc: BaseException) -> BaseException:
    """The first exception of a chain: Triton's interpreter wraps a kernel's error in its own."""
    seen = {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen:
        exc = exc.__cause__
        seen.add(id(exc))
    return exc


def learner_traceback(exc: BaseException, learner_file: str) -> str:
    """The traceback restricted to frames in the learner's file, or all but the grader's."""
    frames = []
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 8:
        chain.append(chain[-1].__cause__)
    for link in chain:  # outermost call first, the kernel's line last
        for frame in traceback.extract_tb(link.__traceback__):
            if all((frame.filename, frame.lineno) != (f.filename, f.lineno) for f in frames):
                frames.append(frame)
    exc = root_cause(exc)
    learner_file = os.path.abspath(learner_file)
    mine = [f for f in frames if os.path.abspath(f.filename) == learner_file]
    if not mine:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # learning/
        mine = [f for f in frames if not os.path.abspath(f.filename).startswith(here)]
    # With no frame of theirs (the grader's call itself failed), the exception line alone.
    lines = ["Traceback (most recent call last, your code only):\n"] if mine else []
    lines += traceback.format_list(mine)
    lines += traceback.format_exception_only(type(exc), exc)
    return cut("".join(lines), 4 * MAX_MESSAGE, 4 * MAX_MESSAGE_LINES)


class FromSource(importlib.machinery.SourceFileLoader):
    """Runs the file as it is now, never a compiled cache beside it: a cache that does not
    check its source (hash-based, unchecked) would run whatever another program compiled into
    it, and go on doing so after every edit."""

    def get_code(self, fullname):
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)


def import_learner_module(path: str) -> tuple[object | None, ImportProblem | None]:
    """Import the learner's file under its own name, reporting any failure as data."""
    name = os.path.splitext(os.path.basename(path))[0]
    if not os.path.exists(path):
        return None, ImportProblem("missing-file", f"{path} does not exist")
    try:
        spec = importlib.util.spec_from_file_location(name, path, loader=FromSource(name, path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        # (a NUL byte or bytes that are no UTF-8 are the whole file's fault: no line)
        line = f", line {exc.lineno}" if exc.lineno else ""
        where = f"{os.path.basename(exc.filename or path)}{line}"
        text = (exc.text or "").rstrip()
        message = f"syntax error in {where}: {exc.msg}"
        return None, ImportProblem("syntax", message, text, details={"line": exc.lineno})
    except ImportError as exc:
        message = f"importing {os.path.basename(path)} failed: {_missing_name(exc)}"
        return None, ImportProblem("import", cut(message), learner_traceback(exc, path),
                                   details={"name": getattr(exc, "name", None)})
    except SystemExit as exc:
        message = (f"{os.path.basename(path)} ended the program while being imported "
                   f"(SystemExit: {safe_str(exc.code)}): code at the top level of the module "
                   "runs on import; keep it inside functions")
        return None, ImportProblem("exited", cut(message), learner_traceback(exc, path))
    except BaseException as exc:  # the learner's module may raise anything
        message = f"importing {os.path.basename(path)} raised {type(exc).__name__}: " \
                  f"{safe_str(exc)}"
        return None, ImportProblem("exception", cut(message), learner_traceback(exc, path))
    return module, None


def _missing_name(exc: ImportError) -> str:
    """What could not be imported, in words: a module, or a name inside a module."""
    text = safe_str(exc)
    found = re.match(r"cannot import name '([^']+)' from '([^']+)'", text)
    if found:
        return (f"module {found[2]} has no name {found[1]!r}: check the spelling, or import "
                f"it from the module that defines it ({text})")
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return (f"no module named {exc.name!r}: is it installed, and is the name spelt "
                f"right? ({text})")
    return f"cannot import {getattr(exc, 'name', None) or text} ({text})"
