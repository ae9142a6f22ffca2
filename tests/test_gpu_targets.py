"""The grader's compile check and the reference solutions, for every GPU the course names.

Compiling needs no GPU: Triton's NVIDIA backend and its bundled ptxas turn a kernel into a
cubin for any compute capability on this CPU. A check compiles for sm_90 (the H200 the course
is measured on); here each solution's kernels, as its own check launches them, compile for a
T4 (sm_75, the free notebook services' GPU), an A100 (sm_80), an L4 / RTX 40xx (sm_89) and an
H100 / H200 (sm_90), and what the compiler rejects is rejected on every one of them.
"""

from __future__ import annotations

import pytest

from learning.grader import gpu_compile, registry
from tests.helpers import grade_text, solution_text, triton_version

pytestmark = pytest.mark.compile_check  # every test here is about the compile check

KERNEL_EXERCISES = [e.name for e in registry.all_exercises()
                    if any(p.needs_kernels for p in e.parts)]


# Triton 3.3.1's compiler fails a float16 tl.dot for sm_75 ("Failures have been detected while
# processing an MLIR pass pipeline"), which 3.4 and later compile: the T4 is left out there
TARGETS_HERE = [t for t in gpu_compile.TARGETS if t != "sm_75" or triton_version() >= (3, 4)]


@pytest.fixture
def every_target(monkeypatch):
    monkeypatch.setenv(gpu_compile.TARGET_SWITCH, ",".join(TARGETS_HERE))


def test_the_targets_are_the_gpus_the_course_names():
    assert {name: cc for name, (_, cc, _) in gpu_compile.TARGETS.items()} == \
        {"sm_75": 75, "sm_80": 80, "sm_89": 89, "sm_90": 90}


@pytest.mark.interpreter  # the compile check follows a run in the interpreter
# the quick run compiles a row kernel and attention's tl.dot; every other one is exhaustive
@pytest.mark.parametrize("exercise", [
    name if name in (KERNEL_EXERCISES[0], "attention")
    else pytest.param(name, marks=pytest.mark.exhaustive) for name in KERNEL_EXERCISES])
def test_each_solution_compiles_for_every_target(exercise, tmp_path, every_target):
    kernels = [p.name for p in registry.find(exercise).parts if p.needs_kernels]
    result = grade_text(tmp_path, exercise, solution_text(exercise), kernels)
    assert result.ok, exercise
    for part_result in result.parts:
        check = part_result.compile_check
        assert check is not None and check.ran, (part_result.part.name, check)
        assert not check.note, check.note
        launches = {c.key for c in check.compiled}
        assert launches
        for key in launches:
            compiled = {c.target: c for c in check.compiled if c.key == key}
            assert set(compiled) == set(TARGETS_HERE), (key[0], sorted(compiled))
            bad = {t: c.message for t, c in compiled.items() if c.status != "ok"}
            assert not bad, f"{exercise}: {key[0]} does not compile for {bad}"


@pytest.mark.interpreter
def test_what_the_compiler_rejects_is_rejected_for_every_target(tmp_path, every_target):
    text = solution_text("elementwise").replace(
        "    tl.store(", "    for i in range(4):\n        if i == 2:\n            break\n"
        "    tl.store(", 1)
    result = grade_text(tmp_path, "elementwise", text, ["triton"])
    check = result.parts[0].compile_check
    rejected = {c.target for c in check.compiled if c.status == "rejected"}
    assert rejected == set(TARGETS_HERE), [(c.target, c.status) for c in check.compiled]
    assert result.parts[0].status == "failed"


@pytest.mark.interpreter
def test_the_report_names_the_gpus_the_kernels_were_compiled_for(tmp_path, monkeypatch):
    from rich.console import Console

    from learning.grader import report

    monkeypatch.setenv(gpu_compile.TARGET_SWITCH, "sm_75,sm_80")
    result = grade_text(tmp_path, "elementwise", solution_text("elementwise"), ["triton"])
    console = Console(width=200, record=True, force_terminal=False)
    report.render(console, result)
    shown = " ".join(console.export_text().split())
    assert "the kernels compile for a GPU (sm_75, sm_80)," in shown, shown


