"""The first named step whose value differs: fed wrong versions whose first wrong step is known,
it names that step and no other; where the names are not the lesson's, or the two computations
cannot be kept in step, it says nothing."""

import re

import pytest

from learning.grader import first_step, mode, named_steps, registry, runner, steps_run
from learning.grader.named_steps import Event, Recording
from tests.helpers import COURSE_ROOT, grade_text, solution_text, write_module


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _steps(result, part="python") -> dict[str, str]:
    (part_result,) = [p for p in result.parts if p.part.name == part]
    return {c.name: c.verdict.first_step for c in part_result.cases if c.verdict.first_step}


# Triton 3.6's interpreter with numpy 2.4 or newer cannot run a loop over a kernel's argument
# (the check on a GPU compiles the kernels, but records their steps in the interpreter)
loops_in_the_interpreter = pytest.mark.skipif(
    mode.interpreter_problem() is not None, reason=str(mode.interpreter_problem()))


def _graded(tmp_path, exercise, text, part="python"):
    return grade_text(tmp_path, exercise, text, [part], first_steps=True, compile_check=False)


# ---------------------------------------------------------------------------------------------
# Wrong versions whose first wrong step is known.


def test_a_wrong_denominator_is_named_after_the_three_steps_that_match(tmp_path):
    code = _replace(solution_text("softmax"), "denominator = sum(numerator)",
                    "denominator = sum(numerator) + 1.0")
    said = _steps(_graded(tmp_path, "softmax", code))
    assert said == {"worked example": "maximum, shifted and numerator match the reference's; "
                                      "denominator is 2.50321, expected 1.50321"}


def test_a_wrong_maximum_is_the_first_step_even_where_the_case_raised(tmp_path):
    # softmax does not change under any finite shift: only cases that overflow fail, raising
    code = _replace(solution_text("softmax"), "maximum = max(values)", "maximum = min(values)")
    said = _steps(_graded(tmp_path, "softmax", code))
    assert list(said.values()) == ["maximum is -1000, expected 1000"]


def test_a_running_maximum_never_updated_is_found_after_the_first_key_block(tmp_path):
    code = _replace(solution_text("attention"), "            m = m_new\n", "")
    (said,) = _steps(_graded(tmp_path, "attention", code)).values()
    assert said.endswith("your code does not set m for query row 0, keys 0 to 1, where the "
                         "reference does: the m it holds from before is -inf, expected 0.5")
    assert "acc" in said.split(";")[0]  # the steps before it matched, acc among them


def test_an_accumulator_not_rescaled_is_found_at_the_second_key_block(tmp_path):
    code = _replace(solution_text("attention"), "acc = [a * alpha + sum", "acc = [a + sum")
    (said,) = _steps(_graded(tmp_path, "attention", code)).values()
    assert "; acc for query row 0, keys 2 to 3 is [" in said
    assert "alpha and p match the reference's until then" in said


def test_an_online_maximum_never_updated_is_found_at_the_first_lane(tmp_path):
    code = _replace(solution_text("online_softmax"), "            m[lane] = m_new\n", "")
    (said,) = _steps(_graded(tmp_path, "online_softmax", code)).values()
    assert said.startswith("m, s, m_new and ref match the reference's until then; your code "
                           "does not set m in the chunk from value 0, lane 0")


def test_a_k_loop_that_steps_two_blocks_is_found_where_the_second_block_is_skipped(tmp_path):
    code = _replace(solution_text("matmul"), "for k0 in range(0, k, block):",
                    "for k0 in range(0, k, 2 * block):")
    (said,) = _steps(_graded(tmp_path, "matmul", code)).values()
    assert said.startswith("c, acc, a_tile and b_tile match the reference's until then; "
                           "where the reference goes on to set a_tile in the tile at C[0][0], "
                           "K block from 2, your code sets c again first: its new c differs at "
                           "[0][0]")
    # the reference's c there is the one it has not yet replaced, not the answer
    assert "where the reference still holds 0 (" in said and "expected" not in said, said


def test_a_name_set_again_is_said_to_be_set_again_not_to_match_and_differ(tmp_path):
    # float64 converted to float32 as everything else is: y as loaded matches the
    # reference's, the y the conversion makes does not; the line says which y it means
    code = _replace(solution_text("softmax_backward"), "    if y.dtype != tl.float64:\n",
                    "    if True:\n")
    said = _steps(_graded(tmp_path, "softmax_backward", code, part="triton"), part="triton")
    assert said == {"float64": "y and dy match the reference's until then; where the reference "
                               "goes on to set dot in the program of row 0, your code sets y "
                               "again first: its new y differs at [0]: 0.0022153258, where the "
                               "reference still holds 0.0022153259 (91 of 128 values differ)"}


def test_the_autograd_parts_forward_kernel_is_walked_by_lesson_08s_names(tmp_path):
    # a forward kernel padding with 0 is found at x; with a right forward pass and a wrong
    # backward one, the line says the forward's steps all match, so the fault lies after them
    base = solution_text("softmax_backward")
    padded = _replace(base, 'mask=mask, other=-float("inf"))', "mask=mask, other=0.0)")
    said = _steps(_graded(tmp_path, "softmax_backward", padded, part="autograd"),
                  part="autograd")
    assert said == {"worked row": "x in the program of row 0 is [1, 2, 3, 0], expected "
                                  "[1, 2, 3, -inf]"}
    wrong_backward = _replace(base, "dx = y * (dy - dot)", "dx = y * (dy + dot)")
    said = _steps(_graded(tmp_path, "softmax_backward", wrong_backward, part="autograd"),
                  part="autograd")
    assert said == {"worked row": "every named step matches the reference's (x, maximum, "
                                  "numerator, denominator and y): what differs comes after "
                                  "the last of them"}


