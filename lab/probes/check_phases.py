"""Where the time of `python -m learning.check` goes: process start-up, CUDA, compiles, cases.

A learner with a GPU re-checks after every edit, so a check's wall time is the course's own
latency. This prints it for a finished exercise in three states of Triton's kernel cache
(empty, warm, and after an edit to the kernel), beside what merely starting Python with torch
costs on the same machine, then the phases of one check from the grader's own timeline.

    python lab/probes/check_phases.py [--exercise softmax] [--repeats 3] [--out DIR]

A check forks its worker from the learner's warm process (learning.grader.warm) when one is there;
the first check starts it. The last row shows the same check with a fresh process each time.
Runs on a GPU (compiled kernels) or without one (the interpreter); the result names which.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BASELINES = {
    "python -c 'import torch'": "import torch",
    "python -c 'import torch, triton'": "import torch, triton, triton.language",
    "... and initialise CUDA": "import torch, triton, triton.language\n"
                               "if torch.cuda.is_available():\n"
                               "    torch.zeros(1, device='cuda'); torch.cuda.synchronize()",
}


def wall(command: list[str], env: dict, cwd: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - start, done.returncode, done.stdout + done.stderr


def edit_kernel(path: Path, generation: int):
    """Change the kernel's source (a comment in its body) so Triton must compile it again."""
    import ast

    text = path.read_text()
    kernels = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.FunctionDef)
               and any("jit" in ast.unparse(d) for d in node.decorator_list)]
    if not kernels:
        raise SystemExit(f"no @triton.jit kernel found in {path}")
    lines = text.splitlines(keepends=True)
    first = kernels[0].body[0].lineno - 1
    indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
    lines.insert(first, f"{indent}# edit {generation}\n")
    path.write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python lab/probes/check_phases.py")
    parser.add_argument("--exercise", default="softmax")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=os.environ.get("OUT", ""))
    options = parser.parse_args(argv)

    from learning.grader import registry, runner

    exercise = registry.find(options.exercise)
    work = Path(tempfile.mkdtemp(prefix="check-phases-"))
    module = work / exercise.filename
    shutil.copy(ROOT / "learning" / "exercises" / exercise.name / "solution.py", module)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_CACHE_DIR=str(work / "triton-cache"))

    rows = []
    for label, code in BASELINES.items():
        times = [wall([sys.executable, "-c", code], env, work)[0] for _ in range(options.repeats)]
        rows.append((label, statistics.median(times), times))

    check = [sys.executable, "-m", "learning.check", exercise.name, "--root", str(work)]
    # The learner's warm process (learning.grader.warm), in a folder of this run's own, gone 30 s
    # after the last check; and the same checks with a fresh process each, as before it.
    sockets = tempfile.mkdtemp(prefix="phases-", dir="/tmp")
    env.update(TMPDIR=sockets, LEARNING_WARM="1", LEARNING_WARM_IDLE="30")
    cold = dict(env, LEARNING_WARM="0")
    seconds, code, output = wall(check, env, ROOT)
    if code != 0:
        print(output)
        raise SystemExit(f"the reference {exercise.name} did not pass (status {code})")
    rows.append(("first check: empty kernel cache, starts the warm process", seconds, [seconds]))
    times = [wall(check, env, ROOT)[0] for _ in range(options.repeats)]
    rows.append(("check, warm kernel cache", statistics.median(times), times))
    times = []
    for generation in range(options.repeats):
        edit_kernel(module, generation)
        times.append(wall(check, env, ROOT)[0])
    rows.append(("check, after an edit to the kernel", statistics.median(times), times))
    times = [wall(check, cold, ROOT)[0] for _ in range(options.repeats)]
    rows.append(("check, warm kernel cache, LEARNING_WARM=0", statistics.median(times), times))

    # One check's phases, from the grader's timeline (in this process: no check start-up).
    os.environ.update(TRITON_CACHE_DIR=env["TRITON_CACHE_DIR"], TMPDIR=sockets,
                      LEARNING_WARM="1")
    tempfile.tempdir = sockets
    result = runner.grade(exercise, work)
    timeline = result.timeline

    import torch
    import triton

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else \
        f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores), interpreter"
    document = {
        "device": device, "torch": torch.__version__, "triton": triton.__version__,
        "python": platform.python_version(), "date": datetime.date.today().isoformat(),
        "exercise": exercise.name, "mode": result.mode.reason if result.mode else "",
        "wall_seconds": [{"what": label, "median": round(median, 3),
                          "runs": [round(t, 3) for t in runs]} for label, median, runs in rows],
        "timeline": [{"at": round(t, 4), "event": what} for t, what in timeline],
    }
    if options.out:
        out = Path(options.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"check_phases_{exercise.name}.json").write_text(json.dumps(document, indent=1))

    print(f"{device}; torch {torch.__version__}, Triton {triton.__version__}, "
          f"{document['date']}; {exercise.name}, reference solution")
    print(f"{'wall time of':<58}{'median s':>9}   runs")
    for label, median, runs in rows:
        print(f"{label:<58}{median:>9.2f}   {', '.join(f'{t:.2f}' for t in runs)}")
    print("\none check's phases (seconds from its start, in this process):")
    for (t, what), (t_next, _) in zip(timeline, timeline[1:] + [(result.seconds, "")]):
        if t_next - t >= 0.05 or what.startswith("worker: started"):
            print(f"  {t:7.3f}  +{t_next - t:6.3f}  {what}")
    print(f"  {result.seconds:7.3f}           graded")
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(sockets, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
