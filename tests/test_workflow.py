"""The loop around the exercises: progress, hints, --json, reset, solution, doctor and watch."""

import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from learning import check, course, doctor, progress, reset, solution
from learning.grader import mode, registry, state
from tests.helpers import COURSE_ROOT, course_pythonpath, solution_text, stub_text, write_module


@pytest.fixture(autouse=True)
def wide_plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def run(capsys, command, *argv):
    code = command.main(list(argv))
    return code, capsys.readouterr().out


def all_passed_but(root, exercise_name, part_name):
    """A progress file in which every graded part passes except one."""
    saved = state.State()
    for exercise in registry.all_exercises():
        for part in exercise.parts:
            status = "failed" if (exercise.name, part.name) == (exercise_name, part_name) \
                else "passed"
            saved.record(exercise.name, part.name, status, 1, 1)
    state.save(root, saved)


# --- progress and the state file --------------------------------------------------------------

def test_progress_lists_every_lesson_in_order_and_the_next_step(tmp_path, capsys):
    code, out = run(capsys, progress, "--root", str(tmp_path))
    assert code == 0
    positions = [out.index(lesson.title[:20]) for lesson in course.LESSONS]
    assert positions == sorted(positions)
    assert "Next: Read lessons/" in out


def test_an_exercise_checked_before_it_was_started_still_says_read_the_lesson(tmp_path,
                                                                              capsys):
    write_module(tmp_path, "elementwise", stub_text("elementwise"))
    check.main(["elementwise", "--root", str(tmp_path), "--part", "python"])
    capsys.readouterr()
    code, out = run(capsys, progress, "--root", str(tmp_path))
    assert "Next: Read lessons/01-elementwise.md" in out and "Fix" not in out


def test_progress_shows_the_grades_of_the_last_check(tmp_path, capsys):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    assert check.main(["softmax", "--root", str(tmp_path), "--part", "python"]) == 0
    capsys.readouterr()
    code, out = run(capsys, progress, "--root", str(tmp_path), "--json")
    document = json.loads(out)
    lesson_04 = next(row for row in document["lessons"] if row["lesson"] == "04")
    assert lesson_04["parts"]["python"]["status"] == "passed"
    assert lesson_04["parts"]["python"]["passed"] == lesson_04["parts"]["python"]["total"] == 11


def test_progress_says_a_part_failed_whose_every_case_passed():
    # the GPU compiler rejected the kernel after every case passed in the interpreter: the
    # count alone would read as a pass wherever the colour is not seen
    from learning.progress import _grade_text

    text, _ = _grade_text({"status": "failed", "passed": 15, "total": 15})
    assert text == "15/15, failed"
    assert _grade_text({"status": "passed", "passed": 15, "total": 15})[0] == "15/15"
    assert _grade_text({"status": "failed", "passed": 9, "total": 15})[0] == "9/15"


def test_progress_lists_a_lessons_parts_in_the_order_the_exercise_declares_them(tmp_path,
                                                                                capsys):
    code, out = run(capsys, progress, "--root", str(tmp_path), "--json")
    for row in json.loads(out)["lessons"]:
        if row["exercise"]:
            exercise = registry.find(row["exercise"].removesuffix(".py"))
            declared = [p.name for p in exercise.parts]
            assert list(row["parts"]) == sorted(row["parts"], key=declared.index), row
    lesson_11 = next(r for r in json.loads(out)["lessons"] if r["lesson"] == "11")
    assert list(lesson_11["parts"]) == ["python", "triton", "autograd"]


def test_corrupted_state_file_is_set_aside_not_fatal(tmp_path, capsys):
    path = state.state_path(tmp_path)
    path.parent.mkdir()
    path.write_text("{not json", encoding="utf-8")
    code, out = run(capsys, progress, "--root", str(tmp_path))
    assert code == 0
    assert "the progress file could not be read" in out
    assert not path.exists()
    assert any(p.name.startswith("progress.json.unreadable-") for p in path.parent.iterdir())


def test_foreign_state_file_is_set_aside_too(tmp_path):
    path = state.state_path(tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps({"format": 99, "grades": []}), encoding="utf-8")
    loaded = state.load(tmp_path)
    assert loaded.grades == {} and "could not be read" in loaded.note


def test_saving_waits_out_a_reader_that_holds_the_file_and_leaves_no_temporary(tmp_path,
                                                                              monkeypatch):
    """Windows refuses to replace a file that another process has open (a progress command
    reading it while a check saves): the save tries again for a moment, then gives up cleanly."""
    import os

    replace, refusals = os.replace, []

    def refused_twice(source, target):
        if len(refusals) < 2:
            refusals.append(target)
            raise PermissionError(13, "the file is open in another process")
        replace(source, target)

    progress_ = state.State()
    progress_.record("softmax", "python", "passed", 11, 11)
    monkeypatch.setattr(os, "replace", refused_twice)
    assert state.save(tmp_path, progress_) == state.state_path(tmp_path)
    assert state.load(tmp_path).grade("softmax", "python").status == "passed"

    def always_refused(source, target):
        raise PermissionError(13, "the file is open in another process")

    monkeypatch.setattr(os, "replace", always_refused)
    assert state.save(tmp_path, state.State()) is None
    left = sorted(p.name for p in state.state_path(tmp_path).parent.iterdir())
    assert left == [state.KEY_FILE, "progress.json"]
    assert state.load(tmp_path).grade("softmax", "python").status == "passed"


def test_deleting_the_state_file_loses_nothing_rechecking_cannot_rebuild(tmp_path, capsys):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    check.main(["softmax", "--root", str(tmp_path), "--part", "python"])
    state.state_path(tmp_path).unlink()
    check.main(["softmax", "--root", str(tmp_path), "--part", "python"])
    capsys.readouterr()
    assert state.load(tmp_path).grade("softmax", "python").status == "passed"


