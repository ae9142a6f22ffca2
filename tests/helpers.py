"""Helpers the tests share: a throwaway course folder holding a given exercise module."""

from __future__ import annotations

import os
from pathlib import Path

from learning.exercises import solution_path
from learning.grader import registry, runner

COURSE_ROOT = Path(__file__).resolve().parent.parent


def course_pythonpath() -> str:
    """PYTHONPATH for a command the tests start: the course first, then whatever the suite's
    own environment adds (packages put first on the path), so the command imports what the test
    itself imports."""
    return os.pathsep.join(p for p in (str(COURSE_ROOT), os.environ.get("PYTHONPATH", "")) if p)


def write_module(folder: Path, exercise: str, text: str) -> Path:
    path = folder / f"{exercise}.py"
    path.write_text(text, encoding="utf-8")
    return folder


def stub_text(exercise: str) -> str:
    return (COURSE_ROOT / f"{exercise}.py").read_text(encoding="utf-8")


def solution_text(exercise: str) -> str:
    return solution_path(exercise).read_text(encoding="utf-8")


def grade_text(folder: Path, exercise: str, text: str, parts=None, **options):
    """Grade ``text`` as the learner's ``<exercise>.py`` in ``folder``."""
    write_module(folder, exercise, text)
    return runner.grade(registry.find(exercise), folder, parts, **options)


def failing_bugs(part_result) -> set[str]:
    """The bug keys the grader named for the failing cases of one part."""
    return {bug.key for c in part_result.cases
            if c.verdict.status not in ("passed", "skipped", "not-run")
            for bug in c.verdict.causes}


def named_in(case_result) -> set[str]:
    """The bug keys one case's failure names ("" for a case that passed)."""
    verdict = case_result.verdict
    if verdict.status in ("passed", "skipped", "not-run"):
        return set()
    return {bug.key for bug in verdict.causes}


def version_text(exercise: str, version) -> str:
    """The module a catalogued version is graded as. A Python-part version leaves out the
    Triton part and its imports: the Python part never touches them, and importing torch and
    triton would cost every graded version seconds."""
    text = version.module_text(exercise)
    if version.part != "python" or "@triton.jit" not in text:
        return text
    head, _, tail = text.partition("@triton.jit")
    replaced = tail[tail.index("# --- known-wrong version"):]
    imports = ("import torch", "import triton", "import triton.language as tl")
    head = "\n".join(line for line in head.splitlines() if line not in imports)
    return f"{head}\n\n{replaced}"




def triton_version() -> tuple[int, int]:
    import triton

    return tuple(int(x) for x in triton.__version__.split(".")[:2])


def compiler_names_every_rejection() -> bool:
    """Whether Triton's compiler raises, with the line, on an `if` on a block of values and on
    a kernel that returns a value (3.4 on): 3.3's ends its process on an assertion of LLVM's
    there, which the compile check says is Triton's crash."""
    return triton_version() >= (3, 4)


def pre_run_hooks() -> bool:
    """Whether the installed Triton lets code hook a kernel's launch (add_pre_run_hook, 3.6 on):
    routes built on one cannot run on older releases."""
    from triton.runtime.jit import JITFunction

    from learning.grader import mode

    if mode.select().interpret:
        from triton.runtime.interpreter import InterpretedFunction

        return hasattr(InterpretedFunction, "add_pre_run_hook")
    return hasattr(JITFunction, "add_pre_run_hook")


def dot_takes_m_and_n_below_16() -> bool:
    """Whether the installed Triton's tl.dot takes M and N below 16 on NVIDIA GPUs (3.5 on)."""
    import triton

    return tuple(int(x) for x in triton.__version__.split(".")[:2]) >= (3, 5)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped by its new parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` stops running within ``seconds``; if not, it is killed (a test leaves
    nothing behind) and the answer is False."""
    import contextlib
    import signal
    import time

    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            return False
        time.sleep(0.05)
    return True
