"""Control what the learner's code allocates during a case (used in the learner's process).

Two things are checked through torch's allocation functions:

- every new float tensor starts out holding a chosen value (NaN, then a sentinel on a second
  run), so an element the kernel never wrote shows up instead of hiding behind memory that
  happened to hold the right answer;
- on a GPU, every new contiguous tensor sits between two guard bands, so a store past either
  end is seen after the launch. (In the interpreter, learning.grader.sanitizer stops such a store
  before it happens.)
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

GUARD_ELEMENTS = 4096
GUARD_VALUE = -31415.0  # representable in float16 and bfloat16, and no plausible output


@dataclass
class Guarded:
    buffer: object  # the whole allocation: guard, tensor, guard
    size: int  # elements of the tensor between the guards

    def damaged(self) -> int:
        """Guard elements that no longer hold GUARD_VALUE."""
        low = self.buffer[:GUARD_ELEMENTS]
        high = self.buffer[GUARD_ELEMENTS + self.size:]
        stored = float(low.new_tensor(GUARD_VALUE).item())
        return int((low != stored).sum().item() + (high != stored).sum().item())


@dataclass
class Allocations:
    guarded: list

    def damaged(self) -> int:
        return sum(g.damaged() for g in self.guarded)


@contextlib.contextmanager
def controlled(fill: float, guard: bool):
    """Within the block, torch.empty and friends fill new float tensors with ``fill`` and, when
    ``guard`` is true, put contiguous ones between guard bands (checked with ``damaged``)."""
    import torch

    names = ("empty", "empty_like", "empty_strided")
    originals = {name: getattr(torch, name) for name in names}
    original_new_empty = torch.Tensor.new_empty
    record = Allocations([])

    def guarded_copy(tensor):
        size = tensor.numel()
        buffer = originals["empty"](size + 2 * GUARD_ELEMENTS, dtype=tensor.dtype,
                                    device=tensor.device)
        with torch._C.DisableTorchFunction():  # the grader's own fill, unrecorded
            buffer.fill_(GUARD_VALUE)
        record.guarded.append(Guarded(buffer, size))
        # the buffer's memory, from just past the low guard, as a tensor of its own rather than
        # a view of the buffer: an honest ``out.detach_()`` refuses views
        inner = originals["empty"](0, dtype=tensor.dtype, device=tensor.device)
        return inner.set_(buffer.untyped_storage(), GUARD_ELEMENTS, tensor.shape,
                          tensor.stride())

    def controlled_allocation(allocate):
        # under the allocation's own name: a record of torch calls that sees the method
        # (x.new_empty) notes it by that name
        @functools.wraps(allocate)
        def allocate_controlled(*args, **kwargs):
            tensor = allocate(*args, **kwargs)
            if not tensor.is_floating_point():
                return tensor
            if guard and tensor.is_contiguous() and tensor.numel() and not tensor.requires_grad:
                # (its buffer's allocation is recorded: the memory the learner's tensor is)
                tensor = guarded_copy(tensor)
            # the grader's own fill, which a record of the learner's torch calls
            # (learning.grader.lineage) must not take for a fill of theirs: the memory is
            # what torch.empty made, whatever it holds
            with torch._C.DisableTorchFunction():
                tensor.fill_(fill)
            return tensor

        return allocate_controlled

    for name, allocate in originals.items():
        setattr(torch, name, controlled_allocation(allocate))
    torch.Tensor.new_empty = controlled_allocation(original_new_empty)
    try:
        yield record
    finally:
        for name, allocate in originals.items():
            setattr(torch, name, allocate)
        torch.Tensor.new_empty = original_new_empty
