"""Bounds checking for Triton's interpreter: an out-of-bounds load, store or atomic raises,
before it touches memory, naming the kernel line that did it.

The interpreter turns every ``tl.load``/``tl.store`` into NumPy reads and writes at raw
addresses, without any check: a wrong row offset reads garbage or corrupts the heap and kills
the process. This module wraps the two interpreter entry points that every load and store goes
through, and the two the atomics write through (tl.atomic_add and its kin, tl.atomic_cas), and
allows only addresses inside the tensor the pointer was made from: from its first element to its
last (``_extent``), not the rest of the storage it may be a view of.

Which tensor that is travels with the pointer: each tensor argument's pointer gets a copy of its
pointer type marked with the tensor's extent (``origin``), and the interpreter hands a pointer's
type on through every splat, broadcast and offset. Without the mark, a lane past the end of x that
happened to land in y (allocated right after it, or not, as earlier cases left the heap) would be
allowed, and the count of lanes outside would change from run to run. A pointer that lost its mark
(made from an integer) is checked against every tensor of the launch, and its message says so.

It relies on interpreter internals (``GridExecutor._init_args_hst``, ``_implicit_cvt`` and
``InterpreterBuilder.create_masked_load/store``), checked at install time; the test suite fails
loudly when a Triton release changes them.
"""

from __future__ import annotations

import threading

_state = threading.local()
_installed = False
# Told of every launch and memory access before it is checked (learning.grader.memory_map records
# them this way): observer.launch(executor, args, names) and observer.access(kind, builder,
# ptrs, mask). Empty in a normal check, where the hooks cost one test of this list.
observers: list = []


class OutOfBoundsAccess(IndexError):
    """A kernel's load or store addressed memory outside the tensor its pointer was made from
    (outside every tensor argument of its launch, for a pointer that lost its mark)."""


#: The words that end the message of an access given no mask whose lanes run from inside its
#: tensor on past the end (learning.grader.compare reads them): a block longer than the data it
#: covers, or one that starts too far along. With MORE_LANES after them, the block has more
#: lanes than the tensor has elements, so no offsets could have kept it inside: the mask is
#: missing.
RUNS_PAST_THE_END = "has no mask, and its lanes run on from inside the tensor past its end"
MORE_LANES = ", more lanes than the tensor has elements"


# The attribute of a pointer type that names the tensor it was made from: (start, end of its
# extent (``_extent``), the tensor's first element), as ``origin`` returns it.
ORIGIN = "_grader_origin"


def origin(ptrs) -> tuple[int, int, int] | None:
    """The extent (start, end) and first element's address of the tensor argument ``ptrs``
    (a pointer block, as the interpreter holds it) was made from; None when unknown."""
    return getattr(getattr(ptrs, "dtype", None), ORIGIN, None)


def _extent(tensor) -> tuple[int, int]:
    """The bytes from a tensor's first element to the end of its last: what a kernel given the
    tensor may address. Not its storage: a view's storage may hold more, such as values put
    past the view for a kernel to fetch by offsets that no shape or stride passed says."""
    first = tensor.data_ptr()
    if tensor.numel() == 0:
        return first, first
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    return first, first + (last + 1) * tensor.element_size()


def _allowed_ranges() -> list[tuple[int, int]]:
    return getattr(_state, "ranges", None) or []


def _record_ranges(args, names=()) -> None:
    """Remember the launch's tensors and the kernel parameters they were passed as; None (no
    checking) when one of them cannot be measured, since a wrong "out of bounds" would be
    worse than an unchecked launch."""
    ranges = []
    _state.names = []
    _state.firsts = []
    unknown = False

    def visit(arg, name):
        nonlocal unknown
        if isinstance(arg, (tuple, list)):
            for item in arg:
                visit(item, name)
        elif hasattr(arg, "untyped_storage"):
            ranges.append(_extent(arg))
            _state.names.append(name)
            _state.firsts.append(arg.data_ptr())
        elif hasattr(arg, "base") and hasattr(arg.base, "untyped_storage"):  # descriptors
            visit(arg.base, name)
        elif hasattr(arg, "data_ptr"):  # a pointer without a size: a later Triton's stand-in
            unknown = True

    names = list(names) + [""] * len(args)
    for arg, name in zip(args, names):
        visit(arg, name)
    _state.ranges = None if unknown else ranges


