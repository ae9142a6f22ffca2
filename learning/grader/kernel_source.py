"""What in a kernel's source reaches past Triton's language into the interpreter's own objects.

In Triton's interpreter a @triton.jit function runs as Python: its tensors are the
interpreter's, whose values are NumPy arrays (``x.handle.data``), and any Python in its body
runs. The GPU compiler sees the same source, but it evaluates ``hasattr``, a module's constant
or an ``if`` on one while it compiles, and drops a branch it finds false. A kernel can so hold a
branch that only the interpreter runs (``if hasattr(x.handle, "data"):`` numpy computing the
answer into the loaded block), and then compile for a GPU into a kernel that only copies: the
interpreter's result is not the GPU's. Nothing of that kind is Triton's language, so the
compile check, which reads every kernel it compiles, says it cannot vouch for one that does it:

- an attribute ``handle`` (the interpreter's value behind a tensor) or any ``__dunder__``;
- the builtins that reach into objects or run other code (``getattr``, ``vars``, ``eval``, ...);
- a call to anything neither Triton's nor a plain builtin (a function of the learner's or of
  NumPy, a functools.partial, an object with ``__call__``): the compiler cannot compile one, so
  it compiled only because the call sits in a branch the compiler drops.

The @triton.jit functions a kernel calls are read the same way.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import types

# Builtins a kernel has no use for, each a way into objects or into running other code
REFLECTIVE = frozenset({
    "getattr", "hasattr", "setattr", "delattr", "vars", "dir", "globals", "locals", "eval",
    "exec", "compile", "__import__", "open", "id", "type", "object", "super", "memoryview",
    "breakpoint", "input"})
# How deep the @triton.jit functions a kernel calls are followed
DEPTH = 8


def past_the_language(kernel, jit_class) -> str:
    """The first thing in ``kernel``'s source (a JITFunction) or in a @triton.jit function it
    calls that is not Triton's language, said with its line ("x.handle at line 23"), or ""."""
    seen: set[int] = set()
    todo = [(kernel, 0)]
    while todo:
        function, depth = todo.pop()
        if id(function) in seen or depth > DEPTH:
            continue
        seen.add(id(function))
        found, called = _read(function, jit_class)
        if found:
            return found
        todo += [(inner, depth + 1) for inner in called]
    return ""


def _read(function, jit_class) -> tuple[str, list]:
    """(what reaches past the language in one JITFunction's body, or ""; the JITFunctions it
    calls)."""
    source = getattr(function, "src", None)
    python = getattr(function, "fn", None)
    if not isinstance(source, str) or python is None:
        return "", []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "", []
    first = _first_line(python)
    names = getattr(python, "__globals__", {})
    # the function's own names (an argument called input or type is no builtin)
    own = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)} | \
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    called = []
    for node in ast.walk(tree):
        where = f" at line {first + getattr(node, 'lineno', 1) - 1}" if first else ""
        if isinstance(node, ast.Attribute) and (
                node.attr == "handle" or node.attr.startswith("__") and
                node.attr.endswith("__")):
            return f"{_text(node)}{where}", []
        if isinstance(node, ast.Name) and node.id in REFLECTIVE and node.id not in names and \
                node.id not in own:
            return f"{node.id}{where}", []
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id not in names and \
                    node.func.id not in own and not hasattr(builtins, node.func.id):
                # named, yet defined nowhere the compiler looked: made by a statement the
                # compile check leaves out (a functools.partial, say), in a dropped branch
                return f"a call to {node.func.id}, which the kernel's module does not " \
                       f"define for the compiler{where}", []
            if not isinstance(node.func, (ast.Name, ast.Attribute)):
                # called through what an expression gives (a tuple's item, a call's result):
                # Triton compiles calls of names only, so this runs in the interpreter alone
                return f"a call through {_text(node.func)}, which is not Triton's{where}", []
            target = _resolve(node.func, names)
            inner = _unwrapped(target, jit_class)
            if inner is not None:
                called.append(inner)
            elif _foreign(target):
                return f"a call to {_text(node.func)}, which is not Triton's{where}", []
    return "", called


def _first_line(python) -> int:
    """The line of the function's ``def`` (its source, as the JITFunction holds it, starts
    there; the code's first line is its first decorator's)."""
    code = getattr(python, "__code__", None)
    if code is None:
        return 0
    lines = linecache.getlines(code.co_filename)
    for number in range(code.co_firstlineno, min(len(lines), code.co_firstlineno + 50) + 1):
        if lines[number - 1].lstrip().startswith(("def ", "async def ")):
            return number
    return code.co_firstlineno


def _text(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - a node that cannot be said is named by its kind
        return type(node).__name__


def _resolve(node, names: dict):
    """The object a call's target names (``helper``, ``module.helper``), or None."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, names)
        if isinstance(owner, types.ModuleType):
            return vars(owner).get(node.attr)
        if owner is not None:  # a global object's attribute (a namespace of helpers)
            try:
                return inspect.getattr_static(owner, node.attr)
            except AttributeError:
                return None
    return None


def _unwrapped(target, jit_class):
    """The JITFunction ``target`` is or wraps (autotune, heuristics), or None."""
    for _ in range(DEPTH):
        if target is None or isinstance(target, jit_class):
            return target
        target = getattr(target, "fn", None) if not isinstance(target, types.FunctionType) \
            else None
    return None


def _foreign(target) -> bool:
    """A callable a kernel names that is neither Triton's nor a builtin: a plain function (the
    learner's, NumPy's, math's), a functools.partial, an object with __call__. The GPU compiler
    cannot compile a call to one (only @triton.jit functions and Triton's own), so a kernel
    that compiled with one holds it in a branch the compiler drops."""
    if target is None:
        return False
    # an object's own class says whose it is (a wrapper copies its function's __module__:
    # Triton's constexpr_function is Triton's, whatever module the function was written in)
    module = getattr(target, "__module__", None) if isinstance(
        target, (types.FunctionType, types.BuiltinFunctionType, type)) else \
        type(target).__module__
    if not isinstance(module, str):
        return True
    if module == "builtins" and isinstance(target, (types.BuiltinFunctionType, type)):
        return False  # min, max, range, len, print, int: the reflective ones are said above
    return module.split(".")[0] != "triton"
