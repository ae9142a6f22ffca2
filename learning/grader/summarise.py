"""What the learner's function returned, and did to its arguments, read as plain data.

Runs in the learner's process. A value is read through the base classes' own methods, never
its own, so that nothing the learner's code defines takes part in what crosses to the grader
(``learning.grader.returned``).
"""

from __future__ import annotations

import math
import sys
import warnings
from numbers import Real

from learning.grader.learner_code import cut as _cut
from learning.grader.numbers import counted
from learning.grader.returned import Returned

# Values read from one returned output at most: ten times the largest case's input (3.2
# million elements), so that an output far larger than any case asks for cannot make the
# grader copy gigabytes (tests/test_hostile.py checks the margin against every case)
MAX_VALUES = 1 << 25
# The deepest a returned list may nest to be read: outputs nest 2 deep (rows of values); 32
# leaves room for any honest structure, and ends a list that holds itself at once
MAX_NESTING = 32


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def summarise(result, args, args_before) -> Returned:
    """Reduce whatever the learner returned to plain data. A subclass of float, int, str,
    list, tuple or Tensor is read by its plain value, through the base class's own methods,
    so that overriding __float__, __iter__ or __torch_function__ changes nothing. Where the
    call changed an argument, where the first one changed first is said too."""
    returned = _summarised(result, args, args_before)
    if returned.changed_args:
        at = returned.changed_args[0]
        try:
            returned.changed_where = _first_change(args[at], args_before[at])
        except Exception:  # noqa: BLE001 (an argument that resists being read: not said)
            returned.changed_where = ""
    return returned


def _first_change(now, before, depth: int = 0) -> str:
    """Where ``now`` first differs from ``before``, its copy from before the call, as a path
    and the two values ("[0]['reads']: was ['x'], now ['x', 'out']")."""
    if depth < 4 and type(now) is list and type(before) is list:
        if len(now) != len(before):
            return f": had {counted(len(before), 'item')}, now {len(now)}"
        for i, (a, b) in enumerate(zip(now, before)):
            if not _same_deep(a, b):
                return f"[{i}]{_first_change(a, b, depth + 1)}"
    if depth < 4 and type(now) is dict and type(before) is dict:
        for key in before:
            if key not in now:
                return f"[{_shown(key)}]: removed"
            if not _same_deep(now[key], before[key]):
                return f"[{_shown(key)}]{_first_change(now[key], before[key], depth + 1)}"
        for key in now:
            if key not in before:
                return f"[{_shown(key)}]: added"
    if is_tensor(now) and is_tensor(before) and now.shape == before.shape:
        now, before = plain_tensor(now), plain_tensor(before)  # read as torch's own
        differ = ~(now.nan_to_num(0.5) == before.nan_to_num(0.5))
        if bool(differ.any()):
            index = tuple(int(i) for i in differ.nonzero()[0])
            return (f"[{', '.join(str(i) for i in index)}]: was {before[index].item()!r}, now "
                    f"{now[index].item()!r}")
    return f": was {_shown(before)}, now {_shown(now)}"


def _shown(value) -> str:
    """``value``'s repr where it is plain data of Python's own types (a learner's object's
    repr is its code, not run here), cut short; else its type's name."""
    def plain(item, depth: int) -> bool:
        kind = type(item)
        if item is None or kind in (bool, int, float, str):
            return True
        if depth < 4 and kind in (list, tuple) and len(item) <= 100:
            return all(plain(v, depth + 1) for v in item)
        if depth < 4 and kind is dict and len(item) <= 100:
            return all(plain(k, depth + 1) and plain(v, depth + 1) for k, v in item.items())
        return False

    return _cut(repr(value), 60) if plain(value, 0) else f"a {type(value).__name__}"


def _same_deep(a, b) -> bool:
    if type(a) is list and type(b) is list:
        return len(a) == len(b) and all(_same_deep(x, y) for x, y in zip(a, b))
    if type(a) is dict and type(b) is dict:
        return a.keys() == b.keys() and all(_same_deep(a[k], b[k]) for k in a)
    return _same_value(a, b)


