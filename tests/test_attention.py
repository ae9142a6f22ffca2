"""Lesson 13's attention: the check's cases hold what their purposes say, every replay of a
mistake is the blocked algorithm with that one mistake, the grader judges a case that must raise,
the GPU compiler sees what the interpreter lets through, the reference kernel agrees with float64
in every row of its tuning table, `explain attention` computes its trace, and the bench is clean
without a GPU. (The reference solution, the stub and every catalogued version are graded by
tests/test_exercises.py, like every exercise's.)"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import reference_attention as ra
from learning import bench, explain
from learning.bench import rowwise
from learning.exercises.attention import exercise
from learning.exercises.attention import explainer as page
from learning.grader import compare, registry
from learning.grader.tensors import round_to_dtype
from tests.helpers import (
    COURSE_ROOT,
    dot_takes_m_and_n_below_16,
    failing_bugs,
    grade_text,
    solution_text,
)

# The interpreter computes with NumPy, which warns where a wrong version makes inf - inf.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

PYTHON = registry.find("attention").part("python")
TRITON = registry.find("attention").part("triton")
GRADED = [c for c in TRITON.cases if not c.raises]


def arrays(case):
    *specs, causal = case.make_args()
    return (*(spec.exact() for spec in specs), causal)


def sdpa64(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(
        *(torch.as_tensor(np.asarray(x, dtype=np.float64)) for x in (q, k, v)),
        is_causal=causal).numpy()


# ---------------------------------------------------------------------------------------------
# The reference and the replays.


@pytest.mark.parametrize("case", GRADED, ids=lambda c: c.name)
def test_the_grader_reference_is_torch_attention_in_float64(case):
    q, k, v, causal = arrays(case)
    assert np.allclose(exercise.reference(q, k, v, causal), sdpa64(q, k, v, causal),
                       atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("switches", [{}, {"shift": "block"}, {"order": "reverse"},
                                      {"skip": True, "block_m": 32}, {"skip": True}])
@pytest.mark.parametrize("block_n", [1, 3, 16, 64])
def test_every_correct_form_of_the_recurrence_is_attention(switches, block_n):
    case = TRITON.case("a key block entirely hidden")
    q, k, v, causal = arrays(case)
    got = exercise.simulate(q, k, v, causal, block_n, **switches)
    assert np.allclose(got, sdpa64(q, k, v, causal), atol=1e-12, rtol=1e-10)


def test_without_the_guard_only_the_rows_that_meet_a_hidden_block_first_are_nan():
    q, k, v, causal = arrays(TRITON.case("a key block entirely hidden"))  # 40 queries
    for block_n, first_hidden in ((16, 32), (32, 32), (64, 0)):
        for form in ({"shift": "block"}, {"order": "reverse"}):
            got = exercise.simulate(q, k, v, causal, block_n, guard=False, **form)
            nan_rows = np.flatnonzero(np.isnan(got).any(axis=-1)[0, 0])
            assert list(nan_rows) == list(range(first_hidden)), (block_n, form)
        # visiting from key 0 upward, measured from the running maximum: no NaN at all
        assert not np.isnan(exercise.simulate(q, k, v, causal, block_n, guard=False)).any()


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
    q, k, v, causal, block = PYTHON.case("worked example").make_args()
    assert (q, k, v) == tuple([[float(x) for x in row] for row in m] for m in page.worked())
    assert (causal, block) == (False, page.WORKED_BLOCK)
    scores = page.scores_of(*page.worked()[:2])[page.TRACED_ROW]
    maxima = [max(scores[s:s + block]) for s in range(0, len(scores), block)]
    assert maxima == sorted(set(maxima))  # the traced query's maximum grows in every block


def tf32(x):
    """x rounded to TF32 (10 bits of mantissa), to nearest."""
    mantissa, exponent = np.frexp(np.asarray(x, dtype=np.float64))
    return np.ldexp(np.round(mantissa * 2**11) / 2**11, exponent)


@pytest.mark.parametrize("case", [c for c in GRADED if c.make_args()[0].dtype == "float32"],
                         ids=lambda c: c.name)
def test_float32_inputs_are_exact_in_tf32_and_every_score_in_float32(case):
    q, k, v, _ = arrays(case)
    for x in (q, k, v):
        assert np.array_equal(tf32(x), x)
    products = np.abs(q) @ np.swapaxes(np.abs(k), -1, -2)
    assert np.array_equal(q * 64, np.round(q * 64)) and np.array_equal(k * 64, np.round(k * 64))
    assert products.max() * 64 < 2**24  # every partial sum of q . k, in 1/64ths, a float32


def kernel_like(q, k, v, causal, block_n, p_dtype):
    """The solution's arithmetic: p rounded to ``p_dtype`` (TF32 for float32 on a GPU) before
    p @ v, everything else float64."""
    def rounded(p):
        return tf32(p) if p_dtype == "tf32" else round_to_dtype(p, p_dtype)

    lq, lk = q.shape[-2], k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None], -np.inf, s)
    m = np.full(s.shape[:-1], -np.inf)
    total, acc = np.zeros(s.shape[:-1]), np.zeros(q.shape[:-1] + (v.shape[-1],))
    for start in range(0, lk, block_n):
        block = s[..., start:start + block_n]
        m_new = np.maximum(m, block.max(-1))
        ref = np.where(m_new == -np.inf, 0.0, m_new)
        p, alpha = np.exp(block - ref[..., None]), np.exp(m - ref)
        total = total * alpha + p.sum(-1)
        acc = acc * alpha[..., None] + rounded(p) @ v[..., start:start + block_n, :]
        m = m_new
    return acc / total[..., None]


@pytest.mark.parametrize("case", [
    # the GPU-only launch is a thousand queries of numpy here: its check is exhaustive
    pytest.param(c, marks=pytest.mark.exhaustive) if c.gpu_only else c for c in GRADED],
    ids=lambda c: c.name)
def test_the_tolerance_allows_a_gpu_s_rounding_of_the_probabilities(case):
    q, k, v, causal = arrays(case)
    dtype = case.make_args()[0].dtype
    tolerance = case.tolerance or TRITON.tolerance
    want = exercise.reference(q, k, v, causal)
    for block_n in exercise.TILES:
        got = round_to_dtype(kernel_like(q, k, v, causal, block_n,
                                         "tf32" if dtype == "float32" else dtype), dtype)
        assert np.allclose(got, want, atol=tolerance.atol / 2, rtol=tolerance.rtol / 2), block_n


def test_the_key_tail_case_scores_below_zero_and_large_logits_overflow_float32():
    q, k, _, _ = arrays(TRITON.case("key tail padded"))
    assert (q @ np.swapaxes(k, -1, -2)).max() < 0
    q, k, _, _ = arrays(TRITON.case("large logits"))
    scores = q @ np.swapaxes(k, -1, -2) / 4
    assert scores.min() > 1000 and scores.max() < 1100 and scores.max() > 88.8
    assert np.ptp(scores, axis=-1).min() > 1  # a softmax that is not one-hot nor uniform


def test_the_rising_case_raises_every_row_s_maximum_in_every_block():
    q, k, _, _ = arrays(TRITON.case("rising scores"))
    scores = q @ np.swapaxes(k, -1, -2)
    for block_n in (16,):
        maxima = np.stack([scores[..., s:s + block_n].max(-1)
                           for s in range(0, scores.shape[-1], block_n)], -1)
        assert (np.diff(maxima, axis=-1) > 0).all()


def test_the_float16_accumulator_case_overflows_only_a_16_bit_sum():
    q, _, v, _ = arrays(TRITON.case("float16 accumulator"))
    assert not q.any()
    assert (v.sum(axis=-2) > 65504).all() and (v.mean(axis=-2) < 65504 / 64).all()
    for block_n in exercise.TILES:  # and no single block's sum overflows for a block of 16
        assert np.isinf(exercise.simulate(*arrays(TRITON.case("float16 accumulator")), block_n,
                                          acc_dtype="float16")).all()


def test_the_transposed_case_has_the_strides_its_purpose_names():
    q = TRITON.case("(batch, seq, heads, d) transposed").make_args()[0]
    tensor = q.build("cpu")
    assert tensor.shape == (2, 2, 12, 16) and tensor.stride() == (384, 16, 32, 1)
    assert np.array_equal(tensor.numpy(), q.exact())
    memory = torch.as_strided(tensor, (tensor.numel(),), (1,)).numpy()
    assert np.array_equal(memory, q.stored().storage)


def test_the_case_that_must_raise_does_so_in_both_parts():
    for part in (PYTHON, TRITON):
        (case,) = [c for c in part.cases if c.raises]
        assert case.raises == "ValueError" and "missing-error" in case.catches


# ---------------------------------------------------------------------------------------------
# The grader: a case that must raise, a 4-D output left unwritten.


def _refusal(outcome):
    from learning.grader.declarations import Case

    case = Case("refuse", "must raise", lambda: (), catches=(), raises="ValueError")
    return compare.judge(TRITON, case, outcome, (), None, {"filename": "attention.py"})


def test_a_case_that_must_raise_passes_on_the_error_and_fails_on_a_result():
    from learning.grader.returned import Raised, Returned

    assert _refusal(Raised("ValueError", "no", "")).status == "passed"
    assert _refusal(Raised("NotImplementedError", "", "", not_started=True)).status == \
        "not-started"
    other = _refusal(Raised("AssertionError", "lengths", ""))
    assert other.status == "error" and "expects ValueError" in other.summary
    returned = _refusal(Returned("Tensor", np.zeros((1, 1, 2, 16)), shape=(1, 1, 2, 16)))
    assert returned.status == "failed" and [b.key for b in returned.causes] == ["missing-error"]
    assert "raise ValueError when causal" in returned.causes[0].cause  # the part's own words


def test_whole_query_rows_never_written_in_a_4d_output_are_named():
    unwritten = np.zeros((2, 2, 12, 16), dtype=bool)
    unwritten[1] = True  # the second batch never written
    verdict = compare._judge_unwritten(unwritten, np.zeros(unwritten.shape))
    assert verdict.causes[0].key == "grid-too-small"
    assert "24 whole rows of 48, from row 24" in verdict.summary


# ---------------------------------------------------------------------------------------------
# The GPU compiler sees what the interpreter lets through; the check stays fast.


def _grade_triton(tmp_path, text):
    return grade_text(tmp_path, "attention", text, ["triton"]).parts[0]


@pytest.mark.exhaustive  # one case proven against one mistake, as the catalogue does
def test_batch_and_head_swapped_fail_the_batch_x_heads_case(tmp_path):
    # With as many batches as heads the swap only reorders the programs' work and passes.
    text = solution_text("attention")
    for right, wrong in (("batch = pid_bh // n_heads", "batch = pid_bh % n_heads"),
                         ("head = pid_bh % n_heads", "head = pid_bh // n_heads")):
        assert right in text
        text = text.replace(right, wrong)
    part = _grade_triton(tmp_path, text)
    failed = {c.name for c in part.cases if c.verdict.status != "passed"}
    assert "batch x heads" in failed
    case = registry.find("attention").part("triton")
    assert any(c.name == "batch x heads" and not c.gpu_only for c in case.cases)


def test_a_causal_mask_on_the_wrong_axes_is_not_said_to_be_missing(tmp_path):
    # cols[None, :] <= rows[None, :] hides the blocks past the diagonal whole and nothing
    # inside the diagonal block: the numbers of a kernel with no mask that stops at the
    # diagonal. The cause named says what the numbers show (keys past the diagonal were not
    # hidden), never that the mask is missing, which this learner's is not
    text = solution_text("attention")
    right = "visible = visible & (cols[None, :] <= rows[:, None])"
    assert text.count(right) == 1
    part = _grade_triton(tmp_path, text.replace(right, right.replace("rows[:, None]",
                                                                        "rows[None, :]")))
    failing = [c for c in part.cases if c.verdict.status not in ("passed", "skipped")]
    assert failing
    named = {bug.key for c in failing for bug in c.verdict.causes}
    assert named <= {"causal-ignored"}, named
    said = " ".join(bug.cause for c in failing for bug in c.verdict.causes)
    assert "missing" not in said and "keys past the diagonal" in said, said


@pytest.mark.interpreter
def test_the_memory_map_of_a_batch_head_swap_labels_rows_and_draws_every_wrong_one(tmp_path):
    """2 batches of 3 heads: program 1 writes (1, 0) where the reference's program 3 does, and
    program 2 reads batch 2, past the end. Rows are labelled (batch, head, seq); the right head
    (0, 0) is what is left out, never the rows where the two kernels differ."""
    from learning.grader import map_run, map_view

    text = solution_text("attention")
    for right, wrong in (("batch = pid_bh // n_heads", "batch = pid_bh % n_heads"),
                         ("head = pid_bh % n_heads", "head = pid_bh // n_heads")):
        text = text.replace(right, wrong)
    (tmp_path / "attention.py").write_text(text, encoding="utf-8")
    pair = map_run.record_map(registry.find("attention"), tmp_path / "attention.py", "triton",
                             "batch x heads")
    lines = map_view.plain(pair, 80).splitlines()
    output = lines[:next(i for i, line in enumerate(lines) if line.startswith("    q ("))]
    rows = {line.split()[0]: line.split()[1:] for line in output
            if line.strip()[:1].isdigit() and "," in line.split()[0]}
    assert rows["1,0,0"] == rows["1,0,11"] == ["1" * 16, "3" * 16]
    for batch, head in ((0, 1), (0, 2), (1, 1), (1, 2)):  # never written by your kernel
        program = str(3 * batch + head)
        assert rows[f"{batch},{head},0"] == rows[f"{batch},{head},11"] == ["." * 16, program * 16]
    assert "0,0,5" not in rows and [line.strip() for line in output].count(":") == 1
    q = lines[len(output):]
    assert any(line.startswith("     2,0,0 !!!!!!!!!!!!!!!!") for line in q)  # batch 2
    assert "192 lanes past the end of dimension 0 (index 2), by program 2" in " ".join(
        " ".join(q).split())


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_blocks_of_8_keys_run_in_the_interpreter_and_fail_the_gpu_compile(tmp_path):
    text = solution_text("attention").replace("block_m, block_n = 16, 16",
                                              "block_m, block_n = 16, 8")
    assert text != solution_text("attention")
    part = _grade_triton(tmp_path, text)
    assert part.passed == part.graded and part.status == "failed"
    (rejected,) = part.compile_check.rejected
    assert "K >= 16" in rejected.message
    # BLOCK_N is the K of tl.dot(p, v): the advice names it
    assert "the block of keys for p @ v" in rejected.hint and "of at least 16" in rejected.hint


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_blocks_of_8_queries_compile_where_triton_takes_them(tmp_path):
    # BLOCK_M is the M of both tl.dots: no floor from Triton 3.5 on
    if not dot_takes_m_and_n_below_16():
        pytest.skip("Triton 3.3 and 3.4 want M and N at least 16 as well")
    text = solution_text("attention").replace("block_m, block_n = 16, 16",
                                              "block_m, block_n = 8, 16")
    assert text != solution_text("attention")
    part = _grade_triton(tmp_path, text)
    assert part.status == "passed"
    assert part.compile_check.ran and not part.compile_check.rejected


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_finished_kernel_passes_and_compiles(tmp_path):
    part = _grade_triton(tmp_path, solution_text("attention"))
    assert part.status == "passed"
    assert part.compile_check.ran and not part.compile_check.rejected


# ---------------------------------------------------------------------------------------------
# The reference kernel (reference_attention), against float64.


def normal(shape, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype).to(device)


# float32 random normal inputs: exact float32 in the interpreter; on a GPU tl.dot rounds q, k, v
# and p to TF32 (10 bits), as the course defines float32 there.
FP32 = {"cpu": 2e-3, "cuda": 1e-2}
# The correctness tests launch one configuration: the interpreter's, or on a GPU the table's
# last row (each new shape would otherwise be autotuned, a compile per row of the table).
FIXED = {"cpu": None, "cuda": ra.CONFIGS[-1]}
SHAPES = [(1, 1, 1, 1, 16), (2, 3, 37, 45, 16), (1, 2, 70, 70, 32), (1, 1, 33, 33, 128),
          (1, 1, 20, 7, 64)]


@pytest.mark.parametrize("batch, heads, lq, lk, d", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_reference_matches_float64(batch, heads, lq, lk, d, causal, device):
    if causal and lq != lk:
        pytest.skip("causal attention needs seq_q == seq_k")
    q = normal((batch, heads, lq, d), torch.float32, device, 1)
    k, v = (normal((batch, heads, lk, d), torch.float32, device, s) for s in (2, 3))
    out = ra.attention(q, k, v, causal, config=FIXED[device])
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
    want = sdpa64(q.cpu(), k.cpu(), v.cpu(), causal)
    assert np.allclose(out.cpu().double().numpy(), want, atol=FP32[device], rtol=FP32[device])


@pytest.mark.parametrize("row", ra.CONFIGS, ids=lambda row: row.label)
def test_every_row_of_the_tuning_table_is_right(row, device):
    for causal in (False, True):
        q, k, v = (normal((1, 2, 150, 64), torch.float16, device, s) for s in (4, 5, 6))
        out = ra.attention(q, k, v, causal, config=row)
        want = sdpa64(q.cpu(), k.cpu(), v.cpu(), causal)
        assert np.allclose(out.cpu().double().numpy(), want, atol=4e-3, rtol=4e-3), causal


def test_reference_reads_views_through_their_strides(device):
    x = normal((2, 20, 3, 16), torch.float32, device, 7)  # (batch, seq, heads, d)
    q = x.transpose(1, 2)
    kv = normal((2, 3, 40, 16), torch.float32, device, 8)[:, :, ::2]  # every second key
    out = ra.attention(q, kv, kv, False, config=FIXED[device])
    want = sdpa64(q.cpu(), kv.cpu(), kv.cpu(), False)
    assert np.allclose(out.cpu().double().numpy(), want, atol=FP32[device], rtol=FP32[device])


needs_descriptors = pytest.mark.skipif(ra._descriptor_class() is None,
                                       reason="this Triton has no host-side tensor descriptors "
                                              "(triton.tools.tensor_descriptor)")


@needs_descriptors
@pytest.mark.parametrize("lq, lk, causal", [(37, 45, False), (70, 70, True), (16, 5, False)])
def test_the_descriptor_kernel_matches_float64(lq, lk, causal, device):
    # _attention_tma: tiles past a head's end read as zeros and are not stored, so only the
    # scores' mask keeps the key tail out; a (batch, seq, heads, d) layout transposed too.
    x = normal((2, lq, 3, 16), torch.float32, device, 9)
    q = x.transpose(1, 2)
    k, v = (normal((2, 3, lk, 16), torch.float32, device, s) for s in (10, 11))
    out = ra.attention(q, k, v, causal, config=FIXED[device], descriptors=True)
    want = sdpa64(q.cpu(), k.cpu(), v.cpu(), causal)
    assert np.allclose(out.cpu().double().numpy(), want, atol=FP32[device], rtol=FP32[device])


@pytest.mark.gpu
@needs_descriptors
def test_the_descriptor_kernel_runs_where_tensors_are_aligned_and_pointers_elsewhere():
    d = ra.TMA_HEAD_DIMS[-1]
    q = torch.randn(2, 3, 64, d, device="cuda", dtype=torch.float16)
    uses_tma = torch.cuda.get_device_capability()[0] >= 9
    assert ra._descriptors_fit(q, q, q) == uses_tma
    assert not ra._descriptors_fit(q[..., :32], q[..., :32], q[..., :32])  # another head dim
    shifted = torch.randn(2 * 3 * 64 * d + 1, device="cuda", dtype=torch.float16)[1:]
    assert not ra._descriptors_fit(shifted.view(2, 3, 64, d), q, q)  # 2 bytes off 16
    odd_rows = torch.randn(2, 3, 64, d + 1, device="cuda", dtype=torch.float16)[..., :d]
    assert not ra._descriptors_fit(q, odd_rows, q)  # a row stride of 258 bytes
    for k in (q, odd_rows):
        out = ra.attention(q, k, k, True)
        want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(),
                                                                k.double(), is_causal=True)
        assert float((out.double() - want).norm() / want.norm()) < 3e-3


def test_empty_attentions(device):
    q = torch.ones(1, 2, 3, 16, device=device)
    assert torch.equal(ra.attention(q, q[:, :, :0], q[:, :, :0]), torch.zeros_like(q))
    assert ra.attention(q[:, :, :0], q, q).shape == (1, 2, 0, 16)


@pytest.mark.parametrize("shapes, dtypes, causal, error, words", [
    (((1, 2, 8, 16), (1, 2, 9, 16), (1, 2, 9, 16)), None, True, ValueError,
     "seq_q == seq_k, got 8 queries and 9 keys"),
    (((1, 2, 8, 48), (1, 2, 8, 48), (1, 2, 8, 48)), None, False, ValueError,
     "head dim 48 is not one of"),
    (((2, 8, 16), (2, 8, 16), (2, 8, 16)), None, False, ValueError, "must be 4-D"),
    (((1, 2, 8, 16), (1, 3, 8, 16), (1, 3, 8, 16)), None, False, ValueError,
     "batch and heads must agree"),
    (((1, 2, 8, 16),) * 3, (torch.float32, torch.float16, torch.float32), False, TypeError,
     "q is torch.float32, k is torch.float16"),
    (((1, 2, 8, 16),) * 3, (torch.int32,) * 3, False, TypeError, "convert with q.half()"),
])
def test_reference_refuses_bad_arguments_with_the_numbers(shapes, dtypes, causal, error, words,
                                                          device):
    dtypes = dtypes or (torch.float32,) * 3
    q, k, v = (torch.ones(s, dtype=t, device=device) for s, t in zip(shapes, dtypes))
    with pytest.raises(error, match=words):
        ra.attention(q, k, v, causal)


def test_a_last_stride_other_than_1_is_refused(device):
    q = torch.ones(1, 2, 16, 8, device=device).transpose(2, 3)  # (1, 2, 8, 16), stride 8
    with pytest.raises(ValueError, match="last dimension has stride 8"):
        ra.attention(q, q, q)


def test_the_table_fits_an_h200s_shared_memory_in_16_bit_at_d_128():
    assert all(row.shared_bytes(128, 2) <= 227 * 1024 for row in ra.CONFIGS)
    assert all(row.block_m % row.block_n == 0 for row in ra.CONFIGS)  # the diagonal's stage


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, seq, d, causal", [(torch.float16, 1000, 64, True),
                                                   (torch.bfloat16, 1024, 128, False),
                                                   (torch.bfloat16, 4096, 128, True)])
def test_the_autotuned_reference_matches_float64_on_a_gpu(dtype, seq, d, causal):
    tolerance = {torch.float16: 3e-3, torch.bfloat16: 2e-2}[dtype]
    q, k, v = (torch.randn(2, 4, seq, d, device="cuda").to(dtype) for _ in range(3))
    out = ra.attention(q, k, v, causal)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                            is_causal=causal)
    assert float((out.double() - want).norm() / want.norm()) < tolerance
    assert ra.chosen_config(q, k, causal) is not None


# ---------------------------------------------------------------------------------------------
# python -m learning.explain attention


@pytest.fixture
def wide_plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def test_explain_attention_traces_a_row_and_checks_it_against_the_softmax(
        capsys, wide_plain_console):
    assert explain.main(["attention"]) == 0
    out = capsys.readouterr().out
    for text in ("Query 0, block by block", "alpha", "acc after", "Every query",
                 "The causal mask, block by block", "Where A1's guard matters", "nan",
                 "FLOP per byte, fused"):
        assert text in out, text
    measured = (COURSE_ROOT / "lab" / "results" / "attention.json").exists()
    assert ("Not yet measured" in out) is not measured


def test_the_trace_s_result_is_the_whole_row_s_softmax():
    q, k, v = page.worked()
    for scores in page.scores_of(q, k):
        for block in (1, 2, 4, 6):
            got = page.run(scores, v, block)["output"]
            assert max(abs(a - b) for a, b in zip(got, page.full_softmax(scores, v))) < 1e-12
    text = page.check().text
    assert "acc / l = [0.613835886" in text and "softmax of the whole row" in text


def test_the_trace_rescales_whenever_the_maximum_grows():
    rows = page.trace().rows
    assert [row[4] for row in rows] == ["0.000000", f"{math.exp(-1):.6f}", f"{math.exp(-1):.6f}"]


@pytest.mark.parametrize("argv, words", [
    (["--input", "1,-inf,3,0,4"], "Attention for one query row with scores [1, -inf, 3, 0, 4]"),
    (["--input=-inf,-inf,2"], "acc / l = [3, 0]"),
])
def test_explain_attention_takes_your_own_scores(argv, words, capsys, wide_plain_console):
    assert explain.main(["attention", *argv]) == 0
    assert words in capsys.readouterr().out


@pytest.mark.parametrize("value", ["-inf,-inf", "1,inf", ",".join(["1"] * 17)])
def test_explain_attention_refuses_rows_it_cannot_trace(value, capsys):
    assert explain.main(["attention", f"--input={value}"]) == 2
    out = capsys.readouterr().out
    assert "--input" in out and len(out.strip().splitlines()) <= 3


def test_the_causal_picture_names_the_rows_that_start_hidden_in_reverse_order():
    assert page._rows_meeting_hidden_first(8, 2) == [0, 1, 2, 3, 4, 5]
    assert page._rows_meeting_hidden_first(40, 16) == list(range(32))
    table = page.causal_table((8, 2))
    assert [row[0] for row in table.rows if row[1] == "some"] == ["0"]


def test_the_memory_table_comes_from_the_formulas():
    table = page.memory_table((128, 2))
    row = dict(zip(table.columns, table.rows[3]))  # seq 4096
    assert row["seq"] == "4,096"
    assert row["Scores of one head (MiB)"] == f"{4096 * 4096 * 2 / 2**20:,.1f}"
    assert row["FLOP per byte, fused"] == f"{4 * 4096**2 * 128 / (4 * 4096 * 128 * 2):,.0f}"


def test_measured_sections_wait_for_a_committed_run_then_show_it():
    if not page.RESULTS.exists():
        assert page.measured().text == page.target().text == page.NOT_MEASURED
        assert page.backends().text == page.configs().text == page.NOT_MEASURED
    row = {"dtype": "bf16", "seq": 4096, "d": 128, "batch": 4, "heads": 16}
    data = {"env": {"device": "GPU", "sms": 1, "torch": "t", "triton": "3.6.0", "cuda": "c",
                    "date": "2026-12-02"}, "command": "python -m learning.bench attention",
            "results": [dict(row, impl="reference", causal=False, tflops=400.0,
                             config="128x64"),
                        dict(row, impl="torch", causal=False, tflops=500.0,
                             backend="FlashAttention-2: flash_fwd")],
            "backends": [dict(row, backend="flash attention", causal=False, tflops=500.0)],
            "configs": [dict(row, config="128x64", causal=False, tflops=400.0)]}
    table = page.measured(data=data)
    assert table.rows == (("4,096", "128", "no", "4 x 16", "400", "500", "0.80",
                           "FlashAttention-2 1"),)
    assert table.caption.startswith("Every row bf16.")
    assert "FlashAttention-2 1 = flash_fwd" in table.caption
    assert "triton 3.6.0" in table.caption and "2026-12-02" in table.caption
    mixed = dict(data, results=data["results"] + [
        dict(row, dtype="fp16", impl="torch", causal=False, tflops=1.0, backend="cuDNN: k")])
    assert [r[0] for r in page.measured(data=mixed).rows] == ["bf16", "fp16"]
    target = page.target(data=data)
    assert target.rows[0][2:] == ("0.80", "met") and target.rows[1][3] == "not measured"
    assert page.backends(data=data).rows == (("flash attention", "no", "500"),)
    assert page.configs(data=data).rows == (("bf16", "4,096", "128", "no", "128x64", "400"),)


def test_a_kernel_name_recorded_cut_is_marked_and_a_whole_one_is_shown_whole():
    assert page._kernel_shown("cuDNN: " + "k" * page.CUT_NAME) == \
        "cuDNN: " + "k" * page.CUT_NAME + " ..."
    assert page._kernel_shown("cuDNN: " + "k" * 110) == "cuDNN: " + "k" * 110
    assert page._kernel_labels(["cuDNN: a", "flash: f", "cuDNN: b", "cuDNN: a", "-"]) == \
        {"cuDNN: a": "cuDNN 1", "flash: f": "flash 1", "cuDNN: b": "cuDNN 2"}


def test_the_target_rounds_show_the_median_and_range_of_each_mask(tmp_path):
    assert "Not measured" in page.rounds(path=tmp_path / "none.json").text
    env = {"device": "GPU", "torch": "t", "triton": "3.6.0", "date": "2026-12-02", "seq": 4096,
           "d": 128, "batch": 4, "heads": 16, "dtype": "bf16", "rounds": 3}
    results = [dict(causal=causal, round=i, ours_tflops=ours, sdpa_tflops=600.0,
                    ratio=ours / 600.0)
               for causal in (False, True) for i, ours in enumerate((450.0, 540.0, 480.0))]
    path = tmp_path / "target.json"
    path.write_text(json.dumps({"env": env, "results": results}))
    table = page.rounds(path=path)
    assert table.rows[0] == ("no", "3", "450 to 540", "600 to 600", "0.80", "0.75 to 0.90")
    assert "triton 3.6.0" in table.caption and "--rounds 3" in table.caption


def test_explain_attention_needs_no_torch_and_is_instant():
    probe = ("import sys, time; t = time.perf_counter(); from learning import explain; "
             "assert explain.main(['attention']) == 0; "
             "print(sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules), "
             "time.perf_counter() - t, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=COURSE_ROOT)
    assert done.returncode == 0, done.stderr
    loaded = done.stderr.strip().rsplit(" ", 1)[0]
    # what makes it instant: importing torch alone takes seconds (wall time is not asserted:
    # a loaded machine would fail it for nothing)
    assert loaded == "[]"


def test_at_80_columns_no_number_or_word_is_split():
    import re

    done = subprocess.run([sys.executable, "-m", "learning.explain", "attention"],
                          capture_output=True, text=True, cwd=COURSE_ROOT,
                          env={"COLUMNS": "80", "PATH": "/usr/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert len(line.rstrip()) <= 80, line
        assert not re.search(r"\d,\d{1,2} *$|\d,\d{1,2} │", line), line


def test_the_measured_figures_stay_a_table_at_80_columns_piped_with_kernel_names_whole():
    """Piped at 80 columns the figures once became one record of nine lines per shape (about
    240 lines), each kernel's name cut at 80 characters."""
    if not page.RESULTS.exists():
        pytest.skip("no committed run to draw")
    done = subprocess.run([sys.executable, "-m", "learning.explain", "attention"],
                          capture_output=True, text=True, cwd=COURSE_ROOT,
                          env={"COLUMNS": "80", "PATH": "/usr/bin"}, timeout=60)
    section = done.stdout.split("Measured on a GPU", 1)[1]
    shapes = {page._key(r) for r in page.load_results()["results"]}
    assert section.count("│") >= len(shapes) and "reference TFLOP/s:" not in section
    assert len(section.splitlines()) < len(shapes) + 15
    joined = "".join(section.split())
    for r in page.load_results()["results"]:
        if r["impl"] == "torch":
            assert r["backend"].partition(": ")[2] in joined


