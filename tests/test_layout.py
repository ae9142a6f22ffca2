"""The layout of learning/: the commands at the top, the machinery below, and no import circles.

learning/__init__.py lists every module with its job; these tests keep that list, the folder and
the imports in step, so that the layout cannot drift without a test saying so.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import learning
from tests.helpers import COURSE_ROOT

PACKAGE = COURSE_ROOT / "learning"

# What a learner (or a maintainer) runs: python -m learning.NAME.
COMMANDS = {"bench", "check", "computed", "doctor", "explain", "progress", "reset", "solution",
            "watch"}
# The few modules at the top that are not commands, and why each is there.
SHARED = {
    "__init__": "the package itself: the layout, and the settings every course process takes",
    "cli": "what every command shares (argument errors as one line, the console); the "
           "explainers raise its ArgumentError too",
    "course": "the lessons in reading order and the course's folders, which the commands, the "
              "grader and the explainers all read",
    "broken_install": "the package's start-up installs it for every command: a library that "
                      "cannot be imported is named in one line",
}
# The subpackages: the grader's machinery, and the course's data.
SUBPACKAGES = {"grader", "exercises", "explainers"}


def _modules() -> dict[str, Path]:
    """Every module of the learning package by its dotted name (a package by its own)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(COURSE_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The learning modules ``name`` imports, anywhere in it (in functions too), with the line
    of the first import of each. ``from package import name`` depends on the submodule when
    there is one, else on the package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str, line: int):
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in modules else base, node.lineno)
    return {target: line for target, line in found.items() if target.startswith("learning")}


def _graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _circle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import circle as the list of modules around it, or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = "open"
        path.append(name)
        for target in sorted(graph.get(name, {})):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        state[name] = "done"
        path.pop()
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def test_learning_imports_without_a_circle_even_inside_functions():
    graph = _graph()
    assert "learning.grader.worker" in graph and graph["learning.check"], "the graph is empty"
    circle = _circle(graph)
    if circle:
        steps = [f"{a} imports {b} (line {graph[a][b]})" for a, b in zip(circle, circle[1:])]
        raise AssertionError("an import circle: " + "; ".join(steps) + ". Move what both need "
                             "into the module it belongs in, rather than importing it late.")


def test_the_circle_finder_finds_a_circle_through_a_function_level_import():
    graph = {"learning.a": {"learning.b": 1}, "learning.b": {"learning.c": 9},
             "learning.c": {"learning.a": 40}, "learning.d": {"learning.a": 2}}
    assert _circle(graph) == ["learning.a", "learning.b", "learning.c", "learning.a"]
    assert _circle({"learning.a": {"learning.b": 1}, "learning.b": {}}) is None


def test_the_top_level_holds_the_commands_and_a_short_list_of_shared_modules():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert modules | packages == COMMANDS | set(SHARED) | SUBPACKAGES, (
        "a module at the top of learning/ is a command (python -m learning.NAME); machinery "
        "belongs in learning/grader/, and a new shared module needs its reason in SHARED")
    assert not (modules & packages)


def test_every_command_runs_as_a_module_with_a_main():
    for name in sorted(COMMANDS):
        module = PACKAGE / f"{name}.py"
        if module.exists():
            text = module.read_text(encoding="utf-8")
            assert 'if __name__ == "__main__":' in text, name
        else:  # a command with modules of its own is a package with a __main__
            text = (PACKAGE / name / "__init__.py").read_text(encoding="utf-8")
            assert (PACKAGE / name / "__main__.py").exists(), name
        assert re.search(r"^def main\(argv: list\[str\] \| None = None\) -> int:", text,
                         re.MULTILINE), f"learning.{name} has no main(argv) -> int"


def test_every_module_the_code_starts_as_a_process_exists():
    started = set()
    for path in PACKAGE.rglob("*.py"):
        started |= set(re.findall(r'"-m", "(learning[\w.]*)"', path.read_text(encoding="utf-8")))
    assert started >= {"learning.grader.worker", "learning.grader.gpu_compile",
                       "learning.grader.forkserver"}
    modules = _modules()
    for name in started:
        assert name in modules, f"{name} is started with python -m but does not exist"
        assert 'if __name__ == "__main__":' in modules[name].read_text(encoding="utf-8"), name


