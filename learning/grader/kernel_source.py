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
  it compiled only because the call sits in a branch the compiler drops;
- any global the kernel names that is neither data (numbers, strings, tuples of them, a
  ``tl.constexpr`` of one), a module, a @triton.jit function nor one of Triton's own objects:
  an object of the learner's runs their Python through an operator (``HOOK + x``), an index, a
  property or an attribute set on it, with no call to see, and a ``tl.constexpr`` may hold a
  function;
- a ``@triton.constexpr_function`` of the learner's: plain Python that the interpreter runs as
  the kernel runs (handed the block itself, or reaching a global the launcher filled).

"Triton's own" is by identity, with what Triton's modules held before the learner's statements
ran (``remember_tritons_own``): a function of theirs that says its module is triton.language is
not. Both processes read the kernel: the one that ran it (its globals as they were there) and the
compile check's, so a global that is one thing where the kernel ran and another where it is
compiled is read as each. The @triton.jit functions a kernel calls are read the same way. And
what is read must be what compiles: the compiler takes the source, globals and signature the
@triton.jit object keeps, so in the compile check's process each must be its function's own
(``not_as_made``).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import importlib
import inspect
import sys
import textwrap
import types

# Builtins a kernel has no use for, each a way into objects or into running other code
REFLECTIVE = frozenset({
    "getattr", "hasattr", "setattr", "delattr", "vars", "dir", "globals", "locals", "eval",
    "exec", "compile", "__import__", "open", "id", "type", "object", "super", "memoryview",
    "breakpoint", "input"})
# How deep the @triton.jit functions a kernel calls are followed
DEPTH = 8
# Triton's modules a kernel reaches its language through, loaded before they are remembered
TRITON_MODULES = ("triton", "triton.language", "triton.language.core",
                  "triton.language.standard", "triton.language.math", "triton.language.extra",
                  "triton.language.extra.libdevice", "triton.language.extra.cuda",
                  "triton.language.extra.cuda.libdevice", "triton.runtime.jit",
                  "triton.runtime.autotuner", "triton.runtime.interpreter")
# The kinds of Triton's objects that hold a function Triton compiles (or interprets) as a kernel
_KERNEL_KINDS = frozenset({"JITFunction", "InterpretedFunction", "Autotuner", "Heuristics"})

# Triton's own objects by identity (and the code objects of its functions, with which its
# interpreter makes the functions it puts into triton.language as it launches), kept before the
# learner's statements run. Immutable, and rebound only by remember_tritons_own: the grader's
# watch on its own modules sees any other change.
_OWN_IDS: frozenset = frozenset()
_OWN_CODE_IDS: frozenset = frozenset()
_OWN_GLOBALS_IDS: frozenset = frozenset()  # Triton's modules' namespaces
# every name Triton's code reads an attribute by, and its classes' own: what an attribute of a
# block (or of any object a kernel holds) can be called
_OWN_ATTRIBUTES: frozenset = frozenset()
# Triton's classes whose attributes a kernel's blocks and constants reach, as they were
_CLASSES: tuple = ()
# triton.language's modules and what they held (tl.sum's code reads its module's globals)
_NAMESPACES: tuple = ()
# TRITON_MODULES themselves, by name: each name's module as it was (not one the learner's code
# made and called by that name, or put in sys.modules)
_MODULES: types.MappingProxyType = types.MappingProxyType({})
_KEPT: tuple = ()  # the objects themselves, so that no id is reused
_MISSING = object()
_LOCAL = object()  # a name of the function's own: known only as it runs


