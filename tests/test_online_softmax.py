"""The online softmax workshop: the reference passes, the stub is not started, every catalogued
version gets the verdict it must get, and explain traces the running maximum and sum."""

import math

import pytest

from learning import explain
from learning.exercises.online_softmax.exercise import reference, simulate
from tests.helpers import grade_text, solution_text

NAME = "online_softmax"

pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")








@pytest.mark.parametrize("width, block", [(10, 4), (1000, 64), (5, 16), (1, 4), (64, 64)])
def test_the_recurrence_without_mistakes_is_softmax(width, block):
    import numpy as np

    x = np.random.default_rng(width).standard_normal((3, width))
    x[0, : width // 2] = -math.inf
    for per_lane in (True, False):
        for padded in (True, False):
            got = simulate(x, block, per_lane=per_lane, padded=padded)
            np.testing.assert_allclose(got, reference(x, block), rtol=1e-12, atol=1e-15)







# ---------------------------------------------------------------------------------------------
# explain online_softmax


@pytest.fixture
def plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def run_explain(capsys, *argv):
    code = explain.main(list(argv))
    return code, capsys.readouterr().out


def test_explain_traces_the_rescaling_and_the_guard(capsys, plain_console):
    code, out = run_explain(capsys, NAME)
    assert code == 0
    assert "in chunks of 4" in out
    # lane 0 sees 1, then 4: its sum 1 is rescaled by exp(1 - 4) and gains exp(0)
    assert f"{math.exp(-3):.9f}" in out and f"{1 + math.exp(-3):.9f}" in out
    # the row's denominator, from the lanes and directly
    row = [1, 3, 0, 4, 2, 6, 5, 1]
    total = sum(math.exp(x - 6) for x in row)
    assert out.count(f"{total:.9f}") >= 2
    assert "padding" in out and "nan" not in out


def test_explain_takes_the_learners_row(capsys, plain_console):
    code, out = run_explain(capsys, NAME, "--input", "0,0")
    assert code == 0
    assert "in chunks of 2" in out and "0.500000000" in out


def test_explain_rejects_bad_input_in_one_line(capsys, plain_console):
    code, out = run_explain(capsys, NAME, "--input", "1,x")
    assert code == 2
    assert "--input: 'x' is not a number" in out
    assert len(out.strip().splitlines()) == 1


def _cause_texts(part_result) -> str:
    return " ".join(bug.cause for c in part_result.cases
                    if c.verdict.status not in ("passed", "skipped", "not-run")
                    for bug in c.verdict.causes)


def test_the_python_part_is_told_about_slices_not_triton_offsets(tmp_path):
    # the first pass reads values[0:block] at every step: the cause speaks of the slice
    text = solution_text("online_softmax").replace(
        "enumerate(values[start:start + block])", "enumerate(values[0:block])", 1)
    part = grade_text(tmp_path, "online_softmax", text, ["python"]).parts[0]
    said = _cause_texts(part)
    assert "values[start:start + block]" in said
    assert "tl.arange" not in said and "n_cols" not in said and "mask" not in said


def test_a_second_pass_that_stops_after_one_chunk_is_not_told_to_widen_block(tmp_path):
    # BLOCK is meant to be narrower than the row here: the cause must not ask for
    # next_power_of_2(n_cols), only for a loop over the whole row
    lines = solution_text("online_softmax").splitlines(keepends=True)
    second = [i for i, line in enumerate(lines) if "for start in range(0, n_cols, BLOCK)" in line]
    lines[second[-1]] = lines[second[-1]].replace("range(0, n_cols, BLOCK)", "range(0, 1)")
    part = grade_text(tmp_path, "online_softmax", "".join(lines), ["triton"]).parts[0]
    said = _cause_texts(part)
    assert "range(0, n_cols, BLOCK)" in said and "next_power_of_2" not in said


def test_lane_sums_combined_from_the_first_lanes_maximum_fail(tmp_path):
    # any common reference gives the same answer in exact arithmetic: only a gap of 1000
    # between the lanes' maxima makes exp overflow and shows the wrong one
    text = solution_text("online_softmax").replace("row_max = max(m)", "row_max = m[0]", 1)
    part = grade_text(tmp_path, "online_softmax", text, ["python"]).parts[0]
    assert "lanes 1000 apart" in {c.name for c in part.cases if c.verdict.status != "passed"}


def test_every_row_measured_from_a_maximum_of_row_0_fails_the_rows_far_apart(tmp_path):
    # every row measured from the maximum of row 0's first chunk: any common reference gives
    # the same output until rows lie 2000 apart, where exp overflows or underflows the others
    text = solution_text("online_softmax").replace(
        "row_max = tl.max(m, axis=0)", "row_max = tl.max(tl.load(input_ptr + lanes, mask=lanes < "
        "n_cols, other=-float('inf')).to(tl.float32), axis=0)", 1)
    part = grade_text(tmp_path, "online_softmax", text, ["triton"]).parts[0]
    assert "rows far apart" in {c.name for c in part.cases if c.verdict.status != "passed"}


def test_a_rounded_output_is_named_as_rounded(tmp_path):
    text = solution_text("online_softmax").replace(
        "return [math.exp(x - row_max) / total for x in values]",
        "return [round(math.exp(x - row_max) / total, 6) for x in values]", 1)
    part = grade_text(tmp_path, "online_softmax", text, ["python"]).parts[0]
    assert {b.key for c in part.cases if c.verdict.status != "passed"
            for b in c.verdict.causes} == {"rounded"}


def test_a_row_nothing_was_written_to_is_not_blamed_on_a_nan_the_code_never_computed(tmp_path):
    # both loops stop before the last, partial chunk: a row narrower than BLOCK is never
    # stored, and what the check reads back is its own NaN fill. A replay that computes NaN
    # everywhere (no guard against -inf) matches that fill and is not the learner's mistake.
    text = solution_text("online_softmax").replace(
        "range(0, n_cols, BLOCK)", "range(0, (n_cols // BLOCK) * BLOCK, BLOCK)")
    assert text.count("(n_cols // BLOCK) * BLOCK") == 2
    part = grade_text(tmp_path, "online_softmax", text, ["triton"]).parts[0]
    narrow = next(c for c in part.cases if c.name == "narrower than BLOCK")
    assert narrow.verdict.summary.startswith("none of the")
    named = {b.key for b in narrow.verdict.causes}
    assert "no-guard" not in named and "loop-bound" not in named
    assert named == {"unwritten"}
    assert "loop's bounds" in narrow.verdict.causes[0].cause
