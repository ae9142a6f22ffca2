"""Memory maps: which program of a kernel read and wrote which element of each tensor.

A map is recorded only when one is wanted: for the first failing kernel case small enough to
draw, or the case ``check --map CASE`` names. The grader then starts one more worker process
(``learning.grader.worker --map``) that runs that case in Triton's interpreter twice, with the
reference solution's module and with the learner's, while a ``Recorder`` watches every load and
store through ``learning.grader.sanitizer``'s hooks. Each access is kept with the program that
made it (the interpreter's current program id), the lanes its mask switched off, and the elements it
touched, mapped back to (row, column) of the tensor they belong to: the case's inputs, the
returned output, or a tensor made inside the call. The tensor is the one the pointer was made
from (``learning.grader.sanitizer.origin``), so a lane past the end of x that lands in y stays
x's. Lanes that address no element of that tensor are kept as offsets from its first element
("outside the tensor").

A tile (a block of lanes whose address is one offset per block axis, ``rows[:, None] * stride +
cols[None, :]``) says more: each axis steps along one dimension of the tensor, so each lane has
the index the kernel's arithmetic gave it, even past an edge. Its lanes past an edge are kept
by that index ("past the edge"), with whether their address still fell on an element of the
tensor (a read of the wrong element) or outside it: a k loop running past K reads columns past
the last of every row, not a row past the last. A 1-D block has no rows of its own (a flat
kernel's lanes rightly run on into the next row), so only its lanes that address no element are
kept by index: along the row where the block starts (a row kernel's mask one column too wide
reads past that row's last column, not a row past the last).

Two halves live here:

- in the learner's process: ``Recorder`` and ``record_call`` (``learning.grader.recordings``'s
  ``run_map`` calls it);
- in the grader's: ``CaseMap`` and ``MemoryMap``, plain data built from what the worker sent,
  with the questions the tests and the drawing ask (which programs touched this cell), and
  which case to map.

``learning.grader.map_run`` runs the worker that records one (``map_for_check``,
``record_map``) and ``learning.grader.map_view`` draws the maps; nothing here prints.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from learning.grader import program_order, sanitizer

# A case is drawn unasked when every tensor of it has at most this many elements (64 x 64).
MAX_ELEMENTS = 64 * 64
# Verdicts that a map can help with (a timed-out case would only time out again).
MAPPED_STATUSES = ("failed", "error", "crashed")
# Failures whose returned tensor is not what the kernels stored (the input itself, torch's
# result, values passed through): a map of "the output" would draw another tensor than the one
# the kernels wrote, and tell the learner their kernel stored nothing. Not drawn unasked.
# So are those where the code ended the program itself: no kernel's output to draw.
NOT_THE_KERNELS_OUTPUT = ("aliases-input", "computed-by-torch", "passed-through",
                          "not-from-kernels", "written-by-torch", "changed-after-kernel",
                          "exited")
# Lanes outside a tensor kept per map and kind; the count beyond is kept too.
MAX_OUTSIDE = 4096
LEARNER, REFERENCE = "learner", "reference"


# ---------------------------------------------------------------------------------------------
# In the learner's process: record one call's launches and accesses.


def _geometry(tensor, label: str, role: str) -> dict:
    storage = tensor.untyped_storage()
    start = storage.data_ptr()
    return {"label": label, "role": role, "shape": tuple(tensor.shape),
            "strides": tuple(tensor.stride()), "dtype": str(tensor.dtype).removeprefix("torch."),
            "itemsize": tensor.element_size(), "ptr": tensor.data_ptr(),
            "storage": (start, start + storage.nbytes())}


# The most elements a tensor may have to be mapped: its element table is built whole (a view
# expanded to 2**40 elements, with a stride of 0, would ask for terabytes)
MAPPABLE_ELEMENTS = 2 ** 22


def _tensors_in(value, seen: frozenset = frozenset()):
    """The tensors in an argument or a returned value (tuples and lists looked into, each
    once: a list that holds itself ends), those a map can show: strided, of a size one can
    draw, with memory behind them (not sparse, nested or meta tensors)."""
    if isinstance(value, (tuple, list)):
        if id(value) in seen:
            return
        for item in value:
            yield from _tensors_in(item, seen | {id(value)})
    elif hasattr(value, "untyped_storage") and hasattr(value, "stride"):
        if _mappable(value):
            yield value
    elif hasattr(value, "base") and hasattr(value.base, "untyped_storage"):
        if _mappable(value.base):
            yield value.base  # a tensor descriptor


def _mappable(tensor) -> bool:
    try:
        import torch

        return (tensor.layout == torch.strided and not tensor.is_nested
                and not tensor.is_meta and tensor.numel() <= MAPPABLE_ELEMENTS
                and tensor.untyped_storage() is not None)
    except Exception:  # noqa: BLE001 - a tensor whose memory cannot be read is not mapped
        return False


class Recorder:
    """Every launch and every load and store of one call, as the interpreter runs them.

    Installed as an observer of ``learning.grader.sanitizer`` (which calls ``launch`` and ``access``
    before it checks the access), so an access that the sanitizer then refuses is recorded too.
    """

    def __init__(self):
        self.launches: list[dict] = []  # kernel, file, grid, first program number, tensors
        self.accesses: list[tuple] = []  # raw: see access()
        self.problem = ""  # why recording stopped early, if it did

    def launch(self, executor, args, names):
        try:
            builder = _builder()
            if self.launches and self.launches[-1]["grid"] is None and builder is not None:
                self.launches[-1]["grid"] = tuple(getattr(builder, "grid_dim", (1, 1, 1)))
            first = 0
            if self.launches:
                last = self.launches[-1]
                first = last["first"] + _count(last["grid"] or (0,))
            fn = getattr(executor, "fn", None)
            code = getattr(fn, "__code__", None)
            tensors = []
            for arg, name in zip(args, list(names) + [""] * len(args)):
                for tensor in _tensors_in(arg):
                    tensors.append(_geometry(tensor, name, "made"))
            self.launches.append({"kernel": getattr(fn, "__name__", "kernel"),
                                  "file": code.co_filename if code else "", "grid": None,
                                  "first": first, "tensors": tensors})
        except Exception as exc:  # noqa: BLE001 - recording must never change the run
            self.problem = self.problem or f"{type(exc).__name__}: {exc}"

    def access(self, kind, builder, ptrs, mask):
        try:
            import numpy as np

            if not self.launches:
                return
            launch = self.launches[-1]
            if launch["grid"] is None:
                launch["grid"] = tuple(builder.grid_dim)
            x, y, z = builder.grid_idx
            _, gy, gz = launch["grid"]
            program = launch["first"] + (x * gy + y) * gz + z
            addresses = np.asarray(ptrs.data).astype(np.int64, copy=False)
            active = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
            touched = addresses[active].copy()
            # A fully masked access touches nothing; its first address tells which tensor.
            hint = int(addresses.flat[0]) if addresses.size else 0
            tile = _tile(addresses)
            lanes_at = np.nonzero(active) if tile is not None else None
            self.accesses.append((kind, program, len(self.launches) - 1, touched,
                                  int(addresses.size), int(addresses.size - touched.size),
                                  _line(launch["file"]), hint, sanitizer.origin(ptrs), tile,
                                  lanes_at))
        except Exception as exc:  # noqa: BLE001
            self.problem = self.problem or f"{type(exc).__name__}: {exc}"

    def result(self, args, names, returned, stopped: str = "") -> dict:
        """The call as plain data (no addresses): what ``CaseMap.from_data`` reads."""
        import numpy as np

        builder = _builder()
        if self.launches and self.launches[-1]["grid"] is None and builder is not None:
            self.launches[-1]["grid"] = tuple(getattr(builder, "grid_dim", (1, 1, 1)))
        subjects = _subjects(args, names, returned, self.launches)
        tables = {}
        accesses, programs = [], {}
        for (kind, program, launch, touched, lanes, masked, line, hint, origin, tile,
             lanes_at) in self.accesses:
            index = _made_from(subjects, origin)
            if index is None:
                index = _owner(subjects, touched, hint)
            cells = outside = np.empty(0, dtype=np.int64)
            past, landed, by_index = np.empty((0, 0), dtype=np.int64), np.empty(0, bool), False
            if index is not None and touched.size:
                if index not in tables:
                    tables[index] = _offset_table(subjects[index])
                cells, outside, hit = _to_cells(subjects[index], tables[index], touched)
                indices = _tile_indices(subjects[index], tile, lanes_at)
                if indices is not None:
                    beyond = ((indices < 0) | (indices >= subjects[index]["shape"])).any(axis=1)
                    past, landed, by_index = indices[beyond], hit[beyond], True
                elif tile is None and (run := _run_past(subjects[index], touched, hit,
                                                         cells)) is not None:
                    past, landed, by_index = run, np.zeros(len(run), dtype=bool), True
            accesses.append({"kind": kind, "program": program, "tensor": index,
                             "cells": cells.astype(np.int32), "outside": outside,
                             "past": past, "landed": landed, "by_index": by_index,
                             "lanes": lanes, "masked": masked, "line": line})
            if program not in programs:
                first = self.launches[launch]["first"]
                _, gy, gz = self.launches[launch]["grid"]
                local = program - first
                programs[program] = {"number": program, "launch": launch,
                                     "program_id": (local // (gy * gz), local // gz % gy,
                                                    local % gz)}
        _name_unreturned_output(subjects, accesses)
        keep = ("label", "role", "shape", "strides", "dtype")
        return {
            "tensors": [{k: s[k] for k in keep} for s in subjects],
            "launches": [{"kernel": launch["kernel"], "grid": tuple(launch["grid"] or (0, 1, 1)),
                          "first": launch["first"]} for launch in self.launches],
            "programs": [programs[n] for n in sorted(programs)],
            "accesses": accesses,
            "stopped": stopped,
            "problem": self.problem,
        }


def _builder():
    try:
        from triton.runtime import interpreter
    except ImportError:
        return None
    return getattr(interpreter, "interpreter_builder", None)


def _count(grid) -> int:
    total = 1
    for n in grid:
        total *= int(n)
    return total


def _line(filename: str) -> int:
    """The line of the kernel (in ``filename``) that is making the access, or 0."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == filename:
            return frame.f_lineno
        frame = frame.f_back
    return 0