def test_a_tile_of_b_read_one_row_late_is_found_at_its_first_step(tmp_path):
    code = _replace(solution_text("matmul"), "b_tile = [[b[kk][j] if kk < k and j < n else 0.0 "
                    "for j in range(j0, j0 + block)]\n                          for kk in "
                    "range(k0, k0 + block)]", "b_tile = [[b[kk][j] if kk < k and j < n else 0.0 "
                    "for j in range(j0, j0 + block)]\n                          for kk in "
                    "range(k0 + 1, k0 + 1 + block)]")
    (said,) = _steps(_graded(tmp_path, "matmul", code)).values()
    assert said.startswith("c, acc and a_tile match the reference's until then; b_tile in "
                           "the tile at C[0][0], K block from 0 differs at [0][0]")


def test_an_accumulator_made_once_per_tile_row_is_found_at_acc_not_at_the_next_tile_s_loads(
        tmp_path):
    """The reference resets acc and then loads the tile's first a_tile; code that never resets
    it loads a_tile first. That a_tile is the reference's next one, taken a step early, not a
    wrong one: the step that differs is acc, still holding the last tile's sum."""
    code = _replace(solution_text("matmul"),
                    "        for j0 in range(0, n, block):\n"
                    "            acc = [[0.0] * block for _ in range(block)]",
                    "        acc = [[0.0] * block for _ in range(block)]\n"
                    "        for j0 in range(0, n, block):")
    said = _steps(_graded(tmp_path, "matmul", code))
    assert said and all("a_tile differs" not in s and "sets a_tile first" not in s
                        for s in said.values()), said
    (first,) = said.values()
    assert re.search(r"match the reference's until then; acc in the tile at C\[\d\]\[[1-9]\] "
                     r"differs at \[0\]\[0\]: -?\d+, expected 0", first), first


def test_running_state_made_once_for_every_query_is_found_where_the_second_query_starts(
        tmp_path):
    """m, l and acc set above the query loop: the reference's last m of query 0 and its fresh
    m of query 1 are two steps, not one, so the second is compared and found."""
    code = _replace(solution_text("attention"),
                    "    for i, row in enumerate(q):\n"
                    "        m, l, acc = -math.inf, 0.0, [0.0] * len(v[0])",
                    "    m, l, acc = -math.inf, 0.0, [0.0] * len(v[0])\n"
                    "    for i, row in enumerate(q):")
    (said,) = _steps(_graded(tmp_path, "attention", code)).values()
    assert said.endswith("match the reference's until then; m for query row 1 is 2.5, "
                         "expected -inf"), said


def test_an_rms_kept_in_the_rows_own_units_is_right_and_the_step_after_it_is_found(tmp_path):
    """rms = largest * sqrt(...) is the row's RMS, as right as the lesson's scaled one: with the
    weight then left out, the step that differs is the output, not rms."""
    code = _replace(solution_text("rmsnorm"),
                    "    rms = math.sqrt(mean_square + eps / largest / largest)\n",
                    "    rms = largest * math.sqrt(mean_square + eps / largest / largest)\n")
    code = _replace(code, "    output = [s / rms * w for s, w in zip(scaled, weight)]",
                    "    output = [v / rms for v in values]")
    said = _steps(_graded(tmp_path, "rmsnorm", code))
    assert said and not any("rms is" in s for s in said.values()), said
    assert said["worked example"].startswith("largest, scaled, mean_square and rms match the "
                                             "reference's; output is"), said


def test_a_mask_built_from_the_rows_offsets_is_found_at_the_first_row_it_hides(tmp_path):
    """offsets = row * stride + cols, then mask = offsets < n_cols: every row after the first is
    masked off, so nothing stores it. Unwritten rows are recorded step by step too, and the
    cause lists such a mask beside a short grid."""
    code = _replace(solution_text("softmax"),
                    "    offsets = tl.arange(0, BLOCK)\n    mask = offsets < n_cols\n",
                    "    cols = tl.arange(0, BLOCK)\n    offsets = row * input_row_stride + cols\n"
                    "    mask = offsets < n_cols\n")
    code = _replace(code, "tl.load(input_ptr + row * input_row_stride + offsets,",
                    "tl.load(input_ptr + offsets,")
    code = _replace(code, "tl.store(output_ptr + row * output_row_stride + offsets,",
                    "tl.store(output_ptr + row * output_row_stride + cols,")
    result = _graded(tmp_path, "softmax", code, "triton")
    said = _steps(result, "triton")
    assert said["width 17, five rows"].startswith(
        "x, maximum, numerator, denominator and output match the reference's until then; x in "
        "the program of row 1 differs at [0]: -inf"), said
    (part,) = result.parts
    verdict = next(c.verdict for c in part.cases if c.name == "width 17, five rows")
    assert verdict.unwritten_count == 68
    (cause,) = [b.cause for b in verdict.causes if b.key == "grid-too-small"]
    assert "a mask that hides every lane of the later rows" in cause


def test_an_accumulator_divided_inside_the_loop_is_found_as_a_step_the_reference_lacks(
        tmp_path):
    code = _replace(solution_text("attention"), "            m = m_new\n",
                    "            m = m_new\n            acc = [a / l for a in acc]\n")
    code = _replace(code, "out.append([a / l for a in acc])", "out.append(acc)")
    (said,) = _steps(_graded(tmp_path, "attention", code)).values()
    assert "; where the reference goes on to set scores for query row 0, keys 2 to 3, your " \
           "code sets acc again first: its new acc is [" in said


