"""The learner's progress: the last grade of every part, and the hints already shown.

Kept in ``.course-state/progress.json`` in the course folder. The file is a cache: deleting
it loses nothing that re-checking does not rebuild, and a corrupted or foreign file is set
aside (renamed, never deleted) and replaced by an empty state instead of breaking a command.

The state is data and is read as such: only a regular file of at most MAX_STATE_BYTES, opened
without following a link and without waiting for a writer (a FIFO or a device in its place is
set aside). Each grade is recorded with the digest of the source it graded, so that
``solution`` and ``progress`` can say when the file has changed since, and with a MAC under a
key kept beside it (``.course-state/key``): a grade edited by hand, or written by anything that
does not go through this module, is left out when the file is read, with a note. The key is
readable by the learner's own code, as the file is: it keeps out edits, not a program written
to forge.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_DIR = ".course-state"
STATE_FILE = "progress.json"
KEY_FILE = "key"
FORMAT = 2  # 1: grades without their source's digest or a MAC
MAX_STATE_BYTES = 1 << 20  # a course's grades and hints fill a few kilobytes
REPLACE_ATTEMPTS = 20  # 25 ms apart: Windows refuses to replace a file another process reads


def source_digest(text: bytes) -> str:
    """The digest a grade keeps of the source it graded."""
    return hashlib.sha256(text).hexdigest()


def file_digest(path: Path) -> str:
    """``source_digest`` of the module at ``path`` as it is now ("" where it cannot be read)."""
    try:
        return source_digest(read_small_file(path, 1 << 24) or b"")
    except (OSError, NotData):
        return ""


@dataclass
class PartGrade:
    status: str  # "passed", "failed", "not-started", "missing"
    passed: int
    total: int
    checked_at: str  # ISO 8601, local time
    source: str = ""  # source_digest of the module graded ("" where it was not given)

    def consistent(self) -> bool:
        """Whether its numbers could come from a check: no more passed than counted, and
        "passed" only with every counted case passed."""
        return 0 <= self.passed <= self.total and \
            (self.status != "passed" or self.passed == self.total > 0)


@dataclass
class State:
    grades: dict[str, dict[str, PartGrade]] = field(default_factory=dict)
    hints_shown: dict[str, dict[str, int]] = field(default_factory=dict)
    # Exercises whose module did not import at their last check: {exercise: why}. That check
    # measured nothing, so the grades above stay those of the last code that imported.
    not_importing: dict[str, str] = field(default_factory=dict)
    note: str = ""  # what happened while loading, for the command to mention

    def grade(self, exercise: str, part: str) -> PartGrade | None:
        return self.grades.get(exercise, {}).get(part)

    def record(self, exercise: str, part: str, status: str, passed: int, total: int,
               source: str = ""):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.grades.setdefault(exercise, {})[part] = PartGrade(status, passed, total, stamp,
                                                               source)

    def forget(self, exercise: str):
        """Drop an exercise's grades (its module was reset); the hints seen stay seen."""
        self.grades.pop(exercise, None)
        self.not_importing.pop(exercise, None)

    def import_failed(self, exercise: str, why: str):
        """The module did not import at this check: its stored grades are kept, and marked."""
        self.not_importing[exercise] = why

    def imported(self, exercise: str):
        self.not_importing.pop(exercise, None)

    def does_not_import(self, exercise: str) -> str:
        """Why the exercise's module did not import at its last check, or ''."""
        return self.not_importing.get(exercise, "")

    def hints_seen(self, exercise: str, part: str) -> int:
        return self.hints_shown.get(exercise, {}).get(part, 0)

    def saw_hint(self, exercise: str, part: str, level: int):
        self.hints_shown.setdefault(exercise, {})[part] = level

    def to_json(self, key: bytes = b"") -> dict:
        return {
            "format": FORMAT,
            "grades": {e: {p: dict(asdict(g), mac=_mac(key, e, p, g)) for p, g in parts.items()}
                       for e, parts in self.grades.items()},
            "hints_shown": self.hints_shown,
            "not_importing": self.not_importing,
        }


def _mac(key: bytes, exercise: str, part: str, grade: PartGrade) -> str:
    fields = [exercise, part, grade.status, str(grade.passed), str(grade.total),
              grade.checked_at, grade.source]
    return hmac.new(key, "\0".join(fields).encode(), hashlib.sha256).hexdigest()


def state_path(root: Path) -> Path:
    return Path(root) / STATE_DIR / STATE_FILE


#: Bytes of a learner's module read at most: a larger file is no module (it is refused unread)
MODULE_LIMIT = 16 * 2**20


class NotData(Exception):
    """A state file that is not a regular file of a sane size: a FIFO, a device, a link."""


