"""The free-GPU notebook runs: every cell executed here, GPU-only ones skipped with the reason.

The notebook is plain Python (no shell escapes or magics), so its cells are executed in order
in one namespace by a few lines of Python instead of a Jupyter kernel, in a fresh process whose
working folder is a learner's copy of the course (the exercise files as shipped, the
machinery linked): what its checks record lands there, not in this repository.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import COURSE_ROOT

NOTEBOOK = COURSE_ROOT / "notebooks" / "free_gpu.ipynb"

RUNNER = r"""
import json, sys, traceback
cells = json.load(open(sys.argv[1], encoding="utf-8"))["cells"]
try:
    import torch
    gpu = torch.cuda.is_available()
except ImportError:
    gpu = False
namespace = {"__name__": "__main__"}
for number, cell in enumerate(cells):
    if cell["cell_type"] != "code":
        continue
    if "gpu" in cell["metadata"].get("tags", []) and not gpu:
        print(f"[cell {number}] skipped, needs a CUDA GPU: "
              f"{cell['metadata']['skip_without_gpu']}", flush=True)
        continue
    print(f"[cell {number}] running", flush=True)
    try:
        exec(compile("".join(cell["source"]), f"<cell {number}>", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"[cell {number}] FAILED", flush=True)
        sys.exit(1)
"""


def cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def test_the_notebook_is_a_clean_version_4_notebook():
    document = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert document["nbformat"] == 4
    for cell in document["cells"]:
        assert cell["cell_type"] in ("markdown", "code")
        assert isinstance(cell["source"], list)
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None  # committed clean


def test_its_code_is_plain_python():
    for number, cell in enumerate(cells()):
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            compile(source, f"<cell {number}>", "exec")
            assert not any(line.lstrip().startswith(("!", "%")) for line in source.splitlines())


def test_every_gpu_only_cell_says_why():
    marked = [c for c in cells() if "gpu" in c["metadata"].get("tags", [])]
    assert marked
    assert all(c["metadata"].get("skip_without_gpu") for c in marked)


def test_it_walks_lessons_06_to_08_with_check():
    text = "".join("".join(c["source"]) for c in cells())
    for lesson, exercise in (("06", "elementwise"), ("07", "reductions"), ("08", "softmax")):
        assert f"lessons/{lesson}-" in text
        assert f'course("learning.check {exercise} --part triton")' in text
    assert 'course("learning.doctor")' in text


@pytest.fixture
def learners_copy(tmp_path):
    """A course folder as a learner has it: the shipped exercise files, the rest linked."""
    for path in COURSE_ROOT.iterdir():
        if path.is_file() and (path.suffix == ".py" or path.name in ("pyproject.toml",
                                                                    "README.md")):
            (tmp_path / path.name).write_bytes(path.read_bytes())
    for name in ("learning", "lessons", "notebooks", "lab"):
        (tmp_path / name).symlink_to(COURSE_ROOT / name)
    return tmp_path


@pytest.mark.exhaustive
def test_every_cell_runs_here(learners_copy):
    try:
        importlib.metadata.version("triton-course")
    except importlib.metadata.PackageNotFoundError:
        # Then the install cell runs pip install -e, which needs the package index.
        pytest.skip("the course runs here from PYTHONPATH, not installed: the notebook's "
                    "install cell would need the package index")
    env = {k: v for k, v in os.environ.items() if k != "LEARNING_FORKSERVER"}
    env["LEARNING_WARM"] = "0"
    done = subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOK)], capture_output=True,
                          text=True, cwd=learners_copy, env=env, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert f"The course is in {learners_copy}" in out
    gpu = "skipped, needs a CUDA GPU" not in out
    if not gpu:
        assert out.count("skipped, needs a CUDA GPU") == 2
        assert "Triton interpreter" in out  # doctor's tiny kernel and the checks say so
    for exercise in ("elementwise", "reductions", "softmax"):
        assert f"check {exercise}" in out
    assert out.count("not started") >= 3  # the shipped files, graded as a learner starts
    assert (learners_copy / ".course-state").is_dir()
    assert "FAILED" not in out