def test_a_loop_written_step_by_step_compares_as_the_comprehension_does(tmp_path):
    code = solution_text("softmax") + '''

def softmax_python(values):
    maximum = values[0]
    for value in values:
        if value > maximum:
            maximum = value
    shifted, numerator = [], []
    for value in values:
        shifted.append(value - maximum)
        numerator.append(math.exp(value - maximum))
    denominator = 0.0
    for n in numerator:
        denominator += n
    output = []
    for n in numerator:
        output.append(n / (2 * denominator))
    return output
'''
    said = _steps(_graded(tmp_path, "softmax", code))
    assert said["worked example"].startswith("maximum, shifted, numerator and denominator "
                                             "match the reference's; output is [0.0450153")


def test_a_difference_after_the_last_named_step_is_said_to_come_after_them(tmp_path):
    code = _replace(solution_text("softmax"), "    return output  # store",
                    "    return [o * 2 for o in output]")
    said = _steps(_graded(tmp_path, "softmax", code))
    assert said["worked example"] == "every named step matches the reference's (maximum, " \
        "shifted, numerator, denominator and output): what differs comes after the last of them"


# ---------------------------------------------------------------------------------------------
# Kernels, in the interpreter: the same steps per program, compared program by program.


def test_a_kernel_maximum_taken_with_min_is_found_in_the_first_program(tmp_path):
    code = _replace(solution_text("softmax"), "maximum = tl.max(x, axis=0)",
                    "maximum = tl.min(x, axis=0)")
    (said,) = _steps(_graded(tmp_path, "softmax", code, "triton"), "triton").values()
    assert said == "x matches the reference's until then; maximum in the program of row 0 " \
                   "is -inf, expected 3"


@loops_in_the_interpreter
def test_a_kernel_sum_over_the_wrong_axis_is_found_at_the_first_block_of_keys(tmp_path):
    code = _replace(solution_text("attention"), "l = l * alpha + tl.sum(p, axis=1)",
                    "l = l * alpha + tl.sum(p, axis=0)")
    (said,) = _steps(_graded(tmp_path, "attention", code, "triton"), "triton").values()
    assert "alpha and p match the reference's until then; l in program (0, 0), key 0 " \
           "differs at [0]: 16, expected 1" in said


@loops_in_the_interpreter
def test_a_kernel_accumulator_not_rescaled_is_found_at_the_second_block_of_keys(tmp_path):
    code = _replace(solution_text("attention"), "acc = acc * alpha[:, None] + tl.dot",
                    "acc = acc + tl.dot")
    (said,) = _steps(_graded(tmp_path, "attention", code, "triton"), "triton").values()
    assert "; acc in program (0, 0), keys 16 to 24 differs at [0][0]" in said


@loops_in_the_interpreter
def test_masked_scores_kept_under_another_name_are_not_the_first_wrong_step(tmp_path):
    # s keeps the raw scores, the masked ones go into a name of the learner's own, and v is
    # read with k's stride: the step that goes wrong is acc, not s
    code = _replace(solution_text("attention"),
                    's = tl.where(visible, s, -float("inf"))',
                    'masked = tl.where(visible, s, -float("inf"))')
    code = _replace(code, "m_new = tl.maximum(m, tl.max(s, axis=1))",
                    "m_new = tl.maximum(m, tl.max(masked, axis=1))")
    code = _replace(code, "p = tl.exp(s - ref[:, None])", "p = tl.exp(masked - ref[:, None])")
    wrong = _replace(code, "cols[:, None] * stride_vn", "cols[:, None] * stride_kn")
    steps = _steps(_graded(tmp_path, "attention", wrong, "triton"), "triton")
    assert steps and all("; acc in program" in said and "s in program" not in said
                         and "your s holds a value of your own" in said
                         for said in steps.values()), steps
    # the same mask left out of p: s's difference reaches p, and s is where it went wrong
    wrong = _replace(code, "p = tl.exp(masked - ref[:, None])", "p = tl.exp(s - ref[:, None])")
    steps = _steps(_graded(tmp_path, "attention", wrong, "triton"), "triton")
    assert steps and all("; s in program" in said and "of your own" not in said
                         for said in steps.values()), steps


def test_a_program_the_grid_never_ran_is_said_to_be_missing_not_to_hold_a_value(tmp_path):
    # one program short: the last row's program never ran, so no value of its steps exists
    code = _replace(solution_text("rmsnorm"), "rmsnorm_kernel[(n_rows,)](",
                    "rmsnorm_kernel[(max(n_rows - 1, 1),)](")
    said = _steps(_graded(tmp_path, "rmsnorm", code, "triton"), "triton")
    assert said, said
    for step in said.values():
        assert "holds from before" not in step, step
        assert re.search(r"nothing of your code ran in the program of row (\d+), where the "
                         r"reference sets \w+: your launch ran no such program$", step), step


@loops_in_the_interpreter
def test_a_kernel_running_maximum_never_updated_is_found_at_the_first_chunk(tmp_path):
    code = _replace(solution_text("online_softmax"), "        m = m_new\n", "")
    (said,) = _steps(_graded(tmp_path, "online_softmax", code, "triton"), "triton").values()
    assert said.startswith("m, s, offsets, m_new and ref match the reference's until then; "
                           "your code does not set m in the program of row 0, the chunk from "
                           "column 0")


@loops_in_the_interpreter
@loops_in_the_interpreter
def test_an_error_in_a_kernel_is_named_as_the_learner_raised_it(tmp_path):
    # Triton's interpreter wraps the kernel's NameError in an InterpreterError of its own
    code = _replace(solution_text("matmul"), "acc += tl.dot(a, b)", "acc += tl.dot(a, bb)")
    said = _steps(_graded(tmp_path, "matmul", code, "triton"), "triton").values()
    assert said and all("raised NameError" in s for s in said), said
    assert not any("InterpreterError" in s for s in said)


