"""Every command the course suggests to a learner is printed on one line, at 80 columns and
piped, so that it can be copied from a narrow terminal or a log and run as printed. (Commands
too long for an indented line, bench runs with their output paths, wrap at their spaces.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from learning.cli import COMMAND, keep_commands_whole
from tests.helpers import COURSE_ROOT, course_pythonpath, stub_text, write_module


def run_piped(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          cwd=COURSE_ROOT, timeout=600,
                          env=dict(os.environ, COLUMNS="80", PYTHONPATH=course_pythonpath()))
    return done.stdout + done.stderr


def broken_commands(out: str) -> list[str]:
    """The suggested commands in ``out`` (its lines read as one text) that no single line holds
    whole: the ones a wrap split."""
    lines = out.splitlines()
    joined = " ".join(line.strip() for line in lines)
    return [found.group(0) for found in COMMAND.finditer(joined)
            if not any(found.group(0) in line for line in lines)]


def test_commands_are_joined_only_where_they_are():
    text = "then run python -m learning.check softmax --hint 2 again, or python3 -m learning.x"
    joined = keep_commands_whole(text)
    assert joined.replace("\ue000", " ") == text
    assert joined.split(" ") == ["then", "run", joined.split(" ")[2], "again,", "or",
                                 joined.split(" ")[-1]]
    assert "learning.check\ue000softmax\ue000--hint\ue0002" in joined
    long = "python -m learning.bench softmax --json /root/out/softmax.json --plot /root/o.png"
    assert keep_commands_whole(long) == long  # would not fit an indented 80-column line


def test_the_checker_finds_a_command_split_by_a_wrap():
    # the test below would pass on output with no commands, so it must see a split one here
    out = "Next: read lessons/04-softmax.md, write your code in softmax.py, then run python\n" \
          "-m learning.check softmax\n"
    assert broken_commands(out) == ["python -m learning.check softmax"]
    assert broken_commands(out.replace("python\n-m", "\npython -m")) == []


# solution and progress print their commands through the same console as check does
@pytest.mark.parametrize("case", ["wrong", *(pytest.param(c, marks=pytest.mark.exhaustive)
                                             for c in ("not started", "hint", "solution",
                                                       "progress"))])
def test_suggested_commands_stay_on_one_line_at_80_columns(case, tmp_path):
    write_module(tmp_path, "softmax", stub_text("softmax"))
    root = ("--root", str(tmp_path))
    if case == "not started":
        out = run_piped("learning.check", "softmax", *root)
    elif case == "hint":
        out = run_piped("learning.check", "softmax", "--hint", "4", *root)  # the last: names
        # the solution command
    elif case == "solution":
        out = run_piped("learning.solution", "softmax", *root)
    elif case == "progress":
        out = run_piped("learning.progress", *root)
    else:
        wrong = stub_text("softmax").replace(
            "raise NotImplementedError", "return [0.0 for _ in row]", 1)
        write_module(tmp_path, "softmax", wrong)
        out = run_piped("learning.check", "softmax", "--part", "python", *root)
    assert "python -m learning." in out, out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert broken_commands(out) == [], out
    # rich keeps the space it wraps a line at; the course's console drops it
    assert not [line for line in out.splitlines() if line.endswith(" ")], [
        line for line in out.splitlines() if line.endswith(" ")]


@pytest.mark.parametrize("columns", ["0", *(pytest.param(c, marks=pytest.mark.exhaustive)
                                           for c in ("-3", "wide"))])
def test_a_columns_setting_no_line_fits_in_still_prints_at_80(columns, tmp_path):
    # rich printed nothing at all with COLUMNS=0; such a setting is read as 80 instead
    write_module(tmp_path, "softmax", stub_text("softmax"))
    done = subprocess.run([sys.executable, "-m", "learning.check", "softmax", "--root",
                           str(tmp_path)], capture_output=True, text=True, cwd=COURSE_ROOT,
                          timeout=600, env=dict(os.environ, COLUMNS=columns,
                                                PYTHONPATH=course_pythonpath()))
    assert done.returncode == 1 and "Python not started" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 80


def test_progress_keeps_every_exercise_file_name_on_one_line_at_80_columns():
    # attention_backward.py was split across two lines of the table
    out = run_piped("learning.progress")
    from learning.grader import registry

    names = {f"{exercise.name}.py" for exercise in registry.all_exercises()}
    assert names and all(name in out for name in names), out
