"""The reductions exercise: the reference passes, the stub is not started, every catalogued version
gets the verdict it must get, and its explain page is computed and rejects bad input."""


import pytest

from learning import explain

NAME = "reductions"














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
    from learning.exercises.reductions import explainer as page
    from learning.exercises.reductions import solution

    for values in ([], [5.0], [3.0, -1.0, 4.0], [1.5] * 9):
        for op in solution.OPS:
            assert page.tree(values, op) == solution.tree_reduce(values, op)


def test_explain_rejects_bad_input_in_one_line(capsys, plain_console):
    code, out = run_explain(capsys, "reductions", "--input", "1,x")
    assert code == 2
    assert len(out.strip().splitlines()) == 1
