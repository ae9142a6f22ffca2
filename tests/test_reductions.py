"""The reductions exercise: the reference passes, the stub is not started, every catalogued version
gets the verdict it must get, and its explain page is computed and rejects bad input."""

import subprocess
import sys

import pytest

from learning import explain
from learning.catalogue import versions
from learning.compare import COMMON_BUGS
from learning.exercises.reductions import EXERCISE
from tests.helpers import (
    COURSE_ROOT,
    failing_bugs,
    grade_text,
    solution_text,
    stub_text,
    version_text,
)

NAME = "reductions"


def test_reference_solution_passes_every_case(tmp_path):
    result = grade_text(tmp_path, NAME, solution_text(NAME))
    assert result.ok
    for part in result.parts:
        assert part.status == "passed", part.part.name
        assert all(c.verdict.status in ("passed", "skipped") for c in part.cases)


def test_stub_reports_not_started_for_both_parts(tmp_path):
    result = grade_text(tmp_path, NAME, stub_text(NAME))
    assert [p.status for p in result.parts] == ["not-started", "not-started"]
    assert not result.ok


def test_the_learner_file_at_the_course_root_is_the_stub():
    assert "raise NotImplementedError" in stub_text(NAME)
    probe = f"import {NAME}; print('ok')"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=COURSE_ROOT, env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin"},
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("version", versions(NAME), ids=lambda v: f"{v.part}: {v.name}")
def test_catalogued_version_gets_its_verdict(tmp_path, version):
    result = grade_text(tmp_path, NAME, version_text(NAME, version), [version.part])
    (part,) = result.parts
    if version.bug is None:
        failures = {c.name: c.verdict.summary for c in part.cases
                    if c.verdict.status not in ("passed", "skipped")}
        assert part.status == "passed", failures
    else:
        assert part.status == "failed"
        assert version.bug in failing_bugs(part), failing_bugs(part)


def test_every_case_declares_a_purpose_and_a_known_bug():
    for part in EXERCISE.parts:
        keys = {bug.key for bug in part.bugs} | set(COMMON_BUGS)
        for case in part.cases:
            assert case.purpose and case.catches, case.name
            assert set(case.catches) <= keys, (part.name, case.name, case.catches)


def test_every_catalogued_bug_is_declared():
    named = {v.bug for v in versions(NAME) if v.bug}
    declared = {bug.key for part in EXERCISE.parts for bug in part.bugs}
    assert named <= declared | set(COMMON_BUGS)


@pytest.fixture
def plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def run_explain(capsys, *argv):
    code = explain.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_explain_prints_the_identity_table(capsys, plain_console):
    code, out = run_explain(capsys, "reductions")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()
            if "(same)" in line or "(wrong)" in line}
    assert "-math.inf" in rows["max"] and "0 (wrong)" in rows["max"]
    assert "1.0" in rows["product"] and "-60" in rows["product"]
    assert "-14 (same)" in rows["sum"]


def test_explain_traces_the_tree_level_by_level(capsys, plain_console):
    code, out = run_explain(capsys, "reductions", "--input", "2,7,1,8,2")
    assert code == 0
    assert "[2, 7, 1, 8, 2, 0, 0, 0]" in out
    assert "[9, 9, 2, 0]" in out and "[18, 2]" in out and "[20]" in out
    assert "max of [2, 7, 1, 8, 2] = 8 after 3 levels." in out


def test_explain_trees_match_the_reference_solution():
    from learning.explainers import reductions as page
    from learning.solutions import reductions as solution

    for values in ([], [5.0], [3.0, -1.0, 4.0], [1.5] * 9):
        for op in solution.OPS:
            assert page.tree(values, op) == solution.tree_reduce(values, op)


def test_explain_rejects_bad_input_in_one_line(capsys, plain_console):
    code, out = run_explain(capsys, "reductions", "--input", "1,x")
    assert code == 2
    assert len(out.strip().splitlines()) == 1
