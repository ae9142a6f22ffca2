"""Claims about lab.gluon, the Gluon kernel that splits wide softmax rows with their
pieces in shared memory: it compiles wherever the plan may pick it, the plan picks it only for
rows it can copy, and on a GPU it agrees with float64 torch wherever it runs.

Gluon has no interpreter: on the CPU the kernel is compiled for an H100/H200 (sm_90), an A100
(sm_80) and an L4 (sm_89) without running, and the GPU tests run it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

import triton_kernels as tk
from lab import gluon as tg
from lab import production as fast
from tests.test_triton_kernels import NEG_INF, assert_matches, make, softmax_ref

# The lab's Gluon kernels, not the course's reference: their interpreter checks run with the
# exhaustive set (and every test here on a GPU)
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.exhaustive]

ROOT = Path(__file__).resolve().parent.parent
gluon_only = pytest.mark.skipif(not tg.AVAILABLE,
                                reason=f"Triton {triton.__version__} lacks the Gluon it needs")


# Compiles the kernel for a GPU it may run on, as a launch that _fits_shared_copies allows
# would specialise it (16-divisible integers, 16-byte aligned pointers), and prints what the
# tests check. A child process: TRITON_INTERPRET, set for the CPU tests, turns Gluon's own
# helpers into interpreted functions that its compiler refuses.
COMPILE = """
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from lab import gluon as tg
found = {}
for key in json.loads(sys.argv[1]):
    dtype, piece, chunk, warps, even, capability = key
    signature = {"out_ptr": "*" + dtype, "in_ptr": "*" + dtype, "out_row_stride": "i32",
                 "in_row_stride": "i32", "n_cols": "i32", "part_ptr": "*fp32", "sync_ptr": "*i32"}
    constants = {"PIECES": 8, "PIECE": piece, "CHUNK": chunk,
                 "VEC": 4 if dtype == "fp32" else 8, "EVEN": even}
    signature.update(dict.fromkeys(constants, "constexpr"))
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(7)}
    source = GluonASTSource(tg._softmax_split_shared, signature, constants, aligned)
    kernel = triton.compile(source, target=GPUTarget("cuda", capability, 32),
                            options={"num_warps": warps})
    ptx = kernel.asm["ptx"]
    copy = r"cp[.]async[.]cg[.]shared[.]global [[][^]]*[]], [[][^]]*[]], (\\w+)"
    found[json.dumps(key)] = {
        "copies": re.findall(copy, ptx),
        "shared": kernel.metadata.shared, "global_vector_loads": "ld.global.v4" in ptx}