def test_check_without_a_name_checks_the_next_unfinished_exercise(tmp_path, capsys):
    all_passed_but(tmp_path, "softmax", "python")
    write_module(tmp_path, "softmax", solution_text("softmax"))
    assert check.next_unfinished(state.load(tmp_path)).name == "softmax"
    code, out = run(capsys, check, "--root", str(tmp_path), "--part", "python")
    assert code == 0
    assert "check softmax" in out


def test_check_all_covers_every_exercise_in_one_json_document(tmp_path, capsys):
    code, out = run(capsys, check, "--all", "--json", "--root", str(tmp_path))
    document = json.loads(out)
    assert code == 1 and document["ok"] is False
    names = [e["exercise"] for e in document["exercises"]]
    assert names == [e.name for e in registry.all_exercises()]
    assert all(e["import_problem"]["kind"] == "missing-file" for e in document["exercises"])


def test_check_json_reports_cases_verdicts_and_causes(tmp_path, capsys):
    write_module(tmp_path, "softmax", f"{solution_text('softmax')}\n\n"
                 "def softmax_python(values):\n    return [math.exp(v) for v in values]\n")
    code, out = run(capsys, check, "softmax", "--json", "--part", "python", "--root",
                    str(tmp_path))
    document = json.loads(out)
    assert code == 1 and document["ok"] is False
    (part,) = document["parts"]
    assert part["status"] == "failed" and part["total"] == 11
    worked = next(c for c in part["cases"] if c["name"] == "worked example")
    assert worked["status"] == "failed" and worked["bug"] == "exp-only"
    assert worked["expected"].startswith("[0.090030573")


# --- hints ------------------------------------------------------------------------------------

def test_hints_come_in_levels_and_are_remembered(tmp_path, capsys):
    write_module(tmp_path, "softmax", stub_text("softmax"))
    hints = registry.find("softmax").part("python").hints
    for level in range(1, len(hints) + 2):
        code, out = run(capsys, check, "softmax", "--hint", "--root", str(tmp_path))
        shown = min(level, len(hints))
        assert code == 0
        assert f"Hint {shown} of {len(hints)}" in out
        assert hints[shown - 1][:40] in out
    assert "That is the last hint. Once every part of softmax passes, python -m " \
        "learning.solution softmax shows the reference solution." in " ".join(out.split())


def test_a_part_set_late_in_its_lesson_says_where_its_task_starts(tmp_path, capsys):
    write_module(tmp_path, "matmul", stub_text("matmul"))
    code, out = run(capsys, check, "matmul", "--part", "plan", "--root", str(tmp_path))
    assert 'matmul_plan still raises NotImplementedError; lessons/12-matmul.md, "Your second ' \
        'task: plan the launch", starts it.' in " ".join(out.split())


def test_numpy_scalars_in_an_exact_answer_are_named_with_the_fix(tmp_path, capsys):
    write_module(tmp_path, "matmul", solution_text("matmul") + """

import numpy as np
_plain_plan = matmul_plan


def matmul_plan(*args):
    return {key: np.int64(value) if type(value) is int else np.bool_(value)
            for key, value in _plain_plan(*args).items()}
""")
    code, out = run(capsys, check, "matmul", "--part", "plan", "--root", str(tmp_path))
    said = " ".join(out.split())
    assert code == 1 and "Plan 0/12" in said
    assert "returned numpy scalars (numpy.bool, numpy.int64) where the reference has Python's " \
        "own int, float and bool: convert each value with int(), float() or bool()" in said


def test_a_failing_case_points_at_the_hint_that_helps(tmp_path, capsys):
    write_module(tmp_path, "softmax", f"{solution_text('softmax')}\n\n"
                 "def softmax_python(values):\n"
                 "    total = sum(math.exp(v) for v in values)\n"
                 "    return [math.exp(v) / total for v in values]\n")
    code, out = run(capsys, check, "softmax", "--part", "python", "--root", str(tmp_path))
    assert "hint 2 of 4 helps with this: python -m learning.check softmax --part python --hint" \
        in out
    for _ in range(2):
        run(capsys, check, "softmax", "--hint", "--root", str(tmp_path))
    code, out = run(capsys, check, "softmax", "--part", "python", "--root", str(tmp_path))
    assert "hint 2: shifted = [v - maximum for v in values]" in out


@pytest.mark.parametrize("breakage, kind", [("def broken(:\n", "syntax"),
                                             ("raise RuntimeError('top level')\n", "exception")])
