"""What an exception raised by the learner's code means, when its type and message say so.

The grader prints a meaning only when the error itself carries it: each entry matches the
exception's type and a pattern of its message, the way the message is worded by Python, NumPy,
PyTorch or Triton (3.3 to 3.9). An exception that matches no entry gets the plain facts: its
type, its message and the learner's line. Nothing here guesses at the learner's intent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Meaning:
    """What one kind of error means. ``explain`` may use the pattern's named groups."""

    key: str
    types: tuple[str, ...]  # exception class names; empty matches any
    pattern: str  # a regular expression searched in the message
    explain: str

    def match(self, exc_type: str, message: str) -> str | None:
        if self.types and exc_type not in self.types:
            return None
        found = re.search(self.pattern, message)
        if found is None:
            return None
        return self.explain.format(**{k: v or "" for k, v in found.groupdict().items()})


MEANINGS = (
    Meaning("arange-power-of-two", ("ValueError", "CompilationError"),
            r"arange's range must be a power of 2",
            "tl.arange(0, BLOCK) needs BLOCK to be a power of two (16, 32, 64, ...): choose "
            "one, or round a length up to one with triton.next_power_of_2, and mask the lanes "
            "past the end"),
    Meaning("arange-constexpr", ("ValueError", "CompilationError", "TypeError"),
            r"arange's arguments must be of type tl\.constexpr",
            "tl.arange's bounds must be known when the kernel is compiled: pass BLOCK as a "
            "parameter annotated BLOCK: tl.constexpr, not a runtime value such as n_cols"),
    Meaning("store-other", ("TypeError", "CompilationError"),
            r"store\(\) got an unexpected keyword argument 'other'",
            "tl.store takes no other=: a masked store simply leaves the masked lanes "
            "unwritten; other= belongs to tl.load, where it fills the masked lanes"),
    Meaning("other-without-mask", ("ValueError", "CompilationError"),
            r"`other` cannot be provided without `mask`",
            "tl.load's other= fills the lanes a mask turns off, so it needs mask= beside it: "
            "pass the mask (offsets < n_cols, say), or drop other= where every lane is real"),
    Meaning("unexpected-keyword", ("TypeError", "CompilationError"),
            r"(?P<fn>\w+)\(\) got an unexpected keyword argument '(?P<arg>\w+)'",
            "{fn}() has no parameter called {arg}: check the spelling against its signature "
            "(in a launch, the kernel's own parameter list)"),
    Meaning("missing-argument", ("TypeError",),
            r"(?P<fn>\w+)\(\) missing (?P<count>\d+) required (?:positional |keyword-only )?"
            r"arguments?: (?P<names>.+)",
            "{fn} was called without {names}: every parameter needs an argument (in a kernel "
            "launch too, where tl.constexpr ones go as keywords, BLOCK=...)"),
    Meaning("multiple-values", ("TypeError",),
            r"(?P<fn>\w+)\(\) got multiple values for argument '(?P<arg>\w+)'",
            "{fn} received {arg} twice: once by position and once by keyword, usually because "
            "a positional argument too many shifted the rest"),
    Meaning("too-many-arguments", ("TypeError",),
            r"(?P<fn>\w+)\(\) takes (?P<want>\d+) positional arguments? but (?P<got>\d+) "
            r"(?:were|was) given",
            "{fn} takes {want} positional arguments and was given {got}"),
    Meaning("grid-not-tuple", ("TypeError",),
            r"object of type 'int' has no len\(\)",
            "a launch grid is a tuple, even for one dimension: kernel[(n_programs,)](...), "
            "or a function of the meta-parameters that returns one"),
    Meaning("shapes-incompatible", ("ValueError", "CompilationError"),
            r"Cannot make_shape_compatible: incompatible dimensions at index (?P<i>\d+): "
            r"(?P<a>\d+) and (?P<b>\d+)",
            "two blocks of different shapes ({a} and {b} along dimension {i}) were combined: "
            "every block in one expression needs the same shape, or one that broadcasts "
            "(a reduction without keep_dims=True drops a dimension)"),
    Meaning("torch-shapes", ("RuntimeError",),
            r"The size of tensor a \((?P<a>\d+)\) must match the size of tensor b "
            r"\((?P<b>\d+)\)",
            "two tensors of sizes {a} and {b} were combined elementwise: their shapes do not "
            "broadcast"),
    Meaning("numpy-shapes", ("ValueError",),
            r"operands could not be broadcast together",
            "two arrays whose shapes do not broadcast were combined elementwise"),
    Meaning("float-dtype", ("ValueError", "CompilationError", "TypeError"),
            r"Expected dtype \[(?P<want>[^\]]*)\] but got (?P<got>\w+)",
            "this Triton function accepts only {want}, and the block given to it holds {got}: "
            "convert it first (x.to(tl.float32))"),
    Meaning("one-number-function", ("TypeError", "CompilationError"),
            r"only (?:0-dimensional|length-1|size-1|integer scalar) arrays can be converted to "
            r"Python scalars|must be real number, not tensor",
            "a function that takes one number (math.exp, math.sqrt, float(), int(), round()) "
            "was given a whole block or array: inside a kernel, use Triton's own, which work "
            "on every lane at once (tl.exp, tl.sqrt, x.to(tl.float32))"),
    Meaning("floor-division-float", ("TypeError", "CompilationError"),
            r"unexpected type (?P<ty>(?:fp|bf)\d+)\b",
            "// in a kernel divides integers only, and this block holds {ty}: divide floats "
            "with /"),
    Meaning("reduction-axis", ("ValueError", "CompilationError"),
            r"(?:axis (?P<axis>-?\d+) out of bounds for shape|invalid axis (?P<bad>-?\d+)\. "
            r"Expected)",
            "the block has fewer dimensions than axis={axis}{bad} needs: a 1-D block reduces "
            "over axis=0"),
    Meaning("pointer-argument", ("ValueError", "TypeError", "AttributeError"),
            r"Pointer argument|cannot be accessed from Triton",
            "a kernel pointer argument must be a torch tensor on the kernel's device, "
            "not a list, a number or a tensor on another device"),
    Meaning("dict-argument", ("TypeError",), r"failed to specialize argument of type: dict",
            "Triton's launch was handed a dict as a kernel argument: either the launch passes "
            "one (a kernel takes tensors, numbers and constexprs), or the kernel has a "
            "parameter named params, which Triton's compiled launch (3.6 at least) binds to a "
            "dict of its own: rename that parameter"),
    Meaning("division-by-zero", ("ZeroDivisionError",), r"",
            "a division by zero: the denominator (a sum, a count, a norm) was exactly 0 "
            "for this case's input"),
    Meaning("math-range", ("OverflowError",),
            r"math range error|result too large|overflow|Numerical result out of range",
            "a result too large for a float: math.exp(x) overflows past x of about 709.78, "
            "and x ** 2 or x * x past about 1.34e154"),
    Meaning("math-domain", ("ValueError",), r"math domain error",
            "a math function got an argument outside its domain: math.sqrt or math.log of a "
            "negative number, or math.log(0)"),
    Meaning("list-index", ("IndexError",), r"(list|tuple) (assignment )?index out of range",
            "a list was indexed (or assigned to) at or past its end: the index reached "
            "len(...) or beyond"),
    Meaning("tensor-index", ("IndexError",), r"index (?P<i>-?\d+) is out of bounds",
            "an index past the end of a tensor or array: {i} is not a valid position"),
    Meaning("empty-sequence", ("ValueError",), r"(max|min)\(\) (arg is an empty sequence|"
            r"iterable argument is empty)",
            "max() or min() of an empty list: give it a default, or handle the empty case first"),
    Meaning("name-not-defined", ("NameError", "CompilationError"),
            r"(?:name '(?P<name>\w+)'|\b(?P<bare>\w+)) is not defined",
            "the name {name}{bare} is used but never defined here: a misspelling, a variable "
            "from another function, or a missing import (inside a kernel, Triton's functions "
            "are tl.something)"),
    Meaning("unbound-local", ("UnboundLocalError",),
            r"(?:local variable '(?P<a>\w+)'|cannot access local variable '(?P<b>\w+)')",
            "the variable {a}{b} is read before the line that assigns it has run"),
    Meaning("none-operand", ("TypeError",), r"'NoneType'",
            "a value in the computation is None: a function it came from has no return "
            "statement, or a variable was never set"),
    Meaning("not-callable", ("TypeError",), r"'(?P<what>\w+)' object is not callable",
            "a {what} is called like a function: a name that holds a value shadows the "
            "function of that name, or parentheses follow a value"),
    Meaning("recursion", ("RecursionError",), r"",
            "the function calls itself without end: a recursion whose base case is never "
            "reached"),
    Meaning("out-of-memory", ("MemoryError", "OutOfMemoryError"), r"",
            "the code asked for far more memory than the case needs (on the CPU check caps it; "
            "--memory GIB raises the cap): a list or tensor that grows without end, or one "
            "sized by a square of the input"),
    Meaning("torch-allocation", ("RuntimeError",), r"can't allocate memory",
            "the code asked for far more memory than the case needs (on the CPU check caps it; "
            "--memory GIB raises the cap)"),
    # Triton's words when code asks for the GPU's driver where there is none: in the
    # interpreter, @triton.autotune with several configurations times them on a GPU
    Meaning("no-gpu-driver", ("RuntimeError",), r"0 active drivers",
            "Triton looked for a GPU driver and found none: this code needs a GPU. In Triton's "
            "interpreter @triton.autotune cannot time its configurations (keep one, or choose "
            "with @triton.heuristics), nor can triton.testing.do_bench or "
            "triton.runtime.driver.active run"),
    Meaning("key-error", ("KeyError",), r"",
            "a dictionary was looked up with a key it does not hold"),
)


def meaning(exc_type: str, message: str) -> Meaning | None:
    """The first entry that explains this exception, or None."""
    for entry in MEANINGS:
        if entry.match(exc_type, message) is not None:
            return entry
    return None


def explain(exc_type: str, message: str) -> tuple[str, str] | None:
    """(key, text) of what the exception means, or None when no entry knows it."""
    entry = meaning(exc_type, message)
    return None if entry is None else (entry.key, entry.match(exc_type, message))


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n'
                    r"(?:\s+(?P<code>\S.*))?$", re.MULTILINE)


def learner_line(traceback_text: str, filename: str) -> str:
    """'softmax.py, line 18 (softmax_python): denominator = sum(shifted)', the last frame of
    the learner's file in a traceback, or "" when none is there."""
    last = None
    for found in _FRAME.finditer(traceback_text):
        if found["file"].replace("\\", "/").rsplit("/", 1)[-1] == filename:
            last = found
    if last is None:
        return ""
    code = (last["code"] or "").strip()
    where = f"{filename}, line {last['line']} ({last['fn']})"
    return f"{where}: {code}" if code else where
