"""The course's reference code that the learner's process ran: found by where it came from, and
by what it is.

A pass computed by the course's own answers is not the learner's, and the check says so. Looking
up ``sys.modules`` at the end misses the roundabout routes: a reference solution copied to a
temporary file and imported, its text run with exec, a module imported and then deleted from
``sys.modules``. So the worker installs an audit hook (``sys.addaudithook``: it cannot be taken
out again) before the learner's module is imported. Every module body and every string the
process runs passes through an "exec" event, and every source compiled (which may become
functions without one) through a "compile" event; a code object from one of the course's reference
files is noted by its path, and one from anywhere else (but the learner's own module and the
other modules in its folder, which may match the reference as freely as it may, Python's own
library and the installed packages) is compared, function by function, with the course's
reference code: the same bytecode, names and constants (not the function's name, its variables'
names or its strings) is the same code, wherever it was copied to. A reference file opened by
the process ("open" events: ``open``, ``os.open``, ``io.open_code``, through a link too) is noted
by its name as well (opened by a name relative to a folder's descriptor, within each folder the
process holds open; its compiled cache in ``__pycache__`` as the file itself): its text read,
changed a little and run would compare as other code. A function made from a code object
(``types.FunctionType``: code loaded with marshal) is looked at as an exec'd one is.

Another process is out of the hook's sight: a forked one keeps the hook, so what is seen is sent
the moment it is seen (``report``), from whichever process saw it; but a program started afresh
(through subprocess, multiprocessing's spawn, os.system, os.exec*, os.posix_spawn or ctypes) runs
without it. So every program started is noted as such (``STARTED``): what it computed is not
known to be the learner's. A program is known by the file it runs, not by its name (a shell
linked as ``calc``, a copy of Python, a compiled program that starts one all look alike by
name). The exceptions are the tools libraries start, as files found before the learner's code
runs (``_library_tools``: the machine's C compilers, with which Triton builds its launchers on a
GPU, ``file``, ``ldconfig``, ``ld``, ``objdump``, ``uname``, the tools in Triton's package), and
then only while their arguments and environment (``TOOL_ENV``: a preload, gcc's folders of
programs) ask them to run nothing of the caller's. The function multiprocessing starts programs
with raises no event of its own: it is wrapped (``_audit_fork_exec``), its original held where
every reach for it raises an event, which is noted, as is the module loaded afresh.
"""

from __future__ import annotations
import __future__

import contextlib
import functools
import gc
import glob
import hashlib
import os
import re
import shutil
import sys
import sysconfig
import threading
import time
import types

from learning.grader.childproc import COURSE_ROOT

# The course's answers: each exercise's reference solution and catalogued versions (the files
# of these names in each folder under EXERCISES), and the reference kernels the lessons read.
EXERCISES = "learning/exercises"
ANSWERS = ("solution.py", "catalogue.py")
# Each exercise's declaration and worked example hold answers too: the float64 reference the
# grader compares with, and the worked example's steps. The worker has loaded the declaration
# (it builds the cases' inputs), so it forgets both before the learner's code runs
# (``forget_declarations``): an import of either then runs its file again, and is noted.
DECLARATIONS = ("exercise.py", "explainer.py")
# The lab's Python files as the course ships them, one path a line (written by python -m
# learning.computed): its probes hold whole kernels, counted as the course's code, while a file
# a learner adds to lab/ is their own
LAB_LIST = "learning/lab_files.txt"
REFERENCE_FILES = ("triton_kernels.py", "lab/production.py", "reference_matmul.py",
                   "reference_attention.py")
# A name in ``Watch.found`` that starts so is a program started, not a reference module
STARTED = "started: "
# What a found name starts with when the learner's code changed the watch itself
CHANGED = "changed: "
# Programs that run other programs named in their arguments or their input, which the hook
# would not see either: the shells, and the commands that run their arguments
RUNNERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "ash",
                     "busybox", "env", "nohup", "nice", "timeout", "setsid", "xargs", "stdbuf",
                     "sudo", "su", "script", "chroot", "unshare", "nsenter", "taskset",
                     "ionice", "flock", "time", "watch", "exec"})
# The programs libraries start, looked for on the machine when the check starts
# (``_library_tools``): the C compilers Triton builds its launchers with, and the tools that
# ``platform`` (``file -b`` of the Python program, on a GPU machine) and ``ctypes.util`` ask
COMPILER_NAMES = ("cc", "gcc", "clang", "c++", "g++", "clang++")
TOOL_NAMES = ("file", "ldconfig", "ld", "objdump", "uname")
# Those of them that take their arguments as data, never as a program to run
READS_DATA = frozenset({"file", "ldconfig", "objdump", "uname"})
# Environment variables that make a tool load or run code of the caller's (the loader's
# preloads and library folders, gcc's folders of programs): a library tool started with any of
# them other than the check found when it started counts as any other program
TOOL_ENV = ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "COMPILER_PATH", "GCC_EXEC_PREFIX",
            "PATH", "GCONV_PATH")