# ---------------------------------------------------------------------------------------------
# python -m learning.bench attention


def test_without_a_gpu_bench_attention_says_where_the_figures_are(capsys, mode):
    if not mode.interpret:
        pytest.skip("a GPU is present: the bench would time")
    assert bench.main(["attention"]) == 1  # nothing timed
    out = " ".join(capsys.readouterr().out.split())
    assert "need a CUDA GPU" in out and "python -m learning.check attention" in out
    assert "lab/results/attention.json" in out


@pytest.mark.parametrize("argv, message", [
    (["attention", "--seqs", "12y"], "'12y' is not a whole number"),
    (["attention", "--seqs", "0"], "0 is not allowed"),
    (["attention", "--dims", "48"], "48 is not allowed"),
    (["attention", "--dtypes", "fp64"], "unknown dtype 'fp64'"),
    (["softmax", "attention"], "attention is timed on its own"),
])
def test_bad_bench_arguments_are_one_line_and_exit_2(argv, message, capsys):
    assert bench.main(argv) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert message in out and "Traceback" not in out


def test_the_sizes_hold_the_same_tokens_and_width_and_causal_counts_half():
    from learning.bench import attention as ba

    for seq in ba.SEQS:
        for d in ba.DIMS:
            batch, heads = ba.shape_for(seq, d)
            assert batch * seq == ba.TOKENS and heads * d == ba.MODEL_WIDTH
    assert ba.flops(1, 1, 4, 8, True) * 2 == ba.flops(1, 1, 4, 8, False) == 4 * 16 * 8
    assert ba.backend_of(["void flash_fwd_kernel<...>(...)"]).startswith("FlashAttention-2")
    assert ba.backend_of(["cudnn_generated_fort_native_sdpa"]).startswith("cuDNN")
    assert ba.backend_of([]) == "unknown"
    long_name = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1"
    assert ba.backend_of([long_name]) == f"cuDNN: {long_name}"  # whole, not cut at 80


