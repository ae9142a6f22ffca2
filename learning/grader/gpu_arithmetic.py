"""Where Triton's interpreter computes other numbers than the GPU, made the GPU's.

- **A product that feeds an add or a subtraction.** The GPU compiler fuses them into one
  ``fma``, which rounds once; the interpreter rounds the product, then the sum. Measured on an
  H100 (``lab/probes/rounding_probe.py``, ``lab/results/rounding.txt``): every such pair is
  fused, in float32, float16 and bfloat16, a product stored as well or made before a loop
  included; of two products added or subtracted, the right one is fused, except a product
  taken from itself (``x*y - x*y``: the rounding error of ``x*y``).
- **tl.dot on float32 blocks.** By default (``input_precision="tf32"``) the tensor cores keep
  TensorFloat-32's 10 mantissa bits of each input, cut toward zero (measured as above);
  ``"tf32x3"`` splits each input into a TensorFloat-32 part and the rest, each rounded to
  nearest (PTX ``cvt.rna.tf32.f32``), and adds three products. The interpreter multiplies the
  float32 values as they are.
- **Float remainder, conversions to 8- and 16-bit integers, ``.ftz`` functions.** Read from
  the PTX Triton writes for sm_90: ``%`` on floats rounds its quotient, a float converted to
  int16 saturates (to int8: saturated to 16 bits, then cut), tl.exp2, tl.sqrt and tl.rsqrt
  flush subnormals to zero (``sanitizer`` does the conversions).
- **tl.reduce and tl.associative_scan with a combine function of the kernel's own** are
  refused where the result depends on the order of combining, which on the GPU is a tree (a
  scan: steps 1, 2, 4, ... lanes apart), not the interpreter's left to right.
- A launch with ``enable_fp_fusion=False`` (or TRITON_DEFAULT_FP_FUSION=0) fuses nothing, as
  the compiler then does not; ``tl.where(c, a*b, a*c)`` keeps its shared factor out, as the
  compiler does, so the product is fused into an add that follows.

A kernel could otherwise choose by such a difference and store one answer interpreted and
another on the GPU. The grader's interpreter computes these as the GPU does; other
differences (the order a tensor core or tl.sum adds in, the last bits of an approximate
exp2 or division) are not modelled. bfloat16, which the interpreter mishandles anyway, and
float64 where this Triton has no exact ``fma`` of its own keep the interpreter's arithmetic.

**bfloat16 arithmetic is counted, not mended.** The interpreter keeps a bfloat16 value as its
16 raw bits in a NumPy ``uint16`` array, and its arithmetic (``+``, ``*``, ``-x``, ``tl.exp``,
``tl.dot``, ``tl.sum``, ``tl.max``, comparisons) works on those bits as whole numbers;
conversions (``.to``), loads, stores and ``tl.where`` move the bits and are right. Each
operation on a bfloat16 operand is counted (``bfloat16_operations``), so that the grader can
say a wrong output came from the interpreter's arithmetic, not name a mistake from it.
Installed in the grader's own processes only (``install_interpreter``), before the learner's
module is imported.
"""

from __future__ import annotations

import threading

#: The attribute a product's handle carries: (the multiplied handles, or None once unknown)
_MADE_OF = "_course_product_of"
#: Whether the running launch fuses (its enable_fp_fusion, else TRITON_DEFAULT_FP_FUSION)
_FUSION = threading.local()


def _fusion_wanted(requested) -> bool:
    """As Triton's compiler decides: TRITON_FORCE_DISABLE_FP_FUSION turns fusion off; else the
    launch's enable_fp_fusion where given; else TRITON_DEFAULT_FP_FUSION, on unless set off."""
    import os

    def flag(name, default):
        value = os.environ.get(name)
        return default if value is None else value.strip().lower() in ("1", "true", "on", "yes")

    if flag("TRITON_FORCE_DISABLE_FP_FUSION", False):
        return False
    if requested is not None:
        return bool(requested)
    return flag("TRITON_DEFAULT_FP_FUSION", True)


