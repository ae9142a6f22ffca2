"""Bounds checking for Triton's interpreter: an out-of-bounds load or store raises, before it
touches memory, naming the kernel line that did it.

The interpreter turns every ``tl.load``/``tl.store`` into NumPy reads and writes at raw
addresses, without any check: a wrong row offset reads garbage or corrupts the heap and kills
the process. This module wraps the two interpreter entry points that every load and store goes
through, and allows only addresses inside the storage of one of the launch's tensor arguments.

It relies on interpreter internals (``GridExecutor._init_args_hst`` and
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
    """A kernel's load or store addressed memory outside every tensor argument of its launch."""


def _allowed_ranges() -> list[tuple[int, int]]:
    return getattr(_state, "ranges", None) or []


def _record_ranges(args, names=()) -> None:
    """Remember the launch's tensors and the kernel parameters they were passed as; None (no
    checking) when one of them cannot be measured, since a wrong "out of bounds" would be
    worse than an unchecked launch."""
    ranges = []
    _state.names = []
    unknown = False

    def visit(arg, name):
        nonlocal unknown
        if isinstance(arg, (tuple, list)):
            for item in arg:
                visit(item, name)
        elif hasattr(arg, "untyped_storage"):
            storage = arg.untyped_storage()
            start = storage.data_ptr()
            ranges.append((start, start + storage.nbytes()))
            _state.names.append(name)
        elif hasattr(arg, "base") and hasattr(arg.base, "untyped_storage"):  # descriptors
            visit(arg.base, name)
        elif hasattr(arg, "data_ptr"):  # a pointer without a size: a later Triton's stand-in
            unknown = True

    names = list(names) + [""] * len(args)
    for arg, name in zip(args, names):
        visit(arg, name)
    _state.ranges = None if unknown else ranges


def _check(kind: str, ptrs, mask) -> None:
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
    inside = np.zeros(addresses.shape, dtype=bool)
    for start, end in _allowed_ranges():
        inside |= (addresses >= start) & (addresses + size <= end)
    if inside.all():
        return
    outside = addresses[~inside]
    nearest = _describe(int(outside[0]))
    raise OutOfBoundsAccess(
        f"out-of-bounds {kind}: {outside.size} of {addresses.size} active lanes address memory "
        f"outside every tensor of the launch ({nearest}); check the offsets and the mask")


def _describe(address: int) -> str:
    ranges = _allowed_ranges()
    if not ranges:
        return "the launch has no tensor arguments"
    distances = []
    names = getattr(_state, "names", [])
    for index, (start, end) in enumerate(ranges):
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
            not all(hasattr(builder, name) for name in hooks):
        return False
    original_init = executor._init_args_hst
    original_load = builder.create_masked_load
    original_store = builder.create_masked_store

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
        _check("load", ptrs, mask)
        return original_load(self, ptrs, mask, *rest, **kwargs)

    def create_masked_store(self, ptrs, value, mask, *rest, **kwargs):
        for observer in observers:
            observer.access("store", self, ptrs, mask)
        _check("store", ptrs, mask)
        return original_store(self, ptrs, value, mask, *rest, **kwargs)

    executor._init_args_hst = init_args_hst
    builder.create_masked_load = create_masked_load
    builder.create_masked_store = create_masked_store
    _installed = True
    return True