@pytest.mark.exhaustive  # the bench, measured in the interpreter
@pytest.mark.interpreter
def test_the_bench_checks_then_times_each_implementation(monkeypatch):
    from learning.bench import attention as ba
    from learning.exercises.attention import solution

    monkeypatch.setattr(ba, "DEVICE", "cpu")
    monkeypatch.setattr(rowwise, "median_ms", lambda fn, quick=False: (fn(), 2.0)[1])
    monkeypatch.setattr(ba, "shape_for", lambda seq, d: (1, 2))
    assert ba.try_small(solution.attention_triton) == ""
    rows = ba.measure_size(40, 16, "fp16", True, False, solution.attention_triton,
                           lambda row: None)
    assert [r["impl"] for r in rows] == ["yours", "reference", "torch"]
    assert all(r["correct"] and r["tflops"] == 4 * 2 * 40 * 40 * 16 / 2 / 2e-3 / 1e12
               for r in rows)
    assert "| fp16 | 40 | 16 | yes | 1 x 2 |" in "\n".join(ba.table_lines(rows))

    def drops_a_row(q, k, v, causal=False):
        out = solution.attention_triton(q, k, v, causal)
        out[0, 0, 0] = 0
        return out

    rows = ba.measure_size(40, 16, "fp16", True, False, drops_a_row, lambda row: None)
    assert not rows[0]["correct"] and "not timed" in rows[0]["note"] and "ms" not in rows[0]
    monkeypatch.setattr(ra, "CONFIGS", ra.CONFIGS[-2:])
    timed = ba.measure_configs(False, lambda row: None, (True,), target=(64, 16, "fp16"))
    assert [r["config"] for r in timed] == [row.label for row in ra.CONFIGS]
    assert all("tflops" in r for r in timed)