def test_a_module_that_does_not_import_gets_no_hint_from_old_grades(tmp_path, capsys, breakage,
                                                                    kind, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # the sentence wraps at the console's width
    saved = state.State()
    saved.record("softmax", "python", "passed", 11, 11)
    saved.record("softmax", "triton", "failed", 0, 14)
    state.save(tmp_path, saved)
    write_module(tmp_path, "softmax", f"{solution_text('softmax')}\n{breakage}")
    code, out = run(capsys, check, "softmax", "--hint", "--root", str(tmp_path))
    assert code == 1
    said = " ".join(out.split())
    assert "Hint" not in out and all(len(line) <= 80 for line in out.splitlines()), out
    assert said.startswith("No hint: softmax.py must import first (")
    assert said.endswith("); python -m learning.check softmax shows the details.")
    code, out = run(capsys, check, "softmax", "--part", "python", "--hint", "2", "--json",
                    "--root", str(tmp_path))
    document = json.loads(out)
    assert code == 1 and document["hint"] is None
    assert document["import_problem"]["kind"] == kind
    assert state.load(tmp_path).hints_shown == {}  # nothing seen, nothing advanced
    write_module(tmp_path, "softmax", solution_text("softmax"))  # it imports again: as before
    code, out = run(capsys, check, "softmax", "--hint", "--root", str(tmp_path))
    assert code == 0 and "Hint 1 of 5 for the triton part" in out
    assert state.load(tmp_path).hints_seen("softmax", "triton") == 1


# --- reset ------------------------------------------------------------------------------------

def test_a_check_that_cannot_import_keeps_the_grades_it_never_measured(tmp_path, capsys):
    all_passed_but(tmp_path, "softmax", "triton")  # lessons 01 to 07 done
    saved = state.load(tmp_path)
    saved.record("softmax", "python", "passed", 11, 11)
    saved.record("softmax", "triton", "not-started", 0, 14)
    state.save(tmp_path, saved)
    write_module(tmp_path, "softmax", "def softmax_python(values):\n    maximum = max(values\n")
    code, out = run(capsys, check, "softmax", "--root", str(tmp_path))
    assert code == 1
    assert "NOT RUN" not in out  # one line per part, not one per case
    assert "Python part" in out and "Triton part" in out
    assert out.count("not run: softmax.py could not be imported, so its") == 2
    assert "Grade: Python not run · Triton not run" in out and "0/1" not in out
    assert "Next: fix softmax.py" in out
    kept = state.load(tmp_path)
    assert kept.grade("softmax", "python").status == "passed"
    assert kept.grade("softmax", "triton").status == "not-started"
    assert "syntax error in softmax.py" in kept.does_not_import("softmax")
    code, out = run(capsys, progress, "--root", str(tmp_path))
    assert "11/11 (does not import now)" in out
    assert "not started (does not import now)" in out and "0/14" not in out
    assert "Next: Fix softmax.py (it did not import at its last check)" in out
    code, out = run(capsys, check, "softmax", "--json", "--root", str(tmp_path))
    document = json.loads(out)  # every case is still listed, with its status
    assert [p["status"] for p in document["parts"]] == ["not-run", "not-run"]
    assert {c["status"] for c in document["parts"][0]["cases"]} == {"not-run"}
    assert len(document["parts"][0]["cases"]) == 11
    write_module(tmp_path, "softmax", solution_text("softmax"))  # it imports again
    assert check.main(["softmax", "--part", "python", "--root", str(tmp_path)]) == 0
    capsys.readouterr()
    assert state.load(tmp_path).does_not_import("softmax") == ""


def test_an_exercise_never_checked_that_does_not_import_is_marked_too(tmp_path, capsys):
    write_module(tmp_path, "softmax", "def softmax_python(values):\n    maximum = max(values\n")
    run(capsys, check, "softmax", "--root", str(tmp_path))
    code, out = run(capsys, progress, "--root", str(tmp_path))
    assert out.count("not checked (does not import now)") == 2  # both parts of softmax.py


def test_reset_backs_up_the_learners_file_then_restores_the_stub(tmp_path, capsys):
    mine = solution_text("softmax") + "\n# my notes\n"
    write_module(tmp_path, "softmax", mine)
    code, out = run(capsys, reset, "softmax", "--yes", "--root", str(tmp_path))
    assert code == 0
    assert (tmp_path / "softmax.py").read_text() == stub_text("softmax")
    backups = list((tmp_path / ".course-state" / "backups").iterdir())
    assert len(backups) == 1 and backups[0].read_text() == mine
    assert str(backups[0]) in out.replace("\n", "")


def test_reset_without_yes_and_without_a_terminal_changes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    write_module(tmp_path, "softmax", "mine\n")
    code, out = run(capsys, reset, "softmax", "--root", str(tmp_path))
    assert code == 1
    assert (tmp_path / "softmax.py").read_text() == "mine\n"
    assert "Nothing changed: softmax.py is as it was" in out and "--yes" in out


def test_reset_forgets_the_grades_of_the_code_it_replaced(tmp_path, capsys):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    check.main(["softmax", "--root", str(tmp_path), "--part", "python"])
    assert state.load(tmp_path).grade("softmax", "python").status == "passed"
    assert reset.main(["softmax", "--yes", "--root", str(tmp_path)]) == 0
    assert state.load(tmp_path).grade("softmax", "python") is None


def test_reset_of_a_passed_exercise_says_its_solution_locks_again(tmp_path, capsys):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    check.main(["softmax", "--root", str(tmp_path)])
    capsys.readouterr()
    assert run(capsys, solution, "softmax", "--root", str(tmp_path))[0] == 0
    code, out = run(capsys, reset, "softmax", "--yes", "--root", str(tmp_path))
    assert code == 0 and "solution locks again" in " ".join(out.split())
    assert run(capsys, solution, "softmax", "--root", str(tmp_path))[0] == 1
    # an exercise that had not passed says nothing of the kind
    write_module(tmp_path, "softmax", "mine\n")
    code, out = run(capsys, reset, "softmax", "--yes", "--root", str(tmp_path))
    assert code == 0 and "locks again" not in out


# every command reads --root with the same argparse type (learning.cli.folder): the quick run
# proves it with an exercise (check) and without one (progress); the others are exhaustive
@pytest.mark.parametrize("command", [
    c if c in ("check", "progress") else pytest.param(c, marks=pytest.mark.exhaustive)
    for c in ["check", "reset", "solution", "watch", "progress", "doctor"]])
def test_a_root_that_is_not_a_folder_is_one_line_and_status_2(command, tmp_path):
    exercise = [] if command in ("progress", "doctor") else ["softmax"]
    for root in (tmp_path / "missing", tmp_path / "a-file"):
        (tmp_path / "a-file").write_text("x")
        done = subprocess.run([sys.executable, "-m", f"learning.{command}", *exercise,
                               "--root", str(root)], capture_output=True, text=True,
                              cwd=COURSE_ROOT, timeout=120,
                              env=dict(os.environ, COLUMNS="200",
                                       PYTHONPATH=course_pythonpath()))
        said = (done.stdout + done.stderr).strip()
        assert done.returncode == 2, said
        assert "Traceback" not in said and len(said.splitlines()) == 1, said
        assert f"{command}: argument --root: {root}" in said, said
        assert not (tmp_path / "missing").exists()  # and nothing was made there


def test_reset_onto_a_folder_named_as_the_module_changes_nothing(tmp_path, capsys):
    (tmp_path / "softmax.py").mkdir()
    code, out = run(capsys, reset, "softmax", "--yes", "--root", str(tmp_path))
    assert code == 2 and "is a folder" in out and "Traceback" not in out
    assert (tmp_path / "softmax.py").is_dir()


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"),
                    reason="needs FIFOs and /dev/zero (POSIX)")
