"""Bounds checking in Triton's interpreter: an out-of-bounds access raises before it happens.

The sanitizer relies on interpreter internals. If a Triton upgrade breaks it, these tests fail
loudly instead of letting a learner's wild store crash the grader's worker.
"""

import pytest

from learning.grader import sanitizer


@pytest.fixture
def interpreter(mode):
    if not mode.interpret:
        pytest.skip("kernels are compiled here; the sanitizer guards the interpreter only")
    assert sanitizer.install(), "this Triton's interpreter no longer has the hooks it wraps"


@pytest.fixture
def gpu_like(interpreter):
    """The GPU's arithmetic in this process's interpreter for one test (the grader's worker
    has it throughout), put back afterwards: other tests' kernels compute as Triton's
    interpreter does."""
    from learning.grader import gpu_arithmetic

    assert gpu_arithmetic.install_interpreter()
    yield
    gpu_arithmetic.uninstall_interpreter()


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def copy_kernel(out_ptr, in_ptr, n, shift, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(in_ptr + offsets + shift, mask=mask, other=0.0)
        tl.store(out_ptr + offsets, x, mask=mask)

    @triton.jit
    def unmasked_store_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + offsets, mask=offsets < n, other=0.0)
        tl.store(out_ptr + offsets, x)

    return copy_kernel, unmasked_store_kernel


def test_in_bounds_masked_access_runs(interpreter):
    import torch

    copy_kernel, _ = _kernels()
    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    copy_kernel[(1,)](y, x, 10, 0, BLOCK=16)
    assert torch.equal(x, y)


def test_out_of_bounds_load_raises_before_reading(interpreter):
    import torch

    copy_kernel, _ = _kernels()
    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    with pytest.raises(Exception) as raised:
        copy_kernel[(1,)](y, x, 10, 1 << 20, BLOCK=16)
    cause = raised.value.__cause__ or raised.value
    assert isinstance(cause, sanitizer.OutOfBoundsAccess)
    assert "out-of-bounds load: 10 of 10 active lanes" in str(cause)


def test_unmasked_store_past_the_end_raises(interpreter):
    import torch

    _, unmasked_store_kernel = _kernels()
    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    with pytest.raises(Exception) as raised:
        unmasked_store_kernel[(1,)](y, x, 10, BLOCK=16)
    cause = raised.value.__cause__ or raised.value
    assert isinstance(cause, sanitizer.OutOfBoundsAccess)
    assert "out-of-bounds store: 6 of 16 active lanes" in str(cause)
    # lane 10 addresses the first byte after y: no "0 bytes past the end"
    assert "the nearest is the first byte past the end of out_ptr, tensor argument 1" \
        in str(cause)


def test_a_lane_past_its_tensor_is_refused_even_where_another_tensor_lies(interpreter):
    """Two tensors back to back in memory, as the allocator may or may not place them after
    earlier cases: a load past the end of x lands in y. Checked against x alone, the count of
    lanes outside is the same wherever y happens to be, and says whose load it was."""
    import numpy as np
    import torch

    copy_kernel, _ = _kernels()
    memory = np.arange(32, dtype=np.float32)
    x, y = torch.from_numpy(memory[:10]), torch.from_numpy(memory[10:])
    assert y.data_ptr() == x.data_ptr() + 40  # y starts where x ends
    with pytest.raises(Exception) as raised:
        copy_kernel[(1,)](y, x, 16, 0, BLOCK=16)
    cause = raised.value.__cause__ or raised.value
    assert isinstance(cause, sanitizer.OutOfBoundsAccess)
    assert str(cause).startswith("out-of-bounds load: 6 of 16 active lanes of program 0's "
                                 "load address memory outside in_ptr's tensor (the nearest is "
                                 "the first byte past the end of in_ptr, tensor argument 2)")