@pytest.mark.interpreter
def test_the_bench_skips_the_stub_with_a_note(monkeypatch):
    from learning.bench import attention as ba

    monkeypatch.setattr(ba, "DEVICE", "cpu")
    function, why = ba.load_learner(COURSE_ROOT)
    assert why == "" and "NotImplementedError" in ba.try_small(function)


def test_the_lesson_s_figures_are_computed_sections():
    text = (Path(COURSE_ROOT) / "lessons" / "13-attention.md").read_text(encoding="utf-8")
    for block in ("memory", "trace", "check", "rows", "causal", "guard", "measured", "target",
                  "backends", "configs"):
        assert f"<!-- computed: attention {block}" in text, block
    assert "<!-- computed: cases attention triton -->" in text
    assert "<!-- computed: hints attention python -->" in text


def _failed(part_result) -> set[str]:
    return {c.name for c in part_result.cases
            if c.verdict.status not in ("passed", "skipped", "not-run")}


@pytest.mark.exhaustive  # one case proven against one mistake, as the catalogue does
def test_a_maximum_over_the_queries_instead_of_the_keys_fails(tmp_path):
    # shift-invariance hides a wrong maximum until some row is measured from another's: the
    # case with rows of scores near +1024 and -1024 must catch it
    text = solution_text("attention").replace(
        "m_new = tl.maximum(m, tl.max(s, axis=1))", "m_new = tl.maximum(m, tl.max(s, axis=0))")
    part = grade_text(tmp_path, "attention", text, ["triton"]).parts[0]
    assert "rows far apart" in _failed(part)


