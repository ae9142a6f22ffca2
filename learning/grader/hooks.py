"""Profile and trace hooks the learner's code leaves set in the process that runs it.

A hook set with ``sys.setprofile``, ``sys.settrace`` or ``sys.monitoring`` is called at every
function the grader runs after the learner's call returns (one in ``gc.callbacks`` at every
collection), and sees (and can change) the grader's own locals: what it counted and what it is
about to report. A module that set one inside its function rewrote the grader's note that
torch computed the answer, on its way to the pipe, and passed. So the hooks present when the
grader's part of the process began (``BASELINE``, taken as this module is imported, before the
learner's module is) are put back after each learner call, before the grader reads anything,
and a case after which any was not as it began is not judged as passed.

Runs in the learner's process (``learning.grader.calls``).
"""

from __future__ import annotations

import builtins
import gc
import sys

_TOOLS = 6  # sys.monitoring's tool ids: 0 to 5


def _monitoring() -> tuple:
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12 and later
    if monitoring is None:
        return ()
    tools = []
    for tool_id in range(_TOOLS):
        try:
            tools.append((monitoring.get_tool(tool_id), monitoring.get_events(tool_id)))
        except (ValueError, TypeError):
            tools.append((monitoring.get_tool(tool_id), 0))
    return tuple(tools)


def state() -> tuple:
    """The process's hooks now: the trace function, the profile function, each
    sys.monitoring tool with the events it asks for, and the garbage collector's callbacks
    (called at each collection, from whatever frame it interrupts)."""
    return sys.gettrace(), sys.getprofile(), _monitoring(), tuple(gc.callbacks)


BASELINE = state()

# Python's builtins as they were when this module was imported, before the learner's module:
# a builtin the learner's code replaced (len, isinstance, __build_class__) is called by every
# line of the grader's that names it, which would then run the learner's code or fail
_BUILTINS = builtins.__dict__
BUILTINS_BASELINE = dict(_BUILTINS)
_GONE = object()


_SEEN: list[str] = []  # what put_back found changed since taken() last emptied it


def taken() -> str:
    """What put_back has found changed since the last call of this, in words ("" where
    nothing); the record starts afresh."""
    said = ", ".join(dict.fromkeys(_SEEN))
    _SEEN.clear()
    return said


def put_back(expected: tuple | None = None) -> str:
    """Set the hooks back as they were at ``expected`` (a ``state()`` the grader took as it
    called the learner's code, its own hooks set: the plain-Python watch's profile), else at
    BASELINE; what had been changed, in words ("" where nothing), also kept for ``taken``."""
    expected = BASELINE if expected is None else expected
    trace, profile, tools, _ = state()
    changed = []
    if trace is not expected[0]:
        sys.settrace(expected[0])
        changed.append("sys.settrace")
    if profile is not expected[1]:
        sys.setprofile(expected[1])
        changed.append("sys.setprofile")
    if tools != expected[2]:
        _monitoring_back(tools, expected[2])
        changed.append("sys.monitoring")
    if tuple(gc.callbacks) != expected[3]:
        gc.callbacks[:] = expected[3]
        changed.append("gc.callbacks")
    changed += _builtins_back()
    _SEEN.extend(changed)
    return ", ".join(changed)


def _builtins_back() -> list[str]:
    """Every builtin that holds another object than at BASELINE (or is gone) set back, by
    name ("builtins.len"); one added since is left (no line of the grader's names it). Written
    with no call of a builtin: any of them may be the learner's now."""
    changed = [name for name, value in BUILTINS_BASELINE.items()
               if _BUILTINS.get(name, _GONE) is not value]
    for name in changed:
        _BUILTINS[name] = BUILTINS_BASELINE[name]
    return ["builtins." + name for name in changed]


def _monitoring_back(tools: tuple, expected: tuple) -> None:
    monitoring = sys.monitoring
    for tool_id, (now, baseline) in enumerate(zip(tools, expected)):
        if now == baseline:
            continue
        try:
            monitoring.set_events(tool_id, baseline[1] if baseline[0] else 0)
            if baseline[0] is None and now[0] is not None:
                for event in _single_events(monitoring.events):
                    monitoring.register_callback(tool_id, event, None)
                monitoring.free_tool_id(tool_id)
        except (ValueError, TypeError, AttributeError):  # a tool it cannot free: still said
            pass


def _single_events(events) -> list[int]:
    """The events sys.monitoring names, each one bit (NO_EVENTS and the unions left out)."""
    values = (getattr(events, name) for name in dir(events) if name.isupper())
    return sorted({v for v in values if isinstance(v, int) and v > 0 and not v & (v - 1)})