def read_small_file(path: Path, limit: int = MAX_STATE_BYTES, *,
                    follow: bool = False) -> bytes | None:
    """The bytes of ``path``, if it is a regular file of at most ``limit`` bytes; None if it
    does not exist. Never waits: a FIFO, a device, a socket or a larger file raises NotData,
    saying which; so does a link, unless ``follow`` (then the file it leads to is read, if it
    is a regular one: a learner's module may be a link to where they keep their work)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | \
        (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as error:  # ELOOP: a link; ENXIO: a socket or a FIFO nobody writes
        kind = _kind(path)
        if kind == "a regular file":
            raise
        raise NotData(kind) from error
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotData(_kind_of(info.st_mode))
        if info.st_size > limit:
            raise NotData(f"a file of {info.st_size:,} bytes")
        data = os.read(fd, limit + 1)
        if len(data) > limit:
            raise NotData(f"a file of more than {limit:,} bytes")
        return data
    finally:
        os.close(fd)


def _kind(path: Path) -> str:
    try:
        return _kind_of(os.lstat(path).st_mode)
    except OSError:
        return "something that cannot be read"


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def _state_folder_is_ours(root: Path) -> bool:
    """Whether ``.course-state`` is a folder of its own (or absent): a link or a file in its
    place would have the state read from, or written to, somewhere else."""
    try:
        return stat.S_ISDIR(os.lstat(Path(root) / STATE_DIR).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _key(root: Path, create: bool) -> bytes:
    """The key the grades are signed with, made on first use; b"" when there is none."""
    path = Path(root) / STATE_DIR / KEY_FILE
    try:
        data = read_small_file(path, 1024)
        if data:
            return data
    except NotData:  # a FIFO or a link in its place: a new key, and every grade re-earned
        if not create:
            return b""
        with contextlib.suppress(OSError):
            path.rename(path.with_name(f"{KEY_FILE}.not-a-file-{time.strftime('%Y%m%d-%H%M%S')}"))
    except OSError:
        pass
    if not create:
        return b""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_hex(32).encode())
    with contextlib.suppress(NotData, OSError):
        return read_small_file(path, 1024) or b""
    return b""


def _set_aside(path: Path, why: str) -> str:
    aside = path.with_name(f"{STATE_FILE}.{why}-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        path.rename(aside)
        return f"set aside as {aside.name}"
    except OSError:
        return "left in place"


def load(root: Path) -> State:
    """The saved state, or an empty one (with a note) when the file is missing, unreadable or
    not a file at all. Grades whose MAC does not match, or whose numbers no check could give,
    are left out, with a note."""
    path = state_path(root)
    if not _state_folder_is_ours(root):
        return State(note=f"{STATE_DIR} is {_kind(Path(root) / STATE_DIR)}, not a folder: "
                          "no grades are read from it or saved in it")
    try:
        data = read_small_file(path)
    except NotData as odd:
        where = _set_aside(path, "not-a-file")
        return State(note=f"the progress file was {odd}, not a regular file; it was {where}, "
                          "and re-checking rebuilds it")
    except OSError as error:
        return State(note=f"the progress file could not be read ({type(error).__name__}); "
                          "re-checking rebuilds it")
    if data is None:
        return State()
    try:
        return _from_json(json.loads(data.decode("utf-8")), _key(root, create=False))
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        where = _set_aside(path, "unreadable")
        return State(note=f"the progress file could not be read ({type(error).__name__}); it "
                          f"was {where}, and re-checking rebuilds it")


def _from_json(data, key: bytes) -> State:
    if not isinstance(data, dict) or data.get("format") not in (1, FORMAT):
        raise ValueError("not a progress file of this course")
    grades, dropped = {}, 0
    for exercise, parts in data.get("grades", {}).items():
        for part, g in parts.items():
            grade = PartGrade(str(g["status"]), int(g["passed"]), int(g["total"]),
                              str(g["checked_at"]), str(g.get("source", "")))
            signed = isinstance(g.get("mac"), str) and key and \
                hmac.compare_digest(g["mac"], _mac(key, str(exercise), str(part), grade))
            if signed and grade.consistent():
                grades.setdefault(str(exercise), {})[str(part)] = grade
            else:
                dropped += 1
    hints = {str(e): {str(p): int(level) for p, level in parts.items()}
             for e, parts in data.get("hints_shown", {}).items()}
    # Absent from files written before it was kept: read as none.
    broken = {str(e): str(why) for e, why in data.get("not_importing", {}).items()}
    note = ""
    if dropped:
        note = (f"{dropped} grade{'s' if dropped != 1 else ''} in the progress file "
                f"{'were' if dropped != 1 else 'was'} not recorded by a check (edited, copied "
                "from elsewhere, or from an older version of the course) and "
                f"{'were' if dropped != 1 else 'was'} left out; checking again records "
                f"{'them' if dropped != 1 else 'it'}")
    return State(grades, hints, broken, note)


def save(root: Path, state: State) -> Path | None:
    """Write atomically (a crash never leaves half a file); None if the folder is read-only,
    or is not a folder of its own."""
    path = state_path(root)
    temporary = None
    if not _state_folder_is_ours(root):
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = _key(root, create=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".progress-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(state.to_json(key), out, indent=2, sort_keys=True)
        for attempt in range(REPLACE_ATTEMPTS):
            try:
                os.replace(temporary, path)
                break
            except PermissionError:  # another command is reading it (on Windows)
                if attempt == REPLACE_ATTEMPTS - 1:
                    raise
                time.sleep(0.025)
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return None
    return path