def _summarised(result, args, args_before) -> Returned:
    import numpy as np

    type_name = _plain_type_name(result)
    changed = _changed_args(args, args_before)
    mutated = bool(changed)
    autograd = _autograd_changed(args, args_before)
    if is_tensor(result):
        tensor = plain_tensor(result).detach()
        try:
            if tensor.numel() > MAX_VALUES:
                values, note = None, _too_many(tensor.numel())
            else:
                with warnings.catch_warnings():  # the grader's reading is no output of theirs
                    warnings.simplefilter("ignore")  # (a complex tensor's cast warns)
                    values = tensor.to("cpu", dtype=_torch().float64).numpy().copy()
                note = ""
        except (RuntimeError, TypeError) as exc:
            values, note = None, f"could not read the tensor's values: {exc}"
        aliases = any(is_tensor(a) and _shares_memory(tensor, a) for a in args)
        return Returned(
            type_name="Tensor",
            values=values,
            shape=tuple(tensor.shape),
            strides=_strides(tensor),
            dtype=str(tensor.dtype).removeprefix("torch."),
            device=tensor.device.type,
            note=note,
            input_mutated=mutated,
            changed_args=changed,
            input_autograd_changed=autograd,
            aliases_input=aliases,
        )
    raw = _plain_copy(result) if _is_plain(result) else None
    if _is_number(result):
        return Returned(type_name, np.array(_plain_float(result)), shape=(),
                        input_mutated=mutated, changed_args=changed,
                        input_autograd_changed=autograd, raw=raw)
    if isinstance(result, (list, tuple)):
        aliases = any(result is a for a in args)
        items = _items(result)
        values, note = _nested_numbers(items)
        shape = values.shape if values is not None else (len(items),)
        return Returned(type_name, values, shape=tuple(shape), note=note, input_mutated=mutated,
                        changed_args=changed, input_autograd_changed=autograd,
                        aliases_input=aliases, raw=raw)
    note = _cut(repr(result), 200)
    return Returned(type_name, None, note=note, input_mutated=mutated, changed_args=changed,
                    input_autograd_changed=autograd, raw=raw,
                    numpy_scalars=_numpy_scalars(result) if raw is None else ())


def _numpy_scalars(value, depth: int = 0) -> tuple[str, ...]:
    """The numpy scalar types (``int64``, ``bool``) in a small dict, list or tuple whose other
    items are plain data; () where there are none, or anything else is not plain."""
    found: set[str] = set()

    def walk(item, depth: int) -> bool:
        if depth > 4:
            return False
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(item, numpy.generic):
            kind = type(item)  # numpy's own scalar types only: a subclass may name itself anything
            if kind.__module__ != "numpy" or not kind.__name__.isidentifier():
                return False
            found.add(kind.__name__)
            return True
        if isinstance(item, dict) and dict.__len__(item) <= 100:
            return all(walk(k, depth + 1) and walk(v, depth + 1) for k, v in dict.items(item))
        if isinstance(item, (list, tuple)) and len(_items(item)) <= 1000:
            return all(walk(v, depth + 1) for v in _items(item))
        return _is_plain(item, depth)

    return tuple(sorted(found)) if walk(value, depth) else ()


_PLAIN_TYPES = (bool, int, float, str, list, tuple, dict)


def _plain_type_name(value) -> str:
    """The name a value is judged by: a subclass of a built-in type (a numpy float64, a list
    subclass, a namedtuple) by the built-in type it extends, anything else by its own."""
    kind = type(value)
    if kind not in _PLAIN_TYPES:
        kind = next((base for base in _PLAIN_TYPES if isinstance(value, base)), kind)
    return kind.__name__


def _items(sequence) -> list:
    """The elements a list or tuple (or a subclass of one) holds, read through the base
    class: an overridden __iter__ or __getitem__ is not asked."""
    return list(list.__iter__(sequence) if isinstance(sequence, list)
                else tuple.__iter__(sequence))


def _too_many(count: int, at_least: bool = False) -> str:
    return (f"it holds {'more than ' if at_least else ''}{count - (1 if at_least else 0):,} "
            f"values, more than any case's output ({MAX_VALUES:,}): not read")


def _plain_float(value) -> float:
    """A number's value as a plain float: a float subclass's own value, not its __float__."""
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, int):
        return float(int.__int__(value))
    return float.__float__(float(value))  # numpy scalars and other Reals, as they say