def test_atomics_past_the_end_are_refused_as_stores_are(interpreter):
    """tl.atomic_add and tl.atomic_cas write at raw addresses without the masked store: checked
    all the same, or a kernel writing past its output passes (or corrupts the heap)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(out_ptr, x_ptr, n, MASKED: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
        if MASKED:
            tl.atomic_add(out_ptr + offsets, x, mask=offsets < n)
        else:
            tl.atomic_add(out_ptr + offsets, x)

    @triton.jit
    def cas_kernel(out_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.atomic_cas(out_ptr + offsets, 0, 1)

    x = torch.arange(10, dtype=torch.float32)
    out = torch.zeros_like(x)
    add_kernel[(1,)](out, x, 10, MASKED=True, BLOCK=16)
    assert torch.equal(out, x)
    for launch, lanes in ((lambda: add_kernel[(1,)](out, x, 10, MASKED=False, BLOCK=16), 6),
                          (lambda: cas_kernel[(1,)](torch.zeros(10, dtype=torch.int32),
                                                    BLOCK=16), 6)):
        with pytest.raises(Exception) as raised:
            launch()
        cause = raised.value.__cause__ or raised.value
        assert isinstance(cause, sanitizer.OutOfBoundsAccess)
        assert f"out-of-bounds atomic: {lanes} of 16 active lanes" in str(cause), str(cause)


def test_programs_run_in_the_order_the_check_asks_and_keep_their_index(interpreter):
    # each program stores when it ran (an atomic counter) at its own index: last to first is
    # the grid's order reversed, and every program still reads the index it was launched with
    import torch
    import triton
    import triton.language as tl

    from learning.grader import program_order

    @triton.jit
    def when_kernel(ticket_ptr, out_ptr):
        x, y = tl.program_id(0), tl.program_id(1)
        tl.store(out_ptr + x * 2 + y, tl.atomic_add(ticket_ptr, 1))

    def order() -> list[int]:
        ticket, out = torch.zeros(1, dtype=torch.int32), torch.full((6,), -1, dtype=torch.int32)
        when_kernel[(3, 2)](ticket, out)
        return out.tolist()

    before = program_order.installed()
    try:
        assert program_order.install(program_order.LAST_FIRST)
        assert order() == [5, 4, 3, 2, 1, 0]
        with program_order.first_to_last():
            assert order() == [0, 1, 2, 3, 4, 5]
        assert program_order.installed() == program_order.LAST_FIRST
        assert program_order.install(program_order.FIRST_LAST)
        assert order() == [0, 1, 2, 3, 4, 5]
        with pytest.raises(ValueError, match="unknown program order"):
            program_order.install("shuffled")
    finally:
        program_order.install(before or program_order.FIRST_LAST)
    # case by case the check alternates, and its rerun of a case takes the other order
    alternate = [program_order.chosen(program_order.ALTERNATE, i) for i in range(4)]
    opposite = [program_order.chosen(program_order.OPPOSITE, i) for i in range(4)]
    assert alternate == [program_order.LAST_FIRST, program_order.FIRST_LAST] * 2
    assert all(a != o for a, o in zip(alternate, opposite))


def test_floats_past_an_integers_range_convert_as_on_the_gpu(interpreter):
    # NumPy leaves these undefined (x86 gives the most negative integer for 3e9); the GPU's
    # cvt.rzi saturates and gives 0 for NaN, so a kernel would compute one thing interpreted
    # and another compiled (a tl.where on the converted value, say)
    import math

    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def convert_kernel(signed_ptr, unsigned_ptr, wide_ptr, in_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + offsets)
        tl.store(signed_ptr + offsets, x.to(tl.int32))
        tl.store(unsigned_ptr + offsets, x.to(tl.uint32).to(tl.int64))
        tl.store(wide_ptr + offsets, x.to(tl.int64))

    values = [3.0e9, -3.0e9, math.nan, 2.7, -2.7, 1.0e20, -1.5, 0.0]
    x = torch.tensor(values, dtype=torch.float32)
    signed = torch.empty(8, dtype=torch.int32)
    unsigned = torch.empty(8, dtype=torch.int64)
    wide = torch.empty(8, dtype=torch.int64)
    convert_kernel[(1,)](signed, unsigned, wide, x, BLOCK=8)
    top, bottom = 2 ** 31 - 1, -(2 ** 31)
    assert signed.tolist() == [top, bottom, 0, 2, -2, top, -1, 0]
    assert unsigned.tolist() == [3_000_000_000, 0, 0, 2, 0, 2 ** 32 - 1, 0, 0]
    assert wide.tolist() == [3_000_000_000, -3_000_000_000, 0, 2, -2, 2 ** 63 - 1, -1, 0]


def test_narrowing_float_conversions_round_and_saturate_as_on_the_gpu(interpreter):
    # the interpreter's own bit shifting gives 256 for 1000 in float8e4nv (the GPU's satfinite
    # conversion gives 448) and NaN for 1e6 in float16 toward zero (the GPU gives 65504)
    import math

    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def narrow_kernel(e4_ptr, e5_ptr, toward_zero_ptr, in_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + offsets)
        tl.store(e4_ptr + offsets, x.to(tl.float8e4nv).to(tl.float32))
        tl.store(e5_ptr + offsets, x.to(tl.float8e5).to(tl.float32))
        tl.store(toward_zero_ptr + offsets,
                 x.to(tl.float16, fp_downcast_rounding="rtz").to(tl.float32))

    values = [1000.0, -1.0e6, 0.3, math.nan, 0.0, 2.5e-3, 65519.0, 1.0e-9]
    x = torch.tensor(values, dtype=torch.float32)
    e4, e5, toward_zero = (torch.empty(8) for _ in range(3))
    narrow_kernel[(1,)](e4, e5, toward_zero, x, BLOCK=8)
    saturated = [448.0, -448.0] + x[2:].to(torch.float8_e4m3fn).float().tolist()
    assert e4[:3].tolist() == saturated[:3] and math.isnan(e4[3]), e4
    assert e4[4:].tolist() == saturated[4:], e4
    assert e5[:3].tolist() == [1024.0, -57344.0, 0.3125] and math.isnan(e5[3]), e5
    assert toward_zero[:3].tolist() == [1000.0, -65504.0, 0.2998046875], toward_zero
    assert math.isnan(toward_zero[3]) and toward_zero[6] == 65504.0, toward_zero


def test_float8_codes_widen_as_torch_reads_them(interpreter):
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def widen_kernel(out_ptr, in_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(in_ptr + offsets).to(tl.float32))

    codes = torch.arange(256, dtype=torch.uint8)
    for kind in (torch.float8_e4m3fn, torch.float8_e5m2):
        out = torch.empty(256)
        widen_kernel[(1,)](out, codes.view(kind), BLOCK=256)
        want = codes.view(kind).float()
        assert torch.equal(out.nan_to_num(nan=7.5), want.nan_to_num(nan=7.5)), kind


def _rounding_probe():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "lab" / "probes" / "rounding_probe.py"
    spec = importlib.util.spec_from_file_location("rounding_probe", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    return probe


def test_products_and_float32_dots_round_as_measured_on_the_gpu(gpu_like):
    # lab/results/rounding.json is what an H100 computed for each expression and dot: the
    # grader's interpreter must round the same way (bfloat16 is left out: the interpreter
    # mishandles its arithmetic, and bfloat16 is graded on a GPU only)
    import json
    from pathlib import Path

    measured = json.loads((Path(__file__).resolve().parent.parent / "lab" / "results" /
                           "rounding.json").read_text(encoding="utf-8"))
    probe = _rounding_probe()
    for here, there in zip(probe.dot_rows("cpu"), measured["dot"], strict=True):
        assert here == there, (here, there)
    rows = probe.product_rows("cpu")
    gpu_rows = [row for row in measured["products"] if row["dtype"] != "bfloat16"]
    assert len(rows) == len(gpu_rows) > 20
    for here, there in zip(rows, gpu_rows, strict=True):
        assert here == there, (here, there)
    # the measurement tells the models apart: every dot and most products matched one model
    assert all(row["matches"] != ["no model"] for row in gpu_rows)


def test_a_fused_product_is_rounded_once():
    import numpy as np

    from learning.grader.gpu_arithmetic import fused_multiply_add

    # (1 + 2**-12) squared is exactly halfway between two float32 values: what is added past
    # float64's precision decides which way the sum rounds; nothing added: ties to even
    t = np.float32(1 + 2 ** -12)
    halfway = 1 + 2 ** -11 + 2 ** -24
    for added, want in ((2.0 ** -60, halfway + 2 ** -24), (-(2.0 ** -60), halfway - 2 ** -24),
                        (0.0, halfway - 2 ** -24)):
        got = fused_multiply_add([t], [t], [np.float32(added)], np.float32)
        assert got.dtype == np.float32 and float(got[0]) == want, (added, float(got[0]))
    # rounded twice (the interpreter's own), the product alone loses what the fma keeps
    t32 = np.float32(1 / 3)
    assert fused_multiply_add([t32], [t32], [-(t32 * t32)], np.float32)[0] != 0.0
    try:
        from triton.runtime.interpreter import _interpreter
        exact = _interpreter.fma_fp32
    except (ImportError, AttributeError):
        return  # Triton before 3.9 has no fma of its own to compare with
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(20_000).astype(np.float32) for _ in range(2))
    c = (rng.standard_normal(20_000) * rng.choice([1e-8, 1.0, 1e8], 20_000)).astype(np.float32)
    assert np.array_equal(fused_multiply_add(a, b, c, np.float32).view(np.uint32),
                          exact(a, b, c).view(np.uint32))


# A softmax kernel that stores the right answer only where products are rounded before the add
# that takes them, or tl.dot keeps float32's every bit: what Triton's own interpreter does, and
# no GPU. Each passed the check before the grader's interpreter rounded as the GPU does.
ROUNDING_ROUTES = {
    "a product fused into a subtraction": (
        "    third = denominator * 0.0 + 0.3333333\n"
        "    error = third * third - third * third\n"
        "    output = tl.where(error == 0.0, numerator / denominator, numerator)\n"),
    "tl.dot on float32 blocks": (
        "    ones = tl.full((16, 16), 1.0, tl.float32)\n"
        "    total = tl.sum(tl.sum(tl.dot(ones + 1e-6, ones), axis=1), axis=0)\n"
        "    output = tl.where(total == 4096.0, numerator, numerator / denominator)\n"),
}


@pytest.mark.parametrize("route", ROUNDING_ROUTES)
def test_a_kernel_that_chooses_by_the_gpus_rounding_is_graded_on_it(tmp_path, route):
    from tests.helpers import grade_text, solution_text

    text = solution_text("softmax")
    line = "    output = numerator / denominator\n"
    assert text.count(line) == 1
    result = grade_text(tmp_path, "softmax", text.replace(line, ROUNDING_ROUTES[route]),
                        ["triton"])
    (part,) = result.parts
    assert part.status == "failed" and part.passed < part.graded, (route, part)


def test_float_remainder_narrow_conversions_and_ftz_functions_are_the_gpus(gpu_like):
    # as the PTX Triton writes for sm_90 computes them: % rounds its quotient (div.rn,
    # cvt.rzi, fma.rn; the dividend where the divisor is infinite); int16 saturates and int8
    # is int16's low byte (cvt.rzi.s16.f32); exp2, sqrt and rsqrt flush subnormals (.ftz)
    import math

    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def remainder_kernel(out_ptr, x_ptr, y_ptr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(out_ptr + i, tl.load(x_ptr + i) % tl.load(y_ptr + i))

    x = torch.tensor([1e10, 7.5, -7.5, 5.0, 1.0, 0.0, 0.0, 0.0])
    y = torch.tensor([3.0, 2.0, 2.0, math.inf, 0.0, 1.0, 1.0, 1.0])
    out = torch.empty(8)
    remainder_kernel[(1,)](out, x, y, BLOCK=8)
    assert out[:4].tolist() == [256.0, 1.5, -1.5, 5.0] and math.isnan(out[4]), out

    @triton.jit
    def narrow_kernel(i16_ptr, i8_ptr, u16_ptr, u8_ptr, x_ptr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + i)
        tl.store(i16_ptr + i, v.to(tl.int16))
        tl.store(i8_ptr + i, v.to(tl.int8))
        tl.store(u16_ptr + i, v.to(tl.uint16).to(tl.int32))
        tl.store(u8_ptr + i, v.to(tl.uint8).to(tl.int32))

    v = torch.tensor([70000.0, -70000.0, 1e5, 200.0, -3.7, math.nan, 5.9, -1e9])
    i16, i8 = torch.empty(8, dtype=torch.int16), torch.empty(8, dtype=torch.int8)
    u16, u8 = torch.empty(8, dtype=torch.int32), torch.empty(8, dtype=torch.int32)
    narrow_kernel[(1,)](i16, i8, u16, u8, v, BLOCK=8)
    assert i16.tolist() == [32767, -32768, 32767, 200, -3, 0, 5, -32768], i16
    assert i8.tolist() == [-1, 0, -1, -56, -3, 0, 5, 0], i8
    assert u16.tolist() == [65535, 0, 65535, 200, 0, 0, 5, 0], u16
    assert u8.tolist() == [255, 0, 255, 200, 0, 0, 5, 0], u8

    @triton.jit
    def flushing_kernel(exp2_ptr, sqrt_ptr, rsqrt_ptr, x_ptr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + i)
        tl.store(exp2_ptr + i, tl.exp2(v))
        tl.store(sqrt_ptr + i, tl.sqrt(tl.abs(v)))
        tl.store(rsqrt_ptr + i, tl.rsqrt(tl.abs(v)))

    v = torch.tensor([-130.0, -100.0, 1e-40, 4.0])
    exp2, sqrt, rsqrt = (torch.empty(4) for _ in range(3))
    flushing_kernel[(1,)](exp2, sqrt, rsqrt, v, BLOCK=4)
    assert exp2[0] == 0.0 and exp2[1] == 2.0 ** -100 and exp2[2] == 1.0, exp2
    assert sqrt[2] == 0.0 and sqrt[3] == 2.0 and rsqrt[2] == math.inf, (sqrt, rsqrt)


_REDUCTIONS = """
import triton
import triton.language as tl