print(json.dumps(found))
"""
# (dtype, piece, chunk, warps, EVEN, compute capability): the plan's pieces on an H100/H200,
# and the two older GPUs with asynchronous copies the plan also allows (A100; L4, RTX 40xx)
KEYS = [[dtype, *plan, even, 90] for dtype, plan in (("bf16", fast._SHARED_PIECE),
                                                     ("fp32", fast._SHARED_PIECE),
                                                     ("fp16", fast._SHARED_WIDE_PIECE))
        for even in (True, False)] + [["bf16", *fast._SHARED_PIECE, False, 80],
                                      ["fp32", *fast._SHARED_PIECE, True, 89]]


# The shared memory one program may use: A100 (sm_80), L4 and RTX 40xx (sm_89), H100 and H200
SHARED_PER_PROGRAM = {80: 163 * 1024, 89: 99 * 1024, 90: 227 * 1024}


@pytest.fixture(scope="module")
def compiled():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", COMPILE, json.dumps(KEYS)], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@gluon_only
@pytest.mark.parametrize(
    "key", KEYS, ids=lambda k: f"sm{k[5]}-{k[0]}-{k[1]}-{'even' if k[4] else 'masked'}")
def test_the_kernel_compiles_copying_16_bytes_at_a_time(key, compiled):
    found = compiled[json.dumps(key)]
    assert found["copies"] and set(found["copies"]) == {"0x10"}, found["copies"]
    itemsize = 4 if key[0] == "fp32" else 2
    assert found["shared"] >= key[1] * itemsize  # the whole piece waits there
    assert found["shared"] <= SHARED_PER_PROGRAM[key[5]]  # and it fits that GPU
    assert not found["global_vector_loads"]  # the row never comes through registers


def test_the_plan_takes_the_gluon_kernel_only_for_rows_it_can_copy():
    shared = fast.Plan("split_row", 16384, num_warps=4, in_shared=True, chunk=2048)
    assert fast._plan("softmax", 65536, max_pieces=132, itemsize=2, shared=True) == shared
    assert fast._plan("softmax", 65536, max_pieces=132, itemsize=4, shared=True) == shared
    assert fast._plan("softmax", 32784, max_pieces=132, itemsize=4, shared=True) == shared
    assert fast._plan("softmax", 2**20, max_pieces=132, itemsize=4, shared=True) == shared
    # 16-bit rows of more than 32 pieces: pieces twice as wide, 8 warps
    wide = fast.Plan("split_row", 32768, num_warps=8, in_shared=True, chunk=4096)
    assert fast._plan("softmax", 2**20, max_pieces=132, itemsize=2, shared=True) == wide
    # rows it cannot copy, rows kept whole, the backward pass, a block asked for: not this kernel
    assert not fast._plan("softmax", 65536, max_pieces=132, itemsize=2).in_shared
    assert not fast._plan("softmax", 32768, max_pieces=132, itemsize=2, shared=True).in_shared
    assert not fast._plan("softmax_backward", 65536, max_pieces=132, itemsize=2,
                        shared=True).in_shared
    assert not fast._plan("softmax", 65536, "split_row", 8192, max_pieces=132,
                          shared=True).in_shared
    # too few multiprocessors for the pieces to run at once: the looped kernel, as before; but
    # 64 pieces of 16384 fit 100 multiprocessors where 128 pieces of 8192 would not
    assert fast._plan("softmax", 2**20, max_pieces=40, itemsize=4, shared=True).strategy == "looped"
    assert fast._plan("softmax", 2**20, max_pieces=100, itemsize=4, shared=True) == shared
    assert fast._plan("softmax", 2**20, max_pieces=100, itemsize=4).strategy == "looped"
    assert fast._plan("softmax", 65536, max_pieces=0, shared=True).strategy == "looped"


def test_the_plan_gives_a_row_one_cluster_only_where_clusters_were_measured_ahead():
    def plan(n_cols, itemsize=2, sms=132, fn="softmax", shared=True, clusters=True, **kw):
        return fast._plan(fn, n_cols, max_pieces=sms, itemsize=itemsize, shared=shared,
                        clusters=clusters, **kw)

    def cluster(ctas, piece, chunk, warps):
        return fast.Plan("split_row", piece, num_warps=warps, in_shared=True, chunk=chunk,
                         cluster=ctas)

    # 16-bit rows: two CTAs up to 65536 columns, sixteen up to 2**18
    assert plan(16400) == plan(32768) == cluster(2, 16384, 2048, 8)
    assert plan(32784) == plan(65536) == cluster(2, 32768, 2048, 8)
    assert plan(65552) == plan(131072) == cluster(16, 8192, 2048, 4)
    assert plan(131088) == plan(2**18) == cluster(16, 16384, 2048, 4)
    # float32 rows: two CTAs from 32769 to 65536 columns only
    assert plan(40000, itemsize=4) == plan(65536, itemsize=4) == cluster(2, 32768, 4096, 8)
    for n_cols in (16400, 32768, 65552, 2**18):
        assert not plan(n_cols, itemsize=4).cluster, n_cols
    # narrower and wider rows keep their kernels
    assert plan(16384) == fast._plan("softmax", 16384, max_pieces=132, itemsize=2, shared=True)
    assert plan(2**18 + 16) == fast._plan("softmax", 2**18 + 16, max_pieces=132, itemsize=2,
                                        shared=True)
    # sixteen CTAs only where there are as many multiprocessors as measured; two anywhere
    assert plan(2**18, sms=114) == fast._plan("softmax", 2**18, max_pieces=114, itemsize=2,
                                            shared=True)
    assert plan(65536, sms=114) == cluster(2, 32768, 2048, 8)
    assert plan(131072, sms=114) == cluster(2, 65536, 4096, 8)
    # not without clusters or copies, not backward, not when a kernel or block is asked for
    assert not plan(65536, clusters=False).cluster
    assert not plan(65536, shared=False).cluster
    assert not plan(65536, fn="softmax_backward").cluster
    assert not plan(65536, strategy="split_row").cluster
    assert not plan(65536, block=16384).cluster


def test_cpu_tensors_are_never_copied_by_the_gluon_kernel(device):
    x = make((4, 65536), torch.float32, "cpu")
    assert not fast._fits_shared_copies(x)


@pytest.mark.parametrize("n_cols, row_stride, address, copyable", [
    (65536, 65536, 0, True),
    (40000, 80000, 32, True),  # every other row, starting 16 columns in (bfloat16)
    (65536, 65536, 2, False),  # a row that starts 2 bytes off a 16-byte boundary
    (39992, 39992, 0, False),  # a width that is not a multiple of 16
    (40000, 40008, 0, False),  # the second row starts 16 bytes off (bfloat16)
    (65536, 8, 0, False),  # a row stride Triton cannot see as 16-divisible, one row or not
])
def test_rows_are_copyable_only_in_whole_16_byte_pieces(n_cols, row_stride, address, copyable):
    assert fast._copyable_rows(n_cols, row_stride, address) == copyable


@pytest.mark.parametrize("version, available", [
    ("3.5.1", False), ("3.6.0", True), ("3.9.0", True), ("3.9.0+git1a2b3c", True),
    ("3.10.0", False), ("4.0.0", False)])
def test_the_kernel_is_offered_only_on_the_triton_versions_it_was_tested_on(version, available):
    assert tg.tested_on(version) == available


@pytest.mark.gpu
@gluon_only
def test_gpu_fresh_rows_fit_and_misaligned_views_do_not(device):
    base = make((4, 40000), torch.bfloat16, device)
    # rows starting 32 bytes in, every other row: still 16-byte copies
    assert fast._fits_shared_copies(base, base[:, 16:], base[::2])
    assert not fast._fits_shared_copies(base[:, 1:39985])  # rows 2 bytes off a boundary
    assert not fast._fits_shared_copies(base[:, :39992])  # 39992 is not a multiple of 16
    # a row stride of 40008 elements: the second row starts 16 bytes off
    assert not fast._fits_shared_copies(make((4, 40008), torch.bfloat16, device)[:, :40000])
    assert not fast._fits_shared_copies(base, base[:, 1:39985])  # every tensor must fit


def nasty_rows(shape, dtype, device, seed):
    """Random rows with the cases a split softmax gets wrong: a row of only -inf (NaN, as in
    torch), pieces of only -inf beside finite ones, rows far above and below 0, a NaN."""
    x = make(shape, dtype, device, seed=seed, scale=3.0)
    width = shape[1]
    x[1] = NEG_INF
    x[2, : width // 2] = NEG_INF
    x[3] = x[3] * 100 + 1000
    x[4, : width // 2] = NEG_INF
    x[4, width // 2:] -= 1000
    x[5, -1] = 80.0  # the maximum in the last piece's last column
    x[6, width // 3] = float("nan")
    return x


@pytest.mark.gpu
@gluon_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("width", [16, 144, 16384, 40000, 65536, 99984, 2**18, 2**20])
@pytest.mark.parametrize("plan", [fast._SHARED_PIECE, fast._SHARED_WIDE_PIECE, (2048, 512, 4)],
                         ids=["piece16384", "piece32768", "piece2048"])
def test_gpu_every_piece_and_chunk_agrees_with_torch(plan, width, dtype, device):
    piece, chunk, warps = plan
    if -(-width // piece) > fast._max_pieces(torch.device(device)):
        pytest.skip("more pieces than multiprocessors: the plan never launches this")
    x = nasty_rows((7, width), dtype, device, seed=width)
    launch = fast.Plan("split_row", piece, num_warps=warps, in_shared=True, chunk=chunk)
    out = torch.full_like(x, float("nan"))
    tk._launch_softmax(out, x, launch)
    assert_matches(out, softmax_ref(x), dtype)


@pytest.mark.gpu
@gluon_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gpu_strided_rows_and_output_views(dtype, device):
    # every other row of a wider tensor, starting 16 columns in, written into part of a wider
    # output: the row strides are not the width, and nothing past the view is touched
    big = make((10, 80000), dtype, device, seed=4, scale=3.0)
    x = big[::2, 16:40016]
    out_big = torch.full((5, 50000), float("nan"), dtype=dtype, device=device)
    out = out_big[:, :40000]
    plan = fast._plan("softmax", 40000, max_pieces=fast._max_pieces(x.device),
                    itemsize=x.element_size(), shared=fast._fits_shared_copies(x, out))
    assert plan.in_shared
    tk._launch_softmax(out, x, plan)
    assert_matches(out, softmax_ref(x), dtype)
    assert out_big[:, 40000:].isnan().all()


@pytest.mark.gpu
@gluon_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_gpu_softmax_takes_the_kernel_for_fresh_rows_and_not_for_odd_views(dtype, device):
    base = nasty_rows((7, 65552), dtype, device, seed=9)
    for x, in_shared in ((base[:, :65536], True), (base[:, 1:65537], False),
                         (base[:, :65544], False)):
        plan = fast._plan("softmax", x.shape[1], max_pieces=fast._max_pieces(x.device), itemsize=2,
                        shared=fast._fits_shared_copies(x, torch.empty_like(x)))
        assert plan.in_shared == in_shared, x.shape
        assert_matches(tk.softmax(x), softmax_ref(x), dtype)


@pytest.mark.gpu
@gluon_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gpu_many_more_pieces_than_fit_at_once_still_agree(dtype, device):
    # 512 rows of 4 pieces: far more programs than the GPU holds, so most wait for a ticket's
    # predecessors to finish, and every row's pieces meet through the arrival counts
    x = make((512, 65536), dtype, device, seed=11, scale=3.0)
    x[100] = NEG_INF
    x[300, :16384] = NEG_INF
    plan = fast._plan("softmax", 65536, max_pieces=fast._max_pieces(x.device),
                    itemsize=x.element_size(), shared=True)
    assert plan.in_shared
    out = torch.full_like(x, float("nan"))
    tk._launch_softmax(out, x, plan)
    assert_matches(out, torch.softmax(x.double(), dim=-1), dtype)


def launched_plans(monkeypatch):
    """The plans triton_kernels.softmax launches, recorded as it launches them."""
    plans = []
    launch = tk._launch_softmax

    def record(out, x, plan):
        plans.append(plan)
        launch(out, x, plan)

    monkeypatch.setattr(tk, "_launch_softmax", record)
    return plans


@pytest.mark.gpu
@gluon_only
def test_gpu_softmax_launches_the_kernel_only_for_split_rows_it_can_copy(monkeypatch, device):
    plans = launched_plans(monkeypatch)
    base = make((3, 65552), torch.bfloat16, device, seed=5, scale=3.0)
    # a row one program keeps whole stays in registers, unless a cluster takes it (a Hopper)
    clusters = fast._clusters_available(base.device)
    for x, in_shared in ((base[:, :65536], True), (base[:, 1:65537], False),
                         (base[:, :1024], False), (base[:, :32768], clusters)):
        assert_matches(tk.softmax(x), softmax_ref(x), torch.bfloat16)
        assert plans[-1].in_shared == in_shared, (x.shape, plans[-1])
        assert bool(plans[-1].cluster) == (clusters and in_shared), (x.shape, plans[-1])


@pytest.mark.gpu
def test_gpu_without_the_gluon_kernel_wide_rows_split_in_registers(monkeypatch, device):
    # a Triton the kernel was not tested on: the plan falls back, and the answer is the same
    monkeypatch.setattr(fast, "_gluon_available", lambda: False)
    plans = launched_plans(monkeypatch)
    x = nasty_rows((7, 65536), torch.bfloat16, device, seed=6)
    assert_matches(tk.softmax(x), softmax_ref(x), torch.bfloat16)
    assert plans[-1].strategy == "split_row" and not plans[-1].in_shared


# The next probe, lab/probes/probe_cluster.py: its docstring says what compiles; this keeps it true.
CLUSTER_COMPILE = """
import re, sys
sys.path.insert(0, "lab/probes")
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
import probe_cluster
signature = {"out_ptr": "*bf16", "in_ptr": "*bf16", "out_row_stride": "i32",
             "in_row_stride": "i32", "n_cols": "i32", "BLOCK": "constexpr", "VEC": "constexpr",
             "OWN_DTYPE": "constexpr"}
