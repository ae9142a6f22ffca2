"""Installed code a process has loaded (this Python's own library and site-packages), and the
stamps of its files: what the check compares before and after the learner's code runs
(``learning.grader.integrity``), sent by each worker before that code starts
(``learning.grader.loading``)."""

from __future__ import annotations

import contextlib
import os
import site
import sys


def installed_prefixes() -> tuple[str, ...]:
    """This Python's own folders and its site-packages, each ending in a separator."""
    return tuple(os.path.join(os.path.abspath(p), "") for p in
                 {sys.prefix, sys.base_prefix, sys.exec_prefix, *site_folders()})


def is_installed(path: str, prefixes: tuple[str, ...] | None = None) -> bool:
    """Whether ``path`` is installed code of this Python: its own library or site-packages (the
    course's files are kept whole elsewhere; a test's, a learner's or another checkout's module
    is not this check's installed code)."""
    return os.path.abspath(path).startswith(prefixes or installed_prefixes())


def compiled_caches(paths) -> list[str]:
    """The compiled cache Python would load in place of each source file in ``paths``."""
    import importlib.util

    found = []
    for path in paths:
        if path.endswith(".py"):
            with contextlib.suppress(ValueError, NotImplementedError):
                found.append(importlib.util.cache_from_source(path))
    return found


def stamps_now(paths) -> dict[str, tuple | None]:
    """``paths``' stamps as they are now, in installed_stamps' form: the baseline for code of
    the learner's that runs later in another process (the GPU compile check's)."""
    found = stamps(paths)
    return {path: found.get(path) for path in paths}


def installed_stamps() -> dict[str, tuple | None]:
    """The stamps of the installed files this process loaded, and of the compiled caches a
    later process would run in their place (None where there is none), for
    Guard.watch_installed."""
    files = loaded_files()
    caches = compiled_caches(files)
    found = stamps(caches)
    return {**stamps(files), **{cache: found.get(cache) for cache in caches}}


def loaded_files() -> set[str]:
    """The installed files this process has loaded: its modules' files, and the shared
    libraries mapped into it (torch's libc10.so, numpy's bundled BLAS), which no module names:
    one rewritten in place runs, changed, in every later process that loads it."""
    prefixes = installed_prefixes()
    # (the libraries of Python's own folders only: the system's, libc among them, are the
    # system's to guard, and setting one aside would break every program on the machine)
    found = {path for path in mapped_files() if is_installed(path, python_folders())}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and is_installed(path, prefixes):
            found.add(path)
    return found


def python_folders() -> tuple[str, ...]:
    """This Python's standard library and its site-packages, each ending in a separator."""
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(os.path.join(os.path.abspath(p), "") for p in
                 {paths["stdlib"], paths["platstdlib"], *site_folders()})


def mapped_files() -> set[str]:
    """The files mapped into this process, as Linux lists them (none elsewhere)."""
    found = set()
    with contextlib.suppress(OSError):
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(None, 5)
                # address, permissions, offset, device, inode, path: a file has an inode
                if len(fields) == 6 and fields[4] != "0" and fields[5].startswith("/") and \
                        not fields[5].endswith(" (deleted)"):
                    found.add(fields[5])
    return found


def package_files() -> set[str]:
    """Every source file of the installed packages this process has loaded modules of: a module
    of theirs that this process first imports after the learner's code ran (rich loads its
    table of character widths when a line first needs it) runs the file as it is then."""
    prefixes = installed_prefixes()
    folders = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if "." not in name and isinstance(path, str) and \
                os.path.basename(path) == "__init__.py" and is_installed(path, prefixes):
            folders.add(os.path.dirname(path))
    found = set()
    for folder in folders:
        for root, _, files in os.walk(folder):
            found.update(os.path.join(root, f) for f in files if f.endswith(".py"))
    return found


# The packages a check's workers run the learner's kernels with: every file of each is watched
# from the checking process, which imports neither (Triton's own binaries too: a ptxas whose
# execute bit a module took off would turn the compile check off for every later check)
WORKER_PACKAGES = {"triton": "", "torch": ".py"}


def worker_package_files() -> set[str]:
    """The files of WORKER_PACKAGES (those ending as its value says), found without importing
    them."""
    import importlib.util

    found = set()
    for name, ending in WORKER_PACKAGES.items():
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for root, _, files in os.walk(folder):
                if "__pycache__" not in root:  # (Python writes caches as modules first load)
                    found.update(os.path.join(root, f) for f in files if f.endswith(ending))
    return found


def load_lazy_modules():
    """Import now what this process would otherwise import after the learner's code has run,
    while it judges and shows a check's result: rich's table of character widths (loaded
    when a line first holds a wide character), its padding and emoji codes, numpy's random
    module (the cases' inputs), the ASCII codec. A module first imported then runs its file
    (or a compiled cache of it) as the learner's code may have left it; tests/test_hostile.py
    runs checks of each kind and finds none imported after the guard is taken."""
    import importlib

    with contextlib.suppress(Exception):
        import rich.cells

        rich.cells.cell_len("\u00e9\u5b57")
    for name in LAZY_MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


LAZY_MODULES = ("rich.padding", "rich._emoji_codes", "rich.emoji", "numpy.random",
                "encodings.ascii")


def stamps(paths) -> dict[str, tuple]:
    """{path: (size, inode, change time)} of the files that exist: a write changes the change
    time, which unlike the modification time no process can set back."""
    found = {}
    for path in paths:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            found[path] = (info.st_size, info.st_ino, info.st_ctime_ns)
    return found


def site_folders() -> list[str]:
    """The site-packages folders that exist, the user's included."""
    folders = []
    with contextlib.suppress(AttributeError):
        folders += site.getsitepackages()
    with contextlib.suppress(AttributeError):
        folders.append(site.getusersitepackages())
    return [f for f in folders if os.path.isdir(f)]
