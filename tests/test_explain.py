"""learning.explain: the worked example is computed, right, instant, and needs no torch."""

import math
import os
import subprocess
import sys
from collections import Counter

import pytest

from learning import explain, explainers
from learning.exercises.softmax import explainer as softmax_page
from learning.explainers.page import Heading, Steps, Table, Text
from tests.helpers import COURSE_ROOT, course_pythonpath


@pytest.fixture(autouse=True)
def wide_plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def run_explain(capsys, *argv):
    code = explain.main(list(argv))
    return code, capsys.readouterr().out


def test_worked_table_for_one_two_three(capsys):
    code, out = run_explain(capsys, "softmax")
    assert code == 0
    for heading in ("Column", "Input x", "x - max(x)", "Exponential", "Divide by 1.503214724"):
        assert heading in out
    for exponential, probability in [("0.135335283", "0.090030573"),
                                     ("0.367879441", "0.244728471"),
                                     ("1.000000000", "0.665240956")]:
        line = next(line for line in out.splitlines() if exponential in line)
        assert probability in line
    assert "The last column sums to 1.000000000." in out


def test_table_numbers_come_from_the_formula():
    row = [1.0, 2.0, 3.0]
    table = softmax_page.table(row)
    denominator = sum(math.exp(x - 3.0) for x in row)
    assert table.columns[-1] == f"Divide by {denominator:.9f}"
    for cells, x in zip(table.rows, row):
        assert cells[3] == f"{math.exp(x - 3.0):.9f}"
        assert cells[4] == f"{math.exp(x - 3.0) / denominator:.9f}"


def test_shifted_row_gives_the_same_answer_while_naive_exp_overflows(capsys):
    _, out = run_explain(capsys, "softmax")
    assert "[1001, 1002, 1003]" in out
    assert "The shifted inputs are [-2, -1, 0] again, so the probabilities are identical" in out
    overflow_lines = [line for line in out.splitlines() if "OverflowError" in line]
    assert len(overflow_lines) == 3


def test_six_named_steps_marked_reduction_or_elementwise(capsys):
    _, out = run_explain(capsys, "softmax")
    kinds = {}
    for line in out.splitlines():
        for step in ("maximum", "shifted", "numerator", "denominator", "output", "store"):
            if line.strip().startswith(step + " "):
                kinds[step] = "reduction" if "reduction" in line else "elementwise"
    assert kinds == {"maximum": "reduction", "shifted": "elementwise",
                     "numerator": "elementwise", "denominator": "reduction",
                     "output": "elementwise", "store": "elementwise"}


def test_learners_own_row(capsys):
    code, out = run_explain(capsys, "softmax", "--input", "4,5,6")
    assert code == 0
    assert "Softmax of [4, 5, 6]" in out
    assert "0.665240956" in out  # a shifted [1, 2, 3]


def test_negative_row_after_a_space_separated_flag(capsys):
    code, out = run_explain(capsys, "softmax", "--input", "-3,-2,-1")
    assert code == 0
    assert "Softmax of [-3, -2, -1]" in out


def test_row_of_only_minus_infinity_is_explained(capsys):
    code, out = run_explain(capsys, "softmax", "--input=-inf,-inf")
    assert code == 0
    assert "has no softmax" in out


@pytest.mark.parametrize("argv, message", [
    (["softmax", "--input", "abc"], "--input: 'abc' is not a number"),
    (["softmax", "--input", ""], "--input needs at least one number"),
    (["softmax", "--input", "1,,2"], "--input: '' is not a number"),
    (["softmax", "--input", "nan"], "nan is no number"),
    (["softmax", "--input", "inf,1"], "'inf' is +inf"),
    (["online_softmax", "--input", "1e400"], "'1e400' is +inf"),
    (["sofmax"], "unknown topic 'sofmax'; did you mean 'softmax'?"),
    ([], "name a topic, e.g. python -m learning.explain softmax; topics: elementwise,"),
    (["xyz"], "unknown topic 'xyz'; known topics: elementwise, traffic"),
])
def test_bad_input_gets_one_line_and_status_2(capsys, argv, message):
    code, out = run_explain(capsys, *argv)
    assert code == 2
    assert message in out
    assert len(out.strip().splitlines()) == 1