aligned = {(i,): [["tt.divisibility", 16]] for i in range(5)}
source = GluonASTSource(probe_cluster.kernel(), signature,
                        {"BLOCK": 65536, "VEC": 8, "OWN_DTYPE": False}, aligned)
ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                     options={"num_warps": 16, "num_ctas": 2}).asm["ptx"]
print(" ".join(sorted(set(re.findall(r"barrier[.]cluster[.]arrive|mapa|ld[.]shared::cluster"
                                     r"|ld[.]global[.]v4", ptx)))))
"""


@pytest.mark.skipif(tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 8),
                    reason="reductions across a cluster compile from Triton 3.8 on")
def test_the_cluster_probe_reduces_through_distributed_shared_memory():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", CLUSTER_COMPILE], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = done.stdout.split()
    assert {"barrier.cluster.arrive", "mapa", "ld.shared::cluster", "ld.global.v4"} <= set(found)


# lab/probes/probe_cluster_shared.py: what its docstring says the kernel is, in the PTX for sm_90
CLUSTER_SHARED_COMPILE = """
import re, sys
sys.path.insert(0, "lab/probes")
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
import probe_cluster_shared
signature = {"out_ptr": "*bf16", "in_ptr": "*bf16", "out_row_stride": "i32",
             "in_row_stride": "i32", "part_ptr": "*fp32", "PIECE": "constexpr",
             "CHUNK": "constexpr", "VEC": "constexpr"}