# Their options that run a program of the caller's choice (a wrapper, a folder of tools, a
# plug-in, a specs file, a linker)
COMPILER_RUNS = ("-B", "-wrapper", "-fplugin", "-specs", "--specs", "-fuse-ld", "--ld-path",
                 "-plugin", "--plugin")
_PYTHON_NAME = re.compile(r"(python|pypy)[0-9.]*[mtdw]?(\.exe)?", re.IGNORECASE)
# C functions that start a program, looked up through ctypes
_EXEC_FUNCTIONS = frozenset({"system", "popen", "execv", "execve", "execvp", "execvpe", "execl",
                             "execle", "execlp", "fexecve", "posix_spawn", "posix_spawnp",
                             "execveat", "wordexp", "syscall"})
# Functions shorter than this (bytes of bytecode) are not compared: a learner writes a
# two-line helper the same way the reference does without having seen it.
MIN_CODE_BYTES = 64


def reference_name(path: str) -> str:
    """The course's reference file at ``path`` as a module name
    ("learning.exercises.softmax.solution"), or "" when it is not one: in this checkout of the
    course or in another (a clone elsewhere holds the same answers), the lab's kernels included,
    and the course's git history (whose objects hold every version of the answers)."""
    path = os.path.abspath(path)
    root = str(COURSE_ROOT)
    if os.path.relpath(path, root).startswith(".."):
        root = _checkout_of(path)
        if not root:
            return ""
    relative = os.path.relpath(path, root).replace(os.sep, "/")
    if relative.startswith(".git/"):
        return HISTORY
    folder, _, file = relative.rpartition("/")
    if relative in REFERENCE_FILES or _lab_file(relative, root) or \
            (file in ANSWERS + DECLARATIONS and folder.rpartition("/")[0] == EXERCISES):
        return relative.removesuffix(".py").replace("/", ".")
    return ""


def _lab_file(relative: str, root: str) -> bool:
    """One of the lab's files as the course ships them (its list, read once, before the
    learner's code runs: ``Watch``), not a file a learner added there. In another checkout of
    the course, any of the lab's Python files."""
    if not (relative.startswith("lab/") and relative.endswith(".py")):
        return False
    return relative in _shipped_lab() if root == str(COURSE_ROOT) else True


@functools.cache
def _shipped_lab() -> frozenset[str]:
    """The names ``LAB_LIST`` holds (none where it cannot be read: the check refused to grade
    before the worker ran if it was not as shipped, learning.grader.integrity)."""
    try:
        with open(COURSE_ROOT / LAB_LIST, "rb") as listed:
            return frozenset(listed.read(2**20).decode("utf-8").split())
    except (OSError, UnicodeDecodeError):
        return frozenset()


# The name reference_name gives a file of the course's git history
HISTORY = "the course's history in .git"


