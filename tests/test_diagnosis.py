"""The grader states only true causes: the submissions a new learner wrote, each with the
diagnosis it must get case by case, and the pieces that make a diagnosis (what an error
means, what a wrong output looks like) fed wrong answers of their own."""

import math
import re

import numpy as np
import pytest

from learning.grader import errors, observe, stuck
from tests.helpers import (
    COURSE_ROOT,
    compiler_names_every_rejection,
    failing_bugs,
    grade_text,
    solution_text,
    write_module,
)


def _cases(result, part=None):
    (part_result,) = [p for p in result.parts if part is None or p.part.name == part]
    return {c.name: c.verdict for c in part_result.cases}


def _causes(verdict) -> set[str]:
    return {bug.key for bug in verdict.causes}


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


# ---------------------------------------------------------------------------------------------
# Submissions: what the learner wrote, and what each case must say about it.


def test_sum_of_shifted_values_is_named_where_it_divides_by_zero(tmp_path):
    code = _replace(solution_text("softmax"), "denominator = sum(numerator)",
                    "denominator = sum(shifted)")
    cases = _cases(grade_text(tmp_path, "softmax", code, ["python"]))
    for name in ("overflow", "single element", "equal values"):
        assert cases[name].status == "error"
        assert "ZeroDivisionError" in cases[name].summary
        assert cases[name].meaning_key == "division-by-zero"
        # The designed bugs of these cases (no max shift, one output per input) are not claimed.
        assert _causes(cases[name]) == {"summed-shifted"}, name
        assert "softmax.py, line" in cases[name].where


def test_a_missing_max_shift_is_not_blamed_on_another_division_by_zero(tmp_path):
    code = _replace(solution_text("softmax"), "numerator = [math.exp(s) for s in shifted]",
                    "numerator = [math.exp(v) for v in values]")
    cases = _cases(grade_text(tmp_path, "softmax", code, ["python"]))
    assert cases["overflow"].meaning_key == "math-range"
    assert _causes(cases["overflow"]) == {"no-max-shift"}
    # [-1000, -1000] divides by zero, as a sum of shifted values would; the learner passed the
    # worked example, which that bug fails, so it is not named.
    assert _causes(cases["underflow"]) == {"no-max-shift"}


def test_store_given_other_is_explained_and_no_padding_bug_is_claimed(tmp_path, capsys):
    code = _replace(solution_text("softmax"),
                    "tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)",
                    "tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask,"
                    " other=-float('inf'))")
    result = grade_text(tmp_path, "softmax", code, ["triton"])
    raised = [v for v in _cases(result).values() if v.status == "error"]
    assert raised and all(v.meaning_key == "store-other" and not v.causes for v in raised)


def test_a_block_that_is_not_a_power_of_two_is_not_called_out_of_bounds(tmp_path):
    code = _replace(solution_text("elementwise"), "    BLOCK = 1024\n", "    BLOCK = n\n")
    cases = _cases(grade_text(tmp_path, "elementwise", code, ["triton"]))
    assert cases["n = 17"].meaning_key == "arange-power-of-two"
    assert not cases["n = 17"].causes
    assert cases["n = 1024"].passed  # 1024 is a power of two: that case runs as it should


def _out_of_bounds_cause(verdict) -> str:
    (bug,) = [b for b in verdict.causes if b.key == "out-of-bounds"]
    return bug.cause


def test_an_access_with_no_mask_is_told_so_only_where_its_lanes_run_off_the_end(tmp_path, mode):
    if not mode.interpret:
        pytest.skip("the interpreter sees the access had no mask; compiled, a lane past the end "
                    "reads or writes unseen")
    solution = solution_text("elementwise")
    unmasked_load = _replace(solution, "x = tl.load(x_ptr + offsets, mask=mask)",
                             "x = tl.load(x_ptr + offsets)")
    unmasked_store = _replace(solution, "tl.store(out_ptr + offsets, out, mask=mask)",
                              "tl.store(out_ptr + offsets, out)")
    # Masked, but the mask lets one lane too many through: no claim of a missing mask.
    loose_mask = _replace(solution, "mask = offsets < n", "mask = offsets <= n")
    # No mask, and the block starts past the data: the offsets are wrong, not only the mask.
    far_offsets = _replace(unmasked_load, "x = tl.load(x_ptr + offsets)",
                           "x = tl.load(x_ptr + offsets + 4096)")
    # No mask, a block of 16 for 17 elements: the second block runs off the end, but a block
    # of 16 fits in the tensor, so offsets starting too far along would do the same.
    narrow = _replace(unmasked_load, "    BLOCK = 1024\n", "    BLOCK = 16\n")
    said = {}
    for name, code, case in (("load", unmasked_load, "n = 10"),
                             ("store", unmasked_store, "n = 10"),
                             ("loose", loose_mask, "n = 10"), ("far", far_offsets, "n = 10"),
                             ("narrow", narrow, "n = 17")):
        folder = tmp_path / name
        folder.mkdir()
        verdict = _cases(grade_text(folder, "elementwise", code, ["triton"]))[case]
        assert verdict.status == "error", name
        said[name] = (verdict.summary, _out_of_bounds_cause(verdict))
    # 1024 lanes for 10 elements: no offsets fit, the mask is what is missing.
    for kind in ("load", "store"):
        summary, cause = said[kind]
        assert summary.endswith(f"the {kind} has no mask, and its lanes run on from inside the "
                                "tensor past its end, more lanes than the tensor has elements"
                                ), summary
        assert cause.startswith(f"the {kind} on that line has no mask, so every lane of its "
                                "block"), cause
        assert "more lanes than the tensor has elements" in cause and "one of" not in cause
        # other= is a load's: a store's cause says nothing of it
        assert ("other=" in cause) == (kind == "load"), cause
    summary, cause = said["narrow"]
    assert summary.endswith("the load has no mask, and its lanes run on from inside the tensor "
                            "past its end"), summary
    assert cause.startswith("the load on that line has no mask") and "It comes from one of: " \
        "a block that reaches past the data it covers" in cause, cause
    for name in ("loose", "far"):
        summary, cause = said[name]
        assert "no mask" not in cause and "cannot tell" in cause, (name, cause)
    assert said["loose"][0].endswith("check the offsets and the mask")
    assert said["far"][0].endswith("the load has no mask (every lane is active): check the "
                                   "offsets"), said["far"][0]


@pytest.mark.compile_check
@pytest.mark.skipif(not compiler_names_every_rejection(),
                    reason="Triton 3.3's compiler crashes on an if on a block instead of naming it")
def test_an_if_on_a_block_that_the_compiler_rejects_is_the_cause_of_the_cases_it_made_fail(
        tmp_path, mode):
    if not mode.interpret:
        pytest.skip("compiled, the kernel never runs: the GPU rejects the `if` itself")
    code = _replace(solution_text("elementwise"), "    out = tl.maximum(x + y, 0.0)\n",
                    "    out = x + y\n    if out < 0:\n        out = 0.0 * out\n")
    result = grade_text(tmp_path, "elementwise", code, ["triton"], compile_check=True)
    (part,) = result.parts
    assert part.compile_check is not None and part.compile_check.rejected
    failing = [c.verdict for c in part.cases if c.verdict.status == "failed"]
    assert failing and all(_causes(v) == {"if-on-a-block"} for v in failing)
    line = code.splitlines().index("    if out < 0:") + 1
    assert f"(add_relu_kernel, line {line})" in failing[0].causes[0].cause


def test_a_compiled_runs_out_of_bounds_verdict_learns_the_missing_mask_from_its_map(
        tmp_path, mode):
    """On a GPU a store past the end lands in the guard bands: out-of-bounds, cause unknown.
    The map's run in the interpreter sees the store had no mask; the case then says so."""
    if not mode.interpret:
        pytest.skip("the interpreter's run gives the evidence; graded here in the interpreter, "
                    "the compiled verdict is stood in for")
    from learning.grader import compare, map_run

    code = _replace(solution_text("elementwise"), "tl.store(out_ptr + offsets, out, mask=mask)",
                    "tl.store(out_ptr + offsets, out)")
    result = grade_text(tmp_path, "elementwise", code, ["triton"])
    (part,) = result.parts
    case = next(c for c in part.cases if c.name == "n = 10")
    # what a compiled run's guard bands give: the generic cause
    case.verdict.causes = (compare.COMMON_BUGS["out-of-bounds"],)
    other = next(c for c in part.cases if c.name == "n = 17")
    other.verdict.causes = (compare.COMMON_BUGS["out-of-bounds"],)
    drawn = map_run.map_for_check(result, "n = 10")  # the map's own run, in the interpreter
    assert drawn.learner is not None and drawn.learner.stopped.startswith("OutOfBoundsAccess")
    (cause,) = case.verdict.causes
    line = code.splitlines().index("    tl.store(out_ptr + offsets, out)") + 1
    # the compiled verdict shows no line of its own: the cause names it
    assert cause.key == "out-of-bounds" and cause.cause.startswith(
        f"the store at line {line} of your kernel has no mask"), cause.cause
    assert other.verdict.causes == (compare.COMMON_BUGS["out-of-bounds"],)  # not its map
    # a map that stopped for another reason changes nothing
    case.verdict.causes = (compare.COMMON_BUGS["out-of-bounds"],)
    map_run._unmasked_seen(result, "triton", "n = 10", "OutOfBoundsAccess: out-of-bounds "
                           "store: 2 of 4 active lanes ...; check the offsets and the mask")
    assert case.verdict.causes == (compare.COMMON_BUGS["out-of-bounds"],)


