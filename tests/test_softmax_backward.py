"""The softmax backward exercise: the reference passes (and passes gradcheck), the stub is not
started, every catalogued version gets the verdict it must get, and explain works a row."""

import math

import pytest

from learning import explain
from tests.helpers import (
    COURSE_ROOT,
    solution_text,
    stub_text,
)

NAME = "softmax_backward"

# The interpreter computes with numpy, which warns about the NaN a wrong version produces.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")




def test_reference_autograd_function_passes_gradcheck_in_float64(device):
    import torch

    from learning.exercises.softmax_backward import solution

    g = torch.Generator().manual_seed(0)
    for shape in [(1, 3), (4, 17)]:
        x = torch.randn(shape, generator=g, dtype=torch.float64).to(device).requires_grad_()
        assert torch.autograd.gradcheck(solution.SoftmaxFunction.apply, (x,))


def test_reference_kernel_agrees_with_torch_autograd(device):
    import torch

    from learning.exercises.softmax_backward import solution

    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 37, generator=g).to(device)
    dy = torch.randn(6, 37, generator=g).to(device)
    leaf = x.clone().requires_grad_()
    torch.softmax(leaf, dim=-1).backward(dy)
    torch.testing.assert_close(solution.softmax_gradient(x, dy), leaf.grad)
    # a loss of y.sum() sends backward an expanded dy of stride 0
    leaf = x.clone().requires_grad_()
    solution.SoftmaxFunction.apply(leaf).sum().backward()
    torch.testing.assert_close(leaf.grad, torch.zeros_like(x), atol=1e-6, rtol=0)




def test_stub_keeps_the_reference_names():
    import ast

    def names(text):
        tree = ast.parse(text)
        return {node.name for node in tree.body
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))}

    assert names(stub_text(NAME)) == names(solution_text(NAME))
    assert (COURSE_ROOT / f"{NAME}.py").read_text() == stub_text(NAME)







# ---------------------------------------------------------------------------------------------
# explain softmax_backward


@pytest.fixture
def plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def run_explain(capsys, *argv):
    code = explain.main(list(argv))
    return code, capsys.readouterr().out


def test_explain_works_the_row_by_hand(capsys, plain_console):
    code, out = run_explain(capsys, NAME)
    assert code == 0
    y = [math.exp(v - 3.0) for v in (1.0, 2.0, 3.0)]
    y = [v / sum(y) for v in y]
    dy = [1.0, -1.0, 2.0]
    dot = sum(a * b for a, b in zip(y, dy))
    assert f"{dot:.9f}" in out
    for a, b in zip(y, dy):
        line = next(line for line in out.splitlines() if f"{a:.9f}" in line and "│" in line)
        assert f"{a * b:.9f}" in line and f"{a * (b - dot):.9f}" in line
    assert "sum to 0.000000000" in out


def test_explain_takes_the_learners_scores(capsys, plain_console):
    code, out = run_explain(capsys, NAME, "--input", "0,0")
    assert code == 0
    assert "0.500000000" in out


@pytest.mark.parametrize("argv, message", [
    ([NAME, "--input", "abc"], "--input: 'abc' is not a number"),
    (["softmax_backwards"], "did you mean 'softmax_backward'?"),
])
def test_explain_rejects_bad_input_in_one_line(capsys, plain_console, argv, message):
    code, out = run_explain(capsys, *argv)
    assert code == 2
    assert message in out
    assert len(out.strip().splitlines()) == 1