def _checkout_of(path: str) -> str:
    """The folder above ``path`` that holds a checkout of the course (its grader's own file is
    there), or ""."""
    folder = os.path.dirname(path)
    while True:
        if os.path.isfile(os.path.join(folder, "learning", "grader", "borrowed.py")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return ""
        folder = parent


def loaded_reference_modules() -> set[str]:
    """Names of the modules in ``sys.modules`` that hold the course's reference code."""
    found = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and reference_name(path):
            found.add(name)
    return found


def _source_of_cache(path: str) -> str:
    """The source file whose compiled cache is at ``path`` ("" when it is none)."""
    import importlib.util

    try:
        return importlib.util.source_from_cache(path)
    except (ValueError, NotImplementedError):
        return ""


def _reads(args: tuple) -> bool:
    """Whether an "open" event's (path, mode, flags) open the file for reading: one opened only
    to be written is the integrity guard's concern (the course's files are put back)."""
    mode = args[1] if len(args) > 1 else None
    flags = args[2] if len(args) > 2 else None
    if isinstance(mode, str) and mode:
        return "r" in mode or "+" in mode
    if isinstance(flags, int):
        return flags & os.O_ACCMODE != os.O_WRONLY
    return True


def forget_declarations():
    """Take the exercises' declarations and worked examples out of ``sys.modules`` (and off
    their packages), and the exercises out of the registry's keeping, so that code importing
    one, or asking the registry, runs its file again, which the watch notes. The worker keeps
    what it needs of them as plain data."""
    for name in [n for n, m in list(sys.modules.items())
                 if isinstance(path := getattr(m, "__file__", None), str)
                 and os.path.basename(path) in DECLARATIONS and reference_name(path)]:
        sys.modules.pop(name, None)
        package, _, attribute = name.rpartition(".")
        if package in sys.modules:
            with contextlib.suppress(AttributeError):
                delattr(sys.modules[package], attribute)
    registry = sys.modules.get("learning.grader.registry")
    if registry is not None:  # the exercises it keeps, each holding its declaration's functions
        registry.all_exercises.cache_clear()
    # What is left of them (cycles not yet collected, the warm process's copies) is reachable
    # only through the collector's lists (gc.get_objects); frozen, it is in none of them, and
    # code that unfreezes it to list it is noted (Watch._dug)
    gc.freeze()
    _FROZEN[:] = [gc.get_freeze_count()]  # none frozen later means gc.unfreeze was called


def thaw():
    """Undo ``forget_declarations``'s freeze, once the learner's cases have run."""
    _FROZEN.clear()
    gc.unfreeze()


# How many objects forget_declarations froze (empty when it has not, or after thaw)
_FROZEN: list[int] = []


@functools.cache
def _reference_fingerprints() -> types.MappingProxyType:
    """{print: (module, function)} of the course's reference functions, compiled once, before
    the learner's code runs (``Watch``)."""
    found = {}
    for path in _reference_paths():
        try:
            with open(path, encoding="utf-8") as handle:
                module = compile(handle.read(), path, "exec", dont_inherit=True)
        except (OSError, SyntaxError, ValueError):
            continue
        name = reference_name(path)
        for function in functions(module):
            if len(function.co_code) >= MIN_CODE_BYTES:
                found.setdefault(fingerprint(function), (name, function.co_name))
    return types.MappingProxyType(found)


def _reached_into(event: str, args: tuple, watch, kept: dict) -> set[str]:
    """What of the watch an event reaches into, as the names ``Watch.install`` says were
    changed: the collector asked for what refers to it or what its read-only tables hold (the
    dictionary behind one, to change it in place), or a function of this module given other
    code."""
    if event in ("gc.get_referents", "gc.get_referrers") and args:
        # its tables, not None or a number, which any code may hand the collector
        tables = (set, frozenset, dict, tuple, types.MappingProxyType)
        held = [watch, _reference_fingerprints(),
                *(value for value in kept.values() if isinstance(value, tables) and value)]
        reached = args[0] if isinstance(args[0], tuple) else (args[0],)
        if any(thing is mine for thing in reached for mine in held):
            return {"contents, reached through gc"}
    elif event == "object.__setattr__" and len(args) > 1 and \
            isinstance(args[0], types.FunctionType) and \
            (getattr(args[0], "__module__", "") == __name__ or
             any(args[0] is mine for mine in kept.values())):
        return {f"{args[0].__name__}.{args[1]}"}
    return set()


def fingerprint(code: types.CodeType) -> str:
    """What makes two functions the same code, whatever they and their variables are called
    and whatever their docstring says."""
    consts = tuple(fingerprint(c) if isinstance(c, types.CodeType) else c
                   for index, c in enumerate(code.co_consts)
                   if index and not isinstance(c, str))  # index 0: a docstring or None
    flags = code.co_flags & ~_FUTURE_FLAGS
    text = repr((code.co_code, code.co_names, consts, code.co_argcount, flags))
    return hashlib.sha256(text.encode()).hexdigest()


# The flags a ``from __future__`` import sets on the code compiled under it: they change
# nothing in a function's own bytecode (``annotations`` changes its definition's), so that
# code compiled where one was in effect is the same code
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag


def functions(code: types.CodeType):
    """Every function's code object inside ``code`` (a module's, a class's), at any depth."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if not const.co_name.startswith("<"):
                yield const
            yield from functions(const)


class Watch:
    """The audit hook of the module's docstring; ``found`` holds what it saw, as names."""

    def __init__(self, learner_file: str, report=None):
        self.learner_file = os.path.abspath(learner_file)
        # called with every name found so far, each time one is found (in this process or a
        # fork of it: a fork's findings never reach this process's ``found``); the grader adds
        # them up, so nothing the learner's code puts in a set here can keep one from it
        self.report = report
        self.started: set[str] = set()  # programs started that run unwatched code
        self.by_path: set[str] = set()  # reference modules run from their own files
        self.copies: dict[tuple[str, str], set[str]] = {}  # (module, where): its functions
        library = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib",
                                                            "platlib")}
        library |= {sys.prefix, sys.base_prefix, sys.exec_prefix}
        self._library = tuple(os.path.join(os.path.abspath(p), "") for p in library if p)
        self._course = os.path.join(str(COURSE_ROOT), "learning", "")
        # found before the learner's code runs: a compiler the learner names later (CC set to
        # a script of theirs) is not among them
        self._tools = _library_tools()
        self._tool_env = types.MappingProxyType(_tool_env(os.environ))
        # the course's reference files by their inode too (a hard link has its own path), and
        # the learner's own modules beside theirs as they were before their code ran
        self._reference_inodes = types.MappingProxyType(
            _inodes(_reference_paths(catalogues=True)))
        _shipped_lab()  # read now: inside the hook, reading a file raises events of its own
        _reference_fingerprints()  # and the reference functions' prints, compiled now
        self._own = frozenset(_inodes(glob.glob(os.path.join(os.path.dirname(self.learner_file),
                                                             "*.py")), single=True))
        # and below their folder (a package of theirs): a file not changed since the check
        # began (its status-change time, which no program can set back)
        self._folder = os.path.join(os.path.dirname(self.learner_file), "")
        self._since = time.time()
        # the frame of the watch's own work in progress (its compile() raises events too):
        # events raised below it are its own (``_own_work``)
        self._busy_at = None

    def install(self):
        """Start watching. What the watch was made with is kept where the learner's code cannot
        reach it as plainly as the watch itself (a local of the worker's frame): a value put in
        its place is put back at the next event, and said (``CHANGED``). The collector's lists
        are frozen again, with the watch in them."""
        kept = {name: value for name, value in vars(self).items() if name != "_busy_at"}
        methods = dict(vars(Watch))
        codes = frozenset(value.__code__ for value in methods.values()
                          if isinstance(value, types.FunctionType))
        defined = {name: value for name, value in globals().items()
                   if isinstance(value, (types.FunctionType, type))}
        # the watch's own look at its stack raises events too (sys._getframe, a frame's f_code)
        looking = threading.local()

        def hook(event: str, args: tuple):
            if event == "sys._getframe" or getattr(looking, "on", False):
                return
            if event == "builtins.id" or event == "object.__getattr__" and args and \
                    type(args[0]) is types.FunctionType:
                # an id taken, a function's code or defaults read: nothing below acts on them
                # (the hold on fork_exec is a generator), and the compile check's look at
                # Triton's objects takes thousands at each launch; what was changed of the
                # watch is still put back before the next event it acts on
                return
            looking.on = True
            try:
                if self._busy_at is not None and self._own_work(codes):
                    return
            finally:
                looking.on = False
            state, now, module = vars(self), vars(Watch), globals()
            replaced = [name for name, value in defined.items() if module.get(name) is not value]
            module.update({name: defined[name] for name in replaced})
            changed = sorted({name for name, value in kept.items() if state.get(name) is not value}
                             | (set(state) - set(kept) - {"_busy_at"})  # a method shadowed
                             | {name for name, value in methods.items()
                                if now.get(name) is not value} | (set(now) - set(methods))
                             | set(replaced) | _reached_into(event, args, self, kept))
            if changed:
                for name in set(state) - set(kept) - {"_busy_at"}:
                    del state[name]
                state.update(kept)
                for name in set(now) - set(methods):
                    delattr(Watch, name)
                for name, value in methods.items():
                    if now.get(name) is not value:
                        setattr(Watch, name, value)
                self.by_path.add(f"{CHANGED}the check's watch of the course's code (its "
                                 f"{', '.join(name.lstrip('_') for name in changed)})")
            self._hook(event, args)
            if changed:
                self._tell()

        sys.addaudithook(hook)
        _audit_fork_exec()
        gc.freeze()

    def _begin(self):
        """Mark the caller's work as the watch's own; returns what ``_end`` puts back."""
        busy, self._busy_at = self._busy_at, sys._getframe(1)
        return busy

    def _end(self, busy):
        self._busy_at = busy

    def _own_work(self, codes: frozenset) -> bool:
        """Whether the event being handled comes from the watch's own work: the frame that
        began it is on this thread's stack, running one of the watch's methods (``codes``,
        taken as it was installed). A mark set by the learner's code (a frame of its own,
        whatever globals it runs with) is not; nor is another thread's work, whose events are
        handled as they come."""
        busy = self._busy_at
        frame = sys._getframe(2)
        while frame is not None:
            if frame is busy:
                return frame.f_code in codes
            frame = frame.f_back
        return False

    def _hook(self, event: str, args: tuple):
        if not args:  # (the watch's own work was left out by the hook of ``install``)
            return
        if event in _DIGS:
            try:
                if self._dug(event, args):
                    return
            except Exception:  # noqa: BLE001 - the learner's import or attribute goes on
                return
        if event in _STARTS:
            # not marked as the watch's own work: reading the arguments can run the learner's
            # code (a path object's __fspath__), whose events must still be seen
            try:
                self._started(event, args)
            except Exception:  # noqa: BLE001 - the learner's call goes on, whatever this is
                pass
            return
        if event == "open":
            if _reads(args):
                self._opened(args[0])
            return
        if event in ("exec", "function.__new__") and isinstance(args[0], types.CodeType):
            # a function made from a code object runs no exec: code loaded with marshal from
            # the reference's cached bytecode, say
            code = args[0]
        elif event == "compile" and isinstance(args[0], (str, bytes)) and len(args) > 1:
            # source compiled into code objects that may never pass through exec (functions
            # made with types.FunctionType): compiled once more here, to be compared
            code = self._compiled(args[0], args[1])
        else:
            return
        busy = self._begin()
        try:
            if code is not None:
                self._look(code, by_content=event == "compile")
                self._tell()
        except Exception:  # noqa: BLE001 - the learner's exec must go on, whatever this is
            pass
        finally:
            self._end(busy)

    def _dug(self, event: str, args: tuple) -> bool:
        """A reach past the watch: the original fork_exec reached for through the generator
        that holds it, or the module that has it loaded afresh (taken out of ``sys.modules``
        and imported again), noted as a program started (the only use of either is to start
        one unseen); or the collector's lists read after ``forget_declarations``'s freeze was
        undone, noted as the declarations loaded."""
        if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents") and \
                _FROZEN and gc.get_freeze_count() == 0:
            # the freeze undone (gc.unfreeze empties it; frozen objects freed only shrink it),
            # then the collector's lists read: they hold the declarations
            self.by_path.add(UNFROZEN)
            self._tell()
            return True
        if event == "import":
            if args[0] != "_posixsubprocess" or not _KEEPERS:
                return False
            what = "a program, through _posixsubprocess loaded again (past the check's watch)"
        elif event != "object.__getattr__" and event != "gc.get_referents":
            return False
        else:
            reached = args[0] if event == "object.__getattr__" else args[0] if \
                isinstance(args[0], tuple) else ()
            reached = reached if isinstance(reached, tuple) else (reached,)
            if not any(thing is keeper for thing in reached for keeper in _KEEPERS):
                return False
            what = "a program, through the check's own hold on fork_exec"
        self.started.add(what)
        self._tell()
        return True

    def check_wrapper(self):
        """Note a program started past the watch where the module that starts programs is no
        longer the one wrapped, or its function no longer the wrapper: where it is built into
        Python, a fresh import of it raises no audit event (``_dug``), so what it left behind is
        looked at once the cases ran."""
        if not _WRAPPED:
            return
        module = sys.modules.get("_posixsubprocess")
        if module is not None and not (any(module is m for m in _WRAPPED) and
                                       getattr(module.fork_exec, "audited", False)):
            self.started.add("a program, through _posixsubprocess loaded again (past the "
                             "check's watch)")
            self._tell()

    def _tell(self):
        """Report everything found so far (the grader adds the names up)."""
        if self.report is None:
            return
        for name in sorted(self.found):
            self.report(name)

    def _started(self, event: str, args: tuple):
        """A program started: noted when it runs code the hook cannot watch."""
        if event == "os.system":
            what = f"a shell ({_shown_command(args[0])})"
        elif event == "ctypes.dlsym":
            name = args[1] if len(args) > 1 else ""
            if not isinstance(name, str) or name not in _EXEC_FUNCTIONS:
                return
            what = f"a program, through ctypes ({name})"
        else:
            try:
                program, argv = _STARTS[event](args)
                env = _ENV_AT.get(event)
                env = args[env] if env is not None and len(args) > env else None
                changed = _tool_env(os.environ if env is None else env) != self._tool_env
                if not changed and not _unwatched(program, argv, self._tools):
                    return
                what = f"{os.path.basename(_decoded(program)) or 'a program'} " \
                       f"({_shown_command(argv)})"
            except Exception:  # noqa: BLE001 - arguments it cannot read: a program all the same
                what = "a program whose name the check could not read"
        self.started.add(what)
        self._tell()

    def _reference(self, path: str) -> str:
        """The course's reference module at ``path``, by its name or, through a hard link
        under another, by its inode; "" when it is none."""
        name = reference_name(path)
        if name:
            return name
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return ""
        return self._reference_inodes.get((info.st_dev, info.st_ino), "")

    def _own_module(self, path: str) -> bool:
        """A module of the learner's own: beside their file, or in a folder below it that is
        not the course's, as it was before their code ran."""
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return False
        if (info.st_dev, info.st_ino) in self._own:
            return True
        # (a file's times come from a clock that may lag by a few milliseconds: a margin)
        return path.startswith(self._folder) and not path.startswith(self._course) and \
            info.st_ctime < self._since - 0.05

    def _opened(self, path):
        """A reference file opened (to be read, then changed and run, say): noted by its name,
        as an import of it would be. Its own import opens it too, and is noted the same."""
        if isinstance(path, (str, bytes, os.PathLike)):
            try:
                path = os.fsdecode(path)
                name = self._reference(os.path.realpath(path))
                if not name and not os.path.isabs(path):
                    name = self._reference_in_open_folder(path)
                if not name and path.endswith(".pyc"):  # a reference's cached bytecode
                    name = self._reference(_source_of_cache(os.path.realpath(path)))
            except (TypeError, ValueError, OSError):
                return
            if name:  # told even where a set of the watch's already held it
                self.by_path.add(name)
                busy = self._begin()
                try:
                    self._tell()
                except Exception:  # noqa: BLE001 - the learner's open goes on
                    pass
                finally:
                    self._end(busy)

    def _reference_in_open_folder(self, path: str) -> str:
        """The reference a relative ``path`` names within a folder this process holds open: the
        open event does not say which folder ``os.open(path, dir_fd=...)`` was given, so every
        open folder is tried."""
        busy = self._begin()  # listing the descriptors raises events too
        try:
            for fd in os.listdir("/proc/self/fd"):
                with contextlib.suppress(OSError, ValueError):
                    folder = os.readlink(f"/proc/self/fd/{fd}")
                    if folder.startswith("/") and os.path.isdir(folder):
                        name = self._reference(os.path.realpath(os.path.join(folder, path)))
                        if name:
                            return name
        except OSError:  # no /proc to ask
            pass
        finally:
            self._end(busy)
        return ""

    def _compiled(self, source, filename) -> types.CodeType | None:
        """The code ``source`` compiles to, to be looked at; None for a file imported as it
        is on disk (its exec event follows), judged by its path. Source compiled under a
        file's name that is not that file's text (the reference's text under the learner's
        own file name, or under one of the course's) is compared by content."""
        name = filename if isinstance(filename, str) else "<unknown>"
        if not name.startswith("<") and _is_file_text(name, source):
            path = os.path.abspath(name)
            if path == self.learner_file or path.startswith(self._library) \
                    or path.startswith(self._course) or \
                    (self._own_module(path) and not self._reference(path)):
                return None
        busy = self._begin()
        try:
            return compile(source, name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, TypeError):
            return None
        finally:
            self._end(busy)

    def _look(self, code: types.CodeType, by_content: bool = False):
        path = code.co_filename
        if not path.startswith("<") and not by_content:
            path = os.path.abspath(path)
            if path == self.learner_file:
                return
            name = self._reference(path)
            if name:
                self.by_path.add(name)
                return
            if self._own_module(path):
                # a module of the learner's own beside theirs: as free to match the reference
                # as their own file is (the lesson names the steps and their variables); one
                # that appeared while the check ran is compared like any other
                return
            if path.startswith(self._library) or path.startswith(self._course):
                return
        references = self._fingerprints()
        # a function's own code is compared too (one made with types.FunctionType), a module's
        # body is not (its functions are)
        own = [code] if not code.co_name.startswith("<") else []
        for function in [*own, *functions(code)]:
            if len(function.co_code) < MIN_CODE_BYTES:
                continue
            match = references.get(fingerprint(function))
            if not match:
                continue
            if not path.startswith("<") and self._reference(os.path.abspath(path)):
                # compiled under a reference file's own name (Triton's interpreter compiles
                # each kernel's source again as it decorates it): the reference was loaded,
                # not copied anywhere
                self.by_path.add(match[0])
                continue
            where = os.path.basename(path) if not path.startswith("<") else path
            self.copies.setdefault((match[0], where), set()).add(match[1])

    @property
    def found(self) -> set[str]:
        """What was seen, one name each: "learning.exercises.softmax.solution", or, for a copy,
        "learning.exercises.softmax.solution (softmax_python), copied into mine.py"."""
        return self.by_path | {f"{module} ({', '.join(sorted(names))}), copied into {where}"
                               for (module, where), names in self.copies.items()} | \
            {STARTED + what for what in self.started}

    def _fingerprints(self):
        return _reference_fingerprints()