def remember_tritons_own() -> None:
    """Keep what Triton's modules hold now: run before the learner's statements, it is what
    "Triton's own" means afterwards."""
    global _OWN_IDS, _OWN_CODE_IDS, _OWN_GLOBALS_IDS, _OWN_ATTRIBUTES, _CLASSES, _NAMESPACES
    global _KEPT, _MODULES
    for name in TRITON_MODULES:
        with contextlib.suppress(Exception):  # a release without it
            importlib.import_module(name)
    kept, codes, namespaces, attributes, classes, language = [], [], [], set(), [], []
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or \
                not (name == "triton" or name.startswith("triton.")):
            continue
        kept.append(module)
        namespaces.append(vars(module))
        if name.startswith("triton.language"):
            language.append((module, types.MappingProxyType(dict(vars(module)))))
        for value in list(vars(module).values()):
            kept.append(value)
            if isinstance(value, type):  # a class's own: tl.tensor's methods, dtype's
                with contextlib.suppress(Exception):
                    own = dict(vars(value))
                    kept += list(own.values())
                    attributes.update(own)
                    if value.__module__.startswith("triton.language"):
                        classes.append((value, types.MappingProxyType(own)))
    for value in kept:
        codes += _codes_in(value)
    for code in codes:
        attributes.update(code.co_names)
    _KEPT = tuple(kept) + tuple(codes) + tuple(namespaces)
    _OWN_IDS = frozenset(id(value) for value in kept)
    _OWN_CODE_IDS = frozenset(id(code) for code in codes)
    _OWN_GLOBALS_IDS = frozenset(id(namespace) for namespace in namespaces)
    _OWN_ATTRIBUTES = frozenset(attributes)
    _CLASSES = tuple(classes)
    _NAMESPACES = tuple(language)
    _MODULES = types.MappingProxyType({name: sys.modules[name] for name in TRITON_MODULES
                                       if isinstance(sys.modules.get(name), types.ModuleType)})


def _codes_in(value) -> list:
    """The code objects a function (or a class's functions) runs, nested ones included."""
    inner = getattr(value, "__func__", value)  # staticmethod, classmethod
    code = getattr(inner, "__code__", None) if isinstance(inner, types.FunctionType) else None
    if isinstance(value, property):
        return [c for f in (value.fget, value.fset) if f is not None for c in _codes_in(f)]
    found, todo = [], [code] if code is not None else []
    while todo:
        code = todo.pop()
        found.append(code)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


def tritons(value, depth: int = 0) -> bool:
    """One of Triton's own objects: kept before the learner's statements ran, or a function its
    interpreter made of them as it launched (its code Triton's, and all it holds Triton's)."""
    if not _OWN_IDS:  # nothing remembered (a test calling in): by the module it names
        module = value.__module__ if isinstance(value, (types.FunctionType, type)) else \
            type(value).__module__
        return isinstance(module, str) and module.split(".")[0] == "triton"
    if id(value) in _OWN_IDS:
        return True
    if type(value) is functools.partial and depth < 3:  # tl.multiple_of, interpreted
        return tritons(value.func, depth + 1) and all(
            _data(v) or tritons(v, depth + 1) for v in (*value.args, *value.keywords.values()))
    if type(value) is property and depth < 3:  # one the interpreter puts on tl.tensor
        return all(f is None or tritons(f, depth + 1) for f in (value.fget, value.fset,
                                                                 value.fdel))
    if type(value) is types.FunctionType and id(value.__code__) in _OWN_CODE_IDS and depth < 3 \
            and id(value.__globals__) in _OWN_GLOBALS_IDS:
        # (the globals too: Triton's code run with a namespace of the learner's is theirs)
        held = [*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values()]
        for cell in value.__closure__ or ():
            with contextlib.suppress(ValueError):  # an empty cell holds nothing
                held.append(cell.cell_contents)
        return all(_data(v) or tritons(v, depth + 1) or id(type(v)) in _OWN_IDS for v in held)
    return False


