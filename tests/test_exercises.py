"""Every exercise, the same claims: its reference passes, its stub is "not started", every
catalogued version gets the verdict it must get, and its cases and bugs are declared whole."""

import subprocess
import sys

import pytest

from learning import registry
from learning.catalogue import versions
from learning.compare import COMMON_BUGS
from tests.helpers import (
    COURSE_ROOT,
    failing_bugs,
    grade_text,
    solution_text,
    stub_text,
    version_text,
)

EXERCISES = registry.all_exercises()
NAMES = [exercise.name for exercise in EXERCISES]
VERSIONS = [(exercise.name, version) for exercise in EXERCISES
            for version in versions(exercise.name)]


@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes_every_case(tmp_path, name):
    result = grade_text(tmp_path, name, solution_text(name))
    assert result.ok
    for part in result.parts:
        failures = {c.name: c.verdict.summary for c in part.cases
                    if c.verdict.status not in ("passed", "skipped")}
        assert part.status == "passed", (part.part.name, failures)


@pytest.mark.parametrize("name", NAMES)
def test_stub_reports_every_part_not_started(tmp_path, name):
    result = grade_text(tmp_path, name, stub_text(name))
    assert [p.status for p in result.parts] == ["not-started"] * len(result.parts)
    assert not result.ok


@pytest.mark.parametrize("name", NAMES)
def test_importing_the_stub_only_defines(name):
    assert "raise NotImplementedError" in stub_text(name)
    probe = f"import {name}; print('ok')"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=COURSE_ROOT, env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin"},
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("name, version", VERSIONS,
                         ids=[f"{name}/{v.part}: {v.name}" for name, v in VERSIONS])
def test_catalogued_version_gets_its_verdict(tmp_path, name, version):
    result = grade_text(tmp_path, name, version_text(name, version), [version.part])
    (part,) = result.parts
    if version.bug is None:
        failures = {c.name: c.verdict.summary for c in part.cases
                    if c.verdict.status not in ("passed", "skipped")}
        assert part.status == "passed", failures
    else:
        assert part.status == "failed"
        assert version.bug in failing_bugs(part), failing_bugs(part)


@pytest.mark.parametrize("exercise", EXERCISES, ids=NAMES)
def test_every_case_declares_a_purpose_and_a_known_bug(exercise):
    for part in exercise.parts:
        keys = {bug.key for bug in part.bugs} | set(COMMON_BUGS)
        for case in part.cases:
            assert case.purpose and case.catches, (part.name, case.name)
            assert set(case.catches) <= keys, (part.name, case.name, case.catches)


@pytest.mark.parametrize("exercise", EXERCISES, ids=NAMES)
def test_every_catalogued_bug_is_declared_and_every_part_has_hints(exercise):
    named = {v.bug for v in versions(exercise.name) if v.bug}
    declared = {bug.key for part in exercise.parts for bug in part.bugs}
    assert named <= declared | set(COMMON_BUGS)
    for part in exercise.parts:
        assert part.hints, f"{exercise.name}/{part.name} has no hints"
        for bug in part.bugs:
            assert 0 <= bug.hint <= len(part.hints), (part.name, bug.key)
