"""The reference attention's backward pass (reference_attention, lesson 14): the forward keeps
each row's log-sum-exp in base 2, the gradients agree with torch autograd of a float64
attention on awkward shapes in every row of the tuning tables, gradcheck passes in float64,
autograd and torch.compile see both passes, the gradients hold the properties softmax gives
them, and bad arguments are refused with the numbers. On a GPU: long sequences against
torch's SDPA backward."""

from __future__ import annotations

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import reference_attention as ra
from tests.helpers import triton_version

# The interpreter computes with NumPy, which warns where an exp2 overflows in a row that is
# never stored (a key past the end of k) or that tl.where drops (a hidden score).
pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")]

# ||got - want|| / ||want|| allowed for each gradient, want from float64 autograd of the same
# (rounded) inputs. float32: exact float32 in the interpreter; on a GPU tl.dot rounds its
# inputs to TF32 (10 bits of mantissa, about 5e-4 a rounding) in five products. float16: P and
# dS are rounded to float16 (2**-11, about 5e-4) before their products; bfloat16 to 8 bits
# (about 4e-3). Each tolerance is a few of those roundings, far below what one wrong mask or
# scale gives (tens of per cent).
TOLERANCES = {torch.float32: {"cpu": 1e-5, "cuda": 1e-2}, torch.float16: 5e-3,
              torch.bfloat16: 3e-2, torch.float64: 1e-12}
# The correctness tests launch one configuration: the interpreter's (or below, tiles of uneven
# sizes), or on a GPU the tables' last rows (each new shape would otherwise be autotuned).
FIXED = {"cpu": None, "cuda": ra.BackwardConfig(ra.DKDV_CONFIGS[-1], ra.DQ_CONFIGS[-1])}
FORWARD = {"cpu": None, "cuda": ra.CONFIGS[-1]}
# dkdv: 32 keys a program in steps of 16 queries; dq: 32 queries in steps of 16 keys: the
# diagonal takes two steps in both kernels.
UNEVEN = ra.BackwardConfig(ra.TileConfig(16, 32, 4, 1), ra.TileConfig(32, 16, 4, 1))


def tolerance(dtype, device) -> float:
    value = TOLERANCES[dtype]
    return value[device] if isinstance(value, dict) else value


def normal(shape, dtype, device, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype).to(device)


def attention64(q, k, v, causal):
    """softmax(q k^T / sqrt(d)) v of float64 tensors, differentiable."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        hidden = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, -math.inf)
    return torch.softmax(scores, dim=-1) @ v


def gradients64(q, k, v, dout, causal):
    """(dq, dk, dv) from torch autograd of the float64 attention of the same inputs, on their
    device (an H200 multiplies float64 far faster than the CPU)."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    attention64(*leaves, causal).backward(dout.detach().double())
    return tuple(t.grad for t in leaves)


def relative_error(got, want) -> float:
    """||got - want|| / ||want||, the norm at least 1: where the gradient is 0 (one key: P = 1
    and dS = 0), an absolute error."""
    got = got.detach().double().to(want.device)
    return float((got - want).norm() / want.norm().clamp_min(1.0))


def backward(q, k, v, dout, causal, config=None):
    """The reference's gradients; on a GPU the forward's tiles fixed as well."""
    out, lse = ra.attention_forward(q, k, v, causal, config=FORWARD[q.device.type])
    return ra.attention_backward(q, k, v, out, dout, lse, causal, config=config)


def assert_gradients_match(q, k, v, dout, causal, config=None):
    got = backward(q, k, v, dout, causal, config)
    want = gradients64(q, k, v, dout, causal)
    tol = tolerance(q.dtype, q.device.type)
    for name, g, w, like in zip(("dq", "dk", "dv"), got, want, (q, k, v)):
        assert g.shape == like.shape and g.dtype == like.dtype and g.is_contiguous(), name
        error = relative_error(g, w)
        assert error <= tol, f"{name}: relative error {error:.3g} > {tol:g}"