def _subjects(args, names, returned, launches) -> list[dict]:
    """The tensors a map is drawn for: the returned output(s), then the inputs by their
    parameter names, then each other tensor the launches were given (made inside the call),
    leaving out any that shares storage with one already listed."""
    subjects: list[dict] = []
    outputs = list(_tensors_in(returned))
    for number, tensor in enumerate(outputs, 1):
        subjects.append(_geometry(tensor, "output" if len(outputs) == 1 else f"output {number}",
                                  "output"))
    for position, arg in enumerate(args):
        name = names[position] if position < len(names) else f"argument {position + 1}"
        found = list(_tensors_in(arg))
        for number, tensor in enumerate(found, 1):
            label = name if len(found) == 1 else f"{name}[{number - 1}]"
            geometry = _geometry(tensor, label, "input")
            if not any(s["storage"] == geometry["storage"] for s in subjects):
                subjects.append(geometry)
    made = 0
    for launch in launches:
        for geometry in launch["tensors"]:
            if any(_overlap(s["storage"], geometry["storage"]) for s in subjects):
                continue
            made += 1
            name = geometry["label"] or "a tensor"
            subjects.append(dict(geometry, label=f"{name} (made in the call, {made})",
                                 role="made"))
    return subjects


def _name_unreturned_output(subjects: list[dict], accesses: list[dict]):
    """A call that raised returned nothing: the first tensor made in it that a kernel stored
    to (else the first one made at all, the output it was allocating) is its output, as the
    reference's returned one is, so that the two maps line up."""
    if any(s["role"] == "output" for s in subjects):
        return
    stored = [a["tensor"] for a in accesses if a["kind"] == "store" and a["tensor"] is not None
              and subjects[a["tensor"]]["role"] == "made"]
    made = [i for i, s in enumerate(subjects) if s["role"] == "made"]
    for index in stored[:1] or made[:1]:
        subjects[index].update(label="output", role="output")


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _made_from(subjects, origin) -> int | None:
    """The tensor whose storage the pointer was made from, when the sanitizer marked it."""
    if not origin:
        return None
    return next((i for i, s in enumerate(subjects) if tuple(s["storage"]) == tuple(origin[:2])),
                None)


