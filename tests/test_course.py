"""The course as a whole: README, lessons, CI and the registry agree with each other."""

import re

import pytest

from learning import computed, course
from learning.exercises import stub_path
from learning.grader import registry
from tests.helpers import COURSE_ROOT

README = (COURSE_ROOT / "README.md").read_text(encoding="utf-8")


def _readme_commands() -> list[str]:
    return re.findall(r"```\n(python -m pip install [^\n]+)\n```", README)


def test_readme_has_exactly_two_setup_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("python -m learning.explain softmax")
    assert "pytest" in commands[1]


def test_ci_runs_the_readmes_test_command():
    ci = (COURSE_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _readme_commands()[1] in ci.splitlines()


def test_readme_lists_every_lesson_with_its_true_status():
    for lesson in course.LESSONS:
        row = next(line for line in README.splitlines() if line.startswith(f"| {lesson.number} |"))
        if lesson.available:
            assert row.endswith("| available |"), row
            assert f"(lessons/{lesson.filename})" in row
        else:
            assert row.endswith("| coming |"), row


def test_no_lesson_file_outside_the_course_table():
    files = {path.name for path in course.LESSONS_DIR.glob("*.md")}
    assert files <= {lesson.filename for lesson in course.LESSONS}


def test_computed_sections_of_the_lessons_are_current():
    assert computed.stale_lessons() == []


def test_every_exercise_has_its_module_stub_solution_and_lessons():
    for exercise in registry.all_exercises():
        shipped = (COURSE_ROOT / exercise.filename).read_text(encoding="utf-8")
        assert shipped == stub_path(exercise.name).read_text(encoding="utf-8"), (
            f"{exercise.filename} differs from learning/exercises/{exercise.name}/stub.py: the "
            "course must ship the stub, and reset restores that copy")
        assert (COURSE_ROOT / "learning" / "exercises" / exercise.name / "solution.py").exists()
        for part in exercise.parts:
            lesson = course.lesson_for(exercise.name, part.name)
            assert lesson is not None and lesson.number == part.lesson


# test_exercises' test_importing_each_stub_only_defines imports triton_kernels and every stub
# in the quick run's one process: this one is exhaustive
@pytest.mark.exhaustive
def test_importing_modules_runs_no_kernels(tmp_path):
    import subprocess
    import sys

    probe = "import triton_kernels, softmax; print('ok')"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=COURSE_ROOT, env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin"},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_readme_states_the_memory_cap_the_grader_applies():
    from learning.grader.childproc import MEMORY_ALLOWANCE_GIB

    readme = " ".join((COURSE_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"a memory cap of {MEMORY_ALLOWANCE_GIB:g} GiB beyond its own" in readme


def test_a_lesson_that_grades_nothing_says_so_in_the_readme_progress_and_lessons(tmp_path):
    from learning import progress
    from learning.grader import state

    graded = {e.name: [p.name for p in e.parts] for e in registry.all_exercises()}
    ungraded = [lesson for lesson in course.LESSONS
                if lesson.part not in graded.get(lesson.exercise, [])]
    assert [lesson.number for lesson in ungraded] == ["10"]
    row = next(line for line in README.splitlines() if line.startswith("| 10 |"))
    assert "| nothing (`python -m learning.bench`) | none |" in row
    listed = next(r for r in progress.rows(state.load(tmp_path)) if r["lesson"] == "10")
    assert listed["exercise"] is None and listed["parts"] == {}
    for name in ("02-traffic.md", "10-measuring.md"):
        text = " ".join((course.LESSONS_DIR / name).read_text(encoding="utf-8").split())
        assert "grades nothing new" in text, name


class _Picked(Exception):
    """Raised by the recording _plan below, so that no kernel runs."""


def _launcher_plan(monkeypatch, launch):
    """The plan a triton_kernels launcher asks _plan for, without launching anything."""
    import triton_kernels as tk

    planner = tk.production_layer() or tk  # the plan the launcher asks for, wherever it is
    real = planner._plan

    def recording(*args, **kwargs):
        raise _Picked(real(*args, **kwargs))

    monkeypatch.setattr(planner, "_plan", recording)
    try:
        launch()
    except _Picked as picked:
        return picked.args[0]
    finally:
        monkeypatch.setattr(planner, "_plan", real)
    raise AssertionError("the launcher did not ask _plan")


def test_the_routing_tables_in_the_lessons_are_what_the_launchers_pick(monkeypatch, device):
    # lessons 09 and A1 show learning.explainers.facts' routing tables; here the launchers
    # themselves, on tensors of this mode, pick the same kernels as those tables say for this mode
    import torch

    import triton_kernels as tk
    from lab import production as fast
    from learning.explainers import facts

    pieces = fast._max_pieces(torch.device(device))
    for dtype in (torch.float32, torch.bfloat16):
        for n_cols in (512, 8192, 8193, 32768, 32769):
            x = torch.empty((2, n_cols), dtype=dtype, device=device)
            w = torch.empty((n_cols,), dtype=dtype, device=device)
            for fn, launch in (("softmax", lambda x=x: tk.softmax(x)),
                               ("rmsnorm", lambda x=x, w=w: tk.rmsnorm(x, w))):
                expected = facts.plan_for(fn, n_cols, pieces, x.element_size())
                assert _launcher_plan(monkeypatch, launch) == expected, (fn, dtype, n_cols)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # on purpose
def test_the_rmsnorm_overflow_section_is_what_torch_and_the_kernel_do(device):
    # lesson 09: n float32 squares overflow at sqrt(max / n), and past it the reference kernel
    # returns zeros without an error; its example uses the widest row the library accepts
    import math

    import torch

    import triton_kernels as tk
    from learning.exercises.rmsnorm import explainer as page

    lesson = (COURSE_ROOT / "lessons" / "09-rmsnorm-triton.md").read_text(encoding="utf-8")
    assert f"rmsnorm overflow_dtypes 4096,1e18,{tk.MAX_COLS} -->" in lesson
    n = 4096
    limit = math.sqrt(page.FLOAT32_MAX / n)
    for scale, finite in ((0.99, True), (1.01, False)):
        squares = torch.full((n,), scale * limit, dtype=torch.float32).square()
        assert bool(torch.isfinite(squares.sum())) is finite
    x = torch.full((2, n), 1e18, dtype=torch.float32, device=device)
    out = tk.rmsnorm(x, torch.ones(n, device=device))
    assert bool((out == 0).all())


def test_a_part_s_section_is_a_heading_of_its_lesson():
    sections = [(exercise, part) for exercise in registry.all_exercises()
                for part in exercise.parts if part.section]
    assert sections, "no part names the section that sets its task"
    for exercise, part in sections:
        lesson = course.lesson_for(exercise.name, part.name)
        text = lesson.path.read_text(encoding="utf-8")
        assert f"\n## {part.section}\n" in text, (exercise.name, part.name, part.section)
