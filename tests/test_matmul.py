"""Lesson 12's matrix product: the check's cases hold what their purposes say, the GPU compiler
sees what the interpreter lets through, the reference kernel agrees with float64 in every row of
its tuning table, `explain matmul` works its tiles out of the formula, and the bench is clean
without a GPU. (The reference solution, the stub and every catalogued version are graded by
tests/test_exercises.py, like every exercise's.)"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

import reference_matmul as rm
from learning import bench, explain
from learning.bench import rowwise
from learning.exercises.matmul import exercise
from learning.exercises.matmul import explainer as page
from learning.grader import registry
from learning.grader.tensors import TensorSpec
from tests.helpers import (
    COURSE_ROOT,
    dot_takes_m_and_n_below_16,
    grade_text,
    named_in,
    solution_text,
    triton_version,
)

# The interpreter computes with NumPy, which warns where a wrong version makes inf - inf.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

TRITON = registry.find("matmul").part("triton")
PYTHON = registry.find("matmul").part("python")


def integers(shape, dtype, device, seed=0, high=4):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-high, high + 1, shape, generator=g).to(dtype).to(device)


# ---------------------------------------------------------------------------------------------
# The exercise's cases hold what their purposes claim.


def test_the_worked_example_case_is_the_one_explain_prints():
    a, b, block = PYTHON.case("worked example").make_args()
    want_a, want_b = page.worked_matrices(*page.DEFAULT[:3])
    assert (a, b, block) == (want_a, want_b, page.DEFAULT[3])
    from learning.exercises.matmul import solution

    assert solution.matmul_python(a, b, block) == page._product(want_a, want_b)


@pytest.mark.parametrize("case", [c for c in TRITON.cases if c.tolerance is None],
                         ids=lambda c: c.name)
def test_integer_cases_are_exact_in_every_format_a_kernel_sums_in(case):
    import numpy as np

    a, b = (spec.exact() for spec in case.make_args())
    assert np.array_equal(a, np.round(a)) and np.array_equal(b, np.round(b))
    # every partial sum is a whole number below 2**24: float32 (and TF32 products) exact
    assert (np.abs(a) @ np.abs(b)).max() < 2**24
    assert np.abs(a).max() <= 256 and np.abs(b).max() <= 256  # exact in bfloat16 and TF32


# Each accumulator case, and the 16-bit accumulator its inputs' dtype lets a kernel get wrong
# (None: the inputs' own dtype).
ACCUMULATOR_CASES = {"float16": ("float16 accumulator overflow", None),
                     "float32": ("float32 sums past 65504", "float16"),
                     "bfloat16": ("bfloat16 accumulator", None)}


@pytest.mark.parametrize("dtype", sorted(ACCUMULATOR_CASES))
def test_the_accumulator_cases_overflow_float16_whatever_the_block(dtype):
    import numpy as np

    name, accumulator = ACCUMULATOR_CASES[dtype]
    case = TRITON.case(name)
    a, b = (spec.exact() for spec in case.make_args())
    k = a.shape[1]
    running = np.cumsum(a[:, :, None] * b[None, :, :], axis=1)  # (m, k, n)
    assert (running[:, k // 2 - 1] > 65504).all()  # every element passes float16's largest
    for block in exercise.TILES:  # no single block does, so the accumulator is to blame
        steps = [a[:, k0:k0 + block] @ b[k0:k0 + block] for k0 in range(0, k, block)]
        assert max(np.abs(s).max() for s in steps) < 65504
    c = a @ b
    assert np.abs(c).max() <= 2048  # a whole number that float16 holds exactly
    stored = [s.stored() for s in case.make_args()]
    for block in exercise.TILES:  # either way of adding to it, whatever the K step
        for rounds_each_product in (True, False):
            replay = exercise._accumulated_in(accumulator, rounds_each_product)(*stored, block)
            assert not np.allclose(replay, c, rtol=0.01), (block, rounds_each_product)


def test_a_transposed_spec_is_a_view_whose_memory_is_what_stored_says():
    import numpy as np

    values = np.arange(12.0).reshape(3, 4)
    spec = TensorSpec(values, layout="transposed")
    tensor = spec.build("cpu")
    assert tensor.shape == (3, 4) and tensor.stride() == (1, 3)
    assert np.array_equal(tensor.numpy(), values)
    memory = torch.as_strided(tensor, (12,), (1,)).numpy()
    assert np.array_equal(memory, spec.stored().storage)
    assert "transposed" in spec.describe()


@pytest.mark.gpu
def test_the_matmul_cases_put_nan_right_after_each_contiguous_input_on_a_gpu():
    a, _ = TRITON.case("K edge").make_args()
    tensor = a.build("cuda")
    beyond = torch.as_strided(tensor, (1,), (1,), tensor.storage_offset() + tensor.numel())
    assert math.isnan(float(beyond.item()))


# ---------------------------------------------------------------------------------------------
# The GPU compiler sees what the interpreter lets through.


def _grade_triton(tmp_path, text):
    return grade_text(tmp_path, "matmul", text, ["triton"]).parts[0]


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_k_step_below_16_runs_in_the_interpreter_and_fails_the_gpu_compile(tmp_path):
    text = solution_text("matmul").replace("block_m, block_n, block_k = 32, 32, 32",
                                           "block_m, block_n, block_k = 32, 32, 8")
    assert text != solution_text("matmul")
    part = _grade_triton(tmp_path, text)
    assert part.passed == part.graded  # every value right in the interpreter
    assert part.status == "failed"
    (rejected,) = part.compile_check.rejected
    assert rejected.kernel == "matmul_kernel" and "K >= 16" in rejected.message
    # The advice says what the message says: K, the dimension a and b share, is too short
    assert "K (the dimension a and b share" in rejected.hint and "at least 16" in rejected.hint
    if "M >= 1, N >= 1" in rejected.message:  # Triton 3.5 on: only K has a floor
        assert "M and N may be as small as 1" in rejected.hint
        assert "each dimension" not in rejected.hint


@pytest.mark.exhaustive  # compiles every tile
@pytest.mark.interpreter
def test_tiles_of_8_by_8_with_a_k_step_of_32_compile_where_triton_takes_them(tmp_path):
    # tl.dot's floor is on K alone from Triton 3.5 on: a tile of C of 8 x 8 is fine
    if not dot_takes_m_and_n_below_16():
        pytest.skip("Triton 3.3 and 3.4 want M and N at least 16 as well")
    text = solution_text("matmul").replace("block_m, block_n, block_k = 32, 32, 32",
                                           "block_m, block_n, block_k = 8, 8, 32")
    assert text != solution_text("matmul")
    part = _grade_triton(tmp_path, text)
    assert part.status == "passed"
    assert part.compile_check.ran and not part.compile_check.rejected


def test_the_advice_on_tl_dot_sizes_follows_the_compiler_message():
    from learning.grader.gpu_compile import _hint

    # Triton 3.5 to 3.9 on 16-bit inputs: only K has a floor
    newer = _hint("Input shapes should have M >= 1, N >= 1 and K >= 16")
    assert "K (the dimension a and b share" in newer and "of at least 16" in newer
    assert "M and N may be as small as 1" in newer and "M (a's rows)" not in newer
    # Triton 3.3 and 3.4: all three
    older = _hint("Input shapes should have M >= 16, N >= 16 and K >= 16")
    assert "M (a's rows) of at least 16" in older and "N (b's columns) of at least 16" in older
    assert "K (the dimension a and b share" in older and "as small as 1" not in older
    # float32 inputs on Triton 3.9: K >= 8
    assert "of at least 8" in _hint("Input shapes should have M >= 1, N >= 1 and K >= 8")


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_float16_accumulator_that_becomes_float32_fails_only_the_gpu_compile(tmp_path):
    # acc += tl.dot(a, b) turns a float16 acc into float32: the interpreter lets the loop's
    # variable change type (and so gets every case right), the GPU compiler does not
    text = solution_text("matmul").replace(
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=c_ptr.dtype.element_ty)")
    assert text != solution_text("matmul")
    part = _grade_triton(tmp_path, text)
    assert part.passed == part.graded and part.status == "failed"
    (rejected,) = part.compile_check.rejected
    assert "Loop-carried variable acc" in rejected.message
    # the likely cause reads the two types from the message and names the accumulator
    assert rejected.hint.startswith("acc starts as fp16 and the loop makes it fp32")
    assert "tl.zeros(..., dtype=tl.float32)" in rejected.hint


# The two ways a float16 acc stays float16 through the loop, so that the GPU compiles it.
FLOAT16_ADDITIONS = {"each product rounded": "acc += tl.dot(a, b).to(tl.float16)",
                     "the sum rounded": "acc = (acc + tl.dot(a, b)).to(tl.float16)"}


# both name acc-float16 the same way: the quick run grades the first, the other is exhaustive
@pytest.mark.interpreter
@pytest.mark.parametrize("added", [
    added if i == 0 else pytest.param(added, marks=pytest.mark.exhaustive)
    for i, added in enumerate(FLOAT16_ADDITIONS.values())], ids=list(FLOAT16_ADDITIONS))
@pytest.mark.compile_check
def test_a_float16_accumulator_on_float32_inputs_fails_and_is_named(tmp_path, added):
    text = solution_text("matmul").replace(
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)").replace(
        "acc += tl.dot(a, b)", added)
    part = _grade_triton(tmp_path, text)
    assert part.compile_check.ran and not part.compile_check.rejected  # a real GPU mistake
    cases = {c.name: c for c in part.cases}
    for name in ("float32 sums past 65504", "K past the tile many times"):  # float32 inputs
        assert cases[name].verdict.status == "failed", name
        assert named_in(cases[name]) == {"acc-float16"}, name
    cause = TRITON.bug("acc-float16").cause
    assert "11 significant bits" in cause and "65504" in cause and "tl.float32" in cause


def test_tf32_fits_the_random_float32_tolerance_as_a_float16_accumulator_does():
    """Why "float32 random" cannot catch a float16 accumulator, and a whole-number case does:
    TF32's error there uses under a sixth of the tolerance, and a float16 accumulator with a long
    K step errs by less than TF32, so any tolerance that passes TF32 passes it too."""
    import numpy as np

    case = TRITON.case("float32 random")
    stored = [s.stored() for s in case.make_args()]
    a, b = (np.asarray(s, dtype=np.float64) for s in stored)
    want = a @ b

    def tf32(x, truncated):  # float32's top 10 bits of mantissa, truncated or rounded
        bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        if not truncated:
            bits = bits + 0xFFF + ((bits >> 13) & 1)
        return (bits & 0xFFFFE000).astype(np.uint32).view(np.float32).astype(np.float64)

    def worst(got):  # the largest error as a share of what the tolerance allows
        allowed = case.tolerance.atol + case.tolerance.rtol * np.abs(want)
        return float((np.abs(got - want) / allowed).max())

    for truncated in (True, False):
        assert worst(tf32(a, truncated) @ tf32(b, truncated)) < 1 / 6
    tf32_error = np.abs(tf32(a, True) @ tf32(b, True) - want).max()
    float16_error = np.abs(exercise._accumulated_in("float16", True)(*stored, 256) - want).max()
    assert 0 < float16_error < tf32_error


def test_the_advice_on_a_loop_carried_type_reads_the_types_from_the_message():
    from learning.grader.gpu_compile import _hint

    changed = _hint("Loop-carried variable m_i has initial type <['64'], fp32> but is "
                    "re-assigned to <['64'], bf16> in loop! Please make sure that the type "
                    "stays consistent.")
    assert changed.startswith("m_i starts as fp32 and the loop makes it bf16")
    assert "dtype=tl.bfloat16" in changed and "tl.dot" not in changed
    reshaped = _hint("Loop-carried variable acc has initial type <['32', '32'], fp32> but is "
                     "re-assigned to <['32', '64'], fp32> in loop!")
    assert reshaped.startswith("acc changes shape inside the loop") and "dtype" not in reshaped


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_finished_kernel_passes_and_compiles(tmp_path):
    part = _grade_triton(tmp_path, solution_text("matmul"))
    assert part.status == "passed"
    assert part.compile_check.ran and not part.compile_check.rejected


# ---------------------------------------------------------------------------------------------
# The reference kernel (reference_matmul), against float64.

SHAPES = [(1, 1, 1), (37, 43, 29), (64, 64, 64), (70, 33, 100), (5, 130, 3), (130, 5, 70)]


@pytest.fixture
def fresh_plans():
    """No plan from another test: each product here is seen for the first time."""
    rm.forget_choices()
    yield
    rm.forget_choices()


def exact(a, b, c) -> bool:
    return torch.equal(c.double(), a.double() @ b.double())


@pytest.mark.parametrize("m, n, k", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_reference_is_exact_on_whole_numbers(m, n, k, dtype, device):
    a, b = integers((m, k), dtype, device, 1), integers((k, n), dtype, device, 2)
    c = rm.matmul(a, b)
    assert c.dtype == dtype and c.shape == (m, n) and c.device == a.device
    assert c.is_contiguous() and exact(a, b, c)


needs_descriptors = pytest.mark.skipif(
    rm._descriptor_class() is None or triton_version() < (3, 4) or
    rm._interpreted() and triton_version() < (3, 6),
    reason="this Triton has no host-side tensor descriptors the reference uses "
    "(triton.tools.tensor_descriptor, 3.4 on), or its interpreter checks their strides in "
    "elements (3.5; 3.6 checks bytes, as the GPU does)")
ROWS = [pytest.param(row, id=row.label, marks=[needs_descriptors] if row.tma else [])
        for row in rm.CONFIGS + rm.SKINNY_CONFIGS]


@pytest.mark.parametrize("row", ROWS)
def test_every_row_of_the_tuning_tables_is_right(row, device, monkeypatch):
    # edges in every direction, several tiles of the smaller rows, K steps of both kinds, and
    # (for the rows that split K) shares of K that end inside a step and on one; N a multiple
    # of 8 for the rows with tensor descriptors, whose rows must start on 16 bytes; rows of A
    # 2 bytes off 16 for the rows that copy the operands in their own launch, which run only
    # where there is something to copy
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)
    for (m, n, k) in [(70, 90, 64 + 40), (130, 20, 128), (9, 33, 3 * 256 + 8)]:
        n = n + (-n % 8 if row.tma else 0)
        a = integers((m, k + row.copy_inside), torch.float16, device, 3)[:, :k]
        b = integers((k, n), torch.float16, device, 4)
        assert exact(a, b, rm.matmul(a, b, config=row)), (m, n, k)


def test_a_row_launched_as_clusters_asks_triton_for_them_and_stays_right(device, monkeypatch):
    # lab/probes/matmul_cluster_probe.py times such rows; no table offers one
    row = rm.TileConfig(64, 64, 32, 8, 4, 2, cluster=2)
    assert row.label.endswith(", clusters of 2")
    assert not any(r.cluster > 1 for r in rm.CONFIGS + rm.SKINNY_CONFIGS)
    a = integers((70, 104), torch.float16, device, 3)
    b = integers((104, 90), torch.float16, device, 4)
    if rm._interpreted():  # on a GPU the cluster is the compiler's, and the probe checks each
        assert exact(a, b, rm.matmul(a, b, config=row))  # (it found clusters of 4 wrong)
    monkeypatch.setattr(rm, "_interpreted", lambda: False)  # the options a compiled launch gets
    assert rm._Plan(a, b, row).matmul.options["num_ctas"] == 2
    assert "num_ctas" not in rm._Plan(a, b, rm.TileConfig(64, 64, 32, 8, 4, 2)).matmul.options


# A's and B's rows 2 bytes past 16 (copied), or on 16 bytes and B's columns too (not copied).
COPIED = [((1, 0), "A copied"), ((0, 1), "B copied"), ((1, 1), "both copied")]


@pytest.mark.parametrize("extra, what", COPIED, ids=[what for _, what in COPIED])
@pytest.mark.parametrize("m, n, k", [(70, 90, 104), (33, 45, 31), (1, 17, 200), (64, 64, 64)])
def test_copies_made_in_the_products_own_launch_are_one_launch_and_exact(m, n, k, extra, what,
                                                                         device, monkeypatch):
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)
    row = rm.TileConfig(32, 32, 32, 2, 4, 1, persistent=True, copy_inside=True)
    if not extra[1]:
        n += -n % 8  # B not copied: its columns too come in runs of 16 bytes
    width_a, width_b = k + -k % 8 + extra[0], n + -n % 8 + extra[1]
    plan = None
    for seed in range(3):  # the kept copies hold the last call's operands: each is read anew
        a = integers((m, width_a), torch.float16, device, seed)[:, :k]
        b = integers((k, width_b), torch.float16, device, seed + 10)[:, :n]
        plan = plan or rm._Plan(a, b, row)
        assert (plan.copy_a, plan.copy_b) == (bool(extra[0]), bool(extra[1])), what
        assert plan.pad is None and plan.matmul.kernel is rm._matmul_copied  # one launch
        assert exact(a, b, plan(a, b)), (seed, what)
    (barrier,) = plan.barriers.values()
    assert barrier[0].item() == 0 and barrier[1].item() == 3  # ready again, three launches on
    if rm._interpreted():  # one after another: one program, or the first waits for ever
        assert plan.matmul.grid[0] == 1


def test_copies_in_the_same_launch_are_refused_where_they_cannot_run(device, monkeypatch):
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)
    a, b = integers((40, 64), torch.float16, device, 1), integers((64, 40), torch.float16,
                                                                  device, 2)
    row = rm.TileConfig(32, 32, 32, 2, 4, 1, persistent=True, copy_inside=True)
    with pytest.raises(ValueError, match=r"neither needs a copy here \(a has strides \(64, 1\)"):
        rm.matmul(a, b, config=row)
    off = integers((40, 65), torch.float16, device, 1)[:, :64]
    # (where Triton has no descriptors the reference uses, the second is refused for that)
    for wrong in (rm.TileConfig(32, 32, 32, 2, 4, 1, copy_inside=True),
                  *([rm.TileConfig(32, 32, 32, 2, 4, 1, tma=True, persistent=True,
                                   copy_inside=True)] if triton_version() >= (3, 4) else [])):
        with pytest.raises(ValueError, match="need a persistent row with pointers"):
            rm._Plan(off, b, wrong)


@pytest.mark.gpu
def test_the_choice_offers_copies_in_the_same_launch_only_where_something_is_copied(
        monkeypatch):
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)
    aligned = torch.ones(64, 64, dtype=torch.float16, device="cuda")
    off = torch.ones(64, 65, dtype=torch.float16, device="cuda")[:, :64]
    assert not any(row.copy_inside for row in rm._candidates(aligned, aligned))
    assert any(row.copy_inside for row in rm._candidates(off, aligned))


@pytest.mark.gpu
def test_every_program_waits_for_every_copy_before_it_reads_one():
    # many programs, each reading copies that others made: a program that read before every
    # copy was made would find the previous call's operands, which differ from this call's
    assert calls_read_before_every_copy_was_made() == []


def calls_read_before_every_copy_was_made(calls: int = 12) -> list:
    """Which of ``calls`` products of 330 x 330 x 330, made one after another with other
    operands each time and both operands copied in the product's launch, are not exact. A
    plain function, so that a GPU run can call it on a kernel whose wait was taken out."""
    row = rm.TileConfig(32, 32, 32, 4, 4, 2, persistent=True, copy_inside=True)
    saved, rm.PAD_MIN_MACS = rm.PAD_MIN_MACS, 0
    try:
        pairs = [(integers((330, 331), torch.float16, "cuda", 2 * s)[:, :330],
                  integers((330, 331), torch.float16, "cuda", 2 * s + 1)[:, :330])
                 for s in range(calls)]
        plan = rm._Plan(*pairs[0], row)
        assert plan.copy_a and plan.copy_b and plan.matmul.grid[0] > 64, plan.matmul.grid
        return [i for i, (a, b) in enumerate(pairs) if not exact(a, b, plan(a, b))]
    finally:
        rm.PAD_MIN_MACS = saved


TMA_ROWS = (rm.TileConfig(32, 32, 32, 4, 4, 1, tma=True),
            rm.TileConfig(16, 32, 32, 1, 4, 1, split_k=2, tma=True),
            rm.TileConfig(16, 32, 32, 1, 4, 1, split_k=3, tma=True),
            rm.TileConfig(32, 32, 32, 2, 4, 1, tma=True, persistent=True))


@needs_descriptors
@pytest.mark.parametrize("row", TMA_ROWS, ids=lambda row: row.label)
@pytest.mark.parametrize("m, n, k", [(1, 8, 8), (17, 24, 72), (37, 48, 40), (70, 40, 104),
                                     (8, 56, 72), (16, 8, 200)])
def test_tensor_descriptors_read_zeros_past_every_edge(row, m, n, k, device):
    # no mask, no wrap: the descriptor bounds each copy by the operand's shape
    a = integers((m, k), torch.float16, device, m + k)
    b = integers((k, n), torch.float16, device, n + k)
    assert exact(a, b, rm.matmul(a, b, config=row))


@pytest.mark.parametrize("m, n, k", [(70, 90, 104), (33, 45, 31), (64, 64, 64), (1, 17, 200)])
def test_a_persistent_program_walks_every_tile_once(m, n, k, device):
    # more tiles than programs (four in the interpreter), K whole steps and not (masked on
    # every step), rows on 16 bytes and not
    row = rm.TileConfig(32, 32, 32, 2, 4, 1, persistent=True)
    a, b = integers((m, k), torch.float16, device, m), integers((k, n), torch.float16, device, n)
    plan = rm._Plan(a, b, row)
    assert plan.matmul.grid[0] == min(plan.tiles, rm._programs(a.device))
    assert exact(a, b, plan(a, b))


@pytest.mark.parametrize("row", [rm.TileConfig(16, 32, 32, 1, 4, 1, split_k=3),
                                 pytest.param(rm.TileConfig(16, 32, 32, 1, 4, 1, split_k=3,
                                                            tma=True), marks=needs_descriptors)],
                         ids=lambda row: row.label)
def test_a_split_tile_s_last_program_sets_its_counter_back_for_the_next_call(row, device):
    # Every call must find each tile's arrival counter at zero: otherwise no program of the
    # tile knows it is the last, and C is never stored. New values of B each call, so that a
    # C left as an earlier call's (the same memory, reused) is caught too.
    a = integers((20, 200), torch.float16, device, 5)
    plan = None
    for seed in range(3):
        b = integers((200, 40), torch.float16, device, 10 + seed)
        plan = plan or rm._Plan(a, b, row)
        assert exact(a, b, plan(a, b)), seed
    (partial, arrivals), = plan.scratch.values()
    assert plan.splits == 3 and arrivals.numel() == plan.tiles
    assert int(arrivals.abs().sum()) == 0


@pytest.mark.gpu
def test_each_stream_has_its_own_split_workspace(device):
    # two streams may run one product at once: each has its own counters and shares
    row = rm.TileConfig(16, 32, 32, 1, 4, 1, split_k=3)
    a, b = integers((20, 200), torch.float16, device, 5), integers((200, 40), torch.float16,
                                                                   device, 6)
    plan = rm._Plan(a, b, row)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        on_side = plan(a, b)
    on_default = plan(a, b)
    torch.cuda.synchronize()
    assert exact(a, b, on_side) and exact(a, b, on_default)
    assert len(plan.scratch) == 2
    # a stream first seen while a graph is captured: the pair made then is the graph's (its
    # zeros are written at each replay) and is not kept for the stream's later calls
    capture, graph = torch.cuda.Stream(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=capture):
        captured = plan(a, b)
    assert len(plan.scratch) == 2
    captured.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert exact(a, b, captured)
    with torch.cuda.stream(capture):
        after = plan(a, b)
    torch.cuda.synchronize()
    assert exact(a, b, after) and len(plan.scratch) == 3


@needs_descriptors
def test_tensor_descriptors_are_refused_where_rows_are_not_on_16_bytes(device):
    a = integers((10, 33), torch.float16, device, 1)  # rows of 66 bytes
    b = integers((33, 8), torch.float16, device, 2)
    with pytest.raises(ValueError, match=r"a has strides \(33, 1\) and b \(8, 1\), of 2-byte"):
        rm.matmul(a, b, config=TMA_ROWS[0])
    assert not rm._descriptors_fit(a, b)
    assert rm._descriptors_fit(integers((10, 32), torch.float16, device, 1), b[:32])


# Off-tile shapes for the interpreter's tiles (K steps of 32): K one past, one short of and a
# few whole steps, M from 1 to 17 (the skinny table up to 16, split K in 2), N odd.
OFF_TILE = [(m, n, k) for m in (1, 2, 7, 8, 15, 16, 17) for (n, k) in ((31, 33), (1, 96))] + \
    [(33, 45, 31), (40, 97, 65), (64, 33, 64), (17, 3, 1)]


@pytest.mark.parametrize("m, n, k", OFF_TILE)
def test_the_masked_k_steps_and_the_edges_are_exact(m, n, k, device, fresh_plans):
    a, b = integers((m, k), torch.float16, device, m), integers((k, n), torch.float16, device, n)
    assert exact(a, b, rm.matmul(a, b))
    plan = rm._PLANS[rm._key(a, b)]
    if rm._interpreted():  # one fixed row each: the skinny one splits K
        assert plan.config == rm._candidates(a, b)[0]
        assert plan.config.split_k > 1 if m <= rm.SKINNY_M else plan.config.split_k == 1
    else:  # the fastest of the table's rows, timed
        assert plan.config in rm._candidates(a, b)


@pytest.mark.parametrize("k, splits", [(20, 1), (64, 2), (70, 2), (200, 2)])
def test_a_split_k_adds_every_share_once(k, splits, device):
    # INTERPRETER_SKINNY splits K in 2 whole steps of 32 each where K allows: 20 fits one step
    # (no second pass), 70 ends inside the second share's last step
    row = rm.INTERPRETER_SKINNY
    a, b = integers((8, k), torch.float16, device, 11), integers((k, 40), torch.float16, device, 12)
    plan = rm._Plan(a, b, row)
    assert plan.splits == splits
    assert exact(a, b, plan(a, b))


def test_split_k_sums_in_float32_and_rounds_once(device):
    # Two shares of 32: the first sums to 1000.25, halfway between two float16 values, the
    # second to 0.25. Their float32 total, 1000.5, is a float16 value; shares rounded to
    # float16 first would give 1000.0 (1000.25 rounds to even), then 1000.0 again.
    b = torch.zeros(64, 1)
    b[:31], b[31], b[32] = 32.0, 8.25, 0.25
    a = torch.ones(1, 64, dtype=torch.float16, device=device)
    b = b.half().to(device)
    plan = rm._Plan(a, b, rm.INTERPRETER_SKINNY)
    assert plan.splits == 2
    assert float(plan(a, b)) == 1000.5


def test_the_alignment_promises_are_made_only_where_they_hold(device):
    row = rm.INTERPRETER_CONFIG
    cases = {  # a, b -> whether the kernel is told every row starts on 16 bytes
        "rows of 1000 half floats": ((40, 1000), (1000, 1000), True),
        "rows of 1001": ((40, 1001), (1001, 1001), False),
        "N of 1001 on rows of 1000": ((40, 1000), (1000, 1001), False),
    }
    for name, (a_shape, b_shape, promised) in cases.items():
        a = torch.zeros(a_shape, dtype=torch.float16, device=device)
        b = torch.zeros(b_shape, dtype=torch.float16, device=device)
        assert rm._Plan(a, b, row, copies=False).aligned is promised, name
    a = torch.zeros((40, 1000), dtype=torch.float16, device=device)
    b = torch.zeros((1000, 1000), dtype=torch.float16, device=device)
    assert not rm._Plan(a.T.contiguous().T, b, row, copies=False).aligned  # A column-major
    assert not rm._Plan(a[:, 1:], b[1:], row, copies=False).aligned  # starts 2 bytes in
    assert not rm._Plan(a, b, row, aligned=False).aligned


def test_unaligned_operands_of_a_large_product_are_copied_into_aligned_rows(device,
                                                                             monkeypatch):
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)  # every product counts as large
    a = integers((40, 61), torch.float16, device, 6)[:, :51]  # rows of 61: 122 bytes apart
    b = integers((33, 51), torch.float16, device, 7).T  # column-major
    plan = rm._Plan(a, b, rm.INTERPRETER_CONFIG)
    assert plan.copy_a and plan.copy_b and plan.aligned
    assert exact(a, b, plan(a, b))
    copy_a, copy_b = plan._buffers()  # kept for the next call, both copied in one launch
    # the whole buffers, rows PAD_TO apart, the operands in their first columns
    assert copy_a.shape == (a.shape[0], rm.PAD_TO) and copy_a.stride() == (rm.PAD_TO, 1)
    assert torch.equal(copy_a[:, :a.shape[1]], a) and torch.equal(copy_b[:, :b.shape[1]], b)
    assert plan.pad.grid[0] == 3 + 4  # tiles of 16 rows: A has 40 rows, B 51 (one tile wide)
    wide = integers((40, 64), torch.float16, device, 6)[:, :51]  # rows 128 bytes apart
    plan = rm._Plan(wide, b.contiguous(), rm.INTERPRETER_CONFIG)
    assert not plan.copy_a and plan.copy_b  # B row-major, but 33 columns are not runs of 8
    assert exact(wide, b, plan(wide, b.contiguous()))
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 2**28)
    plan = rm._Plan(a, b, rm.INTERPRETER_CONFIG)
    assert not (plan.copy_a or plan.copy_b or plan.aligned)  # too small to repay a copy
    assert exact(a, b, plan(a, b))


@pytest.mark.parametrize("row", [rm.INTERPRETER_CONFIG,
                                 pytest.param(rm.TileConfig(32, 32, 32, 4, 4, 1, tma=True),
                                              marks=needs_descriptors)],
                         ids=lambda row: row.label)
@pytest.mark.parametrize("copied", ["a", "b", "both"])
def test_the_copies_buffers_are_kept_and_refilled_on_every_call(row, copied, device,
                                                                monkeypatch):
    # new values each call in the same plan: a buffer left with an earlier call's copy (or
    # never refilled) gives the wrong C; wide rows (300 columns: two tiles of the copy) with
    # a cut edge, and K not whole steps
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)
    m, n, k = 37, 300 if copied != "a" else 296, 300 if copied != "b" else 296
    plan = None
    for seed in range(3):
        a = integers((m, k + 1), torch.float16, device, seed)[:, :k]  # rows 2 bytes off
        b = integers((k, n), torch.float16, device, seed + 9)
        a = a if copied != "b" else a.contiguous()
        plan = plan or rm._Plan(a, b, row)
        assert (plan.copy_a, plan.copy_b) == (copied != "b", copied != "a")
        assert exact(a, b, plan(a, b)), seed
    (views,) = plan.padded.values()  # one pair, for the one stream
    kept = [view.data_ptr() for view in views if view is not None]
    plan(a, b)
    assert [view.data_ptr() for view in plan._buffers() if view is not None] == kept


def test_a_k_mask_by_runs_reads_past_k_only_where_the_copy_wrote_zeros(device, monkeypatch):
    # K = 45: the run of 8 columns that holds K's end reaches 3 columns past it. A's rows 48
    # apart (aligned, too small a product to copy) with NaN in those columns: the mask must
    # end at K itself, or 0 * NaN spoils every element of C
    m, n, k = 40, 32, 45
    wide = torch.full((m, 48), float("nan"), dtype=torch.float16, device=device)
    wide[:, :k] = integers((m, k), torch.float16, device, 4)
    a, b = wide[:, :k], integers((k, n), torch.float16, device, 5)
    plan = rm._Plan(a, b, rm.INTERPRETER_CONFIG)
    assert plan.aligned and not plan.copy_a
    assert exact(a, b, plan(a, b))
    # A copied: the copy's buffer, NaN everywhere before the call, holds zeros past K once the
    # copy ran, and the mask by runs reads them
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)
    a = integers((m, k + 1), torch.float16, device, 6)[:, :k]  # rows 2 bytes off: copied
    plan = rm._Plan(a, b, rm.INTERPRETER_CONFIG)
    assert plan.copy_a
    view_a, _ = plan._buffers()
    torch.as_strided(view_a, (m, rm.PAD_TO), (rm.PAD_TO, 1)).fill_(float("nan"))
    assert exact(a, b, plan(a, b))


def test_copies_too_large_to_keep_are_made_for_each_call(device, monkeypatch):
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)
    monkeypatch.setattr(rm, "KEEP_PADDED_BYTES", 1000)
    a = integers((40, 61), torch.float16, device, 2)[:, :51]
    b = integers((51, 64), torch.float16, device, 3)
    plan = rm._Plan(a, b, rm.INTERPRETER_CONFIG)
    assert plan.copy_a and not plan.copy_b and plan.pad_bytes == 40 * 64 * 2
    assert exact(a, b, plan(a, b)) and exact(a, b, plan(a, b))
    assert plan.padded == {}


def test_the_first_call_chooses_and_the_next_ones_reuse_the_choice(device, fresh_plans,
                                                                   monkeypatch):
    rows = (rm.TileConfig(32, 32, 32, 4, 4, 1), rm.TileConfig(16, 64, 32, 2, 4, 1))
    timed = []

    def fake_time_ms(fn):  # runs the candidate once, and says the second row is faster
        fn()
        timed.append(fn)
        return ((2.0, 2.0), (1.0, 1.0))[(len(timed) - 1) % 2]

    monkeypatch.setattr(rm, "_candidates", lambda a, b: rows)
    monkeypatch.setattr(rm, "_times_ms", lambda plan, a, b: fake_time_ms(lambda: plan(a, b)))
    a = integers((40, 50), torch.float16, device, 8)
    b = integers((50, 30), torch.float16, device, 9)
    assert rm.chosen_config(a, b) is None
    assert exact(a, b, rm.matmul(a, b))
    assert len(timed) == 2 and rm.chosen_config(a, b) == rows[1]
    for _ in range(3):  # the same product, new tensors of it: no timing, the same plan
        a2, b2 = a.clone(), b.clone()
        assert exact(a2, b2, rm.matmul(a2, b2))
    assert len(timed) == 2
    # another layout of the same shapes is another product: chosen for, and right
    bt = b.T.contiguous().T
    assert exact(a, bt, rm.matmul(a, bt)) and len(timed) == 4
    assert rm._key(a, bt) != rm._key(a, b) and len(rm._PLANS) == 2
    # a view that starts 2 bytes in is another product too: the kernel assumed alignment
    a_off = integers((40, 51), torch.float16, device, 10)[:, 1:]
    assert exact(a_off, b, rm.matmul(a_off, b)) and len(timed) == 6
    # config= runs that row, every time through the whole path, and remembers nothing
    assert exact(a, b, rm.matmul(a, b, config=rows[0])) and len(timed) == 6
    rm.forget_choices()
    assert rm.chosen_config(a, b) is None
    rm.matmul(a, b)
    assert len(timed) == 8


def test_a_row_that_fails_is_skipped_and_said(device, fresh_plans, monkeypatch):
    rows = (rm.TileConfig(32, 32, 32, 4, 4, 1), rm.TileConfig(16, 64, 32, 2, 4, 1))

    def fails_on_the_first_row(fn):
        fn()
        if len(calls) == 0:
            calls.append("first")
            raise RuntimeError("out of resources: shared memory, Required: 300000")
        calls.append("second")
        return 1.0, 1.0

    calls = []
    monkeypatch.setattr(rm, "_candidates", lambda a, b: rows)
    monkeypatch.setattr(rm, "_times_ms",
                        lambda plan, a, b: fails_on_the_first_row(lambda: plan(a, b)))
    a = integers((40, 50), torch.float16, device, 8)
    b = integers((50, 30), torch.float16, device, 9)
    assert exact(a, b, rm.matmul(a, b))
    plan = rm._PLANS[rm._key(a, b)]
    assert plan.config == rows[1]
    assert plan.skipped == {rows[0].label: "RuntimeError: out of resources: shared memory, "
                                           "Required: 300000"}

    def always_fails(fn):
        raise RuntimeError("no kernel")

    monkeypatch.setattr(rm, "_times_ms", lambda plan, a, b: always_fails(lambda: plan(a, b)))
    with pytest.raises(RuntimeError, match="no kernel"):
        rm.matmul(a[:, :40], b[:40])


def timed_as(monkeypatch, rows, gpu: dict, host: dict):
    """The choice times ``rows`` only, each as ``gpu`` and ``host`` say (milliseconds by row,
    read when timed: a test may change them between choices); the plans still run."""
    ran = []  # the row of every plan called, last the one being timed
    real_call = rm._Plan.__call__
    monkeypatch.setattr(rm._Plan, "__call__",
                        lambda plan, a, b: (ran.append(plan.config), real_call(plan, a, b))[1])
    monkeypatch.setattr(rm, "_time_ms", lambda fn: (fn(), gpu[ran[-1]])[1])
    monkeypatch.setattr(rm, "_host_ms", lambda fn, calls: (fn(), host[ran[-1]])[1])
    monkeypatch.setattr(rm, "_candidates", lambda a, b: rows)


def test_the_fastest_kernel_wins_and_a_tie_goes_to_the_cheaper_launch(device, fresh_plans,
                                                                        monkeypatch):
    # the first row's kernel is faster on the GPU by more than TIE: it wins, though a call of
    # it costs the host more
    rows = (rm.TileConfig(32, 32, 32, 4, 4, 1), rm.TileConfig(16, 64, 32, 2, 4, 1))
    gpu = {rows[0]: 0.004, rows[1]: 0.006}
    host = {rows[0]: 0.009, rows[1]: 0.007}
    timed_as(monkeypatch, rows, gpu, host)
    a = integers((40, 50), torch.float16, device, 8)
    b = integers((50, 30), torch.float16, device, 9)
    assert exact(a, b, rm.matmul(a, b)) and rm.chosen_config(a, b) == rows[0]
    # within TIE of each other on the GPU: the cheaper launch wins, though its kernel is the
    # slower, whether the GPU's time is the longer (a large product) or the host's
    for kernels in ((0.100, 0.102), (0.0050, 0.0051)):
        gpu.update(zip(rows, kernels))
        host.update({rows[0]: 0.030, rows[1]: 0.010})
        rm.forget_choices()
        assert exact(a, b, rm.matmul(a, b)) and rm.chosen_config(a, b) == rows[1], kernels
    # the second row the faster by more than TIE, and the cheaper launch too
    gpu.update({rows[0]: 0.003, rows[1]: 0.002})
    rm.forget_choices()
    assert exact(a, b, rm.matmul(a, b)) and rm.chosen_config(a, b) == rows[1]
    # within TIE on the GPU, but the calls cost the host about the same (less apart than
    # HOST_GAIN): a difference of noise buys no GPU time, and the faster kernel wins
    gpu.update({rows[0]: 0.0100, rows[1]: 0.0102})
    host.update({rows[0]: 0.0150, rows[1]: 0.0150 * (rm.HOST_GAIN + 0.05)})
    rm.forget_choices()
    assert exact(a, b, rm.matmul(a, b)) and rm.chosen_config(a, b) == rows[0]


def test_a_drift_of_the_hosts_speed_does_not_pick_the_row(device, fresh_plans, monkeypatch):
    # Two rows tied on the GPU whose calls cost the host the same, but the host ran fast while
    # the second row's calls were first timed (the first of its figures below): the tied rows
    # are timed again in turns, the drift lands in one round of HOST_ROUNDS, and the faster
    # kernel wins. A host cost that is really lower, in every round, still wins the tie.
    rows = (rm.TileConfig(32, 32, 32, 4, 4, 1), rm.TileConfig(16, 64, 32, 2, 4, 1))
    gpu = {rows[0]: 0.0100, rows[1]: 0.0102}
    timed_as(monkeypatch, rows, gpu, {})
    ran = []
    monkeypatch.setattr(rm._Plan, "__call__", lambda plan, a, b, real=rm._Plan.__call__:
                        (ran.append(plan.config), real(plan, a, b))[1])

    def host_ms(fn, calls):  # each row's next figure; the last one over and over
        fn()
        figures = host[ran[-1]]
        return figures.pop(0) if len(figures) > 1 else figures[0]

    monkeypatch.setattr(rm, "_host_ms", host_ms)
    a = integers((40, 50), torch.float16, device, 8)
    b = integers((50, 30), torch.float16, device, 9)
    host = {rows[0]: [0.015], rows[1]: [0.005, 0.005, 0.015]}  # fast in the first pass, once
    assert exact(a, b, rm.matmul(a, b)) and rm.chosen_config(a, b) == rows[0]
    host = {rows[0]: [0.015], rows[1]: [0.005]}  # cheaper in every round
    rm.forget_choices()
    assert exact(a, b, rm.matmul(a, b)) and rm.chosen_config(a, b) == rows[1]


def test_a_tie_goes_to_the_row_that_makes_fewer_launches(device, fresh_plans, monkeypatch):
    # rows 2 bytes off 16, copied: by a launch of their own (the first two rows) or in the
    # product's launch (the third); within TIE on the GPU, one launch wins, though its kernel
    # is the slowest and the host's times say otherwise (noise may); past TIE it does not
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0)
    rows = (rm.TileConfig(32, 32, 32, 4, 4, 1), rm.TileConfig(32, 32, 32, 4, 4, 1,
                                                              persistent=True),
            rm.TileConfig(32, 32, 32, 4, 4, 1, persistent=True, copy_inside=True))
    gpu = {rows[0]: 0.100, rows[1]: 0.101, rows[2]: 0.100 * (rm.TIE - 0.01)}
    host = {rows[0]: 0.020, rows[1]: 0.010, rows[2]: 0.030}
    timed_as(monkeypatch, rows, gpu, host)
    a = integers((40, 51), torch.float16, device, 8)[:, :50]
    b = integers((50, 31), torch.float16, device, 9)[:, :30]
    assert exact(a, b, rm.matmul(a, b)) and rm.chosen_config(a, b) == rows[2]
    assert rm._PLANS[rm._key(a, b)].launches == 1
    gpu[rows[2]] = 0.100 * (rm.TIE + 0.01)
    rm.forget_choices()
    assert exact(a, b, rm.matmul(a, b)) and rm.chosen_config(a, b) == rows[1]  # the cheaper
    assert rm._PLANS[rm._key(a, b)].launches == 2


class FakeCompiled:
    """What Triton's launch returns: a compiled kernel whose [grid] is its own launcher."""

    function = object()

    def __init__(self, calls, refuse=False):
        self.calls, self.refuse = calls, refuse

    def __getitem__(self, grid):
        if self.refuse:
            raise TypeError("this Triton launches compiled kernels some other way")
        return lambda *args: self.calls.append(("direct", grid, args))


