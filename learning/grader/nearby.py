"""Files beside the course that later commands read, kept while the learner's code runs.

``integrity.Guard`` keeps the grader's own code. The learner's code can also reach what runs
after it without going through the grader:

- the progress file and the key its grades are signed with (``.course-state/``): a module that
  read the key could sign a grade for another exercise;
- ``pyproject.toml``, which the next ``pip install -e .`` obeys;
- git's config and hooks, which ``git commit`` obeys and runs, the ``.git`` entry itself (a
  file put in its place leads git to another folder's config), and ``~/.gitconfig``;
- the settings tools read from the folder they run in (``pytest.ini``, ``setup.cfg``, ...);
- the virtual environment's ``pyvenv.cfg`` and scripts (``activate``, ``pip``, or a new ``git``
  first on PATH).

Each is read before the learner's code runs and compared after. A changed file is put back,
its changed copy kept in the set-aside folder (an edit made by hand at that moment is not lost);
a new entry where something would run it is moved there; permissions are put back too. The
progress file and its key are put back without a copy: the check writes a grade only after the
learner's code has ended (a second check of the same folder that saved in that moment loses its
grade to this, and says so; checking again rebuilds it).

The lessons, README and tests are left alone: a learner or maintainer editing them while a check
runs would see an edit undone, and nothing a check grades reads them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGING = ("pyproject.toml",)  # relative to the course's root
# Files that tools read from the folder they run in (pytest's and git's settings, a shell's
# per-folder environment): one made beside the course or the learner's module is set aside
TOOL_SETTINGS = ("pytest.ini", "tox.ini", "setup.cfg", ".pre-commit-config.yaml", ".envrc",
                 ".gitattributes", ".gitmodules")
# git's settings for every repository of this user: kept, with a changed copy, as the rest
HOME_SETTINGS = (".gitconfig", ".config/git/config")
STATE_FILES = (".course-state/progress.json", ".course-state/key")
LARGEST_KEPT = 4 * 2**20  # a file larger than this is not kept (nothing of the course's is)
MOST_KEPT = 2000  # files per snapshot: a folder that grew past this is not the course's


@dataclass
class Kept:
    data: bytes | None  # None: the file did not exist
    mode: int = 0
    backup: bool = True  # keep the changed copy when putting it back


@dataclass
class Changes:
    """What was put back, moved or given its permissions back: paths as shown to the learner."""

    restored: list[str] = field(default_factory=list)  # a changed copy kept
    grades: list[str] = field(default_factory=list)  # the progress file or its key, put back
    set_aside: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)


class Snapshot:
    """The files above, read now; ``repair`` puts back what changed since."""

    def __init__(self, course_root: Path, learner_folder: Path, prefix: str | None = None,
                 base_prefix: str | None = None):
        self.course_root = course_root
        self.learner_folder = learner_folder
        # .course-state was a folder of its own (or absent): a link or file in its place
        # afterwards is the learner's code's doing (one there before is the state's to report)
        state = learner_folder / STATE_FILES[0].split("/")[0]
        self.state_was_folder = not state.is_symlink() and (state.is_dir() or
                                                            not state.exists())
        self.kept: dict[Path, Kept] = {}
        self.watched: dict[Path, set[str]] = {}  # folder: its entries (anything new is moved)
        for name in PACKAGING:
            self._keep_file(course_root / name)
        for name in TOOL_SETTINGS:
            for top in {course_root, learner_folder}:
                self._keep_or_absent(top / name)
        home = Path(os.path.expanduser("~"))
        for name in HOME_SETTINGS:
            self._keep_file(home / name)
        for name in STATE_FILES:
            if self._keep_or_absent(learner_folder / name):
                self.kept[learner_folder / name].backup = False
        # what .git is in each work tree: replaced by a file or link to a git folder of the
        # learner's code's making, git would obey that one's config
        self.gits = {top / ".git": _identity(top / ".git") for top in {course_root,
                                                                        learner_folder}}
        for top in {course_root, learner_folder}:
            git = _git_dir(top)
            if git is not None:
                self._keep_file(git / "config")
                self._keep_tree(git / "hooks", watch=True)
        prefix = sys.prefix if prefix is None else prefix
        base = sys.base_prefix if base_prefix is None else base_prefix
        if os.path.realpath(prefix) != os.path.realpath(base):  # a virtual environment
            self._keep_file(Path(prefix) / "pyvenv.cfg")
            for name in ("bin", "Scripts"):
                self._keep_tree(Path(prefix) / name, watch=True, deep=False)

    def _keep_or_absent(self, path: Path) -> bool:
        """Keep a regular file, or that nothing is there (anything made there is then set
        aside); something else there (a link, a FIFO) is left to the code that reads it."""
        found = _read(path)
        if found is None and os.path.lexists(path):
            return False
        self.kept[path] = found or Kept(None)
        return True

    def _keep_file(self, path: Path):
        found = _read(path)
        if found is not None and len(self.kept) < MOST_KEPT:
            self.kept[path] = found

    def _keep_tree(self, top: Path, watch: bool = False, deep: bool = True):
        if not top.is_dir() or top.is_symlink():
            self._keep_file(top)
            return
        for folder, names, files in os.walk(top):
            names[:] = [n for n in names if n != "__pycache__"] if deep else []
            if watch:
                self.watched[Path(folder)] = set(names) | set(files)
            for name in files:
                self._keep_file(Path(folder) / name)

    def repair(self, aside: Path) -> Changes:
        changes = Changes()
        state = self.learner_folder / STATE_FILES[0].split("/")[0]
        if self.state_was_folder and (state.is_symlink() or (state.exists() and not
                                                             state.is_dir())):
            # its grades would be put back through the link: the link goes, a folder comes back
            moved = move_aside(state, Path(tempfile.mkdtemp(prefix="set-aside-")))
            changes.set_aside.append(f"{self._shown(state)}, a link or file in place of the "
                                     f"folder ({moved})")
            with contextlib.suppress(OSError):
                state.mkdir()
        for dot, before in self.gits.items():
            if before is not None and _identity(dot) != before:
                self._put_git_back(dot, before, changes)
            elif before is None and os.path.lexists(dot):  # a git folder of its making
                changes.set_aside.append(move_aside(dot, aside))
        for path, kept in self.kept.items():
            now = _read(path)
            if kept.data is None:
                if now is not None or path.is_symlink():
                    move_aside(path, aside)
                    (changes.set_aside if kept.backup else changes.grades).append(
                        self._shown(path))
                continue
            if now is not None and now.data == kept.data and not path.is_symlink():
                if now.mode != kept.mode:
                    with contextlib.suppress(OSError):
                        os.chmod(path, kept.mode)
                        changes.modes.append(self._shown(path))
                continue
            with contextlib.suppress(OSError):
                if path.is_symlink() or path.is_dir() or (now is not None and kept.backup) \
                        or (os.path.lexists(path) and not path.is_file()):  # a FIFO, say
                    move_aside(path, aside)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(kept.data)
                os.chmod(path, kept.mode)
                (changes.restored if kept.backup else changes.grades).append(self._shown(path))
        for folder, before in self.watched.items():
            for name in sorted(entries(folder) - before):
                moved = move_aside(folder / name, aside)
                changes.set_aside.append(self._shown(folder / name)
                                         if moved == str(folder / name) else moved)
        return changes

    def _put_git_back(self, dot: Path, before: tuple, changes: Changes):
        """Move whatever stands at ``.git`` now away, and the original back, found beside it
        under another name (it was renamed) where it still is."""
        now = move_aside(dot, Path(tempfile.mkdtemp(prefix="set-aside-"))) \
            if os.path.lexists(dot) else ""
        for name in entries(dot.parent):
            if _identity(dot.parent / name) == before:
                with contextlib.suppress(OSError):
                    os.rename(dot.parent / name, dot)
                break
        changes.set_aside.append(f"{self._shown(dot)}, replaced" + (f" ({now})" if now else "") +
                                 ("; the original was put back" if _identity(dot) == before
                                  else "; the original was not found"))

    def _shown(self, path: Path) -> str:
        for top in (self.learner_folder, self.course_root):
            with contextlib.suppress(ValueError):
                return path.relative_to(top).as_posix()
        return str(path)


def _read(path: Path) -> Kept | None:
    """The file's bytes and permissions; None when it is not a regular file of ours to keep."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > LARGEST_KEPT:
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) |
                     getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            return Kept(handle.read(LARGEST_KEPT + 1), stat.S_IMODE(info.st_mode))
    except OSError:
        return None


