"""Lesson 14's attention backward: the grader's reference is torch autograd of a float64
attention, every blocked form of the replay without a mistake is that reference, the cases hold
what their purposes say, the key mistakes are named, and `explain attention_backward` computes its
tables without torch. (The reference solution, the stub and every catalogued version are graded
by tests/test_exercises.py, like every exercise's.)"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from learning import explain
from learning.exercises.attention_backward import catalogue, exercise
from learning.exercises.attention_backward import explainer as page
from learning.grader import registry
from learning.grader.catalogue import versions
from learning.grader.tensors import round_to_dtype
from tests.helpers import COURSE_ROOT, failing_bugs, grade_text, solution_text, version_text

# The interpreter computes with NumPy, which warns where a wrong version makes inf - inf.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

PYTHON = registry.find("attention_backward").part("python")
TRITON = registry.find("attention_backward").part("triton")
GRADED = [c for c in TRITON.cases if not c.raises and not c.gpu_only]


def arrays(case):
    """The case's arguments as float64 arrays (what the kernels read), and causal."""
    *specs, causal = case.make_args()
    return (*(spec.exact() for spec in specs), causal)


def autograd64(q, k, v, do, causal):
    """dq, dk and dv from torch autograd of a float64 attention, concatenated as the exercise
    returns them."""
    q, k, v = (torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
               for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out.backward(torch.as_tensor(np.asarray(do, dtype=np.float64)))
    return torch.cat((q.grad, k.grad, v.grad), dim=-2).numpy()


# ---------------------------------------------------------------------------------------------
# The reference and the replays.


@pytest.mark.parametrize("case", GRADED, ids=lambda c: c.name)
def test_the_grader_reference_is_torch_autograd_in_float64(case):
    q, k, v, _, do, _, causal = arrays(case)
    o, lse = exercise.forward(q, k, v, causal)  # the float64 forward, not the stored copies
    assert np.allclose(exercise.reference(q, k, v, o, do, lse, causal),
                       autograd64(q, k, v, do, causal), atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("case", [c for c in PYTHON.cases if not c.raises],
                         ids=lambda c: c.name)
def test_the_python_cases_reference_is_torch_autograd_too(case):
    q, k, v, o, do, lse, causal, _ = case.make_args()
    assert np.allclose(exercise.reference(q, k, v, o, do, lse, causal),
                       autograd64([q], [k], [v], [do], causal)[0], atol=1e-12, rtol=1e-9)


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("block_m, block_n", [(1, 1), (3, 5), (16, 16), (16, 32), (64, 16)])
def test_every_blocked_form_without_a_mistake_is_the_reference(block_m, block_n, skip):
    args = arrays(TRITON.case("causal"))
    assert np.allclose(exercise.simulate(*args, block_m, block_n, skip=skip),
                       exercise.reference(*args), atol=1e-12, rtol=1e-10)


def test_a_replay_refuses_what_the_function_must_refuse():
    *specs, causal = TRITON.case("causal, seq_q != seq_k").make_args()
    args = (*(s.stored() for s in specs), causal)
    assert np.isnan(exercise.reference(*args)).all()
    for bug in TRITON.bugs:
        predict = getattr(bug.detect, "predicts_failure", None)
        if predict is not None:  # no replay claims anything about a case that must raise
            assert predict(args, exercise.reference(*args), 1e-3, 1e-3) is None, bug.key


# ---------------------------------------------------------------------------------------------
# The cases hold what their purposes claim.


def test_the_worked_example_case_is_the_one_explain_prints():
    q, k, v, o, do, lse, causal, block = PYTHON.case("worked example").make_args()
    assert (q, k, v, do) == page.worked()
    assert (causal, block) == (False, page.WORKED_BLOCK)
    steps = page.backward(q, k, v, do)
    assert np.allclose(steps["o"], o) and np.allclose(steps["lse"], lse)
    assert np.allclose(steps["dq"] + steps["dk"] + steps["dv"],
                       exercise.reference(q, k, v, o, do, lse), atol=1e-15)


def test_every_row_of_ds_in_the_worked_example_sums_to_zero():
    ds = page.backward(*page.worked())["ds"]
    assert all(abs(math.fsum(row)) < 1e-15 for row in ds)


def test_the_float16_accumulator_case_fails_only_a_16_bit_sum():
    args = arrays(TRITON.case("float16 accumulator"))
    q, do = args[0], args[4]
    assert not q.any() and args[1].shape[-2] == 1  # P = 1 everywhere: dV = the sum of dO's rows
    want = exercise.reference(*args)
    assert np.abs(want).max() < 65504 / 8  # every gradient far inside float16's range
    tolerance = TRITON.case("float16 accumulator").tolerance
    for block_m in (16, 32):  # the running sum passes 30,000 after a block of 16 or 32 rows
        got = round_to_dtype(exercise.simulate(*args, block_m, 16, acc_dtype="float16"),
                             "float16")
        assert not np.allclose(got, want, atol=tolerance.atol, rtol=tolerance.rtol)
    assert np.abs(np.cumsum(do[0, 0, :, 0])).max() > 30000


def test_the_transposed_case_has_the_strides_its_purpose_names():
    q = TRITON.case("(batch, seq, heads, d) transposed").make_args()[0]
    tensor = q.build("cpu")
    assert tensor.shape == (2, 2, 12, 16) and tensor.stride() == (384, 16, 32, 1)


def test_the_case_that_must_raise_does_so_in_both_parts():
    for part in (PYTHON, TRITON):
        (case,) = [c for c in part.cases if c.raises]
        assert case.raises == "ValueError" and "missing-error" in case.catches


def test_every_mistake_the_lesson_names_is_a_declared_bug():
    lesson = (COURSE_ROOT / "lessons" / "14-attention-backward.md").read_text(encoding="utf-8")
    keys = {bug.key for bug in TRITON.bugs}
    assert {"delta-wrong", "p-scale", "causal-one-pass", "causal-ignored", "not-accumulated",
            "grad-scale", "acc-16-bit", "strides-assumed", "out-of-bounds"} <= keys
    # the speed figures come from the committed bench run, through computed blocks only
    assert "<!-- computed: attention_backward target -->" in lesson
    assert "<!-- computed: attention_backward speed -->" in lesson


def test_the_speed_goal_is_met_only_by_the_median_of_the_rounds(tmp_path):
    import json

    from learning.exercises.attention_backward import explainer

    def run(ours_ms: list[float]) -> dict:
        env = {"date": "2026-12-04", "device": "a GPU", "sms": 1, "torch": "t", "triton": "3.6.0",
               "cuda": "c"}
        results = []
        for i, ms in enumerate(ours_ms):
            for impl, took in (("reference", ms), ("torch", 1.0)):
                results.append({"dtype": "bf16", "seq": 4096, "d": 128, "causal": False,
                                "batch": 4, "heads": 16, "impl": impl, "round": i, "ms": took,
                                "tflops": 100.0 / took})
        return {"env": env, "rounds": len(ours_ms), "command": "bench", "results": results}

    path = tmp_path / "attention_backward.json"
    # one fast round among slow ones does not meet the goal; the median does
    path.write_text(json.dumps(run([1.0, 1.5, 1.5])))
    (row, _) = explainer.target(path=path).rows
    assert row[2].startswith("0.67 (rounds: 0.67 to 1.00)") and row[3] == "not met", row
    path.write_text(json.dumps(run([1.2, 1.25, 2.0])))
    (row, causal) = explainer.target(path=path).rows
    assert row[2].startswith("0.80") and row[3] == "met", row
    assert causal[3] == "not measured", causal
    assert "Not measured" in explainer.target(path=tmp_path / "absent.json").text


# ---------------------------------------------------------------------------------------------
# The check names the key mistakes.


def _version(name: str, part: str):
    return next(v for v in catalogue.WRONG if v.name == name and v.part == part)


@pytest.mark.parametrize("name, key", [("D as rowsum(dO)", "delta-wrong"),
                                       ("P without the scale", "p-scale"),
                                       ("the causal mask off by one", "causal-off-by-one"),
                                       ("the causal flag ignored", "causal-ignored")])
def test_the_python_part_names_the_mistake(tmp_path, name, key):
    version = _version(name, "python")
    (part,) = grade_text(tmp_path, "attention_backward",
                         version_text("attention_backward", version), ["python"]).parts
    assert part.status == "failed" and failing_bugs(part) == {key}


# one kernel mistake proves the Triton part's replays quick; the other is exhaustive (and in
# test_exercises' exhaustive sweep of every catalogued mistake)
@pytest.mark.parametrize("name, key", [("dK and dV overwritten by each query block",
                                        "not-accumulated"),
                                       pytest.param("the causal mask in the dK, dV kernel only",
                                                    "causal-one-pass",
                                                    marks=pytest.mark.exhaustive),
                                       pytest.param("the causal mask off by one",
                                                    "causal-off-by-one",
                                                    marks=pytest.mark.exhaustive),
                                       pytest.param("dV alone overwritten by each query block",
                                                    "not-accumulated",
                                                    marks=pytest.mark.exhaustive),
                                       pytest.param("the causal mask in the dQ kernel only, "
                                                    "the dK, dV kernel skipping the blocks "
                                                    "above the diagonal", "causal-one-pass",
                                                    marks=pytest.mark.exhaustive)])
def test_the_triton_part_names_the_mistake(tmp_path, name, key):
    version = _version(name, "triton")
    (part,) = grade_text(tmp_path, "attention_backward",
                         version_text("attention_backward", version), ["triton"]).parts
    assert part.status == "failed" and key in failing_bugs(part)


# ---------------------------------------------------------------------------------------------
# The reference solution's kernels, on inputs that are not multiples of 1/8.


@pytest.mark.parametrize("lq, lk, causal", [(20, 37, False), (33, 33, True)])
def test_the_solution_matches_autograd_on_normal_inputs(lq, lk, causal, mode, device):
    from learning.exercises.attention_backward import solution

    g = torch.Generator().manual_seed(lq + lk)
    q, do = (torch.randn(2, 2, lq, 16, generator=g, dtype=torch.float64) for _ in range(2))
    k, v = (torch.randn(2, 2, lk, 16, generator=g, dtype=torch.float64) for _ in range(2))
    o, lse = exercise.forward(q.numpy(), k.numpy(), v.numpy(), causal)
    got = solution.attention_backward_triton(
        *(x.float().to(device) for x in (q, k, v, torch.as_tensor(o), do)),
        torch.as_tensor(lse).float().to(device), causal)
    # compiled, tl.dot rounds float32 operands to TF32 (10 bits): dP and dS carry it into
    # sums over 37 keys of normal values; the interpreter multiplies in float32
    atol, rtol = (2e-5, 1e-4) if mode.interpret else (2e-2, 1e-2)
    assert np.allclose(got.double().cpu().numpy(), autograd64(q, k, v, do, causal), atol=atol,
                       rtol=rtol)


# ---------------------------------------------------------------------------------------------
# explain attention_backward.


def test_explain_attention_backward_needs_no_torch_and_is_instant():
    probe = ("import sys; from learning import explain; "
             "assert explain.main(['attention_backward']) == 0; "
             "print(sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules), "
             "file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=COURSE_ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"


def test_at_80_columns_every_line_fits():
    done = subprocess.run([sys.executable, "-m", "learning.explain", "attention_backward"],
                          capture_output=True, text=True, cwd=COURSE_ROOT,
                          env={"COLUMNS": "80", "PATH": "/usr/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert len(line.rstrip()) <= 80, line
    for words in ("D = rowsum(dO·O)", "dS = P·(dP − D)", "dK = dSᵀ Q / sqrt(2)"):
        assert words in " ".join(done.stdout.split()), words


def test_explain_takes_your_own_do(capsys):
    assert explain.main(["attention_backward", "--input", "0,1,1,0"]) == 0
    out = capsys.readouterr().out
    assert "dO = [[0.0, 1.0], [1.0, 0.0]]" in " ".join(out.split())


@pytest.mark.parametrize("value", ["1,2,3", "1,2,3,4,5", "a,b,c,d"])
def test_bad_input_gets_one_line_and_status_2(value, capsys):
    assert explain.main(["attention_backward", f"--input={value}"]) == 2
    out = capsys.readouterr().out
    assert "--input" in out and len(out.strip().splitlines()) == 1


def test_d_from_do_and_v_is_named_where_there_are_more_keys_than_queries(tmp_path):
    # a query's loop that reads v's row of its own index: the worked example has 2 queries
    # and 3 keys, so V is not O's shape, and the replay takes V's first rows
    text = solution_text("attention_backward")
    wrong = "zip(do, o)]"
    assert wrong in text
    text = text.replace(wrong, "zip(do, v)]", 1)
    (part,) = grade_text(tmp_path, "attention_backward", text, ["python"]).parts
    assert part.status == "failed" and failing_bugs(part) == {"delta-wrong"}, \
        {c.name: c.verdict.summary for c in part.cases}


# dq, dk and dv travel as one tensor: what differs is said of each gradient by name
@pytest.mark.parametrize("name, part, right, wrong", [
    pytest.param("dS without P", "python", ("dV",), ("dQ", "dK"), marks=pytest.mark.exhaustive),
    ("dV from dS instead of P", "triton", ("dQ", "dK"), ("dV",)),
])
def test_what_differs_is_said_of_each_gradient_by_name(tmp_path, name, part, right, wrong):
    (version,) = [v for v in versions("attention_backward") if v.name == name and v.part == part]
    result = grade_text(tmp_path, "attention_backward",
                        version_text("attention_backward", version), [part])
    failed = [c for c in result.parts[0].cases if c.verdict.status == "failed"]
    assert failed
    verdict = failed[0].verdict
    said = verdict.observations[0]
    assert said.startswith(" and ".join(right) + (" matches" if len(right) == 1 else " match"))
    for gradient in wrong:
        assert f"in {gradient} " in said, said
    assert verdict.mismatches and all(m.piece.startswith(wrong) for m in verdict.mismatches)


def test_an_element_is_named_in_its_gradient_with_its_own_index():
    from learning.grader import compare, observe

    pieces = (("dQ", 2), ("dK", 3), ("dV", 3))
    assert observe.in_piece(pieces, (0, 0, 1, 4)) == "dQ[0, 0, 1, 4]"
    assert observe.in_piece(pieces, (0, 0, 5, 0)) == "dV[0, 0, 0, 0]"
    bad = np.zeros((1, 1, 8, 2), dtype=bool)
    bad[0, 0, 2, 1] = True
    assert observe.by_piece(bad, pieces) == "dQ and dV match; in dK 1 of 6 values differs"
    # where the first differing value lies, in the same terms, not the stacked output's
    want = np.zeros((1, 1, 8, 2))
    said = observe.describe_values(np.where(bad, 1.0, 0.0), want, 1e-3, 1e-3, pieces=pieces)
    assert said[0] == "the first at dK[0, 0, 0, 1]", said
    # pieces that do not tile the output are not used
    assert compare._pieces(PYTHON, ([[0.0]] * 2, [[0.0]] * 3, [[0.0]] * 3, [[0.0]] * 2,
                                    [[0.0]] * 2, [0.0] * 2), (9, 1)) == ()


def test_a_hints_code_lines_print_whole_at_80_columns(tmp_path, capsys, monkeypatch):
    # code in a hint stands on lines of its own, each short enough that no terminal of 80
    # columns breaks it, and the command prints each as written (its main, in this process:
    # a fresh one would import torch again only to print the same lines)
    from learning import check

    for each in registry.all_exercises():
        for part in each.parts:
            for hint in part.hints:
                for line in hint.splitlines():
                    assert not line.startswith("    ") or len(line) <= 76, (each.name, line)
    (tmp_path / "attention_backward.py").write_text(solution_text("attention_backward"))
    hint = TRITON.hints[3]
    monkeypatch.setenv("COLUMNS", "80")
    assert check.main(["attention_backward", "--part", "triton", "--hint", "4", "--root",
                       str(tmp_path)]) == 0
    out = capsys.readouterr().out
    printed = out.splitlines()
    code = [line for line in hint.splitlines() if line.startswith("    ")]
    assert len(code) >= 4
    for line in code:
        assert line in printed, (line, out)
    assert all(len(line) <= 80 for line in printed)


def test_the_lesson_lists_a_hints_code_as_a_code_block_inside_its_item():
    from learning import computed

    text = computed.render_hints("attention_backward", "triton")
    assert "\n4. Accumulate in float32" in text
    assert "\n   ```python\n   dq += tl.dot(ds.to(k.dtype), k)\n   ```" in text
    assert "   In the dQ kernel, with p and ds made the same way:" in text
    lesson = (COURSE_ROOT / "lessons" / "14-attention-backward.md").read_text(encoding="utf-8")
    assert text in lesson


def test_a_failure_quotes_a_shown_hints_words_and_points_at_its_code(tmp_path, capsys,
                                                                     monkeypatch):
    from learning import check
    from learning.grader import state

    monkeypatch.setenv("COLUMNS", "80")
    (version,) = [v for v in versions("attention_backward")
                  if v.name == "the accumulators in the inputs' dtype" and v.part == "triton"]
    (tmp_path / "attention_backward.py").write_text(version_text("attention_backward", version))
    seen = state.load(tmp_path)
    seen.saw_hint("attention_backward", "triton", 5)
    state.save(tmp_path, seen)
    assert check.main(["attention_backward", "--part", "triton", "--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert "hint 4: Accumulate in float32" in flat, out
    assert "(its code: python -m learning.check attention_backward --part triton --hint 4)" \
        in flat
    assert "dv += tl.dot" not in flat  # the code is the command's to print whole
    assert all(len(line) <= 80 for line in out.splitlines())
