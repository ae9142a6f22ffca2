"""The elementwise exercise: the reference passes, the stub is not started, every catalogued version
gets the verdict it must get, and its explain page is computed and rejects bad input."""

import subprocess
import sys

import pytest

from learning import explain
from learning.catalogue import versions
from learning.compare import COMMON_BUGS
from learning.exercises.elementwise import EXERCISE
from tests.helpers import (
    COURSE_ROOT,
    failing_bugs,
    grade_text,
    solution_text,
    stub_text,
    version_text,
)

NAME = "elementwise"


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


def test_explain_draws_ten_elements_in_blocks_of_four(capsys, plain_console):
    code, out = run_explain(capsys, "elementwise")
    assert code == 0
    assert "grid = cdiv(10, 4) = 3 programs × 4 lanes = 12 lanes for 10 elements: 2 lanes " \
        "masked off." in out
    last = next(line for line in out.splitlines() if "8, 9, 10, 11" in line)
    assert "1 1 0 0" in last and "2 of 4" in last
    assert out.count("not stored") == 2


def test_explain_plan_comes_from_the_formula():
    from learning.explainers import elementwise as page

    for n, block in [(1, 8), (17, 8), (1000, 256), (4097, 1024)]:
        programs = page.plan(n, block)
        assert len(programs) == -(-n // block)
        covered = [o for p in programs for o, m in zip(p["offsets"], p["mask"]) if m]
        assert covered == list(range(n))


def test_explain_takes_n_and_block(capsys, plain_console):
    code, out = run_explain(capsys, "elementwise", "--input", "17,8")
    assert code == 0
    assert "grid = cdiv(17, 8) = 3 programs" in out


@pytest.mark.parametrize("given, message", [
    ("10", "two numbers"), ("10,3", "power of two"), ("0,4", "positive whole"),
    ("1000,4", "more than the 64"),
])
def test_explain_rejects_bad_input_in_one_line(capsys, plain_console, given, message):
    code, out = run_explain(capsys, "elementwise", "--input", given)
    assert code == 2
    assert message in out and len(out.strip().splitlines()) == 1, out
