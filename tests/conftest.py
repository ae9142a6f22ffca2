"""Shared test set-up: pick the kernel mode before any kernel module is imported."""

import pytest

from learning import mode as kernel_mode

MODE = kernel_mode.select()


def pytest_report_header(config):
    return f"kernels: {MODE.describe()}"


def pytest_collection_modifyitems(config, items):
    if not MODE.interpret:
        return
    skip_gpu = pytest.mark.skip(reason=f"needs a CUDA GPU; kernels run in the {MODE.describe()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def mode():
    return MODE


@pytest.fixture(scope="session")
def device():
    return MODE.device
