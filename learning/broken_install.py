"""A library the commands need that cannot be imported: one line that says which, and the fix.

The course's own modules too: a file of the course removed by hand (or a folder renamed) is
named as such, with how to put it back.

A check that finds an installed library's file changed while the learner's code ran sets that
file aside (learning.grader.integrity), so the next command that imports the library fails to.
So does a half-finished ``pip install``. Either way the learner should read which package to
reinstall, not a traceback through the course's code. A package not installed at all for the
Python that runs the command (a virtual environment not activated) is said as that. Installed
as ``sys.excepthook`` only when a command runs (``python -m learning.NAME``), never when
``learning`` is imported. (Ctrl-C pressed before a command's own handling starts, while it
imports, ends it in one line too.)
"""

from __future__ import annotations

import os
import sys
import sysconfig

EXIT_STATUS = 2  # as every command's other "nothing could be done here" errors


def install():
    previous = sys.excepthook

    def hook(kind, error, traceback):
        if issubclass(kind, KeyboardInterrupt):  # Ctrl-C while the command was still starting
            print("learning: stopped (Ctrl-C)", file=sys.stderr)
            sys.stderr.flush()
            os._exit(130)  # the shell's code for an interrupt, as every command's Ctrl-C
        if isinstance(error, ImportError) and course_module(error):
            print(course_message(error), file=sys.stderr)
            sys.stderr.flush()
            os._exit(EXIT_STATUS)
        package = broken_package(error, traceback) if isinstance(error, ImportError) else None
        if package is None:
            previous(kind, error, traceback)
            return
        print(message(package, error), file=sys.stderr)
        sys.stderr.flush()
        os._exit(EXIT_STATUS)  # an excepthook cannot set the status any other way

    sys.excepthook = hook


# The course's own modules outside learning/, beside the learner's exercise modules
COURSE_TOP_LEVEL = ("triton_kernels", "reference_matmul", "reference_attention", "lab")


def course_module(error: ImportError) -> str | None:
    """The course's own module that could not be imported (a file of the course removed or
    renamed by hand), or None for any other import: only a module whose file, or whose
    package's files, the course's list of its files (``course_files.sha256``) names."""
    name = getattr(error, "name", None) or ""
    if not (name.startswith("learning.") or name.split(".")[0] in COURSE_TOP_LEVEL):
        return None
    path = name.replace(".", "/")
    listed = os.path.join(os.path.dirname(os.path.abspath(__file__)), "course_files.sha256")
    try:
        with open(listed, encoding="utf-8") as lines:
            names = [line.partition("  ")[2].strip() for line in lines]
    except (OSError, UnicodeDecodeError):
        return None
    return name if any(n == f"{path}.py" or n.startswith(f"{path}/") for n in names) else None


def course_message(error: ImportError) -> str:
    name = course_module(error)
    path = name.replace(".", "/")
    return (f"learning: the course's own module {name} cannot be imported ({path}.py or the "
            f"folder {path}/ is missing or damaged), so nothing was done: git status shows "
            "what changed, and git checkout -- learning puts the course's files back")


def message(package: str, error: ImportError) -> str:
    why = " ".join(str(error).split()) or type(error).__name__
    if _absent(package):
        # the commonest case: another Python than the one the course was installed into (a
        # virtual environment not activated), where the package was never there to damage
        return (f"learning: the package {package} is not installed for this Python "
                f"({sys.executable}): run the course with the Python you installed it into "
                "(activate its virtual environment), or install it for this one with the "
                "README's first command")
    return (f"learning: the installed package {package} cannot be imported ({why}): it is "
            "damaged or incomplete (a check sets aside a library file that changed while the "
            "learner's code ran); reinstall it with: python -m pip install --force-reinstall "
            f"{package}")


def _absent(package: str) -> bool:
    """Whether no module or package of that name can be found at all (not one with a file set
    aside: its folder is still found)."""
    import importlib.util

    try:
        return importlib.util.find_spec(package) is None
    except (ImportError, ValueError):
        return False


def broken_package(error: ImportError, traceback) -> str | None:
    """The installed package behind ``error``, when the import that failed was the course's own
    and the package is installed (not the learner's module, not a name the course misspelt)."""
    frames = []
    while traceback is not None:
        frames.append(traceback.tb_frame.f_code.co_filename)
        traceback = traceback.tb_next
    course = os.path.dirname(os.path.abspath(__file__))
    if not any(os.path.abspath(f).startswith(course + os.sep) for f in frames):
        return None
    name = (getattr(error, "name", None) or "").split(".")[0]
    installed = [os.path.abspath(p) + os.sep for p in
                 {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}]
    for filename in reversed(frames):  # the innermost installed file names its package
        path = os.path.abspath(filename)
        for top in installed:
            if path.startswith(top):
                return path[len(top):].split(os.sep)[0].removesuffix(".py") or None
    return name if name in ("rich", "numpy", "torch", "triton", "watchdog") else None
