"""The elementwise exercise: the reference passes, the stub is not started, every catalogued version
gets the verdict it must get, and its explain page is computed and rejects bad input."""


import pytest

from learning import explain
from tests.helpers import grade_text, solution_text

NAME = "elementwise"














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
    from learning.exercises.elementwise import explainer as page

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


def test_lesson_01_lists_the_python_cases_and_which_fill_their_blocks():
    from learning.grader import registry
    from tests.helpers import COURSE_ROOT

    text = " ".join((COURSE_ROOT / "lessons" / "01-elementwise.md").read_text().split())
    shapes = [(len(x), block) for x, _y, block in
              (case.make_args() for case in registry.find(NAME).part("python").cases)]
    sizes = [str(n) for n, _ in shapes]
    assert f"The cases use `n` of {', '.join(sizes[:-1])} and {sizes[-1]} " in text
    blocks = [block for _, block in shapes]
    assert f"with blocks of {min(blocks)} to {max(blocks)}." in text
    full = [f"`n = {n}`" for n, block in shapes if n % block == 0]
    assert f"All but {' and '.join(full)} leave their last block partly empty" in text


def test_a_float16_output_for_float32_inputs_is_not_blamed_on_float16_inputs(tmp_path):
    # the cause is given for a dtype changed either way: it must not claim the inputs were
    # float16 when they were float32
    text = solution_text(NAME).replace(
        "out = torch.empty_like(x)",
        "out = torch.empty(x.shape, dtype=torch.float16, device=x.device)", 1)
    part = grade_text(tmp_path, NAME, text, ["triton"]).parts[0]
    causes = {b.cause for c in part.cases if c.verdict.status == "failed"
              for b in c.verdict.causes}
    assert len(causes) == 1
    (cause,) = causes
    assert "float32 in, float32 out" in cause and "float16 inputs" not in cause
