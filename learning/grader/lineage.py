"""Where a kernel part's returned tensor came from: a kernel, or torch computing the answer.

A kernel part grades what a kernel of the learner's stores. A call that launches a kernel and
then returns something torch computed (``return torch.softmax(x, -1)`` left in from debugging,
or a result copied into a fresh tensor) passes the launch count and the values. So while the
learner's function runs, a torch function mode notes, for every memory a torch function made or
wrote, which function it was and which memories it read. After the call, the returned tensor's
memory is followed back through copies (``copy_``, ``to``, ``clone``, ``cat``, ...) to where
it was made: a memory some launch was given ends the walk (a kernel's output, or a tensor a
kernel read), and so does one made before the call or merely allocated; one made by any other
function is torch's own result, and that function is named. The same walk, at each launch,
finds the tensors the kernel is given that torch computed (or that wrap values computed
outside torch): a result that holds their values, and changes when they are changed before
the launch, was passed through a kernel, not computed by it (``learning.grader.calls``); and a
result whose memory no launch was given and nothing seen wrote (``made_unseen``: numpy's values
wrapped, a thread's work) is a kernel's only if it changes when what the launches stored is
changed (``calls.ignores_kernels``: autograd's engine makes gradients unseen too). The
record holds every memory it notes until the call ends, so that no later tensor takes a noted
address and with it the history. (A function mode, not a dispatch
mode: entering the latter imports torch's compiler, a second of every fresh worker's time.)

Runs in the learner's process (``learning.grader.calls``).
"""

from __future__ import annotations

import sys
import warnings

# Functions that move, cast or gather values without computing new ones: the walk goes on
COPIES = frozenset({
    "copy_", "to", "clone", "contiguous", "cat", "concat", "concatenate", "stack", "hstack",
    "vstack", "float", "double", "half", "bfloat16", "type", "type_as", "cpu", "cuda",
    "reshape", "flatten", "ravel", "__getitem__", "__setitem__", "index_select", "repeat",
    "tile", "clone_", "narrow_copy", "masked_select", "take", "gather", "pad", "index_put",
    "index_put_",
})
# Functions that allocate or fill memory with constants: no kernel wrote it, and no value of
# the answer was computed into it (a never-written output is judged by its values)
ALLOCATIONS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
    "fill_", "zero_", "resize_", "tensor", "as_tensor", "from_numpy", "arange", "empty_permuted",
    "new_tensor",
})
# Functions that wrap values computed outside torch (numpy, plain Python) in a tensor: for a
# tensor a kernel is given, or one returned, an origin as telling as a torch computation
WRAPS = frozenset({"tensor", "as_tensor", "from_numpy", "new_tensor", "asarray"})
# The origin ``computed_by_torch`` gives, with ``inputs``, a memory that is no input and that no
# torch function made during the call (torch.from_numpy is not one torch's function mode sees)
OUTSIDE = "outside torch"
# What a walk back gives, in place of a function, where the record follows no further: past
# MOST_STEPS memories (a history pushed that far by alternating steps in place). Counted as
# torch's work, never as none
UNFOLLOWED = "more steps than the check follows"
# In-place methods that change a tensor's metadata (autograd state, shape, strides, the memory
# it views), never the values in memory: the record of who made that memory stands
METADATA_IN_PLACE = frozenset({
    "requires_grad_", "detach_", "retain_grad", "squeeze_", "unsqueeze_", "t_", "transpose_",
    "swapdims_", "swapaxes_", "as_strided_", "resize_as_", "share_memory_",
    "rename_", "refine_names", "set_", "untyped_storage", "data_ptr", "record_stream",
})
# Functions that do some of any kernel part's work, whatever the exercise: a reduction over the
# inputs (a row's maximum or sum handed to a kernel that then only applies it), a product, or
# a softmax under another name. Added to each part's own (``Part.torch_answers``): values they
# computed may reach no launch that the result follows
WORK = frozenset({
    "sum", "nansum", "mean", "nanmean", "amax", "amin", "max", "min", "aminmax", "argmax",
    "argmin", "prod", "logsumexp", "special_logsumexp", "norm", "vector_norm",
    "linalg_vector_norm", "linalg_norm", "var", "std", "var_mean", "std_mean", "cumsum",
    "cumprod", "cummax", "cummin", "logcumsumexp", "sort", "topk", "kthvalue", "median",
    "nanmedian", "quantile", "nanquantile", "mode",
    "matmul", "linalg_matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "addmv",
    "addbmm", "baddbmm", "einsum", "linear", "tensordot", "mv", "dot", "vdot", "inner",
    "chain_matmul", "linalg_multi_dot", "matrix_power", "linalg_matrix_power",
    "softmax", "_softmax", "log_softmax", "_log_softmax", "special_softmax",
    "special_log_softmax", "softmin", "scaled_dot_product_attention",
    # sums and maxima over windows, which padding can make return as many values as they
    # read (a pooling window as wide as the row gives each element its row's maximum), and
    # scatters that sum or reduce into places
    *(f"{kind}_pool{n}d" for kind in ("max", "avg", "lp", "adaptive_max", "adaptive_avg")
      for n in (1, 2, 3)),
    "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "fractional_max_pool2d", "fractional_max_pool3d",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "unfold", "fold", "embedding_bag", "bincount", "histc", "histogram",
    "scatter_add", "scatter_reduce", "index_add", "index_reduce", "segment_reduce",
    "trapezoid", "trapz", "cumulative_trapezoid", "diff",
    # sorts, counts, statistics and norms over a row, whatever their names
    "msort", "argsort", "unique", "unique_consecutive", "searchsorted", "bucketize",
    "count_nonzero", "all", "any", "cov", "corrcoef", "cdist", "pdist", "renorm", "normalize",
    "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
    "local_response_norm", "cross_entropy", "nll_loss", "kl_div", "outer", "ger", "kron",
    "cross", "addr", "bilinear", "stft", "istft",
    # exponentials under any name (pow(e, x) is one), and what folds a row pairwise (the
    # maximum of its two halves, again and again) or sums into places by index
    "exp", "exp2", "expm1", "pow", "float_power", "ldexp", "sigmoid", "softplus", "logaddexp",
    "logaddexp2", "maximum", "minimum", "fmax", "fmin", "index_put_accumulate", "put",
})
# Families of functions each of which does such work (torch.fft.fft is "fft_fft" to a function
# mode, torch.linalg.solve "linalg_solve"): counted as WORK's are
WORK_FAMILIES = ("fft_", "linalg_", "special_")


