"""The reference kernels' tuning reads the GPU's own figures, not the H200's.

Where the reference kernels depend on the device (programs of one row that must run at once,
persistent grids, rows in flight in shared memory, the matrix product's tiles), they ask it
for its multiprocessors and shared memory. These tests feed them a T4's and an A100's figures
(and the H200's, which the course measured) and check that each choice fits that GPU.
Figures: CUDA's per-device properties, multiProcessorCount and sharedMemPerBlockOptin.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

import reference_matmul as rm
import triton_kernels as tk
from lab import production as fast

# name: (multiprocessors, shared memory one program may use in bytes, compute capability)
FIGURES = {
    "Tesla T4": (40, 65536, 75),
    "NVIDIA A100-SXM4-80GB": (108, 166912, 80),
    "NVIDIA H200": (132, 232448, 90),
}
CUDA = torch.device("cuda", 0)  # only described: nothing is allocated on it


def library():
    """The module whose tables the plans read: the production layer."""
    return fast


@pytest.fixture(params=list(FIGURES))
def gpu(request, monkeypatch):
    """The reference kernels' view of a GPU with these figures."""
    sms, shared, capability = FIGURES[request.param]
    lib = library()
    monkeypatch.setattr(tk, "_sm_count", lambda index: sms)  # read by both modules
    monkeypatch.setattr(lib, "_shared_memory", lambda index: shared)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: SimpleNamespace(
        name=request.param, multi_processor_count=sms, shared_memory_per_block_optin=shared))
    return SimpleNamespace(name=request.param, sms=sms, shared=shared, capability=capability,
                           lib=lib)


def persistent_programs(lib, n_rows, plan) -> int:
    if hasattr(lib, "persistent_grid"):
        return lib.persistent_grid(n_rows, CUDA, plan)[0]
    return lib._persistent_programs(n_rows, CUDA, plan)


def test_programs_that_must_run_at_once_are_one_per_multiprocessor(gpu):
    assert gpu.lib._max_pieces(CUDA) == gpu.sms
    piece = getattr(gpu.lib, "_SPLIT_BLOCK", None) or fast._SPLIT_BLOCK
    widest = gpu.sms * piece  # every piece of a row resident at once
    assert fast._plan("softmax", widest, max_pieces=gpu.sms).strategy == "split_row"
    assert fast._plan("softmax", widest + 1, max_pieces=gpu.sms).strategy == "looped"


def test_persistent_grids_follow_the_multiprocessors(gpu):
    plan = fast._plan("softmax", 2**16, strategy="looped", max_pieces=gpu.sms)
    assert persistent_programs(gpu.lib, 10**6, plan) == gpu.sms * plan.programs_per_sm
    assert persistent_programs(gpu.lib, 3, plan) == 3


def test_rows_in_flight_fit_the_shared_memory(gpu):
    plan = fast._plan("softmax", 32768, max_pieces=gpu.sms, itemsize=2, paired=True)
    assert plan.pipelined
    stages = gpu.lib._pipeline_stages(CUDA, plan)
    # stages - 1 rows of 16-bit values in flight, and 4 KiB for the reductions
    assert (stages - 1) * plan.block * 2 + 4096 <= gpu.shared
    expected = {"Tesla T4": 1, "NVIDIA A100-SXM4-80GB": 3, "NVIDIA H200": 4}[gpu.name]
    assert stages == expected


@pytest.mark.parametrize("table", ["CONFIGS", "SKINNY_CONFIGS"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_matmul_table_is_pruned_to_the_shared_memory(gpu, dtype, table):
    rows = getattr(rm, table)
    kept = rm._fitting(rows, dtype.itemsize, CUDA)
    assert kept and set(kept) <= set(rows)
    fits = [row for row in rows if row.shared_bytes(dtype.itemsize) <= gpu.shared]
    if fits:
        assert list(kept) == fits
    else:  # nothing fits by the table's estimate: the smallest row is kept
        assert kept == (min(rows, key=lambda row: row.shared_bytes(dtype.itemsize)),)
        assert (gpu.name, dtype) == ("Tesla T4", torch.float32)


@pytest.mark.exhaustive  # compiles for sm_75
@pytest.mark.parametrize("table", ["CONFIGS", "SKINNY_CONFIGS"])
def test_the_row_a_t4_keeps_for_float32_compiles_within_its_shared_memory(table):
    """The estimate (every stage of A and B held) is above what Triton allocates on sm_75,
    which pipelines no loads: the one row kept for float32 must really fit 64 KiB."""
    row = min(getattr(rm, table), key=lambda row: row.shared_bytes(4))  # what _fitting keeps
    script = textwrap.dedent(f"""
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        import reference_matmul as rm
        fn = rm._matmul
        types = ["*fp32"] * 4 + ["*i32"] + ["i32"] * 11
        types += ["constexpr"] * (len(fn.arg_names) - len(types))
        source = ASTSource(fn, dict(zip(fn.arg_names, types)), dict(
            BLOCK_M={row.block_m}, BLOCK_N={row.block_n}, BLOCK_K={row.block_k},
            GROUP_M={row.group_m}, SPLIT_K=1, EVEN_K=False, K_RUNS=False, ALIGNED=False,
            VEC=4, C_ALIGNED=False, EARLY=False))
        kernel = triton.compile(source, target=GPUTarget("cuda", 75, 32),
                                options=dict(num_warps={row.num_warps},
                                             num_stages={row.num_stages}))
        print(kernel.metadata.shared)
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=os.path.dirname(rm.__file__), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    shared = int(done.stdout.split()[-1])
    assert shared <= FIGURES["Tesla T4"][1], shared