def test_a_running_maximum_that_starts_at_0_fails(tmp_path):
    text = solution_text("attention").replace(
        "m, l, acc = -math.inf, 0.0, [0.0] * len(v[0])", "m, l, acc = 0.0, 0.0, [0.0] * len(v[0])")
    part = grade_text(tmp_path, "attention", text, ["python"]).parts[0]
    assert "scores far below 0" in _failed(part)


def test_a_rounded_output_is_named_as_rounded(tmp_path):
    text = solution_text("attention").replace(
        "out.append([a / l for a in acc])", "out.append([round(a / l, 6) for a in acc])")
    part = grade_text(tmp_path, "attention", text, ["python"]).parts[0]
    assert failing_bugs(part) == {"rounded"}


def test_an_output_never_divided_by_l_is_judged_divided_by_each_rows_l():
    """A GPU kernel's rounding of acc is relative to the terms it sums, which add up to l
    times the output: the replay compares both divided by l (on an H200 the plain replay
    missed 2 of the 18 failing cases by 9 %, and the bug was then ruled out everywhere)."""
    import numpy as np

    from learning.exercises.attention import exercise as declared
    from learning.grader.tensors import TensorSpec

    part = registry.find("attention").part("triton")
    bug = next(b for b in part.bugs if b.key == "not-normalised")
    case = next(c for c in part.cases if c.name == "head dim 128")
    args = tuple(a.stored() if isinstance(a, TensorSpec) else a for a in case.make_args())
    want = np.asarray(declared.reference(*args))
    never = bug.detect.detects[0]
    buggy = never._buggy(args)
    _, sums = never._per_row(buggy, args)
    atol, rtol = declared._REPLAY_TOLERANCE["float32"]
    # rounding as large as the tolerance allows a normalised output, times each row's l
    rounded = buggy + 0.9 * atol * sums * np.where(np.arange(buggy.size).reshape(buggy.shape)
                                                   % 2, 1, -1)
    assert not np.allclose(rounded, buggy, atol=atol, rtol=rtol)  # the plain replay misses it
    assert bug.detect(rounded, args, want)
    assert never.explains(rounded, args, want, part.tolerance.atol, part.tolerance.rtol)
    assert not bug.detect(buggy * 1.5, args, want)  # l times something else: not this bug


