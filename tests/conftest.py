"""Shared test set-up: pick the kernel mode before any kernel module is imported."""

import os

import pytest

from learning import mode as kernel_mode

MODE = kernel_mode.select()
# Checks the tests start leave no learners' warm servers behind unless asked (tests/test_warm.py
# turns them on where it tests them).
os.environ.setdefault("LEARNING_WARM", "0")
if MODE.interpret:
    # Grading hundreds of versions: fork each worker from a process that imported torch and
    # triton once, instead of paying those imports every time (see learning/forkserver.py).
    os.environ.setdefault("LEARNING_FORKSERVER", "1")


def pytest_report_header(config):
    return f"kernels: {MODE.describe()}"


def pytest_collection_modifyitems(config, items):
    if MODE.interpret:
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU; kernels run in the {MODE.describe()}")
        marker = "gpu"
    else:
        skip = pytest.mark.skip(reason="about Triton's interpreter; kernels are compiled here")
        marker = "interpreter"
    for item in items:
        if marker in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def mode():
    return MODE


@pytest.fixture(scope="session")
def device():
    return MODE.device
