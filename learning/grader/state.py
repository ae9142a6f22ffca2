"""The learner's progress: the last grade of every part, and the hints already shown.

Kept in ``.course-state/progress.json`` in the course folder. The file is a cache: deleting
it loses nothing that re-checking does not rebuild, and a corrupted or foreign file is set
aside (renamed, never deleted) and replaced by an empty state instead of breaking a command.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_DIR = ".course-state"
STATE_FILE = "progress.json"
FORMAT = 1
REPLACE_ATTEMPTS = 20  # 25 ms apart: Windows refuses to replace a file another process reads


@dataclass
class PartGrade:
    status: str  # "passed", "failed", "not-started", "missing"
    passed: int
    total: int
    checked_at: str  # ISO 8601, local time


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

    def record(self, exercise: str, part: str, status: str, passed: int, total: int):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.grades.setdefault(exercise, {})[part] = PartGrade(status, passed, total, stamp)

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

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "grades": {e: {p: asdict(g) for p, g in parts.items()}
                       for e, parts in self.grades.items()},
            "hints_shown": self.hints_shown,
            "not_importing": self.not_importing,
        }


def state_path(root: Path) -> Path:
    return Path(root) / STATE_DIR / STATE_FILE


def load(root: Path) -> State:
    """The saved state, or an empty one (with a note) when the file is missing or unreadable."""
    path = state_path(root)
    if not path.exists():
        return State()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return _from_json(data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        aside = path.with_name(f"{STATE_FILE}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            path.rename(aside)
            where = f"set aside as {aside.name}"
        except OSError:
            where = "left in place"
        return State(note=f"the progress file could not be read ({type(error).__name__}); it "
                          f"was {where}, and re-checking rebuilds it")


def _from_json(data) -> State:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError("not a progress file of this course")
    grades = {}
    for exercise, parts in data.get("grades", {}).items():
        grades[str(exercise)] = {str(part): PartGrade(str(g["status"]), int(g["passed"]),
                                                      int(g["total"]), str(g["checked_at"]))
                                 for part, g in parts.items()}
    hints = {str(e): {str(p): int(level) for p, level in parts.items()}
             for e, parts in data.get("hints_shown", {}).items()}
    # Absent from files written before it was kept: read as none.
    broken = {str(e): str(why) for e, why in data.get("not_importing", {}).items()}
    return State(grades, hints, broken)


def save(root: Path, state: State) -> Path | None:
    """Write atomically (a crash never leaves half a file); None if the folder is read-only."""
    path = state_path(root)
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".progress-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(state.to_json(), out, indent=2, sort_keys=True)
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