def test_explain_imports_neither_torch_nor_triton_and_is_instant():
    probe = ("import sys, time; t = time.perf_counter(); from learning import explain; "
             "code = explain.main(['softmax']); "
             "assert code == 0; "
             "print(sorted(m for m in sys.modules if m in ('torch', 'triton', 'numpy') "
             "or m.startswith('learning.grader') or m.endswith(('.exercise', '.solution'))), "
             "time.perf_counter() - t, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = done.stderr.strip().rsplit(" ", 1)[0]
    # what makes it instant: importing torch alone takes seconds (wall time is not asserted:
    # a loaded machine would fail it for nothing). The worked examples live beside the
    # exercises' declarations, which import the grader: none of them is imported either.
    assert loaded == "[]"


def test_exp_limits_table_matches_where_exp_really_overflows_and_underflows():
    import numpy as np

    rows = {row[0]: (float(row[1]), float(row[2])) for row in softmax_page.exp_limits().rows}
    dtypes = {"float64 (a Python float)": np.float64, "float32": np.float32}
    with np.errstate(all="ignore"):
        for name, dtype in dtypes.items():
            overflow, underflow = rows[name]
            assert np.isfinite(np.exp(dtype(overflow - 0.01)))
            assert np.isinf(np.exp(dtype(overflow + 0.01)))
            assert np.exp(dtype(underflow + 0.01)) > 0
            assert np.exp(dtype(underflow - 0.01)) == 0


def test_the_help_gives_an_input_each_topic_takes(capsys):
    import re

    from learning import explainers

    for topic, form in explainers.inputs().items():
        example = re.search(r"\(([^()]*)\)$", form)
        if example is None:  # a topic that takes no input says so
            assert explain.main([topic, "--input", "1,2"]) == 2
            continue
        assert explain.main([topic, "--input", example.group(1)]) == 0, topic
    capsys.readouterr()


@pytest.mark.parametrize("topic", ["traffic", "elementwise", "softmax", "rmsnorm",
                                   "softmax_backward", "online_softmax", "reductions",
                                   "matmul"])
def test_at_80_columns_no_number_or_word_is_split(topic):
    import re

    done = subprocess.run([sys.executable, "-m", "learning.explain", topic], capture_output=True,
                          text=True, env={"COLUMNS": "80", "PATH": "/usr/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert len(line.rstrip()) <= 80, line
        # a broken number ends a cell in a comma-group or starts one with a lone digit group
        assert not re.search(r"\d,\d{1,2} *$|\d,\d{1,2} │", line), line
        # nor a matrix's row ("[4," here, "5]]" on the next line)
        assert not re.search(r"\[-?\d+, *($|│)", line.rstrip()), line


@pytest.mark.parametrize("topic", list(explainers.TOPICS))
def test_at_80_columns_no_table_cell_is_folded_past_four_lines(topic):
    """A cell folded one word a line ("4096", "x", "4096", ...) no longer reads as one value:
    such a table is printed as lists. Counts, column by column, the lines a row's cells run
    on past the row's first."""
    done = subprocess.run([sys.executable, "-m", "learning.explain", topic], capture_output=True,
                          text=True, cwd=COURSE_ROOT, timeout=60,
                          env=dict(os.environ, COLUMNS="80", PYTHONPATH=course_pythonpath()))
    assert done.returncode == 0, done.stderr
    run = 0  # lines of the current table row so far
    for line in done.stdout.splitlines():
        if "│" not in line:
            run = 0
            continue
        first_cell = line.split("│")[0].strip()
        run = 1 if first_cell else run + 1
        assert run <= 4, (topic, line)


def test_a_table_that_would_fold_a_cell_past_four_lines_becomes_lists():
    from learning import explain

    columns = ("shape", "configuration")
    rows = [("4096 x 4096 x 4096", "128x256x64 group 8, 8 warps, 4 stages, tensor descriptors")]
    assert explain._column_widths(columns, rows, 200) is not None  # room: one line each
    assert explain._column_widths(columns, rows, 24) is None  # one word a line: lists
    assert explain._lines_needed("4096 x 4096 x 4096", 4) == 5
    assert explain._lines_needed("4096 x 4096 x 4096", 18) == 1


def _page_words(page) -> Counter:
    """Every word a page holds, each as often as it holds it."""
    texts = [page.title]
    for block in page.blocks:
        if isinstance(block, (Heading, Text)):
            texts.append(block.text)
        elif isinstance(block, Table):
            texts += [*block.columns, *(cell for row in block.rows for cell in row), block.caption]
        elif isinstance(block, Steps):
            texts += [f"{s.name} {s.formula} {s.kind} {s.value}" for s in block.steps]
    return Counter(word.rstrip(":") for text in texts for word in str(text).split())


@pytest.mark.parametrize("topic", list(explainers.TOPICS))
def test_every_topic_piped_at_80_columns_shows_every_word_within_80(topic):
    """What a learner at an 80-column terminal, or reading a piped copy, sees: no line wider,
    and nothing cropped off a table's column (rich crops silently, so count the words)."""
    done = subprocess.run([sys.executable, "-m", "learning.explain", topic], capture_output=True,
                          text=True, cwd=COURSE_ROOT, timeout=60,
                          env=dict(os.environ, COLUMNS="80", PYTHONPATH=course_pythonpath()))
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert len(line) <= 80, line
    assert "…" not in done.stdout
    shown = Counter(word.rstrip(":") for word in
                    done.stdout.replace("│", " ").replace("┃", " ").split())  # a list's "cols:"
    missing = _page_words(explainers.load(topic).page(None)) - shown
    # a word wider than the terminal (a kernel's name) can only be folded: it must be whole
    # once the line breaks are taken out
    joined = "".join(done.stdout.split())
    assert Counter({word: n for word, n in missing.items()
                    if len(word) <= 80 or word not in joined}) == Counter()


@pytest.mark.parametrize("topic, row", [("attention", "1e308,2"), ("softmax", "1e300,2")])
def test_a_huge_input_is_written_with_an_exponent_not_hundreds_of_digits(capsys, topic, row):
    code, out = run_explain(capsys, topic, f"--input={row}")
    assert code == 0 and "e+30" in out
    assert "0000000000000000" not in out  # 1e308 printed whole has 300 digits


@pytest.mark.parametrize("topic", ["softmax", "rmsnorm"])
def test_an_input_of_a_short_decimal_is_shown_as_given(capsys, topic):
    # 0.5 beside 1 and 2 reads as 0.5, not 0.500000000; a computed value keeps its 9 decimals
    code, out = run_explain(capsys, topic, "--input=0.5,1,2")
    assert code == 0 and "[0.5, 1, 2]" in out and "0.500000000" not in out, out
    assert "-1.5" in out or "0.25" in out, out  # a step's exact value too
    assert "0.140244383" in out or "0.377964365" in out, out


def test_the_matmul_explainer_says_one_step_not_one_steps():
    """A count of 1 takes the singular: --input 1,1,1,3 has one tile and one step of K, and a
    lesson's block can ask for one program, one tile column or a sum of one product."""
    import re

    from learning.exercises.matmul import explainer as matmul

    page = matmul.page([1, 1, 1, 3])
    texts = []
    for block in page.blocks:
        if isinstance(block, (Heading, Text)):
            texts.append(block.text)
        elif isinstance(block, Table):
            texts.append(block.caption)
    texts += [matmul.order((4, 1, 2)).caption, matmul.order((1, 1, 2)).caption,
              matmul.l2((4096, 128, 1, 8, 2)).caption,
              matmul.accumulator((1, 1)).caption]
    flat = " ".join(texts)
    assert "in 1 step of 3" in flat and "took 1 step of K, 1 tile product in all" in flat
    # "4 x 1 tiles" is a grid of four: only a count that is 1 itself is wrong in the plural
    wrong = re.findall(r"(?<![\d.,])(?<!x )1 (?:tile )?(?:steps|tiles|products|programs|panels|"
                       r"rows|columns)\b", flat)
    assert not wrong, wrong
    assert "The first 1 programs" not in flat and "sum over 1 product of" in flat
    assert "C is 1 x 1: one tile of 3 x 3, and it is a sum over K in 1 step" in flat
    assert "A grid of 1 x 1 tile of C" in flat


def test_the_bare_command_lists_the_topics_in_one_line(capsys):
    code, out = run_explain(capsys)
    assert code == 2 and out.startswith("explain: name a topic")
    assert all(topic in out for topic in explainers.TOPICS)


def test_a_padding_table_for_a_power_of_two_row_says_why_its_block_is_wider():
    """A row of 4 needs no padding (next_power_of_2(4) = 4): the table's block of 8 is said
    to be the next one, not the kernel's, which the lesson's rule would contradict."""
    from learning.exercises.softmax_backward.explainer import padding_table

    wide = padding_table([0.5, -1.0, 2.0, 0.0], [1.0, -1.0, 2.0, 1.0])
    assert len(wide.rows) == 9  # 8 lanes and the sum
    assert "next_power_of_2(4) = 4, with no padding; the table takes the next one, 8" \
        in wide.caption
    own = padding_table([1.0, 2.0, 3.0], [1.0, -1.0, 2.0])
    assert len(own.rows) == 5 and "next_power_of_2" not in own.caption


def test_rmsnorm_of_a_row_of_zeros_gives_one_rms_throughout(capsys):
    # the table's RMS is sqrt(eps); the rescaled steps must not call it anything else
    code, out = run_explain(capsys, "rmsnorm", "--input", "0,0,0")
    assert code == 0
    text = " ".join(out.split())
    assert "the RMS, is 0.001" in text
    assert "it is 0, the RMS of the table" not in text
    assert "sqrt(eps) = 0.001 (the RMS of the table)" in text