def test_the_worked_example_shows_every_value_the_trace_uses():
    """The page never showed v, so no 'acc after' could be redone by hand. From the tables
    alone (q, k, v, the scale) the first block's acc is rebuilt and matches the trace's."""
    import ast

    rows = {}
    for block in page.page().blocks:  # the first table of each first column: the trace's Keys
        if hasattr(block, "columns"):
            rows.setdefault(block.columns[0], block)
    keys, scores = rows["Key j"], rows["Query"]
    k = [ast.literal_eval(row[1]) for row in keys.rows]
    v = [ast.literal_eval(row[2]) for row in keys.rows]
    q0 = ast.literal_eval(scores.rows[page.TRACED_ROW][1])
    s = [sum(a * b for a, b in zip(q0, key)) / math.sqrt(len(q0)) for key in k]
    m = max(s[:page.WORKED_BLOCK])
    acc = [sum(math.exp(s[j] - m) * v[j][c] for j in range(page.WORKED_BLOCK))
           for c in range(len(v[0]))]
    first = rows["Keys"].rows[0]
    shown = ast.literal_eval(first[-1])
    assert shown == pytest.approx(acc, abs=1e-4)
    lesson = (COURSE_ROOT / "lessons" / "13-attention.md").read_text(encoding="utf-8")
    assert all(f"| {row[2]} |" in lesson for row in keys.rows)


@pytest.mark.parametrize("old, new", [
    ("k_ptr + cols[:, None] * stride_kn", "k_ptr + cols[:, None] * stride_qm"),
    ("k_ptr + cols[:, None] * stride_kn", "k_ptr + cols[:, None] * stride_vn"),
    ("v_ptr + cols[:, None] * stride_vn", "v_ptr + cols[:, None] * stride_kn"),
])
def test_an_operand_read_with_another_ones_row_stride_fails(tmp_path, old, new):
    # a copy-paste stride: each pair of q, k and v differs in its row stride in some case
    text = solution_text("attention")
    assert old in text
    part = grade_text(tmp_path, "attention", text.replace(old, new), ["triton"]).parts[0]
    assert part.status == "failed"
