"""Claims about triton_kernels: softmax, its backward and RMSNorm agree with float64 torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import triton_kernels as tk
from lab import production as fast

ROOT = Path(__file__).resolve().parent.parent

# |got - ref| <= atol + rtol * |ref|, where ref is computed in float64 from the same (already
# rounded) inputs. float32 leaves room for the order of the reductions and the last bits of
# the exponential; float16 and bfloat16 for one rounding of the output (2**-11, 2**-8).
TOL = {
    torch.float32: {"atol": 1e-6, "rtol": 1e-5},
    torch.float16: {"atol": 1e-5, "rtol": 2e-3},
    torch.bfloat16: {"atol": 1e-5, "rtol": 1.6e-2},
}

# Widths that are not powers of two (those hide padding bugs), one below a looped block.
WIDTHS = [1, 3, 17, 781, 1000, 4097]
# Every kernel the launcher can pick, with a block small enough that the looped kernel runs
# several chunks (and a partial last one) on these widths, cheaply in the interpreter.
STRATEGIES = [
    pytest.param("single_block", None, id="single_block"),
    pytest.param("multi_row", None, id="multi_row"),
    pytest.param("looped", 16, id="looped16"),
    pytest.param("looped", 256, id="looped256"),
]
NARROW = [3, 17, 100, 781]  # cheap for a 16-column looped block
NEG_INF = float("-inf")

# The interpreter computes with numpy, which warns where a kernel computes (-inf) - (-inf) on
# purpose: padded rows of the last multi-row tile, and rows that are entirely -inf.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def make(shape, dtype, device, seed=0, scale=1.0):
    """Random normal values on the kernel device, drawn on the CPU so every mode sees the same."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype).to(device)


def softmax_ref(x):
    return torch.softmax(x.double(), dim=-1)


def backward_ref(y, dy):
    y, dy = y.double(), dy.double()
    return y * (dy - (y * dy).sum(-1, keepdim=True))


def rmsnorm_ref(x, w, eps):
    x = x.double()
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def assert_matches(got, ref, dtype):
    """Same shape and dtype, values within TOL[dtype]; NaN only where the reference is NaN."""
    assert got.dtype == dtype, f"dtype {got.dtype}, expected {dtype}"
    assert got.shape == ref.shape, f"shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    torch.testing.assert_close(got.double().cpu(), ref.cpu(), equal_nan=True, **TOL[dtype])


# ---------------------------------------------------------------------------------------------
# softmax: agreement with torch
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("rows", [1, 5])
@pytest.mark.parametrize("width", WIDTHS)
def test_softmax_matches_torch(width, rows, dtype, device):
    x = make((rows, width), dtype, device, seed=width)
    assert_matches(tk.softmax(x), softmax_ref(x), dtype)


@pytest.mark.parametrize("width", NARROW)
@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_softmax_each_kernel_matches_torch(strategy, block, width, device):
    x = make((5, width), torch.float32, device, seed=width, scale=3.0)
    assert_matches(tk.softmax(x, strategy=strategy, block=block), softmax_ref(x), torch.float32)


def test_softmax_looped_matches_torch_on_a_width_past_one_block(device):
    x = make((3, 4097), torch.float16, device, seed=1)
    assert_matches(tk.softmax(x, block=1024), softmax_ref(x), torch.float16)


def test_softmax_writes_every_element(device):
    # the launcher allocates its output, so poison one here and call the launch directly
    for strategy, block in [("single_block", None), ("multi_row", None), ("looped", 64)]:
        x = make((5, 781), torch.float32, device, seed=2)
        out = torch.full_like(x, float("nan"))
        tk._launch_softmax(out, x, fast._plan("softmax", 781, strategy, block))
        assert_matches(out, softmax_ref(x), torch.float32)


def test_softmax_of_3d_tensor_works_on_the_last_dimension(device):
    x = make((2, 3, 17), torch.float32, device)
    assert_matches(tk.softmax(x), softmax_ref(x), torch.float32)
    x = make((2, 3, 781), torch.float16, device)
    assert_matches(tk.softmax(x, block=128), softmax_ref(x), torch.float16)


@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_softmax_reads_strided_rows_without_a_copy(strategy, block, device):
    base = make((10, 100), torch.float32, device, seed=3)
    for x in (base[::2], base[:, :37], base[1::3, 5:90]):
        assert not x.is_contiguous()
        assert_matches(tk.softmax(x, strategy=strategy, block=block), softmax_ref(x), torch.float32)


def test_softmax_of_a_scalar_is_one(device):
    x = torch.tensor(3.5, device=device)
    assert tk.softmax(x).item() == 1.0


def test_softmax_of_one_two_three(device):
    x = torch.tensor([[1.0, 2.0, 3.0]], device=device)
    expected = torch.tensor([[0.090030573, 0.244728471, 0.665240956]], dtype=torch.float64)
    torch.testing.assert_close(tk.softmax(x).double().cpu(), expected, atol=1e-7, rtol=0)