@loops_in_the_interpreter
def test_a_kernel_k_loop_of_half_steps_is_found_at_the_step_the_reference_does_not_take(
        tmp_path):
    code = _replace(solution_text("matmul"), "for k0 in range(0, K, BLOCK_K):",
                    "for k0 in range(0, K, BLOCK_K // 2):")
    (said,) = _steps(_graded(tmp_path, "matmul", code, "triton"), "triton").values()
    assert said.startswith("rows, cols, acc, ks, a and b match the reference's until then; "
                           "where the reference goes on to set c in program (0, 0), your code "
                           "sets ks again first: its new ks differs at [0]: 16, where the "
                           "reference still holds 0")


def test_an_eps_left_unscaled_is_found_at_rms_after_three_steps_that_match(tmp_path):
    code = _replace(solution_text("rmsnorm"),
                    "rms = math.sqrt(mean_square + eps / largest / largest)",
                    "rms = math.sqrt(mean_square + eps)")
    said = _steps(_graded(tmp_path, "rmsnorm", code))
    # the reference's 0.62500005 in full: "0.625" would read as a reference without eps
    assert said["worked example"] == "largest, scaled and mean_square match the reference's; " \
                                     "rms is 0.625001, expected 0.62500005"
    # lesson 05 quotes this line: it must be the line the check prints
    lesson = (COURSE_ROOT / "lessons" / "05-rmsnorm.md").read_text(encoding="utf-8")
    assert f'("{said["worked example"]}")' in " ".join(lesson.split())


def test_a_value_is_never_shown_rounded_to_a_shorter_number_farther_off_than_the_tolerance():
    # the lesson's worked row: sqrt(0.390625 + 1e-6 / 16) is 0.6250000499999...
    said = first_step._compared(0.625001, (0.390625 + 1e-6 / 16) ** 0.5, 1e-9, 1e-9)
    assert said == "is 0.625001, expected 0.62500005", said
    # digits that are not zeros stay at the pair's digits: no float noise spelled out
    assert first_step._compared(2.5031, 1.503214724, 1e-9, 1e-9) == "is 2.5031, expected 1.50321"
    # and a short number that is within the tolerance stays short
    assert first_step._compared(2.0, 0.6250000000001, 1e-9, 1e-9) == "is 2, expected 0.625"


def test_a_kernel_mean_over_the_block_not_the_row_is_found_at_mean_square(tmp_path):
    code = _replace(solution_text("rmsnorm"), "mean_square = tl.sum(x * x, axis=0) / n_cols",
                    "mean_square = tl.sum(x * x, axis=0) / BLOCK")
    said = _steps(_graded(tmp_path, "rmsnorm", code, "triton"), "triton")
    assert said["width 3"] == "x matches the reference's until then; mean_square in the " \
                              "program of row 0 is 3.5, expected 4.66667"


def test_a_kernel_dot_product_of_the_wrong_rows_is_found_at_dot(tmp_path):
    code = _replace(solution_text("softmax_backward"), "dot = tl.sum(y * dy, axis=0)",
                    "dot = tl.sum(y * y, axis=0)")
    said = _steps(_graded(tmp_path, "softmax_backward", code, "triton"), "triton")
    assert said["worked row"] == "y and dy match the reference's until then; dot in the " \
                                 "program of row 0 is 0.510543, expected 1.17578"


def test_a_first_kernel_that_subtracts_is_found_at_out_after_its_loads(tmp_path):
    code = _replace(solution_text("elementwise"), "out = tl.maximum(x + y, 0.0)",
                    "out = tl.maximum(x - y, 0.0)")
    said = _steps(_graded(tmp_path, "elementwise", code, "triton"), "triton")
    assert said["n = 10"].startswith("offsets, mask, x and y match the reference's until "
                                     "then; out in program 0 differs at [0]")


def test_a_store_past_the_output_in_a_later_pass_is_not_blamed_on_that_pass_s_offsets(tmp_path):
    # The second pass sets only offsets, so its chunks merge into one step; a run stopped by
    # an error in its first chunk must not be compared with the reference's last chunk.
    code = _replace(solution_text("online_softmax"), "y_row = output_ptr + row * output_row_stride",
                    "y_row = output_ptr + row * input_row_stride")
    said = _steps(_graded(tmp_path, "online_softmax", code, "triton"), "triton")
    assert not any("offsets" in text and "differs" in text for text in said.values()), said


def test_a_backward_p_without_the_scale_is_found_at_the_first_pair(tmp_path):
    code = _replace(solution_text("attention_backward"),
                    "p = math.exp(scale * sum(a * b for a, b in zip(q[i], k[j])) - lse[i])",
                    "p = math.exp(sum(a * b for a, b in zip(q[i], k[j])) - lse[i])")
    said = _steps(_graded(tmp_path, "attention_backward", code))
    assert said["worked example"] == "delta matches the reference's until then; p for query 0 " \
                                     "and key 0 is 0.380639, expected 0.283995"


def test_a_backward_ds_without_d_is_found_after_p_and_dp_match(tmp_path):
    code = _replace(solution_text("attention_backward"), "ds = p * (dp - delta[i])",
                    "ds = p * dp")
    said = _steps(_graded(tmp_path, "attention_backward", code))
    assert said["worked example"] == "delta, p and dp match the reference's until then; ds " \
                                     "for query 0 and key 0 is 0.283995, expected -0.123807"


def test_a_kernel_with_other_tiles_than_the_references_is_not_compared(tmp_path):
    # right tiles of 16 with a mistake in the store: its blocks have other shapes than the
    # reference's tiles of 32, so no step of it stands for one of the reference's
    code = _replace(solution_text("matmul"), "block_m, block_n, block_k = 32, 32, 32",
                    "block_m, block_n, block_k = 16, 16, 16")
    code = _replace(code, "c = acc.to(c_ptr.dtype.element_ty)",
                    "c = (acc + 1.0).to(c_ptr.dtype.element_ty)")
    result = _graded(tmp_path, "matmul", code, "triton")
    assert not result.ok and not _steps(result, "triton")