def _check(kind: str, ptrs, mask, builder=None) -> None:
    import numpy as np

    if getattr(_state, "ranges", []) is None:
        return
    addresses = np.asarray(ptrs.data).astype(np.uint64, copy=False)
    active = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
    addresses = addresses[active]
    if addresses.size == 0:
        return
    element = ptrs.get_element_ty()
    size = max(1, getattr(element, "primitive_bitwidth", 8) // 8)
    made_from = origin(ptrs)
    ranges = [made_from[:2]] if made_from else _allowed_ranges()
    inside = np.zeros(addresses.shape, dtype=bool)
    for start, end in ranges:
        inside |= (addresses >= start) & (addresses + size <= end)
    if inside.all():
        return
    outside = addresses[~inside]
    unmasked = getattr(_state, "unmasked", False)
    if made_from:
        index = _argument_index(made_from)
        where = f"{_argument_name(index)}'s tensor" if index is not None else \
            "the tensor its pointer was made from"
        nearest = _describe(int(outside[0]), [index] if index is not None else None)
    else:
        where, nearest = "every tensor of the launch", _describe(int(outside[0]))
    if not unmasked:
        advice = "check the offsets and the mask"
    elif made_from and inside.any() and int(outside.min()) == made_from[1]:
        # Lanes inside, then the rest from the first byte past the end on: a block longer
        # than the data it covers, every lane of it active.
        elements = (made_from[1] - made_from[0]) // size
        advice = f"the {kind} {RUNS_PAST_THE_END}" + (
            MORE_LANES if addresses.size > elements else "")
    else:
        advice = f"the {kind} has no mask (every lane is active): check the offsets"
    raise OutOfBoundsAccess(
        f"out-of-bounds {kind}: {outside.size} of {addresses.size} active lanes of "
        f"{program_text(builder)}'s {kind} address memory outside {where} ({nearest}); "
        f"{advice}")


def program_text(builder) -> str:
    """'program 3', or 'program (1, 2)' in a grid of more than one dimension: the one whose
    access is being checked (the counts are of that one access, whatever ran before)."""
    try:
        grid, index = tuple(builder.grid_dim), tuple(builder.grid_idx)
    except (AttributeError, TypeError):
        return "one program"
    dims = 3
    while dims > 1 and grid[dims - 1] == 1:
        dims -= 1
    return f"program {index[0]}" if dims == 1 else f"program {index[:dims]}"


def _argument_index(made_from) -> int | None:
    ranges, firsts = _allowed_ranges(), getattr(_state, "firsts", [])
    found = [i for i, r in enumerate(ranges) if r == tuple(made_from[:2])]
    exact = [i for i in found if i < len(firsts) and firsts[i] == made_from[2]]
    return (exact or found or [None])[0]


def _argument_name(index: int) -> str:
    names = getattr(_state, "names", [])
    name = names[index] if index < len(names) else ""
    return name or f"tensor argument {index + 1}"


def argument_of(address: int) -> str:
    """Which tensor argument of the current launch holds ``address``: its name, or "a
    tensor argument" where none does."""
    for index, (start, end) in enumerate(_allowed_ranges()):
        if start <= address < end:
            return _argument_name(index)
    return "a tensor argument"


def _describe(address: int, only: list[int] | None = None) -> str:
    ranges = _allowed_ranges()
    if not ranges:
        return "the launch has no tensor arguments"
    distances = []
    names = getattr(_state, "names", [])
    for index, (start, end) in enumerate(ranges):
        if only is not None and index not in only:
            continue
        name = names[index] if index < len(names) else ""
        what = f"{name}, tensor argument {index + 1}" if name else \
            f"tensor argument {index + 1}"
        if address == end:
            distances.append((0, f"the nearest is the first byte past the end of {what}"))
        elif address > end:
            distances.append((address - end, f"the nearest is {address - end} bytes past the "
                                             f"end of {what}"))
        else:
            distances.append((start - address, f"the nearest is {start - address} bytes "
                                                f"before {what}"))
    return min(distances)[1]


def _mark_origin(converted, arg):
    """Give the pointer the interpreter made for tensor ``arg`` a pointer type of its own, marked
    with the tensor's extent (the rest of the interpreter copies the type along)."""
    import copy

    handle = getattr(converted, "handle", None)
    dtype = getattr(handle, "dtype", None)
    if dtype is None or not hasattr(dtype, "element_ty") or not hasattr(arg, "untyped_storage"):
        return converted
    marked = copy.copy(dtype)
    setattr(marked, ORIGIN, (*_extent(arg), arg.data_ptr()))
    handle.dtype = marked
    return converted


def _enum_name(value) -> str:
    """An interpreter enum's name ("RELAXED", "CTA"), "" where none was given."""
    if value is None:
        return ""
    return str(getattr(value, "name", value)).rpartition(".")[2].upper()


def _saturating(original, signed: bool, handle_class):
    """A float-to-integer conversion as the GPU makes it (PTX ``cvt.rzi``): toward zero, a
    value past the integer's range saturates to its end and NaN becomes 0. NumPy's, which the
    interpreter uses, leaves those undefined (on x86, 3e9 to int32 gives -2147483648), so a
    kernel could compute one thing interpreted and another on the GPU. An 8-bit integer is
    converted to 16 bits (``cvt.rzi.s16.f32``, saturating there) and then cut to its low byte,
    as the PTX for sm_90 does: 1e5 to int8 is -1."""
    import numpy as np

    def convert(self, src, dst_type):
        data = getattr(src, "data", None)
        scalar = getattr(dst_type, "scalar", dst_type)
        bits = getattr(scalar, "primitive_bitwidth", 0)
        if not isinstance(data, np.ndarray) or data.dtype.kind != "f" or \
                bits not in (8, 16, 32, 64):
            return original(self, src, dst_type)
        width = max(bits, 16)  # the integer the GPU converts to, saturating
        with np.errstate(invalid="ignore"):
            whole = np.trunc(data.astype(np.float64))

            def within(n):
                low, past = (-(2.0 ** (n - 1)), 2.0 ** (n - 1)) if signed else (0.0, 2.0 ** n)
                return low, past, (whole >= low) & (whole < past)

            if within(bits)[2].all():
                return original(self, src, dst_type)
            low, past, inside = within(width)
        kind = np.dtype(f"{'int' if signed else 'uint'}{width}")
        out = np.zeros(data.shape, dtype=kind)  # NaN: 0
        out[inside] = whole[inside].astype(kind)
        out[whole >= past] = np.iinfo(kind).max
        out[whole < low] = np.iinfo(kind).min
        if bits == 8:
            out = out.astype(np.dtype(f"{'int' if signed else 'uint'}8"))  # the low byte
        return handle_class(out, scalar)

    return convert


# The float8 formats a GPU converts to with saturation (PTX cvt.rn.satfinite): Triton's name,
# and the code of NaN (float8e4nv has no infinity; float8e5's all-ones exponent is inf or NaN)
_FLOAT8 = {"fp8e4nv": 0x7F, "fp8e5": 0x7F}


def _float8_values(name: str, mantissa: int, bias: int):
    """The finite non-negative values of a float8 format, by code (0 up to the largest)."""
    import numpy as np

    values = []
    for code in range(0x80):
        exponent, fraction = code >> mantissa, code & ((1 << mantissa) - 1)
        if name == "fp8e4nv" and code == 0x7F or name == "fp8e5" and exponent == 0x1F:
            break
        values.append(fraction * 2.0 ** (1 - bias - mantissa) if exponent == 0 else
                      (1 + fraction / 2 ** mantissa) * 2.0 ** (exponent - bias))
    return np.array(values)


def _narrowing(original, handle_class):
    """A float conversion to float16 or float8 as the GPU makes it, where the interpreter's own
    (bits shifted by hand) does not: float16 rounded to nearest even or toward zero (past the
    largest value toward zero is the largest, not NaN), float8 rounded to nearest even and
    saturated at its largest finite value (PTX cvt.rn.satfinite: 1000 is 448 in float8e4nv,
    not 256). Other conversions are the interpreter's."""
    import numpy as np

    def convert(self, src, dst_type, rounding_mode=None):
        data = getattr(src, "data", None)
        scalar = getattr(dst_type, "scalar", dst_type)
        name = getattr(scalar, "name", "")
        mode = getattr(rounding_mode, "name", None) or "RTNE"
        source = getattr(getattr(src, "dtype", None), "scalar", None)
        widths = {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}
        if isinstance(data, np.ndarray) and data.dtype == np.uint8 and name in widths and \
                getattr(source, "name", "") in _FLOAT8:
            # float8 widened: NaN and (float8e5) infinity as such, which the interpreter's own
            # reads as numbers (float8e4nv's NaN as 480)
            values = _float8_values(source.name, source.fp_mantissa_width, source.exponent_bias)
            magnitude = (data & 0x7F).astype(np.int64)
            wide = values[np.minimum(magnitude, len(values) - 1)].copy()
            wide[magnitude >= len(values)] = np.nan
            if source.name == "fp8e5":
                wide[magnitude == 0x7C] = np.inf
            wide[data >= 0x80] *= -1
            return handle_class(wide.astype(widths[name]), scalar)
        if not isinstance(data, np.ndarray) or data.dtype not in (np.float16, np.float32,
                                                                   np.float64):
            return original(self, src, dst_type, rounding_mode)
        x = data.astype(np.float64)
        if name == "fp16" and mode in ("RTNE", "RTZ"):
            with np.errstate(over="ignore"):
                half = x.astype(np.float16)  # NumPy rounds to nearest even
            if mode == "RTZ":
                with np.errstate(invalid="ignore"):
                    away = np.isfinite(x) & (np.abs(half.astype(np.float64)) > np.abs(x))
                half[away] = np.nextafter(half[away], np.float16(0))
            return handle_class(half, scalar)
        if name not in _FLOAT8 or mode != "RTNE":
            return original(self, src, dst_type, rounding_mode)
        values = _float8_values(name, scalar.fp_mantissa_width, scalar.exponent_bias)
        with np.errstate(invalid="ignore"):
            size = np.minimum(np.abs(x), values[-1])  # saturated (infinity too)
            above = np.clip(np.searchsorted(values, size), 0, len(values) - 1)
            below = np.maximum(above - 1, 0)
            to_above, to_below = values[above] - size, size - values[below]
            up = (to_above < to_below) | (to_above == to_below) & (above % 2 == 0)
        code = np.where(up, above, below).astype(np.uint8)
        code[np.isnan(x)] = _FLOAT8[name]
        code |= (np.signbit(x).astype(np.uint8) << 7)
        return handle_class(code, scalar)

    return convert


def install() -> bool:
    """Wrap the interpreter's loads and stores; False if this Triton lacks the expected hooks."""
    global _installed
    if _installed:
        return True
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    executor = getattr(interpreter, "GridExecutor", None)
    hooks = ("create_masked_load", "create_masked_store")
    if builder is None or executor is None or not hasattr(executor, "_init_args_hst") or \
            not all(hasattr(builder, name) for name in hooks) or \
            not callable(getattr(interpreter, "_implicit_cvt", None)):
        return False
    original_init = executor._init_args_hst
    original_load = builder.create_masked_load
    original_store = builder.create_masked_store
    original_cvt = interpreter._implicit_cvt

    def init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init(self, args_dev, kwargs)
        names = list(getattr(self, "arg_names", None) or ())[:len(args_hst)]
        names += [""] * (len(args_hst) - len(names))
        _record_ranges(list(args_hst) + list(kwargs_hst.values()), names + list(kwargs_hst))
        for observer in observers:
            observer.launch(self, list(args_hst) + list(kwargs_hst.values()),
                            names + list(kwargs_hst))
        return args_hst, kwargs_hst

    def create_masked_load(self, ptrs, mask, *rest, **kwargs):
        for observer in observers:
            observer.access("load", self, ptrs, mask)
        _check("load", ptrs, mask, self)
        return original_load(self, ptrs, mask, *rest, **kwargs)

    def create_masked_store(self, ptrs, value, mask, *rest, **kwargs):
        for observer in observers:
            observer.access("store", self, ptrs, mask)
        _check("store", ptrs, mask, self)
        return original_store(self, ptrs, value, mask, *rest, **kwargs)

    def unmarked(original):
        """``create_load``/``create_store``: an access given no mask, which the interpreter
        hands on to the masked one with every lane active. Noted, so that the check can say
        so."""
        def access(self, *args, **kwargs):
            _state.unmasked = True
            try:
                return original(self, *args, **kwargs)
            finally:
                _state.unmasked = False
        return access

    def observed_atomic(builder, ptrs, mask, sem, scope):
        """An atomic operation reads its element and writes it: observers see both, or, where
        an observer tells atomics apart (``atomic``), the operation itself, with what it
        orders: ``receives`` (acquire) and ``publishes`` (release) between programs, as its
        ``sem`` says; neither at ``scope`` "cta", which orders a program's own threads only."""
        semantic, reach = _enum_name(sem), _enum_name(scope)
        between = reach != "CTA"
        receives = between and semantic in ("ACQUIRE_RELEASE", "ACQUIRE", "")
        publishes = between and semantic in ("ACQUIRE_RELEASE", "RELEASE", "")
        for observer in observers:
            if hasattr(observer, "atomic"):
                observer.atomic(builder, ptrs, mask, receives=receives, publishes=publishes)
            else:
                observer.access("load", builder, ptrs, mask)
                observer.access("store", builder, ptrs, mask)

    def atomic_rmw(original):
        """``create_atomic_rmw`` (tl.atomic_add and its kin) writes at raw addresses too,
        without the masked store: checked as a store is."""
        def access(self, op, ptrs, value, mask, sem=None, scope=None, *rest, **kwargs):
            observed_atomic(self, ptrs, mask, sem, scope)
            _check("atomic", ptrs, mask, self)
            return original(self, op, ptrs, value, mask, sem, scope, *rest, **kwargs)
        return access

    def atomic_cas(original):
        """``create_atomic_cas`` (tl.atomic_cas) takes no mask: every lane is checked."""
        def access(self, ptrs, cmp, value, sem=None, scope=None, *rest, **kwargs):
            import numpy as np

            every = type("EveryLane", (), {"data": np.ones(np.shape(ptrs.data), dtype=bool)})
            observed_atomic(self, ptrs, every, sem, scope)
            _check("atomic", ptrs, every, self)
            return original(self, ptrs, cmp, value, sem, scope, *rest, **kwargs)
        return access

    def implicit_cvt(arg):
        converted = original_cvt(arg)
        return _mark_origin(converted, arg) if hasattr(arg, "data_ptr") else converted

    executor._init_args_hst = init_args_hst
    interpreter._implicit_cvt = implicit_cvt
    if hasattr(builder, "create_fp_to_fp") and hasattr(interpreter, "TensorHandle"):
        builder.create_fp_to_fp = _narrowing(builder.create_fp_to_fp, interpreter.TensorHandle)
    for name, signed in (("create_fp_to_si", True), ("create_fp_to_ui", False)):
        if hasattr(builder, name) and hasattr(interpreter, "TensorHandle"):
            setattr(builder, name, _saturating(getattr(builder, name), signed,
                                               interpreter.TensorHandle))
    builder.create_masked_load = create_masked_load
    builder.create_masked_store = create_masked_store
    for name in ("create_load", "create_store"):
        if hasattr(builder, name):
            setattr(builder, name, unmarked(getattr(builder, name)))
    if hasattr(builder, "create_atomic_rmw"):
        builder.create_atomic_rmw = atomic_rmw(builder.create_atomic_rmw)
    if hasattr(builder, "create_atomic_cas"):
        builder.create_atomic_cas = atomic_cas(builder.create_atomic_cas)
    if hasattr(builder, "create_barrier"):
        original_barrier = builder.create_barrier

        def create_barrier(self, *args, **kwargs):
            for observer in observers:
                if hasattr(observer, "barrier"):
                    observer.barrier(self)
            return original_barrier(self, *args, **kwargs)

        builder.create_barrier = create_barrier
    _installed = True
    return True
