"""Ready the worker to import the learner's module: the libraries it imports loaded first, then
the memory cap and the filter that keeps its code from the grader's processes.

The filter and the cap are the last steps before the learner's code runs (its import, in every
kind of worker run: grading, a memory map, named steps).
"""

from __future__ import annotations

import importlib
import os

from learning.grader import containment, installed
from learning.grader.channel import Channel
from learning.grader.learner_code import append_path

# Libraries a learner's module usually imports: loaded before the clock on the learner's import
# starts, so that its limit measures their code, not torch's start-up on a slow machine.
WARM_IMPORTS = ("numpy", "torch", "triton", "triton.language")


def warm_up(path: str) -> None:
    """Import the heavy libraries ``path`` imports at its top level, ahead of the learner's
    own import (whose time limit should not pay for them). Errors are left for that import."""
    import ast

    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return
    wanted = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            wanted.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            wanted.add(node.module)
    for name in WARM_IMPORTS:
        if name in wanted or any(w.startswith(name + ".") for w in wanted):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the learner's import reports it
                pass


_launched_once = False


def load_launch_modules() -> None:
    """Launch one tiny kernel in Triton's interpreter, so that the modules Triton imports at its
    first launch (its code generator, ...) are loaded before the learner's code runs: their
    files are then among those the check watches (installed.installed_stamps), where a file
    first loaded during a case would not be, and code planted in it would run in every later
    check. Once a process (a warm process does it for the workers it forks)."""
    global _launched_once
    if _launched_once:
        return
    _launched_once = True
    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def touch(pointer, count, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            values = tl.load(pointer + offsets, mask=offsets < count, other=0.0)
            tl.store(pointer + offsets, values, mask=offsets < count)

        touch[(1,)](torch.zeros(4), 4, BLOCK=4)
    except Exception:  # noqa: BLE001 - the learner's own launches report what is wrong
        pass


def cap_memory(allowance_gib: float) -> bool:
    """Limit this process's address space to what it maps now plus ``allowance_gib`` (Linux
    only; never where CUDA runs, which reserves far more address space than it uses). Where
    it cannot (no /proc on macOS, no resource module on Windows) nothing is capped: the time
    limit still ends a runaway allocation, and check says so when --memory is asked for."""
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[0])
        limit = pages * os.sysconf("SC_PAGE_SIZE") + int(allowance_gib * (1 << 30))
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        # Hard as well as soft: the learner's code may not lift it (nor, where the filter of
        # learning.grader.containment holds, try: setrlimit is refused there)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, OSError, ValueError):
        return False
    return True


class LockDown:
    """The last step before the learner's code runs: the memory cap, then the filter that keeps
    it from the grader's processes (learning.grader.containment). Either may be missing here;
    the grader's own limits hold without them."""

    def __init__(self, grader_pid: int, channel: Channel):
        self.grader_pid = grader_pid
        self.channel = channel

    def __call__(self, memory_gib: float, device: str):
        if device == "cpu" and memory_gib > 0:
            cap_memory(memory_gib)
        if containment.available():
            containment.limit_tasks()
        why = containment.lock_down(containment.grader_processes(self.grader_pid)) \
            if containment.available() else "no guard on this system"
        self.channel.send("contained", why)
        # what this process loaded of installed code (torch, triton), as it is before the
        # learner's code runs, for the check to compare afterwards (integrity.Guard)
        self.channel.send("installed", installed.installed_stamps())
        # and read by the grader before the learner's code can open this pipe for reading
        self.channel.drained()


def prepare_import(module_path: str, memory_gib: float, lock_down: LockDown | None, device: str):
    """Everything before the learner's import: the module's folder (the course's top level)
    last on the path, the libraries it imports warmed, then the lock-down, or, without one (a
    test's direct call), the memory cap alone. Last: the learner's module can import a file of
    theirs beside it, and no file there shadows a module of Python's or an installed one that
    the grader's code in this process imports later (copy, numpy, triton)."""
    append_path(os.path.dirname(os.path.abspath(module_path)))
    warm_up(module_path)
    if lock_down is not None:
        lock_down(memory_gib, device)
    elif device == "cpu" and memory_gib > 0:
        cap_memory(memory_gib)