def _data(value, depth: int = 0) -> bool:
    """Plain data a kernel may name: a number, a string, None, NumPy's scalar, a tuple or list
    of those (or of Triton's dtypes), exactly those types (a subclass brings code)."""
    kind = type(value)
    if kind in (type(None), bool, int, float, str, complex):
        return True
    if kind.__module__ == "numpy" and any(c.__name__ == "generic" for c in kind.__mro__):
        return True
    if kind in (tuple, list) and depth < 4 and len(value) <= 4096:
        return all(_data(v, depth + 1) or tritons(v) for v in value)
    return False


def _constexpr(value) -> bool:
    kind = type(value)
    return kind.__name__ == "constexpr" and tritons(kind)


def kernel_function(value):
    """The Python function a kernel object of Triton's (a @triton.jit function, an autotuned or
    interpreted one) runs, or None for anything else."""
    for depth in range(DEPTH):
        if type(value) is types.FunctionType:
            return value if depth else None  # a plain function is no kernel
        kind = type(value)
        if kind.__name__ not in _KERNEL_KINDS or not tritons(kind):
            return None
        value = vars(value).get("fn")
    return None


def _learners_constexpr_function(value) -> bool:
    """A @triton.constexpr_function of the learner's: plain Python the compiler runs on
    constants, and the interpreter on whatever the kernel hands it."""
    kind = type(value)
    return kind.__name__ == "ConstexprFunction" and tritons(kind) and not tritons(value)


def _builtin(value) -> bool:
    """One of Python's builtins a kernel may use (range, min, float), not a reflective one."""
    if type(value) not in (types.BuiltinFunctionType, type):
        return False
    name = value.__name__
    return getattr(builtins, name, None) is value and name not in REFLECTIVE


def _not_the_language(value) -> str:
    """Why a global a kernel names is not Triton's language ("" when it is)."""
    if _learners_constexpr_function(value):
        # whatever its arguments, its body can reach what the launcher left in a global (the
        # input itself) and hand back a block of its own making where it runs interpreted
        return "a @triton.constexpr_function of yours: plain Python, which the interpreter " \
            "runs as the kernel runs; compute the constant in the launcher and pass it as a " \
            "tl.constexpr argument"
    if _data(value) or tritons(value) or _builtin(value) or \
            type(value) is types.ModuleType or kernel_function(value) is not None:
        return ""
    if _constexpr(value):
        inner = vars(value).get("value")
        if _data(inner) or tritons(inner) or kernel_function(inner) is not None:
            return ""
        return f"a tl.constexpr holding {_kind(inner)}"
    return _kind(value)


def _kind(value) -> str:
    if isinstance(value, types.FunctionType):
        return f"the Python function {value.__qualname__}"
    if isinstance(value, type):
        return f"the class {value.__qualname__}"
    return f"a {type(value).__qualname__} object"


def past_the_language(kernel, jit_class=None) -> str:
    """The first thing in ``kernel``'s source (a kernel object of Triton's, or its Python
    function) or in a @triton.jit function it names that is not Triton's language, said with
    its line ("x.handle at line 23"), or "". (``jit_class`` is no longer needed.)"""
    seen: set[int] = set()
    todo = [(kernel_function(kernel) or kernel, 0)]
    while todo:
        function, depth = todo.pop()
        if id(function) in seen or depth > DEPTH or type(function) is not types.FunctionType:
            continue
        seen.add(id(function))
        try:
            found, named = _read(function)
        except Exception as exc:  # noqa: BLE001 - what resists reading is not vouched for
            return f"a global the check could not read ({type(exc).__name__}) in " \
                   f"{function.__qualname__}"
        if found:
            return found
        todo += [(inner, depth + 1) for inner in named]
    return ""


# Each function's parsed source, by its code object (a function redefined has another): read at
# every launch, it is parsed once. What the learner's code could put here instead reads as
# another source than the compile check's process finds, which it does not vouch for.
_PARSED: dict = {}


