"""Where a kernel part's returned tensor came from: a kernel, or torch computing the answer.

A kernel part grades what a kernel of the learner's stores. A call that launches a kernel and
then returns something torch computed (``return torch.softmax(x, -1)`` left in from debugging,
or a result copied into a fresh tensor) passes the launch count and the values. So while the
learner's function runs, a dispatch mode notes, for every memory an aten operation made or
wrote, which operation it was and which memories it read. After the call, the returned tensor's
memory is followed back through copies (``copy_``, ``to``, ``clone``, ``cat``, ...) to where
it was made: a memory some launch was given ends the walk (a kernel's output, or a tensor a
kernel read), and so does one made before the call or merely allocated; one made by any other
operation is torch's own result, and that operation is named.

Runs in the learner's process (``learning.grader.calls``).
"""

from __future__ import annotations

# Operations that move or gather values without computing new ones: the walk goes through them
COPIES = {
    "copy_", "_to_copy", "to", "clone", "contiguous", "cat", "stack", "_copy_from",
    "_copy_from_and_resize", "lift_fresh_copy", "detach_copy", "alias_copy", "view_copy",
    "_unsafe_view", "reshape", "as_strided_copy", "slice_copy", "narrow_copy", "select_copy",
    "permute_copy", "transpose_copy", "t_copy", "expand_copy", "unsqueeze_copy",
    "squeeze_copy", "split_with_sizes_copy", "unbind_copy", "split_copy", "_pin_memory",
    "set_",
}
# Operations that allocate or fill memory with constants: no kernel wrote it, and no value of
# the answer was computed into it (a never-written output is judged by its values)
ALLOCATIONS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
    "fill_", "zero_", "resize_", "scalar_tensor", "arange", "lift_fresh", "empty_permuted",
}
MOST_STEPS = 64  # memories followed back from the returned one


def dispatch_mode():
    """A new ``Recorder``, or None where this torch has no dispatch modes."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return None

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.made: dict[int, tuple[str, tuple[int, ...]]] = {}  # memory: (op, read)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            try:
                self._note(func, args, kwargs, out)
            except Exception:  # noqa: BLE001 - noting must never change what the call does
                pass
            return out

        def _note(self, func, args, kwargs, out):
            name = func._schema.name.split("::")[-1]
            read = {_address(t) for t in _tensors((args, kwargs))}
            written = {_address(t) for t, argument in zip(args, func._schema.arguments)
                       if _is_tensor(t) and argument.alias_info is not None
                       and argument.alias_info.is_write}
            written |= {_address(t) for t in _tensors(kwargs.get("out"))}
            made = {_address(t) for t in _tensors(out)} - read  # new memory (views are not)
            for address in written | made:
                self.made[address] = (name, tuple(read - {address}))

    return Recorder()


def computed_by_torch(result, made: dict, given) -> str:
    """The aten operation that computed the returned tensor's memory ("" when a kernel was
    given it, or it was made before the call, or only allocated, copied from one of those);
    ``given`` holds the memories the call's launches were given."""
    if not _is_tensor(result):
        return ""
    try:
        start = _address(result)
    except Exception:  # noqa: BLE001 - a tensor without memory of its own to follow
        return ""
    seen, queue = set(), [start]
    while queue and len(seen) < MOST_STEPS:
        address = queue.pop(0)
        if address in seen or address in given:
            continue
        seen.add(address)
        entry = made.get(address)
        if entry is None:
            continue
        name, read = entry
        if name in COPIES:
            queue.extend(read)
        elif name not in ALLOCATIONS:
            return name
    return ""


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _address(tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def _tensors(value):
    if _is_tensor(value):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