class FakeKernel:
    """A JIT function: kernel[grid](*args, **options) launches and returns the compiled one."""

    def __init__(self, compiled):
        self.compiled = compiled

    def __getitem__(self, grid):
        def launch(*args, **options):
            self.compiled.calls.append(("triton", grid, args, options))
            return self.compiled
        return launch


@pytest.mark.parametrize("case", exercise.EXERCISE.part("plan").cases, ids=lambda c: c.name)
def test_the_plan_the_learner_writes_is_the_one_the_reference_makes(case):
    """matmul_plan's answer, the check's reference, agrees with what reference_matmul's _Plan
    works out for tensors of those sizes and strides (the rows, the copies, the programs)."""
    m, n, k, a_strides, b_strides, element_bytes, block = case.make_args()
    want = exercise.plan_reference(m, n, k, a_strides, b_strides, element_bytes, block)
    dtype = {2: torch.float16, 4: torch.float32}[element_bytes]

    def tensor(shape, strides):  # a view of a buffer just long enough for these strides
        span = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides))
        return torch.empty(span, dtype=dtype).as_strided(shape, strides)

    a, b = tensor((m, k), a_strides), tensor((k, n), b_strides)
    assert page.COPY_MIN_MACS == rm.PAD_MIN_MACS
    assert (rm._row_major_aligned(a), rm._row_major_aligned(b)) == \
        (want["a_aligned"], want["b_aligned"])
    assert rm._copies(a, b) == (want["copy_a"], want["copy_b"])
    plan = rm._Plan(a, b, rm.TileConfig(*block, 8, 4, 2))
    assert plan.tiles == want["tiles"]
    assert (plan.copy_a, plan.copy_b) == (want["copy_a"], want["copy_b"])