def _fusing(original):
    """``GridExecutor.__call__``: the launch's own enable_fp_fusion (which the interpreter
    drops) decides whether its products are fused."""
    def call(self, *args, **kwargs):
        before = getattr(_FUSION, "on", True)
        _FUSION.on = _fusion_wanted(kwargs.get("enable_fp_fusion"))
        try:
            return original(self, *args, **kwargs)
        finally:
            _FUSION.on = before

    return call


def fused_multiply_add(a, b, c, dtype):
    """``a * b + c`` rounded once to ``dtype`` (numpy's float16 or float32), elementwise.

    The product of two float32 (or float16) values is exact in float64; the sum is rounded to
    float64 and its error kept (Knuth's two-sum), and where that float64 sum sits exactly
    halfway between two values of ``dtype`` the error says which way the exact sum lies."""
    import numpy as np

    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        product = a * b
        total = product + c
        back = total - product
        error = (product - (total - back)) + (c - back)
        rounded = total.astype(dtype)
        below = np.nextafter(total, -np.inf).astype(dtype)
        above = np.nextafter(total, np.inf).astype(dtype)
        halfway = (below != above) & np.isfinite(total) & np.isfinite(error)
        rounded = np.where(halfway & (error > 0), above, rounded)
        rounded = np.where(halfway & (error < 0), below, rounded)
    return np.asarray(rounded, dtype=dtype)


def _fused_kind(handle) -> str:
    """'f16', 'f32' or 'f64' where a product of this handle's type is fused here, else ''."""
    import numpy as np

    data = getattr(handle, "data", None)
    if not isinstance(data, np.ndarray):
        return ""
    name = getattr(getattr(handle, "dtype", None), "name", "")
    if name == "fp16" and data.dtype == np.float16:
        return "f16"
    if name == "fp32" and data.dtype == np.float32:
        return "f32"
    if name == "fp64" and data.dtype == np.float64 and _fma64() is not None:
        return "f64"
    return ""


def _fma64():
    try:
        from triton.runtime.interpreter import _interpreter
    except ImportError:
        return None
    return getattr(_interpreter, "fma_fp64", None)


def _product_of(handle):
    made = getattr(handle, _MADE_OF, None)
    return made if made is not None and _fused_kind(handle) else None


def _fma(handle_class, like, a, b, c, negate_product=False):
    import numpy as np

    kind = _fused_kind(like)
    x, y, z = np.broadcast_arrays(a.data, b.data, c.data)
    if negate_product:
        x = -x
    if kind == "f64":
        data = _fma64()(*(np.ascontiguousarray(v, dtype=np.float64) for v in (x, y, z)))
    else:
        data = fused_multiply_add(x, y, z, like.data.dtype)
    return handle_class(np.asarray(data, dtype=like.data.dtype), like.dtype)


def _contracting(builder, handle_class) -> None:
    """Products fused into the adds and subtractions they feed, as the GPU compiler does."""
    mul, add, sub = (getattr(builder, name) for name in
                     ("create_fmul", "create_fadd", "create_fsub"))
    # (Triton before 3.6 has no fneg: -x is 0 - x there, a subtraction like any other)
    neg = getattr(builder, "create_fneg", None) or (
        lambda self, value: handle_class(-value.data, value.dtype))

    def create_fmul(self, lhs, rhs):
        out = mul(self, lhs, rhs)
        if getattr(_FUSION, "on", True) and _fused_kind(out):
            setattr(out, _MADE_OF, (lhs, rhs))
        return out

    def create_fneg(self, value):
        out = neg(self, value)
        made = _product_of(value)
        if made is not None:  # -(x*y) + z is fma(-x, y, z)
            setattr(out, _MADE_OF, (neg(self, made[0]), made[1]))
        return out

    def create_fadd(self, lhs, rhs):
        right, left = _product_of(rhs), _product_of(lhs)
        if right is not None and _fused_kind(lhs):
            return _fma(handle_class, rhs, *right, lhs)
        if left is not None and _fused_kind(rhs):
            return _fma(handle_class, lhs, *left, rhs)
        return add(self, lhs, rhs)

    def create_fsub(self, lhs, rhs):
        right, left = _product_of(rhs), _product_of(lhs)
        same = right is not None and left is not None and \
            right[0] is left[0] and right[1] is left[1]
        if right is not None and not same and _fused_kind(lhs):
            return _fma(handle_class, rhs, *right, lhs, negate_product=True)
        if left is not None and _fused_kind(rhs):
            return _fma(handle_class, lhs, *left, neg(self, rhs))
        return sub(self, lhs, rhs)

    if hasattr(builder, "create_select"):
        select = builder.create_select

        def create_select(self, condition, lhs, rhs):
            """tl.where(c, a*b, a*c): the compiler takes the shared factor out of the select,
            a * where(c, b, c), and that product is fused into an add that follows
            (``selp`` then ``fma.rn`` in the PTX for sm_90)."""
            out = select(self, condition, lhs, rhs)
            left, right = _product_of(lhs), _product_of(rhs)
            if left is None or right is None or not _fused_kind(out):
                return out
            for i, j in ((0, 0), (1, 1), (0, 1), (1, 0)):
                if left[i] is right[j]:
                    try:
                        chosen = select(self, condition, left[1 - i], right[1 - j])
                    except Exception:  # noqa: BLE001 - factors the select cannot take
                        return out
                    setattr(out, _MADE_OF, (left[i], chosen))
                    break
            return out

        builder.create_select = create_select
    builder.create_fmul = create_fmul
    if hasattr(builder, "create_fneg"):
        builder.create_fneg = create_fneg
    builder.create_fadd = create_fadd
    builder.create_fsub = create_fsub
    # a product reshaped, broadcast or made a block of one value is still the same product on
    # the GPU (the same registers): its factors go along
    for name in ("create_splat", "create_broadcast", "create_expand_dims", "create_reshape"):
        if hasattr(builder, name):
            setattr(builder, name, _carrying(getattr(builder, name)))