def families_in(names) -> set[str]:
    """The names of ``names`` that belong to WORK_FAMILIES."""
    return {name for name in names if name.startswith(WORK_FAMILIES)}
MOST_STEPS = 1024  # memories (and earlier versions) followed back from one
MOST_ROOTS = 16  # memories a new one is noted as made from, followed back (Recorder.roots)
MOST_MEMORIES_COMPARED = 4096  # memories whose bytes a tensor's are compared with for overlap
HELD_BYTES = 256 << 20  # the most memory a call's record keeps alive (Recorder.held)


def function_mode():
    """A new ``Recorder`` (a torch function mode), or None where torch has none."""
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None

    class Recorder(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            # memory: (function, memories read, step, the key of what it held before or None,
            # whether it holds values (floats) rather than a mask or indices, the constant a
            # fill put in every element or None)
            self.made: dict[int, tuple] = {}
            # the memories noted, held until the call ends: one freed could be handed to a
            # later tensor, whose entry would then replace its history (up to HELD_BYTES)
            self.held: list = []
            self.held_bytes = 0
            # functions seen returning fewer values than a tensor they read (a reduction under
            # any name: a pooling, a convolution): work as WORK's are
            self.reducing: set[str] = set()
            self.versions = 0  # earlier versions of memories changed in place (negative keys)
            self.steps = 0  # functions noted so far: when each entry was made (its third item)
            # the memories each new one was made from, followed back to ones the call did not
            # make (its inputs), and how many elements each memory holds: a step that combines
            # pieces of one such memory into fewer values than it holds folds it (a maximum of
            # a row's two halves, again and again)
            self.roots: dict[int, frozenset] = {}
            self.sizes: dict[int, int] = {}
            # where each memory seen ends: a tensor over part of another's memory (torch.
            # from_numpy(t.numpy()[n:]) has a storage of its own there) is read from it, and
            # a write through it writes into it too
            self.ends: dict[int, int] = {}

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = call_warning_at_caller(func, args, kwargs)
            try:
                if _own_handler(types):
                    # a tensor subclass's __torch_function__ ran it, with this record off:
                    # what it returns was made by code the record did not see (OUTSIDE)
                    self._hold(out)
                else:
                    self._note(func, args, kwargs, out)
            except Exception:  # noqa: BLE001 - noting must never change what the call does
                pass
            return out

        def _hold(self, out):
            """Keep the memories of ``out`` alive until the call ends, unnoted."""
            for tensor in _tensors(out):
                storage = tensor.untyped_storage()
                if self.held_bytes + storage.nbytes() <= HELD_BYTES:
                    self.held.append(storage)
                    self.held_bytes += storage.nbytes()

        def _overlaps(self, value) -> dict[int, set[int]]:
            """For each memory among the tensors in ``value``, the other memories seen whose
            bytes it shares (up to MOST_MEMORIES_COMPARED of them)."""
            found: dict[int, set[int]] = {}
            for tensor in _tensors(value):
                start = _address(tensor)
                end = start + tensor.untyped_storage().nbytes()
                if self.ends.get(start, end) < end or start not in self.ends:
                    self.ends[start] = end
                if start in found or len(self.ends) > MOST_MEMORIES_COMPARED:
                    continue
                found[start] = {other for other, other_end in self.ends.items()
                                if other != start and other < end and start < other_end}
            return {address: others for address, others in found.items() if others}

        def _folded(self, args, kwargs) -> int:
            """The elements of the largest memory that two or more of the tensors read were
            made from (0 where none shares one): a step returning fewer values folds it."""
            counts: dict[int, int] = {}
            for tensor in {_address(t): t for t in _tensors((args, kwargs))}.values():
                if not (tensor.is_floating_point() or tensor.is_complex()):
                    continue  # a mask or indices: none of the values combined
                address = _address(tensor)
                self.sizes.setdefault(address, tensor.untyped_storage().nbytes() // max(
                    1, tensor.element_size()))
                for root in self.roots.get(address, frozenset({address})):
                    counts[root] = counts.get(root, 0) + 1
            return max((self.sizes.get(root, 0) for root, n in counts.items() if n > 1),
                       default=0)

        def _note(self, func, args, kwargs, out):
            # an operator called by its overload (torch.ops.aten.mm.default): by the operator
            name = str(getattr(func, "__name__", "")).partition(".")[0]
            if name.startswith("__") and name not in _NOTED_SPECIAL:
                return  # a property read (x.grad), a copy for pickling, ...: no computation
            if name in METADATA_IN_PLACE:
                return  # the values stay as whoever made them left them
            if name.startswith("index_put") and (kwargs.get("accumulate") or (
                    len(args) > 3 and args[3] is True)):
                name = "index_put_accumulate"  # a sum into places, not a copy into them
            read = {_address(t) for t in _tensors((args, kwargs))}
            # what it read besides the tensor it works on (a copy_'s source)
            sources = {_address(t) for t in _tensors((args[1:], kwargs))}
            written = {_address(t) for t in _tensors(kwargs.get("out"))}
            if args and _is_tensor(args[0]) and (name == "__setitem__" or (
                    name.endswith("_") and not name.startswith("__"))):
                written.add(_address(args[0]))  # an in-place method writes its tensor
            # an item set writes part of its tensor, however much of it the tensor spans
            whole = set() if name == "__setitem__" else \
                {_address(t) for t in _tensors(args[:1]) if _spans_its_memory(t)}
            constant = _fill_constant(name, args, kwargs)
            if name == "__setitem__" and len(args) > 2 and \
                    next(_tensors(args[2]), None) is None:
                # plain values put in (y[i, j] = v): made outside torch, as a fill's are, one
                # write at a time (learning.grader.calls looks at what they add up to)
                name, constant = "fill_", _plain_constant(args[2])
            new = [t for t in _tensors(out) if _address(t) not in read]
            made = {_address(t) for t in new}  # new memory (views are not)
            self.steps += 1
            # which memories hold values (floats), not masks or indices (bools, whole numbers)
            floating = {_address(t): t.is_floating_point() or t.is_complex()
                        for t in _tensors((args, kwargs, out))}
            overlapping = self._overlaps((args, kwargs, out))
            for address in made:
                read |= overlapping.get(address, set())  # an alias reads what it lies over
            for address in list(written):
                for other in overlapping.get(address, ()):
                    if other not in made:
                        written.add(other)  # written through an alias: in part, in place
            # what it wrote: new memory, or a tensor it changed in place (scatter_reduce_ of a
            # row's maximum into a column)
            results = new or [t for t in _tensors((args, kwargs, out))
                              if _address(t) in written]
            if results and name not in COPIES and name not in ALLOCATIONS and \
                    max(t.numel() for t in results) < max(
                        _most_read_of_one_memory(args, kwargs), self._folded(args, kwargs)):
                self.reducing.add(_shown(name))
            # (an allocation shaped like x, a mask made from x, holds none of x's values)
            roots = frozenset() if name in ALLOCATIONS else frozenset().union(
                *(self.roots.get(a, frozenset({a})) for a in read if floating.get(a, True)))
            for address in made:
                self.roots[address] = roots if len(roots) <= MOST_ROOTS else \
                    frozenset(sorted(roots)[:MOST_ROOTS])
            for address in written | made:
                reads = tuple(read - {address})
                earlier = self.made.get(address)
                if address in written and earlier is not None and earlier[0] == name and \
                        set(reads) <= set(earlier[1]):
                    # the same step again (y[i, j] = v, element by element): noted, and its
                    # constant known only while every step put the same one
                    if len(earlier) > 5 and earlier[5] is not None and earlier[5] != constant:
                        self.made[address] = earlier[:5] + (None,)
                    continue
                previous = None
                if earlier is not None:
                    # what it held before is kept as an earlier version: steps that read it
                    # before now are followed there (``_as_read``), not to what it holds now
                    # (wholly overwritten by copy_, or a freed memory taken over by a new
                    # tensor, the record past HELD_BYTES)
                    self.versions += 1
                    previous = -self.versions
                    self.made[previous] = earlier
                    if address in written and (address in sources or not (
                            name in ("copy_", "fill_", "zero_") and address in whole)):
                        # changed in place, not wholly overwritten (or overwritten from
                        # itself, y.copy_(y)): made from what it held too (y.neg_() or
                        # y[0] = v must not end y's history)
                        reads += (previous,)
                self.made[address] = (name, reads, self.steps, previous,
                                      floating.get(address, True), constant)
            self._hold(new)

    return Recorder()