def _tile(addresses):
    """(first address, each axis's offsets from it) when a block of two or more moving axes is
    the sum of one offset per axis, as ``rows[:, None] * stride + cols[None, :]`` builds it;
    else None (a 1-D block has no rows and columns of its own to tell apart)."""
    import numpy as np

    if addresses.ndim < 2 or not addresses.size:
        return None
    origin = (0,) * addresses.ndim
    base = int(addresses[origin])
    axes = []
    for axis in range(addresses.ndim):
        along = list(origin)
        along[axis] = slice(None)
        axes.append(addresses[tuple(along)] - base)
    if sum(1 for steps in axes if steps.any()) < 2:
        return None
    total = np.full(addresses.shape, base, dtype=np.int64)
    for axis, steps in enumerate(axes):
        shape = [1] * addresses.ndim
        shape[axis] = -1
        total = total + steps.reshape(shape)
    return (base, axes) if np.array_equal(total, addresses) else None


def _tile_indices(subject: dict, tile, lanes_at):
    """The index each active lane of a tile has by the kernel's own arithmetic, one row per lane
    (as ``lanes_at`` lists them): the first lane's element, then each block axis's steps along
    the one dimension whose stride they are multiples of (the largest such). None when the
    tile's axes do not step along distinct dimensions (a wrong stride, say): then only the
    addresses say where the lanes went."""
    import numpy as np

    shape, strides, size = subject["shape"], subject["strides"], subject["itemsize"]
    if tile is None or len(shape) < 2 or any(s <= 0 for s in strides):
        return None
    base, axes = tile
    start = base - subject["ptr"]
    if start % size or any((steps % size).any() for steps in axes):
        return None
    # The first lane's index: its element offset taken apart, largest stride first.
    index = [0] * len(shape)
    rest = start // size
    for dim in sorted(range(len(shape)), key=lambda d: -strides[d]):
        index[dim], rest = divmod(rest, strides[dim])
    if rest:
        return None
    indices = np.tile(np.array(index, dtype=np.int64), (len(lanes_at[0]), 1))
    used: set[int] = set()
    offset = len(shape) - len(axes)  # block axes line up with the tensor's trailing dimensions
    for axis, steps in enumerate(axes):
        steps = steps // size
        if not steps.any():
            continue
        dims = [d for d in range(len(shape)) if not (steps % strides[d]).any()]
        dims.sort(key=lambda d: (-strides[d], d in used, abs(d - axis - offset)))
        if not dims or dims[0] in used:
            return None
        used.add(dims[0])
        indices[:, dims[0]] += steps[lanes_at[axis]] // strides[dims[0]]
    return indices