def _carrying(original):
    def shaped(self, *args):
        out = original(self, *args)
        # the value is the one argument that is a handle (the others: a type, a shape, an axis)
        index = next((i for i, arg in enumerate(args) if hasattr(arg, "data")), None)
        made = None if index is None else _product_of(args[index])
        if made is not None and _fused_kind(out):
            factors = []
            try:
                for factor in made:
                    moved = list(args)
                    moved[index] = factor
                    factors.append(original(self, *moved))
            except Exception:  # noqa: BLE001 - factors that do not take the shape: not fused
                return out
            setattr(out, _MADE_OF, tuple(factors))
        return out

    return shaped


def _tf32_cut(data):
    import numpy as np

    return (np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
            & np.uint32(0xFFFFE000)).view(np.float32)


def _tf32_nearest(data):
    """float32 values rounded to TensorFloat-32, ties away from zero (``cvt.rna.tf32.f32``)."""
    import numpy as np

    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    with np.errstate(over="ignore"):
        rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(finite, rounded, bits).view(np.float32)


def _tensor_float(original, handle_class):
    """tl.dot on float32 blocks with TensorFloat-32 inputs, as the GPU's tensor cores take
    them; other dots are the interpreter's."""
    import numpy as np

    def create_dot(self, a, b, d, input_precision=None, *rest, **kwargs):
        precision = str(getattr(input_precision, "name", input_precision)).rpartition(".")[2]
        floats = all(getattr(getattr(h, "dtype", None), "name", "") == "fp32" and
                     getattr(getattr(h, "data", None), "dtype", None) == np.float32
                     for h in (a, b))
        if not floats or precision.upper() not in ("TF32", "TF32X3"):
            return original(self, a, b, d, input_precision, *rest, **kwargs)
        if precision.upper() == "TF32":
            a, b = (handle_class(_tf32_cut(h.data), h.dtype) for h in (a, b))
            return original(self, a, b, d, input_precision, *rest, **kwargs)
        with np.errstate(all="ignore"):
            big = [_tf32_nearest(h.data) for h in (a, b)]
            small = [_tf32_nearest(h.data - part) for h, part in zip((a, b), big)]
        out = d
        for left, right in ((small[0], big[1]), (big[0], small[1]), (big[0], big[1])):
            out = original(self, handle_class(left, a.dtype), handle_class(right, b.dtype), out,
                           input_precision, *rest, **kwargs)
        return out

    return create_dot