def test_a_launch_goes_through_triton_once_then_straight_to_the_compiled_kernel():
    calls = []
    launch = rm._Launch(FakeKernel(FakeCompiled(calls)), (4, 2, 1), (7, 8, True), {"num_warps": 4},
                        torch.device("cpu"))
    launch("c", "a", "b")
    launch("c2", "a2", "b2")
    launch("c3", "a3", "b3")
    assert calls == [("triton", (4, 2, 1), ("c", "a", "b", 7, 8, True), {"num_warps": 4}),
                     ("direct", (4, 2, 1), ("c2", "a2", "b2", 7, 8, True)),
                     ("direct", (4, 2, 1), ("c3", "a3", "b3", 7, 8, True))]
    # where the compiled kernel has no launcher of its own, every call goes through Triton's
    calls = []
    launch = rm._Launch(FakeKernel(FakeCompiled(calls, refuse=True)), (1, 1, 1), (), {},
                        torch.device("cpu"))
    launch("c", "a", "b")
    launch("c", "a", "b")
    assert launch.direct is None and [call[0] for call in calls] == ["triton", "triton"]


class FakeLauncher(FakeCompiled):
    """A compiled kernel laid out as Triton 3.4 to 3.9 lay it out: ``run`` (the driver's
    launcher), ``function`` and ``packed_metadata``, which its runner passes to ``run``."""

    packed_metadata = ("warps", "ctas", "shared")

    def run(self, *args):
        self.calls.append(("run", args))