def skip_bfloat16_in_the_interpreter(dtype, device):
    if dtype == torch.bfloat16 and device == "cpu":
        pytest.skip("the interpreter mishandles bfloat16 (its values come back wrong); the GPU "
                    "tests cover it")


# ---------------------------------------------------------------------------------------------
# The forward's log-sum-exp


@pytest.mark.parametrize("causal", [False, True])
def test_the_forward_keeps_each_row_s_log_sum_exp_in_base_2(causal, device):
    q, k, v = (normal((2, 3, 37, 32), torch.float32, device, s) for s in (1, 2, 3))
    out, lse = ra.attention_forward(q, k, v, causal, config=FORWARD[device])
    assert lse.shape == (2, 3, 37) and lse.dtype == torch.float32 and lse.is_contiguous()
    scores = q.cpu().double() @ k.cpu().double().transpose(-1, -2) / math.sqrt(32)
    if causal:
        scores = scores.masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), -math.inf)
    natural = torch.logsumexp(scores, dim=-1)
    tol = {"cpu": 1e-5, "cuda": 5e-3}[device]  # TF32 scores on a GPU: about 5e-4 each
    assert torch.allclose(lse.cpu().double() * math.log(2), natural, atol=tol, rtol=tol)
    # the same kernel and tiles as attention's (compiled apart: with the store and without)
    assert torch.allclose(out, ra.attention(q, k, v, causal, config=FORWARD[device]),
                          atol=1e-6, rtol=1e-6)


def test_without_keys_the_log_sum_exp_is_minus_infinity_and_every_gradient_zero(device):
    q = normal((1, 2, 5, 16), torch.float32, device, 4)
    empty = q[:, :, :0]
    out, lse = ra.attention_forward(q, empty, empty)
    assert torch.equal(out, torch.zeros_like(q)) and bool((lse == -math.inf).all())
    dq, dk, dv = ra.attention_backward(q, empty, empty, out, q, lse)
    assert torch.equal(dq, torch.zeros_like(q)) and dk.shape == dv.shape == (1, 2, 0, 16)
    dq, dk, dv = backward(q[:, :, :0], q, q, q[:, :, :0], False)  # no queries: nothing flows
    assert dq.shape == (1, 2, 0, 16) and torch.equal(dk, torch.zeros_like(q))


# ---------------------------------------------------------------------------------------------
# The gradients against float64 autograd

SHAPES = [  # (batch, heads, seq_q, seq_k, d): none a multiple of the interpreter's 16 but one
    (1, 1, 1, 1, 16), (2, 3, 37, 45, 16), (1, 2, 45, 37, 32), (1, 2, 50, 50, 32),
    (1, 1, 33, 33, 64), (1, 1, 20, 7, 64), (1, 2, 48, 48, 16)]