def _remainder(original, handle_class):
    """Float ``%`` as the GPU compiler lowers it (PTX for sm_90: ``div.rn``, ``cvt.rzi``,
    ``fma.rn``, and the dividend itself where the divisor is infinite): x - trunc(x / y) * y
    with the quotient rounded to the type first, where NumPy's fmod is exact (1e10 % 3.0 is 1
    there and 256 on the GPU)."""
    import numpy as np

    def create_frem(self, lhs, rhs):
        kind = _fused_kind(lhs)
        if kind not in ("f32", "f64") or _fused_kind(rhs) != kind:
            return original(self, lhs, rhs)
        dtype = lhs.data.dtype
        x, y = np.broadcast_arrays(lhs.data, rhs.data)
        with np.errstate(all="ignore"):
            quotient = np.trunc(np.divide(x, y, dtype=dtype))
            if kind == "f64":
                rest = _fma64()(*(np.ascontiguousarray(v, dtype=np.float64)
                                  for v in (-quotient, y, x)))
            else:
                rest = fused_multiply_add(-quotient, y, x, dtype)
            rest = np.where(np.isinf(y), x, rest)
        return handle_class(np.asarray(rest, dtype=dtype), lhs.dtype)

    return create_frem


def _flushed(data):
    """float32 values with subnormals made zero of their sign, as a ``.ftz`` instruction
    reads and writes them."""
    import numpy as np

    tiny = np.finfo(np.float32).tiny
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(data) < tiny, np.copysign(np.float32(0), data),
                        data).astype(np.float32)


def _flushing(original, handle_class):
    """A float32 function the GPU computes with a ``.ftz`` instruction (``ex2.approx.ftz``
    for tl.exp2, ``sqrt.approx.ftz`` for tl.sqrt, ``rsqrt.approx.ftz`` for tl.rsqrt, in the
    PTX for sm_90): a subnormal input is read as zero and a subnormal result written as zero
    (tl.exp2(-130.0) is 0 there; tl.sqrt(1e-40) is 0, not 1e-20)."""
    import numpy as np

    def op(self, arg):
        if getattr(getattr(arg, "data", None), "dtype", None) != np.float32:
            return original(self, arg)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = original(self, handle_class(_flushed(arg.data), arg.dtype))
        return handle_class(_flushed(out.data), out.dtype)

    return op


class OrderDependentReduction(ArithmeticError):
    """A tl.reduce whose combine function gives another result in another order."""


def _in_pairs(reduce_ops, inputs, backwards=False):
    """The reduction of ``inputs`` (tl tensors) along the op's axis combined in pairs (0 with
    1, 2 with 3, then those results likewise), not left to right; ``backwards``: the last
    element first (a GPU's lanes meet in an order of their own, not the block's)."""
    import numpy as np
    import triton.language as tl

    axis = reduce_ops.axis
    datas = [x.handle.data for x in inputs]
    if axis is None:
        datas, axis = [d.reshape(-1) for d in datas], 0
    order = range(datas[0].shape[axis])
    level = [tuple(reduce_ops.to_tensor(np.take(d, i, axis=axis), x.dtype)
                   for d, x in zip(datas, inputs)) for i in (reversed(order) if backwards
                                                             else order)]
    while len(level) > 1:
        paired = []
        for i in range(0, len(level) - 1, 2):
            out = reduce_ops.combine_fn.fn(*level[i], *level[i + 1])
            paired.append(tuple(out) if isinstance(out, tuple) else (out,))
        level = paired + ([level[-1]] if len(level) % 2 else [])
    return [t.handle.data if isinstance(t, tl.core.tensor) else np.asarray(t)
            for t in level[0]]


def _ordered(original):
    """``ReduceOps.generic_reduce`` (tl.reduce with a combine function of the kernel's own),
    refused where combining in pairs, or in pairs from the last element, gives another result
    than left to right: the GPU combines a block in a tree of its own (each thread's elements,
    then across lanes and warps), so ``a - b`` gives 2 - n interpreted and 0 compiled, and a
    combine that keeps the first of two equal maxima keeps another one there. Floats may differ
    by their rounding."""

    def generic_reduce(self, inputs):
        result = original(self, inputs)
        made_all = result if isinstance(result, (list, tuple)) else [result]  # (3.3: one)
        for backwards in (False, True):
            try:
                other = _in_pairs(self, inputs, backwards)
            except Exception:  # noqa: BLE001 - a combine the pairs cannot take: the fold stands
                return result
            _same(made_all, other, "tl.reduce", "combining the block left to right",
                  "combining it " + ("in pairs from its last element" if backwards
                                     else "in pairs"))
        return result

    return generic_reduce