class FakeHooks:
    """Triton's ``knobs.runtime``: two chains of launch hooks, empty until a profiler adds one."""

    class Chain:
        def __init__(self):
            self.calls = []

    def __init__(self):
        self.launch_enter_hook, self.launch_exit_hook = self.Chain(), self.Chain()


def test_a_remembered_launch_passes_pointers_and_the_stream_and_skips_hooks_no_one_listens_on(
        monkeypatch):
    calls, hooks = [], FakeHooks()
    monkeypatch.setattr(rm, "_launch_hooks", lambda: hooks)
    monkeypatch.setattr(rm, "_current_stream", lambda device: 1234)
    compiled = FakeLauncher(calls)
    launch = rm._Launch(FakeKernel(compiled), (4, 2, 1), (7, 8, True), {}, torch.device("cuda", 0))
    c, a = torch.zeros(3), torch.ones(2)
    launch(c, a)
    launch(c, a)
    assert calls[1] == ("run", (4, 2, 1, 1234, FakeLauncher.function, compiled.packed_metadata,
                                None, None, None, c.data_ptr(), a.data_ptr(), 7, 8, True))
    # once a profiler listens, Triton's own runner launches, and calls its hooks
    hooks.launch_enter_hook.calls.append(print)
    launch(c, a)
    assert calls[2] == ("direct", (4, 2, 1), (c, a, 7, 8, True))
    # a Triton without launch hooks where this module looks, or on the CPU: the runner always
    monkeypatch.setattr(rm, "_launch_hooks", lambda: None)
    for device in (torch.device("cuda", 0), torch.device("cpu")):
        calls.clear()
        launch = rm._Launch(FakeKernel(FakeLauncher(calls)), (1, 1, 1), (5,), {}, device)
        launch(c)
        launch(c)
        assert calls[1] == ("direct", (1, 1, 1), (c, 5))


