"""The course on a machine without Triton (macOS), run here by hiding Triton from the course.

LEARNING_WITHOUT_TRITON=1 makes every course process answer ``import triton`` as Python does
where it is not installed. The grader's process then loads the learner's module with the
stand-in (learning.grader.standin), grades the Python parts as anywhere, and one line says which
Triton parts were not run and where to take them; explain and doctor work too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from learning import check
from learning.grader import mode, registry, standin, worker
from learning.grader.tensors import TensorSpec
from tests.helpers import (
    COURSE_ROOT,
    course_pythonpath,
    grade_text,
    solution_text,
    stub_text,
    write_module,
)

WHERE = mode.WHERE_TRITON_RUNS


@pytest.fixture
def without_triton(monkeypatch):
    """This test's checks run as on a machine without Triton (the test process keeps its
    own: the variable reaches the grader's processes, which honour it when they start)."""
    monkeypatch.setenv(mode.WITHOUT_TRITON, "1")


def run_check(capsys, *argv):
    code = check.main(list(argv))
    return code, capsys.readouterr().out


def course_process(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **{mode.WITHOUT_TRITON: "1"})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=COURSE_ROOT, timeout=300)


def test_a_course_process_answers_import_triton_as_a_machine_without_it():
    done = course_process("import learning, sys\n"
                          "try:\n    import triton\nexcept ModuleNotFoundError as e:\n"
                          "    print('refused:', e.name)\n"
                          "print(learning.grader.mode.triton_missing())")
    assert done.returncode == 0, done.stderr
    assert "refused: triton" in done.stdout
    assert f"({mode.WITHOUT_TRITON}=1)" in done.stdout


def test_every_python_part_is_graded_and_every_triton_part_named_in_one_line(
        tmp_path, capsys, without_triton):
    for exercise in registry.all_exercises():
        write_module(tmp_path, exercise.name, solution_text(exercise.name))
    code, out = run_check(capsys, "--all", "--json", "--root", str(tmp_path))
    document = json.loads(out)
    assert code == 0, out
    for result in document["exercises"]:
        assert result["ok"], result["exercise"]
    graded = {(r["exercise"], p["name"]) for r in document["exercises"] for p in r["parts"]}
    kernels = {(e.name, p.name) for e in registry.all_exercises() for p in e.parts
               if p.needs_kernels}
    pythons = {(e.name, p.name) for e in registry.all_exercises() for p in e.parts
               if not p.needs_kernels}
    assert graded == pythons
    not_run = document["not_run_here"]
    assert {(e, p) for e, parts in not_run["parts"].items() for p in parts} == kernels
    assert "\n" not in not_run["message"] and WHERE in not_run["message"]


def test_the_stub_is_not_started_and_the_line_is_printed_once(tmp_path, capsys,
                                                              without_triton):
    write_module(tmp_path, "softmax", stub_text("softmax"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path))
    assert code == 1
    assert "not started" in out
    flat = " ".join(out.split())
    assert flat.count("not run here") == 1
    assert f"Triton part not run here (triton): Triton is hidden from the course " \
           f"({mode.WITHOUT_TRITON}=1); {WHERE}." in flat
    assert "Traceback" not in out


def test_a_passing_python_part_passes_the_check(tmp_path, capsys, without_triton):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path))
    assert code == 0, out
    assert "Python 11/11" in out


def test_asking_only_for_a_triton_part_grades_nothing_and_says_why(tmp_path, capsys,
                                                                   without_triton):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    code, out = run_check(capsys, "softmax", "--part", "triton", "--root", str(tmp_path))
    assert code == 2
    assert "Grade" not in out
    assert WHERE in " ".join(out.split())


def _paragraph_of(out: str, note: str) -> str:
    """The paragraph of ``out`` whose first line begins ``note``, its lines joined."""
    lines = [line.strip() for line in out.splitlines()]
    first = next(i for i, line in enumerate(lines) if line and note.startswith(line))
    paragraph = []
    for line in lines[first:]:
        if not line:
            break
        paragraph.append(line)
    return " ".join(paragraph)


HIDDEN = f"Triton is hidden from the course ({mode.WITHOUT_TRITON}=1)"