def _program_and_argv(args: tuple, program_at: int, argv_at: int, env_at: int | None = None):
    program = args[program_at]
    env = args[env_at] if env_at is not None and len(args) > env_at else None
    return _looked_up(program, env), list(args[argv_at] or ())


def _popen(executable, argv, cwd=None, env=None):
    argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or ())
    program = _decoded(executable or (argv[0] if argv else ""))
    if os.sep in program and cwd is not None:
        program = os.path.join(_decoded(cwd), program)
    return _looked_up(program, env), argv


def _looked_up(program, env) -> str:
    """Where a bare program name is found on the PATH the program is started with (the
    ``env`` given to it, where one is), as the system would look for it."""
    name = _decoded(program)
    if not name or os.sep in name:
        return name
    path = None
    if isinstance(env, dict):
        path = next((_decoded(v) for k, v in env.items() if _decoded(k) == "PATH"), "")
    return shutil.which(name, path=path) or name


def _first_file(executables) -> str:
    """Of the paths a start will try in turn (subprocess's on the PATH), the one that runs."""
    paths = [_decoded(path) for path in executables or ()]
    found = [path for path in paths if os.path.isfile(path) and os.access(path, os.X_OK)]
    return (found or paths or [""])[0]


# The audit events of a reach past the watch of program starts (Watch._dug)
_DIGS = frozenset({"import", "object.__getattr__", "gc.get_referents", "gc.get_objects",
                   "gc.get_referrers"})