class FakeDescriptorRun:
    """A compiled kernel's ``run`` whose launch wrapper is laid out as Triton 3.6's (``layout``
    "3.6": the driver's launch, the descriptors' positions and metadata in its closure) or
    3.9's ("3.9": the launch, the encoder, the descriptor paths, the signature, the metadata).
    Called as Triton's runner calls it, it records the call; its wrapper is never called."""

    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid, launch_pdl = "coop", "pdl"
    arg_annotations, kernel_signature = "annotations", "signature"

    def __init__(self, calls, layout):
        self.calls = calls
        launcher = lambda *args: calls.append(("driver", args))  # noqa: E731
        tensordesc_meta = [{"meta": 0}, {"meta": 1}]
        if layout == "3.6":
            tensordesc_indices = {1, 2}

            def inner(*args):
                return launcher, tensordesc_indices, tensordesc_meta
        else:
            relevant_paths, signature = {1: {}, 2: {}}, ()

            def make_tensordesc_arg(desc, meta, _):
                calls.append(("encode", desc[1].data_ptr(), meta["meta"]))
                return [("map", desc[1].data_ptr()), 10, 20, 30, 1]

            def inner(*args):
                return (launcher, make_tensordesc_arg, relevant_paths, signature,
                        tensordesc_meta)
        self.launch = inner

    def __call__(self, *args):
        self.calls.append(("run", args))


@pytest.mark.skipif(triton_version() < (3, 4), reason="Triton 3.3's driver encodes no "
                    "tensor descriptor (make_tensordesc_arg came with 3.4)")
def test_descriptors_are_encoded_once_per_address_where_the_launcher_is_laid_out_as_verified(
        monkeypatch):
    from triton.backends.nvidia import driver as nvidia

    def encode_36(desc, meta):
        calls.append(("encode", desc[1].data_ptr(), meta["meta"]))
        return [("map", desc[1].data_ptr()), 10, 20, 30, 1]

    monkeypatch.setattr(nvidia, "make_tensordesc_arg", encode_36)
    monkeypatch.setattr(nvidia, "_BASE_ARGS_FORMAT_LEN", 13, raising=False)
    monkeypatch.setattr(rm, "_launch_hooks", FakeHooks)
    monkeypatch.setattr(rm, "_current_stream", lambda device: 77)
    describe = {1: lambda t: ("a-desc", t), 2: lambda t: ("b-desc", t)}
    c, b = torch.zeros(4), torch.ones(4)
    operands = [torch.full((4,), float(i)) for i in range(rm.KEEP_ENCODED + 1)]
    for version, layout in (("3.6.0", "3.6"), ("3.9.0", "3.9")):
        monkeypatch.setattr(rm.triton, "__version__", version)
        calls = []
        compiled = FakeLauncher(calls)
        compiled.run = FakeDescriptorRun(calls, layout)
        launch = rm._Launch(FakeKernel(compiled), (4, 2, 1), (7, True), {},
                            torch.device("cuda", 0), describe)
        a = operands[0]
        launch(c, a, b)  # Triton's own launch, given the descriptors
        assert calls.pop(0) == ("triton", (4, 2, 1), (c, ("a-desc", a), ("b-desc", b), 7, True),
                                {})
        assert launch.encodes_once
        launch(c, a, b)
        launch(c, a, b)
        encoded_a, encoded_b = [("map", a.data_ptr()), 10, 20, 30, 1], [
            ("map", b.data_ptr()), 10, 20, 30, 1]
        tail = (c.data_ptr(), *encoded_a, *encoded_b, 7, True)
        want = (4, 2, 1, 77, FakeLauncher.function, "coop", "pdl")
        if layout == "3.6":
            want += (None, None, compiled.packed_metadata, None, None, None, *tail)
        else:
            want += (compiled.packed_metadata, None, None, None, None, None, "annotations",
                     "signature", tail)
        # each operand encoded once, on the first direct launch, then kept
        assert calls == [("encode", a.data_ptr(), 0), ("encode", b.data_ptr(), 1),
                         ("driver", want), ("driver", want)]
        # a new address is encoded; past KEEP_ENCODED addresses the oldest is dropped
        for other in operands[1:]:
            launch(c, other, b)
        encoded = [call[1] for call in calls if call[0] == "encode"]
        assert encoded == [a.data_ptr(), b.data_ptr(), *(t.data_ptr() for t in operands[1:])]
        calls.clear()
        launch(c, a, b)
        assert calls[0] == ("encode", a.data_ptr(), 0)
    # a Triton whose launcher was not run against: every call goes through Triton's wrapper,
    # given the descriptors
    monkeypatch.setattr(rm.triton, "__version__", "3.7.0")
    calls = []
    compiled = FakeLauncher(calls)
    compiled.run = FakeDescriptorRun(calls, "3.6")
    launch = rm._Launch(FakeKernel(compiled), (1, 1, 1), (), {}, torch.device("cuda", 0),
                        describe)
    launch(c, a, b)
    launch(c, a, b)
    assert not launch.encodes_once
    assert calls[1] == ("run", (1, 1, 1, 77, FakeLauncher.function, compiled.packed_metadata,
                                None, None, None, c.data_ptr(), ("a-desc", a), ("b-desc", b)))


def test_in_the_interpreter_every_launch_is_tritons_own(device, fresh_plans):
    a = integers((20, 30), torch.float16, device, 1)
    b = integers((30, 10), torch.float16, device, 2)
    rm.matmul(a, b)
    rm.matmul(a, b)
    assert rm._PLANS[rm._key(a, b)].direct is (device == "cuda")


def test_a_remembered_product_still_refuses_bad_arguments(device, fresh_plans):
    a = integers((20, 30), torch.float16, device, 1)
    b = integers((30, 10), torch.float16, device, 2)
    rm.matmul(a, b)
    with pytest.raises(TypeError, match="a is torch.float16 and b is torch.float32"):
        rm.matmul(a, b.float())
    with pytest.raises(ValueError, match="a's 30 columns must equal b's 31"):
        rm.matmul(a, torch.zeros(31, 10, dtype=torch.float16, device=device))
    with pytest.raises(TypeError, match="a must be a torch.Tensor, got list"):
        rm.matmul(a.tolist(), b)


def test_a_product_larger_than_32_bit_offsets_is_refused_before_allocating(device):
    a = torch.zeros(2**16, 1, dtype=torch.float16, device=device)
    b = torch.zeros(1, 2**15 + 1, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="C would have 2147549184 elements"):
        rm.matmul(a, b)


def test_reference_rounds_random_float16_once(device):
    g = torch.Generator().manual_seed(5)
    a = torch.randn(33, 50, generator=g).half().to(device)
    b = torch.randn(50, 40, generator=g).half().to(device)
    want = a.double() @ b.double()
    torch.testing.assert_close(rm.matmul(a, b).double(), want, atol=1e-3, rtol=2e-3)


def test_reference_reads_views_through_their_strides(device):
    a = integers((40, 60), torch.float32, device, 6)[:, :50]  # row stride 60
    b = integers((30, 50), torch.float32, device, 7).T  # strides (1, 50)
    assert exact(a, b, rm.matmul(a, b))
    a_t = integers((50, 40), torch.float32, device, 8).T  # strides (1, 40): columns apart too
    assert exact(a_t, b, rm.matmul(a_t, b))


def test_empty_products(device):
    a, b = torch.ones(4, 0, device=device), torch.ones(0, 3, device=device)
    assert torch.equal(rm.matmul(a, b), torch.zeros(4, 3, device=device))  # an empty sum is 0
    assert rm.matmul(torch.ones(0, 5, device=device), torch.ones(5, 3, device=device)).shape \
        == (0, 3)


@pytest.mark.parametrize("a_shape, b_shape, a_dtype, b_dtype, error, words", [
    ((4, 5), (6, 3), torch.float32, torch.float32, ValueError, "a's 5 columns must equal b's 6"),
    ((4, 5), (5, 3), torch.float32, torch.float16, TypeError, "a is torch.float32 and b is"),
    ((2, 4, 5), (5, 3), torch.float32, torch.float32, ValueError, "must be 2-D, got shape"),
    ((4, 5), (5, 3), torch.int32, torch.int32, TypeError, "convert with a.float()"),
])
def test_reference_refuses_bad_arguments_with_the_numbers(a_shape, b_shape, a_dtype, b_dtype,
                                                          error, words, device):
    a = torch.ones(a_shape, dtype=a_dtype, device=device)
    b = torch.ones(b_shape, dtype=b_dtype, device=device)
    with pytest.raises(error, match=words):
        rm.matmul(a, b)


def test_grouped_order_visits_every_tile_once():
    for tiles_m, tiles_n, group in [(4, 4, 2), (5, 3, 2), (7, 9, 8), (1, 6, 4)]:
        seen = {page._tile_of(pid, tiles_m, tiles_n, group)
                for pid in range(tiles_m * tiles_n)}
        assert seen == {(r, c) for r in range(tiles_m) for c in range(tiles_n)}


def test_the_tables_fit_an_h200s_shared_memory_in_16_bit():
    # the rows are sized for Hopper (227 KiB a block); float32 rows the first call prunes
    assert all(row.shared_bytes(2) <= 227 * 1024 for row in rm.CONFIGS + rm.SKINNY_CONFIGS)
    assert all(row.block_m >= 16 and row.block_k >= 16 for row in rm.SKINNY_CONFIGS)