@pytest.mark.parametrize("batch, heads, lq, lk, d", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_float64_autograd(batch, heads, lq, lk, d, causal, device):
    if causal and lq != lk:
        pytest.skip("causal attention needs seq_q == seq_k")
    q = normal((batch, heads, lq, d), torch.float32, device, 5)
    k, v = (normal((batch, heads, lk, d), torch.float32, device, s) for s in (6, 7))
    dout = normal((batch, heads, lq, d), torch.float32, device, 8)
    assert_gradients_match(q, k, v, dout, causal, FIXED[device])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_sixteen_bit_gradients_match_float64_autograd(dtype, causal, device):
    skip_bfloat16_in_the_interpreter(dtype, device)
    q, k, v, dout = (normal((1, 2, 70, 64), dtype, device, s) for s in (9, 10, 11, 12))
    assert_gradients_match(q, k, v, dout, causal, FIXED[device])


@pytest.mark.interpreter
@pytest.mark.parametrize("lq, lk, causal", [(50, 50, True), (37, 70, False), (70, 37, False)])
def test_a_diagonal_of_two_steps_in_each_kernel_is_right(lq, lk, causal, device):
    q, dout = (normal((1, 2, lq, 16), torch.float32, device, s) for s in (13, 14))
    k, v = (normal((1, 2, lk, 16), torch.float32, device, s) for s in (15, 16))
    assert_gradients_match(q, k, v, dout, causal, UNEVEN)


# the quick run takes each table's first row; the others are exhaustive
@pytest.mark.parametrize("kernel, row", [
    pytest.param(kernel, row, marks=() if index == 0 else pytest.mark.exhaustive)
    for kernel, table in (("dkdv", ra.DKDV_CONFIGS), ("dq", ra.DQ_CONFIGS))
    for index, row in enumerate(table)], ids=lambda x: x if isinstance(x, str) else x.label)
def test_every_row_of_the_backward_tables_is_right(kernel, row, device):
    other = ra.DQ_CONFIGS[-1] if kernel == "dkdv" else ra.DKDV_CONFIGS[-1]
    config = ra.BackwardConfig(row, other) if kernel == "dkdv" else ra.BackwardConfig(other, row)
    # in the interpreter one narrow head (it runs one program at a time); compiled, d = 64
    shape = (1, 1, 150, 16) if device == "cpu" else (1, 2, 150, 64)
    for causal in (False, True):
        q, k, v, dout = (normal(shape, torch.float16, device, s) for s in range(4))
        assert_gradients_match(q, k, v, dout, causal, config)


def test_gradients_read_views_through_their_strides(device):
    # q and dout as (batch, seq, heads, d) tensors transposed; k and v every second key
    x = normal((2, 21, 3, 16), torch.float32, device, 17)
    q = x.transpose(1, 2)
    kv = normal((2, 3, 60, 16), torch.float32, device, 18)[:, :, ::2]
    dout = normal((2, 21, 3, 16), torch.float32, device, 19).transpose(1, 2)
    assert_gradients_match(q, kv, kv.clone(), dout, False, FIXED[device])


# ---------------------------------------------------------------------------------------------
# Properties softmax gives the gradients


def test_the_key_gradients_sum_to_zero_and_the_value_gradients_to_the_output_gradient(device):
    # Every row of P sums to 1: so the rows of dS sum to 0 (sum_j dK_j = 0: shifting every key
    # by one vector changes no probability), and sum_j dV_j = sum_i dO_i.
    for causal in (False, True):
        q, k, v, dout = (normal((1, 2, 41, 32), torch.float32, device, s) for s in (20, 21, 22,
                                                                                       23))
        dq, dk, dv = backward(q, k, v, dout, causal, FIXED[device])
        scale = float(dk.abs().sum(dim=2).max())
        # exact float32 in the interpreter; TF32 products on a GPU (about 5e-4 each)
        tol = {"cpu": 1e-4, "cuda": 3e-3}[device]
        assert float(dk.sum(dim=2).abs().max()) <= tol * scale
        assert torch.allclose(dv.sum(dim=2), dout.sum(dim=2), atol=10 * tol, rtol=10 * tol)


def test_a_zero_output_gradient_gives_zero_gradients(device):
    q, k, v = (normal((1, 1, 30, 16), torch.float32, device, s) for s in (24, 25, 26))
    for g in backward(q, k, v, torch.zeros_like(q), True, FIXED[device]):
        assert torch.equal(g, torch.zeros_like(g))


def test_rows_whose_every_score_is_very_negative_give_finite_gradients(device):
    # q = -6, k = 6 (and a little noise): every scaled score is about -144, the log-sum-exp
    # about -208 in base 2. A key past the end of k loads as zeros and scores 0, not -144: its
    # exp2(0 - lse) = 2**208 overflows float32, and must not reach dq (0 * inf is NaN).
    noise = [normal((1, 2, 37, 16), torch.float32, device, s, scale=0.1) for s in (27, 28)]
    q, k = noise[0] - 6.0, noise[1] + 6.0
    v, dout = (normal((1, 2, 37, 16), torch.float32, device, s) for s in (29, 30))
    want = gradients64(q, k, v, dout, False)
    for causal in (False, True):
        got = backward(q, k, v, dout, causal, FIXED[device])
        assert all(bool(torch.isfinite(g).all()) for g in got), causal
    if device == "cuda":
        return  # TF32 rounds scores of -144 by about 0.07: only the interpreter's are exact
    got = backward(q, k, v, dout, False, FIXED[device])
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        # scores of -144 in float32 are off by about 1e-5, and so are the probabilities
        assert relative_error(g, w) <= 1e-3, name


# ---------------------------------------------------------------------------------------------
# Autograd, gradcheck and torch.compile


@pytest.mark.interpreter
@pytest.mark.skipif(triton_version() < (3, 6),
                    reason="the interpreter before Triton 3.6 has no tl.dot in float64")
@pytest.mark.parametrize("lq, lk, causal", [(19, 19, True), (5, 21, False)])
def test_gradcheck_in_float64(lq, lk, causal, device):
    # fast_mode: gradcheck compares the analytic and numerical gradients along random
    # directions, a handful of forward and backward passes instead of one per element
    q = normal((1, 1, lq, 16), torch.float64, device, 31).requires_grad_()
    k, v = (normal((1, 1, lk, 16), torch.float64, device, s).requires_grad_() for s in (32, 33))
    assert torch.autograd.gradcheck(lambda q, k, v: ra.attention(q, k, v, causal), (q, k, v),
                                    fast_mode=True)


@pytest.mark.gpu
def test_float64_is_refused_on_a_gpu():
    q = torch.ones(1, 1, 4, 16, dtype=torch.float64, device="cuda")
    with pytest.raises(TypeError, match="float64, which the kernels take only in Triton's "
                                        "interpreter"):
        ra.attention(q, q, q)


def test_attention_backpropagates_when_an_input_requires_grad(device):
    # on a GPU the bench's heads and d (its kernels, from Triton's cache): autograd's path
    # autotunes, and so do the launchers it is compared with, to the same tiles
    dtype, shape = (torch.float32, (1, 2, 23, 16)) if device == "cpu" else \
        (torch.bfloat16, (1, 16, 64, 128))
    q, k, v = (normal(shape, dtype, device, s) for s in (34, 35, 36))
    assert ra.attention(q, k, v, True).grad_fn is None  # a plain call: no autograd, no operator
    out, lse = ra.attention_forward(q, k, v, True)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    recorded = ra.attention(*leaves, True)
    assert "AttentionFunction" in type(recorded.grad_fn).__name__
    assert torch.equal(recorded.detach(), out)
    dout = normal(q.shape, dtype, device, 37)
    recorded.backward(dout)
    for leaf, want in zip(leaves, ra.attention_backward(q, k, v, out, dout, lse, True)):
        assert torch.equal(leaf.grad, want)
    # out.sum().backward() sends an expanded gradient (every stride 0): copied, not refused
    for leaf in leaves:
        leaf.grad = None
    ra.attention(*leaves, True).sum().backward()
    ones = torch.ones_like(q)
    for leaf, want in zip(leaves, ra.attention_backward(q, k, v, out, ones, lse, True)):
        assert torch.equal(leaf.grad, want)


def test_a_tile_choice_is_refused_where_autograd_records_the_call(device):
    q = normal((1, 1, 16, 16), torch.float32, device, 38).requires_grad_()
    with pytest.raises(ValueError, match="leave them out"):
        ra.attention(q, q, q, config=ra.INTERPRETER_CONFIG)
    with torch.no_grad():
        assert ra.attention(q, q, q, config=ra.CONFIGS[-1]).grad_fn is None


def test_the_operators_trace_with_fake_tensors(device):
    with FakeTensorMode():
        q = torch.empty(2, 3, 40, 32, dtype=torch.float16, device=device)
        k = torch.empty(2, 3, 24, 32, dtype=torch.float16, device=device)
        out, lse = torch.ops.triton_course.attention_forward(q, k, k, False)
        grads = torch.ops.triton_course.attention_backward(q, k, k, out, out, lse, False)
    assert out.shape == q.shape and lse.shape == (2, 3, 40) and lse.dtype == torch.float32
    assert [g.shape for g in grads] == [q.shape, k.shape, k.shape]


def compile_or_skip(fn, device):
    if not torch._dynamo.is_dynamo_supported():
        pytest.skip(f"torch.compile is not supported with this Python ({torch.__version__})")
    torch._dynamo.reset()
    # aot_eager: torch.compile's tracing (one graph, fake tensors, autograd) without a code
    # generator, so it runs with the interpreter's CPU tensors too; on a GPU, Inductor
    backend = "aot_eager" if device == "cpu" else "inductor"
    return torch.compile(fn, fullgraph=True, backend=backend)


def test_torch_compile_traces_both_passes_in_one_graph(device):
    # on a GPU, the bench's dtype, d and heads at the target (and a length that is a multiple
    # of 16, as 4096 is: Triton specializes integers that are): the kernels compiled here are
    # those the bench then finds in Triton's cache
    causal = True
    dtype, shape = (torch.float32, (1, 2, 40, 32)) if device == "cpu" else \
        (torch.bfloat16, (1, 16, 64, 128))
    compiled = compile_or_skip(lambda q, k, v: ra.attention(q, k, v, causal) * 2.0, device)
    q, k, v, dout = (normal(shape, dtype, device, s) for s in (39, 40, 41, 42))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = compiled(*leaves)  # fullgraph=True: a graph break would raise here
    out.backward(dout)
    want_out, want_lse = ra.attention_forward(q, k, v, causal)
    assert torch.allclose(out.detach(), 2.0 * want_out, atol=1e-2, rtol=1e-2)
    for leaf, want in zip(leaves, ra.attention_backward(q, k, v, want_out, 2.0 * dout,
                                                         want_lse, causal)):
        assert torch.allclose(leaf.grad, want, atol=2e-2, rtol=2e-2)


# ---------------------------------------------------------------------------------------------
# Refusals, with the numbers


def test_the_backward_refuses_saved_tensors_that_do_not_match(device):
    q = normal((1, 2, 8, 16), torch.float32, device, 43)
    out, lse = ra.attention_forward(q, q, q)
    with pytest.raises(ValueError, match=r"dout is \(1, 2, 7, 16\) torch.float32.*q is "
                                         r"\(1, 2, 8, 16\)"):
        ra.attention_backward(q, q, q, out, q[:, :, :7], lse)
    with pytest.raises(ValueError, match=r"lse is \(1, 2, 8\) torch.float16.*keeps \(1, 2, 8\) "
                                         "torch.float32"):
        ra.attention_backward(q, q, q, out, q, lse.half())
    every_second = torch.empty((1, 2, 16), device=device)[..., ::2]
    with pytest.raises(ValueError, match=r"lse has strides \(32, 16, 2\)"):
        ra.attention_backward(q, q, q, out, q, every_second.copy_(lse))
    with pytest.raises(TypeError, match="lse must be a torch.Tensor, got NoneType"):
        ra.attention_backward(q, q, q, out, q, None)
    with pytest.raises(ValueError, match="causal attention needs seq_q == seq_k, got 8 queries "
                                         "and 5 keys"):
        ra.attention_backward(q, q[:, :, :5], q[:, :, :5], out, q, lse, True)
    with pytest.raises(ValueError, match="attention_backward: dout's last dimension has stride "
                                         "2"):
        wide = normal((1, 2, 8, 32), torch.float32, device, 44)
        ra.attention_backward(q, q, q, out, wide[..., ::2], lse)


@pytest.mark.parametrize("dkdv, dq, words", [
    ((32, 16), (16, 16), "dkdv keeps 16 keys and steps 32 queries"),
    ((16, 16), (16, 32), "dq keeps 16 queries and steps 32 keys"),
    ((16, 48), (16, 16), "block 48 is not a power of two"),
    ((8, 16), (16, 16), "block 8 is not a power of two >= 16"),
])
def test_backward_tiles_that_cannot_work_are_refused(dkdv, dq, words):
    with pytest.raises(ValueError, match=words):
        ra.BackwardConfig(ra.TileConfig(*dkdv, 4, 2), ra.TileConfig(*dq, 4, 2))


def test_the_backward_tables_fit_an_h200s_shared_memory_in_16_bit_at_d_128():
    for row in ra.DKDV_CONFIGS:
        assert ra._backward_shared_bytes(row.block_n, row.block_m, row.num_stages, 128, 2) \
            <= 227 * 1024, row.label
    for row in ra.DQ_CONFIGS:
        assert ra._backward_shared_bytes(row.block_m, row.block_n, row.num_stages, 128, 2) \
            <= 227 * 1024, row.label
    for dkdv in ra.DKDV_CONFIGS:  # every pair of rows is a BackwardConfig: no error
        for dq in ra.DQ_CONFIGS:
            ra.BackwardConfig(dkdv, dq)


# ---------------------------------------------------------------------------------------------
# GPU only: long sequences, against torch's SDPA backward


def sdpa_gradients(q, k, v, dout, causal):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal).backward(dout)
    return tuple(t.grad for t in leaves)


