"""The course's dependencies resolve on every platform learners use, without installing them.

pip evaluates environment markers for the machine it runs on, even with ``--platform``, so the
markers of pyproject.toml are evaluated here for each target, and pip is given what is left:
``pip install --dry-run --no-deps --only-binary=:all: --platform ...`` must find a wheel of
every requirement for that platform and Python. What torch itself requires of the packages
the course also names (torch pins the triton it was built with on Linux) must be met by a
release that the course's own range admits. Transitive dependencies beyond that (torch's CUDA
libraries) are torch's: their wheels are gigabytes, and resolving them would not be fast.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

packaging = pytest.importorskip("packaging", reason="the test extra installs packaging")
from packaging.markers import Marker  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402
from packaging.version import Version  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PYTHON = "3.12"  # the Python the targets are resolved for (the notebook service's, too)
PIP_SECONDS = 300



def glibc(version: int, machine: str) -> tuple[str, ...]:
    """The wheel platforms a Linux machine with glibc 2.``version`` installs: pip expands a
    macOS tag to the older releases it covers, but takes a manylinux tag literally."""
    return tuple(f"manylinux_2_{minor}_{machine}" for minor in range(version, 16, -1)) + \
        (f"manylinux2014_{machine}",)


# (label, pip's platform tags, the marker environment of such a machine). glibc 2.28 is the
# oldest that torch's and triton's Linux wheels (manylinux_2_28) install on.
PLATFORMS = {
    "linux-x86_64": (glibc(28, "x86_64"),
                     {"sys_platform": "linux", "platform_system": "Linux",
                      "platform_machine": "x86_64", "os_name": "posix"}),
    "linux-aarch64": (glibc(28, "aarch64"),
                      {"sys_platform": "linux", "platform_system": "Linux",
                       "platform_machine": "aarch64", "os_name": "posix"}),
    "win_amd64": (("win_amd64",),
                  {"sys_platform": "win32", "platform_system": "Windows",
                   "platform_machine": "AMD64", "os_name": "nt"}),
    "macos-arm64": (("macosx_14_0_arm64",),
                    {"sys_platform": "darwin", "platform_system": "Darwin",
                     "platform_machine": "arm64", "os_name": "posix"}),
}
# Which Triton each platform gets, by the markers alone (None: none at all).
EXPECTED_TRITON = {"linux-x86_64": "triton", "linux-aarch64": "triton",
                   "win_amd64": "triton-windows", "macos-arm64": None}


def environment(label: str) -> dict:
    """The full marker environment of a target: its platform and the Python resolved for."""
    _, env = PLATFORMS[label]
    return {**env, "python_version": PYTHON, "python_full_version": f"{PYTHON}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "implementation_version": f"{PYTHON}.0", "platform_release": "",
            "platform_version": "", "extra": ""}


def declared_dependencies() -> list[str]:
    """pyproject.toml's [project] dependencies, as written (markers included)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the installed project's metadata says the same
        import importlib.metadata

        return [r for r in importlib.metadata.requires("triton-course") or []
                if "extra ==" not in r]
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]["dependencies"]


def readme_torch_pin() -> str:
    """The torch requirement of the README's set-up commands (``torch==2.13.0``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"pip install (torch==[\w.+]+) -e \.", text)
    assert found, "the README's first command no longer names a torch release"
    return found[1]


def for_platform(label: str) -> list[Requirement]:
    """The requirements a learner's pip installs on ``label``: markers evaluated there."""
    env = environment(label)
    wanted = []
    for text in [readme_torch_pin(), *declared_dependencies()]:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(env):
            requirement.marker = None
            wanted.append(requirement)
    return wanted


def pip(*arguments: str, timeout: float = PIP_SECONDS) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check",
                           *arguments], capture_output=True, text=True, timeout=timeout)


def target_options(label: str) -> list[str]:
    platforms = [option for tag in PLATFORMS[label][0] for option in ("--platform", tag)]
    return ["--only-binary=:all:", *platforms, "--python-version", PYTHON, "--implementation",
            "cp"]


@pytest.fixture(scope="module")
def index_reachable():
    """Skip, with pip's own words, where the package index cannot be reached."""
    try:
        done = pip("index", "versions", "rich", "--timeout", "15", "--retries", "1", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.skip("the package index did not answer within 60 s (pip index versions rich)")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        pytest.skip(f"the package index cannot be reached from here: {last}")


def test_markers_give_each_platform_its_triton():
    for label, expected in EXPECTED_TRITON.items():
        names = {canonicalize_name(r.name) for r in for_platform(label)}
        tritons = names & {"triton", "triton-windows"}
        assert tritons == ({expected} if expected else set()), (label, sorted(names))


def test_every_dependency_but_triton_is_for_every_platform():
    per_platform = [{canonicalize_name(r.name) for r in for_platform(label)}
                    for label in PLATFORMS]
    common = set.intersection(*per_platform)
    assert {"torch", "numpy", "rich", "watchdog"} <= common


def test_the_upper_bound_of_triton_is_the_same_on_linux_and_windows():
    specs = {Requirement(t).name: str(Requirement(t).specifier) for t in declared_dependencies()
             if Requirement(t).name in ("triton", "triton-windows")}
    assert specs["triton"] == specs["triton-windows"], specs


@pytest.mark.exhaustive
@pytest.mark.network
@pytest.mark.parametrize("label", list(PLATFORMS))
def test_the_dependencies_resolve_for(label, tmp_path, index_reachable):
    wanted = for_platform(label)
    report = tmp_path / "report.json"
    done = pip("install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
               *target_options(label), "--target", str(tmp_path / "target"),
               "--report", str(report), *(str(r) for r in wanted))
    errors = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert done.returncode == 0, f"{label}: pip could not resolve {[str(r) for r in wanted]}:" \
                                 f"\n" + "\n".join(errors or done.stderr.splitlines()[-15:])
    chosen = {canonicalize_name(item["metadata"]["name"]): item
              for item in json.loads(report.read_text())["install"]}
    assert set(chosen) == {canonicalize_name(r.name) for r in wanted}
    for requirement in wanted:
        version = chosen[canonicalize_name(requirement.name)]["metadata"]["version"]
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
    # What torch requires of the packages the course names must meet the course's ranges.
    ours = {canonicalize_name(r.name): r for r in wanted}
    torch_needs = chosen["torch"]["metadata"].get("requires_dist") or []
    env = environment(label)
    for text in torch_needs:
        needed = Requirement(text)
        name = canonicalize_name(needed.name)
        if name not in ours or name == "torch":
            continue
        if needed.marker is not None and not Marker(str(needed.marker)).evaluate(env):
            continue
        version = chosen[name]["metadata"]["version"]
        if needed.specifier.contains(version, prereleases=True):
            continue
        both = ours[name].specifier & needed.specifier
        listed = pip("index", "versions", needed.name, *target_options(label)[1:])
        found = re.search(r"Available versions: (.*)", listed.stdout)
        versions = [Version(v.strip()) for v in found[1].split(",")] if found else []
        assert any(both.contains(v, prereleases=True) for v in versions), \
            f"{label}: torch {chosen['torch']['metadata']['version']} requires {text!r}, " \
            f"and no release of {needed.name} for this platform is in the course's range too " \
            f"({ours[name].specifier})"
