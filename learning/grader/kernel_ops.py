"""What a compiled kernel computes, by kind of operation, read from the GPU compiler's own output.

The compile check compiles every kernel the interpreter ran for a GPU; the first stage of that
compilation, Triton's IR (TTIR), lists each operation the GPU would run. A softmax takes an
exponential, a maximum and a sum; a matrix product multiplies and adds. Kernels that take none
of what their exercise needs cannot have computed its answer, whatever the interpreter's run
gave: torch's answer handed to a kernel in disguise, or values written into its memory by other
code, or a branch only the interpreter runs. Each exercise declares what its kernels, together,
must compute (``Part.kernel_ops``): alternatives, each a set of these kinds.
"""

from __future__ import annotations

import re

# The kinds, each with the TTIR operations that are one (elementwise or inside a reduction's
# body), and for the calls to the GPU's math library, the words in the function's name
KINDS = {
    "exp": (("math.exp", "math.exp2"), ("exp",)),
    "max": (("arith.maxnumf", "arith.maximumf", "arith.maxsi", "arith.maxui"), ("fmax",)),
    "sum": (("tt.reduce",), ()),
    "add": (("arith.addf",), ()),
    "mul": (("arith.mulf", "math.fma"), ("fma",)),
    "dot": (("tt.dot", "tt.dot_scaled"), ()),
    "sqrt": (("math.sqrt", "math.rsqrt", "tt.precise_sqrt"), ("sqrt",)),
    "div": (("arith.divf", "tt.precise_divf"), ("div",)),
}
# How each kind is said to the learner
WORDS = {"exp": "an exponential (tl.exp or tl.exp2)", "max": "a maximum",
         "sum": "a reduction (tl.sum, tl.max)", "add": "an addition", "mul": "a product",
         "dot": "a matrix product (tl.dot)", "sqrt": "a square root (tl.sqrt or tl.rsqrt)",
         "div": "a division"}

_OPERATION = re.compile(r"\b((?:tt|arith|math)\.[a-z_0-9]+)\b")
# An atomic read-modify-write sums (or takes the maximum) across programs: a reduction too
_ATOMIC = re.compile(r"\btt\.atomic_rmw\s+([a-z]+)")
_ATOMIC_KINDS = {"fadd": ("add", "sum"), "add": ("add", "sum"), "max": ("max", "sum"),
                 "umax": ("max", "sum"), "min": ("sum",), "umin": ("sum",)}
_EXTERN = re.compile(r'symbol\s*=\s*"([^"]+)"')


def kinds_in(ttir: str) -> frozenset[str]:
    """The kinds of operation a kernel's TTIR holds."""
    operations = set(_OPERATION.findall(ttir))
    externs = [name.lower() for name in _EXTERN.findall(ttir)]
    found = set()
    for kind, (names, extern_words) in KINDS.items():
        if operations & set(names) or any(word in name for name in externs
                                          for word in extern_words):
            found.add(kind)
    for operation in _ATOMIC.findall(ttir):
        found.update(_ATOMIC_KINDS.get(operation, ()))
    return frozenset(found)


def missing(needed: tuple[tuple[str, ...], ...], found: frozenset[str]) -> tuple[str, ...]:
    """() when ``found`` holds every kind of one of the ``needed`` alternatives; else the kinds
    the nearest alternative lacks."""
    if not needed:
        return ()
    lacking = [tuple(kind for kind in option if kind not in found) for option in needed]
    return min(lacking, key=len)


def said(kinds: tuple[str, ...]) -> str:
    words = [WORDS.get(kind, kind) for kind in kinds]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