def _git_dir(top: Path) -> Path | None:
    """The folder git keeps hooks and config in for the work tree at ``top``: ``.git``, or for a
    linked work tree the common folder its ``.git`` file leads to."""
    dot = top / ".git"
    if dot.is_dir() and not dot.is_symlink():
        return dot
    try:
        line = dot.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    own = (top / line.partition(":")[2].strip()).resolve()
    try:
        common = (own / (own / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except OSError:
        common = own
    return common if common.is_dir() else None


def _identity(path: Path) -> tuple | None:
    """What stands at ``path`` (its kind, device and inode, not following a link); None if
    nothing does."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return stat.S_IFMT(info.st_mode), info.st_dev, info.st_ino


def entries(folder: Path) -> set[str]:
    """The names in ``folder``; none where it cannot be listed."""
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def move_aside(path: Path, aside: Path) -> str:
    """Move ``path`` into ``aside``; where that folder cannot be made (a file in its place),
    into a new temporary folder; where nothing can be moved, delete it. Never silently left.
    Returns how to name what happened: the path, with where it went when not ``aside``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    # a folder reached through a link (the learner's code may have made one, into
    # site-packages say) would put what is set aside wherever the link points
    safe = os.path.realpath(aside) == os.path.abspath(aside)
    for folder in ((aside, None) if safe else (None,)):
        try:
            folder = folder if folder is not None else Path(tempfile.mkdtemp(prefix="set-aside-"))
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{stamp}-{path.name}"
            counter = 1
            while target.exists() or target.is_symlink():
                counter += 1
                target = folder / f"{stamp}-{counter}-{path.name}"
            shutil.move(str(path), str(target))
            return f"{path} (now {target})" if folder != aside else str(path)
        except OSError:
            continue
    with contextlib.suppress(OSError):
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    return f"{path} (deleted: it could not be moved)"
