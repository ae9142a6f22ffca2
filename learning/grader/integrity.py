"""The course's own files, checked before a check trusts them and after the learner's code ran.

The grader's verdicts rest on files a learner's code can reach: the reference solutions and
kernels, the cases, the grader itself. So they are not trusted, they are checked:

- ``learning/course_files.sha256`` holds the digest of every one of them (``python -m
  learning.computed`` writes it); a check first compares the files with it and refuses to
  grade, in one line, when one differs or is missing;
- around the learner's code, ``Guard`` keeps the course's files as they were read, and puts back
  any the code changed or removed; a file it added where Python would import it (the course's
  folders, the exercise's folder, site-packages' start-up files) is moved into
  ``.course-state/set-aside/``, and a compiled cache it wrote is deleted. The check says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from learning.grader import installed, nearby, state, warm
from learning.grader.borrowed import LAB_LIST  # checked and kept like the course's code
from learning.grader.childproc import COURSE_ROOT

MANIFEST = COURSE_ROOT / "learning" / "course_files.sha256"
# The course's own modules at the top of the course, beside the learner's exercise modules
TOP_LEVEL = ("triton_kernels.py", "lab/__init__.py", "lab/production.py", "lab/gluon.py",
             "reference_matmul.py", "reference_attention.py")
# Files that Python runs at the start of every process, wherever they appear in site-packages
START_UP = ("sitecustomize.py", "usercustomize.py")


def course_files(root: Path = COURSE_ROOT) -> list[str]:
    """The course's own code, as paths relative to ``root`` with / between folders."""
    found = sorted(p.relative_to(root).as_posix() for p in (root / "learning").rglob("*.py")
                   if "__pycache__" not in p.parts)
    return found + [name for name in TOP_LEVEL if (root / name).exists()] + [LAB_LIST]


def lab_text(root: Path = COURSE_ROOT) -> str:
    """The lab's Python files now, as ``LAB_LIST`` holds them: its package markers left out
    (lab/__init__.py holds a docstring, and runs whenever any module under lab/ is imported,
    a learner's own among them)."""
    return "".join(f"{p.relative_to(root).as_posix()}\n" for p in sorted((root / "lab").rglob(
        "*.py")) if "__pycache__" not in p.parts and p.name != "__init__.py")




def digest(data: bytes) -> str:
    """A file's digest, the same whichever line endings a checkout gave it."""
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


def manifest_text(root: Path = COURSE_ROOT) -> str:
    lines = [f"{digest((root / name).read_bytes())}  {name}" for name in course_files(root)]
    return "\n".join(lines) + "\n"


def read_manifest(path: Path = MANIFEST) -> dict[str, str] | None:
    """{path: digest}, or None when the manifest is missing or unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    entries = {}
    for line in text.splitlines():
        value, _, name = line.partition("  ")
        if len(value) == 64 and name:
            entries[name] = value
    return entries


LARGEST_COURSE_FILE = 64 * 2**20  # bytes of one of the course's files read at most


def _read(path: Path) -> bytes:
    """A file's bytes, if it is a regular file: never through a link, never waiting on a FIFO
    nor reading without end (the learner's code may leave any of them in a course file's
    place); OSError otherwise."""
    try:
        data = state.read_small_file(path, LARGEST_COURSE_FILE)
    except state.NotData as error:
        raise OSError(f"{path} is {error}") from error
    if data is None:
        raise FileNotFoundError(str(path))
    return data


def _not_regular(path: Path) -> bool:
    """Something other than a regular file is at ``path`` (a link, a folder, a FIFO)."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def changed(root: Path = COURSE_ROOT) -> list[str]:
    """The course's files that differ from the manifest, are missing, or are not in it."""
    listed = read_manifest(root / "learning" / MANIFEST.name)
    if listed is None:
        return [f"learning/{MANIFEST.name}"]
    differ = []
    for name in sorted(set(listed) | set(course_files(root))):
        try:
            if digest(_read(root / name)) != listed.get(name):
                differ.append(name)
        except OSError:
            differ.append(name)
    return differ


