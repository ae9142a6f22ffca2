"""The order in which Triton's interpreter runs the programs of a launch.

On a GPU a launch's programs run at once, in no order a kernel can count on. The interpreter
runs them one after another, first to last, so a kernel in which one program reads what another
stores in the same launch (a row's sum handed on to the next program, a flag set by the program
before) computes the right answer on a CPU and races on a GPU. A check's cases therefore run
them in both orders, alternately (``for_case``): last to first in the first case, first to last
in the next, and so on. Whichever of the two programs has the lower index, some case runs the
reader before the writer, as a GPU may, and fails. The first failing case of a part is then run
again in the other order (``learning.grader.part_runs``): passing there is the evidence that
the order was why.

The interpreter's loop over the grid sets each program's index through its builder's
``set_grid_idx``; mirroring the index there reverses the order and leaves every program the
index it is launched with. The method is replaced once, and reads the order from ``_NOW``, so
that the grader's own change of order between cases is no change to the code it watches
(``learning.grader.tampering``); the worker checks after each case that the order is still the
one it set, and ``WATCH`` checks the order the programs actually reached memory in, which a
change made for the call alone and undone before it returned cannot hide.
"""

from __future__ import annotations

import contextlib
import threading

from learning.grader import sanitizer

LAST_FIRST, FIRST_LAST = "last-first", "first-last"
ORDERS = (LAST_FIRST, FIRST_LAST)
ALTERNATE = "alternate"  # a worker's choice: each case its own order, by ``for_case``
OPPOSITE = "opposite"  # ... and each case the other order than ``for_case`` gives it

_NOW = {"order": FIRST_LAST}  # the order the replaced method follows


class Watch:
    """Sees the order in which a launch's programs actually touch memory (a sanitizer
    observer: every load, store and atomic, with the builder that runs it), and remembers
    whether it ever went against ``expected``. Whatever route a module took to put the order
    back during a call (a method set on the builder for the call, the order dict changed and
    restored, a builtin that counts the grid loop down), the programs then reach memory in the
    other order, and this sees it. A program that touches no memory leaves no trace; nor can
    its order matter. Kept per thread: two threads launching at once interleave their
    programs."""

    def __init__(self):
        self.expected = ""  # the order the worker set for the case ("" while none is)
        self.broken = False
        # what one program of a launch read that another stored, in launches with no atomic
        # operation (a race on a GPU, whatever order hid it here), a sentence each
        self.races: list[str] = []
        self._last = threading.local()

    def start(self, order: str):
        """A case begins, in ``order``."""
        self.expected, self.broken, self.races = order, False, []
        self._last.launch = None

    def launch(self, executor, args, names):
        self.finish()
        self._last.program = None
        # "atomic": the launch has an atomic operation, or grew too large to follow
        self._last.launch = {"stored": {}, "loaded": {}, "atomic": False, "race": ""}

    def finish(self) -> list[str]:
        """Close the thread's last launch; the races seen so far in the case."""
        launch = getattr(self._last, "launch", None)
        if launch is not None and launch["race"] and not launch["atomic"] and \
                len(self.races) < MAX_RACES:
            self.races.append(launch["race"])
        self._last.launch = None
        return self.races

    def atomic(self, builder, ptrs, mask):
        """An atomic operation: in order like any access; and the launch may synchronise its
        programs through it (a counter, a flag), so what they share is not called a race."""
        self._program(builder)  # checks the order
        launch = getattr(self._last, "launch", None)
        if launch is not None:
            launch["atomic"] = True

    def access(self, kind, builder, ptrs, mask):
        program = self._program(builder)
        launch = getattr(self._last, "launch", None)
        if program is None or launch is None or launch["race"] or launch["atomic"]:
            return
        # "program 3", "program (1, 0)": as the kernel numbers it
        program = sanitizer.program_text(builder)
        try:
            import numpy as np

            addresses = np.asarray(ptrs.data).astype(np.int64, copy=False)
            active = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
            touched = addresses[active].tolist()
        except (AttributeError, TypeError, ValueError):
            return
        mine, theirs = ("stored", "loaded") if kind == "store" else ("loaded", "stored")
        others = launch[theirs]
        for address in touched:
            other = others.get(address)
            if other is not None and other != program:
                launch["race"] = _race_text(kind, program, other, address)
                return
        kept = launch[mine]
        if len(kept) + len(touched) > MAX_KEPT:  # a launch too large to follow: no claim
            launch["atomic"] = True
            return
        for address in touched:
            kept.setdefault(address, program)

    def _program(self, builder):
        """The running program's number in the launch (checking the order on the way), or
        None where the builder cannot say."""
        if not self.expected:
            return None
        try:
            across, down, deep = builder.grid_dim
            x, y, z = builder.grid_idx
        except (AttributeError, TypeError, ValueError):
            return None
        program = (x * down + y) * deep + z
        last = getattr(self._last, "program", None)
        if last is not None and program != last and \
                (program > last) != (self.expected == FIRST_LAST):
            self.broken = True
        self._last.program = program
        return program


#: Races kept per case (the first is what the verdict says).
MAX_RACES = 3
#: Elements a launch's record of stores (or of loads) may hold: past it the launch is no
#: longer followed and nothing is said of it (the record must not cost the learner's process
#: its memory; every case of the course's exercises stays far below).
MAX_KEPT = 2_000_000


def _race_text(kind: str, program: str, other: str, address: int) -> str:
    tensor = sanitizer.argument_of(address)
    if kind == "store":
        return f"{program} stored into {tensor} where {other} of the same launch had read"
    return f"{program} read from {tensor} what {other} of the same launch stored"


WATCH = Watch()


def for_case(index: int) -> str:
    """The order the case at ``index`` of its part runs in: last to first, then first to last,
    alternately, from the first case."""
    return ORDERS[index % 2]


def chosen(choice: str, index: int) -> str:
    """The order a worker's ``choice`` (an order, ALTERNATE or OPPOSITE) gives the case at
    ``index`` of its part."""
    if choice == ALTERNATE:
        return for_case(index)
    if choice == OPPOSITE:
        return ORDERS[(index + 1) % 2]
    return choice


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
    if not hasattr(current, "in_order"):
        def set_grid_idx(self, x, y, z):
            if _NOW["order"] == LAST_FIRST:
                across, down, deep = self.grid_dim
                x, y, z = across - 1 - x, down - 1 - y, deep - 1 - z
            return current(self, x, y, z)

        set_grid_idx.in_order = current
        InterpreterBuilder.set_grid_idx = set_grid_idx
    _NOW["order"] = order
    return True


def installed() -> str:
    """The order the interpreter runs programs in now; "" where the check has not set one (no
    Triton, or this process never asked): first to last, Triton's own."""
    try:
        from triton.runtime.interpreter import InterpreterBuilder
    except ImportError:
        return ""
    current = getattr(InterpreterBuilder, "set_grid_idx", None)
    return _NOW["order"] if hasattr(current, "in_order") else ""


@contextlib.contextmanager
def first_to_last():
    """Programs first to last inside, as before outside: a recording (a memory map, the named
    steps) is read program by program, from the first."""
    before, watched = installed(), WATCH.expected
    if before:
        install(FIRST_LAST)
        WATCH.expected = FIRST_LAST if watched else ""
    try:
        yield
    finally:
        if before:
            install(before)
            WATCH.expected = watched
