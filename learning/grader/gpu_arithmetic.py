"""Two places where Triton's interpreter computes other numbers than the GPU, made the GPU's.

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

A kernel could otherwise choose by such a difference and store one answer interpreted and
another on the GPU. The grader's interpreter computes these as the GPU does; other
differences (the order a tensor core adds in) are not modelled. bfloat16, which the
interpreter mishandles anyway, and float64 where this Triton has no exact ``fma`` of its own,
keep the interpreter's arithmetic.
"""

from __future__ import annotations

#: The attribute a product's handle carries: (the multiplied handles, or None once unknown)
_MADE_OF = "_course_product_of"


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
    mul, add, sub, neg = (getattr(builder, name) for name in
                          ("create_fmul", "create_fadd", "create_fsub", "create_fneg"))

    def create_fmul(self, lhs, rhs):
        out = mul(self, lhs, rhs)
        if _fused_kind(out):
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

    builder.create_fmul = create_fmul
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
            for factor in made:
                moved = list(args)
                moved[index] = factor
                factors.append(original(self, *moved))
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


def install(builder, handle_class) -> None:
    """Make the interpreter builder's (a class) arithmetic the GPU's, as described above."""
    if all(hasattr(builder, name) for name in
           ("create_fmul", "create_fadd", "create_fsub", "create_fneg")):
        _contracting(builder, handle_class)
    if hasattr(builder, "create_dot"):
        builder.create_dot = _tensor_float(builder.create_dot, handle_class)
