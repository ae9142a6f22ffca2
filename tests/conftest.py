"""Shared test set-up: pick the kernel mode before any kernel module is imported."""

import os
import signal

import pytest

from learning.grader import mode as kernel_mode

MODE = kernel_mode.select()
# Checks the tests start leave no learners' warm servers behind unless asked (tests/test_warm.py
# turns them on where it tests them).
os.environ.setdefault("LEARNING_WARM", "0")
if MODE.interpret:
    # Grading hundreds of versions: fork each worker from a process that imported torch and
    # triton once, instead of paying those imports every time (see learning/grader/forkserver.py).
    os.environ.setdefault("LEARNING_FORKSERVER", "1")

# A job a shell starts in the background without job control (`cmd &` in a script, nohup) has
# SIGINT ignored, and every process it starts inherits that, so a check the tests press Ctrl-C
# on would never hear it. Here (in each worker too) SIGINT is what a terminal's foreground
# process has; a handler, unlike SIG_IGN, does not pass to the programs the tests start.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True, scope="session")
def production_layer():
    """triton_kernels with the lab's production layer installed, as the bench measures it (the
    tests of the reference alone run it in processes of their own)."""
    import lab.production  # noqa: F401 (importing it installs the layer)


@pytest.fixture(autouse=True)
def compile_check_where_proven(request, monkeypatch):
    """The GPU compile check (learning/grader/gpu_compile.py) runs in the tests that prove it,
    marked ``compile_check``, and in the exhaustive sweeps, which grade every catalogued
    version with it; elsewhere in the quick set it is turned off, as a learner can turn it off:
    it costs a process and a compile per check, and those tests judge the cases, not it."""
    from learning.grader import gpu_compile

    if request.node.get_closest_marker("compile_check") or \
            request.node.get_closest_marker("exhaustive"):
        monkeypatch.delenv(gpu_compile.OFF_SWITCH, raising=False)
    else:
        monkeypatch.setenv(gpu_compile.OFF_SWITCH, "0")


@pytest.fixture(autouse=True)
def interpreter_as_triton_made_it():
    """A test that records steps or maps in this process installs the GPU's arithmetic into
    its interpreter, as the grader's processes do; it is put back after the test, so that the
    reference kernels' own tests, later in the same process, compute as Triton's interpreter
    does (their float32 tolerances assume exact float32 dots)."""
    yield
    from learning.grader import gpu_arithmetic

    gpu_arithmetic.uninstall_interpreter()


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than the machine has cores. A fifth of the quick run is
    spent waiting (on the bounded waits the robustness tests prove, and on the processes a
    check starts), and a spare worker keeps the cores busy meanwhile: on 2 cores, 3 workers
    finished the quick run in 229 s where 2 took 247 s (same machine, same hour)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # the user's own number: xdist reads it
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


def pytest_report_header(config):
    return f"kernels: {MODE.describe()}"


def pytest_sessionstart(session):
    """A check refuses to grade when the course's files differ from their digests
    (learning.grader.integrity): say so once, instead of in every test that grades."""
    from learning.grader import integrity

    stale = integrity.changed()
    if stale:
        pytest.exit(f"the digests of the course's files are stale ({', '.join(stale[:3])}): "
                    "run python -m learning.computed", returncode=1)


def pytest_collection_modifyitems(config, items):
    if MODE.interpret:
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU; kernels run in the {MODE.describe()}")
        marker = "gpu"
    else:
        skip = pytest.mark.skip(reason="about Triton's interpreter; kernels are compiled here")
        marker = "interpreter"
    lacking = pytest.mark.skip(reason=without_bfloat16()) if without_bfloat16() else None
    for item in items:
        if marker in item.keywords:
            item.add_marker(skip)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if lacking and any(_is_bfloat16(value) for value in params.values()):
            item.add_marker(lacking)


def without_bfloat16() -> str:
    """Why bfloat16 cannot run on this GPU ("" where it can, or kernels are interpreted):
    it came with compute capability 8.0; a T4 (7.5) has none."""
    if MODE.interpret:
        return ""
    import torch

    major, minor = torch.cuda.get_device_capability()
    if (major, minor) >= (8, 0):
        return ""
    return f"needs bfloat16, which the {torch.cuda.get_device_name()} (sm_{major}{minor}) lacks"


def _is_bfloat16(value) -> bool:
    return str(value) in ("torch.bfloat16", "bfloat16", "bf16")


@pytest.fixture(scope="session")
def mode():
    return MODE


@pytest.fixture(scope="session")
def device():
    return MODE.device