def _listed() -> set[str]:
    """The paths the layout in learning/__init__.py names, from its indentation."""
    listed, stack = set(), []
    for line in learning.__doc__.splitlines():
        found = re.match(r"^( +)(\S+(?:\.py|/))(?:\s|$)", line)
        if not found or found[2] == "learning/":
            continue
        depth = len(found[1])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        path = "".join(name for _, name in stack) + found[2]
        listed.add(path)
        if path.endswith("/"):
            stack.append((depth, found[2]))
    return listed


def test_the_layout_in_the_package_docstring_names_every_module_and_only_real_ones():
    listed = _listed()
    expected = {f"{p.name}" for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    expected |= {f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    for package in ("grader", "bench"):  # machinery: one line per module
        expected |= {f"{package}/{p.name}" for p in (PACKAGE / package).glob("*.py")
                     if p.name not in ("__init__.py", "__main__.py")}
    assert expected <= listed, f"not in learning/__init__.py's layout: {sorted(expected - listed)}"
    missing = sorted(path for path in listed if not (PACKAGE / path).exists())
    assert not missing, f"learning/__init__.py's layout names what is not there: {missing}"


# ---------------------------------------------------------------------------------------------
# The exercises: one folder each, the same files in every one, each named once.

def _entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.name != "__pycache__"}


def test_every_exercise_folder_holds_the_same_files_and_nothing_else():
    from learning import exercises

    folders = {p.name for p in exercises.FOLDER.iterdir() if p.is_dir()} - {"__pycache__"}
    assert _entries(exercises.FOLDER) == folders | {"__init__.py"}, (
        "learning/exercises holds the exercises' folders and its own __init__.py, nothing else")
    for name in sorted(folders):
        assert _entries(exercises.FOLDER / name) == set(exercises.FILES), (
            f"learning/exercises/{name}/ holds {sorted(_entries(exercises.FOLDER / name))}; every "
            f"exercise's folder holds exactly {list(exercises.FILES)}")


def test_every_exercise_folder_is_named_once_and_declares_the_exercise_of_its_name():
    from learning import exercises
    from learning.grader import registry

    folders = {p.name for p in exercises.FOLDER.iterdir() if p.is_dir()} - {"__pycache__"}
    assert len(set(exercises.NAMES)) == len(exercises.NAMES), "an exercise is named twice"
    assert set(exercises.NAMES) == folders, (
        f"named but no folder: {sorted(set(exercises.NAMES) - folders)}; a folder not named in "
        f"learning/exercises/__init__.py: {sorted(folders - set(exercises.NAMES))}")
    assert [e.name for e in registry.all_exercises()] == list(exercises.NAMES)
    for name in exercises.NAMES:
        assert (COURSE_ROOT / f"{name}.py").exists(), f"{name}.py, the learner's module, is missing"


def test_an_exercise_folders_init_is_one_line_and_imports_nothing():
    """Importing one file of an exercise (its worked example, say) runs its package's __init__:
    a line that imports nothing keeps that import as light as the file itself."""
    from learning import exercises

    for name in exercises.NAMES:
        text = exercises.path(name, "__init__.py").read_text(encoding="utf-8")
        body = ast.parse(text).body
        assert len(text.strip().splitlines()) == 1 and len(body) == 1 and \
            isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), (
            f"learning/exercises/{name}/__init__.py: one docstring line, nothing else")


def test_the_folders_an_exercise_was_once_spread_over_are_gone():
    from learning import exercises, explainers

    for old in ("stubs", "solutions", "catalogue"):  # a checkout may keep an old __pycache__
        assert not list((PACKAGE / old).glob("*.py")), (
            f"learning/{old}/: its files now live in each exercise's folder")
    shared = {"__init__.py", "page.py", "facts.py"}
    topics = {f"{topic}.py" for topic in explainers.OTHER_TOPICS}
    assert _entries(PACKAGE / "explainers") == shared | topics, (
        "learning/explainers holds what the worked examples share and the topics that are no "
        "exercise; an exercise's worked example is its folder's explainer.py")
    assert list(explainers.TOPICS) == [*exercises.NAMES, *explainers.OTHER_TOPICS]


# ---------------------------------------------------------------------------------------------
# The course's top level: the learner's files first, the lab in one folder.