# ---------------------------------------------------------------------------------------------
# softmax: -inf, empty, extreme values
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_softmax_handles_minus_inf_entries(strategy, block, device):
    x = make((4, 100), torch.float32, device, seed=4)
    x[0, ::3] = NEG_INF  # scattered masked scores
    x[1, :70] = NEG_INF  # lanes see only -inf in the early chunks, then finite values
    x[2, 3::16] = NEG_INF  # with a 16-column block, lane 3 sees nothing but -inf
    x[3, 1:] = NEG_INF  # one finite value: a one-hot result
    got = tk.softmax(x, strategy=strategy, block=block)
    assert_matches(got, softmax_ref(x), torch.float32)
    assert got[3, 0].item() == 1.0


@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_softmax_of_an_all_minus_inf_row_is_nan_in_that_row_only(strategy, block, device):
    x = make((3, 50), torch.float32, device, seed=5)
    x[1] = NEG_INF
    got = tk.softmax(x, strategy=strategy, block=block)
    assert torch.isnan(got[1]).all()
    assert_matches(got, softmax_ref(x), torch.float32)  # rows 0 and 2 finite and right


@pytest.mark.parametrize("shape", [(0, 17), (5, 0), (0,), (2, 0, 3)], ids=str)
def test_empty_tensors_give_empty_tensors(shape, device):
    x = torch.empty(shape, device=device)
    for got in (tk.softmax(x), tk.softmax_backward(x, x)):
        assert got.shape == x.shape and got.dtype == x.dtype
    w = torch.ones(shape[-1], device=device)
    assert tk.rmsnorm(x, w).shape == x.shape


@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_softmax_rows_sum_to_one(strategy, block, device):
    x = make((5, 781), torch.float32, device, seed=6, scale=4.0)
    sums = tk.softmax(x, strategy=strategy, block=block).double().sum(-1).cpu()
    torch.testing.assert_close(sums, torch.ones(5, dtype=torch.float64), atol=1e-5, rtol=0)


@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_softmax_is_unchanged_by_a_shift(strategy, block, device):
    # multiples of 1/8: x + 100 is exact in float32, so x - max(x) is the same bits
    g = torch.Generator().manual_seed(7)
    x = (torch.randint(-64, 64, (5, 100), generator=g) / 8).float().to(device)
    y = tk.softmax(x, strategy=strategy, block=block)
    assert torch.equal(tk.softmax(x + 100.0, strategy=strategy, block=block), y)


@pytest.mark.parametrize("strategy, block", STRATEGIES)
@pytest.mark.parametrize(
    "name, transform",
    [
        ("large", lambda x: x * 100 + 1000),  # exp(1000) overflows without the max subtraction
        ("very_negative", lambda x: x - 200),  # exp(-200) underflows to 0 without it
        ("all_negative", lambda x: -(x.abs() + 1)),  # zero padding would become the maximum
        ("one_hot", lambda x: torch.where(x == x.max(-1, keepdim=True).values, 0.0, -1e4)),
        # each row safe only from its own maximum: another row's overflows or underflows it
        ("rows_far_apart", lambda x: x + x.new_tensor([1000.0, -1000.0, 0.0, 500.0])[:, None]),
    ],
)
def test_softmax_of_extreme_rows(name, transform, strategy, block, device):
    x = transform(make((4, 100), torch.float32, device, seed=8))
    got = tk.softmax(x, strategy=strategy, block=block)
    assert torch.isfinite(got).all()
    assert_matches(got, softmax_ref(x), torch.float32)


# ---------------------------------------------------------------------------------------------
# softmax_backward
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("width", [1, 17, 781, 4097])
def test_softmax_backward_matches_the_formula(width, dtype, device):
    y = tk.softmax(make((5, width), dtype, device, seed=width))
    dy = make((5, width), dtype, device, seed=width + 1)
    assert_matches(tk.softmax_backward(y, dy), backward_ref(y, dy), dtype)


@pytest.mark.parametrize("width", NARROW)
@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_softmax_backward_each_kernel_matches_the_formula(strategy, block, width, device):
    y = tk.softmax(make((5, width), torch.float32, device, seed=width))
    dy = make((5, width), torch.float32, device, seed=width + 1)
    got = tk.softmax_backward(y, dy, strategy=strategy, block=block)
    assert_matches(got, backward_ref(y, dy), torch.float32)


def test_softmax_backward_agrees_with_autograd(device):
    x = make((3, 2, 100), torch.float64, "cpu", seed=9).requires_grad_()
    dy = make((3, 2, 100), torch.float64, "cpu", seed=10)
    torch.softmax(x, dim=-1).backward(dy)
    y = torch.softmax(x.detach(), dim=-1).float().to(device)
    for block in (None, 32):
        got = tk.softmax_backward(y, dy.float().to(device), block=block)
        torch.testing.assert_close(got.double().cpu(), x.grad, atol=1e-6, rtol=1e-4)


def test_softmax_backward_reads_strided_rows(device):
    base = make((10, 200), torch.float32, device, seed=11)
    y, dy = tk.softmax(base[::2, :150]), base[1::2, 20:170]
    for block in (None, 64):
        assert_matches(tk.softmax_backward(y, dy, block=block), backward_ref(y, dy), torch.float32)


