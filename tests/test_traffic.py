"""The traffic exercise: the reference passes, the stub is not started, every catalogued version
gets its verdict, and the explain page counts eager and fused softmax as lesson 02 says."""

import subprocess
import sys

import pytest

from learning import explain
from learning.exercises.traffic import explainer as model
from learning.exercises.traffic import explainer as traffic_page
from tests.helpers import COURSE_ROOT

# ---------------------------------------------------------------------------------------------
# The counting itself: the numbers lesson 02 prints.


def test_eager_softmax_is_eight_full_passes_plus_the_row_vectors():
    rows = cols = 4096
    arrays = model.softmax_arrays(rows, cols)
    one_pass = rows * cols * 4
    assert one_pass == 67_108_864
    eager = model.bytes_moved(model.eager_softmax(rows, cols), arrays, 4)
    assert eager == 8 * one_pass + 4 * rows * 4  # m and d, each written and read once
    assert model.bytes_moved(model.fused_softmax(rows, cols), arrays, 4) == 2 * one_pass
    four = model.bytes_moved(model.four_kernel_softmax(rows, cols), arrays, 4)
    assert four == 7 * one_pass + 2 * rows * 4


def test_eager_model_is_one_kernel_per_torch_operation_the_bench_times():
    """The 'eager' the lessons count is the 'eager' python -m learning.bench measures."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    from learning.bench import rowwise

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    eager = rowwise.implementations(rowwise.KERNELS["softmax"], None)["eager"]
    x = torch.randn(4, 8)
    with Record() as record:
        eager(x)
    names = [k["name"] for k in model.eager_softmax(4, 8)]
    assert record.ops == ["amax", "sub", "exp", "sum", "div"]
    assert names == ["max", "subtract", "exp", "sum", "divide"]
    assert model.total_flops(model.eager_softmax(4, 8)) == 5 * 4 * 8


def test_fused_softmax_of_1024_squared_is_8_mib():
    arrays = model.softmax_arrays(1024, 1024)
    assert model.bytes_moved(model.fused_softmax(1024, 1024), arrays, 4) == 8 * 2**20


def test_softmax_is_memory_bound_and_a_large_matmul_compute_bound():
    arrays = model.softmax_arrays(4096, 4096)
    for build in (model.eager_softmax, model.fused_softmax):
        report = model.report(build(4096, 4096), arrays, 4, model.EXAMPLE_PEAK_FLOPS,
                                 model.EXAMPLE_BANDWIDTH)
        assert report["bound"] == "memory-bound"
    matmul = [model.kernel("matmul", ["A", "B"], ["C"], 2 * 4096**3)]
    report = model.report(matmul, {"A": 4096**2, "B": 4096**2, "C": 4096**2}, 4,
                             model.EXAMPLE_PEAK_FLOPS, model.EXAMPLE_BANDWIDTH)
    assert report["bound"] == "compute-bound"


@pytest.fixture
def wide_plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def test_explain_prints_eager_against_fused_for_both_shapes(capsys, wide_plain_console):
    assert explain.main(["traffic"]) == 0
    out = capsys.readouterr().out
    words = " ".join(out.split())
    assert "Memory traffic of softmax over a 4096×4096 float32 matrix" in out
    for name in ("max", "subtract", "exp", "sum", "divide"):
        assert any(line.strip().startswith(name + " ") for line in out.splitlines()), name
    assert "536,936,448" in out and "134,217,728" in out and "67,108,864" in out
    assert "8,388,608" in out and "8 MiB" in out
    assert "logical traffic" in words and "lower bound" in words
    assert "memory-bound" in out


def test_explain_takes_a_shape_of_the_learners(capsys, wide_plain_console):
    assert explain.main(["traffic", "--input", "2048,1000,2"]) == 0
    out = capsys.readouterr().out
    assert "2048×1000 16-bit" in out
    assert f"{2 * 2048 * 1000 * 2:,}" in out  # the fused bound


def test_explain_numbers_come_from_the_counting_code():
    table = traffic_page.compare_table([256, 100, 4])
    fused = model.bytes_moved(model.fused_softmax(256, 100), model.softmax_arrays(256, 100), 4)
    assert table.rows[1][1] == f"{fused:,}"


@pytest.mark.parametrize("value, message", [
    ("1.5,3", "1.5 is not a positive whole number"),
    ("0,4", "0 is not a positive whole number"),
    ("1,2,3,4", "not 4 numbers"),
    ("4,4,3", "not 3"),
    ("inf,2", "'inf' is +inf"),
    ("abc", "'abc' is not a number"),
])
def test_explain_rejects_a_bad_shape_in_one_line(capsys, wide_plain_console, value, message):
    assert explain.main(["traffic", "--input", value]) == 2
    out = capsys.readouterr().out
    assert message in out
    assert len(out.strip().splitlines()) == 1


def test_explain_traffic_imports_neither_torch_nor_numpy():
    probe = ("import sys; from learning import explain; assert explain.main(['traffic']) == 0; "
             "print(sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules), "
             "file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=COURSE_ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"


def test_the_check_grades_the_eager_softmax_the_lesson_counts():
    from learning.exercises.traffic import exercise

    case = next(c for c in exercise.CASES if c.name.startswith("eager softmax"))
    kernels, arrays, element_bytes, *_ = case.make_args()
    assert [k["name"] for k in kernels] == ["max", "subtract", "exp", "sum", "divide"]
    assert case.purpose.startswith("five kernels")
    assert model.bytes_moved(kernels, arrays, element_bytes) == 536_936_448


def test_no_traffic_case_sends_the_learner_to_a_later_lesson():
    import re

    from learning.exercises.traffic import exercise

    for case in exercise.CASES:
        later = [n for n in re.findall(r"lesson (\d+)", case.purpose) if int(n) > 2]
        assert not later, (case.name, case.purpose)