def call_warning_at_caller(func, args: tuple, kwargs: dict):
    """``func(*args, **kwargs)`` for a torch function mode, with the warnings it raises said at
    the line of the code that called torch. torch says a warning of its C++ code at the
    innermost Python frame, which inside a mode is the mode's own line, in the grader: the
    learner would read the grader's file and line, once for every case, instead of theirs."""
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            return func(*args, **kwargs)
    finally:
        if caught:  # said again once the record is closed, under the caller's own filters
            _warn_at_caller(caught)


_SAID: set[tuple] = set()  # (text, category, file, line) said at a caller already


def _warn_at_caller(caught: list) -> None:
    """Say ``caught`` again at the first frame outside torch and the grader, under the filters
    of the code that called, once per line and warning in this process as Python's default
    does (the mode's record resets Python's own memory of what was said, every time)."""
    frame = sys._getframe(1)
    while frame is not None and \
            frame.f_globals.get("__name__", "").partition(".")[0] in ("torch", "learning"):
        frame = frame.f_back
    if frame is None:
        return
    for said in caught:
        key = (str(said.message), said.category, frame.f_code.co_filename, frame.f_lineno)
        if key in _SAID:
            continue
        _SAID.add(key)
        warnings.warn_explicit(said.message, said.category, frame.f_code.co_filename,
                               frame.f_lineno, module=frame.f_globals.get("__name__"))


