"""The course's reference code that the learner's process ran: found by where it came from, and
by what it is.

A pass computed by the course's own answers is not the learner's, and the check says so. Looking
up ``sys.modules`` at the end misses the roundabout routes: a reference solution copied to a
temporary file and imported, its text run with exec, a module imported and then deleted from
``sys.modules``. So the worker installs an audit hook (``sys.addaudithook``: it cannot be taken
out again) before the learner's module is imported. Every module body and every string the
process runs passes through an "exec" event, and every source compiled (which may become
functions without one) through a "compile" event; a code object from one of the course's reference
files is noted by its path, and one from anywhere else (but the learner's own module, Python's
own library and the installed packages) is compared, function by function, with the course's
reference code: the same bytecode, names and constants (not the function's name, its variables'
names or its strings) is the same code, wherever it was copied to. A reference file opened by
the process ("open" events: ``open``, ``os.open``, ``io.open_code``, through a link too) is noted
by its name as well: its text read, changed a little and run would compare as other code.
"""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
import types

from learning.grader.childproc import COURSE_ROOT

# The course's answers: each exercise's reference solution and catalogued versions (the files
# of these names in each folder under EXERCISES), and the reference kernels the lessons read.
EXERCISES = "learning/exercises"
ANSWERS = ("solution.py", "catalogue.py")
REFERENCE_FILES = ("triton_kernels.py", "lab/production.py", "reference_matmul.py",
                   "reference_attention.py")
# Functions shorter than this (bytes of bytecode) are not compared: a learner writes a
# two-line helper the same way the reference does without having seen it.
MIN_CODE_BYTES = 64


def reference_name(path: str) -> str:
    """The course's reference file at ``path`` as a module name
    ("learning.exercises.softmax.solution"), or "" when it is not one."""
    path = os.path.abspath(path)
    relative = os.path.relpath(path, COURSE_ROOT)
    if relative.startswith(".."):
        return ""
    relative = relative.replace(os.sep, "/")
    folder, _, file = relative.rpartition("/")
    if relative in REFERENCE_FILES or (file in ANSWERS and folder.rpartition("/")[0] == EXERCISES):
        return relative.removesuffix(".py").replace("/", ".")
    return ""


def loaded_reference_modules() -> set[str]:
    """Names of the modules in ``sys.modules`` that hold the course's reference code."""
    found = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and reference_name(path):
            found.add(name)
    return found


def fingerprint(code: types.CodeType) -> str:
    """What makes two functions the same code, whatever they and their variables are called
    and whatever their docstring says."""
    consts = tuple(fingerprint(c) if isinstance(c, types.CodeType) else c
                   for index, c in enumerate(code.co_consts)
                   if index and not isinstance(c, str))  # index 0: a docstring or None
    text = repr((code.co_code, code.co_names, consts, code.co_argcount, code.co_flags))
    return hashlib.sha256(text.encode()).hexdigest()


