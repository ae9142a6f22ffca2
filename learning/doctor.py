"""Check that this machine can take the course: ``python -m learning.doctor``.

Reports the versions of Python and the packages the course needs, where kernels will run and
why, runs one tiny kernel in that mode, and says what to fix when something is wrong.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from learning import cli
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.course import COURSE_ROOT, LESSONS
from learning.grader import mode

MINIMUM_PYTHON = (3, 10)
PACKAGES = ("torch", "triton", "numpy", "rich")
KERNEL_SECONDS = 180

# A tiny kernel, run in a fresh process so that a broken install cannot take this one down.
PROBE = textwrap.dedent("""
    import sys
    from learning.grader import mode
    chosen = mode.select(force_interpret={force})
    import torch, triton, triton.language as tl

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)

    x = torch.arange(10, dtype=torch.float32, device=chosen.device)
    out = torch.full_like(x, float("nan"))
    add[(triton.cdiv(10, 8),)](x, x, out, 10, BLOCK=8)
    assert torch.equal(out.cpu(), 2 * x.cpu()), out
    print(chosen.describe())
""")


@dataclass
class Finding:
    what: str
    detail: str
    ok: bool
    fix: str = ""
    note: bool = False  # not wrong, but limits what can be done here


def check_python() -> Finding:
    version = ".".join(str(n) for n in sys.version_info[:3])
    ok = sys.version_info[:2] >= MINIMUM_PYTHON
    fix = "" if ok else "install Python 3.10 or newer and make a new virtual environment with it"
    return Finding("Python", version, ok, fix)


def check_triton() -> Finding:
    """Triton, or where the course's kernels can run when it cannot be had here."""
    missing = mode.triton_missing()
    if missing is None:
        return check_package("triton")
    line = f"not here ({missing}): explain, lessons 01 to 05 and the Python part of every " \
           f"exercise work without it; {mode.WHERE_TRITON_RUNS}"
    if sys.platform == "darwin" or mode.hidden_on_purpose():
        return Finding("triton", line, True, note=True)  # nothing to fix: none exists here
    fix = "python -m pip install triton-windows" if sys.platform == "win32" else \
        "python -m pip install -e . (it installs the Triton that the course needs)"
    return Finding("triton", line, False, fix)


def check_package(name: str) -> Finding:
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        hint = {"numpy": "Triton's interpreter needs numpy: python -m pip install numpy",
                "torch": "python -m pip install torch (the CPU build is enough without a GPU)"}
        return Finding(name, "not installed", False,
                       hint.get(name, f"python -m pip install {name}"))
    try:
        __import__(name)
    except Exception as error:  # a broken install can raise anything at import
        return Finding(name, f"{version}, but importing it fails: {error}", False,
                       f"reinstall it: python -m pip install --force-reinstall {name}")
    return Finding(name, version, True)


def check_interpreter(force_interpret: bool) -> Finding:
    """Whether the interpreter, where kernels will run, can run the course's loops here."""
    problem = mode.interpreter_problem()
    if not problem:
        return Finding("Triton's interpreter", "no known problem with these versions", True)
    if not mode.choose(force_interpret).interpret:
        return Finding("Triton's interpreter", "not used here: kernels compile for the GPU "
                       "(python -m learning.doctor --interpret checks it)", True)
    detail, _, fix = problem.partition("): ")
    return Finding("Triton's interpreter", detail + ")", False, fix)


def check_kernel(force_interpret: bool) -> Finding:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(COURSE_ROOT), env.get("PYTHONPATH", "")])
    # Triton compiles a kernel from its source file, so the probe must be a file, not -c.
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / "doctor_probe.py"
        probe.write_text(PROBE.format(force=force_interpret), encoding="utf-8")
        try:
            done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True,
                                  timeout=KERNEL_SECONDS, env=env)
        except subprocess.TimeoutExpired:
            return Finding("tiny kernel", f"did not finish in {KERNEL_SECONDS} s", False,
                           "run it again; a first compile can be slow, a hang is not normal")
    if done.returncode == 0:
        return Finding("tiny kernel", f"ran correctly: {done.stdout.strip()}", True)
    last = (done.stderr.strip().splitlines() or ["no message"])[-1]
    fix = "check that torch and triton come from matching releases (the triton that your " \
          "torch release names), and run python -m learning.doctor --interpret"
    if "0 active drivers" in done.stderr:
        fix = "Triton found no GPU driver: the interpreter should have been chosen; report this"
    return Finding("tiny kernel", f"failed: {last}", False, fix)


def _where_to_go_on(root: Path | None) -> str:
    """' Start with lessons/01-...' while nothing is checked yet; else the next step, as
    ``learning.progress`` names it. Imported here: only once every package is known to load."""
    from learning import progress
    from learning.check import default_root
    from learning.grader import state

    saved = state.load(root or default_root())
    if saved.grades:
        return f" Next: {progress.next_step(saved)}."
    first = next((lesson for lesson in LESSONS if lesson.available), None)
    return f" Start with lessons/{first.filename}." if first else ""


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    parser = CommandParser(prog="python -m learning.doctor",
                           description="Check Python, the packages, and where kernels run.")
    parser.add_argument("--interpret", action="store_true",
                        help="check Triton's interpreter even on a GPU machine")
    parser.add_argument("--root", type=cli.folder, metavar="DIR",
                        help="the folder holding your exercise files (default: the course folder)")
    try:
        options = parser.parse_args(argv)
    except HelpShown as shown:
        return shown.code
    except ArgumentError as error:
        console.print(f"doctor: {escape(str(error))}", style="red", highlight=False)
        return 2
    findings = [check_python()] + [check_triton() if name == "triton" else check_package(name)
                                   for name in PACKAGES]
    kernels = mode.triton_missing() is None  # without Triton there is no kernel to run
    if kernels and all(f.ok for f in findings):
        findings.append(check_interpreter(options.interpret))
    if kernels and all(f.ok for f in findings):
        findings.append(check_kernel(options.interpret))
    for finding in findings:
        mark = "[yellow]note[/yellow]" if finding.note else \
            "[green]ok[/green]  " if finding.ok else "[red]FIX[/red] "
        console.print(f"{mark} {finding.what}: {escape(finding.detail)}", highlight=False)
        if finding.fix:
            console.print(f"      fix: {escape(finding.fix)}", highlight=False)
    healthy = all(f.ok for f in findings)
    start = _where_to_go_on(options.root) if healthy else ""
    if healthy and not kernels:
        start += " The Triton parts need a machine with Triton (see the note above)."
    console.print(f"\nAll good.{start}" if healthy else
                  "\nFix the lines marked FIX, then run python -m learning.doctor again.",
                  highlight=False)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(cli.run(main, "doctor"))