def test_reset_puts_the_stub_in_place_of_what_is_no_module_and_loses_nothing(tmp_path,
                                                                             capsys):
    # a FIFO hung reset and a link to /dev/zero ran it out of memory (each was read whole):
    # what holds no text is removed, a link is replaced (its file left as it is, a copy kept),
    # a file too large to read is moved into the backups whole
    os.mkfifo(tmp_path / "softmax.py")
    (tmp_path / "elementwise.py").symlink_to("/dev/zero")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    (tmp_path / "rmsnorm.py").symlink_to(outside)
    with open(tmp_path / "matmul.py", "wb") as handle:
        handle.truncate(3 * 2**30)  # sparse: no disk used
    backups = tmp_path / ".course-state" / "backups"
    said = {}
    for name in ("softmax", "elementwise", "rmsnorm", "matmul"):
        code, out = run(capsys, reset, name, "--yes", "--root", str(tmp_path))
        said[name] = " ".join(out.split())
        assert code == 0 and "Traceback" not in out, out
        assert (tmp_path / f"{name}.py").read_text() == stub_text(name)
        assert not (tmp_path / f"{name}.py").is_symlink()
    assert "softmax.py was a FIFO, which holds no file's text: it was removed" in said["softmax"]
    assert "elementwise.py was a link to /dev/zero: the link was replaced" in \
        said["elementwise"]
    assert outside.read_text() == "x = 1\n" and "the link was replaced" in said["rmsnorm"]
    (kept,) = backups.glob("rmsnorm-*.py")
    assert kept.read_text() == "x = 1\n"
    (moved,) = backups.glob("matmul-*.py")
    assert moved.stat().st_size == 3 * 2**30 and str(moved) in said["matmul"]


def test_reset_that_cannot_back_up_names_the_backup_folder_and_keeps_the_file(tmp_path,
                                                                              capsys):
    # a file where the state folder should be: the backup fails, and the error names where it
    # would have gone, not the learner's file, which is left as it was
    mine = solution_text("softmax") + "\n# my notes\n"
    write_module(tmp_path, "softmax", mine)
    (tmp_path / ".course-state").write_text("not a folder")
    code, out = run(capsys, reset, "softmax", "--yes", "--root", str(tmp_path))
    said = " ".join(out.split())
    assert code == 1 and "could not back up" in said and "backups" in said
    assert "softmax.py was left as it was" in said
    assert (tmp_path / "softmax.py").read_text() == mine