@triton.jit
def _minus(a, b):
    return a - b


@triton.jit
def _plus(a, b):
    return a + b


@triton.jit
def _first(a, b):
    return a


@triton.jit
def first_kernel(out_ptr, x_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.reduce(tl.load(x_ptr + tl.arange(0, BLOCK)), 0, _first))


@triton.jit
def scan_kernel(out_ptr, x_ptr, MINUS: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i)
    if MINUS:
        tl.store(out_ptr + i, tl.associative_scan(x, 0, _minus))
    else:
        tl.store(out_ptr + i, tl.associative_scan(x, 0, _plus))


@triton.jit
def reduce_kernel(out_ptr, x_ptr, MINUS: tl.constexpr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if MINUS:
        tl.store(out_ptr, tl.reduce(x, 0, _minus))
    else:
        tl.store(out_ptr, tl.reduce(x, 0, _plus))
"""


def test_a_reduction_whose_result_depends_on_the_order_is_refused(gpu_like, tmp_path):
    # the GPU combines a block in a tree: a - b gives 2 - n left to right and 0 there
    import importlib.util

    import torch

    from learning.grader.gpu_arithmetic import OrderDependentReduction

    path = tmp_path / "reductions_of_mine.py"
    path.write_text(_REDUCTIONS, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("reductions_of_mine", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = torch.zeros(1, dtype=torch.int32)
    ones = torch.ones(8, dtype=torch.int32)
    module.reduce_kernel[(1,)](out, ones, MINUS=False, BLOCK=8)
    assert out.item() == 8
    with pytest.raises(Exception, match="left to right and 0 combining it in pairs") as caught:
        module.reduce_kernel[(1,)](out, ones, MINUS=True, BLOCK=8)
    cause = caught.value
    while cause is not None and not isinstance(cause, OrderDependentReduction):
        cause = cause.__cause__
    assert cause is not None, caught.value
    floats = torch.rand(64) * 1000
    sums = torch.zeros(1)
    module.reduce_kernel[(1,)](sums, floats, MINUS=False, BLOCK=64)  # rounding apart, one sum
    assert torch.allclose(sums, floats.sum().reshape(1), rtol=1e-5)
    # associative but not commutative: the GPU's lanes do not meet in the block's order
    with pytest.raises(Exception, match="combining it in pairs from its last element"):
        module.first_kernel[(1,)](out, torch.arange(8, dtype=torch.int32), BLOCK=8)
    # a scan: the GPU combines each element with the one 1, 2, 4, ... places before it
    scanned = torch.zeros(8, dtype=torch.int32)
    module.scan_kernel[(1,)](scanned, ones, MINUS=False, BLOCK=8)
    assert scanned.tolist() == list(range(1, 9))
    with pytest.raises(Exception, match="tl.associative_scan's combine function gives"):
        module.scan_kernel[(1,)](scanned, ones, MINUS=True, BLOCK=8)


def test_a_shared_factor_leaves_a_select_and_fusion_follows_the_launchs_option(gpu_like):
    # tl.where(c, x*y, x*z) + w: the compiler selects y or z, then fuses x * that into the add
    # (selp, fma.rn in the PTX for sm_90); enable_fp_fusion=False fuses nothing
    import numpy as np
    import torch
    import triton
    import triton.language as tl

    from learning.grader.gpu_arithmetic import fused_multiply_add

    @triton.jit
    def select_kernel(out_ptr, plain_ptr, x_ptr, y_ptr, z_ptr, w_ptr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        x, y = tl.load(x_ptr + i), tl.load(y_ptr + i)
        z, w = tl.load(z_ptr + i), tl.load(w_ptr + i)
        tl.store(out_ptr + i, tl.where(i % 2 == 0, x * y, x * z) + w)
        tl.store(plain_ptr + i, x * y + w)

    g = torch.Generator().manual_seed(1)
    x, y, z, w = (torch.randn(64, generator=g) for _ in range(4))
    out, plain = torch.empty(64), torch.empty(64)
    select_kernel[(1,)](out, plain, x, y, z, w, BLOCK=64)
    even = np.arange(64) % 2 == 0
    X, Y, Z, W = (t.numpy() for t in (x, y, z, w))
    want = np.where(even, fused_multiply_add(X, Y, W, np.float32),
                    fused_multiply_add(X, Z, W, np.float32))
    assert np.array_equal(out.numpy(), want)
    assert np.array_equal(plain.numpy(), fused_multiply_add(X, Y, W, np.float32))
    select_kernel[(1,)](out, plain, x, y, z, w, BLOCK=64, enable_fp_fusion=False)
    assert np.array_equal(plain.numpy(), (X * Y).astype(np.float32) + W)
    assert not np.array_equal(plain.numpy(), fused_multiply_add(X, Y, W, np.float32))


def test_arithmetic_on_bfloat16_is_counted_and_moving_its_bits_is_not(gpu_like):
    import torch
    import triton
    import triton.language as tl

    from learning.grader.gpu_arithmetic import bfloat16_operations

    @triton.jit
    def bfloat16_kernel(out_ptr, x_ptr, OP: tl.constexpr):
        offsets = tl.arange(0, 16)
        x = tl.load(x_ptr + offsets)  # bfloat16
        if OP == "add":
            y = (x + x).to(tl.float32)
        elif OP == "sum":
            y = tl.zeros((16,), tl.float32) + tl.sum(x, axis=0).to(tl.float32)
        elif OP == "dot":
            square = tl.reshape(x, (4, 4))
            y = tl.reshape(tl.dot(square, square, out_dtype=tl.float32), (16,))
        elif OP == "where":  # bits moved and converted: the interpreter is right
            y = tl.where(offsets < 8, x, x.to(tl.float32).to(tl.bfloat16)).to(tl.float32)
        else:  # the arithmetic in float32
            y = x.to(tl.float32) * 2.0
        tl.store(out_ptr + offsets, y)

    x = (torch.arange(16, dtype=torch.float32) - 8).to(torch.bfloat16)
    out = torch.empty(16, dtype=torch.float32)
    for op, counted in (("add", True), ("sum", True), ("dot", True), ("where", False),
                        ("float32", False)):
        before = bfloat16_operations()
        bfloat16_kernel[(1,)](out, x, OP=op)
        assert (bfloat16_operations() > before) is counted, op
    # what the count warns of: the interpreter's bfloat16 arithmetic is wrong
    bfloat16_kernel[(1,)](out, x, OP="add")
    assert not torch.equal(out, 2 * x.float())
    bfloat16_kernel[(1,)](out, x, OP="float32")
    assert torch.equal(out, 2 * x.float())