def test_a_tree_that_never_advances_times_out_without_a_cause(tmp_path):
    code = _replace(solution_text("reductions"),
                    "        level = [combine(op, level[i], level[i + 1]) "
                    "for i in range(0, len(level), 2)]\n        levels.append(level)",
                    "        levels.append([combine(op, level[i], level[i + 1]) "
                    "for i in range(0, len(level), 2)])")
    result = grade_text(tmp_path, "reductions", code, ["python"], case_seconds=1.5)
    stopped = [v for v in _cases(result).values() if v.status == "timed-out"]
    assert stopped and not stopped[0].causes
    assert "did not finish within 1.5 s" in stopped[0].summary
    assert "never turns false" in stopped[0].summary


def test_a_name_error_is_the_same_error_in_every_case_and_blames_no_formula(tmp_path, capsys):
    code = _replace(solution_text("rmsnorm"),
                    "rms = math.sqrt(mean_square + eps / largest / largest)",
                    "rms = math.sqrt(mean_sqaure + eps / largest / largest)")
    result = grade_text(tmp_path, "rmsnorm", code, ["python"])
    cases = _cases(result)
    raised = [v for v in cases.values() if v.status == "error"]
    assert len(raised) >= 9
    assert all(v.meaning_key == "name-not-defined" and not v.causes for v in raised)
    assert "mean_sqaure" in raised[0].meaning

    from rich.console import Console

    from learning.grader import report

    console = Console(width=80, record=True, color_system=None)
    report.render(console, result)
    text = console.export_text()
    assert text.count("Traceback") == 1  # shown once in full, then referred to
    assert text.count("the same error as case 'worked example' above") == len(raised) - 1
    assert "likely cause" not in text


def test_float32_arithmetic_in_python_is_described_not_misdiagnosed(tmp_path):
    code = solution_text("softmax") + '''

import struct


def float32(v):  # rounded to the nearest float32, in plain Python
    return struct.unpack("f", struct.pack("f", v))[0]


def softmax_python(values):
    x = [float32(v) for v in values]
    maximum = max(x)
    e = [float32(math.exp(float32(v - maximum))) for v in x]
    total = float32(sum(e))
    return [float32(v / total) for v in e]
'''
    cases = _cases(grade_text(tmp_path, "softmax", code, ["python"]))
    failed = [v for v in cases.values() if v.status == "failed"]
    assert failed and all(not v.causes for v in failed)
    assert any("float32 rounding" in o for v in failed for o in v.observations)


def test_a_rounded_intensity_is_described_not_blamed_on_the_byte_count(tmp_path):
    code = solution_text("traffic") + '''

def arithmetic_intensity(flops, nbytes):
    return round(flops / nbytes, 3)
'''
    cases = _cases(grade_text(tmp_path, "traffic", code))
    failed = [v for v in cases.values() if v.status == "failed"]
    assert failed and all(not v.causes for v in failed)
    said = " ".join(o for v in failed for o in v.observations)
    assert "'intensity'" in said and "rounded to 3 decimal places" in said
    assert "'bytes'" in said and "agree with the reference" in said


def test_memory_bound_at_the_ridge_is_caught(tmp_path):
    code = _replace(solution_text("traffic"), "if intensity < ridge", "if intensity <= ridge")
    cases = _cases(grade_text(tmp_path, "traffic", code))
    assert _causes(cases["at the ridge point"]) == {"wrong-bound"}
    assert sum(not v.passed for v in cases.values()) == 1


@pytest.mark.interpreter  # named from the bounds check's words; a GPU reads past the weight
def test_the_weight_loaded_at_the_row_offset_is_named_as_such(tmp_path):
    code = _replace(solution_text("rmsnorm"), "weight_ptr + offsets",
                    "weight_ptr + row * input_row_stride + offsets")
    cases = _cases(grade_text(tmp_path, "rmsnorm", code, ["triton"]))
    assert "weight-row-offset" in _causes(cases["many rows"])
    assert "row-stride" not in {k for v in cases.values() for k in _causes(v)}


@pytest.mark.interpreter  # the bounds check's words
def test_a_mask_off_by_one_past_the_weight_is_not_named_a_row_offset(tmp_path):
    # One lane past the weight's end, as every load of a mask with <= reads: not the weight
    # read at the row's offset, which puts every lane of a later row past it.
    code = _replace(solution_text("rmsnorm"), "mask = offsets < n_cols", "mask = offsets <= n_cols")
    cases = _cases(grade_text(tmp_path, "rmsnorm", code, ["triton"]))
    # (programs run last to first: the last row's load of x is refused first, one lane past
    # x's end, where the first row's would have been refused at the weight's)
    assert re.search(r"past the end of (weight|input_ptr)", cases["many rows"].summary)
    named = {k for v in cases.values() for k in _causes(v)}
    assert "out-of-bounds" in named and "weight-row-offset" not in named


@pytest.mark.interpreter  # named from the bounds check's words; a GPU reads past dy's value
def test_a_backward_that_keeps_an_expanded_dy_fails_the_lessons_own_example(tmp_path):
    code = solution_text("softmax_backward")
    code = _replace(code, "        if dy.stride(1) != 1:  # y.sum().backward() sends an expanded "
                          "dy whose strides are 0\n            dy = dy.contiguous()\n", "")
    code = _replace(code, "    if y.stride(1) != 1 or dy.stride(1) != 1:", "    if False:")
    cases = _cases(grade_text(tmp_path, "softmax_backward", code, ["autograd"]))
    verdict = cases["dy from y.sum()"]
    assert not verdict.passed
    assert "dy-not-contiguous" in _causes(verdict)


def test_several_matching_replays_are_all_named(tmp_path, capsys):
    # Counting each array once and once per kernel agree for one in-place kernel.
    code = solution_text("traffic") + '''

def bytes_moved(kernels, arrays, element_bytes):
    names = {name for kernel in kernels for name in kernel["reads"] + kernel["writes"]}
    return sum(arrays[name] for name in names) * element_bytes
'''
    result = grade_text(tmp_path, "traffic", code)
    assert _causes(_cases(result)["in-place update"]) == {"counted-once", "in-place-once"}

    from rich.console import Console

    from learning.grader import report

    console = Console(width=80, record=True, color_system=None)
    report.render(console, result)
    assert "likely cause, one of:" in console.export_text()


@pytest.mark.compile_check
def test_a_wrong_output_no_replay_explains_says_what_differs(tmp_path, capsys, mode):
    code = _replace(solution_text("softmax"), "output = numerator / denominator",
                    "output = numerator / (denominator + 0.01)")
    result = grade_text(tmp_path, "softmax", code, ["triton"])
    failed = [v for v in _cases(result).values() if v.status == "failed"]
    assert failed and all(not v.causes and v.observations for v in failed)

    from rich.console import Console

    from learning.grader import report

    console = Console(width=80, record=True, color_system=None)
    report.render(console, result)
    text = console.export_text()
    assert "no known mistake gives this output; what differs:" in text
    assert "each row is the reference's row times its own number" in text
    assert "likely cause" not in text
    assert "exactly what a known mistake gives" not in text  # no replay gives this output
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    compile_lines = [i for i, line in enumerate(lines) if "GPU compile" in line]
    # the GPU compile check follows an interpreted run; on a GPU the kernels compiled anyway
    assert compile_lines or not mode.interpret
    if compile_lines:
        follow = lines[compile_lines[0] + 1]
        assert follow.startswith(" " * 10) or "cases passed" in follow  # wrapped under its case
        # the count says the compile check is a check of its own, not one of its cases
        assert "cases passed; the GPU compile check passed" in text


def test_bfloat16_arithmetic_in_the_interpreter_is_said_and_names_no_cause(tmp_path, mode):
    if not mode.interpret:
        pytest.skip("compiled, bfloat16 arithmetic is the GPU's and right")
    from rich.console import Console

    from learning.grader import report

    # a bfloat16 accumulator: the interpreter adds its raw bits
    code = _replace(solution_text("matmul"),
                    "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                    "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.bfloat16)")
    code = _replace(code, "acc += tl.dot(a, b)", "acc += tl.dot(a, b).to(tl.bfloat16)")
    result = grade_text(tmp_path, "matmul", code, ["triton"])
    failed = [v for v in _cases(result).values() if v.status == "failed"]
    assert len(failed) >= 2
    assert all(v.interpreter_fault and not v.causes and not v.observations for v in failed)
    console = Console(width=80, record=True, color_system=None)
    report.render(console, result)
    text = console.export_text()
    assert text.count("keeps a bfloat16 value as its 16 raw bits") == 1  # in full once
    assert text.count("in the interpreter:") == len(failed)
    assert "likely cause" not in text and "no known mistake" not in text
    assert max(len(line) for line in text.splitlines()) <= 80

    # rounded through bfloat16 by conversions alone, which the interpreter gets right: the
    # failures are the kernel's, told as any other
    code = _replace(solution_text("matmul"), "c = acc.to(c_ptr.dtype.element_ty)",
                    "c = acc.to(tl.bfloat16).to(c_ptr.dtype.element_ty)")
    result = grade_text(tmp_path, "matmul", code, ["triton"])
    failed = [v for v in _cases(result).values() if v.status == "failed"]
    assert failed and not any(v.interpreter_fault for v in failed)


def test_a_mistake_that_agrees_with_a_known_one_on_a_case_is_told_so_not_named(tmp_path):
    # range(0, k - 1, block) drops the last K block only where K % block is 1: on the worked
    # example (K 3, tiles of 2) it gives exactly what the catalogued K loop stopping at the last
    # whole block gives, but the learner passed a case that mistake fails
    code = _replace(solution_text("matmul"), "for k0 in range(0, k, block):",
                    "for k0 in range(0, k - 1, block):")
    cases = _cases(grade_text(tmp_path, "matmul", code, ["python"]), "python")
    worked = cases["worked example"]
    assert worked.status == "failed" and not worked.causes
    said = " ".join(worked.observations)
    assert "exactly what a known mistake gives (the K loop stops at the last whole block" in said
    assert "but your code passed case '" in said and "which that mistake fails" in said
    named = [line for line in worked.observations if "known mistake" in line]
    passed = re.search(r"passed case '([^']+)'", named[0]).group(1)
    assert cases[passed].passed  # the case it names is one the learner did pass