# The name noted for the exercises' declarations reached through the collector, unfrozen
UNFROZEN = "learning.exercises (declarations reached through gc.unfreeze and gc's lists)"
# The audit events of a program's start: the program and its arguments, from the event's
# Where each start's environment is among the event's arguments (None: the process's own)
_ENV_AT = {"os.exec": 2, "os.posix_spawn": 2, "os.spawn": 3, "subprocess.Popen": 3}
_STARTS = {
    "os.exec": lambda args: _program_and_argv(args, 0, 1),
    "os.posix_spawn": lambda args: _program_and_argv(args, 0, 1, 2),
    "os.spawn": lambda args: _program_and_argv(args, 1, 2),
    "subprocess.Popen": lambda args: _popen(*args[:4]),
    "learning.fork_exec": lambda args: (_first_file(args[1]), list(args[0] or ())),
    "os.system": None,
    "ctypes.dlsym": None,
}


def _audit_fork_exec():
    """Raise an audit event where multiprocessing starts a program (its spawn starts a fresh
    Python): the call it makes (_posixsubprocess.fork_exec) raises none of its own, unlike
    subprocess's, which has subprocess.Popen. The original is held by a suspended generator
    (``_keeping``), not by the wrapper's closure: a closure's cell is read without an audit
    event, a generator's frame is not, and each reach for it is noted (``Watch._hook``)."""
    try:
        import _posixsubprocess
    except ImportError:  # Windows
        return
    if getattr(_posixsubprocess.fork_exec, "audited", False):
        return
    keeper = _keeping(_posixsubprocess.fork_exec)
    next(keeper)
    _KEEPERS.append(keeper)
    _WRAPPED.append(_posixsubprocess)
    one_at_a_time = threading.Lock()  # a generator runs one call at a time

    def fork_exec(*args):
        with one_at_a_time:
            started, outcome = keeper.send(args)
        if started:
            return outcome
        raise outcome

    fork_exec.audited = True
    _posixsubprocess.fork_exec = fork_exec