# ---------------------------------------------------------------------------------------------
# Where nothing can honestly be said, nothing is.


def test_a_function_without_the_lessons_names_gets_no_steps_and_no_extra_run(tmp_path):
    code = solution_text("softmax") + '''

def softmax_python(values):
    top = max(values)
    e = [math.exp(v - top) for v in values]
    return [x / (sum(e) + 1.0) for x in e]
'''
    result = _graded(tmp_path, "softmax", code)
    assert not _steps(result)
    assert not any("first step" in what for _, what in result.timeline)


def test_a_passing_part_runs_no_recording(tmp_path):
    result = _graded(tmp_path, "softmax", solution_text("softmax"))
    assert result.ok and not any("first step" in what for _, what in result.timeline)


def test_a_recording_that_runs_long_is_given_up_within_its_bound(tmp_path):
    # code that waits whenever it is traced: the recording run is stopped at its floor
    # (STEPS_FLOOR_SECONDS, the case itself being quick), and the check says nothing of steps
    import time

    code = _replace(solution_text("softmax"), "    maximum = max(values)  # reduction",
                    "    import sys, time\n    if sys.gettrace() is not None:\n"
                    "        time.sleep(60)\n    maximum = max(values)")
    code = _replace(code, "denominator = sum(numerator)", "denominator = sum(numerator) + 1.0")
    start = time.monotonic()
    result = _graded(tmp_path, "softmax", code)
    assert not result.ok and not _steps(result)
    assert time.monotonic() - start < steps_run.STEPS_FLOOR_SECONDS + 20


def test_json_carries_the_first_step(tmp_path, capsys):
    import json

    from learning import check

    code = _replace(solution_text("softmax"), "denominator = sum(numerator)",
                    "denominator = sum(numerator) + 1.0")
    write_module(tmp_path, "softmax", code)
    assert check.main(["softmax", "--root", str(tmp_path), "--part", "python", "--json"]) == 1
    cases = {c["name"]: c for c in json.loads(capsys.readouterr().out)["parts"][0]["cases"]}
    assert cases["worked example"]["first_step"].endswith("denominator is 2.50321, "
                                                           "expected 1.50321")
    assert cases["overflow"]["first_step"] is None


def _events(*pairs, program=None):
    return [Event(name, value, {} if program is None else {"program": program}, 1)
            for name, value in pairs]


def _compare(ours, theirs, names=("a", "b", "c")):
    reference = Recording(ours, tuple(names))
    learner = Recording(theirs, tuple(n for n in names if any(e.name == n for e in theirs)))
    return first_step.first_difference(reference, learner, names, None, (), 1e-9, 1e-9)


def test_steps_in_another_program_are_never_compared():
    ours = _events(("a", 1.0), ("b", 2.0), program=(0, 0, 0))
    theirs = _events(("a", 1.0), program=(0, 0, 0)) + _events(("b", 3.0), program=(1, 0, 0))
    assert _compare(ours, theirs) == ""
    same = _events(("a", 1.0), ("b", 3.0), program=(0, 0, 0))
    assert _compare(ours, same) == "a matches the reference's; b is 3, expected 2"


def test_steps_of_another_iteration_are_never_compared():
    # the same loop variable with another value: the learner walks the blocks in another
    # order, and its first block is not the reference's first
    ours = [Event("s", [1.0], {"start": 0}, 1), Event("s", [2.0], {"start": 16}, 1)]
    theirs = [Event("s", [2.0], {"start": 16}, 1), Event("s", [1.0], {"start": 0}, 1)]
    ours = [Event("m", 0.0, {}, 1), ours[0], Event("m", 1.0, {}, 2), ours[1]]
    theirs = [Event("m", 0.0, {}, 1), theirs[0], Event("m", 1.0, {}, 2), theirs[1]]
    reference, learner = Recording(ours, ("m", "s")), Recording(theirs, ("m", "s"))
    assert first_step.first_difference(reference, learner, ("m", "s"), None, (), 0, 0) == ""


def test_steps_finer_than_the_lessons_are_not_compared():
    ours = _events(("a", 1.0), ("b", 2.0))
    theirs = _events(*[("a", 0.5), ("b", 0.25)] * 6)
    assert _compare(ours, theirs) == ""


def test_a_cut_recording_claims_no_agreement_but_still_shows_a_difference_before_the_cut():
    ours = _events(("a", 1.0), ("b", 2.0))
    reference = Recording(ours, ("a", "b"))
    learner = Recording(_events(("a", 1.0), ("b", 2.0)), ("a", "b"), cut=True)
    assert first_step.first_difference(reference, learner, ("a", "b"), None, (), 0, 0) == ""
    learner = Recording(_events(("a", 5.0)), ("a", "b"), cut=True)
    assert first_step.first_difference(reference, learner, ("a", "b"), None, (), 0, 0) == \
        "a is 5, expected 1"


def test_values_that_cannot_be_compared_end_the_comparison_silently():
    ours = _events(("a", [1.0, 2.0]))
    assert _compare(ours, _events(("a", "a generator"))) == ""


def test_nan_agrees_only_with_nan():
    nan = float("nan")
    ours = _events(("a", nan), ("b", 1.0))
    assert _compare(ours, _events(("a", 0.0), ("b", 1.0))) == "a is 0, expected nan"
    assert _compare(ours, _events(("a", nan), ("b", 1.0))).startswith("every named step")


def test_the_last_step_alone_is_no_step_by_step():
    # the output built in place, the only name in common: its difference is the output's own
    assert _compare(_events(("a", [1.0, 2.0])), _events(("a", [1.0, 3.0]))) == ""
    # a first step alone still is one
    reference = Recording(_events(("a", [1.0, 2.0]), ("b", 3.0)), ("a", "b"))
    learner = Recording(_events(("a", [1.0, 3.0])), ("a",))
    assert first_step.first_difference(reference, learner, ("a", "b"), None, (), 0, 0) == \
        "a is [1, 3], expected [1, 2]"