def test_the_reset_question_shows_its_answers(tmp_path, capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    write_module(tmp_path, "softmax", "mine\n")
    code, out = run(capsys, reset, "softmax", "--root", str(tmp_path))
    assert code == 1 and "[y/N]" in out
    assert (tmp_path / "softmax.py").read_text() == "mine\n"


def _reset_softmax(root: Path, **stdin) -> subprocess.CompletedProcess:
    """python -m learning.reset softmax as a learner runs it, its output piped at 80 columns;
    ``stdin`` is subprocess.run's: the learner's terminal, or input piped in."""
    return subprocess.run([sys.executable, "-m", "learning.reset", "softmax", "--root",
                           str(root)], capture_output=True, text=True, cwd=COURSE_ROOT,
                          timeout=60, **stdin,
                          env=dict(os.environ, COLUMNS="80", PYTHONPATH=course_pythonpath()))


def _nothing_changed(root: Path, done: subprocess.CompletedProcess) -> str:
    """The output, once it is clear that reset changed nothing and said so."""
    out = " ".join(done.stdout.split())
    assert done.returncode == 1, done.stdout + done.stderr
    assert (root / "softmax.py").read_text() == "mine\n"
    assert not (root / ".course-state").exists()  # no backup made, no grades forgotten
    assert "Nothing changed: softmax.py is as it was, and no backup was made." in out
    assert "answer y" not in out and "reset:" not in out  # a choice the learner made, no error
    return out


def test_answering_no_at_the_terminal_says_nothing_changed(tmp_path):
    pty = pytest.importorskip("pty")
    write_module(tmp_path, "softmax", "mine\n")
    learner, terminal = pty.openpty()
    os.write(learner, b"n\n")  # typed at the question
    try:
        done = _reset_softmax(tmp_path, stdin=terminal)
    finally:
        os.close(terminal)
        os.close(learner)
    assert "[y/N]" in _nothing_changed(tmp_path, done)


def test_no_piped_in_says_nothing_changed_and_how_to_reset_without_asking(tmp_path):
    write_module(tmp_path, "softmax", "mine\n")
    done = _reset_softmax(tmp_path, input="n\n")
    out = _nothing_changed(tmp_path, done)
    assert all(len(line) <= 80 for line in done.stdout.splitlines()), done.stdout
    assert "[y/N]" not in out  # no question: none can be answered from a pipe
    assert "cannot ask here (the input is not a terminal); pass --yes" in out


def test_reset_twice_keeps_both_backups(tmp_path, capsys):
    for version in ("first\n", "second\n"):
        write_module(tmp_path, "softmax", version)
        assert reset.main(["softmax", "--yes", "--root", str(tmp_path)]) == 0
    backups = sorted(p.read_text() for p in (tmp_path / ".course-state" / "backups").iterdir())
    assert backups == ["first\n", "second\n"]


def test_reset_writes_its_backup_as_a_new_file_never_through_a_link(tmp_path, capsys):
    # links waiting under every backup name the next minutes could take, pointing at a file a
    # later Python would run: the backup is written beside them, and nothing reaches the target
    import time as clock

    folder = tmp_path / ".course-state" / "backups"
    folder.mkdir(parents=True)
    target = tmp_path / "sitecustomize.py"
    now = clock.time()
    for second in range(-2, 120):
        stamp = clock.strftime("%Y%m%d-%H%M%S", clock.localtime(now + second))
        (folder / f"softmax-{stamp}.py").symlink_to(target)
    write_module(tmp_path, "softmax", "mine\n")
    assert reset.main(["softmax", "--yes", "--root", str(tmp_path)]) == 0
    assert not target.exists()
    kept = [p for p in folder.iterdir() if not p.is_symlink()]
    assert [p.read_text() for p in kept] == ["mine\n"]


def test_reset_of_an_unchanged_stub_does_nothing(tmp_path, capsys):
    write_module(tmp_path, "softmax", stub_text("softmax"))
    code, out = run(capsys, reset, "softmax", "--yes", "--root", str(tmp_path))
    assert code == 0 and "nothing to do" in out
    assert not (tmp_path / ".course-state").exists()


# --- solution ---------------------------------------------------------------------------------

def test_solution_refuses_before_the_exercise_passes_and_says_why(tmp_path, capsys):
    code, out = run(capsys, solution, "softmax", "--root", str(tmp_path))
    assert code == 1
    assert "opens once every part passes" in out and "python: not checked yet" in out
    assert "def softmax_kernel" not in out


def test_solution_redirected_to_a_file_is_the_file_itself(tmp_path):
    out = tmp_path / "ref.py"
    with out.open("w") as handle:
        done = subprocess.run([sys.executable, "-m", "learning.solution", "softmax", "--force"],
                              stdout=handle, stderr=subprocess.PIPE, cwd=COURSE_ROOT,
                              env=dict(os.environ, COLUMNS="80"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == solution_text("softmax")  # parses, unwrapped, unpadded
    compile(out.read_text(), "ref.py", "exec")


def test_solution_in_an_80_column_terminal_prints_every_line_of_code_whole(tmp_path, capsys,
                                                                           monkeypatch):
    # rich wrapped lines past 80 columns itself, so a copied comment's tail became a line of
    # its own; each line now goes out whole, for the terminal to fold
    import re

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, out = run(capsys, solution, "softmax", "--force", "--root", str(tmp_path))
    printed = {line.rstrip() for line in re.sub(r"\x1b\[[0-9;]*m", "", out).splitlines()}
    source = solution_text("softmax").splitlines()
    assert code == 0 and max(len(line) for line in source) > 80  # the case that broke
    assert [line for line in source if line.strip() and line.rstrip() not in printed] == []


def test_solution_opens_after_a_passing_check_or_with_force(tmp_path, capsys):
    code, out = run(capsys, solution, "softmax", "--force", "--root", str(tmp_path))
    assert code == 0 and "def softmax_kernel" in out
    all_passed_but(tmp_path, "nothing", "none")
    code, out = run(capsys, solution, "softmax", "--root", str(tmp_path))
    assert code == 0 and "def softmax_python" in out


# --- doctor -----------------------------------------------------------------------------------

def test_doctor_reports_versions_mode_and_runs_a_kernel(capsys):
    code, out = run(capsys, doctor)
    assert code == 0, out
    for name in ("Python", "torch", "triton", "numpy", "rich"):
        assert f"ok   {name}:" in out
    assert "tiny kernel: ran correctly" in out


def test_doctor_names_the_next_step_as_progress_does(tmp_path, capsys, monkeypatch):
    ran = doctor.Finding("tiny kernel", "ran correctly", True)
    monkeypatch.setattr(doctor, "check_kernel", lambda _: ran)  # seconds saved: not tested here
    code, out = run(capsys, doctor, "--root", str(tmp_path))
    assert code == 0 and "All good. Start with lessons/01-elementwise.md." in out
    all_passed_but(tmp_path, "rmsnorm", "triton")  # at lesson 09
    code, out = run(capsys, doctor, "--root", str(tmp_path))
    assert code == 0 and "lessons/01" not in out
    assert f"All good. Next: {progress.next_step(state.load(tmp_path))}." in out
    assert "rmsnorm.py (triton part)" in out


def test_doctor_says_what_to_fix_when_numpy_is_missing(capsys, monkeypatch):
    real = doctor.importlib.metadata.version

    def version(name):
        if name == "numpy":
            raise doctor.importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(doctor.importlib.metadata, "version", version)
    code, out = run(capsys, doctor)
    assert code == 1
    assert "FIX  numpy: not installed" in out
    assert "Triton's interpreter needs numpy" in out


def test_an_interpreter_that_cannot_loop_over_program_ids_is_named(monkeypatch):
    # measured: triton 3.5.1 and 3.6.0 fail with numpy 2.4.6; 3.7.1 to 3.9.0 do not; 3.6.0 with
    # numpy 2.3.5 does not
    versions = {"triton": "3.6.0", "numpy": "2.4.6"}
    monkeypatch.setattr(mode.importlib.metadata, "version", lambda name: versions[name])
    assert 'pip install "numpy<2.4", or Triton 3.7 or newer' in mode.interpreter_problem()
    versions["triton"] = "3.7.1"
    assert mode.interpreter_problem() is None
    versions.update(triton="3.6.0", numpy="2.3.5")
    assert mode.interpreter_problem() is None


def broken_interpreter(monkeypatch):
    problem = 'Triton 3.6.0\'s interpreter cannot (why): python -m pip install "numpy<2.4"'
    monkeypatch.setattr(mode, "interpreter_problem", lambda: problem)
    monkeypatch.setattr(mode, "choose", lambda force_interpret=False: mode.Mode(True, "test"))
    monkeypatch.setattr(mode, "cuda_driver_sees_a_gpu", lambda: False)


def test_check_stops_in_one_line_when_the_interpreter_cannot_run_kernels(capsys, monkeypatch,
                                                                          tmp_path):
    broken_interpreter(monkeypatch)
    code, out = run(capsys, check, "softmax", "--root", str(tmp_path))
    assert code == 2 and out.count("\n") <= 3, out
    assert "check: Triton 3.6.0's interpreter" in out and "numpy<2.4" in out
    # an exercise without kernels is graded as usual (here: its file is missing)
    code, out = run(capsys, check, "traffic", "--root", str(tmp_path))
    assert code == 1 and "interpreter" not in out


def test_doctor_names_the_interpreter_problem_and_its_fix(capsys, monkeypatch):
    broken_interpreter(monkeypatch)
    code, out = run(capsys, doctor)
    assert code == 1
    assert "FIX  Triton's interpreter: Triton 3.6.0's interpreter cannot (why)" in out
    assert 'fix: python -m pip install "numpy<2.4"' in out
    assert "tiny kernel" not in out  # not run: it would not tell the learner more
    # where kernels compile for a GPU the interpreter is not used, and nothing needs fixing
    monkeypatch.setattr(mode, "choose", lambda force_interpret=False: mode.Mode(False, "test"))
    finding = doctor.check_interpreter(False)
    assert finding.ok and "not used here" in finding.detail


def test_doctor_flags_an_old_python(capsys, monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 9, 18))
    finding = doctor.check_python()
    assert not finding.ok and "3.10 or newer" in finding.fix


# --- bad arguments ----------------------------------------------------------------------------

@pytest.mark.parametrize("command, argv, message", [
    (reset, ["sofmax"], "did you mean 'softmax'?"),
    (solution, ["sofmax"], "did you mean 'softmax'?"),
    (progress, ["--bogus"], "unrecognized arguments: --bogus"),
    (check, ["softmax", "--all"], "give an exercise name or --all, not both"),
    (check, ["softmax", "--memory", "0"], "0 must be a number of GiB above 0"),
    (doctor, ["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_arguments_get_one_line_and_status_2(capsys, command, argv, message):
    code, out = run(capsys, command, *argv)
    assert code == 2 and message in out
    assert len(out.strip().splitlines()) == 1


# --- watch ------------------------------------------------------------------------------------

CHECK_HEADER = "; Ctrl-C to stop"  # the first line of every check watch runs
CHECK_END = "waiting for you to save"  # the last line of every check
QUIET_SECONDS = 2.0  # a second check caused by the same save would start well within this


class WatchCommand:
    """``python -m learning.watch`` run as a learner runs it; a thread collects its lines."""

    def __init__(self, root, *options):
        command = [sys.executable, "-m", "learning.watch", "softmax", "--part", "python",
                   "--root", str(root), *options]
        env = dict(os.environ, COLUMNS="200", NO_COLOR="1", PYTHONPATH=course_pythonpath())
        env.pop("LEARNING_FORKSERVER", None)
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self.grew = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            with self.grew:
                self.lines.append(line)
                self.grew.notify_all()
        with self.grew:
            self.grew.notify_all()

    def count(self, marker: str) -> int:
        with self.grew:
            return sum(marker in line for line in self.lines)

    def text(self, start: int = 0) -> str:
        with self.grew:
            return "".join(self.lines[start:])

    def wait_for_checks(self, finished: int, seconds: float = 120) -> str:
        """Wait until ``finished`` checks have ended; return the output of the last one."""
        with self.grew:
            done = self.grew.wait_for(
                lambda: self.count(CHECK_END) >= finished or not self.reader.is_alive(),
                timeout=seconds)
        assert done and self.count(CHECK_END) >= finished, \
            f"{finished} checks did not finish within {seconds} s; watch printed:\n{self.text()}"
        with self.grew:
            headers = [i for i, line in enumerate(self.lines) if CHECK_HEADER in line]
            return self.text(headers[-1])

    def stop(self) -> str:
        """Press Ctrl-C; return what watch printed after it."""
        start = len(self.lines)
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=30)
        self.reader.join(timeout=5)
        return self.text(start)

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _save_plainly(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _save_by_rename(path, text):
    """What many editors (and atomic-write libraries) do: write a temporary file in the same
    folder and rename it over the module, which is never half-written."""
    temporary = path.with_name(f".{path.name}.tmp{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _save_like_vim(path, text):
    """vim's default with 'backupcopy' auto: move the file to a backup, write a new file, delete
    the backup. The module is missing for a moment in between."""
    backup = path.with_name(path.name + "~")
    os.rename(path, backup)
    time.sleep(0.3)
    path.write_text(text, encoding="utf-8")
    os.remove(backup)


WITHOUT_WATCHDOG = pytest.mark.skipif(
    importlib.util.find_spec("watchdog") is None,
    reason="watchdog is not installed here (the course's install brings it; watch then polls)")


# the whole command, saved to three ways, takes most of a minute: the quick run watches with
# watchdog (what the course installs); polling's own waiter is tested on its own below
@pytest.mark.parametrize("method", [pytest.param("--poll", marks=pytest.mark.exhaustive),
                                    pytest.param(None, marks=WITHOUT_WATCHDOG)],
                         ids=["polling", "watchdog"])
def test_watch_checks_once_at_start_then_once_per_save_of_any_kind(tmp_path, method):
    path = write_module(tmp_path, "softmax", stub_text("softmax")) / "softmax.py"
    watch = WatchCommand(tmp_path, *([method] if method else []))
    try:
        first = watch.wait_for_checks(1)
        assert f"({'polling' if method else 'watchdog'})" in first
        assert "not started" in first
        # inside watch, saving is what checks the file again
        flat = " ".join(first.split())
        assert "and save it, and watch checks it again" in flat and "then run" not in flat
        # idle: the check reading the file must not look like a save (a read taken for one
        # would start a check within SETTLE_SECONDS, or a poll, of the first one's end)
        time.sleep(2 * QUIET_SECONDS)
        assert watch.count(CHECK_HEADER) == 1, watch.text()

        saves = [(_save_plainly, solution_text("softmax"), "Grade: Python 11/11"),
                 (_save_by_rename, stub_text("softmax") + "\n# renamed\n", "not started"),
                 (_save_like_vim, solution_text("softmax") + "\n# vim\n", "Grade: Python 11/11")]
        for checks, (save, text, grade) in enumerate(saves, start=2):
            save(path, text)
            out = watch.wait_for_checks(checks)
            assert grade in out, f"{save.__name__} re-checked old contents:\n{out}"
            assert "does not exist" not in out, f"{save.__name__} caught a half-done save"
            time.sleep(QUIET_SECONDS)
            assert watch.count(CHECK_HEADER) == checks, \
                f"{save.__name__} gave more than one re-check:\n{watch.text()}"
        rest = watch.stop()
    finally:
        watch.kill()
    assert watch.process.returncode == 0
    assert "stopped watching" in rest and "Traceback" not in watch.text()


@WITHOUT_WATCHDOG
def test_watch_stops_re_checking_a_module_that_rewrites_itself_and_wakes_on_the_next_save(
        tmp_path):
    from learning import watch as watch_command

    rewriting = solution_text("softmax") + (
        "\n\nimport pathlib as _pathlib\nimport time as _time\n\n"
        "_own = _pathlib.Path(__file__)\n"
        "_own.write_text(_own.read_text() + f'\\n# imported at {_time.time_ns()}\\n')\n")
    path = write_module(tmp_path, "softmax", rewriting) / "softmax.py"
    watch = WatchCommand(tmp_path)
    try:
        watch.wait_for_checks(watch_command.REWRITTEN_CHECKS)
        time.sleep(2 * QUIET_SECONDS)
        assert watch.count(CHECK_HEADER) == watch_command.REWRITTEN_CHECKS, watch.text()
        assert "seems to rewrite itself when it is imported" in " ".join(watch.text().split())
        _save_plainly(path, solution_text("softmax"))  # a save is still checked
        out = watch.wait_for_checks(watch_command.REWRITTEN_CHECKS + 1)
        assert "Grade: Python 11/11" in out
        time.sleep(QUIET_SECONDS)
        assert watch.count(CHECK_HEADER) == watch_command.REWRITTEN_CHECKS + 1, watch.text()
        watch.stop()
    finally:
        watch.kill()


def _sleeps_through_then_wakes_on_a_save(tmp_path, poll, disturb, why: str):
    """A watcher of a fresh module does not wake while ``disturb(path)`` runs, and does wake on
    the save after it."""
    from learning import watch

    path = write_module(tmp_path, "softmax", stub_text("softmax")) / "softmax.py"
    waiter = watch.Waiter(path, poll)
    woke = []
    thread = threading.Thread(target=lambda: woke.append(waiter.wait()), daemon=True)
    try:
        thread.start()
        disturb(path)
        time.sleep(1.5)
        assert thread.is_alive() and not woke, why
        path.write_text(solution_text("softmax"), encoding="utf-8")
        thread.join(timeout=5)
        assert woke, "a save did not wake the watcher"
    finally:
        waiter.stop()


@pytest.mark.parametrize("poll", [True, False], ids=["polling", "watchdog"])
def test_watch_waits_through_reads_and_wakes_on_a_save(tmp_path, poll):
    def read(path):
        for _ in range(10):  # what a check does to the file: open it, read it, close it
            path.read_text(encoding="utf-8")
            time.sleep(0.1)

    _sleeps_through_then_wakes_on_a_save(tmp_path, poll, read, "a read woke the watcher")


@pytest.mark.parametrize("poll", [True, False], ids=["polling", "watchdog"])
def test_watch_is_not_woken_by_a_file_touched_with_the_same_contents(tmp_path, poll):
    # a module that sets its own time when imported (os.utime(__file__)) would otherwise make
    # every check start the next one
    def touch(path):
        for step in range(6):
            os.utime(path, ns=(10**18 + step * 10**9,) * 2)
            time.sleep(0.3)

    _sleeps_through_then_wakes_on_a_save(tmp_path, poll, touch, "a touch woke the watcher")


@pytest.mark.parametrize("poll", [True, False], ids=["polling", "watchdog"])
def test_watch_does_not_miss_a_save_made_while_a_check_runs(tmp_path, poll):
    from learning import watch

    path = write_module(tmp_path, "softmax", stub_text("softmax")) / "softmax.py"
    waiter = watch.Waiter(path, poll)  # watch makes it before the first check
    try:
        _save_plainly(path, solution_text("softmax"))  # the check is still running
        woke = []
        thread = threading.Thread(target=lambda: woke.append(waiter.wait()), daemon=True)
        thread.start()
        thread.join(timeout=5)
        assert woke, "a save made during the check was lost"
    finally:
        waiter.stop()


@pytest.mark.parametrize("poll", [True, False], ids=["polling", "watchdog"])
def test_watch_waits_quietly_while_the_module_is_gone_and_wakes_when_it_is_back(tmp_path, poll):
    from learning import watch

    path = write_module(tmp_path, "softmax", stub_text("softmax")) / "softmax.py"
    waiter = watch.Waiter(path, poll)
    thread = threading.Thread(target=waiter.wait, daemon=True)
    try:
        thread.start()
        path.unlink()
        cpu = time.process_time()
        time.sleep(1.5)
        assert thread.is_alive(), "a deleted module woke the watcher: the check would say missing"
        assert time.process_time() - cpu < 0.5, "the watcher spun while the module was gone"
        path.write_text(solution_text("softmax"), encoding="utf-8")
        thread.join(timeout=5)
        assert not thread.is_alive(), "the module's return did not wake the watcher"
    finally:
        waiter.stop()

# --- the next step after a check --------------------------------------------------------------

def _passed(root, parts):
    saved = state.load(root)
    for exercise_name, part_name in parts:
        saved.record(exercise_name, part_name, "passed", 1, 1)
    state.save(root, saved)


def _last_line(out: str) -> str:
    return " ".join(out.strip().splitlines()[-1].split())


def test_next_is_the_first_lesson_not_done_not_the_one_after_this_exercise(tmp_path, capsys):
    _passed(tmp_path, [("elementwise", "python"), ("traffic", "python"),
                       ("reductions", "python")])
    write_module(tmp_path, "softmax", solution_text("softmax"))
    code, out = run(capsys, check, "softmax", "--root", str(tmp_path))
    assert code == 0
    assert _last_line(out).endswith("Next: lessons/05-rmsnorm.md.")  # not lesson 09


def test_next_stays_on_a_lesson_whose_other_parts_are_not_started(tmp_path, capsys):
    all_passed_but(tmp_path, "softmax_backward", "triton")
    write_module(tmp_path, "softmax_backward", solution_text("softmax_backward"))
    saved = state.load(tmp_path)
    saved.record("softmax_backward", "triton", "not-started", 0, 15)
    state.save(tmp_path, saved)
    code, out = run(capsys, check, "softmax_backward", "--root", str(tmp_path), "--part",
                    "python")
    assert code == 0
    assert _last_line(out).endswith("Next: the Triton part of lessons/11-softmax-backward.md "
                                    "(python -m learning.check softmax_backward --part triton).")


@pytest.mark.parametrize("exercise_name, lesson, left", [
    ("attention", "13-attention", "Triton part of lessons/13-attention.md (python -m "
     "learning.check attention --part triton)"),
    ("matmul", "12-matmul", "Triton and Plan parts of lessons/12-matmul.md (python -m "
     "learning.check matmul)")])
def test_after_a_python_part_passes_its_triton_part_comes_next(tmp_path, capsys,
                                                              exercise_name, lesson, left):
    """A learner who starts at lesson 12 or 13 and passes the Python part is sent on to the
    Triton part of the same lesson, not back to lesson 01, which they never opened."""
    write_module(tmp_path, exercise_name, solution_text(exercise_name))
    code, out = run(capsys, check, exercise_name, "--root", str(tmp_path), "--part", "python")
    assert code == 0
    assert _last_line(out).endswith(f"Next: the {left}.")


def test_the_next_step_wraps_to_an_earlier_lesson_only_when_nothing_later_remains(tmp_path):
    from learning.grader import report

    saved = state.State()
    saved.record("attention", "python", "passed", 1, 1)
    saved.record("attention", "triton", "passed", 1, 1)
    start = course.lesson_for("attention", "python")
    assert report.next_lesson_line(saved, start) == "Next: lessons/14-attention-backward.md."
    saved.record("attention_backward", "python", "passed", 1, 1)
    saved.record("attention_backward", "triton", "passed", 1, 1)
    assert report.next_lesson_line(saved, start) == "Next: lessons/01-elementwise.md."
    matmul = course.lesson_for("matmul", "python")
    assert report.next_lesson_line(saved, matmul) == "Next: the Python, Triton and Plan parts " \
        "of lessons/12-matmul.md (python -m learning.check matmul)."
    saved.record("matmul", "python", "passed", 1, 1)
    saved.record("matmul", "triton", "passed", 1, 1)
    assert report.next_lesson_line(saved, matmul) == "Next: the Plan part of " \
        "lessons/12-matmul.md (python -m learning.check matmul --part plan)."
    saved.record("matmul", "plan", "passed", 1, 1)
    assert report.next_lesson_line(saved, matmul) == "Next: lessons/01-elementwise.md."


def test_check_all_ends_with_one_summary_and_one_next_step(tmp_path, capsys):
    code, out = run(capsys, check, "--all", "--root", str(tmp_path))
    assert code == 1
    assert out.count("Next:") == 1
    assert f"0 of {len(registry.all_exercises())} exercises pass" in " ".join(out.split())
    assert _last_line(out).endswith("Next: lessons/01-elementwise.md.")


def test_progress_and_check_name_the_same_next_lesson(tmp_path, capsys):
    _passed(tmp_path, [(e.name, p.name) for e in registry.all_exercises() for p in e.parts
                       if p.lesson in ("01", "02", "03", "04", "05", "06", "07", "08")])
    write_module(tmp_path, "rmsnorm", solution_text("rmsnorm"))
    code, out = run(capsys, check, "rmsnorm", "--root", str(tmp_path))
    assert code == 0 and _last_line(out).endswith("Next: lessons/10-measuring.md.")
    code, out = run(capsys, progress, "--root", str(tmp_path))
    assert "lessons/10-measuring.md" in " ".join(out.split()).split("Next:")[-1]


def test_ctrl_c_ends_a_check_with_one_line_and_no_traceback(tmp_path):
    module = solution_text("softmax") + f"""

import os as _os
import time as _time


def softmax_python(values):
    with open({str(tmp_path / "started")!r}, "w") as handle:
        handle.write(str(_os.getpid()))
    _time.sleep(600)
"""
    write_module(tmp_path, "softmax", module)
    env = dict(os.environ, LEARNING_WARM="0", PYTHONPATH=course_pythonpath())
    env.pop("LEARNING_FORKSERVER", None)
    process = subprocess.Popen([sys.executable, "-m", "learning.check", "softmax", "--root",
                                str(tmp_path), "--part", "python"], cwd=COURSE_ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marker = tmp_path / "started"
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.read_text(), "the learner's function never started"
    process.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends the check
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, out + err
    assert err.strip() == "check: stopped (Ctrl-C)" and "Traceback" not in out
    worker = int(marker.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{worker}/stat").exists() and \
                Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break  # ended, not yet reaped by whoever adopted it
        time.sleep(0.1)
    else:
        raise AssertionError("the worker outlived the interrupted check")



@pytest.mark.parametrize("command", [["learning.progress", "--json", "--root"],
                                     ["learning.explain", "softmax"]])
def test_a_command_whose_reader_went_away_ends_without_a_traceback(tmp_path, command):
    # progress --json | head -c 100: the pipe is closed before the command writes
    read, write = os.pipe()
    os.close(read)
    if command[-1] == "--root":
        command = [*command, str(tmp_path)]
    try:
        done = subprocess.run([sys.executable, "-m", *command], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120, cwd=COURSE_ROOT,
                              env={**os.environ, "PYTHONPATH": course_pythonpath()})
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, (done.returncode, done.stderr)