# What the compiler makes of the kernel for an H200 (sm_90), compiled here without a GPU: the
# arguments specialized as Triton's launch specializes them (ints of 1 become constants,
# multiples of 16 and pointers are marked divisible by 16).
HOPPER_COMPILE = """
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import reference_matmul as rm

def order(ptx):
    # where the early launch's wait and signal fall, against the first read of an operand
    first = [ptx.find(op) for op in ("cp.async", "ld.global") if op in ptx]
    return {"wait": ptx.find("griddepcontrol.wait"),
            "signal": ptx.find("griddepcontrol.launch_dependents"),
            "first_read": min(first) if first else -1,
            "prefetch": ptx.find("prefetch.global.L2"),
            "prefetches": ptx.count("prefetch.global.L2")}

def compile_(m, n, k, row, aligned, k_runs=None, wide=None, early=False, prefetch=False):
    # wide: the rows' width of A's and B's aligned copies (the plan's copies), else k and n
    ints = dict(stride_cm=n, stride_cn=1, stride_am=wide or k, stride_ak=1,
                stride_bk=wide or n, stride_bn=1, M=m, N=n, K=k, b_cols=wide or n, k_split=k,
                a_span=(m - 1) * (wide or k) + k, b_span=(k - 1) * (wide or n) + n)
    constants = dict(BLOCK_M=row.block_m, BLOCK_N=row.block_n, BLOCK_K=row.block_k,
                     GROUP_M=row.group_m, SPLIT_K=1, EVEN_K=k % row.block_k == 0,
                     K_RUNS=k % 8 == 0 if k_runs is None else k_runs,
                     ALIGNED=aligned, VEC=8, C_ALIGNED=aligned and n % 8 == 0, EARLY=early,
                     PREFETCH=prefetch)
    signature, attrs = {}, {}
    for i, name in enumerate(rm._matmul.arg_names):
        if i < 5:  # C, A, B, and C again for the workspace and counters no program reads
            signature[name], attrs[(i,)] = "*bf16", [["tt.divisibility", 16]]
        elif name in constants or ints[name] == 1:
            signature[name] = "constexpr"
            constants.setdefault(name, ints.get(name))
        else:
            signature[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(rm._matmul, signature, constants, attrs),
                              target=GPUTarget("cuda", 90, 32),
                              options=dict(num_warps=row.num_warps, num_stages=row.num_stages))
    ptx = compiled.asm["ptx"]
    return {"copies16": len(re.findall(r"cp[.]async[.]cg[.]shared[.]global \\[[^]]*\\], "
                                       r"\\[[^]]*\\], 0x10", ptx)),
            "scalar_loads": len(re.findall(r"ld[.]global[.:\\w]*[.]b16 ", ptx)),
            "loads": len(re.findall(r"ld[.]global", ptx)),
            "stores16": len(re.findall(r"st[.]global[.:\\w]*[.]v4[.]b32 ", ptx)),
            "scalar_stores": len(re.findall(r"st[.]global[.:\\w]*[.]b16 ", ptx)),
            **order(ptx)}

def compile_tma(row, early=False, prefetch=False):
    signature = {"c_ptr": "*bf16", "a_tiles": f"tensordesc<bf16[{row.block_m}, {row.block_k}]>",
                 "b_tiles": f"tensordesc<bf16[{row.block_k}, {row.block_n}]>",
                 "partial_ptr": "*bf16", "arrivals_ptr": "*bf16", "a_ptr": "*bf16",
                 "b_ptr": "*bf16", "stride_cm": "i32", "stride_cn": "constexpr", "M": "i32",
                 "N": "i32", "K": "i32", "k_split": "i32", "a_span": "i32", "b_span": "i32"}
    constants = dict(stride_cn=1, BLOCK_M=row.block_m, BLOCK_N=row.block_n,
                     BLOCK_K=row.block_k, GROUP_M=row.group_m, SPLIT_K=1, VEC=8,
                     C_ALIGNED=True, EARLY=early, PREFETCH=prefetch)
    signature.update({name: "constexpr" for name in constants if name not in signature})
    compiled = triton.compile(ASTSource(rm._matmul_tma, signature, constants,
                                        {(0,): [["tt.divisibility", 16]]}),
                              target=GPUTarget("cuda", 90, 32),
                              options=dict(num_warps=row.num_warps, num_stages=row.num_stages))
    ptx = compiled.asm["ptx"]
    return {"tma_copies": len(re.findall(r"cp[.]async[.]bulk[.]tensor[.]2d", ptx)),
            "loads": len(re.findall(r"ld[.]global", ptx)), **order(ptx)}

row = rm.TileConfig(64, 64, 64, 8, 4, 3)
tma_row = rm.TileConfig(128, 128, 64, 8, 4, 4, tma=True)
tma = {"tma": compile_tma(tma_row), "tma early": compile_tma(tma_row, early=True),
       "tma early, prefetched": compile_tma(tma_row, early=True, prefetch=True)} \
    if rm._descriptor_class() else {}
early = {"4096 early": compile_(4096, 4096, 4096, row, True, early=True),
         "1000 early, prefetched": compile_(1000, 1000, 1000, row, True, early=True,
                                            prefetch=True)} \
    if rm.gdc_wait is not None else {}
print(json.dumps({**tma, **early, "1000 promised": compile_(1000, 1000, 1000, row, True),
                  "1000 not promised": compile_(1000, 1000, 1000, row, False),
                  "4096": compile_(4096, 4096, 4096, row, True),
                  "1000 promised, K masked exactly": compile_(1000, 1000, 1000, row, True,
                                                               k_runs=False),
                  "4097 copied": compile_(4097, 4097, 4097, row, True, k_runs=True, wide=4160),
                  "4097 copied, K masked exactly": compile_(4097, 4097, 4097, row, True,
                                                            k_runs=False, wide=4160),
                  "4096 x 4096 x 4064": compile_(4096, 4096, 4064, row, True)}))
"""


def test_only_small_products_launch_early_unless_asked(monkeypatch):
    # the GPU's part (Hopper, a Triton with gdc_wait) stood in for: what is decided here is
    # which products launch early, by their multiply-adds, and what early= and EARLY_LAUNCH do
    monkeypatch.setattr(rm, "_early_launch_available", lambda device: True)
    row = rm.INTERPRETER_CONFIG

    def early(m, n, k, **given):
        a, b = torch.empty(m, k), torch.empty(k, n)
        return rm._Plan(a, b, row, **given).early

    assert early(1000, 1000, 1000) and early(8, 4096, 4096) and early(1024, 1024, 1024)
    assert not early(2048, 2048, 2048) and not early(4096, 4096, 512)
    assert 2048**3 > rm.EARLY_MAX_MACS >= 1024**3
    assert early(2048, 2048, 2048, early=True) and not early(1000, 1000, 1000, early=False)
    monkeypatch.setattr(rm, "EARLY_LAUNCH", False)
    assert not early(1000, 1000, 1000) and early(1000, 1000, 1000, early=True)
    monkeypatch.setattr(rm, "_early_launch_available", lambda device: False)
    assert not early(1000, 1000, 1000, early=True)  # where the GPU or Triton cannot, never


def test_the_copies_an_early_plan_is_timed_over_keep_the_inputs_strides():
    # the plan's arguments hold the strides of the inputs it was made for: a copy of a view
    # with gaps between rows made contiguous would be read with the gaps, past its end
    wide = torch.randn(6, 10)
    view = wide[:, :7]
    copy = rm._copy_of(view)
    assert copy.stride() == view.stride() and torch.equal(copy, view)
    assert copy.data_ptr() != view.data_ptr()
    transposed = torch.randn(7, 6).t()
    assert rm._copy_of(transposed).stride() == transposed.stride()
    repeated = torch.randn(1, 7).expand(6, 7)  # one row at six places: no copy can keep that
    assert rm._copy_of(repeated) is repeated


def test_on_hopper_whole_steps_copy_16_bytes_at_a_time_where_rows_allow():
    import json
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", HOPPER_COMPILE], env=env, cwd=COURSE_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # K a multiple of the step: every load is an asynchronous 16-byte copy, none by threads
    assert found["4096"]["copies16"] > 0 and found["4096"]["loads"] == 0
    # rows of 1000 elements: Triton sees no multiple of 16, and loads element by element
    # (2 bytes) unless the kernel is told that the rows start on 16-byte boundaries
    assert found["1000 not promised"]["copies16"] == 0
    assert found["1000 not promised"]["scalar_loads"] > 0
    assert found["1000 promised"]["copies16"] > 0
    # with the promise and A's K mask by runs of 8 (_in_k), nothing is loaded element by
    # element; a mask that ends at K itself (1000, no multiple of 16 Triton can see) loads
    # A's tiles element by element on every step
    assert found["1000 promised"]["scalar_loads"] == 0
    assert found["1000 promised, K masked exactly"]["scalar_loads"] > 0
    # 4097 cubed from the aligned copies: the runs past K read the copy's zeros, and every load
    # moves 16 bytes; the exact mask (K = 4097) moves A element by element
    assert found["4097 copied"]["scalar_loads"] == 0
    assert found["4097 copied, K masked exactly"]["scalar_loads"] > 0
    # C's rows of 1000 elements too: promised, the tile is stored 16 bytes at a time
    assert found["1000 promised"]["stores16"] > 0 and found["1000 promised"]["scalar_stores"] == 0
    assert found["1000 not promised"]["scalar_stores"] > 0
    # a K of 4064 (63 and a half steps) on aligned rows: every step masked, and every load
    # still an asynchronous copy of 16 bytes (a cut one fills zeros), none by the threads
    assert found["4096 x 4096 x 4064"]["copies16"] > 0
    assert found["4096 x 4096 x 4064"]["loads"] == 0
    if "tma" in found:  # tensor descriptors: TMA copies, and no load by the threads at all
        assert found["tma"]["tma_copies"] > 0 and found["tma"]["loads"] == 0, found["tma"]
    # An early launch (programmatic dependent launch) waits for the kernel before it ahead of
    # any read of A or B, which that kernel may have written, then lets the next one launch;
    # a launch that is not early has neither instruction.
    for name in ("4096 early", "tma early"):
        if name in found:
            at = found[name]
            assert 0 <= at["wait"] < at["signal"] < at["first_read"], (name, at)
    for name in ("4096", "tma"):
        if name in found:
            assert found[name]["wait"] == found[name]["signal"] == -1, (name, found[name])
    # Prefetched (_into_l2): the operands are asked into L2 before the wait, and nothing is
    # read into the program before it; without PREFETCH there is no prefetch at all.
    for name in ("1000 early, prefetched", "tma early, prefetched"):
        if name in found:
            at = found[name]
            assert 0 <= at["prefetch"] < at["wait"] < at["signal"] < at["first_read"], (name, at)
    assert all(found[name]["prefetches"] == 0 for name in found if "prefetched" not in name)


# The products: square ones, one past a tile (4097), one not a multiple of 16 (1000),
# a short K (512) and the decode of 8 tokens against a 4096 x 4096 weight.
GPU_SHAPES = [(1000, 1000, 1000), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
              (8192, 8192, 8192), (4096, 4096, 512), (4097, 4097, 4097), (8, 4096, 4096),
              (512, 384, 1000), (16, 4096, 4096)]
GPU_RTOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def close_on_sampled_rows(a, b, c, rtol) -> bool:
    rows = torch.unique(torch.linspace(0, a.shape[0] - 1, 64, device=a.device).long())
    want = a[rows].double() @ b.double()
    return float((c[rows].double() - want).norm() / want.norm()) < rtol


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("m, n, k", GPU_SHAPES, ids=lambda v: str(v))
def test_the_chosen_plan_matches_float64_and_launches_directly_on_a_gpu(m, n, k, dtype,
                                                                        monkeypatch, fresh_plans):
    timed = []
    monkeypatch.setattr(rm, "_time_ms", lambda fn, real=rm._time_ms: timed.append(1) or real(fn))
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    first = rm.matmul(a, b)
    assert close_on_sampled_rows(a, b, first, GPU_RTOL[dtype])
    chosen = len(timed)
    plan = rm._PLANS[rm._key(a, b)]
    assert rm.chosen_config(a, b) == plan.config
    assert plan.config in (rm.SKINNY_CONFIGS if m <= rm.SKINNY_M else rm.CONFIGS)
    assert plan.direct, "this Triton's compiled kernel has no launcher of its own"
    assert not plan.skipped, plan.skipped  # every row of the table ran on this GPU
    if k % 8 or n % 8:  # 4097: copied into aligned rows, then promised aligned
        assert plan.copy_a and plan.copy_b and plan.aligned
    else:
        assert not (plan.copy_a or plan.copy_b) and plan.aligned
    again = rm.matmul(a, b)  # launched directly: no timing, the same bits
    assert len(timed) == chosen and torch.equal(again, first)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(8, 4096, 4096), (1000, 1000, 1000), (4097, 4097, 4097)],
                         ids=lambda v: str(v))