def refusal(files: list[str]) -> str:
    """The one line a check refuses with when the course's files are not as shipped."""
    return (f"the course's own files are not as installed ({_listed(files)}), so nothing was "
            "graded: git status shows what changed, and git checkout -- learning puts the "
            "course's files back (a file git does not know must be removed by hand; after a "
            "change of your own, python -m learning.computed records it)")


# --- around the learner's code -----------------------------------------------------------------

# Installed files a guard of this process set aside: gone for the next guard, which need not
# say so again
_set_aside_here: set[str] = set()


@dataclass
class Repairs:
    """What the learner's code did to files it should not have touched, and what was done."""

    restored: list[str] = field(default_factory=list)  # course files put back
    set_aside: list[str] = field(default_factory=list)  # files it added, moved away
    caches_deleted: int = 0  # compiled files it wrote under the course's folders
    installed: list[str] = field(default_factory=list)  # installed files it changed, set aside
    installed_gone: list[str] = field(default_factory=list)  # installed files it removed
    modes: list[str] = field(default_factory=list)  # files whose permissions were put back
    compiled: list[str] = field(default_factory=list)  # installed code's caches, set aside
    beside: nearby.Changes = field(default_factory=nearby.Changes)  # learning.grader.nearby
    moved: list[str] = field(default_factory=list)  # the course's or module's folder, renamed
    folders: list[str] = field(default_factory=list)  # course folders gone or replaced, remade
    warm: list[str] = field(default_factory=list)  # the warm process's folder, put back
    warm_ended: bool = False  # the warm process ended: it had loaded installed code changed
    # the learner's other exercise modules and reset's backups that changed: said, left as
    # they are (an edit in the learner's editor at that moment is theirs to keep)
    learner_files: list[str] = field(default_factory=list)

    def note(self, aside_folder: str) -> str:
        """What changed while the learner's code ran, in one line. Seen, not attributed: the
        learner's code is the likely writer, but another program could have been."""
        parts = []
        if self.moved:
            parts.append(f"{_listed(self.moved)} was renamed and was put back")
        if self.folders:
            parts.append(f"the course's folder(s) {_listed(self.folders)} were removed or "
                         "replaced, and were made again")
        if self.restored:
            parts.append(f"the course's own files changed ({_listed(self.restored)}) and were "
                         "put back as they were")
        if self.set_aside:
            parts.append(f"{_listed(self.set_aside)} appeared where Python would import it, "
                         f"and was moved to {aside_folder} unless said otherwise")
        if self.installed:
            parts.append(f"installed code the grader runs changed ({_listed(self.installed)}) "
                         "and was set aside: reinstall its package (python -m pip install "
                         "--force-reinstall NAME), and the course with the README's command")
        if self.installed_gone:
            parts.append(f"installed code the grader runs was removed or renamed "
                         f"({_listed(self.installed_gone)}): reinstall its package (python -m "
                         "pip install --force-reinstall NAME), and the course with the "
                         "README's command")
        if self.warm_ended:
            parts.append("the warm process, which had that code loaded, was ended: the next "
                         "check starts a fresh one")
        if self.compiled:
            parts.append(f"compiled caches of installed code the grader runs changed "
                         f"({_listed(self.compiled)}) and were set aside: Python compiles them "
                         "again from their sources")
        if self.modes:
            parts.append(f"the permissions of {_listed(self.modes)} changed and were put back")
        if self.warm:
            parts.append(f"{_listed(self.warm)}, which would have turned the warm process off "
                         "for later checks, and was put back")
        if self.learner_files:
            parts.append(f"your own files changed and were left as they are: "
                         f"{_listed(self.learner_files)}")
        if self.beside.grades:
            parts.append(f"{_listed(self.beside.grades)} changed and was put back (grades are "
                         "written by the check, after your code has ended)")
        if self.beside.restored:
            parts.append(f"{_listed(self.beside.restored)} changed and was put back (the changed "
                         f"copy is in {aside_folder})")
        if self.beside.set_aside:
            parts.append(f"{_listed(self.beside.set_aside)} appeared where git, pip or the "
                         f"course would read it, and was moved to {aside_folder} unless said "
                         "otherwise")
        if self.beside.modes:
            parts.append(f"the permissions of {_listed(self.beside.modes)} changed and were "
                         "put back")
        if self.caches_deleted:
            parts.append(f"{self.caches_deleted} compiled file(s) under the course's folders "
                         "changed and were deleted")
        return "while your code ran (by it, or by another program), " + "; ".join(parts) \
            if parts else ""


