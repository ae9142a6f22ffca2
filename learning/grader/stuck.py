"""Where a timed-out case was stuck: the learner's line it was running when it was stopped.

The worker arms Python's faulthandler on SIGUSR1 with a file of the grader's (``arm``); when a
case runs past its limit the grader sends the signal, gives the worker a moment to write its
stack, reads the learner's innermost frame from it (``where``) and only then ends the process.
The stack is written from C, so a loop in plain Python, a kernel run by Triton's interpreter or
a wait on the GPU can all be read. Windows has no SIGUSR1: there a timeout names no line.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time

from learning.grader import state

_ARMED = []  # the open file the handler writes to: it must outlive arm()
STACK_LIMIT = 4 * 2**20  # bytes of a stack the grader reads at most
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<fn>\S+)')


def supported() -> bool:
    return hasattr(signal, "SIGUSR1")


def arm(path: str) -> None:
    """In the worker: write every thread's stack to ``path`` on SIGUSR1."""
    import faulthandler

    if not supported():
        return
    stream = open(path, "w")  # noqa: SIM115 - held open for the process's life
    _ARMED.append(stream)
    faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True)


def _line(path: str, number: int) -> str:
    """Line ``number`` of the learner's file, read as a regular file of a sane size only (the
    learner's code may have left a FIFO in its place); "" where it cannot be."""
    try:
        data = state.read_small_file(path, STACK_LIMIT, follow=True) or b""
    except (OSError, state.NotData):
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[number - 1].strip() if 0 < number <= len(lines) else ""


def where(pid: int, path: str, learner_file: str, wait: float = 2.5) -> str:
    """In the grader: signal the worker ``pid`` and return "softmax.py, line 17
    (softmax_python): `while i < n:`" for the innermost frame of ``learner_file`` in the stack it
    writes to ``path``, or "" when none comes within ``wait`` seconds (a stack comes within
    milliseconds on an idle machine; on two cores busy with other checks a second was seen to
    pass first)."""
    if not supported():
        return ""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGUSR1)
    target = os.path.abspath(learner_file)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        # never follows a link, never waits on a FIFO, reads a bounded file: the learner's
        # code may have put any of them at the path while it ran
        try:
            data = state.read_small_file(path, STACK_LIMIT)
        except (OSError, state.NotData):
            return ""
        text = (data or b"").decode("utf-8", errors="replace")
        frames = [m for m in _FRAME.finditer(text)
                  if os.path.abspath(m["file"]) == target]
        if frames:  # most recent call first
            line = int(frames[0]["line"])
            # a comprehension or generator is a frame of its own (<listcomp> before Python
            # 3.12): name the function it is in
            named = next((f["fn"] for f in frames if not f["fn"].startswith("<")),
                         frames[0]["fn"])
            code = _line(target, line)
            name = os.path.basename(target)
            place = f"{name}, line {line} ({named})"
            # in backquotes: the line may end in a comma or a colon of its own
            return f"{place}: `{code}`" if code else place
        time.sleep(0.05)  # the stack may still be being written
    return ""
