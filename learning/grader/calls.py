"""One call of the learner's function on a case: its input built, its outputs pre-filled with NaN
where the case asks, kernel launches counted, and what happened described as plain data.

Runs in the learner's process (``learning.grader.worker``).
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import random
import sys
import threading
import time
import types
import warnings

from learning.grader import allocations, hooks, lineage, plain
from learning.grader.declarations import Case
from learning.grader.learner_code import cut as _cut
from learning.grader.learner_code import (
    dot_shapes,
    learner_traceback,
    root_cause,
    safe_str,
    suggestion,
)
from learning.grader.returned import Raised, Returned
from learning.grader.summarise import is_tensor, plain_tensor, summarise
from learning.grader.tensors import TensorSpec

# Written over fresh allocations on the second run of a case that came back with NaN: an element
# still holding it was never written. Negative, so no softmax or norm output can equal it.
UNWRITTEN_SENTINEL = -12345.0


def _materialise(args: tuple, device: str) -> tuple:
    return tuple(a.build(device) if isinstance(a, TensorSpec) else copy.deepcopy(a) for a in args)


def _same_memory(tensor):
    """A new tensor object over ``tensor``'s memory, with its offset, shape and strides."""
    import torch

    view = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    return view.set_(tensor.untyped_storage(), tensor.storage_offset(), tensor.size(),
                     tensor.stride())


def _snapshot(args: tuple) -> tuple:
    return tuple(a.clone() if is_tensor(a) else copy.deepcopy(a) for a in args)


# Every Python thread's frame, and this one's number: taken when the grader is imported, before
# the learner's code could replace either (``LaunchCounter._note_threads``)
_THREAD_FRAMES = sys._current_frames
_THIS_THREAD = threading.get_ident


# A tensor argument whose memory is larger than this is not copied after a launch: no case's
# output comes near it. Up to LARGEST_DIGESTED_BYTES its bytes are hashed instead, in chunks of
# DIGEST_CHUNK (``_chunk_digests``), so that a result in a view of a buffer that large is still
# compared with what the last launch left there; past it, the output is not compared.
LARGEST_KEPT_BYTES = 256 * 2**20
LARGEST_DIGESTED_BYTES = 4 * 2**30
DIGEST_CHUNK = 2**20
# The most the copies of tensors given to launches (_note_fed) hold in one call: a launcher that
# feeds torch's results to kernel after kernel must not run out of memory because of the check
FED_BYTES = 256 * 2**20