def _same(made_all, other, what: str, ours: str, theirs: str) -> None:
    """Raise OrderDependentReduction where ``other`` (arrays) differs from ``made_all`` (the
    interpreter's tensors): exactly for integers, past rounding for floats."""
    import numpy as np

    for made, paired in zip(made_all, other):
        got = np.asarray(made.handle.data).reshape(-1)
        want = np.asarray(paired).reshape(-1)
        if got.shape != want.shape:
            continue
        with np.errstate(all="ignore"):
            same = np.isclose(got, want, rtol=1e-3, atol=1e-6, equal_nan=True) \
                if got.dtype.kind == "f" else got == want
        if not np.all(same):
            where = int(np.argmin(same))
            raise OrderDependentReduction(
                f"{what}'s combine function gives {got[where].item()} {ours} and "
                f"{want[where].item()} {theirs}: the GPU combines a block in an order of its "
                "own, so a combine function must give one result in any order (associative "
                "and commutative, as + and max are)")


def _stepped_scan(scan_ops, inputs):
    """The inclusive scan of ``inputs`` along the op's axis as a GPU's lanes make it: each
    element combined with the one 1, then 2, 4, ... places before it (``shfl.sync.up``)."""
    import numpy as np
    import triton.language as tl

    axis = scan_ops.axis
    values = [np.moveaxis(np.asarray(x.handle.data), axis, 0) for x in inputs]
    n, step = values[0].shape[0], 1
    while step < n:
        # whole blocks (a block's size is a power of two): the first ``step`` lanes combine
        # wrapped-round values and keep what they had
        earlier = tuple(scan_ops.to_tensor(np.ascontiguousarray(np.roll(v, step, axis=0)),
                                           x.dtype) for v, x in zip(values, inputs))
        later = tuple(scan_ops.to_tensor(np.ascontiguousarray(v), x.dtype)
                      for v, x in zip(values, inputs))
        out = scan_ops.combine_fn.fn(*earlier, *later)
        out = tuple(out) if isinstance(out, tuple) else (out,)
        values = [np.concatenate([v[:step], np.asarray(
            o.handle.data if isinstance(o, tl.core.tensor) else o).reshape(v.shape)[step:]
            .astype(v.dtype)]) for v, o in zip(values, out)]
        step *= 2
    return [np.moveaxis(v, 0, axis) for v in values]


def _ordered_scan(original):
    """``ScanOps.generic_scan`` (tl.associative_scan with a combine of the kernel's own),
    refused where the GPU's way of scanning (each element with the one 1, 2, 4, ... places
    before it) gives another result than the interpreter's left to right."""

    def generic_scan(self, inputs):
        result = original(self, inputs)
        try:
            other = _stepped_scan(self, inputs)
        except Exception:  # noqa: BLE001 - a combine the steps cannot take: the scan stands
            return result
        _same(result, other, "tl.associative_scan", "scanning left to right",
              "scanning as a GPU's lanes do, 1, 2, 4, ... places apart")
        return result

    return generic_scan


#: Operations this process's interpreter did on bfloat16 operands (see the module's text)
_BFLOAT16 = {"operations": 0}


def bfloat16_operations() -> int:
    """How many arithmetic operations on bfloat16 values the interpreter has done so far."""
    return _BFLOAT16["operations"]


def _is_bfloat16(value) -> bool:
    """Whether ``value`` (an interpreter handle, or a tensor holding one) is bfloat16."""
    handle = getattr(value, "handle", value)
    return getattr(getattr(handle, "dtype", None), "name", "") == "bf16"


def _counting_bfloat16(original, moves_bits=()):
    """``original`` (a builder method or a reduction's ``apply``), counting the calls given a
    bfloat16 operand; a call whose NumPy function is in ``moves_bits`` (``np.where``) only
    moves the bits and is not counted."""

    def counted(self, *args, **kwargs):
        if not any(op is fn for op in args for fn in moves_bits):
            operands = [v for a in args for v in (a if isinstance(a, tuple) else (a,))]
            if any(_is_bfloat16(v) for v in operands):
                _BFLOAT16["operations"] += 1
        return original(self, *args, **kwargs)

    return counted