def _owner(subjects, touched, hint) -> int | None:
    """The tensor an access belongs to: the one whose storage holds most of its lanes; else
    (every lane outside every tensor) the nearest one."""
    import numpy as np

    if not subjects:
        return None
    probe = touched if touched.size else np.array([hint], dtype=np.int64)
    counts = [int(((probe >= s["storage"][0]) & (probe < s["storage"][1])).sum())
              for s in subjects]
    best = max(range(len(subjects)), key=lambda i: counts[i])
    if counts[best]:
        return best
    middle = int(np.median(probe))

    def distance(i):
        start, end = subjects[i]["storage"]
        return start - middle if middle < start else middle - end + 1

    return min(range(len(subjects)), key=distance)


def _offset_table(subject: dict):
    """(sorted element offsets of the tensor's elements from its first, their flat indices)."""
    import numpy as np

    offsets = np.zeros((), dtype=np.int64)
    for size, stride in zip(subject["shape"], subject["strides"]):
        offsets = offsets[..., None] + np.arange(size, dtype=np.int64) * stride
    offsets = offsets.ravel()
    order = np.argsort(offsets, kind="stable")
    return offsets[order], order


def _run_past(subject: dict, touched, hit, cells):
    """A 1-D block's lanes that addressed no element, by index: the block's first lane on an
    element, then its step along the one dimension the run moves in (the row kernel's columns).
    Only those lanes: a 1-D block has no rows of its own, so a lane crossing into the next row
    is a read of that element (a flat kernel's lanes do that rightly). None when every lane, or
    none, is on an element, or the run does not move along one dimension."""
    import numpy as np

    shape, strides, size = subject["shape"], subject["strides"], subject["itemsize"]
    if len(shape) < 2 or hit.all() or not hit.any() or any(s <= 0 for s in strides):
        return None
    first = int(np.argmax(hit))
    apart = touched - touched[first]
    if (apart % size).any():
        return None
    steps = apart // size
    dims = [d for d in range(len(shape)) if not (steps % strides[d]).any()]
    if not dims:
        return None
    dim = max(dims, key=lambda d: strides[d])
    start = np.array(np.unravel_index(int(cells[0]), shape), dtype=np.int64)
    indices = np.tile(start, (int((~hit).sum()), 1))
    indices[:, dim] += steps[~hit] // strides[dim]
    return indices


def _to_cells(subject: dict, table, touched):
    """Flat indices of the elements ``touched`` addresses, the offsets (in elements from the
    first) of the lanes that address none of the tensor's elements, and which lanes hit one."""
    import numpy as np

    sorted_offsets, order = table
    relative = touched - subject["ptr"]
    aligned = relative % subject["itemsize"] == 0
    elements = relative // subject["itemsize"]
    if not sorted_offsets.size:
        return np.empty(0, dtype=np.int64), elements, np.zeros(touched.shape, dtype=bool)
    position = np.searchsorted(sorted_offsets, elements)
    clipped = np.minimum(position, sorted_offsets.size - 1)
    hit = aligned & (position < sorted_offsets.size) & (sorted_offsets[clipped] == elements)
    return order[clipped[hit]], elements[~hit], hit