# Norm-relative error floors on the GPU: a few roundings of P and dS to the dtype (see
# TOLERANCES). The reference passes when it is within the floor or within 3 times the error of
# torch's own SDPA backward on the same inputs, whichever is larger: SDPA rounds the same
# tiles, and long rows sum more rounded terms.
GPU_FLOORS = {torch.float16: 3e-3, torch.bfloat16: 2e-2}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("seq, d", [(1024, 64), (1000, 128), (2048, 128), (4096, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_long_sequences_match_float64_as_closely_as_sdpa(dtype, seq, d, causal):
    q, k, v, dout = (torch.randn(2, 2, seq, d, device="cuda").to(dtype) for _ in range(4))
    want = gradients64(q, k, v, dout, causal)
    got = backward(q, k, v, dout, causal, FIXED["cuda"])
    theirs = sdpa_gradients(q, k, v, dout, causal)
    for name, g, t, w in zip(("dq", "dk", "dv"), got, theirs, want):
        ours, sdpa = relative_error(g, w), relative_error(t, w)
        assert ours <= max(GPU_FLOORS[dtype], 3 * sdpa), \
            f"{name}: relative error {ours:.3g}, SDPA's {sdpa:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_autotuned_backward_at_the_target_size(causal):
    # seq 4096, d = 128, bfloat16, 16 heads as the bench has them (so that the kernels the
    # autotuners compile here are the bench's), through the autotuners; two heads checked
    q, k, v, dout = (torch.randn(1, 16, 4096, 128, device="cuda").to(torch.bfloat16)
                     for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ra.attention(*leaves, causal).backward(dout)
    theirs = sdpa_gradients(q, k, v, dout, causal)
    for h in (0, 15):
        heads = [t[:, h:h + 1] for t in (q, k, v, dout)]
        want = gradients64(*heads, causal)
        for name, leaf, t, w in zip(("dq", "dk", "dv"), leaves, theirs, want):
            ours = relative_error(leaf.grad[:, h:h + 1], w)
            sdpa = relative_error(t[:, h:h + 1], w)
            assert ours <= max(GPU_FLOORS[torch.bfloat16], 3 * sdpa), \
                f"head {h} {name}: relative error {ours:.3g}, SDPA's {sdpa:.3g}"
    assert ra.chosen_backward_config(q, k, causal) is not None


# ---------------------------------------------------------------------------------------------
# python -m learning.bench attention --backward


def test_without_a_gpu_the_backward_bench_says_so_and_exits_1(capsys, mode):
    from learning import bench

    if not mode.interpret:
        pytest.skip("a GPU is present: the bench would time")
    assert bench.main(["attention", "--backward", "--seqs", "4096"]) == 1
    assert "need a CUDA GPU" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv, message", [
    (["attention", "--rounds", "3"], "--rounds goes with --backward"),
    (["attention", "--backward", "--rounds", "0"], "--rounds: 0 is not allowed (1 to 50)"),
    (["attention", "--backward", "--dims", "48"], "48 is not allowed"),
])
def test_bad_backward_bench_arguments_are_one_line_and_exit_2(argv, message, capsys):
    from learning import bench

    assert bench.main(argv) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert message in out and "Traceback" not in out


def test_the_backward_counts_two_and_a_half_forwards():
    from learning.bench import attention as ba
    from learning.bench import attention_backward as bb

    assert bb.flops(2, 3, 64, 16, False) == 2.5 * ba.flops(2, 3, 64, 16, False)
    assert bb.flops(2, 3, 64, 16, True) * 2 == bb.flops(2, 3, 64, 16, False)


@pytest.mark.interpreter
def test_the_backward_bench_checks_then_times_each_implementation_in_rounds(monkeypatch):
    from learning.bench import attention as ba
    from learning.bench import attention_backward as bb

    monkeypatch.setattr(bb, "DEVICE", "cpu")
    monkeypatch.setattr(rowwise_module(), "median_ms", lambda fn, quick=False: (fn(), 2.0)[1])
    monkeypatch.setattr(ba, "shape_for", lambda seq, d: (1, 2))
    rows = bb.measure_size(40, 16, "fp16", True, 2, False, lambda row: None,
                           names=("reference", "torch", "cudnn"))
    timed = [(r["impl"], r["round"]) for r in rows if "tflops" in r]
    assert timed == [("reference", 0), ("torch", 0), ("reference", 1), ("torch", 1)]
    assert all(max(r["rel_err"].values()) < 1e-2 for r in rows if "tflops" in r)
    assert all(r["tflops"] == 2.5 * 4 * 2 * 40 * 40 * 16 / 2 / 2e-3 / 1e12
               for r in rows if "tflops" in r)
    (cudnn,) = [r for r in rows if r["impl"] == "cudnn"]  # no cuDNN on a CPU: said, not timed
    assert "not available" in cudnn["note"] and "ms" not in cudnn
    table = "\n".join(bb.table_lines(rows))
    assert "| fp16 | 40 | 16 | yes | 1 x 2 | 0 | 0 | 1.00 | 1.00 to 1.00 |" in table

    monkeypatch.setattr(ra, "DKDV_CONFIGS", ra.DKDV_CONFIGS[-1:])
    monkeypatch.setattr(ra, "DQ_CONFIGS", ra.DQ_CONFIGS[-1:])
    configs = bb.measure_configs(False, lambda row: None, (True,), target=(64, 16, "fp16"))
    assert [r["config"] for r in configs] == [
        "autotuned", f"dkdv {ra.DKDV_CONFIGS[0].label}", f"dq {ra.DQ_CONFIGS[0].label}"]
    assert all("tflops" in r for r in configs)


@pytest.mark.interpreter
def test_the_backward_bench_does_not_time_wrong_gradients(monkeypatch):
    from learning.bench import attention as ba
    from learning.bench import attention_backward as bb

    monkeypatch.setattr(bb, "DEVICE", "cpu")
    monkeypatch.setattr(rowwise_module(), "median_ms", lambda fn, quick=False: (fn(), 2.0)[1])
    monkeypatch.setattr(ba, "shape_for", lambda seq, d: (1, 2))
    real = ra.attention_backward

    def scaled_twice(*args, **kwargs):  # dq off by the scale: the mistake of applying it twice
        dq, dk, dv = real(*args, **kwargs)
        return dq * 0.25, dk, dv

    monkeypatch.setattr(ra, "attention_backward", scaled_twice)
    (row,) = bb.measure_size(40, 16, "fp16", False, 1, False, lambda row: None,
                             names=("reference",))
    assert "wrong (dq relative error" in row["note"] and "ms" not in row


def rowwise_module():
    from learning.bench import rowwise

    return rowwise