def _parsed(python):
    """(the function's def node without its decorators, the line of its file the source
    starts at), or (None, 0)."""
    code = getattr(python, "__code__", None)
    kept = _PARSED.get(id(code))
    if kept is not None and kept[0] is code:
        return kept[1], kept[2]
    tree, first = _parse(python)
    if code is not None and len(_PARSED) < 4096:
        _PARSED[id(code)] = (code, tree, first)
    return tree, first


def _parse(python):
    try:
        lines, first = inspect.getsourcelines(python)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, ValueError, IndentationError):
        return None, 0
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None, 0
    node.decorator_list = []  # Triton's decorators run on the host, not in the kernel
    return node, first


def _read(python) -> tuple[str, list]:
    """(what reaches past the language in one kernel function's body, or ""; the Python
    functions of the kernels it names)."""
    tree, first = _parsed(python)
    if tree is None:
        return "", []
    names = python.__globals__
    if names.get("__builtins__") not in (builtins, vars(builtins)):
        # the interpreter runs the kernel with the module's builtins, the compiler with its own
        return f"the __builtins__ of {python.__module__}, which are not Python's", []
    own = _own_names(tree)
    named = []
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
            found = _call(node, names, own)
            if found:
                return f"{found}{where}", []
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            value = _resolve(node, names, own)
            if value is _LOCAL:
                if isinstance(node, ast.Attribute) and _OWN_ATTRIBUTES and \
                        node.attr not in _OWN_ATTRIBUTES:
                    # a method put on Triton's tensor class, say: Python on the block
                    return f"{_text(node)} ({node.attr}: no object of Triton's has such an " \
                           f"attribute){where}", []
                continue
            if value is _MISSING:
                if isinstance(node, ast.Name) and hasattr(builtins, node.id):
                    continue
                # named, yet defined nowhere the compiler looked: made by a statement the
                # compile check leaves out, in a dropped branch
                return f"{_text(node)}, which the kernel's module does not define for the " \
                       f"compiler{where}", []
            why = _not_the_language(value)
            if why:
                return f"{_text(node)} ({why}), which is not Triton's{where}", []
            inner = kernel_function(value)
            if inner is not None and inner is not python and not tritons(value):
                named.append(inner)  # a kernel function of the learner's (Triton's are its own)
    return "", named


def _own_names(tree) -> set:
    """The function's own names: its arguments and what it assigns (an argument called input
    or type is no builtin)."""
    return {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)} | \
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def reads(kernel) -> tuple:
    """What the compiler is given of ``kernel`` besides its arguments, as text both processes
    can compare: the source of the kernel and of each @triton.jit function of the learner's it
    names, and what each global those name holds ((what, held), ... sorted). Where the kernel
    ran and where it is compiled, the two must be the same: a global that is one thing in the
    interpreter and another in the compile check (a constant that says which process it is, a
    helper bound to another function) makes the compiled kernel another kernel."""
    found: dict[str, str] = {}
    seen: set[int] = set()
    todo = [(kernel_function(kernel) or kernel, 0)]
    try:
        while todo:
            function, depth = todo.pop()
            if id(function) in seen or depth > DEPTH or type(function) is not types.FunctionType:
                continue
            seen.add(id(function))
            where = function.__qualname__
            tree, _ = _parsed(function)
            if tree is None:
                found[f"{where}: its source"] = "unreadable"
                continue
            source, own, loads = _shape(tree)
            found[f"{where}: its source"] = source
            # (the compiler binds a helper's arguments with its function's defaults)
            found[f"{where}: its defaults"] = repr((
                [fingerprint(v) for v in function.__defaults__ or ()],
                sorted((k, fingerprint(v)) for k, v in (function.__kwdefaults__ or {}).items())))
            names = function.__globals__
            for text, node in loads:
                value = _resolve(node, names, own)
                if value is _LOCAL:
                    continue
                # what a module of Triton's holds is Triton's to say (the interpreter puts its
                # stand-ins there as a launch runs, and the grader watches those modules);
                # anything else of Triton's a kernel reads is named, so that one function of
                # Triton's where the kernel ran and another where it is compiled differ
                through = isinstance(node, ast.Attribute) and \
                    _tritons_module(_resolve(node.value, names, own))
                found[f"{where}: {text}"] = fingerprint(value, named=not through)
                inner = kernel_function(value)
                if inner is not None and not tritons(value):
                    todo.append((inner, depth + 1))
    except Exception as exc:  # noqa: BLE001 - what resists reading differs from everything
        found["(reading)"] = f"failed: {type(exc).__name__}"
    return tuple(sorted(found.items()))