def parameter_names(function) -> list[str]:
    import inspect

    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def record_call(function, args_spec: tuple, device: str = "cpu") -> dict:
    """Run ``function`` on the case's arguments with a Recorder watching; its data."""
    import copy

    from learning.grader.learner_code import root_cause, safe_str
    from learning.grader.tensors import TensorSpec

    args = tuple(a.build(device) if isinstance(a, TensorSpec) else copy.deepcopy(a)
                 for a in args_spec)
    recorder = Recorder()
    sanitizer.observers.append(recorder)
    returned, stopped = None, ""
    try:
        with program_order.first_to_last():
            returned = function(*args)
    except BaseException as exc:  # noqa: BLE001 - anything the code raises is what happened
        cause = root_cause(exc)
        stopped = f"{type(cause).__name__}: {safe_str(cause)}"[:600]
    finally:
        sanitizer.observers.remove(recorder)
    return recorder.result(args, parameter_names(function), returned, stopped)


# ---------------------------------------------------------------------------------------------
# In the grader's process: the maps as plain data.


@dataclass(frozen=True)
class Tensor:
    """A tensor the maps cover: the output, an input (by its parameter name), or one made in
    the call."""

    label: str
    role: str  # "output", "input" or "made"
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @property
    def size(self) -> int:
        return _count(self.shape)


@dataclass(frozen=True)
class Access:
    """One tl.load or tl.store of one program."""

    kind: str  # "load" or "store"
    program: int  # the program's number in launch order (its tl.program_id(0) in a 1-D grid)
    tensor: int | None  # index into CaseMap.tensors
    cells: tuple[int, ...]  # flat (row-major) indices of the elements it touched
    outside: tuple[int, ...]  # offsets, in elements from the first, of lanes outside it
    lanes: int
    masked: int  # lanes the mask switched off
    line: int  # the kernel's line, 0 if unknown
    # Lanes past an edge of the tensor, by the index the kernel gave them (a tile's, or a 1-D
    # run's that addressed no element), and whether each one's address still fell on an
    # element of the tensor (then it is among ``cells``).
    past: tuple[tuple[int, ...], ...] = ()
    landed: tuple[bool, ...] = ()
    by_index: bool = False  # its lanes past an edge are drawn by ``past``, not by address


