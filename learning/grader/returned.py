"""What came back from one call of the learner's function, reduced to plain data.

The learner's process builds these; the grader's process judges them. Only numbers, strings and
numpy arrays cross between the two, so the learner's code never takes part in the judging.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Returned:
    """The learner's function returned normally."""

    type_name: str
    values: Any = None  # numpy float64 array of the returned numbers, or None if not numbers
    shape: tuple[int, ...] | None = None
    strides: tuple[int, ...] | None = None  # tensors only, in elements
    dtype: str | None = None  # tensors only: "float32", ...
    device: str | None = None  # tensors only: "cpu", "cuda"
    note: str = ""  # why ``values`` is missing, when it is
    input_mutated: bool = False
    changed_args: tuple[int, ...] = ()  # the positions of the arguments the call changed
    changed_where: str = ""  # where the first of them changed first, and how
    # a tensor argument's requires_grad turned on or off, or a .grad left on it, by the call
    input_autograd_changed: bool = False
    aliases_input: bool = False
    # kernel parts, the first case: what calling again with other inputs did to the tensor
    # returned (the same memory returned, or its values changed); "" where nothing
    reused_by_next_call: str = ""
    unwritten: Any = None  # bool array: outputs still holding the fill value on a second run
    # outputs NaN with memory filled with NaN that, filled with another value, hold one that
    # is neither NaN nor that value: what the memory held before the kernel flows into them
    follows_fill: int = 0
    raw: Any = None  # the value itself, when it is small plain data (str, int, tuple, ...)
    # the numpy scalar types found in a small container that is otherwise plain data (np.int64
    # where an int would be): the reason ``raw`` is missing, said in words
    numpy_scalars: tuple[str, ...] = ()
    guard_damage: int = 0  # elements written into the guard bands around new GPU tensors
    kernel_launches: int | None = None  # kernel parts: launches during the call (None: unseen)
    # kernel parts: the returned tensors (by position) that differ from what the last launch
    # given their memory left in it
    changed_after_launch: tuple[int, ...] = ()
    # kernel parts: the arguments (by position) that held other values than the caller gave
    # when a kernel was launched, whatever they held by the end of the call
    changed_before_launch: tuple[int, ...] = ()
    # kernel parts: the torch function that computed a returned tensor, where torch did
    computed_by_torch: str = ""
    # kernel parts: the torch function (or the wrapping of values made outside torch) whose
    # result a launch was given and a returned tensor holds bit for bit: passed through
    passed_through: str = ""
    # kernel parts: a returned tensor made by nothing the check saw (numpy's values wrapped,
    # say) that stayed the same when the call ran again with what each launch stored changed
    ignores_kernels: bool = False
    # kernel parts: the torch function that wrote into a returned tensor's memory, a memory a
    # launch was given (copy_ between two launches, say), where ``ignores_kernels`` found the
    # kernels' stores do not reach it
    written_by_torch: str = ""
    # kernel parts: the most Python threads the learner's code started that were running as a
    # kernel was launched or as the call returned (calls.LaunchCounter._note_threads)
    other_threads: int = 0
    # kernel parts: a memory a launch left changed before the next launch with no torch
    # function seen writing it; the name of a kernel launched with pre-run hooks
    unseen_between: bool = False
    pre_run_hooks: str = ""
    # kernel parts: a torch function that computes the part's answer (torch.softmax for a
    # softmax) from which values given to a launch came, however changed on the way
    answer_fed: str = ""
    # kernel parts: the different plain numbers the launches were given, where they are many
    # and the result follows them (values computed outside the kernels, handed over as
    # arguments); 0 otherwise
    numbers_fed: int = 0
    # kernel parts: the grader's own code in the learner's process that had changed by the
    # end of the call (learning.grader.tampering), so that what it counted is not known
    grader_changed: tuple[str, ...] = ()
    # kernel parts, in the interpreter: what one program of a launch read that another
    # stored (or stored where another read) with no atomic operation to order the two
    # (learning.grader.program_order.Watch)
    races: tuple[str, ...] = ()
    # kernel parts, in the interpreter: the call's kernels did arithmetic on bfloat16 values,
    # which the interpreter computes on their raw bits (learning.grader.gpu_arithmetic)
    bfloat16_arithmetic: bool = False
    # kernel parts: the returned tensors (by position) in a memory too large for the check to
    # compare with what the last launch left there (calls.LARGEST_DIGESTED_BYTES)
    uncompared: tuple[int, ...] = ()
    # kernel parts: a call made again with the same inputs, for evidence, returned having
    # launched no kernel (a result kept from the first call, handed back)
    repeat_launched_nothing: bool = False
    # kernel parts: the kind of object a launch was given as a pointer, no torch tensor, whose
    # memory the check could not follow (learning.grader.calls._memory_of)
    pointer_unseen: str = ""
    # kernel parts: the run for evidence that changes what the kernels stored raised, where
    # the first call had returned (calls.ignores_kernels)
    evidence_raised: bool = False
    # kernel parts: the values the call returned, with what the kernels stored changed, that
    # are none of those the kernels' memories then held (calls.ignores_kernels)
    beyond_stores: int = 0
    # kernel parts: with the call's inputs (and copies of them) changed just before each
    # launch, the call returned the same values (calls.inputs_followed)
    inputs_unread: bool = False
    # the hooks (sys.settrace, sys.setprofile, sys.monitoring) the learner's code had set when
    # a call of it returned, put back before the grader's code ran on (learning.grader.hooks)
    hooks_left: str = ""
    # plain-Python parts: the first function of torch, numpy or triton the call ran, or the
    # library whose values the list returned holds (learning.grader.plain)
    libraries_used: str = ""
    seconds: float = 0.0


@dataclass
class Raised:
    """The learner's function raised an exception (SystemExit included)."""

    exc_type: str
    message: str
    traceback: str
    not_started: bool = False  # NotImplementedError: the stub is still in place
    seconds: float = 0.0
    gpu_lost: bool = False  # a CUDA error: nothing more can run in this process's context


@dataclass
class Skipped:
    """The case did not run in this mode (a GPU-only case in the interpreter)."""

    reason: str


@dataclass
class ImportProblem:
    """The learner's module could not be imported, or lacks the function a part needs."""

    kind: str  # "syntax", "import", "exception", "missing-function", "missing-file",
    # "not-a-file"
    message: str
    traceback: str = ""
    function: str = ""
    details: dict = field(default_factory=dict)