def test_a_step_cut_short_by_an_error_is_not_compared_whole():
    ours = [Event("a", 1.0, {}, 1), Event("b", [2.0, 2.0], {}, 2, parts=2)]
    learner = Recording([Event("a", 1.0, {}, 1), Event("b", [0.0, 0.0], {}, 2)], ("a", "b"),
                        raised="IndexError")
    said = first_step.first_difference(Recording(ours, ("a", "b")), learner, ("a", "b"), None,
                                       (), 0, 0)
    assert said == "a matches the reference's until then; your code raised IndexError, before it " \
                   "finished b"


def test_an_error_before_any_step_is_said_without_a_then():
    ours = [Event("a", 1.0, {}, 1), Event("b", 2.0, {}, 2)]
    learner = Recording([], ("a", "b"), raised="TypeError")
    said = first_step.first_difference(Recording(ours, ("a", "b")), learner, ("a", "b"), None,
                                       (), 0, 0)
    assert said == "your code raised TypeError, and never set a"


def test_an_error_after_a_programs_last_step_is_placed_after_that_step():
    # program 3 set every step and then raised (its store): that is where it stopped, not in
    # program 4, which never ran
    def where(loops, args):
        return f"in program {loops['program'][0]}"

    ours = [Event("a", 1.0, {"program": (3,)}, 1), Event("b", 2.0, {"program": (3,)}, 2),
            Event("a", 5.0, {"program": (4,)}, 1), Event("b", 6.0, {"program": (4,)}, 2)]
    learner = Recording(ours[:2], ("a", "b"), raised="IndexError")
    said = first_step.first_difference(Recording(ours, ("a", "b")), learner, ("a", "b"), where,
                                       (), 0, 0)
    assert said == "a and b match the reference's until then; your code raised IndexError " \
                   "after b in program 3, and never set a in program 4"


def test_steps_done_in_another_order_within_a_round_still_compare():
    ours = _events(("a", 1.0), ("b", 2.0), ("c", 3.0), ("a", 4.0), ("b", 5.0), ("c", 6.0))
    theirs = _events(("a", 1.0), ("c", 3.0), ("b", 2.0), ("a", 4.0), ("c", 6.0), ("b", 7.0))
    assert _compare(ours, theirs) == "a, b and c match the reference's; b is 7, expected 5"


# ---------------------------------------------------------------------------------------------
# The recorder: bounded, and alike for a loop and a comprehension.


def _recorded(source: str, tmp_path, name="f", args=([1.0, 2.0, 3.0],), watched=("x", "y")):
    path = tmp_path / f"module_{name}.py"
    path.write_text(source, encoding="utf-8")
    namespace = {}
    exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 - the test's own code
    return named_steps.record(namespace[name], args, watched)


def test_values_the_recorder_cannot_copy_never_raise_into_the_learners_code(tmp_path):
    """range(10**15) as a placeholder, an int past float's range: copying them raised
    MemoryError or OverflowError inside the learner's frame, and the step line then blamed
    their code for an error it never raised."""
    recording = _recorded("def f(v):\n    x = range(10**15)\n    y = 10**400\n"
                          "    x = [e * 2 for e in v]\n    y = sum(x)\n    return y\n", tmp_path)
    assert not recording.raised and not recording.problem, recording
    values = [(e.name, e.value) for e in recording.events]
    assert values[-2:] == [("x", [2.0, 4.0, 6.0]), ("y", 12.0)], values
    assert "too many to keep" in values[0][1] and "could not be read" in values[1][1], values


def test_a_list_built_by_appends_is_one_step_holding_its_last_value(tmp_path):
    recording = _recorded("def f(v):\n    x = []\n    for e in v:\n        x.append(e * 2)\n"
                          "    y = sum(x)\n    return y\n", tmp_path)
    assert [(e.name, e.value) for e in recording.events] == [("x", [2.0, 4.0, 6.0]),
                                                            ("y", 12.0)]


def test_a_recording_stops_at_its_bound_and_says_it_was_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(named_steps, "MAX_EVENTS", 5)
    recording = _recorded("def f(v):\n    for i in range(100):\n        x = i\n        y = i\n"
                          "    return v\n", tmp_path)
    assert recording.cut and len(recording.events) == 5


def test_a_statement_that_raises_records_nothing_for_it(tmp_path):
    recording = _recorded("def f(v):\n    x = 1.0\n    y = 1 / 0\n    return y\n", tmp_path)
    assert [e.name for e in recording.events] == ["x"] and recording.raised == \
        "ZeroDivisionError"


def test_the_lessons_names_are_found_in_the_text_alone():
    source = b"def softmax_python(values):\n    maximum = max(values)\n    return values\n"
    assert named_steps.uses_names(source, "softmax_python", ("maximum",))
    assert not named_steps.uses_names(source, "softmax_python", ("denominator",))
    assert not named_steps.uses_names(b"def softmax_python(:", "softmax_python", ("maximum",))
    redefined = source + b"\ndef softmax_python(values):\n    return values\n"
    assert not named_steps.uses_names(redefined, "softmax_python", ("maximum",))


# ---------------------------------------------------------------------------------------------
# What the learner reads.