@dataclass
class CaseMap:
    """Everything one call of a part's function did to memory, in the interpreter."""

    tensors: list[Tensor] = field(default_factory=list)
    launches: list[dict] = field(default_factory=list)  # kernel, grid, first program number
    programs: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # number: pid
    accesses: list[Access] = field(default_factory=list)
    stopped: str = ""  # the exception that ended the call, if one did
    problem: str = ""  # why the map may be incomplete

    @classmethod
    def from_data(cls, data: dict | None) -> CaseMap | None:
        if not data or "tensors" not in data:
            return None
        tensors = [Tensor(t["label"], t["role"], tuple(t["shape"]), tuple(t["strides"]),
                          t["dtype"]) for t in data["tensors"]]
        accesses = [Access(a["kind"], int(a["program"]), a["tensor"],
                           tuple(int(c) for c in a["cells"]),
                           tuple(int(o) for o in a["outside"]), int(a["lanes"]),
                           int(a["masked"]), int(a["line"]),
                           tuple(tuple(int(i) for i in index) for index in a.get("past", ())),
                           tuple(bool(b) for b in a.get("landed", ())),
                           bool(a.get("by_index", False))) for a in data["accesses"]]
        programs = {int(p["number"]): tuple(p["program_id"]) for p in data["programs"]}
        launches = [dict(launch) for launch in data["launches"]]
        return cls(tensors, launches, programs, accesses, data.get("stopped", ""),
                   data.get("problem", ""))

    def index(self, label: str) -> int:
        for number, tensor in enumerate(self.tensors):
            if tensor.label == label:
                return number
        known = ", ".join(t.label for t in self.tensors)
        raise KeyError(f"no tensor {label!r} in this map (it has: {known})")

    def tensor(self, label: str) -> Tensor:
        return self.tensors[self.index(label)]

    def touches(self, label: str, kind: str) -> dict[int, list[int]]:
        """Flat index: the programs that touched it, in order (one entry per access)."""
        number = self.index(label)
        found: dict[int, list[int]] = {}
        for access in self.accesses:
            if access.tensor == number and access.kind == kind:
                for cell in access.cells:
                    found.setdefault(cell, []).append(access.program)
        return found

    def programs_at(self, label: str, kind: str, index) -> list[int]:
        """The programs that loaded (kind "load") or stored ("store") the element at
        ``index`` (a tuple, or a flat row-major number), once per access."""
        tensor = self.tensor(label)
        flat = index if isinstance(index, int) else _flat(index, tensor.shape)
        return self.touches(label, kind).get(flat, [])

    def grid(self, label: str, kind: str) -> list:
        """Nested lists in the tensor's shape: the programs of each element, as programs_at."""
        tensor = self.tensor(label)
        touches = self.touches(label, kind)
        cells = [touches.get(i, []) for i in range(tensor.size)]
        return _nest(cells, tensor.shape)

    def never(self, label: str, kind: str) -> list[int]:
        """Flat indices of the elements no program touched this way."""
        touched = self.touches(label, kind)
        return [i for i in range(self.tensor(label).size) if i not in touched]

    def outside(self, label: str, kind: str, indexed: bool = True) -> list[tuple[int, int]]:
        """(program, offset in elements from the first element) of each lane outside; without
        ``indexed``, only those of accesses whose lanes ``past`` does not hold by index."""
        number = self.index(label)
        return [(a.program, offset) for a in self.accesses
                if a.tensor == number and a.kind == kind and (indexed or not a.by_index)
                for offset in a.outside]

    def past(self, label: str, kind: str) -> list[tuple[int, tuple[int, ...], bool]]:
        """(program, index, landed) of each lane held by index past an edge of the tensor: the
        index the kernel's arithmetic gave it, and whether its address fell on an element of
        the tensor (a read or write of the wrong element) rather than on none."""
        number = self.index(label)
        return [(a.program, index, landed) for a in self.accesses
                if a.tensor == number and a.kind == kind
                for index, landed in zip(a.past, a.landed)]

    def kinds(self, label: str) -> set[str]:
        number = self.index(label)
        return {a.kind for a in self.accesses if a.tensor == number}

    def same(self, other: CaseMap, label: str, kind: str) -> bool:
        """Whether two calls touched the same elements of ``label`` this way, by the same
        programs the same number of times, and nothing outside it."""
        try:
            mine, theirs = self.touches(label, kind), other.touches(label, kind)
        except KeyError:
            return False
        return {c: sorted(p) for c, p in mine.items()} == \
            {c: sorted(p) for c, p in theirs.items()} and \
            not self.strays(label, kind) and not other.strays(label, kind)

    def strays(self, label: str, kind: str) -> bool:
        """Whether a lane of this kind went past an edge of the tensor or outside it."""
        return bool(self.outside(label, kind) or self.past(label, kind))

    def line_of(self, program: int, kind: str, label: str) -> int:
        number = self.index(label)
        return next((a.line for a in self.accesses if a.program == program and a.kind == kind
                     and a.tensor == number and (a.outside or a.past)), 0)


def nothing_to_map(case_map: CaseMap) -> str:
    """Why a call that made no load or store has no map, in what it was seen to do; "" when
    it made some."""
    if case_map.accesses:
        return ""
    empty = [launch for launch in case_map.launches if _count(launch["grid"]) == 0]
    if case_map.stopped:
        raised = case_map.stopped.split(":")[0]
        what = f"raised {raised} before " + ("any load or store" if case_map.launches
                                             else "launching a kernel")
    elif empty:
        grid = tuple(empty[0]["grid"][:grid_dims(empty[0]["grid"])])
        what = f"launched {empty[0]['kernel']} on a grid of {grid}: no program ran"
    elif case_map.launches:
        what = "launched kernels that made no load or store"
    else:
        what = "launched no kernel"
    return f"in Triton's interpreter your code {what}, so there is nothing to map"


