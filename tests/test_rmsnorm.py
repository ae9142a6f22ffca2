"""The RMSNorm exercise: the reference passes, the stub is not started, every catalogued version
gets its verdict, and the explain page works the lesson's row at run time."""

import math
import subprocess
import sys

import pytest

from learning import explain
from learning.exercises.rmsnorm import explainer as rmsnorm_page
from learning.exercises.rmsnorm.exercise import reference_rows
from tests.helpers import (
    COURSE_ROOT,
    grade_text,
    solution_text,
)


# test_exercises' test_importing_each_stub_only_defines imports every stub and solution, this
# one's included, in the quick run's one process: this one is exhaustive
@pytest.mark.exhaustive
def test_importing_the_stub_and_the_solution_runs_nothing():
    probe = ("import importlib.util, sys\n"
             "for path in sys.argv[1:]:\n"
             "    spec = importlib.util.spec_from_file_location('rmsnorm', path)\n"
             "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
             "print('ok')")
    done = subprocess.run([sys.executable, "-c", probe, str(COURSE_ROOT / "rmsnorm.py"),
                           str(COURSE_ROOT / "learning" / "exercises" / "rmsnorm" / "solution.py")],
                          capture_output=True, text=True, timeout=120,
                          env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"







# ---------------------------------------------------------------------------------------------
# The reference itself.


def test_reference_survives_huge_tiny_and_zero_rows():
    import numpy as np

    row, weight = [1.0, 2.0, 2.0, 4.0], [1.0, 0.5, 2.0, 1.0]
    huge = reference_rows([v * 1e200 for v in row], weight, 1e-6)
    assert np.allclose(huge, reference_rows(row, weight, 0.0), rtol=1e-15, atol=0)
    assert np.all(reference_rows([0.0, 0.0, 0.0], [1.0, 2.0, 3.0], 1e-6) == 0.0)
    tiny = reference_rows([1e-170, -3e-170], [1.0, 1.0], 1e-6)
    assert np.all(np.isfinite(tiny)) and np.all(np.abs(tiny) < 1e-150)


# ---------------------------------------------------------------------------------------------
# learning.explain rmsnorm.


@pytest.fixture
def wide_plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def test_explain_works_the_row_by_hand(capsys, wide_plain_console):
    assert explain.main(["rmsnorm"]) == 0
    out = capsys.readouterr().out
    words = " ".join(out.split())
    assert "RMSNorm of [1, 2, 2, 4], weight [1, 0.5, 2, 1], eps = 1e-06" in out
    rms = math.sqrt(25 / 4 + 1e-6)
    assert f"the RMS, is {rms:.9f}" in words
    for x, w in zip([1, 2, 2, 4], [1, 0.5, 2, 1]):
        assert f"{x / rms * w:.9f}" in out
    assert "eps outside" in out and "LayerNorm" in out
    assert "OverflowError" not in out and "inf" in out  # the squares of 1e200 overflow to inf
    assert "A row of zeros" in out


def test_explain_steps_are_marked_reduction_or_elementwise():
    kinds = {step.name: step.kind for step in rmsnorm_page.steps([1, 2, 2, 4, 1, 1, 1, 1]).steps}
    assert kinds["largest"] == "reduction" and kinds["mean_square"] == "reduction"
    assert kinds["scaled"] == "elementwise" and kinds["output"] == "elementwise"


def test_padding_table_contrasts_rmsnorm_and_softmax():
    table = rmsnorm_page.padding([1, 2, 3])
    zero, minus_inf = table.rows
    assert zero[2] == "14" and minus_inf[2] == "inf"
    assert minus_inf[3] == f"{sum(math.exp(x - 3) for x in (1, 2, 3)):.9f}"


def test_explain_takes_the_learners_row(capsys, wide_plain_console):
    assert explain.main(["rmsnorm", "--input", "3,-4"]) == 0
    out = capsys.readouterr().out
    assert "RMSNorm of [3, -4], weight [1, 1]" in out
    assert f"{-4 / math.sqrt(12.5 + 1e-6):.9f}" in out


@pytest.mark.parametrize("value, message", [
    ("abc", "'abc' is not a number"),
    ("1,inf", "'inf' is +inf"),
    ("1,-inf", "an infinite value has no RMSNorm"),
    ("nan", "nan is no number"),
])
def test_explain_rejects_bad_input_in_one_line(capsys, wide_plain_console, value, message):
    assert explain.main(["rmsnorm", "--input", value]) == 2
    out = capsys.readouterr().out
    assert message in out
    assert len(out.strip().splitlines()) == 1


def test_explain_rmsnorm_imports_neither_torch_nor_numpy():
    probe = ("import sys; from learning import explain; assert explain.main(['rmsnorm']) == 0; "
             "print(sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules), "
             "file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=COURSE_ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"


def test_a_rounded_output_is_named_and_every_rounding_that_fits_is_said(tmp_path):
    # round(v, 6) on the worked example: its outputs are round numbers to 6 places, which are
    # as round to 1, so the check must not claim one number of places the learner did not use
    text = solution_text("rmsnorm").replace(
        "output = [s / rms * w for s, w in zip(scaled, weight)]",
        "output = [round(s / rms * w, 6) for s, w in zip(scaled, weight)]", 1)
    assert "round(s / rms * w, 6)" in text
    part = grade_text(tmp_path, "rmsnorm", text, ["python"]).parts[0]
    failing = [c for c in part.cases if c.verdict.status != "passed"]
    assert failing and all({b.key for b in c.verdict.causes} == {"rounded"} for c in failing)
    example = next(c for c in failing if c.name == "worked example")
    said = " ".join(example.verdict.observations)
    assert "rounded to 1 to " in said and "(any of them gives these values)" in said
    assert "rounded to 1 decimal place" not in said


def test_eps_forgotten_in_the_rescaled_form_is_named_and_not_taken_for_rounding(tmp_path):
    # the form lesson 05 asks for, with eps left out: its worked example gives round numbers
    # (0.4 where the reference has 0.39999997), which a rounded output gives too; the row of
    # zeros still passes by the rescaling's own branch
    text = solution_text("rmsnorm").replace(
        "rms = math.sqrt(mean_square + eps / largest / largest)", "rms = math.sqrt(mean_square)")
    assert "rms = math.sqrt(mean_square)\n" in text
    part = grade_text(tmp_path, "rmsnorm", text, ["python"], first_steps=True).parts[0]
    failing = [c for c in part.cases if c.verdict.status != "passed"]
    assert failing and all({b.key for b in c.verdict.causes} == {"no-eps"} for c in failing), \
        [(c.name, [b.key for b in c.verdict.causes]) for c in failing]


def test_an_overflow_the_recorded_steps_rule_out_is_not_named(tmp_path):
    # the row divided by its largest |x|, as asked, and eps divided by largest ** 2, which
    # overflows on its own: the steps show the rescaled mean square matching the reference's,
    # so "divide the row by its largest |x| first" would name a mistake the learner did not make
    text = solution_text("rmsnorm").replace(
        "rms = math.sqrt(mean_square + eps / largest / largest)",
        "rms = math.sqrt(mean_square + eps / largest ** 2)")
    assert "eps / largest ** 2" in text
    part = grade_text(tmp_path, "rmsnorm", text, ["python"], first_steps=True).parts[0]
    huge = next(c for c in part.cases if c.name == "huge values")
    assert huge.verdict.status == "error" and "OverflowError" in huge.verdict.summary
    assert "mean_square match the reference's" in huge.verdict.first_step
    assert "square-overflow" not in {b.key for b in huge.verdict.causes}
    # without the record of the steps, the error's type alone names it: the record is the
    # evidence that rules it out
    part = grade_text(tmp_path, "rmsnorm", text, ["python"]).parts[0]
    huge = next(c for c in part.cases if c.name == "huge values")
    assert "square-overflow" in {b.key for b in huge.verdict.causes}