def test_check_says_the_first_wrong_step_within_80_columns(tmp_path, capsys):
    from learning import check

    code = _replace(solution_text("attention"), "            m = m_new\n", "")
    write_module(tmp_path, "attention", code)
    check.main(["attention", "--root", str(tmp_path), "--part", "python"])
    out = capsys.readouterr().out
    assert "step by step:" in out
    said = " ".join(out.split())
    assert "where the reference does: the m it holds from before is -inf, expected 0.5" in said
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("exercise", ["softmax", "online_softmax", "attention", "matmul"])
def test_every_declared_step_name_is_set_by_the_reference(exercise):
    from learning.exercises import solution_path

    part = registry.find(exercise).part("python")
    assert part.steps is not None
    source = solution_path(exercise).read_bytes()
    for name in part.steps.names:
        assert named_steps.uses_names(source, part.function, (name,)), name



def test_a_kernels_steps_are_recorded_in_the_interpreter_whatever_the_checks_mode(
        tmp_path, monkeypatch):
    # on a GPU machine the check runs kernels compiled, whose steps are no Python to trace:
    # the recording run asks for the interpreter, as a faulted case's re-run does
    asked = []

    def recorded_run(settings, part, case):
        asked.append((part.name, settings.force_interpret))
        return steps_run.WorkerRun(settings, [])

    monkeypatch.setattr(steps_run, "_steps_run", recorded_run)
    code = _replace(solution_text("softmax"), "maximum = tl.max(x, axis=0)",
                    "maximum = tl.min(x, axis=0)")
    code = _replace(code, "denominator = sum(numerator)", "denominator = sum(numerator) + 1.0")
    write_module(tmp_path, "softmax", code)
    result = runner.grade(registry.find("softmax"), tmp_path, compile_check=False)
    for part_result in result.parts:
        steps_run.first_step_for(result, part_result, code.encode(), force_interpret=False)
    assert asked == [("python", False), ("triton", True)]


def test_where_the_reference_raised_in_its_recording_nothing_is_compared_and_the_note_says_why(
        tmp_path, monkeypatch):
    # Triton 3.6's interpreter with numpy 2.4 raises in the reference kernel's first loop: the
    # steps before it all match, and "every named step matches" would be a false claim
    problem = "Triton 3.6.0's interpreter cannot run loops over program ids with numpy 2.5.2"
    started = [Event("m", [0.0], {"program": (0, 0, 0)}, 71),
               Event("acc", [[0.0]], {"program": (0, 0, 0)}, 73)]
    reference = Recording(list(started), ("m", "acc"), raised="InterpreterError")
    learner = Recording(list(started), ("m", "acc"), raised="InterpreterError")
    assert first_step.first_difference(reference, learner, ("m", "acc"), None, (), 1e-3,
                                       1e-3) == ""

    def recorded_run(settings, part, case):
        run = steps_run.WorkerRun(settings, [])
        run.heard.steps = {named_steps.REFERENCE: reference.as_data(),
                           named_steps.LEARNER: learner.as_data()}
        return run

    monkeypatch.setattr(steps_run, "_steps_run", recorded_run)
    monkeypatch.setattr(mode, "interpreter_problem", lambda: problem)
    code = _replace(solution_text("attention"), "acc = acc * alpha[:, None] + tl.dot",
                    "acc = acc + tl.dot")
    write_module(tmp_path, "attention", code)
    result = runner.grade(registry.find("attention"), tmp_path, ["triton"],
                          compile_check=False)
    (part_result,) = result.parts
    assert part_result.status == "failed"
    assert steps_run.first_step_for(result, part_result, code.encode())
    assert not [c.verdict.first_step for c in part_result.cases if c.verdict.first_step]
    assert f"step by step: not shown for attention_triton: {problem}" in result.notes


def test_a_kernel_max_padded_with_0_is_found_at_x_in_the_padded_lanes(tmp_path):
    code = _replace(solution_text("reductions"), 'mask=mask, other=-float("inf"))',
                    "mask=mask, other=0.0)")
    said = _steps(_graded(tmp_path, "reductions", code, "triton"), "triton")
    assert said, "no step was said"
    assert all(s.startswith("rows matches the reference's until then; x in program ")
               and "expected -inf" in s for s in said.values()), said


def test_a_kernel_mean_over_the_block_is_found_at_centre(tmp_path):
    code = _replace(solution_text("reductions"), "/ n_cols  # (ROWS, 1)", "/ BLOCK  # (ROWS, 1)")
    said = _steps(_graded(tmp_path, "reductions", code, "triton"), "triton")
    assert said, "no step was said"
    assert all(s.startswith("rows and x match the reference's until then; centre in program ")
               for s in said.values()), said


def test_a_mistake_is_ruled_out_by_the_steps_it_would_keep_or_change():
    from learning.grader.declarations import Bug

    rounded = Bug("rounded", "rounded", keeps=("largest", "scaled", "mean_square", "rms"))
    overflow = Bug("square-overflow", "overflow", changes="mean_square")
    plain = Bug("other", "other")
    # the rms differs first: a rounded output keeps it; the mean square matched: no overflow
    matched, differs = ("largest", "scaled", "mean_square"), "rms"
    assert rounded.contradicted_by_steps(matched, differs)
    assert overflow.contradicted_by_steps(matched, differs)
    assert not plain.contradicted_by_steps(matched, differs)
    # only the output differs (or nothing named does): rounding stands; the mean square
    # differing first is where an overflow shows
    assert not rounded.contradicted_by_steps(("largest", "scaled", "mean_square", "rms"),
                                             "output")
    assert not rounded.contradicted_by_steps(("largest",), "")
    assert not overflow.contradicted_by_steps(("largest", "scaled"), "mean_square")


def test_values_are_shown_with_digits_enough_to_tell_every_differing_pair_apart():
    from learning.grader import first_step

    want = [0.09003057317038046, 0.24472847105479767, 0.6652409557748219]
    got = [round(v, 6) for v in want]  # the second and third look alike at six digits
    said = first_step._compared(got, want, 1e-12, 1e-9)
    shown_got, shown_want = said.removeprefix("is ").split(", expected ")
    pairs = zip(shown_got.strip("[]").split(", "), shown_want.strip("[]").split(", "))
    assert all(g != w for g, w in pairs), said
    # equal values and NaN beside NaN ask for no more digits than six
    assert first_step._compared([1.5, float("nan")], [1.25, float("nan")], 0.0, 0.0) == \
        "is [1.5, nan], expected [1.25, nan]"