aligned = {(i,): [["tt.divisibility", 16]] for i in range(5)}
source = GluonASTSource(probe_cluster_shared.kernel(), signature,
                        {"PIECE": 16384, "CHUNK": 2048, "VEC": 8}, aligned)
compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4, "num_ctas": 4})
ptx = compiled.asm["ptx"]
copies = re.findall(r"cp[.]async[.]cg[.]shared[.]global [[][^]]*[]], [[][^]]*[]], 0x10", ptx)
print(compiled.metadata.shared, len(copies), len(re.findall(r"@%p[0-9]+ st[.]global[.]v4", ptx)),
      len(re.findall(r"st[.]global[.]v4", ptx)),
      "barrier.cluster.arrive.release.aligned" in ptx, "atom" in ptx)
"""


@pytest.mark.skipif(tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 9),
                    reason="the sharded asynchronous copies compile with Triton 3.9 (not 3.6)")
def test_the_cluster_shared_probe_gives_each_cta_its_own_piece():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", CLUSTER_SHARED_COMPILE], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    shared, copies, predicated, stores, barrier, atomics = done.stdout.split()
    # each CTA holds its own 16384 bf16 columns (32 KiB) and copies them 16 bytes at a time:
    # 16384 / (4 warps * 32 threads * 8 columns) = 16 copies a thread
    assert 32768 <= int(shared) < 32768 + 1024 and int(copies) == 16
    # and stores its own piece: no store is kept to one CTA of the cluster
    assert int(stores) == 16 and int(predicated) == 0
    # the exchange is one cluster barrier, with no ticket or arrival atomics
    assert barrier == "True" and atomics == "False"


# lab/probes/probe_ring.py: the ring's accounting, in the PTX for sm_90 (the H200 ran it, checked)
RING_COMPILE = """
import re, sys
sys.path.insert(0, "lab/probes")
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
import probe_ring
signature = {"out_ptr": "*bf16", "in_ptr": "*bf16", "out_row_stride": "i32",
             "in_row_stride": "i32", "n_rows": "i32", "n_cols": "i32", "part_ptr": "*fp32",
             "sync_ptr": "*i32"}