def test_direct_launches_record_into_a_cuda_graph(m, n, k):
    a = torch.randn(m, k, device="cuda").half()
    b = torch.randn(k, n, device="cuda").half()
    want = rm.matmul(a, b)  # chosen and compiled before the capture
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        rm.matmul(a, b)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = rm.matmul(a, b)
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want)


@pytest.mark.gpu
@pytest.mark.parametrize("row", [rm.TileConfig(64, 64, 64, 8, 4, 3, tma=True),
                                 rm.TileConfig(64, 64, 64, 8, 4, 3, tma=True, persistent=True),
                                 rm.TileConfig(16, 32, 64, 1, 4, 3, split_k=2, tma=True)],
                         ids=lambda row: row.label)
@pytest.mark.parametrize("copied", [False, True], ids=["in place", "copied"])
def test_descriptors_kept_per_address_follow_every_operand_on_a_gpu(row, copied, monkeypatch):
    if rm._descriptor_class() is None or torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor descriptors need Triton 3.4 and a GPU of compute capability 9")
    monkeypatch.setattr(rm, "PAD_MIN_MACS", 0 if copied else 2**40)
    m, n, k = (16 if row.block_m == 16 else 100), 136, 200  # K no whole number of steps
    wide = k + 1 if copied else k  # rows 2 bytes off: copied into aligned rows first
    b = integers((k, n), torch.float16, "cuda", 1)
    operands = [integers((m, wide), torch.float16, "cuda", seed)[:, :k]
                for seed in range(rm.KEEP_ENCODED + 3)]  # more addresses than are kept
    plan = rm._Plan(operands[0], b, row)
    assert plan.copy_a == copied
    for _ in range(2):
        for a in operands:
            assert exact(a, b, plan(a, b))
    if triton.__version__.startswith(rm.ENCODED_ON):
        assert plan.matmul.encodes_once
    # an address kept, its values changed: the map is the address's, the values are read anew
    a = operands[-1]
    a.copy_(integers(a.shape, torch.float16, "cuda", 99))
    assert exact(a, b, plan(a, b))
    # freed and allocated again, at the same address or not
    del operands
    for seed in range(4):
        a = integers((m, wide), torch.float16, "cuda", 50 + seed)[:, :k]
        assert exact(a, b, plan(a, b))
    # while a profiler listens, Triton's runner launches, given descriptors the launch makes
    chain = getattr(getattr(getattr(triton, "knobs", None), "runtime", None),
                    "launch_enter_hook", None)
    if hasattr(chain, "add"):
        seen = []

        def hook(metadata):
            seen.append(metadata)

        chain.add(hook)
        try:
            assert exact(a, b, plan(a, b))
        finally:
            chain.remove(hook)
        assert len(seen) == (2 if copied else 1)  # the copy's launch, then the product's


@pytest.mark.gpu
def test_a_profilers_launch_hook_sees_every_remembered_launch(fresh_plans):
    chain = getattr(getattr(getattr(triton, "knobs", None), "runtime", None),
                    "launch_enter_hook", None)
    if not hasattr(chain, "add"):
        pytest.skip(f"Triton {triton.__version__} keeps no chain of launch hooks in knobs")
    a = torch.randn(256, 256, device="cuda").half()
    b = torch.randn(256, 256, device="cuda").half()
    want = rm.matmul(a, b)  # chosen: later calls launch directly
    seen = []

    def hook(metadata):
        seen.append(metadata)

    chain.add(hook)
    try:
        assert torch.equal(rm.matmul(a, b), want) and torch.equal(rm.matmul(a, b), want)
    finally:
        chain.remove(hook)
    assert len(seen) == 2 and rm._PLANS[rm._key(a, b)].direct
    assert torch.equal(rm.matmul(a, b), want) and len(seen) == 2  # gone: not called again


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1000, 1000), (8, 4096), (4096, 512)])
def test_a_product_launched_early_reads_the_whole_product_before_it(fresh_plans, shape):
    # Each product reads the one before it, launched just before on the same stream: launched
    # early, a program that read before that product's last store would see stale or partial
    # rows. B permutes columns, so every product is exact and the fiftieth is A with its
    # columns permuted fifty times over; one stale element anywhere shows.
    m, n = shape
    a = torch.randn(m, n, device="cuda").half()
    order = torch.randperm(n, device="cuda")
    b = torch.zeros(n, n, device="cuda").half()
    b[order, torch.arange(n, device="cuda")] = 1  # (a @ b)[:, j] = a[:, order[j]]
    x = a
    for _ in range(50):
        x = rm.matmul(x, b)
    plan = rm._PLANS[rm._key(a, b)]
    want = a
    for _ in range(50):
        want = want[:, order]
    assert torch.equal(x, want), (shape, plan.config.label, plan.early)
    if rm._early_launch_available(a.device):
        assert plan.early  # the chain above ran launched early