def test_an_unknown_target_is_refused_with_the_list(monkeypatch):
    monkeypatch.setenv(gpu_compile.TARGET_SWITCH, "sm_61")
    assert gpu_compile.unavailable() == f"{gpu_compile.TARGET_SWITCH}=sm_61 names sm_61, not " \
                                        "one of sm_75, sm_80, sm_89, sm_90"


def test_the_check_compiles_for_sm_90_unless_told(monkeypatch):
    monkeypatch.delenv(gpu_compile.TARGET_SWITCH, raising=False)
    assert gpu_compile.targets() == ["sm_90"]


@pytest.mark.interpreter
def test_a_constant_made_by_a_function_is_no_compiler_rejection(tmp_path):
    # the compile check runs a module's kernels, imports and literal constants only; a global
    # made by calling a function is there once the module is imported whole, and compiles
    text = solution_text("softmax").replace('other=-float("inf")', "other=PAD") + \
        "\n\ndef _negative_infinity():\n    return -float('inf')\n\n\n" \
        "PAD = tl.constexpr(_negative_infinity())\n"
    assert "other=PAD" in text
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    check = result.parts[0].compile_check
    assert check is not None and check.ran and not check.rejected, check
    assert result.parts[0].status == "passed"


def _strides_as_one_tuple() -> str:
    """The reference softmax with its two row strides handed over as one tuple argument."""
    text = solution_text("softmax")
    for old, new in (
            ("    output_row_stride,  # elements between the starts of two output rows\n"
             "    input_row_stride,  # elements between the starts of two input rows "
             "(x.stride(0))\n",
             "    strides,  # (the output's row stride, the input's)\n"),
            ("    row = tl.program_id(0)\n",
             "    row = tl.program_id(0)\n    output_row_stride, input_row_stride = strides\n"),
            ("(output, x, output.stride(0), x.stride(0), n_cols",
             "(output, x, (output.stride(0), x.stride(0)), n_cols")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


@pytest.mark.interpreter
def test_a_tuple_argument_is_compiled_with_its_elements_types(tmp_path):
    result = grade_text(tmp_path, "softmax", _strides_as_one_tuple(), ["triton"])
    check = result.parts[0].compile_check
    assert check.compiled and {c.status for c in check.compiled} == {"ok"}, check.compiled
    assert result.ok


@pytest.mark.interpreter
def test_a_kernel_given_a_tuple_is_still_rejected_for_what_the_gpu_cannot_run(tmp_path):
    text = _strides_as_one_tuple().replace(
        "    tl.store(", "    for i in range(4):\n        if i == 2:\n            break\n"
        "    tl.store(", 1)
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    check = result.parts[0].compile_check
    assert check.compiled and {c.status for c in check.compiled} == {"rejected"}, check.compiled
    assert result.parts[0].status == "failed"


@pytest.mark.interpreter
def test_a_launch_keyword_triton_does_not_take_is_named_not_blamed_on_a_type(tmp_path):
    # The interpreter ignores a keyword that is neither a parameter nor an option of Triton's
    # launch (num_warp for num_warps); a GPU's launch refuses it. The compile check names it
    # and the option it may have meant, where it used to say an argument had no GPU type.
    text = solution_text("softmax").replace("BLOCK=block)", "BLOCK=block, num_warp=4)")
    assert "num_warp=4" in text
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    check = result.parts[0].compile_check
    assert check.compiled and {c.status for c in check.compiled} == {"refused"}, check.compiled
    said = check.compiled[0].message
    assert "num_warp=4" in said and "did you mean num_warps?" in said, said
    assert "KeyError" in said and "type" not in said, said
    assert result.parts[0].status == "failed"
    from rich.console import Console

    from learning.grader import report

    console = Console(width=80, record=True, color_system=None)
    report.render(console, result)
    shown = console.export_text()
    assert "(a GPU's launch would refuse it)" in shown and "compiler rejected" not in shown
    # options Triton does take (launch_pdl where this Triton has it, which the interpreter
    # ignores too) are no mistake: the kernel compiles
    pdl = ", launch_pdl=False" if "launch_pdl" in gpu_compile.launch_option_names() else ""
    text = solution_text("softmax").replace("BLOCK=block)",
                                            f"BLOCK=block, num_warps=4, num_stages=2{pdl})")
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    check = result.parts[0].compile_check
    assert check.compiled and {c.status for c in check.compiled} == {"ok"}, check.compiled
    assert result.ok