@pytest.mark.parametrize("argv, note", [
    (["softmax"], f"Triton part not run here (triton): {HIDDEN}; {WHERE}."),
    ([], f"Every part that runs here passes; the Triton parts need Triton ({HIDDEN}): {WHERE}."),
])
def test_piped_at_80_columns_the_triton_note_wraps_as_one_paragraph(tmp_path, argv, note):
    """What a learner sees in an 80-column terminal or a piped copy: the note about where to
    take the Triton parts wraps like the rest, its lines one after the other."""
    write_module(tmp_path, "softmax", stub_text("softmax"))
    if not argv:  # no name: every Python part passes, so the note is all there is to say
        _grades(tmp_path, passed=EVERY_EXERCISE)
    env = dict(os.environ, COLUMNS="80", PYTHONPATH=course_pythonpath(),
               **{mode.WITHOUT_TRITON: "1"})
    done = subprocess.run([sys.executable, "-m", "learning.check", *argv, "--root",
                           str(tmp_path)], capture_output=True, text=True, env=env,
                          cwd=COURSE_ROOT, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    for line in done.stdout.splitlines():
        assert len(line) <= 80, line
    assert _paragraph_of(done.stdout, note) == note


def _python_parts_of_lessons_01_to_05_passed(root=None):
    from learning.grader import state

    progress = state.State()
    for name in ("elementwise", "traffic", "reductions", "softmax", "rmsnorm"):
        count = len(registry.find(name).part("python").cases)
        progress.record(name, "python", "passed", count, count)
    if root is not None:
        state.save(root, progress)
    return progress


def test_without_kernels_check_looks_for_the_next_python_part():
    progress = _python_parts_of_lessons_01_to_05_passed()
    assert check.next_unfinished(progress).name == "elementwise"  # lesson 06
    assert check.next_unfinished(progress, kernels=False).name == "softmax_backward"  # 11


def test_check_with_no_name_moves_past_the_triton_lessons(tmp_path, capsys, without_triton):
    _python_parts_of_lessons_01_to_05_passed(tmp_path)
    write_module(tmp_path, "softmax_backward", stub_text("softmax_backward"))
    code, out = run_check(capsys, "--root", str(tmp_path))
    assert "check softmax_backward" in out, out
    assert "Python part" in out and "not started" in out


def test_the_learners_module_gets_the_stand_in_whatever_it_uses_of_triton(
        tmp_path, without_triton):
    text = solution_text("softmax").replace("import triton.language as tl", """\
import triton.language as tl
from triton.language.extra import libdevice  # noqa: F401
print("imported", triton.__version__, triton.cdiv(10, 4), triton.next_power_of_2(1000))
SCALE = tl.constexpr(1.5)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=4)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
@triton.jit(do_not_specialize=["n"])
def tuned(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    tl.store(x_ptr, tl.load(x_ptr) * SCALE)""", 1)
    result = grade_text(tmp_path, "softmax", text, ["python"])
    assert result.ok, result.import_problem
    assert "imported 0+stand-in 3 1024" in result.learner_output


def test_a_python_part_that_calls_a_kernel_is_told_that_triton_is_missing(tmp_path,
                                                                          without_triton):
    text = solution_text("softmax").replace(
        "def softmax_python(values: list[float]) -> list[float]:",
        "def softmax_python(values: list[float]) -> list[float]:\n"
        "    softmax_kernel[(1,)](values)", 1)
    result = grade_text(tmp_path, "softmax", text, ["python"])
    summary = result.parts[0].cases[0].verdict.summary
    assert "TritonUnavailable" in summary and "needs Triton" in summary, summary


def test_explain_works_for_every_topic_without_triton():
    done = course_process(
        "import sys\n"
        "from learning import explain, explainers\n"
        "for topic in explainers.TOPICS:\n"
        "    code = explain.main([topic])\n"
        "    print('topic', topic, code, file=sys.stderr)\n"
        "    assert code == 0, topic\n"
        "assert 'triton' not in sys.modules or sys.modules['triton'] is None\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stdout
    assert done.stderr.count("topic ") == len(__import__("learning.explainers").explainers.TOPICS)


def test_doctor_says_where_the_triton_parts_can_be_taken():
    done = course_process("import sys\nfrom learning import doctor\nsys.exit(doctor.main([]))")
    out = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note triton: not here" in out
    assert WHERE in out
    assert "tiny kernel" not in out


# --- the stand-in itself -------------------------------------------------------------------


def test_the_stand_ins_arithmetic_is_tritons():
    import triton

    for n in range(0, 2100):
        assert standin.next_power_of_2(n) == triton.next_power_of_2(n), n
        assert standin.cdiv(n, 7) == triton.cdiv(n, 7)


def test_a_stand_in_kernel_keeps_its_function_and_refuses_to_launch():
    def body(x_ptr, BLOCK):
        """Doubles."""

    kernel = standin._decorator(standin._Kernel)(body)
    assert kernel.fn is body and kernel.__name__ == "body" and kernel.__doc__ == "Doubles."
    with pytest.raises(standin.TritonUnavailable, match="launching the kernel body needs"):
        kernel[(1,)](None, BLOCK=4)


# --- bfloat16 on a GPU without it ----------------------------------------------------------


@pytest.mark.parametrize("capability, name, skipped", [
    ((7, 5), "Tesla T4", True), ((8, 0), "NVIDIA A100-SXM4-80GB", False),
    ((9, 0), "NVIDIA H200", False)])
def test_a_bfloat16_case_is_skipped_with_the_reason_on_a_gpu_without_it(
        monkeypatch, capability, name, skipped):
    import numpy as np
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
    bf16 = (TensorSpec(np.zeros((2, 3)), dtype="bfloat16"),)
    fp32 = (TensorSpec(np.zeros((2, 3))),)
    reason = worker._lacks_bfloat16(bf16, "cuda")
    assert bool(reason) == skipped
    if skipped:
        assert reason == "needs bfloat16, which the Tesla T4 (sm_75) lacks: GPUs of compute " \
                         "capability 8.0 (sm_80, the A100) and newer have it"
    assert worker._lacks_bfloat16(fp32, "cuda") == ""
    assert worker._lacks_bfloat16(bf16, "cpu") == ""


# --- the learner's loop without Triton ------------------------------------------------------


def _grades(root, passed=(), failed=()):
    """Save grades: the parts that run without Triton (the Python part, and any other that
    launches no kernel) of each exercise in ``passed`` passed, of each in ``failed`` failed."""
    from learning.grader import state

    progress = state.State()
    for names, status, short in ((passed, "passed", 0), (failed, "failed", 1)):
        for name in names:
            for part in registry.find(name).parts:
                if not part.needs_kernels:
                    count = len(part.cases)
                    progress.record(name, part.name, status, count - short, count)
    state.save(root, progress)
    return progress


PYTHON_LESSONS_01_TO_05 = ("elementwise", "traffic", "reductions", "softmax", "rmsnorm")
EVERY_EXERCISE = tuple(e.name for e in registry.all_exercises())


def test_the_solution_opens_once_the_parts_that_run_here_pass(tmp_path, capsys, without_triton):
    from learning import solution

    _grades(tmp_path, passed=["softmax"])
    code = solution.main(["softmax", "--root", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.out
    assert "def softmax_python" in captured.out
    note = captured.err.strip()
    assert "\n" not in note
    assert note == "note: the reference opened on the parts checked here; its Triton part " \
                   f"(triton) cannot be checked here: Triton is hidden from the course " \
                   f"({mode.WITHOUT_TRITON}=1)."


def test_without_triton_the_solution_still_waits_for_the_python_part(tmp_path, capsys,
                                                                     without_triton):
    from learning import solution

    _grades(tmp_path, failed=["softmax"])
    code = solution.main(["softmax", "--root", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1
    assert "opens once every part that can be checked here passes (python: failing, 10 of 11 " \
           "cases passed)" in out
    assert "triton" not in out.split("passes (")[1].split(")")[0]
    assert "def softmax_python" not in out


def test_with_triton_the_solution_waits_for_every_part(tmp_path, capsys):
    from learning import solution

    _grades(tmp_path, passed=["softmax"])
    code = solution.main(["softmax", "--root", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1
    assert "opens once every part passes (triton: not checked yet)" in out


def test_after_lesson_05_the_next_step_skips_the_triton_lessons(tmp_path, capsys,
                                                                without_triton):
    _grades(tmp_path, passed=PYTHON_LESSONS_01_TO_05[:-1])
    write_module(tmp_path, "rmsnorm", solution_text("rmsnorm"))
    code, out = run_check(capsys, "rmsnorm", "--root", str(tmp_path))
    flat = " ".join(out.split())
    assert code == 0, out
    assert "Next: lessons/11-softmax-backward.md, for its Python part (Triton cannot run " \
           "here)." in flat
    assert "06-first-kernel" not in flat


def test_without_triton_a_python_part_passed_is_not_followed_by_its_triton_part(
        tmp_path, without_triton):
    """After attention's Python part the next step is not its Triton part, which cannot run
    here: lesson 14's Python part comes next, and once it too has passed nothing from lesson 13
    on remains, so the earliest lesson not done comes next."""
    from learning import course
    from learning.grader import report

    progress = _grades(tmp_path, passed=["elementwise", "attention"])
    start = course.lesson_for("attention", "python")
    assert report.next_lesson_line(progress, start) == (
        "Next: lessons/14-attention-backward.md, for its Python part (Triton cannot run here).")
    progress = _grades(tmp_path, passed=["elementwise", "attention", "attention_backward"])
    assert report.next_lesson_line(progress, start) == "Next: lessons/02-traffic.md."


def test_with_triton_the_next_step_after_lesson_05_is_lesson_06(tmp_path):
    from learning.grader import report

    progress = _grades(tmp_path, passed=PYTHON_LESSONS_01_TO_05)
    assert report.next_lesson_line(progress) == "Next: lessons/06-first-kernel.md."


def test_once_every_python_part_passes_the_next_step_says_where_triton_runs(
        tmp_path, capsys, without_triton):
    from learning.grader import report

    progress = _grades(tmp_path, passed=EVERY_EXERCISE)
    line = report.next_lesson_line(progress)
    assert line.startswith("Every part that runs here passes; the Triton parts need Triton")
    assert line.endswith(f"{WHERE}.")
    code, out = run_check(capsys, "--root", str(tmp_path))  # no name: nothing left here
    flat = " ".join(out.split())
    assert code == 0
    assert line in flat and "Every exercise that has a lesson passes" not in flat


def test_progress_without_triton_points_past_the_triton_lessons(tmp_path, capsys,
                                                                without_triton):
    from learning import progress

    _grades(tmp_path, passed=PYTHON_LESSONS_01_TO_05)
    assert progress.main(["--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert "Next: Read lessons/11-softmax-backward.md, then run python -m learning.check " \
           "softmax_backward" in flat
    assert "needs Triton" in out and "not checked" in out  # the Python parts of 11 onwards
    assert progress.main(["--json", "--root", str(tmp_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["next"].startswith("Read lessons/11-softmax-backward.md")
    _grades(tmp_path, passed=EVERY_EXERCISE)
    assert progress.main(["--json", "--root", str(tmp_path)]) == 0
    assert WHERE in json.loads(capsys.readouterr().out)["next"]


def test_a_hint_without_triton_is_not_for_a_triton_part(tmp_path, capsys, without_triton):
    _grades(tmp_path, passed=["softmax"])
    code, out = run_check(capsys, "softmax", "--hint", "--root", str(tmp_path))
    flat = " ".join(out.split())
    assert code == 0
    assert flat.startswith("Every part of softmax that runs here passes.")
    assert "Hint 1" not in flat


def test_a_stub_still_raising_is_named_in_words_where_the_solution_waits(tmp_path, capsys):
    from learning import solution
    from learning.grader import state

    progress = state.State()
    progress.record("softmax", "python", "not-started", 0, 10)
    state.save(tmp_path, progress)
    assert solution.main(["softmax", "--root", str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "python: not started (the stub still raises NotImplementedError);" in out
    assert "cases passed" not in out  # a part not started ran none of them
    assert "not-started" not in out