def _keeping(original):
    """Run ``original`` on the arguments sent in, each call audited here (a caller that has
    the generator itself starts nothing unseen either); what it raised comes back without its
    traceback, whose frames would lead to this one."""
    outcome = (True, None)
    while True:
        args = yield outcome
        sys.audit("learning.fork_exec", args[0] if args else (), args[1] if len(args) > 1
                  else ())
        try:
            outcome = (True, original(*args))
        except BaseException as error:  # noqa: BLE001 - handed back to the caller
            outcome = (False, error.with_traceback(None))


# The generators holding the original fork_exec, and the module whose fork_exec was wrapped
# (``_audit_fork_exec``)
_KEEPERS: list = []
_WRAPPED: list = []


def _unwatched(program, argv: list, tools: frozenset = frozenset()) -> bool:
    """Whether starting ``program`` with ``argv`` runs code out of the hook's sight: any
    program but the library ``tools`` (files, links followed: ``_library_tools``), and one of
    those too (but the ones in ``READS_DATA``) where its arguments ask it to run something of
    the caller's: an option that names a program or a folder of tools (``COMPILER_RUNS``: ``gcc
    -wrapper python3,...``), a file of further arguments (``@file``), or a word that names a
    Python or a program that runs others. An option's own text is not such a word
    (``-I/usr/include/python3.12``, which Triton's launcher build passes to the compiler), only
    a value after its ``=``."""
    path = _resolved(_decoded(program))
    if not path or path not in tools:
        return True
    if os.path.basename(path) in READS_DATA:
        return False
    for word in (_decoded(item) for item in list(argv)[1:]):
        # each piece too: gcc hands -Wl,-plugin,x to the linker
        if any(piece.startswith(COMPILER_RUNS) or piece.startswith("@")
               for piece in word.split(",")):
            return True
        if word.startswith("-"):
            word = word.partition("=")[2]
        if any(_runs_others(piece) for piece in word.split(",")):
            return True
    return False