constants = {"PIECES": 1, "CHUNKS": 16, "CHUNK": 4096, "FRONT": 16, "BACK": 8, "VEC": 8,
             "EVEN": True, "NO_EXP": False}
signature.update(dict.fromkeys(constants, "constexpr"))
aligned = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 5, 6, 7)}
compiled = triton.compile(GluonASTSource(probe_ring.kernel(), signature, constants, aligned),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": 16})
ptx = compiled.asm["ptx"]
copies = re.findall(r"cp[.]async[.]cg[.]shared[.]global [[][^]]*[]], [[][^]]*[]], (\\w+)", ptx)
waits = sorted(int(n) for n in re.findall(r"cp[.]async[.]wait_group\\s+(\\d+)", ptx))
print(compiled.metadata.shared, ",".join(sorted(set(copies))), ptx.count("cp.async.commit_group"),
      ",".join(map(str, waits)), "atom" in ptx)
"""


@gluon_only
def test_the_ring_probe_waits_for_each_chunk_and_no_more():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", RING_COMPILE], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    shared, copies, commits, waits, atomics = done.stdout.split()
    # 16 + 8 slots of 4096 bf16 columns (8 KiB), each copied 16 bytes at a time
    assert 24 * 8192 <= int(shared) < 24 * 8192 + 1024 and copies == "0x10"
    # one commit group per slot to fill the ring, and one per chunk refilled after its store
    assert int(commits) == 24 + 16
    # chunk c of a row has 15 - c chunks of its row and 8 of the next committed after it: the
    # fold waits for exactly it, and the program waits for every copy before it exits
    assert waits == ",".join(map(str, [0, *range(8, 24)]))
    # one program per whole row: no ticket, no exchange
    assert atomics == "False"


# lab/probes/probe_dsmem.py: the cluster exchange, in the PTX for sm_90 (the H200 ran it, checked)
DSMEM_COMPILE = """
import json, sys
sys.path.insert(0, "lab/probes")
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
import probe_dsmem
found = {}
for ctas, piece, chunk, warps, regs in json.loads(sys.argv[1]):
    signature = {"out_ptr": "*bf16", "in_ptr": "*bf16", "out_row_stride": "i32",
                 "in_row_stride": "i32"}
    constants = {"CTAS": ctas, "PIECE": piece, "CHUNK": chunk, "VEC": 8, "EXCHANGE": True,
                 "EXIT_WAIT": True, "REGS": regs, "PUSH": False}
    signature.update(dict.fromkeys(constants, "constexpr"))
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(4)}
    compiled = triton.compile(GluonASTSource(probe_dsmem.kernel(), signature, constants, aligned),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    found[str(ctas) + ("r" if regs else "")] = compiled.asm["ptx"]
print(json.dumps(found))
"""


def cluster_exchange_faults(ptx: str, ctas: int) -> list[str]:
    """What is wrong with a cluster exchange in this PTX: the barrier phases out of order, a
    remote read outside the first phase, an arrival after the reads that does not release
    (a peer could leave while a read is in flight), or a ticket or atomic left in."""
    events = re.findall(r"barrier[.]cluster[.]\w+(?:[.]\w+)*|ld[.]shared::cluster|mapa", ptx)
    barriers = [e for e in events if e.startswith("barrier")]
    faults = []
    expected = ["barrier.cluster.arrive.release.aligned", "barrier.cluster.wait.acquire.aligned",
                "barrier.cluster.arrive.release.aligned", "barrier.cluster.wait.aligned"]
    if barriers != expected:
        faults.append(f"barrier phases {barriers}, not {expected}")
    reads = [i for i, e in enumerate(events) if e == "ld.shared::cluster"]
    if len(reads) != ctas or events.count("mapa") != ctas:
        faults.append(f"{len(reads)} remote reads and {events.count('mapa')} mapa for {ctas} CTAs")
    waits = [i for i, e in enumerate(events) if e.startswith("barrier.cluster.wait")]
    arrivals = [i for i, e in enumerate(events) if e.startswith("barrier.cluster.arrive")]
    if len(waits) == 2 and len(arrivals) == 2 and not all(
            waits[0] < i < arrivals[1] for i in reads):
        faults.append("a remote read outside the phase between the first wait and second arrival")
    if "atom." in ptx:
        faults.append("an atomic")
    return faults


@gluon_only
def test_the_dsmem_probe_reads_its_peers_only_while_they_are_held():
    shapes = [[4, 16384, 2048, 4, False], [16, 16384, 2048, 4, False], [2, 32768, 4096, 16, True]]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", DSMEM_COMPILE, json.dumps(shapes)], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for key, ptx in found.items():
        assert cluster_exchange_faults(ptx, int(key.rstrip("r"))) == [], key
    # the faults it exists to catch: the relaxed arrival that faulted a launch on the H200, and
    # no wait before the program leaves
    ptx = found["4"]
    last = ptx.rindex("barrier.cluster.arrive.release.aligned")
    relaxed = ptx[:last] + ptx[last:].replace("arrive.release", "arrive.relaxed", 1)
    assert any("barrier phases" in f for f in cluster_exchange_faults(relaxed, 4))
    no_wait = ptx.replace("barrier.cluster.wait.aligned", "")
    assert cluster_exchange_faults(no_wait, 4)
    assert cluster_exchange_faults(ptx, 8)  # reads for 4 CTAs are not enough for 8


# lab/probes/probe_gluon.py's exchange through 64-bit words, polled with a pause (timed on the H200)
WORDS_COMPILE = """
import sys
sys.path.insert(0, "lab/probes")
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
import probe_gluon
signature = {"out_ptr": "*bf16", "in_ptr": "*bf16", "out_row_stride": "i32",
             "in_row_stride": "i32", "n_cols": "i32", "part_ptr": "*fp32", "sync_ptr": "*i32"}
constants = dict(PIECES=4, PIECE=16384, CHUNK=2048, VEC=8, NO_TICKET=False, NO_EXCHANGE=False,
                 NO_EXP=False, STREAM=False, EVEN=True, FOLD=False, LOCAL=False, NO_BAR=False,
                 WORDS=True, OWN=True, SLEEP=int(sys.argv[1]), stamps=None, PREFETCH=0)
signature.update(dict.fromkeys(constants, "constexpr"))
signature["n_rows"] = "i32"
aligned = {(i,): [["tt.divisibility", 16]] for i in range(7)}
ptx = triton.compile(GluonASTSource(probe_gluon.split_shared_variant, signature, constants,
                                    aligned), target=GPUTarget("cuda", 90, 32),
                     options={"num_warps": 4}).asm["ptx"]
print(ptx.count("nanosleep"), ptx.count("ld.volatile.global"), ptx.count("atom."))
"""


@gluon_only
@pytest.mark.parametrize("sleep", [0, 128])
def test_the_words_probe_polls_its_row_with_the_pause_it_is_given(sleep):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", WORDS_COMPILE, str(sleep)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    pauses, polls, atomics = (int(n) for n in done.stdout.split()[-3:])
    # one pause in the loop when asked for, none otherwise; every thread loads the row's four
    # words itself, before the loop and in it; the only atomic is the ticket
    assert pauses == (1 if sleep else 0)
    assert polls == 2 * 4 and atomics == 1


# Two routes for 2**20 columns that were timed on the H200 and dropped (lab/RESULTS.md):
# lab/probes/probe_gluon.py's prefetch of a later piece into L2, and
# lab/probes/probe_cluster_groups.py's rows of several clusters, whose ticket crosses a full
# cluster barrier
PROBES_2_20_COMPILE = """
import json, re, sys
sys.path.insert(0, "lab/probes")
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
import probe_cluster_groups, probe_gluon
found = {}
runtime = {"out_ptr": "*bf16", "in_ptr": "*bf16", "out_row_stride": "i32", "in_row_stride": "i32",
           "n_cols": "i32", "part_ptr": "*fp32", "sync_ptr": "*i32"}
aligned = {(i,): [["tt.divisibility", 16]] for i in range(7)}
constants = dict(PIECES=32, PIECE=32768, CHUNK=4096, VEC=8, NO_TICKET=False, NO_EXCHANGE=False,
                 NO_EXP=False, STREAM=False, EVEN=True, FOLD=False, LOCAL=False, NO_BAR=False,
                 WORDS=False, OWN=False, SLEEP=0, stamps=None, PREFETCH=264)
signature = {**runtime, **dict.fromkeys(constants, "constexpr"), "n_rows": "i32"}
found["prefetch"] = triton.compile(
    GluonASTSource(probe_gluon.split_shared_variant, signature, constants, aligned),
    target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["ptx"]
groups = probe_cluster_groups.kernel()
for ticket in (True, False):
    constants = dict(CTAS=2, PIECE=32768, CHUNK=4096, VEC=8, EVEN=True, GROUPS=16, TICKET=ticket)
    signature = {**runtime, **dict.fromkeys(constants, "constexpr")}
    found[f"groups {ticket}"] = triton.compile(
        GluonASTSource(groups, signature, constants, aligned), target=GPUTarget("cuda", 90, 32),
        options={"num_warps": 8}).asm["ptx"]
print(json.dumps(found))
"""


@gluon_only
def test_the_dropped_2_20_probes_prefetch_and_hand_over_what_they_claim():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", PROBES_2_20_COMPILE], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # one bulk prefetch of a whole piece (32768 bf16 columns) by one thread
    assert re.findall(r"cp[.]async[.]bulk[.]prefetch[.]L2[.]global \[[^\]]*\], (\d+)",
                      found["prefetch"]) == ["65536"]

    def steps(ptx):
        return re.findall(r"atom[.]global[.]\S+|barrier[.]cluster[.]arrive[.\w]*|"
                          r"barrier[.]cluster[.]wait|ld[.]shared::cluster|st[.]async", ptx)

    # with a ticket: rank 0's atomic, then a full (releasing) cluster barrier before the peers
    # read it; the exchange then has no cluster wait of its own, which would have no arrival to
    # match and hang; then the row's arrival and its spin
    ticketed = steps(found["groups True"])
    assert ticketed[1:5] == ["barrier.cluster.arrive.aligned", "barrier.cluster.wait",
                             "ld.shared::cluster", "st.async"], ticketed
    assert ticketed[0].startswith("atom.") and ticketed[5].startswith("atom.")
    assert ticketed.count("barrier.cluster.wait") == 1
    # without: the shipped kernel's relaxed arrival and its one wait, and no ticket
    plain = steps(found["groups False"])
    assert plain[:3] == ["barrier.cluster.arrive.relaxed.aligned", "barrier.cluster.wait",
                         "st.async"], plain
    assert not plain[0].startswith("atom.")

# lab.gluon._softmax_cluster, compiled for sm_90 as the plan launches it: the
# exchange in its PTX, and no fence at the scope of the GPU in its machine code (SASS), which is
# what the pull of lab/probes/probe_dsmem.py paid for its cluster barrier's release
CLUSTER_KERNEL_COMPILE = """
import json, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, "lab/probes")
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from lab import gluon as tg
import probe_dsmem
cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
# as a launch the plan allows specialises it: pointers 16-byte aligned, integers (the width
# included) multiples of 16
found = {}
for name, fn, dtype, constants, warps in (
        ("even", tg._softmax_cluster, "bf16",
         {"CTAS": 2, "PIECE": 32768, "CHUNK": 2048, "VEC": 8, "EVEN": True}, 8),
        ("masked", tg._softmax_cluster, "fp32",
         {"CTAS": 16, "PIECE": 16384, "CHUNK": 2048, "VEC": 4, "EVEN": False}, 4),
        ("pulled", probe_dsmem.kernel(), "bf16",
         {"CTAS": 2, "PIECE": 32768, "CHUNK": 4096, "VEC": 8, "EXCHANGE": True,
          "EXIT_WAIT": True, "REGS": False, "PUSH": False}, 8),
        ("probe pushed", probe_dsmem.kernel(), "bf16",
         {"CTAS": 2, "PIECE": 32768, "CHUNK": 4096, "VEC": 8, "EXCHANGE": True,
          "EXIT_WAIT": True, "REGS": True, "PUSH": True}, 8)):
    signature = {"out_ptr": "*" + dtype, "in_ptr": "*" + dtype, "out_row_stride": "i32",
                 "in_row_stride": "i32"}
    if fn is tg._softmax_cluster:
        signature["n_cols"] = "i32"
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(len(signature))}
    signature.update(dict.fromkeys(constants, "constexpr"))
    kernel = triton.compile(GluonASTSource(fn, signature, constants, aligned),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        sass = subprocess.run([str(cuobjdump), "-sass", cubin.name], capture_output=True,
                              text=True, check=True).stdout
    found[name] = {"ptx": kernel.asm["ptx"], "shared": kernel.metadata.shared,
                   "membar": [line.strip() for line in sass.splitlines() if "MEMBAR" in line]}
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def cluster_kernels():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", CLUSTER_KERNEL_COMPILE], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def push_exchange_faults(ptx: str) -> list[str]:
    """What is missing from a pushed cluster exchange in this PTX: the mbarrier set up before
    the cluster barrier that the senders wait on, one st.async counted on the peer's mbarrier,
    the wait for the phase, and no ticket or atomic."""
    order = [m.group(0) for m in re.finditer(
        r"mbarrier[.]init|fence[.]mbarrier_init|barrier[.]cluster[.]arrive[.]relaxed|"
        r"barrier[.]cluster[.]wait|mbarrier[.]arrive[.]expect_tx|"
        r"st[.]async[.]shared::cluster[.]mbarrier::complete_tx::bytes|mbarrier[.]try_wait", ptx)]
    expected = ["mbarrier.init", "fence.mbarrier_init", "barrier.cluster.arrive.relaxed",
                "barrier.cluster.wait", "mbarrier.arrive.expect_tx",
                "st.async.shared::cluster.mbarrier::complete_tx::bytes", "mbarrier.try_wait"]
    faults = [] if order == expected else [f"exchange steps {order}, not {expected}"]
    if "atom." in ptx:
        faults.append("an atomic")
    if "barrier.cluster.arrive.release" in ptx or "barrier.cluster.arrive.aligned" in ptx:
        faults.append("a cluster arrival with release")
    return faults


@gluon_only
def test_the_cluster_kernel_pushes_its_pair_with_no_gpu_wide_fence(cluster_kernels):
    for name in ("even", "masked"):
        found = cluster_kernels[name]
        assert push_exchange_faults(found["ptx"]) == [], name
        assert found["membar"] == [], name  # no MEMBAR of any scope in the machine code
        copies = re.findall(r"cp[.]async[.]cg[.]shared[.]global [[][^]]*[]], [[][^]]*[]], (\w+)",
                            found["ptx"])
        assert copies and set(copies) == {"0x10"}, name
    # the piece waits whole in shared memory: 32768 bf16, 16384 fp32 columns (64 KiB each)
    assert cluster_kernels["even"]["shared"] >= 65536
    assert cluster_kernels["masked"]["shared"] >= 65536
    # the pulled exchange has what the checks exist to catch: a fence for the whole GPU, and a
    # release at the cluster barrier
    pulled = cluster_kernels["pulled"]
    assert pulled["membar"] and any("GPU" in line for line in pulled["membar"])
    assert push_exchange_faults(pulled["ptx"])
    # the probe's pushed variants take the shipped kernel's exchange
    probe = cluster_kernels["probe pushed"]
    assert push_exchange_faults(probe["ptx"]) == [] and probe["membar"] == []


def cluster_plans(device):
    """Every row of _CLUSTER_PLANS as (dtype, a width it takes, the plan), for this GPU."""
    found = []
    for itemsize, rows in fast._CLUSTER_PLANS.items():
        for past, last, ctas, piece, chunk, warps in rows:
            if ctas > 8 and fast._max_pieces(torch.device(device)) < fast._CLUSTER_16_MIN_SMS:
                continue
            plan = fast.Plan("split_row", piece, num_warps=warps, in_shared=True, chunk=chunk,
                             cluster=ctas)
            dtypes = (torch.float32,) if itemsize == 4 else (torch.float16, torch.bfloat16)
            for dtype in dtypes:
                # the widest (no masks), one just past the previous row (mostly empty pieces)
                # and one between
                for width in (last, past + 16, (past + last) // 2 + 16):
                    found.append((dtype, width, plan))
    return found


needs_clusters = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
    reason="thread-block clusters: the kernel runs on a Hopper GPU (compute capability 9.x)")


@pytest.mark.gpu
@gluon_only
@needs_clusters
def test_gpu_every_cluster_plan_agrees_with_torch_at_every_kind_of_width(device):
    for dtype, width, plan in cluster_plans(device):
        x = nasty_rows((7, width), dtype, device, seed=width)
        out = torch.full_like(x, float("nan"))
        tk._launch_softmax(out, x, plan)
        assert_matches(out, softmax_ref(x), dtype)


@pytest.mark.gpu
@gluon_only
@needs_clusters
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gpu_softmax_takes_a_cluster_for_fresh_rows_and_views_too(monkeypatch, dtype, device):
    plans = launched_plans(monkeypatch)
    # every other row of a wider tensor, 16 columns in, into part of a wider output
    big = make((10, 80000), dtype, device, seed=4, scale=3.0)
    x = big[::2, 16:40016]
    out_big = torch.full((5, 50000), float("nan"), dtype=dtype, device=device)
    out = out_big[:, :40000]
    plan = fast._plan("softmax", 40000, max_pieces=fast._max_pieces(x.device),
                    itemsize=x.element_size(), shared=fast._fits_shared_copies(x, out),
                    clusters=fast._clusters_available(x.device))
    assert plan.cluster == 2
    tk._launch_softmax(out, x, plan)
    assert_matches(out, softmax_ref(x), dtype)
    assert out_big[:, 40000:].isnan().all()
    # the launcher picks it for fresh rows, and not for rows it cannot copy
    base = nasty_rows((7, 65552), dtype, device, seed=9)
    for view, clustered in ((base[:, :65536], True), (base[:, 1:65537], False),
                            (base[:, :65544], False)):
        assert_matches(tk.softmax(view), softmax_ref(view), dtype)
        assert bool(plans[-1].cluster) == clustered, (view.shape, plans[-1])


@pytest.mark.gpu
@gluon_only
@needs_clusters
@pytest.mark.parametrize("shape", [(4096, 65536), (600, 2**18), (3000, 131072)], ids=str)
def test_gpu_far_more_clusters_than_fit_at_once_still_agree(shape, device):
    # many waves of clusters: each must meet its own row's pairs and no other's
    x = make(shape, torch.bfloat16, device, seed=11, scale=3.0)
    x[100] = NEG_INF
    x[300, : shape[1] // 4] = NEG_INF
    x[301] = x[301] * 100 + 1000
    got = tk.softmax(x)
    for rows in (slice(0, 64), slice(96, 104), slice(296, 304), slice(shape[0] - 64, None)):
        assert_matches(got[rows], torch.softmax(x[rows].double(), dim=-1), torch.bfloat16)