def computed_by_torch(result, made: dict, given, wrapped: bool = False,
                      inputs: set | None = None) -> str:
    """The torch function that computed the returned tensor's memory ("" when a kernel was
    given it, or it was made before the call, or only allocated, copied from one of those);
    ``given`` holds the memories the call's launches were given. With ``wrapped``, a memory
    that wraps values made outside torch (``WRAPS``) names its function too, and with
    ``inputs`` (the memories of the call's arguments) one that is none of them and that no
    torch function made is ``OUTSIDE``."""
    for address, entry in _origins(result, made, given):
        if entry is None:
            if wrapped and inputs is not None and address not in inputs:
                return OUTSIDE
        elif entry[0] not in ALLOCATIONS or (wrapped and entry[0] in WRAPS):
            return _shown(entry[0])
    return ""


def made_unseen(result, made: dict, given, inputs: set) -> bool:
    """Whether the returned tensor's values were put in its memory by nothing the check saw: the
    walk back through copies reaches a memory that no launch was given and that is no input,
    which no torch function made (numpy's values wrapped by torch.from_numpy, a thread's work,
    torch with its function mode switched off) or which was only allocated and then written
    unseen."""
    return any(address not in inputs if entry is None else entry[0] in ALLOCATIONS and
               _holds_values(entry) for address, entry in _origins(result, made, given))