def _resolved(program: str) -> str:
    """The file ``program`` runs, links followed ("" where there is none); a bare name is
    looked for on this process's PATH (the start's own was looked on already: ``_STARTS``)."""
    path = program if os.sep in program else shutil.which(program)
    return os.path.realpath(path) if path else ""


def _library_tools() -> frozenset:
    """The files of the programs libraries start: the machine's C compilers (``CC`` and ``CXX``
    as set now, ``cc``, ``gcc``, ...), the tools ``ctypes.util`` and ``platform`` ask (``file``,
    ``ldconfig``, ``ld``, ``objdump``, ``uname``) and those in Triton's package (``ptxas``)."""
    names = [os.environ.get("CC", ""), os.environ.get("CXX", ""), *COMPILER_NAMES, *TOOL_NAMES]
    found = {_resolved(name) for name in names if name}
    found |= {_resolved(os.path.join(folder, name)) for folder in ("/sbin", "/usr/sbin")
              for name in TOOL_NAMES}
    try:
        import importlib.util

        spec = importlib.util.find_spec("triton")
        folders = list(spec.submodule_search_locations or ()) if spec else []
    except (ImportError, ValueError):
        folders = []
    for folder in folders:
        backends = os.path.join(folder, "backends")
        for backend in os.listdir(backends) if os.path.isdir(backends) else ():
            binaries = os.path.join(backends, backend, "bin")
            if os.path.isdir(binaries):
                found |= {_resolved(os.path.join(binaries, name)) for name in os.listdir(binaries)}
    return frozenset(path for path in found if path and os.path.isfile(path))