def test_a_mistake_of_several_forms_is_named_only_where_one_form_gives_every_output():
    # Two tile sizes of one mistake, as the K loop's replays try them: the first case's output
    # is what the tile of 2 gives, the second's what the tile of 4 gives. Code with that mistake
    # has one tile size, so no one program gives both: the mistake is not the learner's.
    from learning.grader.declarations import Bug
    from learning.grader.replays import WrongOutput, any_of, no_one_form, same_as

    def k_short(tile):  # the sum of the first whole tiles of x only
        return same_as(lambda x, t=tile: np.array([x[:len(x) // t * t].sum()]))

    bug = Bug("k-short", "the K loop stops at the last whole block: fix it",
              any_of(k_short(2), k_short(4)))

    def case(x):
        x = np.array(x, dtype=float)
        return x, np.array([x.sum()])

    five, six, seven = case([1, 2, 3, 4, 5]), case([1, 2, 3, 4, 5, 6]), case(range(1, 8))
    # seven values: a tile of 2 keeps six of them (21), a tile of 4 four (10); six values: a
    # tile of 4 keeps four (10), a tile of 2 all (right); five: either keeps four (10)
    by_two = WrongOutput(np.array([21.0]), (seven[0],), seven[1], 1e-9, 1e-9)
    by_four = WrongOutput(np.array([10.0]), (six[0],), six[1], 1e-9, 1e-9)
    by_either = WrongOutput(np.array([10.0]), (five[0],), five[1], 1e-9, 1e-9)
    assert bug.detect(*by_two[:3]) and bug.detect(*by_four[:3])  # each alone is explained
    assert no_one_form(bug, [by_two, by_four])  # ... by different tile sizes
    assert not no_one_form(bug, [by_two, by_either])  # one tile of 2 gives both
    assert not no_one_form(bug, [by_four])  # a single output is no evidence against it


def test_a_k_loop_one_step_short_is_not_named_the_k_tail_by_other_tile_sizes(tmp_path):
    # range(0, K - BLOCK_K, BLOCK_K) with tiles of 32 always drops the last step: at K = 32 its
    # output is what dropping the partial step gives with tiles of 64, at K = 45 what it gives
    # with tiles of 32. No one tile size gives both, so that mistake is not named for it.
    code = _replace(solution_text("matmul"), "    for k0 in range(0, K, BLOCK_K):",
                    "    for k0 in range(0, K - BLOCK_K, BLOCK_K):")
    cases = _cases(grade_text(tmp_path, "matmul", code, ["triton"]), "triton")
    failed = [c for c in cases.values() if c.status == "failed"]
    assert len(failed) > 2
    assert not any(b.key == "k-loop-short" for c in failed for b in c.causes)
    assert any("no one form of it gives your outputs in every case" in " ".join(c.observations)
               for c in failed)


def test_a_ruled_out_mistake_names_the_passed_case_its_replay_or_its_error_fails():
    from learning.grader import judging
    from learning.grader.replays import Expected

    class Fails:  # predicts a failure on every case
        def predicts_failure(self, *case):
            return True

    class Passes:
        def predicts_failure(self, *case):
            return False

    passed = Expected((), np.zeros(2), 1e-12, 1e-9)
    names = {id(passed): "no edge anywhere"}

    def said(detect, raises):
        bug = type("B", (), {"cause": "the K loop stops early: fix it", "detect": detect,
                             "raises": raises})()
        return judging._ruled_out(bug, [passed], names)

    for detect, raises in ((Fails(), None), (Passes(), Fails())):  # by its replay, its error
        assert "passed case 'no edge anywhere', which that mistake fails" in said(detect, raises)
        assert "(the K loop stops early)" in said(detect, raises)
    assert "wrong in different ways" in said(Passes(), None)  # ruled out by another output


def test_a_failure_points_at_the_hint_the_command_then_shows(tmp_path, capsys):
    from learning import check

    code = _replace(solution_text("softmax"), "denominator = sum(numerator)",
                    "denominator = sum(shifted)")
    write_module(tmp_path, "softmax", code)
    check.main(["softmax", "--root", str(tmp_path), "--part", "python"])
    out = capsys.readouterr().out
    assert "hint 3 of 4 helps with this: python -m learning.check softmax --part python " \
           "--hint 3" in " ".join(out.split())
    assert check.main(["softmax", "--root", str(tmp_path), "--part", "python", "--hint",
                       "3"]) == 0
    shown = capsys.readouterr().out
    assert "Hint 3 of 4" in shown and "sum(numerator)" in shown
    assert check.main(["softmax", "--root", str(tmp_path), "--hint", "9"]) == 2
    assert "has 4 hints, so there is no hint 9" in capsys.readouterr().out


def test_a_hint_is_not_repeated_once_the_exercise_passes(tmp_path, capsys):
    from learning import check

    write_module(tmp_path, "traffic", solution_text("traffic"))
    assert check.main(["traffic", "--root", str(tmp_path)]) == 0
    capsys.readouterr()
    assert check.main(["traffic", "--root", str(tmp_path), "--hint"]) == 0
    assert "Every part of traffic passes" in capsys.readouterr().out
    assert check.main(["traffic", "--root", str(tmp_path), "--hint", "2"]) == 0
    assert "Hint 2 of 4" in capsys.readouterr().out
    # the file put back to the stub by hand (git checkout): the pass recorded is another
    # text's, and the stuck learner gets the next hint, not "passes"
    stub = (COURSE_ROOT / "learning" / "exercises" / "traffic" / "stub.py").read_text(
        encoding="utf-8")
    write_module(tmp_path, "traffic", stub)
    assert check.main(["traffic", "--root", str(tmp_path), "--hint"]) == 0
    out = capsys.readouterr().out
    assert "Every part of traffic passes" not in out and "Hint 3 of 4" in out, out


# ---------------------------------------------------------------------------------------------
# What an exception means: each entry against the message its library really words.


@pytest.mark.parametrize("exc_type, message, key", [
    ("ValueError", "arange's range must be a power of 2", "arange-power-of-two"),
    ("ValueError", "arange's arguments must be of type tl.constexpr", "arange-constexpr"),
    ("TypeError", "store() got an unexpected keyword argument 'other'", "store-other"),
    ("TypeError", "add_relu_kernel() missing 1 required positional argument: 'n'",
     "missing-argument"),
    ("TypeError", "ar() got multiple values for argument 'BLOCK'", "multiple-values"),
    ("TypeError", "object of type 'int' has no len()", "grid-not-tuple"),
    # math.exp on a block: numpy's words in the interpreter, the compiler's on a GPU
    ("TypeError", "only 0-dimensional arrays can be converted to Python scalars",
     "one-number-function"),
    ("TypeError", "only length-1 arrays can be converted to Python scalars",
     "one-number-function"),
    ("CompilationError", "TypeError('must be real number, not tensor')", "one-number-function"),
    ("TypeError", "unexpected type fp32", "floor-division-float"),
    ("ValueError", "Cannot make_shape_compatible: incompatible dimensions at index 1: 32 and 4",
     "shapes-incompatible"),
    ("RuntimeError", "The size of tensor a (3) must match the size of tensor b (4) at "
     "non-singleton dimension 0", "torch-shapes"),
    ("ValueError", "Expected dtype ['fp32', 'fp64'] but got fp16", "float-dtype"),
    ("ValueError", "axis 1 out of bounds for shape ['constexpr[16]']", "reduction-axis"),
    ("ZeroDivisionError", "float division by zero", "division-by-zero"),
    ("OverflowError", "math range error", "math-range"),
    ("OverflowError", "(34, 'Numerical result out of range')", "math-range"),  # x ** 2
    ("IndexError", "list index out of range", "list-index"),
    ("IndexError", "list assignment index out of range", "list-index"),
    ("NameError", "name 'mean_sqaure' is not defined", "name-not-defined"),
    ("NameError", "rsqrt is not defined", "name-not-defined"),  # compiled Triton's words
    ("ValueError", "invalid axis 1. Expected -1 <= axis < 1", "reduction-axis"),
    ("UnboundLocalError", "cannot access local variable 'total' where it is not associated "
     "with a value", "unbound-local"),
    ("KeyError", "'inputs'", "key-error"),
    ("RuntimeError", "0 active drivers ([]). There should only be one.", "no-gpu-driver"),
    ("ValueError", "`other` cannot be provided without `mask`", "other-without-mask"),
    # measured on an H100, Triton 3.6: a kernel parameter named params
    ("TypeError", "failed to specialize argument of type: dict", "dict-argument"),
])
def test_an_error_is_explained_by_what_its_words_mean(exc_type, message, key):
    explained = errors.explain(exc_type, message)
    assert explained is not None and explained[0] == key
    assert "{" not in explained[1]  # every placeholder filled from the message


def test_an_unexpected_type_that_is_no_float_is_not_called_floor_division():
    assert errors.explain("TypeError", "unexpected type pointer<fp32>") is None or \
        errors.explain("TypeError", "unexpected type pointer<fp32>")[0] != "floor-division-float"


def test_an_unknown_error_gets_no_meaning():
    assert errors.explain("TypeError", "must be real number, not list") is None
    assert errors.explain("ValueError", "something only this learner's code says") is None


def test_the_learners_line_is_the_last_frame_of_their_file():
    traceback = ('Traceback (most recent call last, your code only):\n'
                 '  File "/course/softmax.py", line 55, in softmax_triton\n'
                 '    softmax_kernel[(n_rows,)](output, x)\n'
                 '  File "/course/softmax.py", line 43, in softmax_kernel\n'
                 '    tl.store(output_ptr + offsets, output, other=0)\n'
                 "TypeError: store() got an unexpected keyword argument 'other'\n")
    assert errors.learner_line(traceback, "softmax.py") == (
        "softmax.py, line 43 (softmax_kernel): tl.store(output_ptr + offsets, output, other=0)")
    assert errors.learner_line(traceback, "rmsnorm.py") == ""


# ---------------------------------------------------------------------------------------------
# What a wrong output looks like: each description against an output made to have it.


def _want():
    return np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])


_SIGNS = np.array([[1, -1, 1], [-1, 1, -1], [1, 1, -1]])  # rounding goes both ways


def test_a_float32_sized_error_is_named_as_float32_rounding():
    want = _want()
    said = observe.describe_values(want * (1 + 3e-8 * _SIGNS), want, 1e-12, 1e-9)
    assert any("float32 rounding" in s for s in said)


def test_a_small_scale_of_a_row_with_both_signs_is_not_named_rounding():
    # Every value 3e-7 larger in magnitude, as an eps scaled wrongly gives: the differences
    # take both signs, but all point away from zero, which rounding does not do.
    want = np.array([[-1.6, 0.6, 0.9, -0.2]])
    said = observe.describe_values(want * (1 + 3e-7), want, 1e-12, 1e-9)
    assert any("largest relative difference" in s for s in said)
    assert not any("rounding" in s for s in said)


def test_a_float16_sized_error_is_named_as_float16_rounding_only_for_float16_data():
    want = _want()
    noisy = want * (1 + 1e-3 * _SIGNS)
    said = observe.describe_values(noisy, want, 1e-6, 1e-5, dtype="float16")
    assert any("float16 rounding" in s for s in said)
    # Python floats or float32 tensors hold no float16 anywhere: the size alone is said.
    assert not any("rounding" in s for s in observe.describe_values(noisy, want, 1e-6, 1e-5))


def test_an_error_all_one_way_is_not_called_rounding():
    want = _want()
    said = observe.describe_values(want * (1 + 1e-3), want, 1e-6, 1e-5)
    assert not any("rounding" in s for s in said)
    assert "every value is the reference times 1.001" in said


def test_a_reference_of_zero_to_within_the_tolerance_gives_no_scale(tmp_path):
    """softmax's gradient for a uniform dy is 0: the reference's float64 noise (1e-17) over the
    learner's wrong values is a constant ratio, and no pattern a learner could use."""
    y = np.array([[0.1, 0.2, 0.3, 0.4]])
    noise, wrong = y * -7e-17, y * 0.75
    said = observe.describe_values(wrong, noise, 1e-9, 1e-9)
    assert said and not any("times" in s for s in said), said
    # where the reference is not zero, the same ratio is said
    assert "every value is the reference times 2" in observe.describe_values(
        y * 2, y, 1e-9, 1e-9)
    # and the walk's case: a dot product that skips element 0, graded
    code = _replace(solution_text("softmax_backward"),
                    "dot = sum(p * g for p, g in zip(y, dy))",
                    "dot = sum(y[i] * dy[i] for i in range(1, len(y)))")
    cases = _cases(grade_text(tmp_path, "softmax_backward", code, ["python"]))
    assert cases["uniform dy"].status == "failed"
    assert not any("times" in s for s in cases["uniform dy"].observations), \
        cases["uniform dy"].observations


def test_a_sign_flipped_shift_is_not_blamed_on_the_choice_of_shift(tmp_path):
    code = _replace(solution_text("softmax"), "shifted = [value - maximum for value in values]",
                    "shifted = [maximum - value for value in values]")
    cases = _cases(grade_text(tmp_path, "softmax", code, ["python"]))
    # [-1000, 0, 1000] overflows as a wrong shift would, but a wrong shift passes [1, 2, 3],
    # which this code fails: the exception alone is too weak to name it.
    assert cases["wide spread"].status == "error"
    assert not any(v.causes for v in cases.values())


def test_eps_added_to_the_inverse_root_is_not_called_missing(tmp_path):
    code = _replace(solution_text("rmsnorm"), "inverse_rms = 1.0 / tl.sqrt(mean_square + eps)",
                    "inverse_rms = tl.rsqrt(mean_square) + eps")
    cases = _cases(grade_text(tmp_path, "rmsnorm", code, ["triton"]))
    named = {b.cause for v in cases.values() for b in v.causes}
    assert all("missing" not in cause or "added elsewhere" in cause for cause in named)


def test_rows_after_the_first_and_row_sums_are_described():
    want = _want()
    got = want.copy()
    got[1:] *= 2.0
    said = observe.describe_values(got, want, 1e-9, 1e-9, properties=("row-sums",))
    assert "row 0 is right and every later row differs" in said
    assert any("the rows sum to between 1 and 2" in s for s in said)
    assert any("each row is the reference's row times its own number" in s for s in said)
    # sums apart only past the digits printed are not "between 2 and 2"
    from learning.grader.observe import _row_sums

    assert _row_sums(np.array([[1.0, 1.0], [1.0, 1.0 + 1e-8]])) == \
        "each row sums to 2 (to 6 significant digits), not 1"


def test_another_row_of_the_reference_and_the_input_unchanged_are_described():
    want = _want()
    got = want[[0, 0, 2]]
    assert "row 1 of the output is the reference's row 0" in observe.describe_values(
        got, want, 1e-9, 1e-9)
    x = np.array([[1.0, 2.0, 3.0]] * 3)
    assert "the output equals the input, unchanged" in observe.describe_values(
        x.copy(), _want(), 1e-9, 1e-9, inputs=(x,))


def test_a_wrong_row_equal_to_another_by_chance_is_not_called_another_row():
    # many short rows of small integers: one wrong row matches some other row by chance,
    # the rest match none, so nothing says the program read another row
    rng = np.random.default_rng(0)
    want = rng.integers(0, 3, size=(200, 3)).astype(float)
    got = want + rng.integers(1, 3, size=(200, 3))
    got[79] = want[63] if not np.array_equal(want[63], want[79]) else want[64]
    said = observe.describe_values(got, want, 1e-9, 1e-9)
    assert not any("of the output is the reference's row" in s for s in said)


def test_an_output_off_its_own_row_is_not_called_a_neighbouring_row():
    # attention's reference rows can lie 1e-7 apart: an output a little off everywhere (a
    # scale slightly wrong) is wrong against its own row and no nearer the other one, and no
    # row was read in its place
    # (large logits: every query picks the same key, so every row is that key's value)
    rng = np.random.default_rng(1)
    want = np.repeat(rng.random((1, 8)), 4, axis=0) + np.arange(4)[:, None] * 1e-7
    got = want * (1 + 3e-7)
    said = observe.describe_values(got, want, 1e-9, 1e-9)
    assert said and not any("of the output is the reference's row" in s for s in said)
    # the row really read in another's place is still named
    want = rng.random((4, 8))
    got = want[[0, 2, 2, 3]]
    assert "row 1 of the output is the reference's row 2" in observe.describe_values(
        got, want, 1e-9, 1e-9)


def test_a_tail_of_columns_and_a_sign_flip_are_described():
    want = _want()
    got = want.copy()
    got[:, 2] = 0.0
    assert any("only in column 2 of 3" in s for s in observe.describe_values(got, want, 1e-9,
                                                                              1e-9))
    assert "every value is the reference with its sign flipped" in observe.describe_values(
        -want, want, 1e-9, 1e-9)


def test_exact_answers_are_compared_field_by_field():
    want = {"bytes": 8388608, "flops": 0, "intensity": 0.123456, "bound": "memory-bound"}
    got = dict(want, bytes=4194304)
    said = observe.describe_exact(got, want)
    assert "'bytes': 4194304 where the reference has 8388608: exactly 1/2 of the reference" \
        in said
    assert any("agree with the reference" in s for s in said)
    assert observe.describe_exact([1, 2], [1, 2, 3]) == ["it has 2 items, the reference 3"]
    # said of the learner's value, not as if the reference were rounded
    assert observe.describe_exact(0.12, 0.123456)[0].endswith(
        ": yours is the reference's value rounded to 2 decimal places")


def test_a_description_never_claims_a_difference_that_is_not_there():
    want = _want()
    assert observe.describe_values(want.copy(), want, 1e-9, 1e-9) == []
    nan = np.full((2, 2), math.nan)
    assert observe.describe_values(nan, nan, 1e-9, 1e-9) == []


def test_json_carries_every_cause_the_meaning_the_line_and_what_differs(tmp_path, capsys):
    import json

    from learning import check

    code = _replace(solution_text("softmax"), "denominator = sum(numerator)",
                    "denominator = sum(shifted)")
    write_module(tmp_path, "softmax", code)
    assert check.main(["softmax", "--root", str(tmp_path), "--part", "python", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    cases = {c["name"]: c for c in document["parts"][0]["cases"]}
    raised = cases["overflow"]
    assert [c["key"] for c in raised["causes"]] == ["summed-shifted"]
    assert raised["error_meaning"].startswith("a division by zero")
    assert raised["where"].startswith("softmax.py, line ")
    failed = cases["worked example"]
    assert failed["bug"] == "summed-shifted" and failed["observations"]


def _replay_counting_part(replays: bool):
    """A part with one known bug whose replay matches any output, and one case."""
    from learning.grader.declarations import Bug, Case, Part, Tolerance

    calls = []

    def detect(got, args, want):
        calls.append(args)
        return True

    case = Case("large", "a case too large to replay on", lambda: ([1.0, 2.0],), catches=(),
                replays=replays)
    part = Part("python", "t", "01", "f", lambda values: list(values), (case,),
                Tolerance(1e-9, 1e-9), bugs=(Bug("always", "the replay says so", detect),))
    return part, case, calls


@pytest.mark.parametrize("replays", [True, False])
def test_a_case_declared_too_large_to_replay_names_no_cause_but_says_what_differs(replays):
    from learning.grader import compare
    from learning.grader.returned import Returned

    part, case, calls = _replay_counting_part(replays)
    want = np.array([1.0, 2.0])
    got = np.array([1.0, 3.0])  # wrong
    verdict = compare.judge(part, case, Returned("list", got, shape=(2,)), ([1.0, 2.0],), want,
                            {})
    assert verdict.status == "failed"
    assert "1 of 2 values differ" in verdict.summary
    if replays:
        assert _causes(verdict) == {"always"} and calls
    else:
        assert not verdict.causes and not calls  # never replayed: no evidence, no cause
        assert verdict.mismatch_count == 1 and verdict.mismatches[0].index == (1,)


@pytest.mark.interpreter
def test_an_address_out_of_bounds_from_swapped_strides_is_not_blamed_on_masks_alone(tmp_path):
    # Masks and grid right, B's strides swapped: the out-of-bounds cause must name strides
    # among its origins, and must not claim the masks or the grid are to blame. The access is
    # caught by the interpreter's bounds checks; a compiled kernel reads the stray addresses
    # without a fault (on the H200 no case named the out-of-bounds cause).
    text = _replace(solution_text("matmul"),
                    "b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn",
                    "b_ptr + ks[:, None] * stride_bn + cols[None, :] * stride_bk")
    result = grade_text(tmp_path, "matmul", text, ["triton"])
    named = [c for c in _cases(result).values() if "out-of-bounds" in _causes(c)]
    assert named
    cause = next(b.cause for b in named[0].causes if b.key == "out-of-bounds")
    assert "the check cannot tell" in cause and "wrong strides" in cause
    assert "Either a lane" not in cause


def test_the_marks_under_a_wrapped_source_line_are_left_out_and_kept_under_one_that_fits():
    from learning.grader.report import traceback_lines

    long_line = "    b = tl.load(b_ptr + ks[:, None] * stride_bn + cols[None, :] * stride_bk)"
    short_line = "    x = y / z"
    text = "\n".join(["Traceback (most recent call last, your code only):",
                      '  File "m.py", line 3, in f', long_line, "        " + "^" * 60,
                      '  File "m.py", line 9, in g', short_line, "        ~~^~~",
                      "ZeroDivisionError: division by zero"])
    lines = traceback_lines(text, 70)
    assert long_line in lines and "^" * 60 not in "\n".join(lines)  # it wraps at 70
    assert lines[lines.index(short_line) + 1] == "        ~~^~~"  # fits: its marks stay
    assert traceback_lines(text, 100) == text.splitlines()  # wide enough: all of it


def test_a_mismatch_in_a_tensor_of_more_than_two_dimensions_is_named_by_its_index():
    """A (batch, heads, seq, d) output names the first mismatch as an index in its shape, not
    as a position in the flattened tensor."""
    want = np.arange(2 * 2 * 3 * 4, dtype=np.float64).reshape(2, 2, 3, 4) + 1.0
    got = want.copy()
    got[0, 1, 2, 3] = 0.0
    got[1, 0, 1, 2] = 0.0
    got[1, 1, 0, 0] = 0.0
    said = observe.describe_values(got, want, 1e-9, 1e-9)
    assert "3 of 48 elements differ, the first at (0, 1, 2, 3)" in said
    single = want[:1].copy()
    wrong = single.copy()
    wrong[0, 1, 2, 3] = 0.0
    assert "only element (0, 1, 2, 3) of 24 differs" in observe.describe_values(
        wrong, single, 1e-9, 1e-9)
    wrong = single.copy()
    wrong[0, 1, 1:, :] = 0.0
    assert "only elements (0, 1, 1, 0) to (0, 1, 2, 3) of 24 differ" in \
        observe.describe_values(wrong, single, 1e-9, 1e-9)


def test_the_eps_advice_written_as_it_says_passes_every_case(tmp_path):
    import re

    from learning.grader import registry

    bug = next(b for b in registry.find("rmsnorm").part("python").bugs
               if b.key == "eps-not-scaled")
    advised = re.search(r"sqrt\(mean\(z\*\*2\) \+ (.+?)\) \(", bug.cause).group(1)
    line = "rms = math.sqrt(mean_square + eps / largest / largest)"
    as_advised = _replace(solution_text("rmsnorm"), line,
                          f"rms = math.sqrt(mean_square + {advised})")
    (tmp_path / "advised").mkdir()
    result = grade_text(tmp_path / "advised", "rmsnorm", as_advised, ["python"])
    assert result.parts[0].status == "passed", advised  # the advice must not break the code
    squared = _replace(solution_text("rmsnorm"), line,
                       "rms = math.sqrt(mean_square + eps / largest**2)")
    (tmp_path / "squared").mkdir()
    result = grade_text(tmp_path / "squared", "rmsnorm", squared, ["python"])
    assert _cases(result)["huge values"].status == "error"  # why the advice divides twice


def test_a_missing_max_shift_is_blamed_on_underflow_as_well_as_overflow(tmp_path):
    from learning.grader.catalogue import versions
    from tests.helpers import version_text

    version = next(v for v in versions("softmax") if v.part == "triton"
                   and v.bug == "no-max-shift")
    result = grade_text(tmp_path, "softmax", version_text("softmax", version), ["triton"])
    negative = _cases(result)["very negative rows"]
    (cause,) = [b.cause for b in negative.causes if b.key == "no-max-shift"]
    assert "underflows to 0" in cause and "0 / 0" in cause  # what happens in this case


def test_a_kernel_that_ignores_the_row_stride_it_is_passed_is_told_to_use_it(tmp_path):
    from learning.grader.catalogue import versions
    from tests.helpers import version_text

    version = next(v for v in versions("softmax") if v.bug == "row-stride")
    result = grade_text(tmp_path, "softmax", version_text("softmax", version), ["triton"])
    causes = {b.key: b.cause for v in _cases(result).values() for b in v.causes}
    assert "the row stride the launcher passes" in causes["row-stride"]
    assert "pass the row stride to the kernel" not in causes["row-stride"]


def test_a_block_not_a_power_of_two_gets_advice_for_a_fixed_block_too():
    # one meaning for every exercise: no name of one exercise's (n_cols is softmax's)
    key, advice = errors.explain("ValueError", "arange's range must be a power of 2")
    assert key == "arange-power-of-two"
    assert "choose one" in advice and "next_power_of_2" in advice and "n_cols" not in advice


def test_counts_in_the_graders_descriptions_agree_with_their_nouns():
    from learning.grader import compare
    from learning.grader.returned import Returned

    unwritten = np.zeros((5, 8), dtype=bool)
    unwritten[4] = True  # one whole row, the last, never written
    verdict = compare._judge_unwritten(unwritten, np.zeros(unwritten.shape))
    assert verdict.summary == "8 of 40 output elements were never written: 1 whole row of 5, " \
                              "from row 4"
    unwritten = np.zeros(6, dtype=bool)
    unwritten[5] = True
    assert compare._judge_unwritten(unwritten, np.zeros(6)).summary.startswith(
        "1 of 6 output elements was never written")
    assert observe.describe_exact([1], [1, 2]) == ["it has 1 item, the reference 2"]
    assert observe.describe_exact([0, 0, 0, 0, 0], [1, 1, 1, 1, 1])[-1] == \
        "and 1 more item differs"
    short = compare._list_shape(Returned("list", np.zeros(1), shape=(1,)), np.zeros(2), {})
    assert short.summary == "returned 1 value for 2 inputs"


def test_a_wrong_dict_or_list_is_shown_once_not_as_returned_and_then_got(tmp_path):
    from learning.grader import compare
    from learning.grader.returned import Returned

    want = {"bytes": 8, "flops": 2, "bound": "memory-bound"}
    got = dict(want, bytes=4)
    verdict = compare._judge_exact(Returned("dict", raw=got), want)
    assert verdict.summary == "returned a dict that differs from the reference"
    assert verdict.got == repr(got) and repr(got) not in verdict.summary
    verdict = compare._judge_exact(Returned("tuple", raw=(1, 2)), [1, 2])
    assert verdict.summary == "returned a tuple, where the reference is a list"
    text = "def tree_reduce(values, op):\n    return [[0.0]]\n"
    result = grade_text(tmp_path, "reductions", text, ["python"])
    failed = next(c for c in result.parts[0].cases if c.verdict.status == "failed")
    assert failed.verdict.got == "[[0.0]]" and "[[0.0]]" not in failed.verdict.summary


def test_outputs_rounded_for_display_are_described_as_rounded_not_as_float32(tmp_path):
    # rounded to 9 places, the error is float32-sized: naming float32 would send the learner
    # after a conversion that is not there
    code = solution_text("online_softmax") + '''

_full = online_softmax_python


def online_softmax_python(values, block):
    return [round(v, 9) for v in _full(values, block)]
'''
    result = grade_text(tmp_path, "online_softmax", code, ["python"])
    failed = [v for v in _cases(result).values() if v.status == "failed"]
    assert failed and all({b.key for b in v.causes} == {"rounded"} for v in failed)
    said = [o for v in failed for o in v.observations]
    assert any("rounded to 9 decimal places" in o for o in said)
    assert not any("float32" in o for o in said)

    from rich.console import Console

    from learning.grader import report

    console = Console(width=80, record=True, color_system=None)
    report.render(console, result)
    shown = [line.split("expected ")[1].split(", got ") for line in
             console.export_text().splitlines() if line.strip().startswith("at [")]
    assert shown and all(want != got for want, got in shown)  # every mismatch shows its digits


def test_softmax_rounded_to_nine_places_names_the_rounding(tmp_path):
    code = solution_text("softmax") + '''

_full = softmax_python


def softmax_python(values):
    return [round(v, 9) for v in _full(values)]
'''
    failed = [v for v in _cases(grade_text(tmp_path, "softmax", code, ["python"])).values()
              if v.status == "failed"]
    assert failed and all(_causes(v) == {"rounded"} for v in failed)


def test_a_mismatch_is_printed_with_the_digits_that_tell_the_two_apart():
    from learning.grader.numbers import DECIMALS, decimals_to_tell_apart, format_value

    want, got = [0.0042449863, 0.5], [0.004244986, 0.5]
    decimals = decimals_to_tell_apart(want, got)
    assert decimals > DECIMALS
    assert format_value(want[0], decimals) != format_value(got[0], decimals)
    assert decimals_to_tell_apart([0.25, 0.5], [0.26, 0.5]) == DECIMALS  # nine show it already
    # values that pass, off in their 17th digit, beside one far off: nine decimals, not 17
    want, got = [0.37190676288028823, 0.28399540974126003], [0.37190676288028829, -0.1238]
    assert decimals_to_tell_apart(want, got) > DECIMALS + 5
    assert decimals_to_tell_apart(want, got, wrong=[False, True]) == DECIMALS


def test_a_tail_missing_from_some_rows_only_is_not_blamed_on_the_block():
    from learning.grader import compare

    # row 0 whole, row 1 written only in column 0: what a row stride of 1 leaves behind
    unwritten = np.zeros((2, 1000), dtype=bool)
    unwritten[1, 1:] = True
    verdict = compare._judge_unwritten(unwritten, np.zeros((2, 1000)))
    assert verdict.bug.key == "unwritten"
    assert "columns 1 to 999 of row 1 only (of 2); the other rows are whole" in verdict.summary
    assert "each row" not in verdict.summary
    every = np.zeros((2, 1000), dtype=bool)
    every[:, 600:] = True  # the same tail of every row: a block or a mask, as before
    verdict = compare._judge_unwritten(every, np.zeros((2, 1000)))
    assert verdict.bug.key == "block-too-small" and "of each row" in verdict.summary


def test_a_transposed_output_names_no_block_grid_or_mask_and_says_its_layout(tmp_path):
    # the output allocated transposed, stored at row * stride(0) + column: the elements left
    # unwritten follow the layout (in the row of 4097, its second half), not a block too small
    code = _replace(solution_text("softmax"),
                    "output = torch.empty_like(x, memory_format=torch.contiguous_format)",
                    "output = torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, "
                    "device=x.device).t()")
    cases = _cases(grade_text(tmp_path, "softmax", code, ["triton"]), "triton")
    unwritten = [v for v in cases.values() if v.status == "failed" and "never written" in v.summary]
    assert unwritten
    for verdict in unwritten:
        assert not _causes(verdict) & {"block-too-small", "grid-too-small", "off-by-one-mask"}
        assert any("not contiguous" in line and "strides (1, " in line
                   for line in verdict.observations), verdict.observations


def test_an_unwritten_tail_in_a_contiguous_output_still_names_the_block():
    from learning.grader import compare
    from learning.grader.returned import Returned

    unwritten = np.zeros((2, 1000), dtype=bool)
    unwritten[:, 600:] = True
    for strides, named in (((1000, 1), True), ((1, 2), False), ((1000, 7), False)):
        returned = Returned("Tensor", np.zeros((2, 1000)), shape=(2, 1000), strides=strides)
        verdict = compare._unwritten_in_layout(compare._judge_unwritten(unwritten,
                                                                        returned.values), returned)
        assert ("block-too-small" in _causes(verdict)) == named, strides
        assert any("not contiguous" in line for line in verdict.observations) != named
    # one row: its stride says nothing of the layout
    returned = Returned("Tensor", np.zeros((1, 1000)), shape=(1, 1000), strides=(7, 1))
    one = np.zeros((1, 1000), dtype=bool)
    one[:, 600:] = True
    verdict = compare._unwritten_in_layout(compare._judge_unwritten(one, returned.values),
                                           returned)
    assert "block-too-small" in _causes(verdict) and not verdict.observations


def test_one_unwritten_element_is_not_blamed_on_the_mask_when_other_cases_rule_it_out(tmp_path):
    # offsets without the program's start: in one case only the last element is left unwritten,
    # as a mask off by one would leave it, but the other cases show another pattern
    code = _replace(solution_text("elementwise"),
                    "offsets = [pid * BLOCK + lane for lane in range(BLOCK)]",
                    "offsets = [pid + lane for lane in range(BLOCK)]")
    cases = _cases(grade_text(tmp_path, "elementwise", code, ["python"]))
    failed = [v for v in cases.values() if v.status == "failed"]
    assert len(failed) > 1
    assert not any(_causes(v) & {"off-by-one-mask", "grid-too-small"} for v in failed)


def test_a_mask_off_by_one_is_still_named_in_every_case_it_shows(tmp_path):
    # where a short grid leaves the same element unwritten (n = 17 in blocks of 8) both are
    # named, as one of two; a single element cannot show the mistake at all
    code = _replace(solution_text("elementwise"), "mask = [offset < n for offset in offsets]",
                    "mask = [offset < n - 1 for offset in offsets]")
    cases = _cases(grade_text(tmp_path, "elementwise", code, ["python"]))
    failed = [v for name, v in cases.items() if v.status == "failed" and name != "n = 1, BLOCK = 8"]
    assert failed and all("off-by-one-mask" in _causes(v) for v in failed)
    assert not cases["n = 1, BLOCK = 8"].causes


def test_a_float32_gradient_buffer_is_covered_by_the_cause_of_float64_precision(tmp_path):
    # the kernel keeps float64, but dx is allocated as float32 and autograd casts it back: the
    # cause must not claim the kernel converts float64 without naming what was done
    code = _replace(solution_text("softmax_backward"),
                    "dx = torch.empty_like(y, memory_format=torch.contiguous_format)",
                    "dx = torch.empty_like(y, dtype=torch.float32, "
                    "memory_format=torch.contiguous_format)")
    cases = _cases(grade_text(tmp_path, "softmax_backward", code, ["autograd"]))
    narrowed = [v for v in cases.values() if "fp64-narrowed" in _causes(v)]
    assert narrowed
    assert all("allocated as float32" in v.causes[0].cause for v in narrowed)


def test_a_result_wrapped_in_one_more_list_is_not_called_the_wrong_length(tmp_path):
    # return [output]: one value per input, in one pair of brackets too many
    text = solution_text("softmax").replace("    return output  # store", "    return [output]")
    part = grade_text(tmp_path, "softmax", text, ["python"]).parts[0]
    assert failing_bugs(part) == {"extra-list"}
    # and a list one value short is still the wrong length
    text = solution_text("softmax").replace("    return output  # store", "    return output[:-1]")
    part = grade_text(tmp_path, "softmax", text, ["python"]).parts[0]
    assert "wrong-length" in failing_bugs(part) and "extra-list" not in failing_bugs(part)


def test_a_row_one_past_a_power_of_two_short_by_its_last_column_names_the_block_too():
    # BLOCK = 4096 on a row of 4097 leaves the last column as a mask off by one would: the
    # output cannot tell them apart, so both are named; elsewhere the mask alone is
    from learning.grader import compare

    for width, both in ((4097, True), (17, True), (3, True), (1000, False), (781, False)):
        unwritten = np.zeros((2, width), dtype=bool)
        unwritten[:, -1] = True
        verdict = compare._judge_unwritten(unwritten, np.zeros((2, width)))
        want = {"off-by-one-mask", "block-too-small"} if both else {"off-by-one-mask"}
        assert _causes(verdict) == want, width


def test_a_fixed_block_one_column_short_is_not_blamed_on_the_mask_alone(tmp_path):
    code = _replace(solution_text("softmax_backward"),
                    "n_cols, BLOCK=triton.next_power_of_2(n_cols))",
                    "n_cols, BLOCK=4096)")
    cases = _cases(grade_text(tmp_path, "softmax_backward", code, ["triton"]), "triton")
    failed = {name: v for name, v in cases.items() if v.status == "failed"}
    assert failed and all("block-too-small" in _causes(v) for v in failed.values()), \
        {name: _causes(v) for name, v in failed.items()}


@pytest.mark.parametrize("part, old, new", [
    ("python", "mask = [offset < n for offset in offsets]",
     "mask = [offset < BLOCK for offset in offsets]"),
    ("triton", "mask = offsets < n", "mask = offsets < BLOCK"),
    ("triton", "pid = tl.program_id(0)", "pid = tl.program_id(1)"),
])
def test_only_the_first_block_written_names_every_way_to_get_there(tmp_path, part, old, new):
    # a mask against BLOCK, or the wrong grid axis, writes only the first block, exactly as
    # offsets without the program's start would: the cause must name the mistake made too
    code = _replace(solution_text("elementwise"), old, new)
    cases = _cases(grade_text(tmp_path, "elementwise", code, [part]), part)
    named = [v for v in cases.values() if "same-block" in _causes(v)]
    assert named
    for verdict in named:
        (cause,) = [b.cause for b in verdict.causes if b.key == "same-block"]
        assert "compare the offsets with n, not with BLOCK" in cause
        assert ("tl.program_id(0)" in cause) == (part == "triton")


def test_a_float_standing_for_a_whole_number_fails_an_exact_answer(tmp_path):
    from learning.grader import compare
    from learning.grader.returned import Returned

    want = {"bytes": 8388608, "flops": 0, "intensity": 0.5, "bound": "memory-bound"}
    got = dict(want, bytes=8388608.0)  # equal under ==, yet not the int the docstring asks
    verdict = compare._judge_exact(Returned("dict", raw=got), want)
    assert verdict.status == "failed" and _causes(verdict) == {"float-for-int"}
    assert "returned 8388608.0 as 'bytes', a float, where the answer is the whole number " \
        "8388608" in verdict.summary
    # an int where a float is wanted, and floats where floats are wanted, still pass
    assert compare._judge_exact(Returned("dict", raw=dict(want, intensity=1)),
                                dict(want, intensity=1.0)).passed
    assert compare._judge_exact(Returned("list", raw=[[1.0, 2.0], [3.0]]),
                                [[1.0, 2.0], [3.0]]).passed
    assert not compare._judge_exact(Returned("list", raw=[[1, 2.0]]), [[1, 2]]).passed
    # through the check, the learner's bytes_moved multiplied by 1.0
    code = _replace(solution_text("traffic"), "def bytes_moved(", "def _bytes_moved_int(") + \
        "\n\ndef bytes_moved(kernels, arrays, element_bytes):\n" \
        "    return _bytes_moved_int(kernels, arrays, element_bytes) * 1.0\n"
    cases = _cases(grade_text(tmp_path, "traffic", code))
    failed = [v for v in cases.values() if v.status == "failed"]
    assert failed and all(_causes(v) == {"float-for-int"} for v in failed)


# the quick run grades one kernel version; each mistake's kernel twin is exhaustive
@pytest.mark.parametrize("name, part, key", [
    ("the scale 1/d, not 1/sqrt(d)", "python", "scale"),
    pytest.param("the scale 1/d, not 1/sqrt(d)", "triton", "scale", marks=pytest.mark.exhaustive),
    ("never divided by l", "python", "not-normalised"),
    pytest.param("never divided by l", "triton", "not-normalised", marks=pytest.mark.exhaustive),
    ("exp2 without log2(e)", "triton", "exp2-base"),
])
def test_attention_mistakes_with_a_replay_are_named_and_nothing_else_is(tmp_path, name, part,
                                                                        key):
    from learning.grader.catalogue import versions
    from tests.helpers import version_text

    version = next(v for v in versions("attention") if v.name == name and v.part == part)
    result = grade_text(tmp_path, "attention", version_text("attention", version), [part])
    named = {b.key for v in _cases(result).values() for b in v.causes}
    assert named == {key}, named


@pytest.mark.parametrize("old, new, part, close", [
    # a misspelt local read inside a list comprehension (its own frame before Python 3.12)
    ("shifted = [value - maximum for value in values]",
     "shifted = [value - maximun for value in values]", "python", "maximum"),
    # a misspelt builtin
    ("maximum = max(values)", "maximum = mx(values)", "python", "max"),
    # nothing close: no guess
    ("maximum = max(values)", "maximum = largest_of_all(values)", "python", None),
])
def test_a_misspelt_name_gets_the_closest_name_it_could_have_meant(tmp_path, old, new, part,
                                                                   close):
    result = grade_text(tmp_path, "softmax", _replace(solution_text("softmax"), old, new),
                        [part])
    summaries = {v.summary for v in _cases(result).values() if v.status == "error"}
    assert summaries and all("is not defined" in s for s in summaries), summaries
    for summary in summaries:
        assert summary.endswith(f"; did you mean '{close}'?") if close else \
            "did you mean" not in summary


@pytest.mark.interpreter  # compiled, the misspelling stops Triton's compiler instead
def test_a_misspelt_triton_function_gets_the_closest_one_in_tl(tmp_path):
    text = _replace(solution_text("softmax"), "maximum = tl.max(x, axis=0)",
                    "maximum = tl.maxx(x, axis=0)")
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    summaries = {v.summary for v in _cases(result).values() if v.status == "error"}
    assert summaries and all(s.endswith("did you mean 'max'?") for s in summaries), summaries


@pytest.mark.interpreter  # compiled, the loop would spin on the GPU
@pytest.mark.skipif(not stuck.supported(), reason="no SIGUSR1 to ask for the stack (Windows)")
def test_a_kernel_that_never_ends_is_stopped_at_its_own_line(tmp_path):
    loop = "    i = 0\n    while i < 1:  # never advances\n        i = i * 1\n"
    text = _replace(solution_text("softmax"), "    maximum = tl.max(x, axis=0)",
                    loop + "    maximum = tl.max(x, axis=0)")
    result = grade_text(tmp_path, "softmax", text, ["triton"], case_seconds=3)
    stopped = [v for v in _cases(result).values() if v.status == "timed-out"]
    assert stopped, {n: v.status for n, v in _cases(result).items()}
    found = re.search(r"when it was stopped it was running softmax[.]py, line (\d+) "
                      r"[(]softmax_kernel[)]: (.*?); the usual", stopped[0].summary)
    assert found and found[2] in ("`while i < 1:  # never advances`", "`i = i * 1`"), \
        stopped[0].summary


def test_a_name_suggestion_survives_an_exception_that_resists_being_read():
    from learning.grader.learner_code import suggestion

    class Hostile(NameError):
        @property
        def name(self):
            raise RuntimeError("no name for you")

    class Opaque:
        def __dir__(self):
            raise RuntimeError("no attributes for you")

    assert suggestion(Hostile("x")) == ""
    assert suggestion(AttributeError("sze", name="sze", obj=Opaque())) == ""
    assert suggestion(AttributeError("sze", name="sze", obj=[])) == ""  # nothing close
    assert suggestion(AttributeError("apend", name="apend", obj=[])) == "; did you mean 'append'?"


@pytest.mark.parametrize("exercise, name, part, argument, where", [
    ("attention", "q scaled in place", "python", "q", "(q[0][0]: was "),
    ("softmax", "mutates the input", "python", "values", "(values[0]: was "),
    ("matmul", "pads a and b in place", "python", "a, b", "(a[0]: had "),
])
def test_a_changed_input_is_named_by_its_argument_and_where_it_changed(tmp_path, exercise,
                                                                        name, part, argument,
                                                                        where):
    from learning.grader.catalogue import versions
    from tests.helpers import version_text

    version = next(v for v in versions(exercise) if v.name == name and v.part == part)
    result = grade_text(tmp_path, exercise, version_text(exercise, version), [part])
    summaries = {v.summary for v in _cases(result).values() if v.status == "failed"
                 and any(b.key == "mutated-input" for b in v.causes)}
    assert summaries, {v.summary for v in _cases(result).values()}
    noun = "arguments" if "," in argument else "argument"
    said = [s for s in summaries if f"changed by the call: its {noun} {argument} (" in s]
    assert said and all(where in s for s in said), summaries


@pytest.mark.skipif(not stuck.supported(), reason="no SIGUSR1 to ask for the stack (Windows)")
def test_the_line_a_case_was_stopped_at_is_quoted_whatever_it_ends_with(tmp_path):
    import subprocess
    import sys

    learner = tmp_path / "softmax.py"
    learner.write_text("def softmax_python(values):\n    total = sum(values,\n", encoding="utf-8")
    stack = tmp_path / "stack.txt"
    stack.write_text(f'Thread 0x1 (most recent call first):\n  File "{learner}", line 2 in '
                     'softmax_python\n', encoding="utf-8")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        where = stuck.where(sleeper.pid, str(stack), str(learner))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert where == "softmax.py, line 2 (softmax_python): `total = sum(values,`"


def test_a_tl_dot_of_blocks_that_do_not_fit_names_both_shapes(tmp_path):
    # Triton's own message ("input and other must have equal reduction dimensions") names
    # neither shape
    text = _replace(_replace(solution_text("matmul"), "acc += tl.dot(a, b)",
                             "acc += tl.dot(a, tl.trans(b))"),
                    "block_k = 32, 32, 32", "block_k = 32, 32, 16")
    result = grade_text(tmp_path, "matmul", text, ["triton"])
    summaries = {v.summary for v in _cases(result).values() if v.status == "error"}
    assert summaries and all("tl.dot was given blocks of shape (32, 16) and (32, 16)" in s
                             for s in summaries), summaries


# ---------------------------------------------------------------------------------------------
# Symptom rules held to the replay standard: each fed a pattern that once drew a false cause.


def test_outputs_that_are_rows_of_v_are_not_called_rounded(tmp_path):
    # m never updated: with large scores each output row is one of v's rows, six decimals as
    # the case's v has, which equals the reference rounded to 6 places; the worked example of
    # the same run returns values no rounding gives
    code = _replace(solution_text("attention"), "            m = m_new\n", "")
    cases = _cases(grade_text(tmp_path, "attention", code, ["python"]))
    assert not any(v.causes for v in cases.values())
    said = [o for v in cases.values() for o in v.observations]
    assert not any("rounded" in o or "float32 rounding" in o for o in said), said
    assert "every row of the output is one of v's rows, unchanged" in " ".join(
        cases["large logits"].observations)


def test_rounding_is_ruled_out_by_another_case_that_no_rounding_explains():
    from learning.grader.replays import contradicted, rounded

    want = np.array([[0.1234567891, 0.8765432109]])
    bug = type("B", (), {"detect": rounded(), "raises": None})()
    rounded_case = (np.round(want, 6), (), want, 1e-12, 1e-9)
    assert bug.detect(*rounded_case[:3])
    assert not contradicted(bug, [], [rounded_case])
    unrounded = (want * 1.5, (), want, 1e-12, 1e-9)  # full precision, and wrong
    assert contradicted(bug, [], [unrounded])
    # a case that rounding to any number of places would fail, passed: ruled out too
    small = np.array([[1e-4 / 3, 1 - 1e-4 / 3]])  # 11 places leave 3e-12 off its first value
    assert contradicted(bug, [((), small, 1e-12, 1e-9)])
    assert not contradicted(bug, [((), want, 1e-12, 1e-9)])  # 10 places would pass this one


def test_rows_stored_with_another_tensors_stride_do_not_name_the_grid(tmp_path):
    # C stored with A's row stride: rows squeezed together, the bottom ones never written,
    # and the grid right. Whole rows unwritten name the grid only where what was written is
    # right, which it is not here.
    code = _replace(solution_text("matmul"), "tl.store(c_ptr + rows[:, None] * stride_cm",
                    "tl.store(c_ptr + rows[:, None] * stride_am")
    cases = _cases(grade_text(tmp_path, "matmul", code, ["triton"], compile_check=False))
    assert not any("grid-too-small" in _causes(v) for v in cases.values())
    edge = cases["M edge"]
    assert "whole rows of 45" in edge.summary and "elements written differ" in edge.summary
    assert _causes(edge) == {"unwritten"}


def test_whole_rows_unwritten_with_the_rest_right_still_name_the_grid():
    from learning.grader import compare, registry
    from learning.grader.returned import Returned

    part = registry.find("softmax").part("triton")
    case = part.case("many rows")
    want = np.full((4, 3), 1 / 3)
    values = want.copy()
    values[2:] = np.nan
    unwritten = np.zeros((4, 3), dtype=bool)
    unwritten[2:] = True
    outcome = Returned("Tensor", values, shape=(4, 3), dtype="float32", device="cpu")
    outcome.unwritten = unwritten
    verdict = compare.judge(part, case, outcome, (), want, {"dtype": "float32"})
    assert _causes(verdict) == {"grid-too-small"}
    values[0, 0] = 0.5  # one written element wrong: the grid is no longer told apart
    verdict = compare.judge(part, case, outcome, (), want, {"dtype": "float32"})
    assert _causes(verdict) == {"unwritten"}
    assert "1 of the 6 elements written differs from the reference" in verdict.summary


def test_another_row_is_never_matched_through_nan():
    want = np.array([[0.5, 0.5], [math.nan, math.nan], [0.25, 0.75]])
    got = want.copy()
    got[0] = math.nan  # NaN where row 1 of the reference is NaN: no row was read there
    said = observe.describe_values(got, want, 1e-9, 1e-9)
    assert not any("of the output is the reference's row" in s for s in said), said


def test_a_replay_that_writes_nothing_is_no_evidence(tmp_path):
    # a float16 accumulator given to tl.dot as acc on float32 inputs: the interpreter returns
    # NaN everywhere, which the replay of a grid of whole tiles (writing nothing on these
    # sizes) matched in every case
    code = _replace(solution_text("matmul"),
                    "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                    "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)")
    code = _replace(code, "acc += tl.dot(a, b)", "acc = tl.dot(a, b, acc)")
    cases = _cases(grade_text(tmp_path, "matmul", code, ["triton"], compile_check=False))
    assert not any("whole-tiles-grid" in _causes(v) for v in cases.values()), \
        {n: _causes(v) for n, v in cases.items()}
    from learning.exercises.matmul.exercise import _whole_tiles_only

    with pytest.raises(ValueError):  # M below every tile: nothing written, nothing to tell
        _whole_tiles_only(np.ones((3, 2)), np.ones((2, 5)), 16, 16)


def test_a_store_mask_with_m_for_n_is_not_blamed_on_the_grid_alone(tmp_path):
    # the store keeps the columns < M: the grid is right, so a cause that names only the grid
    # would name a mistake the learner did not make; the store's column mask must be among them
    code = _replace(solution_text("matmul"), "mask=(rows[:, None] < M) & (cols[None, :] < N))",
                    "mask=(rows[:, None] < M) & (cols[None, :] < M))")
    cases = _cases(grade_text(tmp_path, "matmul", code, ["triton"]), "triton")
    unwritten = [v for v in cases.values() if v.status == "failed" and "never written" in v.summary]
    assert unwritten
    for verdict in unwritten:
        for bug in verdict.causes:
            if bug.key in {"block-too-small", "off-by-one-mask", "grid-too-small"}:
                assert "mask" in bug.cause and "n_cols" not in bug.cause, bug.cause


def test_an_output_returned_transposed_is_not_blamed_on_its_allocation(tmp_path):
    from learning.grader import compare
    from learning.grader.returned import Returned

    code = _replace(solution_text("matmul"), "BLOCK_K=block_k)\n    return c\n",
                    "BLOCK_K=block_k)\n    return c.T\n")
    cases = _cases(grade_text(tmp_path, "matmul", code, ["triton"]), "triton")
    turned = [v for v in cases.values() if v.status == "failed" and "returned shape" in v.summary]
    assert turned
    assert all(_causes(v) == {"returned-transposed"} for v in turned), \
        [(v.summary, _causes(v)) for v in turned]
    # an output allocated the wrong way round, contiguous, is still the allocation's fault
    want = np.zeros((3, 5))
    wrong = Returned("Tensor", np.zeros((5, 3)), shape=(5, 3), strides=(3, 1))
    assert compare._tensor_shape(wrong, want, {}).bug.key == "wrong-shape"
    turned = Returned("Tensor", np.zeros((5, 3)), shape=(5, 3), strides=(1, 5))
    assert compare._tensor_shape(turned, want, {}).bug.key == "returned-transposed"


def test_where_an_argument_first_changed_is_said_with_both_values():
    import torch

    from learning.grader.summarise import _first_change

    kernels = [{"reads": ["x"], "writes": ["out"]}]
    before = [{"reads": ["x"], "writes": ["out"]}]
    kernels[0]["reads"].extend(kernels[0]["writes"])  # a list shared, then extended
    assert _first_change(kernels, before) == "[0]['reads']: had 1 item, now 2"
    assert _first_change([1.0, float("nan")], [1.0, 2.0]) == "[1]: was 2.0, now nan"
    assert _first_change({"a": 1}, {"a": 1, "b": 2}) == "['b']: removed"
    x = torch.zeros(2, 3)
    y = x.clone()
    y[1, 2] = 4.0
    assert _first_change(y, x) == "[1, 2]: was 0.0, now 4.0"

    class Loud(float):  # a learner's value: its repr is their code, never run
        def __repr__(self):
            raise RuntimeError("not me")

    assert _first_change([Loud(1.0)], [2.0]) == "[0]: was 2.0, now a Loud"


def test_an_atomic_add_onto_an_empty_output_is_not_called_unwritten(tmp_path):
    # every output is written, by an atomic add onto the NaN the check filled it with: where
    # the ReLU gives 0 the fill shows through, which is no sign that no program stored there
    code = _replace(solution_text("elementwise"), "tl.store(out_ptr + offsets",
                    "tl.atomic_add(out_ptr + offsets")
    cases = _cases(grade_text(tmp_path, "elementwise", code, ["triton"]), "triton")
    failing = [v for v in cases.values() if v.status == "failed"]
    assert failing and all(_causes(v) == {"follows-the-fill"} for v in failing), \
        {n: _causes(v) for n, v in cases.items()}
    assert not any("never written" in v.summary for v in failing)
    assert any("follow what memory held" in v.summary for v in failing)
    # the same adds onto zeros are right
    right = _replace(code, "out = torch.empty_like(x)", "out = torch.zeros_like(x)")
    (tmp_path / "zeros").mkdir()
    (part,) = grade_text(tmp_path / "zeros", "elementwise", right, ["triton"]).parts
    assert part.status == "passed"


def test_row_factors_near_one_are_shown_with_the_digits_that_tell_them_from_one():
    import numpy as np

    from learning.grader import observe

    want = np.arange(1.0, 13.0).reshape(4, 3)
    got = want * np.array([[1.0], [1.0000004], [1.00023], [2.0]])
    said = observe._scaled(got, want, got != want)
    assert said == ("each row is the reference's row times its own number (row 1: 1.0000004, "
                    "row 2: 1.0002, row 3: 2, ...)"), said


@pytest.mark.interpreter  # the interpreter's bounds check words it
def test_one_out_of_bounds_line_is_said_in_full_once_whatever_program_made_it(tmp_path):
    # each case's read past the row comes from another program and lane count: the same
    # mistake at the same line, said once in full and referred to after, with its numbers
    code = _replace(solution_text("softmax"), "mask = offsets < n_cols",
                    "mask = offsets <= n_cols")
    result = grade_text(tmp_path, "softmax", code, ["triton"])
    raised = [v for v in _cases(result).values() if v.status == "error"]
    assert len(raised) >= 3
    assert len({v.summary for v in raised}) > 1  # the numbers differ from case to case

    from rich.console import Console

    from learning.grader import report

    console = Console(width=80, record=True, color_system=None)
    report.render(console, result)
    text = console.export_text()
    assert text.count("Traceback") == 1, text
    assert text.count("the same error as case") == len(raised) - 1


def test_a_cause_of_several_kinds_points_at_no_one_hint(tmp_path, capsys):
    # B's strides swapped: a load out of bounds, whose cause is one of a missing mask, a tile
    # that does not exist or a wrong stride; it pointed at the masks hint, sending a learner
    # whose masks were right to read it
    from learning import check

    code = _replace(solution_text("matmul"), "ks[:, None] * stride_bk + cols[None, :] * stride_bn",
                    "ks[:, None] * stride_bn + cols[None, :] * stride_bk")
    write_module(tmp_path, "matmul", code)
    check.main(["matmul", "--root", str(tmp_path), "--part", "triton"])
    out = " ".join(capsys.readouterr().out.split())
    assert "outside the tensors" in out, out
    assert "helps with this" not in out, out