@pytest.mark.gpu
def test_an_early_product_is_chosen_on_back_to_back_calls_over_evicted_inputs(fresh_plans,
                                                                              monkeypatch):
    # The decoding step launches early where the GPU can: the choice times each row as the
    # bench does, calls back to back over copies of the inputs twice the L2 cache together
    # (16 at most), and the chosen plan is still right, with its split's workspace made
    # outside the graph it was timed in (a workspace made in a capture holds no zeros).
    a = torch.randn(8, 4096, device="cuda").bfloat16()
    b = torch.randn(4096, 4096, device="cuda").bfloat16()
    timed, copies = [], []
    real_inputs = rm._inputs_beyond_l2
    monkeypatch.setattr(rm, "_back_to_back_ms",
                        lambda plan, x, y, real=rm._back_to_back_ms: timed.append(plan.config)
                        or real(plan, x, y))
    monkeypatch.setattr(rm, "_inputs_beyond_l2",
                        lambda x, y: copies.append(real_inputs(x, y)) or copies[-1])
    first = rm.matmul(a, b)
    plan = rm._PLANS[rm._key(a, b)]
    if not plan.early:
        pytest.skip("this GPU or Triton cannot launch early (Hopper and Triton 3.4 or later)")
    assert set(timed) == set(rm._candidates(a, b))  # every row timed back to back
    l2 = torch.cuda.get_device_properties(a.device).L2_cache_size
    bytes_per_pair = (a.numel() + b.numel()) * a.element_size()
    assert all(len(pairs) == min(rm.MAX_INPUT_COPIES, -(-2 * l2 // bytes_per_pair))
               for pairs in copies)
    assert all(y.data_ptr() != b.data_ptr() for _, y in copies[0][1:])
    for _ in range(3):
        assert close_on_sampled_rows(a, b, first, 1.6e-2)
        first = rm.matmul(a, b)


@pytest.mark.gpu
def test_every_skinny_row_is_right_on_the_decode_shape():
    a = torch.randn(8, 4096, device="cuda").bfloat16()
    b = torch.randn(4096, 4096, device="cuda").bfloat16()
    for row in rm.SKINNY_CONFIGS:
        assert close_on_sampled_rows(a, b, rm.matmul(a, b, config=row), 1.6e-2), row.label


# ---------------------------------------------------------------------------------------------
# python -m learning.explain matmul


@pytest.fixture
def wide_plain_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")


def test_explain_matmul_works_both_tiles_and_the_product(capsys, wide_plain_console):
    assert explain.main(["matmul"]) == 0
    out = capsys.readouterr().out
    for text in ("Tile 1 of 2: rows 0-1, columns 0-1 of C", "Tile 2 of 2: row 2, columns 0-1",
                 "Stored into C[2][0-1]: [[2,14]]", "C = [[2,2], [2,8], [2,14]]",
                 "FLOP per byte", "Grouped by 2", "float16 accumulator"):
        assert text in out, text
    measured = (Path(__file__).resolve().parent.parent / "lab" / "results" /
                "matmul.json").exists()
    assert ("Not yet measured" in out) is not measured


@pytest.mark.parametrize("m, n, k, block", [(3, 2, 3, 2), (5, 3, 7, 2), (8, 8, 8, 3),
                                            (1, 1, 1, 4), (7, 2, 5, 1)])
def test_the_tiles_add_up_to_the_product(m, n, k, block):
    import ast

    a, b = page.worked_matrices(m, n, k)
    want = page._product(a, b)
    got = [[None] * n for _ in range(m)]
    tiles_n = -(-n // block)
    for index in range(-(-m // block) * tiles_n):
        table = page.tile((m, n, k, block, index + 1))
        assert len(table.rows) == -(-k // block)
        stored = ast.literal_eval(table.caption.split(": ", 1)[1].split(";")[0])
        i0, j0 = (index // tiles_n) * block, (index % tiles_n) * block
        for i, row in enumerate(stored):
            for j, value in enumerate(row):
                got[i0 + i][j0 + j] = value
    assert got == want


@pytest.mark.parametrize("argv, words", [
    (["--input", "5,3,7,2"], "C = A @ B for A 5 x 7 and B 7 x 3, in tiles of 2"),
    (["--input", "1,1,1,1"], "Tile 1 of 1"),
])
def test_explain_matmul_takes_your_own_sizes(argv, words, capsys, wide_plain_console):
    assert explain.main(["matmul", *argv]) == 0
    assert words in capsys.readouterr().out


@pytest.mark.parametrize("value", ["3,2,3", "3,2,3,2.5", "9,2,3,2", "3,2,inf,2", "0,2,3,2"])
def test_explain_matmul_refuses_sizes_it_cannot_draw(value, capsys):
    assert explain.main(["matmul", "--input", value]) == 2
    out = capsys.readouterr().out
    assert "--input" in out and len(out.strip().splitlines()) <= 2


def test_intensity_comes_from_the_traffic_formula():
    table = page.intensity((4096, 2))
    one = table.rows[0]
    # one element per program: 4096**2 programs each read a row and a column of 4096
    nbytes = (4096**2 * 2 * 4096 + 4096**2) * 2
    assert one[1] == f"{nbytes / 1e9:,.2f}"
    assert one[2] == f"{2 * 4096**3 / nbytes:,.1f}"
    intensities = [float(row[2].replace(",", "")) for row in table.rows]
    assert intensities == sorted(intensities)


def test_the_accumulator_table_overflows_float16_and_keeps_float32_exact():
    table = page.accumulator((1024, 128))
    last = table.rows[-1]
    a, b = page._climbing_sum(1024)
    assert last[2] == f"{math.fsum(x * y for x, y in zip(a, b)):,.0f}"
    assert last[3] == "inf" and last[4] != last[2]
    assert page.round_half(65504.0) == 65504.0 and page.round_half(65520.0) == math.inf
    assert page.round_bfloat16(257.0) == 256.0


def test_measured_sections_wait_for_a_committed_run_then_show_it():
    if not page.RESULTS.exists():
        assert page.measured().text == page.target().text == page.NOT_MEASURED
    data = {"env": {"device": "GPU", "sms": 1, "torch": "t", "triton": "3.6.0", "cuda": "c",
                    "date": "2026-12-02"}, "command": "python -m learning.bench matmul",
            "results": [{"impl": "reference", "dtype": "fp16", "M": 4096, "N": 4096,
                         "K": 4096, "tflops": 600.0, "config": "128x256x64"},
                        {"impl": "torch", "dtype": "fp16", "M": 4096, "N": 4096, "K": 4096,
                         "tflops": 700.0}],
            "configs": [{"dtype": "fp16", "M": 4096, "N": 4096, "K": 4096,
                         "config": "128x256x64", "tflops": 600.0}]}
    table = page.measured(data=data)
    assert table.rows == (("fp16", "4096 x 4096 x 4096", "600", "700", "0.86", "0.86",
                           "128x256x64"),)
    assert "triton 3.6.0" in table.caption and "2026-12-02" in table.caption
    assert table.caption.startswith("One round")
    target = page.target(data=data)
    assert target.rows[0][2:] == ("0.86", "0.86", "not met")
    assert target.rows[1][4] == "not measured"
    assert page.configs(data=data).rows == (("fp16", "4096 x 4096 x 4096", "128x256x64", "600",
                                             "600"),)


def test_rounds_are_reported_as_medians_with_the_ratios_range():
    """One run's figures once disagreed with another's by more than the goal's margin and the
    tables did not say so: each figure is now a median over rounds, each round's ratio taken
    from the reference and torch timed in that round, with the lowest and highest ratio."""
    def pair(round_, ours, cublas, config):
        size = {"dtype": "bf16", "M": 4096, "N": 4096, "K": 4096, "round": round_}
        return [dict(size, impl="reference", tflops=ours, config=config),
                dict(size, impl="torch", tflops=cublas)]

    env = {"device": "GPU", "sms": 1, "torch": "t", "triton": "3.6.0", "cuda": "c",
           "date": "2026-12-04"}
    data = {"env": env, "command": "python -m learning.bench matmul --rounds 3", "rounds": 3,
            "results": pair(0, 600.0, 700.0, "A") + pair(1, 690.0, 700.0, "B")
            + pair(2, 660.0, 660.0, "A"),
            "configs": [{"dtype": "bf16", "M": 4096, "N": 4096, "K": 4096, "config": "A",
                         "tflops": t, "round": i} for i, t in enumerate((500.0, 700.0, 600.0))]}
    row = page.measured(data=data).rows[0]
    # medians: 660 of (600, 690, 660); 700 of (700, 700, 660); ratios 0.857, 0.986, 1.0
    assert row[2:] == ("660", "700", "0.99", "0.86 to 1.00", "A (2 of 3 rounds)")
    assert "Medians over 3 rounds" in page.measured(data=data).caption
    assert page.target(data=data).rows[1][2:] == ("0.99", "0.86 to 1.00",
                                                  "met at the median, not in every round")
    assert page.configs(data=data).rows[0][3:] == ("600", "500 to 700")
    low = dict(data, results=pair(0, 600.0, 700.0, "A") + pair(1, 610.0, 700.0, "A"))
    assert page.target(data=low).rows[1][4] == "not met"
    # the bench of issue 36 says what it timed: the GPU's own time, the tiles chosen once
    timed = page.measured(data=dict(data, timing={"device": "...", "call": "..."})).caption
    assert "Medians over 3 rounds" in timed and "CUDA graph" in timed
    assert "chose its tiles once" in timed and "afresh" not in timed


def test_explain_matmul_needs_no_torch_and_is_instant():
    probe = ("import sys, time; t = time.perf_counter(); from learning import explain; "
             "assert explain.main(['matmul']) == 0; "
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

    done = subprocess.run([sys.executable, "-m", "learning.explain", "matmul"],
                          capture_output=True, text=True, cwd=COURSE_ROOT,
                          env={"COLUMNS": "80", "PATH": "/usr/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert len(line.rstrip()) <= 80, line
        assert not re.search(r"\d,\d{1,2} *$|\d,\d{1,2} │", line), line


# ---------------------------------------------------------------------------------------------
# python -m learning.bench matmul


def test_without_a_gpu_bench_matmul_says_where_the_figures_are(capsys, mode):
    if not mode.interpret:
        pytest.skip("a GPU is present: the bench would time")
    assert bench.main(["matmul"]) == 1  # nothing timed
    out = " ".join(capsys.readouterr().out.split())
    assert "need a CUDA GPU" in out and "python -m learning.check matmul" in out
    assert "lab/results/matmul.json" in out


@pytest.mark.parametrize("argv, message", [
    (["matmul", "--rounds", "0"], "--rounds: 0 is not allowed"),
    (["matmul", "--sizes", "12y"], "'12y' is not a size"),
    (["matmul", "--sizes", "1x2"], "needs one size or M x N x K"),
    (["matmul", "--sizes", "0"], "each 1 to 65536"),
    (["matmul", "--dtypes", "fp64"], "unknown dtype 'fp64'"),
    (["softmax", "matmul"], "matmul is timed on its own"),
])
def test_bad_bench_arguments_are_one_line_and_exit_2(argv, message, capsys):
    assert bench.main(argv) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert message in out and "Traceback" not in out


@pytest.mark.interpreter
def test_the_bench_checks_then_times_each_implementation(monkeypatch):
    from learning.bench import matmul as bench_matmul
    from learning.exercises.matmul import solution

    monkeypatch.setattr(bench_matmul, "DEVICE", "cpu")
    timed = []

    def fake_device_us(function, inputs, quick):
        timed.append(len(inputs))
        return [function(a, b) for a, b in inputs] and 2000.0

    monkeypatch.setattr(bench_matmul, "device_us", fake_device_us)
    turns = []

    def fake_call_us(function, a, b, quick, us, share):  # the host drifts: the 2nd turn slow
        turns.append((function, share))
        return 50.0 if len(turns) in (4, 5, 6) else 10.0

    monkeypatch.setattr(bench_matmul, "call_us", fake_call_us)
    monkeypatch.setattr(rowwise, "median_ms", lambda fn, quick=False: (fn(), 2.0)[1])
    assert bench_matmul.try_small(solution.matmul_triton) == ""
    # an L2 cache of 20 KB: two pairs of 70 x 40 and 40 x 50 half floats (9600 bytes) are
    # not enough to be twice it, five are
    rows = bench_matmul.measure_size(70, 50, 40, "fp16", False, solution.matmul_triton,
                                     lambda row: None, l2_bytes=20_000, ceiling_gbps=1.0)
    assert [r["impl"] for r in rows] == ["yours", "reference", "torch"]
    assert timed == [5, 5, 5] and all(r["input_copies"] == 5 for r in rows)
    assert all(r["correct"] and r["tflops"] == 2 * 70 * 50 * 40 / 2e-3 / 1e12 for r in rows)
    assert all(r["device_us"] == 2000.0 and r["call_us"] == 10.0 for r in rows)
    # the three implementations' calls taken in turns, each turn a share of the calls, and a
    # turn when the host ran slow lands on each alike and is outvoted
    assert len(turns) == 3 * bench_matmul.CALL_TURNS and len({f for f, _ in turns[:3]}) == 3
    assert [f for f, _ in turns] == [f for f, _ in turns[:3]] * bench_matmul.CALL_TURNS
    assert all(share == bench_matmul.CALL_TURNS for _, share in turns)
    assert "copy_fraction" not in rows[1]  # 70 rows: judged by FLOPs, not bytes
    assert rows[1]["config"] == rm.INTERPRETER_CONFIG.label
    assert "| fp16 | 70 x 50 x 40 |" in "\n".join(bench_matmul.table_lines(rows))

    def drops_a_row(a, b):
        c = solution.matmul_triton(a, b)
        c[0] = 0
        return c

    rows = bench_matmul.measure_size(70, 50, 40, "fp16", False, drops_a_row, lambda row: None)
    assert not rows[0]["correct"] and "not timed" in rows[0]["note"] and "ms" not in rows[0]
    skinny = bench_matmul.measure_size(8, 50, 40, "fp16", False, None, lambda row: None,
                                       ceiling_gbps=1.0)
    moved = (8 * 40 + 40 * 50 + 8 * 50) * 2
    assert skinny[0]["copy_fraction"] == pytest.approx(moved / 2000.0 / 1e3)
    monkeypatch.setattr(rm, "CONFIGS", rm.CONFIGS[-2:])
    timed_rows = bench_matmul.measure_configs("fp16", False, lambda row: None, size=(64, 48, 80))
    assert [r["config"] for r in timed_rows] == [row.label for row in rm.CONFIGS]
    # every row timed, but those that copy the operands in their own launch: nothing to copy
    copying = [r for r, row in zip(timed_rows, rm.CONFIGS) if row.copy_inside]
    assert copying and all("neither needs a copy" in r["note"] and "device_us" not in r
                           for r in copying)
    assert all("tflops" in r and r["device_us"] == 2000.0 for r in timed_rows
               if r not in copying)


def test_the_bench_table_gives_medians_ratios_and_the_goal():
    from learning.bench import matmul as bench_matmul

    def pair(round_, m, ours, theirs, our_call, their_call, **extra):
        size = {"dtype": "bf16", "M": m, "N": 4096, "K": 4096, "round": round_}
        return [dict(size, impl="reference", device_us=ours, call_us=our_call, config="A",
                     **extra),
                dict(size, impl="torch", device_us=theirs, call_us=their_call)]

    results = pair(0, 4096, 200.0, 190.0, 12.0, 20.0) + pair(1, 4096, 210.0, 200.0, 14.0, 20.0) \
        + pair(2, 4096, 190.0, 200.0, 40.0, 20.0) \
        + pair(0, 8, 9.0, 10.0, 12.0, 20.0, copy_fraction=0.8) \
        + pair(1, 8, 11.0, 10.0, 12.0, 20.0, copy_fraction=0.7)
    shapes = bench_matmul.summarise(results)
    big = shapes[("bf16", 4096, 4096, 4096)]
    assert big["device_ratios"] == [190 / 200, 200 / 210, 200 / 190]
    assert big["call_ratios"] == [0.6, 0.7, 2.0]
    assert bench_matmul.goal(4096, big) == "met"  # medians 0.95 and 0.7; one round's 2.0 aside
    decode = shapes[("bf16", 8, 4096, 4096)]
    # median device ratio (10/11 + 10/9) / 2 = 1.01, copy share (0.8 + 0.7) / 2 = 0.75
    assert bench_matmul.goal(8, decode) == "met"
    slow = bench_matmul.summarise(pair(0, 8, 12.0, 10.0, 40.0, 20.0, copy_fraction=0.6))
    assert bench_matmul.goal(8, slow[("bf16", 8, 4096, 4096)]) == \
        "not met: device 0.83 < 1.00, call 2.00 > 1.50, copy 0.60 < 0.75"
    lines = bench_matmul.table_lines(results)
    assert lines[2].startswith("| bf16 | 4096 x 4096 x 4096 | 200.0 | 200.0 | 0.95 (0.95 to 1.05)")
    assert "| 0.70 (0.60 to 2.00) |" in lines[2] and lines[2].endswith("| A | met |")
    assert "| 0.75 (0.70 to 0.80) |" in lines[3]


@pytest.mark.interpreter
def test_the_bench_skips_the_stub_with_a_note(monkeypatch):
    from learning.bench import matmul as bench_matmul

    monkeypatch.setattr(bench_matmul, "DEVICE", "cpu")
    function, why = bench_matmul.load_learner(COURSE_ROOT)
    assert why == "" and "NotImplementedError" in bench_matmul.try_small(function)


@pytest.mark.compile_check
@pytest.mark.interpreter
@pytest.mark.skipif(triton_version() < (3, 6), reason="the compiler before Triton 3.6 stops on "
                    "it with a bare assertion, whose missing words no advice can be matched to")
def test_a_float16_accumulator_given_to_tl_dot_is_blamed_on_the_compilers_words(tmp_path):
    # Triton's interpreter stores such a kernel's float32 products two bytes of four, over
    # what the output held: the cases then seem to follow the memory's old contents, which is
    # the interpreter's doing, not a read before a store; the compiler names the real mistake
    text = solution_text("matmul").replace(
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)").replace(
        "acc += tl.dot(a, b)", "acc = tl.dot(a, b, acc)")
    assert text.count("tl.float16") == 1 and "tl.dot(a, b, acc)" in text
    (part,) = grade_text(tmp_path, "matmul", text, ["triton"]).parts
    assert part.status == "failed"
    (rejected,) = part.compile_check.rejected
    assert "acc starts as fp16 and the loop makes it fp32" in rejected.hint
    failing = [c for c in part.cases if c.verdict.status == "failed"]
    keys = {bug.key for case in failing for bug in case.verdict.causes}
    assert "follows-the-fill" not in keys and "type-changed-in-loop" in keys, keys