def functions(code: types.CodeType):
    """Every function's code object inside ``code`` (a module's, a class's), at any depth."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if not const.co_name.startswith("<"):
                yield const
            yield from functions(const)


class Watch:
    """The audit hook of the module's docstring; ``found`` holds what it saw, as names."""

    def __init__(self, learner_file: str):
        self.learner_file = os.path.abspath(learner_file)
        self.by_path: set[str] = set()  # reference modules run from their own files
        self.copies: dict[tuple[str, str], set[str]] = {}  # (module, where): its functions
        self._references: dict[str, tuple[str, str]] | None = None  # print: (module, function)
        library = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib",
                                                            "platlib")}
        library |= {sys.prefix, sys.base_prefix, sys.exec_prefix}
        self._library = tuple(os.path.join(os.path.abspath(p), "") for p in library if p)
        self._course = os.path.join(str(COURSE_ROOT), "learning", "")
        self._busy = False  # inside the hook: its own compile() raises events too

    def install(self):
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple):
        if self._busy or not args:
            return
        if event == "open":
            self._opened(args[0])
            return
        if event == "exec" and isinstance(args[0], types.CodeType):
            code = args[0]
        elif event == "compile" and isinstance(args[0], (str, bytes)) and len(args) > 1:
            # source compiled into code objects that may never pass through exec (functions
            # made with types.FunctionType): compiled once more here, to be compared
            code = self._compiled(args[0], args[1])
        else:
            return
        try:
            self._busy = True
            if code is not None:
                self._look(code, by_content=event == "compile")
        except Exception:  # noqa: BLE001 - the learner's exec must go on, whatever this is
            pass
        finally:
            self._busy = False

    def _opened(self, path):
        """A reference file opened (to be read, then changed and run, say): noted by its name,
        as an import of it would be. Its own import opens it too, and is noted the same."""
        if isinstance(path, (str, bytes, os.PathLike)):
            try:
                name = reference_name(os.path.realpath(os.fsdecode(path)))
            except (TypeError, ValueError, OSError):
                return
            if name:
                self.by_path.add(name)

    def _compiled(self, source, filename) -> types.CodeType | None:
        """The code ``source`` compiles to, to be looked at; None for a file imported as it
        is on disk (its exec event follows), judged by its path. Source compiled under a
        file's name that is not that file's text (the reference's text under the learner's
        own file name, or under one of the course's) is compared by content."""
        name = filename if isinstance(filename, str) else "<unknown>"
        if not name.startswith("<") and _is_file_text(name, source):
            path = os.path.abspath(name)
            if path == self.learner_file or path.startswith(self._library) \
                    or path.startswith(self._course):
                return None
        self._busy = True
        try:
            return compile(source, name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, TypeError):
            return None
        finally:
            self._busy = False

    def _look(self, code: types.CodeType, by_content: bool = False):
        path = code.co_filename
        if not path.startswith("<") and not by_content:
            path = os.path.abspath(path)
            if path == self.learner_file:
                return
            name = reference_name(path)
            if name:
                self.by_path.add(name)
                return
            if path.startswith(self._library) or path.startswith(self._course):
                return
        references = self._fingerprints()
        for function in functions(code):
            if len(function.co_code) < MIN_CODE_BYTES:
                continue
            match = references.get(fingerprint(function))
            if match:
                where = os.path.basename(path) if not path.startswith("<") else path
                self.copies.setdefault((match[0], where), set()).add(match[1])

    @property
    def found(self) -> set[str]:
        """What was seen, one name each: "learning.exercises.softmax.solution", or, for a copy,
        "learning.exercises.softmax.solution (softmax_python), copied into mine.py"."""
        return self.by_path | {f"{module} ({', '.join(sorted(names))}), copied into {where}"
                               for (module, where), names in self.copies.items()}

    def _fingerprints(self) -> dict[str, tuple[str, str]]:
        """The course's reference functions, compiled here the first time they are needed."""
        if self._references is None:
            self._references = {}
            for path in _reference_paths():
                try:
                    with open(path, encoding="utf-8") as handle:
                        module = compile(handle.read(), path, "exec", dont_inherit=True)
                except (OSError, SyntaxError, ValueError):
                    continue
                name = reference_name(path)
                for function in functions(module):
                    if len(function.co_code) >= MIN_CODE_BYTES:
                        self._references.setdefault(fingerprint(function),
                                                    (name, function.co_name))
        return self._references


def _is_file_text(path: str, source) -> bool:
    """Whether ``source`` is the text of the file at ``path``, as an import compiles it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    text = source.encode("utf-8", errors="surrogatepass") if isinstance(source, str) else source
    return data == text or data.replace(b"\r\n", b"\n") == text.replace(b"\r\n", b"\n")


def _reference_paths() -> list[str]:
    """The reference solutions and kernels (the catalogue's versions are mostly wrong on
    purpose: a copy of one is the learner's mistake to own)."""
    paths = sorted(str(p) for p in (COURSE_ROOT / EXERCISES).glob("*/solution.py"))
    return paths + [str(COURSE_ROOT / name) for name in REFERENCE_FILES
                    if (COURSE_ROOT / name).exists()]