def _shape(tree) -> tuple:
    """(a digest of the parsed source, its own names, (text, node) of each name or attribute
    it reads), worked out once per parsed function."""
    kept = _SHAPES.get(id(tree))
    if kept is not None and kept[0] is tree:
        return kept[1]
    loads = tuple((_text(node), node) for node in ast.walk(tree)
                  if isinstance(node, (ast.Name, ast.Attribute)) and
                  isinstance(node.ctx, ast.Load))
    shape = (_digest(ast.dump(tree)), _own_names(tree), loads)
    if len(_SHAPES) < 4096:
        _SHAPES[id(tree)] = (tree, shape)
    return shape


_SHAPES: dict = {}


def fingerprint(value, named: bool = True) -> str:
    """A global's value as plain text, the same in two processes where it is the same: data by
    its repr, a kernel function by its name and source, Triton's objects by their names (or,
    not ``named``, as "Triton's own": read through a module of Triton's)."""
    if value is _MISSING:
        return "nothing (not defined)"
    if _data(value):
        text = f"{type(value).__name__} {value!r}"
        return text if len(text) <= 200 else f"{text[:200]}... ({_digest(text)})"
    if _constexpr(value):
        return f"tl.constexpr({fingerprint(vars(value).get('value'), named)})"
    if type(value) is types.ModuleType:
        # (a module of the learner's may call itself triton.language)
        return f"Triton's module {value.__name__}" if _tritons_module(value) else \
            f"the module {value.__name__}"
    inner = kernel_function(value)
    if inner is not None:
        tree, _ = _parsed(inner)
        return f"the kernel function {inner.__module__}.{inner.__qualname__} (source " \
               f"{_shape(tree)[0] if tree is not None else 'unreadable'})"
    if tritons(value):
        # as a launch runs (and on Triton 3.3 to 3.5, ever after the first) the interpreter's
        # stand-ins hold triton.language's names (tl.multiple_of is a functools.partial then):
        # each is named as what it stands in for
        return f"Triton's {_own_name(value)}" if named else "Triton's own"
    if _builtin(value):
        return f"Python's {value.__name__}"
    return _kind(value)


def _tritons_module(value) -> bool:
    """One of TRITON_MODULES itself, the module remembered under its name (not a module of the
    learner's that calls itself triton.language; both processes remember the same ones)."""
    if type(value) is not types.ModuleType:
        return False
    name = vars(value).get("__name__")
    if name not in TRITON_MODULES:
        return False
    return value is (_MODULES.get(name) if _MODULES else sys.modules.get(name))


def _own_name(value, depth: int = 0) -> str:
    """The name of one of Triton's objects, the same in every process: a function or class by
    its module and qualified name, a stand-in of the interpreter's by what it stands in for,
    anything else by its type and (where it holds no address) its repr."""
    if id(value) not in _OWN_IDS and depth < 3:  # made as a launch ran: what does it stand for?
        original = _stands_for(value)
        if original is _MISSING and type(value) is types.FunctionType:
            # (Triton's stand-in for a builtin holds it as the default of its argument member)
            original = (value.__kwdefaults__ or {}).get("member", _MISSING)
        if original is not _MISSING:
            return _own_name(original, depth + 1)
    if type(value) is functools.partial and depth < 3:
        held = [_own_name(v, depth + 1) if tritons(v) else fingerprint(v)
                for v in (*value.args, *sorted(value.keywords.items()))]
        return f"partial({_own_name(value.func, depth + 1)}, {', '.join(held)})"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
        if isinstance(module, str) and isinstance(name, str):
            return f"{module}.{name}"
    kind = type(value)
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - Triton's object, said by its type alone
        text = ""
    if " at 0x" in text or len(text) > 200:
        text = ""  # an address (or a long text) is the process's, not the object's
    return f"{text} (a {kind.__qualname__})" if text else f"a {kind.__module__}.{kind.__qualname__}"