class LaunchCounter:
    """Counts launches of any @triton.jit function, compiled or interpreted, so that the grader
    can tell a kernel part's result that no kernel computed (torch.softmax, say); and keeps what
    the last launch left in the memory of each tensor it was given, so that a result the kernel
    stored and other code then changed (``y.copy_(torch.softmax(x))`` after the launch) is seen."""

    def __init__(self):
        self.count = 0
        self.installed = False
        # storage address: (the storage, a copy of it as the last launch given it left it)
        self.left: dict[int, tuple] = {}
        # {address: (storage, its chunks' digests)}: what a launch left in a memory too large
        # to copy, hashed (``_chunk_digests``)
        self.left_digests: dict[int, tuple] = {}
        # the addresses of memories a launch was given too large even to hash (past
        # LARGEST_DIGESTED_BYTES): a result in one cannot be compared with what a launch left
        self.too_large: set[int] = set()
        self.uncompared: list[int] = []  # the returned tensors (by position) in one of them
        # what launches of earlier calls left in small memories: address -> a copy of the
        # bytes (``_left_by_kernels``), the latest last
        self.kernels_left: dict[int, object] = {}
        # of those, what earlier cases' calls left (the runs for evidence of a case look up
        # only these: not what the same case's first call left), set as each case starts
        self.earlier_left: dict[int, object] = {}
        # address: a copy of each small memory as the first launch of this call given it found
        # it, so that only memories a kernel changed are kept in kernels_left (a table only
        # read is no workspace of the kernels')
        self.first_seen: dict[int, object] = {}
        # storage address: the storage, of every tensor a launch of this call was given (held,
        # so that no other tensor takes its address while the call runs)
        self.given: dict[int, object] = {}
        # (torch function, a copy) of each tensor a launch of this call was given that torch
        # computed during it (_note_fed), and the call's record of what torch made
        self.fed: list[tuple[str, object]] = []
        self.recorder = None
        self.inputs: set[int] = set()  # the memories of the call's tensor arguments
        # (position, the call's tensor argument, a copy of it as the caller gave it): each
        # launch compares them (_compare_inputs), and the positions found changed are kept
        self.originals: list[tuple[int, object, object]] = []
        self.changed_inputs: set[int] = set()
        # launches that ran past ``run`` (the interpreter's GridExecutor called directly):
        # counted nowhere else, so the tampering check sees any as a change
        self.bypassed = 0
        self._inside = threading.local()
        self.poison = False  # change what would be noted as fed (depends_on_fed's run)
        # change what each launch stored, just after it (ignores_kernels's run)
        self.clobber = False
        # the tensors launches were given in a run that changes what they store (views, as
        # the launches leave them), up to POOL_BYTES of memory: whether all were kept
        self.clobbered: dict = {}
        self.clobbered_bytes = 0
        self.clobbered_whole = True
        # change what the torch functions of these names computed, before a launch reads it
        # (answer_followed's run)
        self.poison_from: frozenset[str] = frozenset()
        # the Python threads there were before the learner's code ran (``install``), and the
        # most others seen running as a kernel was launched, or as the call ended
        self.threads_before: frozenset[int] = frozenset()
        self.other_threads = 0
        # storage address: what the record of torch's work held for it as a launch left it
        # (``_keep``); and whether a memory changed before a later launch with no torch
        # function seen writing it (``_note_unseen_writes``), or a kernel ran pre-run hooks
        self.left_made: dict[int, object] = {}
        self.unseen_between = False
        self.hooked = ""
        # every torch function the values given to this call's launches came from
        # (lineage.ancestry): a kernel given torch's answer in disguise still was given it;
        # lineage.OUTSIDE for values made outside torch of at least fed_outside_size elements
        self.fed_from: set[str] = set()
        self.fed_outside_size = 2
        self.outside_size = 0  # the most elements of such values given to the launches
        # storage address: (elements of it given to launches, its size in elements)
        self.outside_views: dict[int, tuple[int, int]] = {}
        # the different plain numbers (floats) the call's launches were given as arguments
        # (at most MAX_NUMBERS_KEPT kept), and whether to change each before its launch
        # (numbers_followed's run)
        self.numbers: set[float] = set()
        self.poison_numbers = False
        # (inputs_followed's run) change, before each launch, the call's inputs and copies of
        # them that it is given, each memory once (those done)
        self.poison_inputs = False
        self.inputs_poisoned: set[int] = set()
        self.blocked: frozenset = frozenset()  # the part's torch answers (set by run)
        # a call made again for evidence, with the same inputs, returned having launched no
        # kernel (a result kept from the first call and handed back): set by those runs
        self.repeat_launched_nothing = False
        # the kind of the first object a launch was given as a pointer whose memory the
        # check could not follow (no tensor, nor a wrapper of one it could find)
        self.pointers_unseen = ""
        # what the memories the grader's runs changed held before (``_change``)
        self.changed_memories: dict[int, tuple] = {}
        self.changed_bytes = 0
        # the memories launches changed, noted where a set (the runs that change what the
        # kernels were given: a result no kernel wrote there is no evidence of what they do)
        self.wrote: set[int] | None = None

    def _note_threads(self):
        """Count the Python threads the learner's code started that are running now: one that
        runs while a kernel does can write the answer into its output (the kernel waiting on a
        flag), and what another thread's torch computes is not recorded (lineage's record is
        the calling thread's)."""
        others = set(_THREAD_FRAMES()) - self.threads_before - {_THIS_THREAD()}
        self.other_threads = max(self.other_threads, len(others))

    def install(self) -> bool:
        self.threads_before = frozenset(_THREAD_FRAMES())
        classes = []
        with contextlib.suppress(ImportError):
            from triton.runtime.jit import JITFunction

            classes.append(JITFunction)
        with contextlib.suppress(ImportError):
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        for function_class in classes:
            if hasattr(function_class, "run"):
                function_class.run = self._counted(function_class.run)
                self.installed = True
        with contextlib.suppress(ImportError, AttributeError):
            from triton.runtime.interpreter import GridExecutor

            GridExecutor.__call__ = self._watched(GridExecutor.__call__)
        with contextlib.suppress(ImportError, AttributeError):
            # a compiled kernel kept from a first launch and run again through its own runner
            # (``compiled[grid](...)``, lesson 12's quicker launch) passes no JITFunction.run
            from triton.compiler.compiler import CompiledKernel

            CompiledKernel.__getitem__ = self._counted_runner(CompiledKernel.__getitem__)
        return self.installed

    def _watched(self, original_call):
        """The interpreter's grid of programs, noted where it runs outside a counted launch."""
        counter = self

        def call(self, *args, **kwargs):
            if not getattr(counter._inside, "depth", 0):
                counter.bypassed += 1
            return original_call(self, *args, **kwargs)

        return call

    def _counted_runner(self, original_getitem):
        """``CompiledKernel.__getitem__``, whose runner is counted as a launch is (unless it
        runs inside one already counted)."""
        counter = self

        def through(_compiled, runner, *args, **kwargs):
            return runner(*args, **kwargs)

        counted = self._counted(through)

        def getitem(self, grid):
            runner = original_getitem(self, grid)

            def launch(*args, **kwargs):
                if getattr(counter._inside, "depth", 0):
                    return runner(*args, **kwargs)
                return counted(self, runner, *args, **kwargs)

            return launch

        return getitem

    def _counted(self, original_run):
        counter = self

        def run(self, *args, **kwargs):
            counter.count += 1
            arguments = counter._as_tensors([*args, *kwargs.values()])
            counter._compare_inputs()
            counter._note_threads()
            counter._note_unseen_writes(arguments)
            if getattr(self, "pre_run_hooks", None):  # code Triton runs inside the launch
                counter.hooked = counter.hooked or getattr(self, "__name__", "a kernel")
            counter._note_fed(arguments)
            if counter.poison_inputs:
                counter._poison_inputs(arguments)
            counter._note_first_seen(arguments)
            # tuples as given, not flattened; and the module globals the kernel reads (a
            # tl.constexpr tuple set before the launch reaches it as much as an argument)
            read_globals = _globals_read(self)
            counter._note_numbers([*args, *(v for k, v in kwargs.items()
                                            if k not in LAUNCH_OPTIONS),
                                   *read_globals.values()])
            changed_globals = {}
            if counter.poison_numbers:
                args = tuple(_other_number(a) for a in args)
                kwargs = {k: v if k in LAUNCH_OPTIONS else _other_number(v)
                          for k, v in kwargs.items()}
                changed_globals = _change_globals(self, read_globals)
            noting = counter.wrote is not None
            before = counter._given_before(arguments) if counter.clobber or noting else None
            counter._inside.depth = getattr(counter._inside, "depth", 0) + 1
            try:
                launched = original_run(self, *args, **kwargs)
            finally:
                counter._inside.depth -= 1
                _put_globals_back(self, changed_globals)
            # and after: Triton runs a kernel's pre-run hooks inside the launch
            counter._compare_inputs()
            counter._note_threads()
            counter._keep(arguments)
            if noting:
                counter._note_wrote(arguments, before)
            if counter.clobber:
                counter._clobber(arguments, before)
            return launched

        return run

    def _as_tensors(self, arguments: list) -> list:
        """The launch's arguments, each object Triton takes as a pointer that is no torch
        tensor (triton.reinterpret's wrapper, any object with data_ptr and dtype) seen as a
        tensor over the memory it points into, so that every check of a launch's tensors
        sees it too. One whose memory is none the check can find is noted (``unseen``)."""
        seen = []
        for argument in arguments:
            if type(argument) in (tuple, list) or _is_named_tuple(argument):
                # Triton takes tuples of arguments (a kernel parameter that is a tuple of
                # pointers): each of them is the launch's as much as a lone one
                seen += self._as_tensors(list(argument))
                continue
            if is_tensor(argument):
                seen.append(argument)
                continue
            with contextlib.suppress(Exception):  # an attribute that raises: no wrapper
                base = getattr(argument, "base", None)
                if is_tensor(base):  # a tensor descriptor's tensor, a reinterpreted one
                    seen.append(plain_tensor(base))
                    continue
            if not callable(getattr(argument, "data_ptr", None)):
                seen.append(argument)
                continue
            tensor = _memory_of(argument, self.given, self.recorder)
            if tensor is None:
                self.pointers_unseen = self.pointers_unseen or _type_name(argument)
                seen.append(argument)
            else:
                seen.append(tensor)
        return seen

    def _compare_inputs(self):
        """Note the call's tensor arguments that hold other values than the caller gave, as a
        kernel is launched: a kernel that reads an input the call changed before the launch
        (torch's answer written into it through numpy, say, and the input put back after) does
        not compute from what it was given, whatever the input holds once the call returns."""
        for position, argument, original in self.originals:
            if position in self.changed_inputs:
                continue
            with contextlib.suppress(Exception):  # an input that cannot be read is not noted
                if not _same_bits(plain_tensor(argument).detach(), original):
                    self.changed_inputs.add(position)

    def _note_unseen_writes(self, arguments: list):
        """Note a memory an earlier launch of the call was given that holds other values now
        than it left there, where no torch function the check saw wrote into it since: code
        outside torch's record changed it between the launches (numpy through a tensor's
        view, another thread or process), which a kernel storing nothing then passes on."""
        made = getattr(self.recorder, "made", None)
        if made is None or self.unseen_between:
            return
        for argument in arguments:
            if not is_tensor(argument):
                continue
            with contextlib.suppress(Exception):  # a memory that cannot be read is not noted
                storage = argument.untyped_storage()
                address = storage.data_ptr()
                kept = self.left.get(address)
                if kept is None or made.get(address) is not self.left_made.get(address):
                    continue  # not left by a launch, or torch wrote it since (seen)
                if not _same_storage(storage, kept[1]):
                    self.unseen_between = True
                    return

    def _note_fed(self, arguments: list):
        """Copy each tensor this launch is given that torch computed during the call (or that
        wraps values computed outside torch), as it is before the kernel runs: a result equal
        to one of them was passed through the kernel (``passed_through``). With ``poison``,
        change such a tensor's values instead, before the kernel reads them
        (``depends_on_fed``)."""
        made = getattr(self.recorder, "made", None)
        if made is None:
            return
        for argument in arguments:
            if not is_tensor(argument):
                continue
            with contextlib.suppress(Exception):  # a tensor that cannot be read is not noted
                tensor = plain_tensor(argument)
                name = lineage.computed_by_torch(tensor, made, self.given, wrapped=True,
                                                 inputs=self.inputs)
                address = tensor.untyped_storage().data_ptr()
                came_from = lineage.ancestry(address, made, self.inputs)
                work = lineage.WORK | getattr(self.recorder, "reducing", set()) | \
                    lineage.families_in(came_from)
                if came_from & work and not lineage.reads_from(
                        address, made, self.inputs | (set(self.given) - {address})):
                    # computed from shapes and constants alone (a causal count of keys): no
                    # value of the answer's (an earlier launch given this very memory is not
                    # where it came from)
                    came_from = came_from - work
                # a workspace kept from an earlier call, as its kernels left it: no value of
                # it was made outside the kernels
                kernels_left = self._left_by_kernels(tensor)
                if kernels_left:
                    came_from = came_from - {lineage.OUTSIDE}
                if name in lineage.WRAPS:
                    came_from = came_from | {lineage.OUTSIDE}  # torch.tensor of plain values
                unseen = not name and not kernels_left and \
                    lineage.made_unseen(tensor, made, self.given, self.inputs)
                if unseen and tensor.numel() > 1 and not _one_value(tensor) and \
                        self._values_beyond(tensor, lineage.fill_values(
                            tensor, made, self.given, self.inputs)):
                    # an allocation holds one value (the check's fill, zeros): values that vary
                    # were written into it by nothing the record saw (numpy, through its memory;
                    # a float's bits in an integer tensor as much as floats). Not the inputs'
                    # own values beside the constants the fills it came from put there: an
                    # input padded (torch.cat with torch.full, a slice of new_full assigned)
                    came_from = came_from | {lineage.OUTSIDE}
                if lineage.OUTSIDE in came_from:
                    # values made outside torch (numpy's, plain Python's) count only in
                    # number: an answer computed there, however changed, holds as many values
                    # as the result (a kernel's few parameters packed in a tensor do not),
                    # counted over all the call's launches (handed over in pieces, it still
                    # does)
                    outside = self._outside_so_far(tensor)
                    if outside < self.fed_outside_size:
                        came_from = came_from - {lineage.OUTSIDE}
                    else:
                        self.outside_size = max(self.outside_size, outside)
                self.fed_from |= came_from
                if came_from & self.poison_from:
                    # the whole memory behind it: a view handed to the kernel may leave out
                    # the rows torch wrote its answer into, around the ones the kernel stores
                    self._change(_whole_memory(tensor.detach()))
                    continue
                if unseen:
                    # values put there by nothing seen (numpy writing into an allocated
                    # output, torch with its function mode off): a fresh output holds only the
                    # check's fill, which no result matches
                    name = lineage.OUTSIDE
                size = tensor.numel() * tensor.element_size()
                if not name or size > LARGEST_KEPT_BYTES:
                    continue
                if self.poison:
                    self._change(tensor.detach())
                elif sum(f.numel() * f.element_size() for _, f in self.fed) + size <= FED_BYTES:
                    self.fed.append((name, tensor.detach().clone()))

    def _poison_inputs(self, arguments: list):
        """Change, before the launch, the whole memory of every tensor it is given that holds
        the call's inputs' own values (an input, a copy, a cast, a padded or contiguous copy,
        one scaled or shifted by a constant: ``lineage.input_like``), each memory once in the
        call (``inputs_followed``)."""
        made = getattr(self.recorder, "made", None) or {}
        for argument in arguments:
            if not is_tensor(argument):
                continue
            with contextlib.suppress(Exception):  # a tensor that cannot be changed is left
                tensor = plain_tensor(argument).detach()
                address = tensor.untyped_storage().data_ptr()
                if address in self.inputs_poisoned or not tensor.is_floating_point():
                    continue  # (whole numbers changed could send a kernel's loads anywhere)
                blocked = self.blocked | getattr(self.recorder, "reducing", set())
                if lineage.input_like(address, made, self.inputs, blocked):
                    self.inputs_poisoned.add(address)
                    self._change(_whole_memory(tensor))

    def _note_first_seen(self, arguments: list):
        """Copy each small memory the first launch of the call that is given it finds."""
        for argument in arguments:
            if is_tensor(argument):
                with contextlib.suppress(Exception):  # a memory that cannot be read: not kept
                    storage = argument.untyped_storage()
                    if storage.data_ptr() not in self.first_seen and \
                            storage.nbytes() <= KERNEL_LEFT_LARGEST:
                        self.first_seen[storage.data_ptr()] = storage.clone()

    def _change(self, tensor) -> None:
        """``_perturb`` a tensor a launch is given, keeping what its memory held first (up to
        CHANGED_KEPT_BYTES in a run), for ``put_back_changed`` once the grader's run is over: a
        memory that outlives the call (a scratch buffer the learner's module keeps between
        calls) must not carry the grader's changes into the learner's later calls."""
        import torch

        with contextlib.suppress(Exception):  # a memory that cannot be kept is still changed
            whole = _whole_memory(tensor)
            address = whole.untyped_storage().data_ptr()
            size = whole.untyped_storage().nbytes()
            if address not in self.changed_memories and \
                    self.changed_bytes + size <= CHANGED_KEPT_BYTES:
                with torch._C.DisableTorchFunction():  # the grader's own copy, unrecorded
                    self.changed_memories[address] = (whole, whole.clone())
                self.changed_bytes += size
        _perturb(tensor)

    def put_back_changed(self) -> None:
        """Put back what the memories ``_change`` changed in the grader's run held before."""
        import torch

        with torch._C.DisableTorchFunction():
            for whole, kept in self.changed_memories.values():
                with contextlib.suppress(Exception):
                    whole.copy_(kept)
        self.changed_memories, self.changed_bytes = {}, 0

    def _values_beyond(self, tensor, constants: set | None) -> bool:
        """Whether ``tensor`` holds a value that is neither one of the call's inputs' nor one of
        ``constants`` (the fills it came from; None: not known, so yes), compared as values of
        its own dtype (a cast copy holds its input's values), NaN matching NaN."""
        import torch

        def comparable(held) -> bool:  # floats and integers (not bool, nor complex)
            return held.dtype != torch.bool and not held.is_complex()

        values = tensor.detach().reshape(-1)
        if constants is None or not comparable(values):
            return True
        with torch._C.DisableTorchFunction():  # the grader's own steps, unrecorded
            return self._holds_other_values(values, constants, comparable)

    def _holds_other_values(self, values, constants: set, comparable) -> bool:
        import torch

        known = [kept.detach().reshape(-1).to(values.dtype).double()
                 for _, _, kept in self.originals if comparable(kept)]
        known.append(torch.tensor(sorted(constants), dtype=torch.float64).to(values.dtype)
                     .double())
        held = torch.cat([k.to(values.device) for k in known])
        distinct = torch.unique(values).double()
        nan = torch.isnan(distinct)
        if bool(nan.any()) and not bool(torch.isnan(held).any()):
            return True
        return bool((~torch.isin(distinct[~nan], held)).any())

    def _outside_so_far(self, tensor) -> int:
        """The values made outside torch that the call's launches were given, this tensor's
        included: each memory's views counted together, up to the memory's size, in values of
        OUTSIDE_VALUE_BYTES or fewer (two float32 answers packed in one float64 are two)."""
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        width = max(1, min(tensor.element_size(), OUTSIDE_VALUE_BYTES))
        viewed, size = self.outside_views.get(address, (0, 0))
        self.outside_views[address] = (
            viewed + tensor.numel() * max(1, tensor.element_size() // width),
            storage.nbytes() // width)
        return sum(min(viewed, size) for viewed, size in self.outside_views.values())

    def _note_numbers(self, arguments: list):
        """Keep the plain numbers a launch is given (a kernel's eps, or values computed outside
        it handed over one by one)."""
        if len(self.numbers) < MAX_NUMBERS_KEPT:
            self.numbers.update(_numbers_in(arguments))

    def _given_before(self, arguments: list) -> dict:
        """Copies of the tensors this launch is given, before it runs: the ones it writes are
        then told apart (``_clobber``). A tensor too large to copy is left out."""
        kept = {}
        for argument in arguments:
            if is_tensor(argument):
                with contextlib.suppress(Exception):
                    tensor = plain_tensor(argument).detach()
                    if tensor.numel() * tensor.element_size() <= LARGEST_KEPT_BYTES:
                        kept[id(argument)] = tensor.clone()
        return kept

    def _note_wrote(self, arguments: list, before: dict):
        """Note the memory of every tensor the launch changed (or that was too large to tell)."""
        for argument in arguments:
            if not is_tensor(argument):
                continue
            with contextlib.suppress(Exception):  # a tensor that cannot be read is not noted
                tensor = plain_tensor(argument).detach()
                kept = before.get(id(argument))
                if kept is None or not _same_bits(tensor, kept):
                    self.wrote.add(tensor.untyped_storage().data_ptr())

    def _clobber(self, arguments: list, before: dict):
        """Change, just after the launch, every tensor it wrote (one whose bits it changed; one
        too large to compare, unless it is an input of the call): what the kernel stored is
        then not what the call's later steps find (``ignores_kernels``). A tensor the kernel
        only read is left as it was, the call's own data (a clone of the input, say)."""
        done = set()
        for argument in arguments:
            if not is_tensor(argument):
                continue
            with contextlib.suppress(Exception):  # a tensor that cannot be changed is left
                tensor = plain_tensor(argument).detach()
                where = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(),
                         tuple(tensor.shape), tuple(tensor.stride()))
                if where in done:
                    continue
                if where not in self.clobbered and \
                        self.clobbered_bytes + tensor.untyped_storage().nbytes() <= POOL_BYTES:
                    # what the call's result may hold: these tensors as the launches leave them
                    self.clobbered[where] = tensor
                    self.clobbered_bytes += tensor.untyped_storage().nbytes()
                elif where not in self.clobbered:
                    self.clobbered_whole = False
                kept = before.get(id(argument))
                if kept is None and where[0] in self.inputs or \
                        kept is not None and _same_bits(tensor, kept):
                    continue  # read, not written
                done.add(where)
                self._change(tensor)

    def passed_through(self, result) -> str:
        """The torch function whose values a returned tensor holds, to within ``PASSED_ON``
        (cast to the result's dtype), where a launch was given them (``_note_fed``), whole or
        as a part of a larger tensor (``_held_within``): the kernel may have passed them on
        instead of computing them (``depends_on_fed`` then asks for evidence). Results of one
        repeated value are left out: a constant matches by chance."""
        returned = [result] if is_tensor(result) else \
            list(result) if type(result) in (list, tuple) else []
        for tensor in returned:
            if not is_tensor(tensor):
                continue
            with contextlib.suppress(Exception):  # not comparable: not this one
                tensor = plain_tensor(tensor).detach()
                for name, fed in self.fed:
                    if fed.numel() < tensor.numel() or tensor.numel() < 2 or \
                            _one_value(tensor) or fed.device != tensor.device:
                        continue
                    if fed.numel() == tensor.numel() and not _one_value(fed) and \
                            _passed_on(fed, tensor) or \
                            fed.numel() > tensor.numel() and _held_within(fed, tensor):
                        return name
                name = _assembled_from(self.fed, tensor)
                if name:
                    return name
        return ""

    def _keep(self, arguments: list):
        """Copy the memory of every tensor argument as the launch left it (a copy queued on the
        launch's own stream, so taken after the kernel ends)."""
        for argument in arguments:
            if not is_tensor(argument):
                continue
            with contextlib.suppress(Exception):  # a tensor that cannot be read is not kept
                storage = argument.untyped_storage()
                self.given[storage.data_ptr()] = storage
                if storage.nbytes() > LARGEST_DIGESTED_BYTES:
                    self.too_large.add(storage.data_ptr())
                elif LARGEST_KEPT_BYTES < storage.nbytes() <= LARGEST_DIGESTED_BYTES:
                    self.left.pop(storage.data_ptr(), None)
                    self.left_digests[storage.data_ptr()] = (storage, _chunk_digests(storage))
                elif storage.nbytes() <= LARGEST_KEPT_BYTES:
                    # the storage itself is held too: freed, its address could be reused by a
                    # tensor no kernel was given
                    self.left[storage.data_ptr()] = (storage, storage.clone())
                    made = getattr(self.recorder, "made", None)
                    if made is not None:
                        self.left_made[storage.data_ptr()] = made.get(storage.data_ptr())

    def taken(self) -> int | None:
        """Launches since the last call, or None when launches cannot be seen here."""
        count, self.count = self.count, 0
        self._remember_left()
        self.first_seen = {}
        self.left, self.given, self.fed, self.left_digests = {}, {}, [], {}
        self.too_large = set()
        self.other_threads = 0
        self.left_made, self.unseen_between, self.hooked = {}, False, ""
        self.fed_from, self.outside_size, self.outside_views = set(), 0, {}
        self.numbers = set()
        return count if self.installed else None

    def unseen_pointers(self) -> str:
        """The kind of object noted by ``_as_tensors`` since the last call, cleared."""
        kind, self.pointers_unseen = self.pointers_unseen, ""
        return kind

    def _remember_left(self) -> None:
        """Keep what this call's launches left in their small memories for the next calls."""
        for address, (_, copy_left) in self.left.items():
            found = self.first_seen.get(address)
            if copy_left.nbytes() <= KERNEL_LEFT_LARGEST and found is not None and (
                    not _same_storage(found, copy_left) or _one_fill(copy_left)):
                # changed by the kernels (partial sums), or one value they put back (counters
                # back at zero): a workspace of theirs; not a table they only read
                self.kernels_left.pop(address, None)
                self.kernels_left[address] = copy_left
        while sum(kept.nbytes() for kept in self.kernels_left.values()) > KERNELS_LEFT_BYTES:
            self.kernels_left.pop(next(iter(self.kernels_left)))

    def _left_by_kernels(self, tensor) -> bool:
        """Whether ``tensor``'s memory holds, byte for byte, what a launch of an earlier call
        left there: a workspace the learner's launcher keeps between calls (its counters put
        back to zero by the kernels themselves, say), not values made outside torch."""
        with contextlib.suppress(Exception):
            storage = tensor.untyped_storage()
            kept = self.earlier_left.get(storage.data_ptr())
            return kept is not None and kept.device == storage.device and \
                _same_storage(storage, kept)
        return False

    def computed_by_torch(self, result, made: dict) -> str:
        """The torch function that computed a returned tensor (learning.grader.lineage), or
        "" where each came from a kernel's memory, an input or an allocation."""
        returned = [result] if is_tensor(result) else \
            list(result) if type(result) in (list, tuple) else []
        for tensor in returned:
            if is_tensor(tensor):
                with contextlib.suppress(Exception):
                    # without the inputs: a memory no torch function was seen making may
                    # still be torch's (autograd's engine makes gradients unseen)
                    name = lineage.computed_by_torch(plain_tensor(tensor), made, self.given,
                                                     wrapped=True)
                    if name:
                        return name
        return ""

    def written_by_torch(self, result, made: dict) -> str:
        """The torch function that computed what was written into a returned tensor's memory,
        a memory a launch was given (``lineage.computed_into``): the walk back from the result
        stops at such a memory (the kernel's), so what torch put there before a later launch,
        which need not store anything, is looked at with ``ignores_kernels``. "" when none did
        (a copy of an input, an allocation: a kernel working in place starts from those)."""
        returned = [result] if is_tensor(result) else \
            list(result) if type(result) in (list, tuple) else []
        for tensor in returned:
            with contextlib.suppress(Exception):
                address = plain_tensor(tensor).untyped_storage().data_ptr()
                if address in self.given:
                    name = lineage.computed_into(address, made)
                    if name:
                        return name
        return ""

    def changed_since_launch(self, result) -> tuple[int, ...]:
        """The positions of the returned tensors (0 for a lone tensor) whose values differ from
        what the last launch that was given their memory left there: code outside a kernel
        changed them afterwards."""
        import torch

        returned = [result] if is_tensor(result) else \
            list(result) if type(result) in (list, tuple) else []
        changed = []
        self.uncompared = []
        for position, tensor in enumerate(returned):
            if not is_tensor(tensor):
                continue
            try:
                tensor = plain_tensor(tensor).detach()
                kept = self.left.get(tensor.untyped_storage().data_ptr())
                digested = self.left_digests.get(tensor.untyped_storage().data_ptr())
                if kept is None and digested is not None:
                    if _chunks_changed(tensor, digested[1]):
                        changed.append(position)
                    continue
                if kept is None and tensor.untyped_storage().data_ptr() in self.too_large:
                    self.uncompared.append(position)
                    continue
                if kept is None:
                    # a copy of a launch's memory (out.clone()): that memory as the launch
                    # left it, or torch's answer written over it before the copy was taken
                    if self._copied_after_change(tensor):
                        changed.append(position)
                    continue
                left = kept[1]
                then = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
                then.set_(left, tensor.storage_offset(), tensor.shape, tensor.stride())
                if not _same_bits(tensor, then):
                    changed.append(position)
            except Exception:  # noqa: BLE001 - not comparable (a view the copy cannot take)
                continue
        return tuple(changed)


    def _copied_after_change(self, tensor) -> bool:
        """Whether ``tensor`` was copied (through copies alone, in the call's record) from a
        memory a launch was given that holds other bytes now than the launch left there."""
        made = getattr(self.recorder, "made", None)
        if made is None:
            return False
        for address in lineage.copied_memories(tensor, made):
            kept = self.left.get(address)
            if kept is not None and not _same_storage(kept[0], kept[1]):
                return True
        return False


def _chunk_digests(storage) -> list[bytes]:
    """A digest of every DIGEST_CHUNK bytes of ``storage`` (copied to the host first, where it
    is a GPU's): what a launch left in a memory too large to keep a copy of."""
    import hashlib

    import torch

    data = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    data = data.cpu().numpy()
    return [hashlib.blake2b(data[start:start + DIGEST_CHUNK], digest_size=16).digest()
            for start in range(0, len(data), DIGEST_CHUNK)]


def _chunks_changed(tensor, digests: list[bytes]) -> bool:
    """Whether any chunk of its memory that ``tensor`` (a view) lies in holds other bytes now
    than when ``digests`` were taken."""
    size = tensor.element_size()
    first = tensor.storage_offset() * size
    span = sum((n - 1) * abs(step) for n, step in zip(tensor.shape, tensor.stride()) if n > 0)
    last = first + span * size + size if tensor.numel() else first
    now = _chunk_digests(tensor.untyped_storage())
    return any(now[i] != digests[i] for i in range(first // DIGEST_CHUNK,
                                                     min(len(now), -(-last // DIGEST_CHUNK))))


# How close a result must be to a tensor a kernel was given for the kernel to have possibly
# passed it on (a cast to the output's dtype, a factor of 1 + 1e-7 in the kernel): far tighter
# than what separates a softmax from its scores, or a product from its operands
# (read-only: the learner's code shares this process, learning.grader.tampering)
PASSED_ON = types.MappingProxyType({"rtol": 1e-3, "atol": 1e-6})


def _passed_on(fed, result) -> bool:
    """``result`` holds ``fed``'s values, cast to its dtype, to within ``PASSED_ON``."""
    import torch

    if fed.dtype == result.dtype and _same_bits(result, fed.reshape(result.shape)):
        return True
    if not (fed.is_floating_point() and result.is_floating_point()):
        return False
    cast = fed.to(result.dtype).reshape(result.shape).double()
    return bool(torch.allclose(result.double(), cast, equal_nan=True, **PASSED_ON))


def _held_within(fed, result) -> bool:
    """``result`` holds the values of a part of ``fed``, a larger tensor a launch was given
    (torch's answer with a value appended, or in the far half of an allocation the kernel
    copies from): a run of ``result.numel()`` elements of ``fed`` in its row-major order, or,
    for a result of rows, a block of ``fed``'s rows (its columns of a wider tensor). Looked
    for where ``fed`` holds the result's first values in a row (up to LEADING_VALUES of them,
    no further than its first row, and the value of that row most unlike its first), at the
    first CANDIDATE_STARTS such places."""
    import torch

    if not (fed.is_floating_point() and result.is_floating_point()) and \
            fed.dtype != result.dtype:
        return False
    flat = fed.contiguous().flatten()
    values = flat.to(result.dtype).double()
    wanted = result.contiguous().flatten().double()
    size = wanted.numel()
    width = fed.shape[-1] if fed.dim() >= 2 else 0
    rows, cols = (result.shape[0], result.numel() // result.shape[0]) \
        if result.dim() == 2 and result.shape[0] > 0 else (0, 0)
    starts = torch.isclose(values, wanted[0].expand_as(values), equal_nan=True,
                           **PASSED_ON).nonzero().flatten()
    span = cols or size  # the first row: a run of the result in every layout looked at
    # its first values, and the one most unlike the first (a one-hot row's 1)
    unlike = int((wanted[:span] - wanted[0]).abs().nan_to_num(0.0).argmax())
    for at in [*range(1, min(LEADING_VALUES, span)), *([unlike] if unlike else [])]:
        starts = starts[starts + at < values.numel()]
        starts = starts[torch.isclose(values[starts + at], wanted[at].expand(len(starts)),
                                      equal_nan=True, **PASSED_ON)]
    for start in starts[:CANDIDATE_STARTS].tolist():
        if start + size <= flat.numel() and _passed_on(flat[start:start + size], result):
            return True
        row, column = divmod(start, width) if width else (0, 0)
        if rows and width > cols and column + cols <= width and \
                row + rows <= flat.numel() // width:
            block = flat[:flat.numel() // width * width].reshape(-1, width)
            if _passed_on(block[row:row + rows, column:column + cols], result):
                return True
    return False


def _assembled_from(fed: list, result) -> str:
    """The name of the pieces a result is assembled from: tensors smaller than the result, each
    given to a launch and each held whole, in its order, somewhere in the result, together
    covering at least half of it (an answer made outside the kernels and handed over a row,
    or half a row, at a time). "" where they do not. Pieces of fewer than two values, or of one
    value repeated, are left out: they match by chance."""
    import torch

    if result.numel() < 2 or _one_value(result):
        return ""
    wanted = result.contiguous().flatten().double()
    covered = torch.zeros(wanted.numel(), dtype=torch.bool, device=wanted.device)
    names = []
    for name, piece in fed:
        size = piece.numel()
        if not 2 <= size < wanted.numel() or _one_value(piece) or \
                piece.device != result.device or not (
                    piece.is_floating_point() and result.is_floating_point() or
                    piece.dtype == result.dtype):
            continue
        values = piece.contiguous().flatten().to(result.dtype).double()
        starts = torch.isclose(wanted[:wanted.numel() - size + 1],
                               values[0].expand(wanted.numel() - size + 1), equal_nan=True,
                               **PASSED_ON).nonzero().flatten()
        for start in starts[:CANDIDATE_STARTS].tolist():
            if torch.allclose(wanted[start:start + size], values, equal_nan=True, **PASSED_ON):
                covered[start:start + size] = True
                names.append(name)
                break
    return names[0] if names and 2 * int(covered.sum()) >= wanted.numel() else ""


# Where a larger tensor given to a launch holds a result's first values in a row (at most
# LEADING_VALUES: a one-hot row's first values are zeros that match anywhere), the most places
# a run or block of the result is looked for from (``_held_within``)
CANDIDATE_STARTS = 256
LEADING_VALUES = 64


# The different plain numbers given to one call's launches that make them a route for values:
# a kernel's parameters (eps, a scale) are a few, whatever the size of the result; kept at most
MANY_NUMBERS = 8
#: The arguments of a runner's run that are Triton's own, not the kernel's (the grid: changed,
#: a launch of a billion programs)
LAUNCH_OPTIONS = frozenset({"grid", "warmup", "num_warps", "num_stages", "num_ctas",
                            "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                            "launch_pdl", "stream", "device"})
#: The most memory the tensors kept for ignores_kernels' count of values may take
POOL_BYTES = 256 << 20
#: Values made outside torch are counted in pieces of at most this many bytes: an answer of
#: float32 values fits no fewer
OUTSIDE_VALUE_BYTES = 4
MAX_NUMBERS_KEPT = 100_000


def _plain_number(value) -> bool:
    """A float argument (Python's, or numpy's), not a bool, an int or a constexpr."""
    import numpy as np

    return isinstance(value, (float, np.floating))


def _constexpr_type():
    import triton.language as tl

    return tl.constexpr


def _numbers_in(values, inside: bool = False) -> list[float]:
    """The plain numbers among ``values``, also inside tuples, lists and tl.constexpr; inside
    those, whole numbers too (a float's bits as an int: a launch's own whole numbers, its sizes
    and strides, come as arguments of their own)."""
    found = []
    for value in values:
        with contextlib.suppress(Exception):  # an object that resists looking: none in it
            if isinstance(value, _constexpr_type()):
                value = value.value
            if type(value) in (tuple, list):
                found += _numbers_in(value, inside=True)
            elif _plain_number(value) or inside and _whole_number(value):
                found.append(float(value))
    return found


def _kernel_globals(kernel) -> dict:
    """The module namespace of the Python function a launched kernel runs ({} if none)."""
    for _ in range(4):
        if isinstance(kernel, types.FunctionType):
            return kernel.__globals__
        kernel = getattr(kernel, "fn", None)
    return {}


def _globals_read(kernel) -> dict:
    """The module globals a kernel's own code names that hold numbers, tuples or constexprs."""
    found = {}
    with contextlib.suppress(Exception):  # a kernel that resists looking: none
        namespace = _kernel_globals(kernel)
        function = kernel
        while not isinstance(function, types.FunctionType):
            function = function.fn
        for name in function.__code__.co_names:
            value = namespace.get(name)
            if isinstance(value, _constexpr_type()) or type(value) in (tuple, list) or \
                    _plain_number(value):
                found[name] = value
    return found


def _change_globals(kernel, read: dict) -> dict:
    """Change the numbers in the globals ``read`` (as ``_other_number`` changes arguments) for
    one launch; what they were, to put back."""
    namespace = _kernel_globals(kernel)
    changed = {}
    for name, value in read.items():
        with contextlib.suppress(Exception):
            other = _other_number(value)
            if other is not value:
                namespace[name] = other
                changed[name] = value
    return changed


def _put_globals_back(kernel, changed: dict) -> None:
    namespace = _kernel_globals(kernel)
    for name, value in changed.items():
        with contextlib.suppress(Exception):
            namespace[name] = value


def _whole_number(value) -> bool:
    import numpy as np

    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _other_number(value):
    """A plain number changed, as ``_perturb`` changes a tensor's values, by an amount drawn
    afresh (no code can undo a change it cannot know), also inside a tuple or list (a kernel
    parameter that is a tuple of numbers: ``_as_tensors`` counts them one by one); anything
    else as is."""
    with contextlib.suppress(Exception):  # an object that resists looking: as is
        if isinstance(value, _constexpr_type()):
            return _constexpr_type()(_other_number(value.value))
    if type(value) in (tuple, list):
        return type(value)(_other_number(item) if _plain_number(item) or type(item) in (
            tuple, list) else _other_whole(item) for item in value)
    if not _plain_number(value):
        return value
    draw = _DRAWS.random()
    return value + (1.0 if draw < 0.5 else -1.0) * (abs(value) + 1.0) * (0.5 + draw)


def _other_whole(value):
    """A whole number inside a tuple changed by an amount drawn afresh (its top bits too, so
    that a float's bits it carries change as much as the float); anything else as is."""
    if not _whole_number(value):
        return value
    return int(value) ^ _DRAWS.randrange(1 << 20, 1 << 31)


#: Where the changes come from: the operating system's randomness, which no seed the
#: learner's code sets reaches
_DRAWS = random.SystemRandom()


def numbers_followed(function, args_spec: tuple, device: str, first,
                     launches: LaunchCounter) -> bool:
    """Whether the result follows the plain numbers the launches were given: the call made
    again with each changed before its launch returns other values (beyond ``PASSED_ON``)."""
    return _changed_when_poisoned(function, args_spec, device, first, launches,
                                  poison_numbers=True)


def inputs_followed(function, args_spec: tuple, device: str, first,
                    launches: LaunchCounter) -> bool:
    """Whether the result follows the call's inputs as its launches find them: the call made
    again with every input (and copy of one) a launch is given changed just before it returns
    other bits (an answer that barely depends on them, a gradient through a one-hot softmax,
    still differs in its last places), or raises. A call whose kernels read only what code
    outside them computed from the inputs beforehand (torch under any name, numpy, plain
    Python) returns the same."""
    kept = launches.repeat_launched_nothing  # this run's inputs are others: no repeat
    poisoned: set[int] = set()
    try:
        changed = _changed_when_poisoned(function, args_spec, device, first, launches,
                                         exact=True, poison_inputs=True,
                                         inputs_poisoned=poisoned)
    finally:
        launches.repeat_launched_nothing = kept
    return changed or not poisoned  # no input changed (none of floats): no evidence


def _call_learner(function, args, hooks_expected: tuple | None = None):
    """``function(*args)``: every call of the learner's function, the case's and the grader's
    repeats alike, is made from this line, so that code looking at its caller sees the same
    frame each time; the hooks it leaves set are put back (``hooks.put_back``, to
    ``hooks_expected`` where the grader set its own) before the grader's code runs on."""
    try:
        return function(*args)
    finally:
        hooks.put_back(hooks_expected)


def _whole_memory(tensor):
    """A flat tensor over all of ``tensor``'s storage, in its dtype (``tensor`` itself where
    that cannot be made)."""
    try:
        storage = tensor.untyped_storage()
        return tensor.new_empty(0).set_(storage, 0, (storage.nbytes() // tensor.element_size(),),
                                        (1,))
    except Exception:  # noqa: BLE001 - a tensor without plain memory: its own elements only
        return tensor


def _perturb(tensor) -> None:
    """Change every element of ``tensor`` in place: a kernel that reads it stores otherwise.
    The new values are drawn afresh each time, so that a kernel can neither tell how they were
    changed nor change them back (a fixed change, undone by a kernel that checks a value it
    knows, let an answer computed outside it pass)."""
    import torch

    if tensor.dtype == torch.bool:
        tensor.logical_not_()
        return
    draws = torch.Generator(device=tensor.device)
    draws.manual_seed(_DRAWS.getrandbits(63))
    if tensor.is_floating_point() or tensor.is_complex():
        finite = tensor.detach().abs().nan_to_num(0.0, 0.0, 0.0)
        scale = 1.0 + (float(finite.max()) if finite.numel() else 0.0)
        noise = torch.randn(tensor.shape, generator=draws, device=tensor.device)
        tensor.copy_(noise * scale)
    else:  # a whole number: every bit drawn afresh, the second highest always flipped, so
        # that no element stays itself and floats kept as their bits (x.view(torch.int32))
        # change as much as floats do, not in their last places
        bits = 8 * tensor.element_size()
        info = torch.iinfo(tensor.dtype)
        flips = torch.randint(info.min, info.max, tensor.shape, generator=draws,
                              device=tensor.device, dtype=tensor.dtype)
        tensor.bitwise_xor_(flips | (1 << (bits - 2)))


def depends_on_fed(function, args_spec: tuple, device: str, first, launches: LaunchCounter,
                   name: str) -> str:
    """``name`` where the result follows the values a launch was given (``passed_through``
    found them in it): the call made again with those values changed just before each launch
    returns other values (beyond ``PASSED_ON``, so that a kernel whose last bits vary from run
    to run is not taken for one that follows them). "" where it returns the same: the kernel
    never read them (a tensor passed for debugging, say)."""
    return name if _changed_when_poisoned(function, args_spec, device, first, launches,
                                          poison=True) else ""


def _elements(result) -> int:
    """How many values a result holds (a tuple's tensors together), at least 2."""
    tensors = [result] if is_tensor(result) else \
        [t for t in result if is_tensor(t)] if type(result) in (list, tuple) else []
    return max(2, sum(t.numel() for t in tensors))


def answer_followed(function, args_spec: tuple, device: str, first, launches: LaunchCounter,
                    answers: frozenset) -> bool:
    """Whether the result follows values computed by one of the torch functions ``answers``
    that a launch was given: the call made again with those values changed just before each
    launch returns other values (beyond ``PASSED_ON``) or raises. False where it returns the
    same (torch's answer given to a kernel for debugging, never read)."""

    return _changed_when_poisoned(function, args_spec, device, first, launches,
                                  poison_from=answers)


def _changed_when_poisoned(function, args_spec: tuple, device: str, first,
                           launches: LaunchCounter, exact: bool = False, **poisoning) -> bool:
    """The call made again with the launch counter changing what ``poisoning`` names (its
    ``poison`` or ``poison_from``) before each launch returns other values than ``first``
    (beyond ``PASSED_ON``; with ``exact``, other bits), raises, or returns what no launch of
    the run wrote."""
    kept = {name: getattr(launches, name) for name in poisoning}

    def again():
        args = _materialise(args_spec, device)
        recorder = lineage.function_mode()
        launches.taken()
        launches.recorder, launches.inputs = recorder, _memories(args)
        launches.wrote = set()
        for name, value in poisoning.items():
            setattr(launches, name, value)
        try:
            try:
                # fresh outputs hold NaN: one the allocator handed back holding the first
                # run's answer would hold it again after a kernel that wrote it, unseen
                with allocations.controlled(math.nan, False), recorder:
                    result = _call_learner(function, args)
                _synchronise(device)
            except BaseException:  # noqa: BLE001 - the learner's call raised
                # the call that returned before raised once those values were changed: it
                # followed them (a kernel that reads them, or code that checks them)
                return None
            if launches.count == 0 and launches.installed:
                launches.repeat_launched_nothing = True  # the evidence would be its memory's
            if not is_tensor(result):
                return None
            if launches.count and not lineage.copied_from(plain_tensor(result), recorder.made,
                                                          launches.wrote):
                # a tensor no launch of this run wrote, nor a copy of one (an answer kept
                # aside, handed back once the values given to the kernel were seen changed):
                # it says nothing of what the kernels do with those values
                return None
            return plain_tensor(result).detach().clone()
        finally:
            launches.put_back_changed()  # (after the result is copied: it is the evidence)
            launches.recorder, launches.wrote = None, None
            for name, value in kept.items():
                setattr(launches, name, value)
            launches.taken()

    try:
        first = plain_tensor(first).detach().clone()
        changed = again()
    except Exception:  # noqa: BLE001 - the grader's own steps failed: no evidence either way
        return False
    if changed is None or changed.shape != first.shape or changed.dtype != first.dtype:
        return True
    with contextlib.suppress(Exception):
        return not _same_bits(changed, first) if exact else not _passed_on(changed, first)
    return False


# The most memory the grader keeps, in one of its runs, to put back what it changed
CHANGED_KEPT_BYTES = 256 << 20

# What ignores_kernels says of a run that raised: true, and told apart from a plain True
RAISED = "raised"


def ignores_kernels(function, args_spec: tuple, device: str, first,
                    launches: LaunchCounter, started=None) -> bool | str | int:
    """Whether the returned tensor does not follow what the call's kernels store: the call
    made again, with what each launch stored changed just after it (``_clobber``), launches
    kernels and returns the same values; or returns values that are none of those the tensors
    the launches were given then hold (an answer computed elsewhere, combined with what the
    kernels stored: that many, as an int). Asked only of a result whose memory no launch was
    given and no torch function the check saw made (numpy's values wrapped by
    torch.from_numpy, say), or that torch.tensor wrapped from plain values: evidence, or no
    claim. Its allocations start as NaN: one the allocator handed back holding the first run's
    answer would hold it again after a kernel that wrote it, and the write would not be seen
    (and NaN, where no launch stored, is left out of the count).
    ``started`` (the worker's) says the run begins, so that its time is not the case's."""
    if not is_tensor(first):
        return False
    try:
        first = plain_tensor(first).detach().clone()
    except Exception:  # noqa: BLE001 - the grader's own steps failed: no evidence either way
        return False
    launches.clobbered, launches.clobbered_bytes, launches.clobbered_whole = {}, 0, True
    try:
        again = _run_clobbered(function, args_spec, device, launches, started)
        if again is None or again is RAISED:
            return again or False  # a raise: it did not return values that follow the stores
        with contextlib.suppress(Exception):  # shapes a nested tensor cannot even say
            if again.shape != first.shape or again.dtype != first.dtype:
                return False
            if _same_bits(again, first):
                return True
            if again.is_floating_point() and launches.clobbered_whole:
                return _none_of(again, list(launches.clobbered.values())) or False
        return False
    finally:
        launches.clobbered = {}
        # (once the result and the pool are compared: both are what the changes left)
        launches.put_back_changed()


def _none_of(values, pool: list) -> int:
    """How many finite elements of ``values`` are, bit for bit in ``values``' dtype, none of
    the elements of the tensors ``pool``."""
    import torch

    flat = values.detach().flatten()
    flat = flat[flat.isfinite()]
    if flat.numel() == 0:
        return 0
    held = torch.cat([t.detach().flatten().to(values.dtype) for t in pool]) if pool else \
        flat.new_empty(0)
    kind = _bits_type(flat)
    return int((~torch.isin(flat.view(kind), held.view(kind))).sum())


def _run_clobbered(function, args_spec: tuple, device: str, launches: LaunchCounter, started):
    """The call made again with what each launch stored changed (``_perturb``) just after
    it: the tensor it returns, RAISED where it raised, None where it launched nothing or
    returned no tensor (or the grader's own steps failed)."""
    try:
        args = _materialise(args_spec, device)
        launches.taken()
        launches.inputs, launches.clobber = _memories(args), True
        if started is not None:
            started()
        try:
            with allocations.controlled(math.nan, False):
                again = _call_learner(function, args)
                _synchronise(device)
        except BaseException:  # noqa: BLE001 - the learner's call raised
            return RAISED
        finally:
            launches.clobber = False
            count = launches.taken()
        if count == 0:
            launches.repeat_launched_nothing = True
            return None
        return plain_tensor(again).detach() if is_tensor(again) else None
    except Exception:  # noqa: BLE001 - the grader's own steps failed: no evidence either way
        return None


def _made_unseen(result, made: dict, launches: LaunchCounter) -> bool:
    """lineage.made_unseen of a returned tensor; False for one without memory to follow (a
    sparse or nested tensor)."""
    try:
        return is_tensor(result) and lineage.made_unseen(plain_tensor(result), made,
                                                         launches.given, launches.inputs)
    except Exception:  # noqa: BLE001 - nothing to follow: no claim
        return False


def _memories(args) -> set[int]:
    """The storage addresses of the tensors among ``args``."""
    found = set()
    for tensor in lineage.tensors_in(args):
        with contextlib.suppress(Exception):
            found.add(plain_tensor(tensor).untyped_storage().data_ptr())
    return found


def _varies(tensor) -> bool:
    """The tensor holds at least two different finite values."""
    values = plain_tensor(tensor).detach().flatten()
    values = values[values.isfinite()] if values.is_floating_point() else values
    return values.numel() > 1 and bool((values != values[0]).any())


def _one_value(tensor) -> bool:
    """Every element the same bits."""
    flat = tensor.contiguous().flatten().view(_bits_type(tensor))
    return bool((flat == flat[0]).all())


def _same_bits(a, b) -> bool:
    """Equal bit for bit (NaN equal to the same NaN)."""
    a, b = a.contiguous().flatten(), b.contiguous().flatten()
    if a.element_size() == 0 or a.numel() == 0:
        return True
    return bool((a.view(-1).view(_bits_type(a)) == b.view(-1).view(_bits_type(b))).all())


# What kernels left in their memories is kept from one call to the next for memories up to
# KERNEL_LEFT_LARGEST bytes, KERNELS_LEFT_BYTES in all (``LaunchCounter.kernels_left``)
KERNELS_LEFT_BYTES = 64 * 2**20
KERNEL_LEFT_LARGEST = 4 * 2**20


def _same_storage(a, b) -> bool:
    """Two untyped storages hold the same bytes."""
    import torch

    if a.nbytes() != b.nbytes():
        return False
    left = torch.empty(0, dtype=torch.uint8, device=a.device).set_(a)
    right = torch.empty(0, dtype=torch.uint8, device=b.device).set_(b)
    return bool(torch.equal(left, right))


def _bits_type(tensor):
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]


def _synchronise(device: str):
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def call_case(function, case: Case, args_spec: tuple, device: str, uses_tensors: bool,
              learner_file: str, launches: LaunchCounter | None = None, evidence=None, *,
              plain_python: bool = False, torch_answers: frozenset = frozenset(),
              call_again: bool = False):
    """Run one case and describe what happened. ``evidence`` is called before the call is made
    again for evidence (``ignores_kernels``): the grader's clock for the case starts afresh.
    ``plain_python``: the part is a derivation in plain Python, and the call is watched for
    the first function of torch, numpy or triton it runs (``learning.grader.plain``).
    ``torch_answers``: the torch functions that compute the part's answer, whose values no
    launch may be given (``Part.torch_answers``). ``call_again``: a kernel part's call is made
    once more, with other inputs, to see that the tensor it returned is its own
    (``_reused_by_next_call``)."""
    try:
        args = _materialise(args_spec, device)
        before = _snapshot(args)
    except Exception as exc:  # noqa: BLE001 - the grader's own step, not the learner's code
        raise InputNotBuilt(_cut(f"{type(exc).__name__}: {safe_str(exc)}", 300)) from exc
    fill = uses_tensors and case.fill_outputs_with_nan
    record = None
    numbers_fed = False  # plain numbers as a route for the result's values (a kernel part's)
    if launches is not None:
        launches.taken()  # launches the grader's own steps made do not count
        launches.unseen_pointers()  # nor what an earlier case's runs noted
        launches.earlier_left = dict(launches.kernels_left)
    # a kernel part's call: which torch functions made which memory (learning.grader.lineage)
    recorder = lineage.function_mode() if launches is not None else None
    if launches is not None:
        launches.recorder = recorder  # what torch made, for the launches to look up
        launches.inputs = _memories(args)
        # the caller's memory, seen through views of the grader's own: the learner's code may
        # point the argument itself at other memory (x.set_(...)) and change the caller's
        launches.originals = [(i, _same_memory(arg), kept)
                              for i, (arg, kept) in enumerate(zip(args, before))
                              if is_tensor(arg) and is_tensor(kept)]
        launches.changed_inputs = set()
    own_answers = frozenset(torch_answers)  # named first, where both are found
    if launches is not None and torch_answers:  # a part whose answer torch could compute
        # and values whose history is longer than the record follows: what made them unknown
        torch_answers = own_answers | lineage.WORK | {lineage.UNFOLLOWED}
    watch = plain.Watch() if plain_python else None
    hooks.put_back()  # one left by the module's import, or by another function of it since
    if launches is not None:
        launches.repeat_launched_nothing = False
    start = time.perf_counter()
    try:
        with allocations.controlled(math.nan, device == "cuda") if fill else \
                contextlib.nullcontext() as record:
            with recorder if recorder is not None else watch if watch is not None else \
                    contextlib.nullcontext():
                inside = hooks.state()  # the grader's own (the plain-Python watch's profile)
                result = _call_learner(function, args, inside)  # put back before more runs
            _synchronise(device)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from the learner's code too
        seconds = time.perf_counter() - start
        hooks.taken()  # a call that raised fails as it raised
        if launches is not None:
            launches.originals = []  # not held past the call (nor compared at others' launches)
        try:
            return _raised(exc, learner_file, seconds)
        except Exception as unreadable:  # noqa: BLE001 - an exception built to resist reading
            return Raised(_type_name(exc, "Exception"), _cut(
                "an exception that could not be read: reading it raised "
                f"{_type_name(unreadable, 'Exception')}: {safe_str(unreadable)}", 300), "",
                seconds=seconds)
    seconds = time.perf_counter() - start
    try:
        returned = summarise(result, args, before)
    except Exception as exc:  # noqa: BLE001 - a returned object that resists being read
        returned = Returned(_type_name(result), None,
                            note=_cut(f"could not read it: {type(exc).__name__}: "
                                      f"{safe_str(exc)}", 300))
    returned.seconds = seconds
    if watch is not None:
        returned.libraries_used = watch.first or plain.in_result(result)
    if launches is not None:
        launches._note_threads()  # still running as the call returns
        returned.other_threads = launches.other_threads
        returned.unseen_between = launches.unseen_between
        returned.pre_run_hooks = launches.hooked
        # a launch was given what a torch function that computes the answer computed: asked
        # for evidence below, once what this call left has been read
        elements = _elements(result)
        if torch_answers and launches.outside_size >= elements:
            # and values made outside torch, as many as the result holds: numpy's answer
            torch_answers = torch_answers | {lineage.OUTSIDE}
        if torch_answers:  # a reduction under any name, seen by the shapes it returned
            torch_answers = torch_answers | getattr(recorder, "reducing", set()) | \
                lineage.families_in(launches.fed_from)
        fed = torch_answers & launches.fed_from
        returned.answer_fed = min(fed & (own_answers | {lineage.OUTSIDE}) or fed, default="")
        # values handed to the kernels one plain number at a time: as many different ones as
        # half the result, and more than a kernel's few parameters (asked for evidence below)
        numbers = len(launches.numbers)
        numbers_fed = numbers >= max(MANY_NUMBERS, elements // 2)
        returned.changed_before_launch = tuple(sorted(launches.changed_inputs))
        launches.originals = []  # the evidence runs below make other inputs
        returned.changed_after_launch = launches.changed_since_launch(result)
        returned.uncompared = tuple(launches.uncompared)
        outside = False
        written = ""  # torch wrote into a memory a launch was given
        wrapped = ""  # torch.tensor (say) wrapped plain values: whose, the evidence run says
        if recorder is not None:
            returned.computed_by_torch = launches.computed_by_torch(result, recorder.made)
            if returned.computed_by_torch in lineage.WRAPS:
                wrapped, returned.computed_by_torch = returned.computed_by_torch, ""
            if not returned.computed_by_torch:
                returned.passed_through = launches.passed_through(result)
            outside = not (returned.computed_by_torch or returned.passed_through) and \
                _made_unseen(result, recorder.made, launches)
            if not (returned.computed_by_torch or returned.passed_through or outside or
                    returned.changed_after_launch):  # (each its own, plainer evidence)
                written = launches.written_by_torch(result, recorder.made)
        launches.recorder = None
    returned.kernel_launches = launches.taken() if launches is not None else None
    if launches is not None and (outside or wrapped or written) and returned.kernel_launches:
        # made by nothing the check saw, or wrapped from plain values (a kernel's output taken
        # through tolist() is one): evidence that the kernels' stores do not reach it, or no
        # claim (autograd's engine makes gradients unseen too)
        ignored = ignores_kernels(function, args_spec, device, result, launches, evidence)
        returned.evidence_raised = ignored == RAISED
        if type(ignored) is int and not isinstance(ignored, bool):
            returned.beyond_stores = ignored
        if wrapped:
            returned.computed_by_torch = wrapped if ignored else ""
        else:
            returned.ignores_kernels = bool(ignored)
            returned.written_by_torch = written if ignored else ""
    if returned.passed_through:  # evidence, or no claim (one more run of a lone tensor's call)
        returned.passed_through = depends_on_fed(
            function, args_spec, device, result, launches, returned.passed_through) \
            if is_tensor(result) else ""
    if launches is not None and returned.answer_fed:
        if returned.computed_by_torch or returned.passed_through or returned.ignores_kernels:
            returned.answer_fed = ""  # said already, by plainer evidence
        else:
            if evidence is not None:
                evidence()  # the run below is the grader's, not the case's
            launches.fed_outside_size = max(2, elements)  # no fewer changed in that run
            try:
                followed = answer_followed(function, args_spec, device, result, launches,
                                           torch_answers)
            finally:
                launches.fed_outside_size = 2
            if not followed:
                returned.answer_fed = ""  # given, never read: kept for debugging, say
    if launches is not None and numbers_fed and not (
            returned.computed_by_torch or returned.passed_through or returned.ignores_kernels
            or returned.answer_fed):
        if evidence is not None:
            evidence()  # the run below is the grader's, not the case's
        if numbers_followed(function, args_spec, device, result, launches):
            returned.numbers_fed = numbers
    if launches is not None and is_tensor(result) and not (
            returned.computed_by_torch or returned.passed_through or returned.ignores_kernels
            or returned.answer_fed or returned.numbers_fed or returned.changed_after_launch):
        # none of the above seen: do the kernels read the inputs at all? (a result of one
        # repeated value, a softmax over one column, follows no input's values and says
        # nothing)
        with contextlib.suppress(Exception):
            if _varies(result):
                if evidence is not None:
                    evidence()  # the run below is the grader's, not the case's
                launches.blocked = own_answers
                returned.inputs_unread = not inputs_followed(function, args_spec, device,
                                                             result, launches)
    returned.guard_damage = record.damaged() if record is not None else 0
    if fill and returned.values is not None and _has_nan(returned.values):
        returned.unwritten, returned.follows_fill = _find_unwritten(
            function, args_spec, device, returned.values)
    if call_again and launches is not None and is_tensor(result) and \
            not returned.aliases_input:
        if evidence is not None:
            evidence()  # the run below is the grader's, not the case's
        returned.reused_by_next_call = _reused_by_next_call(function, args_spec, device,
                                                            result, launches)
    if launches is not None:
        returned.repeat_launched_nothing = launches.repeat_launched_nothing
        returned.pointer_unseen = launches.unseen_pointers()
    returned.hooks_left = hooks.taken()
    return returned


def _reused_by_next_call(function, args_spec: tuple, device: str, first,
                         launches: LaunchCounter) -> str:
    """What later calls, with other inputs of the same shapes, did to the tensor the first
    call returned: "" where nothing, or a sentence where one returned the same memory or
    changed the first's values (an output kept from call to call, or a ring of two handed
    out in turn: the caller's first result then changes under it). AGAIN calls are made; one
    that raises ends the look, saying nothing."""
    try:
        first = plain_tensor(first).detach()
        kept = first.clone()
    except Exception:  # noqa: BLE001 - a tensor whose memory cannot be read: no claim
        return ""
    for call in ("a second call", "a third call")[:AGAIN]:
        launches.taken()
        try:
            args = _materialise(args_spec, device)
            for arg in args:
                if is_tensor(arg) and (arg.is_floating_point() or arg.is_complex()):
                    _perturb(arg)
            with warnings.catch_warnings():  # the grader's call: its warnings were said once
                warnings.simplefilter("ignore")
                later = _call_learner(function, args)
                _synchronise(device)
            later = plain_tensor(later).detach() if is_tensor(later) else None
        except BaseException:  # noqa: BLE001 - a run that raised says nothing either way
            return ""
        finally:
            launches.taken()
        with contextlib.suppress(Exception):
            if later is not None and later.numel() and \
                    later.untyped_storage().data_ptr() == first.untyped_storage().data_ptr():
                return (f"{call}, with other inputs of the same shapes, returned the same "
                        "memory as this one")
            if not _same_bits(first, kept):
                return (f"{call}, with other inputs of the same shapes, changed the values of "
                        "the tensor this call returned")
    return ""


#: The calls ``_reused_by_next_call`` makes after the first: two, so that two outputs handed
#: out in turn are seen too
AGAIN = 2


def _raised_in(exc: BaseException, path: str) -> bool:
    """Whether ``exc`` was raised by code in the file ``path``."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    try:
        return os.path.realpath(tb.tb_frame.f_code.co_filename) == os.path.realpath(path)
    except (OSError, ValueError, TypeError):
        return False


def _raised(exc: BaseException, learner_file: str, seconds: float) -> Raised:
    """What the learner's call raised, as the grade reports it."""
    cause = root_cause(exc)
    # the stub's own raise: a NotImplementedError from elsewhere (another module of the
    # learner's still a stub, a torch operation with no kernel for a dtype) is an error
    not_started = isinstance(cause, NotImplementedError) and _raised_in(cause, learner_file)
    name = type(cause).__name__
    # By its words (on a CPU only code imitating CUDA says them): a bad address, or another
    # CUDA error, after which the context can run nothing more.
    fault = _gpu_fault(cause)
    if fault == "address":
        name = "CudaFault"
    return Raised(name, _cut(safe_str(cause) + suggestion(cause) + dot_shapes(exc)),
                  learner_traceback(exc, learner_file),
                  not_started=not_started, seconds=seconds, gpu_lost=bool(fault))


def _one_fill(storage) -> bool:
    """Whether a storage holds one value repeated, in elements of 1, 2, 4 or 8 bytes."""
    import torch

    with contextlib.suppress(Exception):
        raw = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(
            storage, 0, (storage.nbytes(),), (1,))
        for width, kind in ((8, torch.int64), (4, torch.int32), (2, torch.int16),
                            (1, torch.uint8)):
            if raw.numel() and raw.numel() % width == 0:
                values = raw.view(kind)
                if bool((values == values[0]).all()):
                    return True
    return False


def _is_named_tuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _memory_of(pointer, given: dict, recorder):
    """A tensor over the memory an object Triton takes as a pointer points into: the storage it
    names (``untyped_storage()``), or a memory of the call's (given to an earlier launch, or
    noted by the record of torch's work) that holds its address; None where there is none."""
    import torch

    storages = []
    with contextlib.suppress(Exception):
        storage = pointer.untyped_storage()
        if isinstance(storage, torch.UntypedStorage):
            storages.append(storage)
    storages += [*given.values(), *getattr(recorder, "held", ())]
    with contextlib.suppress(Exception):
        address = int(pointer.data_ptr())
        for storage in storages:
            start = storage.data_ptr()
            if start <= address < start + max(1, storage.nbytes()):
                return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(
                    storage, 0, (storage.nbytes(),), (1,))
    return None


def _type_name(value, unnamed: str = "object") -> str:
    try:
        return str(type(value).__name__)
    except Exception:  # noqa: BLE001 - a class whose name raises
        return unnamed


def _has_nan(values) -> bool:
    import numpy as np

    return bool(np.isnan(values).any())


_ADDRESS_FAULTS = ("illegal memory access", "illegal address", "address space")
_CONTEXT_LOST = ("cuda error", "misaligned", "unspecified launch failure")


def _gpu_fault(exc: BaseException) -> str:
    """"address" for a load or store at a bad address, "lost" for another CUDA error (the
    context may be unusable after it), "" for anything else."""
    text = safe_str(exc).lower()
    if any(s in text for s in _ADDRESS_FAULTS):
        return "address"
    return "lost" if any(s in text for s in _CONTEXT_LOST) else ""


class InputNotBuilt(Exception):
    """The grader could not build a case's input (the GPU stopped working, say)."""


def _find_unwritten(function, args_spec, device, first_values) -> tuple:
    """Run again with a different fill: elements NaN before and holding the fill now were never
    written by the learner's code (as opposed to computed as NaN); (those, or None, and how
    many others changed with the fill to a value of their own). Where some did, what the
    memory held before the kernels flows into the outputs (an atomic add onto the output, a
    buffer read before it is stored), and an output holding the fill is as likely one where
    nothing was added: none is said to be unwritten."""
    import numpy as np

    args = _materialise(args_spec, device)
    try:
        with allocations.controlled(UNWRITTEN_SENTINEL, False):
            result = _call_learner(function, args)
            _synchronise(device)
        import torch

        again = result.detach().to("cpu", dtype=torch.float64).numpy()
        stored = torch.tensor(UNWRITTEN_SENTINEL, dtype=result.dtype).item()
    except BaseException:
        return None, 0
    if again.shape != first_values.shape:
        return None, 0
    unwritten = np.isnan(first_values) & (again == stored)
    follows = int(np.count_nonzero(np.isnan(first_values) & ~np.isnan(again) &
                                   (again != stored)))
    if follows:
        return None, follows
    return (unwritten if unwritten.any() else None), 0
