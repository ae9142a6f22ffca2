"""The softmax exercise: the reference passes, the stub is not started, every catalogued
version gets the verdict it must get."""

import pytest

from learning.catalogue import versions
from learning.exercises.softmax import EXERCISE
from tests.helpers import failing_bugs, grade_text, solution_text, stub_text, version_text


def test_reference_solution_passes_every_case(tmp_path):
    result = grade_text(tmp_path, "softmax", solution_text("softmax"))
    assert result.ok
    for part in result.parts:
        assert part.status == "passed", part.part.name
        assert all(c.verdict.status in ("passed", "skipped") for c in part.cases)


def test_stub_reports_not_started_for_both_parts(tmp_path):
    result = grade_text(tmp_path, "softmax", stub_text("softmax"))
    assert [p.status for p in result.parts] == ["not-started", "not-started"]
    assert not result.ok


def test_the_learner_file_at_the_course_root_is_the_stub():
    from tests.helpers import COURSE_ROOT

    assert (COURSE_ROOT / "softmax.py").read_text() == stub_text("softmax")
    assert "raise NotImplementedError" in stub_text("softmax")


@pytest.mark.parametrize("version", versions("softmax"), ids=lambda v: f"{v.part}: {v.name}")
def test_catalogued_version_gets_its_verdict(tmp_path, version):
    result = grade_text(tmp_path, "softmax", version_text("softmax", version), [version.part])
    (part,) = result.parts
    if version.bug is None:
        failures = {c.name: c.verdict.summary for c in part.cases if c.verdict.status
                    not in ("passed", "skipped")}
        assert part.status == "passed", failures
    else:
        assert part.status == "failed"
        assert version.bug in failing_bugs(part), failing_bugs(part)


def test_every_case_declares_a_purpose_and_a_known_bug():
    for part in EXERCISE.parts:
        keys = {bug.key for bug in part.bugs}
        for case in part.cases:
            assert case.purpose and case.catches, case.name
            assert set(case.catches) <= keys, (part.name, case.name, case.catches)


def test_every_declared_bug_is_caught_by_some_catalogued_version():
    from learning.compare import COMMON_BUGS

    named = {v.bug for v in versions("softmax") if v.bug}
    declared = {bug.key for part in EXERCISE.parts for bug in part.bugs}
    # Bugs without a catalogued version are there only as the fallback cause of a case.
    fallbacks = {"wrong-length", "not-normalised", "row-offset", "all-minus-inf", "fp16", "bf16",
                 "wrong-values"}
    assert declared - named <= fallbacks, declared - named - fallbacks
    assert named <= declared | set(COMMON_BUGS)