def _stands_for(value):
    """What triton.language held, before the learner's statements ran, under the name that
    now holds ``value`` (one of the interpreter's stand-ins), or _MISSING."""
    for module, original in _NAMESPACES:
        for name, now in list(vars(module).items()):
            if now is value and original.get(name, value) is not value:
                return original[name]
    return _MISSING


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def tritons_changed() -> list[str]:
    """What of triton.language holds what is not Triton's now: an attribute of its classes
    (a method of the learner's on every block) or a global of its modules (Triton's own
    tl.sum reads its module's core.reduce), run where the interpreter runs the kernel and
    nowhere the compiler looks."""
    changed = []
    for owner, before in (*_CLASSES, *_NAMESPACES):
        with contextlib.suppress(Exception):
            for name, value in list(vars(owner).items()):
                if not isinstance(owner, type) and name.startswith("__"):
                    continue  # a module's own bookkeeping (__warningregistry__), no code's
                # (the interpreter puts Python's print in tl.static_print as it launches)
                if before.get(name, _MISSING) is not value and not tritons(value) and \
                        not _data(value) and not _builtin(value):
                    label = owner.__qualname__ if isinstance(owner, type) else owner.__name__
                    changed.append(f"{label}.{name}")
    return changed


def shadowed(kernel) -> list[str]:
    """Attributes set on a kernel object (or a @triton.jit helper it names) over its class's
    own (a cache of rewritten kernels, a rewrite method), and a rewriter that is not Triton's
    rewriter of the kernel's own function: the interpreter would run what they give."""
    found = []
    for thing in _kernel_objects(kernel):
        kind, own = type(thing), vars(thing)
        name = getattr(own.get("fn"), "__qualname__", kind.__name__)
        found += [f"{name}.{attribute}" for attribute in list(own)
                  if inspect.getattr_static(kind, attribute, _MISSING) is not _MISSING]
        rewriter = own.get("rewriter")
        if rewriter is not None and (not tritons(type(rewriter)) or
                                     vars(rewriter).get("fn") is not own.get("fn")):
            found.append(f"{name}.rewriter")
    return found


def _kernel_objects(kernel) -> list:
    """``kernel`` and the kernel objects of the learner's it names, at any depth (each
    @triton.jit helper, and what wraps one)."""
    objects, seen, todo = [], set(), [(kernel, 0)]
    while todo:
        thing, depth = todo.pop()
        function = kernel_function(thing)
        if function is None or id(thing) in seen or depth > DEPTH:
            continue
        seen.add(id(thing))
        objects.append(thing)
        tree, _ = _parsed(function)
        if tree is None:
            continue
        _, own, loads = _shape(tree)
        for _, node in loads:
            value = _resolve(node, function.__globals__, own)
            if value is not _LOCAL and kernel_function(value) is not None and not tritons(value):
                todo.append((value, depth + 1))
    return objects


