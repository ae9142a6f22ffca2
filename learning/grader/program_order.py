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
    programs.

    It also sees programs share memory with nothing to order them (``races``): a program that
    reads what another stored, or stores (or adds atomically) where any other read. The only
    order a launch's programs have on a GPU is the one their atomic operations make: an atomic
    operation on an element publishes everything its program did before it, and a later
    atomic operation on the same element, by any program, receives all of that (Triton's
    atomics default to acquire-release). So a program may read what another stored only where
    the storing program made an atomic operation after its store, and the reading program made
    one on the same element before its read (the last of a tile's programs to count itself in
    reads the others' partial sums: each stored its own, then counted). A relaxed atomic
    operation, or one at CTA scope, orders nothing between programs. Anything else is a race,
    whatever order hid it here: an atomic count that waits for nothing orders nothing.
    Two programs storing to one place are not judged: both may store the same value."""

    def __init__(self):
        self.expected = ""  # the order the worker set for the case ("" while none is)
        self.broken = False
        # the races seen in the case's launches, a sentence each
        self.races: list[str] = []
        self._last = threading.local()

    def start(self, order: str):
        """A case begins, in ``order``."""
        self.expected, self.broken, self.races = order, False, []
        self._last.launch = None

    def launch(self, executor, args, names):
        self.finish()
        self._last.program = None
        self._last.launch = {
            # element -> (program, step) of its last plain store and of its last atomic
            # operation; "loaded": element -> the (program, step) of its latest plain load
            # there, or {program: step} once a second program read it (a store must be
            # ordered after every reader, not only the first)
            "stored": {}, "loaded": {}, "atomic": {},
            "reads": 0,  # entries of "loaded", against MAX_KEPT
            # element -> the past of the last atomic operation there, as {program: the latest
            # of its steps published}: its own program's steps, and every step it had
            # received, which includes every earlier past published there (an atomic
            # operation receives before it publishes), so the last past holds them all
            "published": {},
            "pasts": 0,  # entries of the pasts published, against MAX_KEPT
            # program -> {another program: the latest of its steps this one has received}
            "received": {},
            "step": 0,  # every access is a step; the programs run one after another here
            "followed": True,  # False once the launch grew too large to follow
            "race": "",
            # element -> (lane, lanes) of the running program's stores since its last
            # tl.debug_barrier(): the lane of its block that stored it, of how many
            "lanes": {}, "lanes_of": None,
        }

    def barrier(self, builder):
        """tl.debug_barrier(): a program's stores before it are seen by all its lanes after."""
        launch = getattr(self._last, "launch", None)
        if launch is not None:
            launch["lanes"].clear()

    def finish(self) -> list[str]:
        """Close the thread's last launch; the races seen so far in the case."""
        launch = getattr(self._last, "launch", None)
        if launch is not None and launch["race"] and len(self.races) < MAX_RACES:
            self.races.append(launch["race"])
        self._last.launch = None
        return self.races

    def atomic(self, builder, ptrs, mask, receives: bool = True, publishes: bool = True):
        """An atomic operation: in order like any access; it receives what earlier atomic
        operations on its elements published, and publishes its own program's past, each as
        its memory order allows (a relaxed one does neither)."""
        self._follow("atomic", builder, ptrs, mask, receives, publishes)

    def access(self, kind, builder, ptrs, mask):
        self._follow(kind, builder, ptrs, mask)

    def _follow(self, kind, builder, ptrs, mask, receives=False, publishes=False):
        program = self._program(builder)
        launch = getattr(self._last, "launch", None)
        if program is None or launch is None or launch["race"] or not launch["followed"]:
            return
        touched = _elements(ptrs, mask)
        if touched is None:
            return
        # "program 3", "program (1, 0)": as the kernel numbers it
        program = sanitizer.program_text(builder)
        launch["step"] += 1
        step = launch["step"]
        received = launch["received"].setdefault(program, {})
        if receives:  # what earlier atomic operations here published
            published = launch["published"]
            pasts = {id(past): past for past in map(published.get, touched) if past}
            for past in pasts.values():
                for other, at in past.items():
                    if received.get(other, -1) < at:
                        received[other] = at
        if kind in ("load", "store") and self._lane_race(launch, program, kind, ptrs, mask,
                                                         touched):
            return
        # what this access may conflict with: a store or an atomic operation before a read; a
        # read or an atomic operation before a store; a read or a store before an atomic
        # operation (two stores are not judged, nor two atomic operations)
        against = {"load": ("stored", "atomic"), "store": ("loaded", "atomic"),
                   "atomic": ("stored", "loaded")}[kind]
        for element in touched:
            for record in against:
                entry = launch[record].get(element)
                if entry is None:
                    continue
                for other, at in (entry.items() if isinstance(entry, dict) else (entry,)):
                    if other != program and received.get(other, -1) < at:
                        launch["race"] = _race_text(kind, record, program, other, element)
                        return
        if kind == "load":
            record = launch["loaded"]
            for element in touched:
                readers = record.get(element)
                if readers is None or (not isinstance(readers, dict) and readers[0] == program):
                    launch["reads"] += readers is None
                    record[element] = (program, step)  # one reader: a tuple, lighter
                    continue
                if not isinstance(readers, dict):
                    readers = record[element] = dict((readers,))
                launch["reads"] += program not in readers
                readers[program] = step
            if launch["reads"] > MAX_KEPT:
                launch["followed"] = False
                return
        elif kind == "store":
            record = launch["stored"]
            if not _room(launch, record, touched):
                return
            for element in touched:
                record[element] = (program, step)
        else:  # publish this program's past: its own steps, and what it has received
            record, published = launch["atomic"], launch["published"]
            if not _room(launch, record, touched):
                return
            for element in touched:
                record[element] = (program, step)
            if publishes:
                past = {**received, program: step}
                launch["pasts"] += len(past)
                if launch["pasts"] > MAX_KEPT:
                    launch["followed"] = False
                    return
                for element in touched:
                    published[element] = past

    @staticmethod
    def _lane_race(launch: dict, program: str, kind: str, ptrs, mask, touched) -> bool:
        """Whether this load reads, at one lane, what another lane of the same program stored
        with no barrier between (then said in ``launch["race"]``); a store is remembered by
        lane. A lane reading back what it stored itself, from a block of as many lanes, is
        the same thread on the GPU."""
        lanes = launch["lanes"]
        if launch["lanes_of"] != program:
            lanes.clear()
            launch["lanes_of"] = program
        if kind == "load" and not lanes:
            return False
        positions = _lanes(ptrs, mask)
        if positions is None:
            return False
        count, where = positions
        if kind == "store":
            if len(lanes) + len(touched) <= MAX_KEPT:
                lanes.update(zip(touched, ((lane, count) for lane in where)))
            return False
        for element, lane in zip(touched, where):
            stored = lanes.get(element)
            if stored is not None and stored != (lane, count):
                tensor = sanitizer.argument_of(element)
                launch["race"] = (
                    f"{LANE_RACE} of {program} read from {tensor} what another of its lanes "
                    f"had stored (lane {lane} of {count} read what lane {stored[0]} of "
                    f"{stored[1]} stored), with no tl.debug_barrier() between: the "
                    "interpreter runs a block's lanes together, in order, but on a GPU they "
                    "are threads that run at once")
                return True
        return False

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


def _room(launch: dict, record: dict, touched: list) -> bool:
    """Whether ``record`` may take ``touched`` within MAX_KEPT elements; a launch too large to
    follow is followed no further, and nothing is said of it."""
    if len(record) + len(touched) <= MAX_KEPT:
        return True
    launch["followed"] = False
    return False


def _elements(ptrs, mask) -> list[int] | None:
    """The addresses an access touches (its active lanes), or None where it cannot be read."""
    try:
        import numpy as np

        addresses = np.asarray(ptrs.data).astype(np.int64, copy=False)
        active = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
        return addresses[active].tolist()
    except (AttributeError, TypeError, ValueError):
        return None


def _lanes(ptrs, mask) -> tuple[int, list[int]] | None:
    """The number of lanes of an access's block and the positions of its active ones (in the
    order ``_elements`` gives their addresses), or None where it cannot be read."""
    try:
        import numpy as np

        addresses = np.asarray(ptrs.data)
        active = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
        return int(addresses.size), np.flatnonzero(active.reshape(-1)).tolist()
    except (AttributeError, TypeError, ValueError):
        return None


#: How a race between the lanes of one program begins (``learning.grader.compare`` says it
#: as such, not as one between programs)
LANE_RACE = "a lane"
#: Races kept per case (the first is what the verdict says).
MAX_RACES = 3
#: Elements a launch's record of stores (or of loads) may hold: past it the launch is no
#: longer followed and nothing is said of it (the record must not cost the learner's process
#: its memory; every case of the course's exercises stays far below).
MAX_KEPT = 2_000_000


def _race_text(kind: str, record: str, program: str, other: str, address: int) -> str:
    tensor = sanitizer.argument_of(address)
    first = {"stored": "stored", "loaded": "read",
             "atomic": "changed with an atomic operation"}[record]
    if kind == "load":
        what = f"{program} read from {tensor} what {other} of the same launch {first}"
    elif kind == "store":
        what = f"{program} stored into {tensor} where {other} of the same launch had {first}"
    else:
        what = (f"{program} changed {tensor} with an atomic operation where {other} of the "
                f"same launch had {first}")
    return (f"{what}, and no atomic operation ordered the two (for that, {other} makes one "
            f"after its access, and {program} one on the same element before its own)")


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