def _listed(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


class Guard:
    """Taken before the learner's code runs, ``repair()`` after: see the module's docstring."""

    def __init__(self, learner_folder: Path, root: Path = COURSE_ROOT,
                 module_files: tuple[str, ...] = (), learner_module: Path | None = None):
        self.root = root
        self.learner_folder = learner_folder
        # given the module being checked: the learner's other files, to say which changed
        self.learner_module = learner_module
        self.learner_files = _learner_files(learner_folder, learner_module) \
            if learner_module is not None else None
        # The installed code the grader's processes run (this one's modules, and
        # ``module_files``, the warm process's): too much to keep a copy of, so watched for
        # any change, which sets the file aside (its package must be reinstalled)
        prefixes = installed.installed_prefixes()
        installed.load_lazy_modules()
        own = installed.loaded_files()
        packages = installed.package_files()
        # every file of those packages too: what this process imports of them later runs them
        self.installed = installed.stamps(
            own | packages | installed.worker_package_files() |
            {f for f in module_files if installed.is_installed(f, prefixes)})
        # and the compiled caches this process would run instead of its files, at its next
        # start or at an import after the learner's code ran (of a module of a package it has
        # loaded: a cache written for rich.padding ran in the judging process), not the warm
        # process's thousand (stamping those too doubled the cost of every run): changed, or
        # made where there was none, they are set aside (Python compiles them again)
        self.compiled = {path: installed.stamps([path]).get(path)
                         for path in installed.compiled_caches(own | packages)}
        # the folders those packages are in, and every folder on this process's path (the
        # standard library's, where a new sitecustomize.py runs at every start): a module
        # added there could be imported in the place of one not loaded yet
        self.package_folders = {Path(os.path.dirname(f)) for f in packages} | {
            Path(p) for p in sys.path if p and os.path.isdir(p) and
            installed.is_installed(p, prefixes)} | {
            # and where a zip on the path would be made (python311.zip, ahead of the standard
            # library, which the next process would import from)
            Path(p).parent for p in sys.path if p.endswith(".zip") and not os.path.exists(p)
            and os.path.isdir(os.path.dirname(p)) and installed.is_installed(p, prefixes)}
        self.kept: dict[Path, tuple[bytes, int]] = {}  # file: its bytes and permissions
        for name in [*course_files(root), f"learning/{MANIFEST.name}"]:
            self._keep(root / name)
        for folder in installed.site_folders():  # what Python runs at the start of every process
            for name in nearby.entries(Path(folder)):
                if name.endswith((".pth", ".py")):
                    self._keep(Path(folder) / name)
        self.nearby = nearby.Snapshot(root, learner_folder)
        self.watched = self._watched_folders()
        # the folders the course's kept files are in, parents before children
        self.course_folders = sorted({parent for path in self.kept for parent in path.parents
                                      if root in parent.parents})
        self.entries = {folder: nearby.entries(folder) for folder in self.watched}
        self.caches = _caches(root / "learning")
        # the folders themselves: renamed, every path above would lead nowhere
        self.folders = {folder: _identity(folder) for folder in (root, learner_folder)}
        self.warm_folder = warm.FolderGuard()

    def watch_installed(self, stamps: dict):
        """Watch too the installed files a worker process loaded, by the stamps it took before
        the learner's code ran (sent over its event pipe, see installed_stamps): what a worker
        runs is more than this process loaded (torch, triton), and a list of it kept in a file
        could be rewritten by the learner's code."""
        prefixes = installed.installed_prefixes()
        for path, stamp in stamps.items():
            if not isinstance(path, str) or not installed.is_installed(path, prefixes):
                continue
            if path.endswith(".pyc") and (stamp is None or isinstance(stamp, tuple)):
                self.compiled.setdefault(path, stamp)  # changed, or made: set aside
            elif isinstance(stamp, tuple):
                self.installed.setdefault(path, stamp)

    def _keep(self, path: Path):
        with contextlib.suppress(OSError):
            self.kept[path] = (_read(path), stat.S_IMODE(os.stat(path).st_mode))

    def _watched_folders(self) -> list[Path]:
        folders = {self.root, self.learner_folder, self.root / "learning"}
        folders.update(p for p in (self.root / "learning").rglob("*")
                       if p.is_dir() and p.name != "__pycache__")
        folders.update(Path(p) for p in installed.site_folders())
        folders.update(self.package_folders)
        return sorted(folders)

    def repair(self, aside: Path) -> Repairs:
        """Put back what changed; ``aside`` is the folder added files are moved into. Called once
        a guard: its stamps are not taken again afterwards (each costs a stat of every installed
        file this process loaded)."""
        repairs = Repairs()
        for folder, identity in self.folders.items():
            moved = _put_folder_back(folder, identity)
            if moved:
                repairs.moved.append(moved)
        # A course folder removed, or made a link or a file, is made a folder again (anything
        # in its place set aside), parents first: the files below are then written back into
        # it, where an import finds them, not into nothing or through a link
        for folder in self.course_folders:
            if not os.path.islink(folder) and os.path.isdir(folder):
                continue
            with contextlib.suppress(OSError):
                if os.path.lexists(folder):
                    _move_away(folder, aside, repairs)
                os.mkdir(folder)
                repairs.folders.append(_shown(folder, self.root))
        for path, (data, mode) in self.kept.items():
            try:
                same = _read(path) == data
            except OSError:
                same = False
            if not same:
                with contextlib.suppress(OSError):
                    if _not_regular(path):  # a link, a folder or a FIFO: moved, not written
                        _move_away(path, aside, repairs)
                    path.write_bytes(data)
                    os.chmod(path, mode)
                    repairs.restored.append(_shown(path, self.root))
            elif _mode(path) not in (mode, None):
                with contextlib.suppress(OSError):
                    os.chmod(path, mode)
                    repairs.modes.append(_shown(path, self.root))
        course = self.root / "learning"
        for folder, before in self.entries.items():
            for name in sorted(nearby.entries(folder) - before):
                inside = folder == course or course in folder.parents
                if (inside and name != "__pycache__") or _importable(folder / name, folder) or \
                        str(folder / name) in sys.path:  # a zip Python looks in (python311.zip)
                    _move_away(folder / name, aside, repairs)
        now = installed.stamps(self.installed)
        for path, stamp in self.installed.items():
            if path not in now:  # removed or renamed: no copy to put back, but said
                if path not in _set_aside_here:  # (not by an earlier guard, which said so)
                    repairs.installed_gone.append(path)
            elif now[path] != stamp:
                before = len(repairs.set_aside)
                _move_away(Path(path), aside, repairs)
                _set_aside_here.add(path)
                repairs.installed += repairs.set_aside[before:]
                del repairs.set_aside[before:]
        for path, stamp in self.compiled.items():
            if installed.stamps([path]).get(path) != stamp and os.path.lexists(path):
                before = len(repairs.set_aside)
                _move_away(Path(path), aside, repairs)
                repairs.compiled += repairs.set_aside[before:]
                del repairs.set_aside[before:]
        for path, stamp in _caches(self.root / "learning").items():
            if self.caches.get(path) != stamp and not _compiled_from_its_source(Path(path)):
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    repairs.caches_deleted += 1
        repairs.beside = self.nearby.repair(aside)
        repairs.warm = self.warm_folder.repair()
        if repairs.installed or repairs.installed_gone:
            repairs.warm_ended = warm.retire_connected() > 0
        if self.learner_files is not None:
            now = _learner_files(self.learner_folder, self.learner_module)
            for path in sorted(set(self.learner_files) | set(now)):
                before, after = self.learner_files.get(path), now.get(path)
                if before != after:
                    what = "removed" if after is None else "added" if before is None \
                        else "changed"
                    repairs.learner_files.append(f"{_shown(path, self.learner_folder)} ({what})")
        return repairs


MOST_BACKUPS = 2000  # entries of the backups folder looked at, at most


def _learner_files(folder: Path, skip: Path | None) -> dict[Path, tuple | None]:
    """{path: (inode, times, size), or None where missing} of the learner's exercise modules
    (but ``skip``, the one being checked: its own change is said apart) and of the files in
    reset's backups folder."""
    from learning.exercises import NAMES

    found: dict[Path, tuple | None] = {}
    for name in NAMES:
        path = folder / f"{name}.py"
        if skip is None or path != skip:
            found[path] = _stamp(path)
    with contextlib.suppress(OSError):
        with os.scandir(folder / ".course-state" / "backups") as entries:
            for count, entry in enumerate(entries):
                if count >= MOST_BACKUPS:
                    break
                found[Path(entry.path)] = _stamp(Path(entry.path))
    return found


def _stamp(path: Path) -> tuple | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    # the change time too: a write at the same size with its time set back (os.utime) moves it
    return info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _put_folder_back(folder: Path, identity: tuple[int, int] | None) -> str:
    """Rename ``folder`` back from where the learner's code renamed it, beside itself; what
    was done, in words ("" when it is where it was, or cannot be found)."""
    if identity is None or os.path.lexists(folder):
        return ""
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder.parent):
            found = entry.stat(follow_symlinks=False)
            if (found.st_dev, found.st_ino) == identity:
                os.rename(entry.path, folder)
                return f"{folder} (to {entry.name})"
    return ""


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def _importable(path: Path, folder: Path) -> bool:
    """Whether a new entry could be run by a later Python process: a module or a package, or
    (in site-packages) a .pth file or a start-up module. Any folder whose name is a module's
    is a package to ``import``, with or without an ``__init__.py`` (a namespace package, or
    one whose ``__init__.pyc`` alone runs): ``org/python/core/``, which copy and pickle try to
    import, runs whatever it holds."""
    name = path.name
    if name.startswith(".course-state") or name == "__pycache__":
        return False
    if name.endswith((".py", ".pyc", ".pyw", ".so", ".pth")) or name in START_UP:
        return True
    if path.is_symlink():
        return True
    return path.is_dir() and name.isidentifier()


