"""The order in which Triton's interpreter runs the programs of a launch.

On a GPU a launch's programs run at once, in no order a kernel can count on. The interpreter
runs them one after another, first to last, so a kernel in which one program reads what another
stores in the same launch (a row's sum handed on to the next program, a flag set by the program
before) computes the right answer on a CPU and races on a GPU. A check's cases therefore run
them last to first: such a kernel reads before the other program has stored, as it may on a
GPU, and fails. The first failing case of a part is then run again first to last
(``learning.grader.part_runs``): passing there is the evidence that the order was why.

The interpreter's loop over the grid sets each program's index through its builder's
``set_grid_idx``; mirroring the index there reverses the order and leaves every program the
index it is launched with.
"""

from __future__ import annotations

import contextlib

LAST_FIRST, FIRST_LAST = "last-first", "first-last"
ORDERS = (LAST_FIRST, FIRST_LAST)


def install(order: str) -> bool:
    """Make the interpreter run a launch's programs in ``order``; False where its builder is
    not there to change (no Triton, or a version without ``set_grid_idx``)."""
    if order not in ORDERS:
        raise ValueError(f"unknown program order {order!r}: one of {', '.join(ORDERS)}")
    try:
        from triton.runtime.interpreter import InterpreterBuilder
    except ImportError:
        return False
    current = getattr(InterpreterBuilder, "set_grid_idx", None)
    if current is None:
        return False
    in_order = getattr(current, "in_order", current)
    if order == FIRST_LAST:
        InterpreterBuilder.set_grid_idx = in_order
        return True

    def set_grid_idx(self, x, y, z):
        across, down, deep = self.grid_dim
        return in_order(self, across - 1 - x, down - 1 - y, deep - 1 - z)

    set_grid_idx.in_order = in_order
    InterpreterBuilder.set_grid_idx = set_grid_idx
    return True


@contextlib.contextmanager
def first_to_last():
    """Programs first to last inside, as before outside: a recording (a memory map, the named
    steps) is read program by program, from the first."""
    before = installed()
    install(FIRST_LAST) if before else None
    try:
        yield
    finally:
        if before:
            install(before)


def installed() -> str:
    """The order the interpreter runs programs in now; "" without Triton's interpreter."""
    try:
        from triton.runtime.interpreter import InterpreterBuilder
    except ImportError:
        return ""
    current = getattr(InterpreterBuilder, "set_grid_idx", None)
    return LAST_FIRST if hasattr(current, "in_order") else FIRST_LAST