def test_the_checks_padding_value_read_by_a_step_is_said_for_what_it_is():
    from learning.grader import first_step
    from learning.grader.tensors import PADDING_VALUE

    said = first_step._compared([[1.0, PADDING_VALUE]] * 3, [[1.0, 2.0]] * 3, 1e-6, 1e-6)
    assert "differs at [0][1]: 10000, expected 2" in said
    assert "10000 is what the check stores between the rows of a strided input" in said
    assert "between the rows" in first_step._compared([PADDING_VALUE], [2.0], 1e-6, 1e-6)
    assert "between the rows" not in first_step._compared([3.0], [2.0], 1e-6, 1e-6)


def test_a_name_reused_for_a_value_of_the_learners_own_is_not_taken_for_the_first_wrong_step(
        tmp_path):
    """dy = dy - dot, then dx = y * dy: a step the reference takes under no name, in a program
    whose steps all match. The mistake is row 1's dy, read with y's row stride; the reused
    name in row 0 is not it."""
    code = _replace(solution_text("softmax_backward"), "    dx = y * (dy - dot)\n",
                    "    dy = dy - dot\n    dx = y * dy\n")
    code = _replace(code, "tl.load(dy_ptr + row * dy_row_stride",
                    "tl.load(dy_ptr + row * y_row_stride")
    said = _steps(_graded(tmp_path, "softmax_backward", code, "triton"), "triton")
    assert said, said
    for words in said.values():
        assert "sets dy first" not in words, said
    assert any("dy in the program of row 1 differs" in words for words in said.values()), said


@loops_in_the_interpreter
def test_a_programs_last_steps_under_a_name_the_reference_used_are_passed_over(tmp_path):
    """s = the row's total and m = its maximum as each program ends, then rows read n_cols
    apart: the first wrong step is row 1's, not row 0's reused names."""
    code = _replace(solution_text("online_softmax"),
                    "    x_row = input_ptr + row * input_row_stride\n",
                    "    x_row = input_ptr + row * n_cols\n")
    code = _replace(code, "    total = tl.sum(s * tl.exp(m - row_max), axis=0)\n",
                    "    s = tl.sum(s * tl.exp(m - row_max), axis=0)\n    m = row_max\n"
                    "    total, row_max = s, m\n")
    said = _steps(_graded(tmp_path, "online_softmax", code, "triton"), "triton")
    assert said and not any("first: its" in words for words in said.values()), said
    assert any("in the program of row 1" in words for words in said.values()), said


def test_a_kernel_of_another_name_is_not_said_to_have_left_the_lessons_steps_unset(tmp_path):
    # the lesson's kernel is left in the module, never launched; the learner's own (a wrong
    # one) sets the same names: nothing of the lesson's kernel ran, so nothing is said of it
    mine = solution_text("softmax").replace("softmax_kernel", "my_softmax_kernel")
    mine = _replace(mine, "maximum = tl.max(x, axis=0)", "maximum = tl.min(x, axis=0)")
    code = solution_text("softmax") + "\n\n" + mine  # later definitions win
    result = _graded(tmp_path, "softmax", code, "triton")
    (part,) = result.parts
    assert part.status == "failed"
    said = _steps(result, "triton")
    assert not any("not set" in s or "had not set" in s for s in said.values()), said


# ---------------------------------------------------------------------------------------------
# Steps kept in base 2 (scores times log2(e), for exp2), as lessons 08 and 13 show: right, and
# the walk goes on past them to the step that is wrong.


@loops_in_the_interpreter
def test_base_two_scores_are_right_and_the_rescale_taken_with_exp_is_found(tmp_path):
    code = _replace(solution_text("attention"), "s = tl.dot(q, tl.trans(k)) * scale",
                    "s = tl.dot(q, tl.trans(k)) * (scale * 1.4426950408889634)")
    code = _replace(code, "p = tl.exp(s - ref[:, None])", "p = tl.exp2(s - ref[:, None])")
    # the mistake: alpha left as exp, of base-2 maxima
    said = _steps(_graded(tmp_path, "attention", code, "triton"), "triton")
    assert said, "no step said"
    first = next(iter(said.values()))
    assert "; alpha in program (0, 0)" in first and "differs" in first, first
    assert "times log2(e) = 1.4427, in base 2 for exp2: taken as right" in first, first


def test_base_two_values_that_come_back_to_the_reference_leave_every_step_right(tmp_path):
    code = _replace(solution_text("softmax"), "x = x.to(tl.float32)",
                    "x = x.to(tl.float32) * 1.4426950408889634")
    code = _replace(code, "numerator = tl.exp(x - maximum)", "numerator = tl.exp2(x - maximum)")
    # the mistake: the numerator stored instead of the output
    code = _replace(code, "offsets, output, mask=mask)", "offsets, numerator, mask=mask)")
    said = _steps(_graded(tmp_path, "softmax", code, "triton"), "triton")
    assert said, "no step said"
    assert all(s.startswith("every named step matches the reference's") and
               "x and maximum are the reference's times log2(e)" in s for s in said.values()), \
        said


def test_a_step_scaled_by_another_number_still_differs(tmp_path):
    code = _replace(solution_text("softmax"), "x = x.to(tl.float32)",
                    "x = x.to(tl.float32) * 1.5")
    said = _steps(_graded(tmp_path, "softmax", code, "triton"), "triton")
    assert said and all(s.startswith("x in the program of row") for s in said.values()), said
