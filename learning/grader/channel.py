"""The worker's end of the event pipe: one frame of plain data per event, for the grader to read.

The frame format (a length, then a pickled tuple) and what the grader accepts in it are
``learning.grader.childproc``'s (``FRAME_HEADER``, ``load_event``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import sys
import time

from learning.grader.childproc import CHANNEL_LOST_STATUS, load_event
from learning.grader.handover import inherited_fd
from learning.grader.learner_code import safe_str
from learning.grader.returned import Returned


class Channel:
    """Length-prefixed pickle frames on a pipe the grader reads: ``fd`` is the number the
    grader handed it over by (learning.grader.handover.spawn_options). An event is read back
    here, as the grader will read it, before it is sent: one that holds anything but plain
    data (a value the learner's code made that slipped through ``summarise``) is replaced by
    a note that says so, and never reaches the grader as something it cannot read."""

    # No instance dictionary: a learner's code that finds the channel in a frame cannot put a
    # send of its own on it (the class's is watched, learning.grader.tampering). A process that
    # runs the learner's code cannot be made honest, but the plain route is closed.
    __slots__ = ("_file", "_pipe")

    def __init__(self, fd: int):
        self._file = os.fdopen(inherited_fd(fd), "wb", buffering=0)
        self._pipe = _identity(self._file.fileno())

    def send(self, *event):
        try:
            payload = pickle.dumps(event, protocol=pickle.HIGHEST_PROTOCOL)
            load_event(payload)
        except Exception as exc:  # noqa: BLE001 - whatever keeps the grader from reading it
            payload = pickle.dumps(_unsendable(event, exc), protocol=pickle.HIGHEST_PROTOCOL)
        # the descriptor closed by the learner's code, or its number reused for a file of its
        # own: nothing more can reach the grader, and the exit status says why
        try:
            if _identity(self._file.fileno()) != self._pipe:
                raise OSError("the event pipe's descriptor names another file")
            self._file.write(struct.pack("<Q", len(payload)) + payload)
        except OSError:
            os._exit(CHANNEL_LOST_STATUS)

    def drained(self, seconds: float = 10.0) -> bool:
        """Wait until the grader has read everything sent so far, or ``seconds`` pass; whether
        it has. Called before the learner's code runs: a process can open its own pipe again
        for reading (/proc/self/fd), and take out what the grader had not read yet (what was
        sent before the learner's code, which the grader believes only from then) to send
        other words in its place."""
        try:
            import fcntl
            import termios
        except ImportError:  # Windows: no /proc to open the pipe again through
            return True
        deadline = time.monotonic() + seconds
        while True:
            try:
                waiting = struct.unpack("i", fcntl.ioctl(self._file.fileno(), termios.FIONREAD,
                                                         b"\0" * 4))[0]
            except OSError:
                return False
            if waiting == 0:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    def finish(self):
        """Say "finished", once what the learner's code printed is flushed: the grader stops
        waiting at that event, and reads only what the output pipe already holds."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        self.send("finished")


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _unsendable(event: tuple, exc: Exception) -> tuple:
    """What to send instead of an event the grader could not read: for a case's result, a
    result with no values that says why; anything else is the grader's own and is a bug."""
    why = f"what it returned could not be passed to the grader as plain data " \
          f"({type(exc).__name__}: {safe_str(exc)[:200]})"
    if event[0] == "done" and len(event) == 4:
        return ("done", event[1], event[2], Returned("object", None, note=why))
    raise RuntimeError(f"the worker made an event the grader cannot read: {why}")