# ---------------------------------------------------------------------------------------------
# rmsnorm
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("block", [None, 64], ids=["one_block", "looped64"])
@pytest.mark.parametrize("width", [1, 17, 781, 1000])
def test_rmsnorm_matches_the_formula(width, block, dtype, device):
    x = make((5, width), dtype, device, seed=width)
    w = make((width,), dtype, device, seed=width + 1)
    assert_matches(tk.rmsnorm(x, w, block=block), rmsnorm_ref(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("rows", [1, 5, 37])
def test_rmsnorm_of_narrow_rows_several_to_a_program(rows, dtype, device):
    # 128 columns: 8 (float32) or 16 (bfloat16) rows per program, the last tile part empty
    plan = fast._plan("rmsnorm", 128, itemsize=torch.tensor([], dtype=dtype).element_size())
    assert plan.strategy == "multi_row" and plan.rows in (8, 16)
    x = make((rows, 128), dtype, device, seed=rows, scale=3.0)
    x[0] = 0.0  # a zero row stays zero (eps keeps it finite)
    w = make((128,), dtype, device, seed=rows + 1)
    out = tk.rmsnorm(x, w)
    assert_matches(out, rmsnorm_ref(x, w, 1e-6), dtype)
    assert torch.equal(out[0], x[0])


def test_rmsnorm_of_3d_strided_and_mixed_dtypes(device):
    x = make((2, 3, 781), torch.float16, device, seed=12)
    w = make((781,), torch.float32, device, seed=13)
    assert_matches(tk.rmsnorm(x, w, eps=1e-5), rmsnorm_ref(x, w, 1e-5), torch.float16)
    base = make((10, 100), torch.float32, device, seed=14)
    x, w = base[::2, :50], base[1, 50:]
    assert_matches(tk.rmsnorm(x, w, block=16), rmsnorm_ref(x, w, 1e-6), torch.float32)


def test_rmsnorm_of_a_zero_row_is_zero(device):
    x = torch.zeros(2, 17, device=device)
    assert torch.equal(tk.rmsnorm(x, torch.ones(17, device=device)), x)


# ---------------------------------------------------------------------------------------------
# dispatch and preconditions
# ---------------------------------------------------------------------------------------------


def test_one_block_up_to_max_single_block_then_looped_or_split():
    assert tk.MAX_SINGLE_BLOCK == 8192 and tk.MAX_COLS == 2**20
    assert fast._plan("softmax", 8192).strategy == "single_block"
    assert fast._plan("softmax", 128).strategy == "multi_row"
    assert fast._plan("softmax", 100, block=16).strategy == "looped"
    # the interpreter (no program runs beside another) loops; a GPU splits if the pieces fit
    assert fast._plan("softmax", 8193, max_pieces=0).strategy == "looped"
    # a GPU keeps rows whole in one program of many warps up to 32768 columns; 16-bit rows
    # wider than MAX_SINGLE_BLOCK take the one-pass kernel
    assert fast._plan("softmax", 8193, max_pieces=132) == \
        fast.Plan("single_block", 16384, num_warps=16)
    assert fast._plan("softmax", 32768, max_pieces=132).num_warps == 32
    one_pass = fast.Plan("single_block", 32768, num_warps=32, one_pass=True)
    assert fast._plan("softmax", 32768, max_pieces=132, itemsize=2) == one_pass
    assert fast._plan("softmax", 8193, max_pieces=132, itemsize=2).one_pass
    assert not fast._plan("softmax", 8192, max_pieces=132, itemsize=2).one_pass
    assert not fast._plan("softmax_backward", 16384, max_pieces=132, itemsize=2).one_pass
    # 16-bit rows of 16385 to 32768 columns that pair into aligned words: the pipelined kernel
    pipelined = fast.Plan("single_block", 32768, num_warps=32, programs_per_sm=1, stages=4,
                        pipelined=True)
    assert fast._plan("softmax", 32768, max_pieces=132, itemsize=2, paired=True) == pipelined
    assert fast._plan("softmax", 16386, max_pieces=132, itemsize=2, paired=True).pipelined
    assert not fast._plan("softmax", 16384, max_pieces=132, itemsize=2, paired=True).pipelined
    assert not fast._plan("softmax", 32768, max_pieces=0, itemsize=2, paired=True).pipelined
    assert not fast._plan("softmax_backward", 32768, max_pieces=132, itemsize=2,
                        paired=True).pipelined
    assert fast._plan("softmax", 32769, max_pieces=132, itemsize=2).strategy == "split_row"
    assert fast._plan("softmax", 8193, max_pieces=0, itemsize=2).strategy == "looped"
    assert fast._plan("softmax_backward", 16384, max_pieces=132).strategy == "single_block"
    assert fast._plan("softmax_backward", 16385, max_pieces=132).strategy == "split_row"
    # 16-bit backward rows of 16385 to 32768 columns: one program of 16 warps that reads y
    # again after the reduction (keeping it, the compiler spilled)
    reload = fast.Plan("single_block", 32768, num_warps=16, reload=True)
    assert fast._plan("softmax_backward", 32768, max_pieces=132, itemsize=2) == reload
    assert fast._plan("softmax_backward", 16385, max_pieces=132, itemsize=2).reload
    assert not fast._plan("softmax_backward", 16384, max_pieces=132, itemsize=2).reload
    assert not fast._plan("softmax_backward", 16384, max_pieces=132, itemsize=4).reload
    assert not fast._plan("softmax", 32768, max_pieces=132, itemsize=2).reload
    assert fast._plan("softmax_backward", 32769, max_pieces=132, itemsize=2).strategy == \
        "split_row"
    assert fast._plan("softmax_backward", 32768, max_pieces=0, itemsize=2).strategy == "looped"
    assert fast._plan("softmax", 32769, max_pieces=132).strategy == "split_row"
    assert fast._plan("softmax", 2**20, max_pieces=132).strategy == "split_row"
    assert fast._plan("softmax", 2**20, max_pieces=100).strategy == "looped"


@pytest.mark.parametrize("width", [1, 17, 781])
def test_split_row_with_one_piece_matches_torch(width, device):
    # one piece per row never waits for another program, so it runs in the interpreter too
    x = make((4, width), torch.float32, device, seed=width, scale=3.0)
    x[1] = NEG_INF
    x[2, ::2] = NEG_INF
    got = tk.softmax(x, strategy="split_row", block=1024)
    assert_matches(got, softmax_ref(x), torch.float32)
    y, dy = tk.softmax(x[2:]), make((2, width), torch.float32, device, seed=1)
    got = tk.softmax_backward(y, dy, strategy="split_row", block=1024)
    assert_matches(got, backward_ref(y, dy), torch.float32)


def launch_plan(fn, plan, *args):
    """Launch one plan directly into a NaN-filled output, so unwritten elements fail."""
    out = torch.full_like(args[0], float("nan"))
    if fn == "softmax":
        tk._launch_softmax(out, args[0], plan)
    else:
        tk._launch_softmax_backward(out, args[0], args[1], plan)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("width", [1, 7, 8, 9, 100, 781])
def test_one_pass_kernel_matches_torch(width, dtype, device):
    # the GPU takes it for wide 16-bit rows; the same code on small rows runs in the interpreter
    x = make((7, width), dtype, device, seed=width, scale=3.0)
    x[1, : width // 2 + 1] = NEG_INF  # whole tiles of -inf beside finite ones
    x[2] = NEG_INF  # no softmax: NaN, as in PyTorch
    x[3] = x[3] * 100 + 1000  # exp would overflow without the maximum
    x[4, width // 3 :] -= 1000  # tiles far below the row's maximum
    x[5, 0] = float("nan")
    plan = fast.Plan("single_block", triton_next_power_of_2(width), num_warps=4, one_pass=True)
    assert_matches(launch_plan("softmax", plan, x), softmax_ref(x), dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("width", [2, 8, 10, 100, 782])
def test_pipelined_kernel_matches_torch(width, dtype, device):
    # the GPU takes it for paired 16-bit rows of 32768; the same code on small rows runs in
    # the interpreter, two programs looping over the rows; every other row of a wider tensor
    # so that the row strides are not the width
    x = make((14, width + 2), dtype, device, seed=width, scale=3.0)[::2, :width]
    x[1, : width // 2 + 1] = NEG_INF  # -inf words beside finite ones
    x[2] = NEG_INF  # no softmax: NaN, as in PyTorch
    x[3] = x[3] * 100 + 1000  # exp would overflow without the maximum
    x[4] -= 1000  # all negative: a padding word that were not -inf would win the maximum
    x[5, 0] = float("nan")
    assert fast._pairs_of_16_bits(x)
    plan = fast.Plan("single_block", triton_next_power_of_2(width), num_warps=4, programs_per_sm=1,
                   stages=3, pipelined=True)
    assert_matches(launch_plan("softmax", plan, x), softmax_ref(x), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("width", [1, 9, 100, 781])
def test_backward_reload_kernel_matches_torch(width, dtype, device):
    # the GPU takes it for 16-bit rows of 32768; the same code on small rows runs in the
    # interpreter; every other row of a wider tensor, so the row strides are not the width
    x = make((12, width + 3), dtype, device, seed=width, scale=3.0)[::2, :width]
    x[1, : width // 2 + 1] = NEG_INF
    x[3] = x[3] * 100 + 1000
    y = tk.softmax(x)
    dy = make((6, width + 5), dtype, device, seed=width + 1, scale=3.0)[:, 2 : width + 2]
    plan = fast.Plan("single_block", triton_next_power_of_2(width), num_warps=4, reload=True)
    assert fast.is_fast(plan)
    assert_matches(launch_plan("softmax_backward", plan, y, dy), backward_ref(y, dy), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("width, rows", [(2, 37), (4, 64), (4, 129), (8, 3)])
def test_flat_rows_kernel_matches_torch(width, rows, dtype, device):
    # the GPU takes it for contiguous rows narrower than 16 bytes; in the interpreter it runs
    # directly, with row counts that leave the last program's tile part empty
    x = make((rows, width), dtype, device, seed=width + rows, scale=3.0)
    x[1] = NEG_INF  # no softmax: NaN, as in PyTorch
    x[2] = x[2] * 100 + 1000  # exp would overflow without the maximum
    x[0, 0] = float("nan")
    plan = fast.Plan("multi_row", width, rows=16, num_warps=4, flat=True)
    assert fast.is_fast(plan)
    assert_matches(launch_plan("softmax", plan, x), softmax_ref(x), dtype)


def test_flat_rows_only_for_narrow_contiguous_rows_on_a_gpu(device):
    def plan(x, max_pieces=132):
        rows = tk._rows("softmax", "x", x)
        base = fast._plan("softmax", rows.shape[1], max_pieces=max_pieces,
                        itemsize=x.element_size())
        return fast.flat_rows(base, max_pieces, rows, torch.empty_like(rows))

    x16 = make((64, 8), torch.bfloat16, device)
    assert plan(x16[:, :4].contiguous()).flat and plan(x16[:, :2].contiguous()).flat
    assert plan(make((64, 2), torch.float32, device)).flat
    assert not plan(x16[:, :4].contiguous(), max_pieces=0).flat  # the interpreter
    assert not plan(x16[:, :4]).flat  # rows 8 apart: not one after another
    assert not plan(x16[:, :3].contiguous()).flat  # 3 columns in a block of 4
    assert not plan(x16).flat  # 16 bytes a row: multi_row loads those whole already
    assert not plan(make((64, 4), torch.float32, device)).flat
    assert not plan(x16[:, :1].contiguous()).flat


FLAT_COMPILE = """
import re
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from lab import production as fast
signature = {"out_ptr": "*bf16", "in_ptr": "*bf16", "n_elements": "i32", "ROWS": "constexpr",
             "BLOCK": "constexpr"}
aligned = {(i,): [["tt.divisibility", 16]] for i in range(3)}
ptx = triton.compile(ASTSource(fast._softmax_flat_rows, signature, {"ROWS": 512, "BLOCK": 4},
                               aligned), target=GPUTarget("cuda", 90, 32),
                     options={"num_warps": 4}).asm["ptx"]
print(" ".join(sorted(set(re.findall(r"(?:ld|st)[.]global[.][.a-z0-9]*", ptx)))))
"""


@pytest.mark.exhaustive  # compiles for sm_90 and reads the PTX
def test_flat_rows_of_4_bfloat16_columns_move_16_bytes_at_a_time():
    # what the kernel is for: compiled for sm_90, every load and store is 16 bytes wide
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", FLAT_COMPILE], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["ld.global.v4.b32", "st.global.v4.b32"]


def test_16_bit_rows_pair_into_words_only_when_aligned(device):
    x = make((4, 10), torch.float16, device)
    assert fast._pairs_of_16_bits(x) and fast._pairs_of_16_bits(x[:, 2:8], x[:1])
    assert not fast._pairs_of_16_bits(x[:, :9])  # an odd number of columns
    assert not fast._pairs_of_16_bits(x[:, 1:9])  # rows start 2 bytes past a 4-byte boundary
    assert not fast._pairs_of_16_bits(make((4, 11), torch.float16, device)[:, :10])  # odd stride
    assert fast._pairs_of_16_bits(make((1, 11), torch.float16, device)[:, :10])  # one row
    assert not fast._pairs_of_16_bits(x.float())  # not 16-bit
    assert not fast._pairs_of_16_bits(x, x[:, 1:9])  # every tensor must pair


def test_split_row_is_refused_where_its_pieces_cannot_run_together(mode, device):
    x = make((2, 100), torch.float32, device)
    if mode.interpret:
        with pytest.raises(ValueError, match=r"interpreter runs one program at a time.*looped"):
            tk.softmax(x, strategy="split_row", block=32)
    with pytest.raises(ValueError, match=r"4096 pieces of 256.*only 132 "):
        fast._plan("softmax", 2**20, "split_row", 256, max_pieces=132)


def test_non_contiguous_last_dimension_is_rejected_with_the_fix(device):
    base = make((5, 34), torch.float32, device)
    for x in (base[:, ::2], base.t()):
        with pytest.raises(ValueError, match=r"stride.*\.contiguous\(\)"):
            tk.softmax(x)
        with pytest.raises(ValueError, match=r"\.contiguous\(\)"):
            tk.softmax_backward(x, x)
        with pytest.raises(ValueError, match=r"\.contiguous\(\)"):
            tk.rmsnorm(x, torch.ones(x.shape[-1], device=device))


def test_leading_dimensions_that_do_not_flatten_are_rejected(device):
    x = make((4, 6, 33), torch.float32, device)[:, :3]  # strides (198, 33, 1)
    with pytest.raises(ValueError, match=r"flattened.*\.contiguous\(\)"):
        tk.softmax(x)


def test_too_wide_rows_are_rejected_with_the_numbers(device):
    x = torch.zeros(1, tk.MAX_COLS + 1, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match=r"1048577 columns.*1048576"):
        tk.softmax(x)
    with pytest.raises(ValueError, match=r"1048577 columns"):
        tk.softmax_backward(x, x)


def test_wrong_device_is_rejected(mode):
    if mode.interpret:
        x, match = torch.empty(2, 3, device="meta"), "interpreter"
    else:
        x, match = torch.zeros(2, 3), r"\.cuda\(\)"
    with pytest.raises(ValueError, match=match):
        tk.softmax(x)
    with pytest.raises(ValueError, match=match):
        tk.rmsnorm(x, torch.ones(3, device=x.device))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32], ids=str)
def test_unsupported_dtypes_are_rejected(dtype, device):
    with pytest.raises(TypeError, match=r"float32, float16 or bfloat16.*\.float\(\)"):
        tk.softmax(torch.zeros(2, 3, dtype=dtype, device=device))


def test_bad_block_and_strategy_are_rejected(device):
    x = make((2, 100), torch.float32, device)
    with pytest.raises(ValueError, match=r"block=100 .*power of two.*block=128"):
        tk.softmax(x, block=100)
    with pytest.raises(ValueError, match=r"block=64 is narrower than the 100 columns"):
        tk.softmax(x, strategy="single_block", block=64)
    with pytest.raises(ValueError, match=r"unknown strategy 'fast'"):
        tk.softmax(x, strategy="fast")
    with pytest.raises(ValueError, match=r"MAX_(GPU_)?SINGLE_BLOCK=(8192|32768)"):
        tk.softmax(make((1, 40000), torch.float32, device), strategy="single_block")


def test_mismatched_arguments_are_rejected(device):
    y = make((2, 8), torch.float32, device)
    with pytest.raises(ValueError, match=r"shape \(2, 8\).*shape \(2, 4\)"):
        tk.softmax_backward(y, y[:, :4])
    with pytest.raises(TypeError, match=r"dy\.to\(y\.dtype\)"):
        tk.softmax_backward(y, y.half())
    with pytest.raises(ValueError, match=r"weight must have shape \(8,\)"):
        tk.rmsnorm(y, torch.ones(7, device=device))
    with pytest.raises(ValueError, match=r"eps=-1"):
        tk.rmsnorm(y, torch.ones(8, device=device), eps=-1.0)


# ---------------------------------------------------------------------------------------------
# the launchers as torch.library operators: autograd and torch.compile
# ---------------------------------------------------------------------------------------------


class _OperatorsSeen(TorchDispatchMode):
    """Records the operators dispatched while it is active."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def test_the_launchers_are_registered_operators(device):
    x = make((3, 17), torch.float32, device)
    w = make((17,), torch.float32, device, seed=1)
    for name, args in (("softmax", (x,)), ("softmax_backward", (x, x)), ("rmsnorm", (x, w))):
        got = getattr(torch.ops.triton_course, name)(*args)
        assert torch.equal(got, getattr(tk, name)(*args)), name


def test_autograd_sees_softmax_and_a_plain_call_skips_the_dispatcher(device):
    x = make((4, 100), torch.float32, device, seed=22)
    with _OperatorsSeen() as seen:
        tk.softmax(x)
    assert "triton_course.softmax.default" not in seen.names
    with _OperatorsSeen() as seen:
        y = tk.softmax(x.requires_grad_())
    assert "triton_course.softmax.default" in seen.names
    assert "triton_course" in y.grad_fn.name()


@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_softmax_backpropagates_through_softmax_backward(strategy, block, device):
    x = make((5, 781), torch.float32, device, seed=23, scale=3.0).requires_grad_()
    dy = make((5, 781), torch.float32, device, seed=24)
    y = tk.softmax(x, strategy, block)
    y.backward(dy)
    assert_matches(x.grad, backward_ref(y.detach(), dy), torch.float32)
    # y.sum().backward() hands back an expanded dy (strides 0): every row of dx is then 0
    x.grad = None
    tk.softmax(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.zeros_like(x), atol=1e-6, rtol=0)


def test_the_operators_trace_with_fake_tensors(device):
    with FakeTensorMode():
        x = torch.empty(4, 1000, dtype=torch.float16, device=device)
        shapes = [tk.softmax(x), tk.softmax_backward(x, x), tk.rmsnorm(x, x[0])]
    assert all(t.shape == x.shape and t.dtype == x.dtype for t in shapes)


def test_torch_compile_traces_softmax_whole_and_its_gradient(device):
    # aot_eager: torch.compile's tracing (one graph, fake tensors, autograd) without a code
    # generator, so it runs in the interpreter too; the GPU test below compiles with Inductor
    torch._dynamo.reset()
    compiled = torch.compile(tk.softmax, fullgraph=True, backend="aot_eager")
    x = make((6, 100), torch.float32, device, seed=25, scale=3.0).requires_grad_()
    dy = make((6, 100), torch.float32, device, seed=26)
    y = compiled(x)
    y.backward(dy)
    assert_matches(y.detach(), softmax_ref(x.detach()), torch.float32)
    assert_matches(x.grad, backward_ref(y.detach(), dy), torch.float32)


def test_rmsnorm_refuses_to_backpropagate_instead_of_returning_no_gradient(device):
    x = make((2, 17), torch.float32, device).requires_grad_()
    with pytest.raises(RuntimeError, match="no autograd formula"):
        tk.rmsnorm(x, torch.ones(17, device=device)).sum().backward()


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, dtype, strategy",
    [
        ((64, 128), torch.float32, None),  # _softmax_multi_row
        ((4, 1000), torch.float32, None),  # _softmax
        ((3, 20000), torch.float16, None),  # _softmax_one_pass (the row is not in words)
        ((300, 32768), torch.bfloat16, None),  # _softmax_pipelined
        ((2, 65536), torch.float32, None),  # _softmax_split_row, and its backward
        ((3, 9000), torch.float32, "looped"),  # _softmax_looped
    ],
    ids=str,
)
def test_gpu_compiled_softmax_and_its_gradient_match_torch(shape, dtype, strategy, device):
    torch._dynamo.reset()
    compiled = torch.compile(
        tk.softmax if strategy is None else lambda x: tk.softmax(x, strategy), fullgraph=True)
    x = make(shape, dtype, device, seed=sum(shape), scale=3.0)
    if shape == (3, 20000):
        x = make((3, 20001), dtype, device, seed=1, scale=3.0)[:, 1:]  # rows 2 bytes off
    x.requires_grad_()
    dy = make(x.shape, dtype, device, seed=27)
    y = compiled(x)
    y.backward(dy)
    assert_matches(y.detach(), softmax_ref(x.detach()), dtype)
    assert_matches(x.grad, backward_ref(y.detach(), dy), dtype)


# ---------------------------------------------------------------------------------------------
# GPU only: bfloat16 (the interpreter mishandles it), wide rows, large shapes
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("width", [3, 17, 781, 1000, 4097])
@pytest.mark.parametrize("strategy, block", STRATEGIES)
def test_gpu_bfloat16_each_kernel(strategy, block, width, device):
    if strategy == "multi_row" and width > 4096:
        pytest.skip("multi_row keeps the row in one block of at most MAX_SINGLE_BLOCK")
    x = make((5, width), torch.bfloat16, device, seed=width)
    assert_matches(tk.softmax(x, strategy=strategy, block=block), softmax_ref(x), torch.bfloat16)
    dy = make((5, width), torch.bfloat16, device, seed=width + 1)
    y = tk.softmax(x)
    got = tk.softmax_backward(y, dy, strategy=strategy, block=block)
    assert_matches(got, backward_ref(y, dy), torch.bfloat16)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("width", [8192, 8193, 16384, 20000, 32768, 65536, 262144 + 17, 2**20])
def test_gpu_wide_rows(width, dtype, device):
    x = make((3, width), dtype, device, seed=width, scale=2.0)
    x[1, : width // 2] = NEG_INF
    x[2] = NEG_INF
    assert_matches(tk.softmax(x), softmax_ref(x), dtype)
    assert_matches(tk.softmax(x, strategy="looped"), softmax_ref(x), dtype)
    y = tk.softmax(x[:2])
    dy = make((2, width), dtype, device, seed=width + 1)
    assert_matches(tk.softmax_backward(y, dy), backward_ref(y, dy), dtype)
    got = tk.softmax_backward(y, dy, strategy="looped")
    assert_matches(got, backward_ref(y, dy), dtype)
    w = make((width,), dtype, device, seed=width + 2)
    assert_matches(tk.rmsnorm(x[:1], w), rmsnorm_ref(x[:1], w, 1e-6), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((4096, 4097), torch.float32),
        ((65536, 128), torch.bfloat16),
        ((3000, 1000), torch.float16),
        ((8, 1024, 781), torch.float32),
        ((300, 40000), torch.bfloat16),
        ((400, 32768), torch.float16),  # clusters of two CTAs on a Hopper, else pipelined
        ((300, 30000), torch.bfloat16),  # backward: _softmax_backward_reload, masked lanes
        ((100003, 4), torch.bfloat16),  # forward: _softmax_flat_rows, a part-empty last tile
    ],
    ids=str,
)
def test_gpu_large_shapes(shape, dtype, device):
    x = make(shape, dtype, device, seed=sum(shape), scale=3.0)
    assert_matches(tk.softmax(x), softmax_ref(x), dtype)
    dy = make(shape, dtype, device, seed=1)
    y = tk.softmax(x)
    assert_matches(tk.softmax_backward(y, dy), backward_ref(y, dy), dtype)


@pytest.mark.gpu
def test_gpu_every_default_plan_writes_every_element(device):
    for width in (128, 1000, 4096, 8192, 20000):
        x = make((300, width), torch.float32, device, seed=width)
        out = torch.full_like(x, float("nan"))
        tk._launch_softmax(out, x, fast._plan("softmax", width,
                                              max_pieces=fast._max_pieces(x.device)))
        assert_matches(out, softmax_ref(x), torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("block", [None, 256])
@pytest.mark.parametrize("width", [3, 781, 4097, 20000])
def test_gpu_split_row_matches_torch(width, block, dtype, device):
    x = make((6, width), dtype, device, seed=width, scale=3.0)
    x[1, : width // 2] = NEG_INF  # whole pieces of -inf
    x[2] = NEG_INF  # NaN row
    x[3] = x[3] * 100 + 1000
    x[5, : width // 2] = NEG_INF  # pieces of only -inf beside a very negative maximum
    x[5, width // 2 :] -= 1000
    got = tk.softmax(x, strategy="split_row", block=block)
    assert_matches(got, softmax_ref(x), dtype)
    y = tk.softmax(x[4:])
    dy = make((2, width), dtype, device, seed=width + 1)
    got = tk.softmax_backward(y, dy, strategy="split_row", block=block)
    assert_matches(got, backward_ref(y, dy), dtype)


@pytest.mark.gpu
def test_gpu_tensor_on_a_second_gpu_or_the_first(device):
    # the launcher makes the tensor's GPU current: works on whichever GPU holds the data
    for index in range(torch.cuda.device_count()):
        x = make((4, 1000), torch.float32, f"cuda:{index}")
        assert_matches(tk.softmax(x), softmax_ref(x), torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("width, warps", [(16384, 16), (16384, 32), (32768, 32), (20000, 32)])
def test_gpu_wide_single_block_matches_torch(width, warps, dtype, device):
    x = make((7, width), dtype, device, seed=width, scale=3.0)
    x[1, ::3] = NEG_INF
    plan = fast.Plan("single_block", triton_next_power_of_2(width), num_warps=warps)
    assert_matches(launch_plan("softmax", plan, x), softmax_ref(x), dtype)
    y, dy = tk.softmax(x), make((7, width), dtype, device, seed=width + 1)
    assert_matches(launch_plan("backward", plan, y, dy), backward_ref(y, dy), dtype)


def triton_next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("width", [9000, 16384, 20000, 32768, 32769, 65536, 2**18, 2**20])
def test_gpu_default_plans_write_every_element(width, dtype, device):
    x = make((4, width), dtype, device, seed=width, scale=3.0)
    x[1, : width // 3] = NEG_INF
    size = x.element_size()
    plan = fast._plan("softmax", width, max_pieces=fast._max_pieces(x.device), itemsize=size,
                    paired=fast._pairs_of_16_bits(x))
    assert_matches(launch_plan("softmax", plan, x), softmax_ref(x), dtype)
    y, dy = tk.softmax(x), make((4, width), dtype, device, seed=width + 1)
    plan = fast._plan("softmax_backward", width, max_pieces=fast._max_pieces(x.device),
                      itemsize=size)
    assert_matches(launch_plan("backward", plan, y, dy), backward_ref(y, dy), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_gpu_16_bit_rows_of_32768_paired_or_not(dtype, device):
    # paired rows take _softmax_pipelined, the others _softmax_one_pass: both must be right
    base = make((5, 32770), dtype, device, seed=3, scale=3.0)
    base[1, :10000] = NEG_INF
    base[2] -= 1000
    views = {"paired": base[:, :32768], "misaligned": base[:, 1:32769],
             "odd width": base[:, :32767], "paired, padded": base[:, 2:32768]}
    for name, x in views.items():
        plan = fast._plan("softmax", x.shape[1], max_pieces=fast._max_pieces(x.device), itemsize=2,
                        paired=fast._pairs_of_16_bits(x))
        assert plan.pipelined == name.startswith("paired"), name
        assert_matches(tk.softmax(x), softmax_ref(x), dtype)


# the quick run takes the lab away altogether; the other two ways are exhaustive
@pytest.mark.parametrize("how", [pytest.param("never installed", marks=pytest.mark.exhaustive),
                                 pytest.param("installed, then taken off",
                                              marks=pytest.mark.exhaustive), "no lab"])
def test_the_reference_plans_and_launches_alone(how, mode):
    """triton_kernels reads top to bottom without the lab: with no production layer installed
    (or the lab's taken off with use_production_layer(None), or no lab at all), every launcher
    plans with its own kernels and gives torch's answer, narrow rows, whole rows and rows wider
    than a block alike, in this machine's mode (compiled on a GPU, in the interpreter
    elsewhere)."""
    import subprocess
    import sys

    from tests.helpers import COURSE_ROOT, course_pythonpath

    setup = {"never installed": "",
             "installed, then taken off": "import lab.production; tk.use_production_layer(None)",
             "no lab": "import sys; sys.modules['lab'] = None"}[how]
    probe = f"""
import torch, triton_kernels as tk
{setup}
assert tk.production_layer() is None
torch.manual_seed(0)
for n_cols in (7, 300, 5000, 9000):
    x = torch.randn(5, n_cols, device="{mode.device}")
    y = tk.softmax(x)
    assert torch.allclose(y, x.softmax(-1), atol=1e-6), n_cols
    dy = torch.randn_like(y)
    want = y * (dy - (y * dy).sum(-1, keepdim=True))
    assert torch.allclose(tk.softmax_backward(y, dy), want, atol=1e-6), n_cols
    w = torch.randn(n_cols, device=x.device)
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    assert torch.allclose(tk.rmsnorm(x, w), want, atol=1e-5), n_cols
print(type(tk._plan_for("softmax", x, None, None, None)).__module__)
"""
    env = dict(os.environ, PYTHONPATH=course_pythonpath())
    env.pop("TRITON_INTERPRET", None)
    if mode.interpret:
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=COURSE_ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "triton_kernels"


def test_importing_the_lab_installs_its_production_layer():
    from lab import production

    assert tk.production_layer() is production
    assert isinstance(tk._plan_for("softmax", torch.empty(2, 9000), None, None, None),
                      production.Plan)