# The most fill constants a tensor may be made from and still hold only inputs and padding
MOST_FILL_CONSTANTS = 4


def fill_values(result, made: dict, given, inputs: set) -> set | None:
    """The constants the memories that the walk back from the returned tensor reaches were
    filled with (torch.full's value, zeros' 0), where each it reaches is an input or such a fill;
    None where one holds what no constant the record knows gives (torch.empty's memory, items
    set to different values, a memory no torch function made)."""
    constants = set()
    for address, entry in _origins(result, made, given):
        if entry is None:
            if address in inputs:
                continue
            return None
        if entry[0] not in ALLOCATIONS:
            continue  # computed by torch: what holds it is said elsewhere
        if not _holds_values(entry):
            continue
        if len(entry) < 6 or entry[5] is None:
            return None
        constants.add(entry[5])
        if len(constants) > MOST_FILL_CONSTANTS:
            return None  # an answer put together from fills of its values, one at a time
    return constants


# The constant a fill puts in every element, by the function, or by where its value is given
_FILLED_WITH = {"zeros": 0.0, "zeros_like": 0.0, "new_zeros": 0.0, "zero_": 0.0, "ones": 1.0,
                "ones_like": 1.0, "new_ones": 1.0}
_FILL_VALUE_AT = {"full": 1, "full_like": 1, "new_full": 2, "fill_": 1}


def _fill_constant(name: str, args: tuple, kwargs: dict) -> float | None:
    """The one value an allocation call fills its memory with; None where it is no such fill
    (torch.empty) or the value is a tensor (not read here, inside the record)."""
    if name in _FILLED_WITH:
        return _FILLED_WITH[name]
    position = _FILL_VALUE_AT.get(name)
    if position is None:
        return None
    value = kwargs.get("fill_value", kwargs.get("value"))
    if value is None and len(args) > position:
        value = args[position]
    return _plain_constant(value)