def _tool_env(env) -> dict:
    """The TOOL_ENV variables of ``env`` (a mapping of str or bytes)."""
    try:
        found = {_decoded(key): _decoded(value) for key, value in dict(env).items()}
    except (TypeError, ValueError):
        return {"": "unreadable"}
    return {name: found.get(name) for name in TOOL_ENV}


def _decoded(item) -> str:
    try:
        return os.fsdecode(item)
    except TypeError:
        return ""


def _runs_others(word: str) -> bool:
    """A Python interpreter, or a program that runs others, by the name in ``word``."""
    name = os.path.basename(word.strip())
    return name in RUNNERS or bool(_PYTHON_NAME.fullmatch(name))


def _shown_command(argv) -> str:
    """A command, shown in a note: its words, cut short."""
    if isinstance(argv, (str, bytes)):
        words = [os.fsdecode(argv)]
    else:
        words = []
        for item in argv:
            try:
                words.append(os.fsdecode(item))
            except TypeError:
                words.append(repr(item))
    text = " ".join(words)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_file_text(path: str, source) -> bool:
    """Whether ``source`` is the text of the file at ``path``, as an import compiles it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    text = source.encode("utf-8", errors="surrogatepass") if isinstance(source, str) else source
    return data == text or data.replace(b"\r\n", b"\n") == text.replace(b"\r\n", b"\n")


def _inodes(paths, single: bool = False) -> dict:
    """(device, inode) of each file of ``paths`` that exists, to its reference module name;
    with ``single``, only the files with no other link (a hard link made beforehand to a
    reference is found by the reference's own inodes)."""
    found = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        if not single or info.st_nlink == 1:
            found[(info.st_dev, info.st_ino)] = reference_name(path)
    return found


def _reference_paths(catalogues: bool = False) -> list[str]:
    """The reference solutions and kernels (the catalogue's versions are mostly wrong on
    purpose: a copy of one is the learner's mistake to own; ``catalogues`` adds them, for
    finding the files themselves)."""
    names = ("*/solution.py", "*/catalogue.py") if catalogues else ("*/solution.py",)
    paths = sorted(str(p) for name in names for p in (COURSE_ROOT / EXERCISES).glob(name))
    # the lab's probes hold whole kernels too (lab/probes/backward_variants.py, say)
    others = [str(COURSE_ROOT / name) for name in REFERENCE_FILES] + \
        [str(COURSE_ROOT / name) for name in sorted(_shipped_lab())]
    return paths + [p for p in dict.fromkeys(others) if os.path.exists(p)]