def not_as_made(kernel, jit_class) -> str:
    """What of a @triton.jit object (``kernel`` or a helper it names) the compiler would take
    other than its function gives, said in words, or "". The compiler parses the source the
    object keeps (taken as it was decorated, and replaceable: ``_unsafe_update_src``), looks
    names up in its own ``__globals__`` and binds arguments with the signature it keeps; the
    check reads the function's source (through linecache, which the learner's code can
    fill), globals and defaults. Where the two differ, what was read is not what compiles."""
    for thing in _kernel_objects(kernel):
        while thing is not None and not isinstance(thing, jit_class):
            thing = vars(thing).get("fn") if hasattr(thing, "__dict__") else None
        if thing is None:
            continue
        own = vars(thing)
        function = own.get("fn")
        if type(function) is not types.FunctionType:
            continue
        name = function.__qualname__
        tree, _ = _parsed(function)
        try:
            # (Triton's own parse, as the compiler calls it; set on the object, it is said
            # by ``shadowed``)
            kept = inspect.getattr_static(jit_class, "parse")(thing).body[0]
            kept.decorator_list = []
        except Exception:  # noqa: BLE001 - a source the compiler cannot parse either
            kept = None
        if tree is None or kept is None or ast.dump(kept) != ast.dump(tree):
            return f"the source kept for {name} (what the compiler parses), which is not " \
                "the source of its function in its file"
        if own.get("__globals__", function.__globals__) is not function.__globals__:
            return f"globals for {name} (where the compiler looks its names up) other than " \
                "its function's"
        signature = own.get("signature")
        params = own.get("params")
        try:
            made = _parameters(inspect.signature(function).parameters.values())
            kept_signature = _parameters(signature.parameters.values())
            kept_params = _parameters(vars(p).get("_param") for p in params) \
                if params is not None else made
        except Exception:  # noqa: BLE001 - a signature that cannot be read is no signature
            return f"a signature for {name} that cannot be read"
        if made != kept_signature or made != kept_params:
            return f"parameters for {name} (what its arguments are bound with) other than " \
                "its function's: their names, annotations or defaults"
    return ""


def _parameters(parameters) -> tuple:
    return tuple((p.name, str(p.kind), fingerprint(p.annotation), fingerprint(p.default))
                 for p in parameters)


def _call(node: ast.Call, names: dict, own: set) -> str:
    """What in a call reaches past the language, or ""."""
    if not isinstance(node.func, (ast.Name, ast.Attribute)):
        # called through what an expression gives (a tuple's item, a call's result): Triton
        # compiles calls of names only, so this runs in the interpreter alone
        return f"a call through {_text(node.func)}, which is not Triton's"
    target = _resolve(node.func, names, own)
    if target is _LOCAL or target is _MISSING:
        return ""  # a method of a block (x.to), or said where the name is read
    if kernel_function(target) is None and _foreign(target):
        return f"a call to {_text(node.func)}, which is not Triton's"
    return ""


def _text(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - a node that cannot be said is named by its kind
        return type(node).__name__


def _resolve(node, names: dict, own: set):
    """The object a name or an attribute chain on a global names (``helper``,
    ``module.helper``, ``tl.float32.name``); _LOCAL where it starts at a name of the function's
    own, _MISSING where nothing has it. Looked up without running anything of the learner's
    (no property, no __getattr__)."""
    if isinstance(node, ast.Name):
        if node.id in own:
            return _LOCAL
        return names.get(node.id, _MISSING) if node.id in names else \
            getattr(builtins, node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, names, own)
        if owner is _LOCAL or owner is _MISSING:
            return owner
        if issubclass(type(owner), types.ModuleType):
            return vars(owner).get(node.attr, _MISSING)
        try:
            return inspect.getattr_static(owner, node.attr)
        except AttributeError:
            return _MISSING
    return _LOCAL  # what an expression gives is known only as the kernel runs


def _foreign(target) -> bool:
    """A callable a kernel names that is neither Triton's nor a builtin: a plain function (the
    learner's, NumPy's, math's), a functools.partial, an object with __call__. The GPU compiler
    cannot compile a call to one (only @triton.jit functions and Triton's own), so a kernel
    that compiled with one holds it in a branch the compiler drops."""
    if _builtin(target) or tritons(target) or _constexpr(target) and tritons(
            vars(target).get("value")):
        return False
    return True