def _caches(folder: Path) -> dict[str, tuple]:
    """Every compiled file under ``folder``: {path: (size, mtime, inode)}."""
    found = {}
    for path in folder.rglob("*.pyc"):
        with contextlib.suppress(OSError):
            info = path.lstat()
            found[str(path)] = (info.st_size, info.st_mtime_ns, info.st_ino)
    return found


def _compiled_from_its_source(path: Path) -> bool:
    """Whether a compiled file under __pycache__ holds what Python compiles its source to (a
    cache written meanwhile by the check's own process, or a test's), not other code."""
    import importlib.util
    import marshal

    try:
        source = Path(importlib.util.source_from_cache(str(path)))
        data = _read(path)
        code = marshal.loads(data[16:])
        expected = compile(_read(source), str(source), "exec", dont_inherit=True,
                           optimize=_optimisation(path))
    except (OSError, ValueError, EOFError, TypeError, SyntaxError):
        return False
    return code == expected


def _optimisation(path: Path) -> int:
    """The optimisation level a compiled file's name says it was made with (.opt-1.pyc)."""
    for level in (1, 2):
        if f".opt-{level}." in path.name:
            return level
    return 0


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _move_away(path: Path, aside: Path, repairs: Repairs):
    repairs.set_aside.append(nearby.move_aside(path, aside))