def _plain_copy(value):
    """Small plain data (``_is_plain``) rebuilt of exactly bool, int, float, str, list, tuple
    and dict, whatever subclasses the learner's code returned."""
    if value is None or type(value) is bool:
        return value
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (list, tuple)):
        items = [_plain_copy(v) for v in _items(value)]
        return items if isinstance(value, list) else tuple(items)
    return {_plain_copy(k): _plain_copy(v) for k, v in dict.items(value)}


def _nested_numbers(items: list):
    """A float64 array of a (possibly nested) list of numbers, or None and why not."""
    import numpy as np

    def plain(item):
        if isinstance(item, (list, tuple)):
            return [plain(v) for v in _items(item)]
        if not _is_number(item):
            odd.add(type(item).__name__)
            return 0.0
        return _plain_float(item)

    odd: set[str] = set()
    count, stack = 0, [(items, 1)]
    while stack:  # counted before anything is copied, a whole list of numbers at a time
        sequence, depth = stack.pop()
        if depth > MAX_NESTING:  # a list that holds itself nests without end
            return None, f"its lists nest more than {MAX_NESTING} deep (a list that holds " \
                         "itself, or a list inside it, does that): no case's output nests so"
        kinds = set(map(type, sequence))
        if any(issubclass(kind, (list, tuple)) for kind in kinds):
            inner = [(_items(v), depth + 1) for v in sequence if isinstance(v, (list, tuple))]
            count += len(sequence) - len(inner)
            stack.extend(inner)
        else:
            count += len(sequence)
        if count > MAX_VALUES:
            return None, _too_many(MAX_VALUES + 1, at_least=True)
    values = [plain(v) for v in items]
    if odd:
        return None, f"it holds {', '.join(sorted(odd))} values, not numbers"
    try:
        return np.array(values, dtype=np.float64), ""
    except ValueError:
        return None, "its rows have different lengths"


def plain_tensor(value):
    """A tensor subclass seen as a plain torch.Tensor on the same memory, so that reading
    it runs none of the subclass's methods."""
    torch = _torch()
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(value, torch.Tensor)


def _is_plain(value, depth: int = 0) -> bool:
    """Small plain data (what an exact-answer part returns) that can cross to the grader."""
    if depth > 4:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return not isinstance(value, str) or len(value) <= 1000
    if isinstance(value, (list, tuple)) and len(_items(value)) <= 1000:
        return all(_is_plain(v, depth + 1) for v in _items(value))
    if isinstance(value, dict) and dict.__len__(value) <= 100:
        return all(_is_plain(k, depth + 1) and _is_plain(v, depth + 1)
                   for k, v in dict.items(value))
    return False


def _torch():
    import torch

    return torch


def is_tensor(value) -> bool:
    try:
        return "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor)
    except Exception:  # noqa: BLE001 - an object whose __class__ raises is no tensor
        return False


def _shares_memory(a, b) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except RuntimeError:
        return False


def _strides(tensor) -> tuple[int, ...] | None:
    """A dense tensor's strides in elements (None where the layout has none: sparse, nested)."""
    try:
        return tuple(int(s) for s in tensor.stride())
    except (RuntimeError, TypeError, NotImplementedError):
        return None


def _changed_args(now, before) -> tuple[int, ...]:
    """The positions of the arguments the call changed."""
    changed = []
    for index, (a, b) in enumerate(zip(now, before)):
        if is_tensor(a):
            same = a.shape == b.shape and _torch().equal(a.nan_to_num(0.5), b.nan_to_num(0.5))
        elif isinstance(a, list):
            same = len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
        else:
            same = a == b
        if not same:
            changed.append(index)
    return tuple(changed)


def _autograd_changed(now, before) -> bool:
    """Whether the call turned a tensor argument's requires_grad on or off, or left a .grad on
    it (``before`` holds clones taken before the call, which keep the flag; the arguments are
    leaves, the only tensors whose .grad autograd fills)."""
    return any(is_tensor(a) and (a.requires_grad != b.requires_grad
                                 or (a.is_leaf and a.grad is not None))
               for a, b in zip(now, before))


def _same_value(x, y) -> bool:
    if _is_number(x) and _is_number(y) and math.isnan(float(x)) and math.isnan(float(y)):
        return True
    return x == y
