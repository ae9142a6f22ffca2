"""The README's "Where you can take it" holds: the devcontainer, the notebook and the line that
sends learners without Triton to them exist and do what the section says."""

from __future__ import annotations

import json
import re

from learning.grader import gpu_compile, mode
from tests.helpers import COURSE_ROOT

README = (COURSE_ROOT / "README.md").read_text(encoding="utf-8")
DEVCONTAINER = COURSE_ROOT / ".devcontainer" / "devcontainer.json"


def readme_commands() -> list[str]:
    """The set-up commands of the README's "Start" section, in order."""
    start = README.split("## Start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", start)


def where_section() -> str:
    return README.split("## Where you can take it", 1)[1].split("\n## ", 1)[0]


def test_the_devcontainer_runs_the_readmes_first_command_on_creation():
    container = json.loads(DEVCONTAINER.read_text(encoding="utf-8"))
    first = readme_commands()[0]
    create = container["postCreateCommand"]
    assert create.endswith(first), create
    # the CPU build of torch first, so that the first command finds torch installed
    assert create.index("--index-url https://download.pytorch.org/whl/cpu") < create.index(first)
    version = re.search(r"python:(\d+)\.(\d+)", container["image"])
    assert version and (int(version[1]), int(version[2])) >= (3, 10), container["image"]


def test_the_section_names_files_that_exist_and_every_platform():
    section = where_section()
    for path in re.findall(r"\]\(([^)#]+)\)", section):
        assert (COURSE_ROOT / path).exists(), path
    for place in ("Linux", "free cloud GPU", "devcontainer", "macOS", "Windows"):
        assert place in section
    assert f"`{mode.WITHOUT_TRITON}=1`" in section
    for target in gpu_compile.TARGETS:
        assert target in section


def test_the_line_without_triton_points_at_files_that_exist():
    for path in re.findall(r"\(([.\w/]+\.(?:json|ipynb))\)", mode.WHERE_TRITON_RUNS):
        assert (COURSE_ROOT / path).exists(), path
    assert ".devcontainer/devcontainer.json" in mode.WHERE_TRITON_RUNS
    assert "notebooks/free_gpu.ipynb" in mode.WHERE_TRITON_RUNS


def test_the_windows_row_says_how_check_was_tested_and_that_windows_itself_was_not():
    from learning.grader import handover

    row = next(line for line in where_section().splitlines() if line.startswith("| Windows |"))
    assert f"`{handover.PORTABLE_SWITCH}=1`" in row
    assert "has not been run on a Windows machine" in row
    assert "does not run" not in row and "WSL" not in row