# Every entry at the top of the course, and who it is for. Exercise modules are found from the
# registry; everything else must be here.
TOP_LEVEL = {
    "README.md": "everyone: what the course is, its two commands, how to work",
    "pyproject.toml": "the course's package and its dependencies",
    "lessons": "the learner: the lessons, read in order",
    "learning": "the learner's commands (check, explain, ...) and the grader behind them",
    "triton_kernels.py": "the learner: the reference softmax, backward and RMSNorm",
    "reference_matmul.py": "the learner: the reference matmul of lesson 12",
    "reference_attention.py": "the learner: the reference attention of lessons 13 and 14",
    "notebooks": "the learner: lessons 06 to 08 as a notebook, for a free cloud GPU",
    "tests": "the maintainer: the course's own tests",
    "lab": "the maintainer: the work behind the reference's speed, and every experiment",
}


def _exercise_modules() -> set[str]:
    from learning.grader import registry

    return {exercise.filename for exercise in registry.all_exercises()}


def test_the_top_level_holds_the_learners_files_and_one_lab():
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True,
                             cwd=COURSE_ROOT).stdout.split()
    if not tracked:
        import pytest

        pytest.skip("not a git checkout: the tracked files cannot be listed")
    # a path git still lists but the tree no longer holds is not there for a reader
    top = {path.split("/")[0] for path in tracked
           if not path.startswith(".") and (COURSE_ROOT / path).exists()}
    unexplained = top - set(TOP_LEVEL) - _exercise_modules()
    assert not unexplained, f"at the top with no reader named in TOP_LEVEL: {sorted(unexplained)}"


def test_the_reference_imports_nothing_from_the_lab():
    """A reference module reads top to bottom on its own: the lab builds on the reference
    (its production layer installs itself through triton_kernels' public hook), never the
    other way, so there is no circle between them."""
    for name in ("triton_kernels.py", "reference_matmul.py", "reference_attention.py"):
        tree = ast.parse((COURSE_ROOT / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("lab"), f"{name} imports {node.module}"
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names if a.name.split(".")[0] == "lab"]
                assert not found, f"{name} imports {found}"


def test_every_file_in_the_lab_is_referred_to():
    """A probe or a result nothing names is a file nobody can find a reason for."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True,
                             cwd=COURSE_ROOT).stdout.split()
    texts = {path: (COURSE_ROOT / path).read_text(encoding="utf-8", errors="replace")
             for path in tracked if path.endswith((".md", ".py", ".txt", ".ipynb"))
             and (COURSE_ROOT / path).exists()}
    lost = []
    for path in filter(lambda path: (COURSE_ROOT / path).is_file(), tracked):
        if not path.startswith(("lab/probes/", "lab/results/")):
            continue
        name = path.rsplit("/", 1)[1]
        stem = name.rsplit(".", 1)[0]
        if not any(name in text or f'"{stem}"' in text or f"import {stem}" in text
                   for other, text in texts.items() if other != path):
            lost.append(path)
    assert not lost, f"nothing refers to {lost}"


@pytest.mark.exhaustive  # builds and installs a wheel: with the package index checks
def test_the_references_import_from_an_installed_wheel_outside_the_course(tmp_path):
    """pyproject once shipped only learning/, which imports triton_kernels and reference_*:
    outside the course's folder those imports failed."""
    import os
    import subprocess
    import sys
    import zipfile

    # built from a copy of the tracked files: a build writes build/ beside the sources
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True,
                             cwd=COURSE_ROOT).stdout.split()
    if not tracked:
        import pytest

        pytest.skip("not a git checkout: the tracked files cannot be listed")
    for path in filter(lambda path: (COURSE_ROOT / path).is_file(), tracked):
        if path.startswith(("learning/", "lab/")) and "/results/" not in path or "/" not in path:
            (source / path).parent.mkdir(parents=True, exist_ok=True)
            (source / path).write_bytes((COURSE_ROOT / path).read_bytes())
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-q", str(source), "-w",
                            str(tmp_path / "wheel")], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = ("import triton_kernels, reference_matmul, reference_attention, learning.explain; "
             "print(triton_kernels.__file__, reference_matmul.__file__, "
             "reference_attention.__file__)")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=elsewhere, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(site), TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(path.startswith(str(site)) for path in done.stdout.split()), done.stdout