def nothing_to_show(memory_map: MemoryMap) -> str:
    """What the learner's kernel was seen to do, in a sentence, when a drawing of it beside the
    reference's would not show where it went wrong; "" when it would. A drawing helps when a
    lane went past an edge, or when the two kernels touched some elements alike and others
    not. It does not when they touched every element alike (the difference is in the values),
    when the kernel stopped on an error after touching only what the reference touches, or when
    it never touched a tensor the reference does and touched everything else alike."""
    learner, reference = memory_map.learner, memory_map.reference
    if learner is None or reference is None or not learner.accesses:
        return ""
    mine = {t.label for t in learner.tensors}
    differ = []
    for label in memory_map.labels():
        for kind in ("store", "load"):
            if label in mine and learner.strays(label, kind):
                return ""
            if not _alike(learner, reference, label, kind):
                differ.append((label, kind))
    touched = {(label, kind) for label, kind in differ
               if label in mine and learner.touches(label, kind)}
    theirs = {t.label for t in reference.tensors}
    if learner.stopped and "output" in mine and "output" in theirs:
        # a call that raised returned nothing: its "output" is the first tensor its kernels
        # stored to, a guess (_name_unreturned_output); of another shape than the reference's
        # output it is some other tensor, and nothing lines up with the reference's map
        yours, ours = (" x ".join(str(n) for n in m.tensor("output").shape)
                       for m in (learner, reference))
        if yours != ours:
            raised = first_clause(learner.stopped).split(":")[0]
            return (f"your code stopped on its {raised} before it returned an output, and the "
                    f"first tensor its kernels stored to ({yours}) is not the shape of the "
                    f"reference's output ({ours}): the two maps would not line up")
    if learner.stopped and all(_within(learner, reference, label, kind)
                               for label, kind in touched):
        raised = first_clause(learner.stopped).split(":")[0]
        program = learner.accesses[-1].program
        if any(a.kind == "store" for a in learner.accesses):
            did = "having read and stored only what the reference reads and stores"
        else:
            did = "before storing anything, having read only what the reference reads"
        return f"your kernel stopped on its {raised} in program {program}, {did}"
    if not differ:
        return ("your kernel read and wrote every element just as the reference kernel does: "
                "what differs is what it stored")
    if not touched:
        untouched = " or ".join(f"{'stored to' if kind == 'store' else 'read'} {label}"
                                for label, kind in differ)
        return (f"your kernel never {untouched}; everything else it read and wrote as the "
                "reference kernel does")
    return ""


def _alike(learner: CaseMap, reference: CaseMap, label: str, kind: str) -> bool:
    """Both touched ``label`` this way alike (neither touched it at all counts too)."""
    mine, theirs = ({t.label for t in m.tensors} for m in (learner, reference))
    if label not in mine or label not in theirs:
        return not (label in mine and learner.touches(label, kind)
                    or label in theirs and reference.touches(label, kind))
    return learner.same(reference, label, kind)


def _within(learner: CaseMap, reference: CaseMap, label: str, kind: str) -> bool:
    """Every element the learner touched this way, the reference touched by the same program."""
    if label not in {t.label for t in reference.tensors}:
        return False
    theirs = reference.touches(label, kind)
    return all(set(programs) <= set(theirs.get(cell, ()))
               for cell, programs in learner.touches(label, kind).items())


def first_clause(stopped: str) -> str:
    """The first clause of an exception's message: its type and what it says first."""
    import re

    text = stopped.splitlines()[0] if stopped else ""
    text = re.split(r" \((?![\d-])", text)[0].split(";")[0]  # "program (0, 2)" stays whole
    return text if len(text) <= 120 else text[:117] + "..."


def unmasked_clause(stopped: str) -> str:
    """What an out-of-bounds message says of the access's mask where it had none ("the load
    has no mask, ..."), or "": the evidence first_clause leaves out, worth keeping where a
    map is drawn for a compiled run, whose own verdict could not see the mask."""
    import re

    found = re.search(r"the (?:load|store) has no mask[^;\n]*", stopped or "")
    return found.group(0) if found else ""


def grid_dims(grid) -> int:
    """How many of a launch grid's three sizes to show: trailing 1s are left out."""
    dims = 3
    while dims > 1 and grid[dims - 1] == 1:
        dims -= 1
    return dims


def _flat(index: tuple, shape: tuple) -> int:
    flat = 0
    for i, n in zip(index, shape):
        flat = flat * n + int(i)
    return flat