def _count_bfloat16(builder, interpreter) -> None:
    """Count the operations whose bfloat16 operands the interpreter computes on as bits."""
    import numpy as np

    for name in ("binary_op", "unary_op", "create_fma", "create_dot", "create_rsqrt",
                 "create_erf"):
        if hasattr(builder, name):
            setattr(builder, name, _counting_bfloat16(getattr(builder, name)))
    if hasattr(builder, "ternary_op"):  # tl.where's select moves bits; a clamp computes
        builder.ternary_op = _counting_bfloat16(builder.ternary_op, moves_bits=(np.where,))
    for owner_name in ("ReduceOps", "ScanOps"):  # tl.sum, tl.max, tl.cumsum: NumPy on bits
        owner = getattr(interpreter, owner_name, None)
        if owner is not None and hasattr(owner, "apply"):
            owner.apply = _counting_bfloat16(owner.apply)


def install(builder, handle_class, interpreter=None) -> None:
    """Make the interpreter builder's (a class) arithmetic the GPU's, as described above."""
    if all(hasattr(builder, name) for name in ("create_fmul", "create_fadd", "create_fsub")):
        _contracting(builder, handle_class)
    if hasattr(builder, "create_dot"):
        builder.create_dot = _tensor_float(builder.create_dot, handle_class)
    if hasattr(builder, "create_frem"):
        builder.create_frem = _remainder(builder.create_frem, handle_class)
    for name in ("create_exp2", "create_sqrt", "create_rsqrt"):
        if hasattr(builder, name):
            setattr(builder, name, _flushing(getattr(builder, name), handle_class))
    reduce_ops = getattr(interpreter, "ReduceOps", None)
    if reduce_ops is not None and hasattr(reduce_ops, "generic_reduce"):
        reduce_ops.generic_reduce = _ordered(reduce_ops.generic_reduce)
    scan_ops = getattr(interpreter, "ScanOps", None)
    if scan_ops is not None and hasattr(scan_ops, "generic_scan"):
        scan_ops.generic_scan = _ordered_scan(scan_ops.generic_scan)
    executor = getattr(interpreter, "GridExecutor", None)
    if executor is not None and "__call__" in vars(executor):
        executor.__call__ = _fusing(executor.__call__)
    _count_bfloat16(builder, interpreter)


#: What ``install_interpreter`` replaced, to put back: (owner, name, what it held or _NONE)
_REPLACED: list = []
_NONE = object()
_REPLACES = {
    "InterpreterBuilder": ("create_fmul", "create_fadd", "create_fsub", "create_fneg",
                           "create_select", "create_splat", "create_broadcast",
                           "create_expand_dims", "create_reshape", "create_dot",
                           "create_frem", "create_exp2", "create_sqrt", "create_rsqrt",
                           "binary_op", "unary_op", "ternary_op", "create_fma", "create_erf"),
    "ReduceOps": ("generic_reduce", "apply"), "ScanOps": ("generic_scan", "apply"),
    "GridExecutor": ("__call__",),
}


def install_interpreter() -> bool:
    """Make Triton's interpreter compute as the GPU does (once per process: the grader's
    worker and its recordings, before the learner's module is imported); False where this
    Triton has no interpreter to change."""
    if _REPLACED:
        return True
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle_class = getattr(interpreter, "TensorHandle", None)
    if builder is None or handle_class is None:
        return False
    for owner_name, names in _REPLACES.items():
        owner = getattr(interpreter, owner_name, None)
        if owner is not None:
            _REPLACED.extend((owner, name, vars(owner).get(name, _NONE)) for name in names)
    install(builder, handle_class, interpreter)
    return True


def uninstall_interpreter() -> None:
    """Put back what ``install_interpreter`` replaced (the tests' own kernels, afterwards,
    compute as Triton's interpreter does)."""
    while _REPLACED:
        owner, name, held = _REPLACED.pop()
        if held is _NONE:
            if name in vars(owner):
                delattr(owner, name)
        else:
            setattr(owner, name, held)