def _plain_constant(value) -> float | None:
    """A plain number as a float (a bool as 0 or 1); None for anything else."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    return None


def _holds_values(entry) -> bool:
    """Whether a memory holds values (floats), not a mask or indices (an arange that picks)."""
    return len(entry) < 5 or entry[4]


def computed_into(address: int, made: dict) -> str:
    """The torch function that computed what was put into the memory at ``address``, through
    copies (``copy_`` from torch.softmax's result: "softmax"; an in-place operation: itself);
    "" where it holds only an input's values, an allocation's or nothing torch was seen make."""
    for _, entry in _back(address, made, lambda entry: entry[0] in COPIES):
        if entry is not None and entry[0] not in ALLOCATIONS and entry[0] not in COPIES:
            return _shown(entry[0])
    return ""


def ancestry(address: int, made: dict, inputs: set | None = None) -> set[str]:
    """Every torch function the values at ``address`` came from, through whatever torch did
    to them (up to MOST_STEPS memories back), as the learner wrote each ("matmul" for @); with
    ``inputs`` (the call's memories), OUTSIDE too where the walk reaches a memory that is no
    input and that no torch function the check saw made (numpy's values wrapped)."""
    names: set[str] = set()
    for here, entry in _back(address, made, lambda entry: True):
        if entry is not None:
            names.add(_shown(entry[0]))
        elif inputs is not None and here not in inputs:
            names.add(OUTSIDE)
    return names


def copied_from(result, made: dict, sources: set) -> bool:
    """Whether the returned tensor's memory is one of ``sources`` (the memories the launches
    wrote) or a copy of one, through copies alone."""
    try:
        start = _address(result)
    except Exception:  # noqa: BLE001 - a tensor without memory of its own: no claim
        return True
    return any(here in sources for here, _ in _back(start, made,
                                                    lambda entry: entry[0] in COPIES))


def copied_memories(result, made: dict) -> list[int]:
    """The memories the returned tensor's values were copied from, through copies alone
    (its own first)."""
    try:
        start = _address(result)
    except Exception:  # noqa: BLE001 - a tensor without memory of its own
        return []
    return [here for here, _ in _back(start, made, lambda entry: entry[0] in COPIES)]


# Steps that keep each value where it was, changed by constants or masks alone: an honest
# launcher's preparation of its inputs (learning.grader.calls.inputs_followed)
ELEMENTWISE = frozenset({"mul", "div", "truediv", "add", "sub", "rsub", "neg", "positive",
                         "where", "masked_fill", "clamp", "clip", "clamp_min", "clamp_max",
                         "nan_to_num"})


def input_like(address: int, made: dict, inputs: set, blocked=frozenset()) -> bool:
    """Whether the values at ``address`` are the call's inputs' own: an input, or made from
    one through copies and ELEMENTWISE steps that read one tensor of values beside constants,
    masks and indices (x * 1, x / t for a one-value t, torch.where(torch.isnan(x), nan, x), a
    padded copy with its padding filled), none in ``blocked`` (a part's own answers, the call's
    reductions). A step that reads two tensors of values (x + x.roll(1), a @ b), or any other
    step, is more than the inputs' own (up to MOST_STEPS memories back)."""
    queue, seen = [(address, None)], set()
    while queue:
        here, entry = _as_read(made, *queue.pop(0))
        if here in seen:
            continue
        if len(seen) >= MOST_STEPS:
            return False
        seen.add(here)
        if entry is None:
            if here not in inputs:
                return False
            continue
        if not _holds_values(entry) or entry[0] in ALLOCATIONS or entry[0] in WRAPS:
            continue  # a constant, a mask or indices: no value of the inputs' changed
        name = _shown(entry[0])
        if entry[0] not in COPIES and name not in ELEMENTWISE or name in blocked or \
                not entry[1]:
            return False  # a step that may do more than keep each value (a custom op's)
        values = [(read, _step(entry)) for read in entry[1]
                  if _carries_values(made, read, _step(entry), inputs)]
        if not values or entry[0] not in COPIES and len(values) > 1:
            # made from constants alone (and what wrote into them unseen), or combining
            # values (a fold, a product)
            return False
        queue.extend(values)
    return True


def _carries_values(made: dict, address: int, when: int, inputs: set) -> bool:
    """Whether what a step read at ``address`` held values: an input, or a float memory no
    allocation or wrapped constant made."""
    here, entry = _as_read(made, address, when)
    if entry is None:
        return here in inputs
    return _holds_values(entry) and entry[0] not in ALLOCATIONS and entry[0] not in WRAPS


def reads_from(address: int, made: dict, sources: set) -> bool:
    """Whether the values at ``address`` came, through whatever torch did to them, from one
    of the memories ``sources`` (the call's inputs, and what its launches were given): a
    row's count of visible keys summed from torch.ones did not, a row's maximum did."""
    return any(here in sources for here, _ in _back(address, made, lambda entry: True))


_UNFOLLOWED_ENTRY = (UNFOLLOWED, (), 0, None)


def _as_read(made: dict, address: int, when: int | None) -> tuple[int, object]:
    """(key, entry) of what ``address`` held when a step noted at ``when`` read it (None: now):
    its entry, or the earlier version it replaced since. (``address``, None) where nothing
    noted had made it then (an input, or a memory the record first saw later)."""
    entry = made.get(address)
    key = address
    while when is not None and entry is not None and _step(entry) > when:
        if len(entry) < 4 or entry[3] is None:
            return address, None
        key = entry[3]
        entry = made.get(key)
    return key, entry


def _step(entry) -> int:
    """When an entry was noted (0 for one written by hand, with no step: before any)."""
    return entry[2] if len(entry) > 2 else 0


def _back(address: int, made: dict, through):
    """(memory, what made it or None) from ``address`` back through what each was made from
    (as it was when read), where ``through(entry)`` says to go on, breadth first, up to
    MOST_STEPS memories; past them, (None, UNFOLLOWED's entry): the record follows no further."""
    queue, seen = [(address, None)], set()
    while queue:
        here, entry = _as_read(made, *queue.pop(0))
        if here in seen:
            continue
        if len(seen) >= MOST_STEPS:
            yield None, _UNFOLLOWED_ENTRY
            return
        seen.add(here)
        yield here, entry
        if entry is not None and through(entry):
            queue.extend((read, _step(entry)) for read in entry[1])


def _origins(result, made: dict, given):
    """Where the returned tensor's memory came from: the walk back through copies, up to
    MOST_STEPS memories, yields each memory it reaches that is no copy, with what made it (None
    when nothing seen did; UNFOLLOWED's entry past MOST_STEPS, as ``_back``). A memory a
    launch was given ends the walk there, unyielded."""
    if not _is_tensor(result):
        return
    try:
        queue = [(_address(result), None)]
    except Exception:  # noqa: BLE001 - a tensor without memory of its own to follow
        return
    seen = set()
    while queue:
        address, entry = _as_read(made, *queue.pop(0))
        if address in seen or address in given:
            continue
        if len(seen) >= MOST_STEPS:
            yield None, _UNFOLLOWED_ENTRY
            return
        seen.add(address)
        if entry is not None and entry[0] in COPIES:
            queue.extend((read, _step(entry)) for read in entry[1])
        else:
            yield address, entry


def _shown(name: str) -> str:
    """A function by the work it does: an operator's method by its operation ("__rmul__" is
    mul), an in-place method by its function ("addmm_" is addmm), a private name by the
    public one ("_softmax" is softmax), anything else by its name."""
    if name.startswith("__") and name.endswith("__"):
        bare = name.strip("_")
        return bare[1:] if bare[:1] in ("r", "i") and bare[1:] in _OPERATORS else bare
    bare = name.lstrip("_")
    return (bare[:-1] if bare.endswith("_") else bare) or name


_OPERATORS = frozenset({"add", "sub", "mul", "truediv", "floordiv", "matmul", "pow", "mod",
                        "and", "or"})
# The special methods noted: the operators (plain, reflected, in place) and item access
_NOTED_SPECIAL = frozenset({f"__{kind}{op}__" for kind in ("", "r", "i") for op in _OPERATORS} | {
    "__neg__", "__abs__", "__getitem__", "__setitem__"})


def _own_handler(types) -> bool:
    """Whether one of ``types`` (a torch function mode's) is a tensor subclass with a
    __torch_function__ of its own, which runs the function with the modes off."""
    import torch

    plain = {getattr(torch.Tensor.__torch_function__, "__func__", None),
             getattr(torch._C, "_disabled_torch_function_impl", None)}
    for kind in types or ():
        handler = getattr(kind, "__torch_function__", None)
        if kind is not torch.Tensor and getattr(handler, "__func__", handler) not in plain:
            return True
    return False


def _most_read_of_one_memory(args, kwargs) -> int:
    """The most values read from one memory by a call: its different views of that memory
    counted together (x[:, 0::2].maximum(x[:, 1::2]) reads all of x's row to return half of
    it: a step of a fold, as a reduction's), a view given twice once."""
    views: dict[int, dict] = {}
    for tensor in _tensors((args, kwargs)):
        try:
            key = (tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()))
            views.setdefault(_address(tensor), {}).setdefault(key, tensor.numel())
        except Exception:  # noqa: BLE001 - a tensor without plain memory: counted alone
            views.setdefault(id(tensor), {})[()] = tensor.numel()
    return max((sum(seen.values()) for seen in views.values()), default=0)


def _spans_its_memory(tensor) -> bool:
    """Whether ``tensor`` covers every byte of its storage (a write to it leaves nothing)."""
    try:
        return tensor.is_contiguous() and tensor.storage_offset() == 0 and \
            tensor.numel() * tensor.element_size() == tensor.untyped_storage().nbytes()
    except Exception:  # noqa: BLE001 - a tensor without plain memory
        return False


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _address(tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def tensors_in(value):
    """The tensors in ``value``: itself, or those in its lists, tuples and dicts."""
    return _tensors(value)


def _tensors(value):
    if _is_tensor(value):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