def _nest(cells: list, shape: tuple):
    if len(shape) <= 1:
        return cells
    step = len(cells) // shape[0] if shape[0] else 0
    return [_nest(cells[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


@dataclass
class MemoryMap:
    """One case's maps: the learner's kernel and the reference kernel, run alike."""

    exercise: str
    part: str
    case: str
    learner: CaseMap | None = None
    reference: CaseMap | None = None
    note: str = ""  # why a side is missing, when one is
    asked: bool = False  # named by --map, rather than the first failing case
    deferred: bool = False  # not recorded (no warm process to fork it from): --map draws it

    def labels(self) -> list[str]:
        """The tensors either side knows: the learner's, then any only the reference has."""
        mine = [t.label for t in self.learner.tensors] if self.learner else []
        theirs = [t.label for t in self.reference.tensors] if self.reference else []
        return mine + [label for label in theirs if label not in mine]


def to_json(memory_map: MemoryMap | None) -> dict | None:
    if memory_map is None:
        return None
    return {"exercise": memory_map.exercise, "part": memory_map.part, "case": memory_map.case,
            "asked": memory_map.asked, "deferred": memory_map.deferred,
            "note": memory_map.note or None,
            "learner": _case_json(memory_map.learner),
            "reference": _case_json(memory_map.reference)}


def _case_json(case_map: CaseMap | None) -> dict | None:
    if case_map is None:
        return None
    tensors = []
    for tensor in case_map.tensors:
        entry = {"label": tensor.label, "role": tensor.role, "shape": list(tensor.shape),
                 "strides": list(tensor.strides), "dtype": tensor.dtype}
        for kind, key in (("store", "stores"), ("load", "loads")):
            outside = case_map.outside(tensor.label, kind)
            past = case_map.past(tensor.label, kind)
            entry[key] = {"programs": case_map.grid(tensor.label, kind),
                          "outside": [list(o) for o in outside[:MAX_OUTSIDE]],
                          "outside_count": len(outside),
                          "past_edge": [{"program": p, "index": list(i), "landed": landed}
                                        for p, i, landed in past[:MAX_OUTSIDE]],
                          "past_edge_count": len(past)}
        tensors.append(entry)
    return {"stopped": case_map.stopped or None, "problem": case_map.problem or None,
            "launches": [{"kernel": launch["kernel"], "grid": list(launch["grid"]),
                          "first_program": launch["first"]} for launch in case_map.launches],
            "programs": [{"number": n, "program_id": list(p)}
                         for n, p in sorted(case_map.programs.items())],
            "tensors": tensors,
            "accesses": [{"kind": a.kind, "program": a.program, "tensor": a.tensor,
                          "lanes": a.lanes, "masked": a.masked, "line": a.line,
                          "cells": len(a.cells), "outside": len(a.outside),
                          "past_edge": len(a.past)}
                         for a in case_map.accesses]}


# ---------------------------------------------------------------------------------------------
# In the grader's process: which case to map.


def small_enough(case) -> bool:
    """Every tensor of the case has at most MAX_ELEMENTS elements, and it runs anywhere."""
    from learning.grader.tensors import TensorSpec

    if case.gpu_only:
        return False
    return all(a.values.size <= MAX_ELEMENTS for a in case.make_args()
               if isinstance(a, TensorSpec))


def mappable_cases(exercise, parts: list[str] | None = None) -> list[tuple[str, str]]:
    """(part, case) of every case a map can be drawn for: kernel parts, not GPU-only."""
    return [(p.name, c.name) for p in exercise.parts if p.needs_kernels
            and (not parts or p.name in parts) for c in p.cases if not c.gpu_only]


class UnknownCase(LookupError):
    """--map named a case that no kernel part of the exercise has (or that needs a GPU)."""


def find_case(exercise, name: str, parts: list[str] | None = None) -> tuple[str, str]:
    """(part, case) for ``--map NAME``: exact, then ignoring case and spaces."""
    import difflib

    known = mappable_cases(exercise, parts)
    for squash in (lambda s: s, lambda s: " ".join(s.lower().split())):
        for part, case in known:
            if squash(case) == squash(name):
                return part, case
    names = [case for _, case in known]
    gpu = [c.name for p in exercise.parts if p.needs_kernels for c in p.cases
           if c.gpu_only and c.name == name]
    if not names:
        raise UnknownCase(f"exercise '{exercise.name}' has no kernel cases to map")
    listed = ", ".join(f"'{n}'" for n in names)
    if gpu:
        raise UnknownCase(f"case '{name}' runs only on a GPU, and a map re-runs its case in "
                          f"Triton's interpreter; cases with a map: {listed}")
    close = difflib.get_close_matches(name, names, n=1)
    guess = f"did you mean '{close[0]}'? " if close else ""
    raise UnknownCase(f"exercise '{exercise.name}' has no kernel case '{name}'; {guess}"
                      f"cases with a map: {listed}")


def first_failing(result) -> tuple[str, str] | None:
    """(part, case) of the first failing kernel case small enough to draw."""
    for part_result in result.parts:
        part = part_result.part
        if not part.needs_kernels or part_result.problem is not None:
            continue
        for case_result in part_result.cases:
            verdict = case_result.verdict
            if verdict.status in MAPPED_STATUSES and \
                    getattr(verdict.bug, "key", None) not in NOT_THE_KERNELS_OUTPUT and \
                    small_enough(part.case(case_result.name)):
                return part.name, case_result.name
    return None
