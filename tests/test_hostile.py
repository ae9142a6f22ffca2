"""The grader against a learner's module that attacks it: every check ends, nothing the module
starts outlives the check, and nothing it does changes a later check's verdict.

Each test feeds one kind of attack (stopping or killing the grader's processes, escaping the
process group, impersonating or garbling the warm process's socket, lifting the memory cap,
escape codes, values that lie, the reference by a roundabout route, the course's files and the
state file tampered with, the terminal closed) and asserts what the learner is told and that
a later check of a right, a wrong and an untouched module gives the verdict it should.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import marshal
import math
import os
import py_compile
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from learning import check, progress, solution
from learning.exercises import solution_path
from learning.grader import (
    borrowed,
    childproc,
    containment,
    forkserver,
    gpu_compile,
    installed,
    integrity,
    registry,
    report,
    state,
)
from learning.grader import mode as kernel_mode
from learning.grader import warm as warm_process
from tests import honest_launchers
from tests.helpers import (
    COURSE_ROOT,
    alive,
    course_pythonpath,
    gone_within,
    grade_text,
    pre_run_hooks,
    solution_text,
    stub_text,
    triton_version,
    write_module,
)

SOFTMAX = registry.find("softmax")
FORKED = "worker: forked from a warm process"
linux_only = pytest.mark.skipif(not containment.available(),
                                reason="the guard and the filter are Linux's (subreapers, /proc)")
filtered = pytest.mark.skipif(containment.machine() not in containment._SYSCALLS
                              or not containment.available(),
                              reason="the seccomp filter covers x86-64 and aarch64 Linux")
WRONG = solution_text("softmax").replace("return output  # store", "return output[::-1]")


def read_pid(path: Path, seconds: float = 10) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def rendered(result, width: int = 80, terminal: bool = False) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    report.render(Console(file=buffer, width=width, force_terminal=terminal,
                          no_color=not terminal, highlight=False), result)
    return buffer.getvalue()


def later_checks_are_honest(folder: Path):
    """A wrong module fails, a right one passes, an untouched stub is not started."""
    wrong = grade_text(folder, "softmax", WRONG, ["python"])
    assert not wrong.ok and wrong.parts[0].passed < wrong.parts[0].graded
    right = grade_text(folder, "softmax", solution_text("softmax"), ["python"])
    assert right.ok, rendered(right)
    untouched = grade_text(folder, "reductions", stub_text("reductions"), ["python"])
    assert untouched.parts[0].status == "not-started"


@pytest.fixture
def warm_on(monkeypatch):
    """Learners' warm server on, its sockets in a folder of this test's own."""
    sockets = Path(tempfile.mkdtemp(prefix="warm-", dir="/tmp"))  # a socket path is short
    monkeypatch.setenv(warm_process.SWITCH, "1")
    monkeypatch.setenv(warm_process.IDLE_SWITCH, "20")
    monkeypatch.setenv("TMPDIR", str(sockets))
    monkeypatch.setattr(tempfile, "tempdir", str(sockets))
    monkeypatch.setattr(forkserver, "enabled", lambda: False)  # not the test suite's server
    warm_process._connected.clear()
    warm_process.take_notes()
    yield sockets
    for server in list(warm_process._connected.values()):
        server.close()
    warm_process._connected.clear()
    for path in (sockets / f"triton-course-{os.getuid()}").glob("*.sock"):
        pid = _server_pid(path)
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(sockets, ignore_errors=True)


def _server_pid(path: Path) -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(2)
    try:
        sock.connect(str(path))
        return warm_process._peer_pid(sock)
    except OSError:
        return 0
    finally:
        sock.close()


def warm_server_pid(sockets: Path) -> int:
    (path,) = (sockets / f"triton-course-{os.getuid()}").glob("*.sock")
    return _server_pid(path)


# --- 1. Stopping or killing the grader's processes ---------------------------------------------

SIGNALS_THE_GRADER = '''

import os as _os
import signal as _signal


def _parent_of(pid):
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


_refused = []
for _target in (_os.getppid(), _parent_of(_os.getppid()), -1):
    for _number in (_signal.SIGSTOP, _signal.SIGKILL):
        try:
            _os.kill(_target, _number)
        except PermissionError:
            _refused.append(_target)
print("refused", len(_refused))
'''


@filtered
def test_the_learners_code_cannot_stop_or_kill_the_grader(tmp_path, warm_on):
    result = grade_text(tmp_path, "softmax", solution_text("softmax") + SIGNALS_THE_GRADER,
                        ["python"])
    assert FORKED in [what for _, what in result.timeline]
    assert result.ok and "refused 6" in result.learner_output
    later_checks_are_honest(tmp_path)


SCHEDULES_THE_GRADER = '''

import os as _os

_parent = _os.getppid()
_user = _os.getuid()
# each call asks for what is already so: were it let through, nothing would change
_calls = {
    "the parent's niceness": lambda: _os.setpriority(
        _os.PRIO_PROCESS, _parent, _os.getpriority(_os.PRIO_PROCESS, _parent)),
    "the group's niceness": lambda: _os.setpriority(
        _os.PRIO_PGRP, 0, _os.getpriority(_os.PRIO_PGRP, 0)),
    "the user's niceness": lambda: _os.setpriority(
        _os.PRIO_USER, _user, _os.getpriority(_os.PRIO_USER, _user)),
    "the parent's cores": lambda: _os.sched_setaffinity(_parent, _os.sched_getaffinity(_parent)),
    "the parent's policy": lambda: _os.sched_setscheduler(
        _parent, _os.sched_getscheduler(_parent), _os.sched_param(0)),
    "its own policy": lambda: _os.sched_setscheduler(
        0, _os.sched_getscheduler(0), _os.sched_param(0)),
}
_refused = []
for _name, _call in _calls.items():
    try:
        _call()
    except PermissionError:
        _refused.append(_name)
_os.setpriority(_os.PRIO_PROCESS, 0, _os.getpriority(_os.PRIO_PROCESS, 0))
_os.sched_setaffinity(0, _os.sched_getaffinity(0))
print("refused", len(_refused), "of", len(_calls), "; its own niceness and cores set")
'''


@filtered
def test_the_learners_code_cannot_change_how_the_graders_processes_are_scheduled(tmp_path,
                                                                                 warm_on):
    # a warm process set to the idlest niceness, policy or one core would pass that on to
    # every later check's worker, and a shell to every later check: the learner's code may
    # set its own niceness and cores, and no one else's, and no scheduling policy at all
    result = grade_text(tmp_path, "softmax", solution_text("softmax") + SCHEDULES_THE_GRADER,
                        ["python"])
    assert FORKED in [what for _, what in result.timeline]
    assert result.ok and "refused 6 of 6 ; its own niceness and cores set" in \
        result.learner_output, result.learner_output
    later_checks_are_honest(tmp_path)


# the filter switched off is a debugging mode: the quick set stops a warm process under it
@pytest.mark.exhaustive
@linux_only
def test_a_warm_process_stopped_without_the_filter_costs_seconds_not_a_hang(tmp_path, warm_on,
                                                                           monkeypatch):
    # Where the filter cannot be had, a module can stop the warm process that forked it: the
    # check must still end (its waits are bounded), and the next one must replace the server.
    monkeypatch.setenv(containment.SWITCH, "0")
    assert grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"]).ok
    server = warm_server_pid(warm_on)
    stop = solution_text("softmax") + "\n\nimport os, signal\nos.kill(os.getppid(), " \
        "signal.SIGSTOP)\n"
    started = time.monotonic()
    stopped = grade_text(tmp_path, "softmax", stop, ["python"])
    assert time.monotonic() - started < 60
    assert stopped.parts[0].status in ("passed", "failed")  # a verdict, whatever it is
    started = time.monotonic()
    again = grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"])
    assert time.monotonic() - started < 60
    assert again.ok, rendered(again)
    assert any("the warm process" in note and "replaced" in note for note in again.notes)
    # seen stopped in /proc at once, not given up after the fork's whole wait
    assert any("was stopped" in note for note in stopped.notes + again.notes), \
        stopped.notes + again.notes
    assert "the warm process" in " ".join(rendered(again).split())
    assert gone_within(server, 10), "the stopped server was left behind"
    later_checks_are_honest(tmp_path)


@linux_only
def test_a_server_that_never_answers_is_given_up_within_seconds(tmp_path, warm_on, monkeypatch):
    assert grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"]).ok
    warm_process._connected.clear()  # as a new check process would: connect afresh
    server = warm_server_pid(warm_on)
    # stopped where /proc cannot show it: the state looks as a live server's
    monkeypatch.setattr(warm_process, "_impostor", lambda pid, path, interpret=None: "")
    monkeypatch.setattr(warm_process, "READY_SECONDS", 1.0)
    os.kill(server, signal.SIGSTOP)
    try:
        started = time.monotonic()
        result = grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"])
        took = time.monotonic() - started
    finally:
        with contextlib.suppress(OSError):
            os.kill(server, signal.SIGCONT)
    assert result.ok and FORKED not in [what for _, what in result.timeline]
    assert any("did not answer within 1 s" in note for note in result.notes), result.notes
    assert took < 60
    assert gone_within(server, 10)


# --- 2. Escaping the process group --------------------------------------------------------------

ESCAPES = '''

import os as _os
import signal as _signal
import time as _time


def _escape(marker):
    child = _os.fork()
    if child == 0:
        _os.setsid()
        if _os.fork() == 0:
            for _number in (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGINT, _signal.SIGUSR1):
                _signal.signal(_number, _signal.SIG_IGN)
            with open(marker, "w") as handle:
                handle.write(str(_os.getpid()))
            _time.sleep(600)
        _os._exit(0)
    _os.waitpid(child, 0)


_escape({marker!r})
'''


# Every path starts its worker through worker.main, whose guard (containment.run_guarded)
# adopts and ends the escaped process: the quick run escapes from the warm path, the learner's
# default on Linux; the fresh and portable paths are exhaustive (their workers' own ends are
# proven quick by test_robustness's child test and test_portable_process's endless loop).
@linux_only
@pytest.mark.parametrize("path", [
    "warm", pytest.param("fresh", marks=pytest.mark.exhaustive),
    pytest.param("portable", marks=pytest.mark.exhaustive)])
def test_a_double_forked_process_in_a_session_of_its_own_ends_with_the_check(
        tmp_path, warm_on, monkeypatch, path):
    if path != "warm":
        monkeypatch.setenv(warm_process.SWITCH, "0")
    if path == "portable":
        monkeypatch.setenv("LEARNING_PORTABLE_PROCESS", "1")
    marker = tmp_path / "escaped.pid"
    module = solution_text("softmax") + ESCAPES.format(marker=str(marker))
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.ok, rendered(result)
    assert (FORKED in [what for _, what in result.timeline]) == (path == "warm")
    escaped = read_pid(marker)
    assert gone_within(escaped, 10), "a process the module started outlived the check"


@linux_only
def test_the_guard_leaves_as_its_child_did():
    for code in (0, 3):
        done = subprocess.run([sys.executable, "-c", (
            "import os, sys\nfrom learning.grader import containment\n"
            f"os._exit(containment.run_guarded(lambda: {code}))")],
            env=dict(os.environ, PYTHONPATH=course_pythonpath()), timeout=60)
        assert done.returncode == code
    done = subprocess.run([sys.executable, "-c", (
        "import os, signal\nfrom learning.grader import containment\n"
        "containment.run_guarded(lambda: os.kill(os.getpid(), signal.SIGSEGV))")],
        env=dict(os.environ, PYTHONPATH=course_pythonpath()), timeout=60)
    assert done.returncode == -signal.SIGSEGV


# --- 3. The warm process's socket ---------------------------------------------------------------

IMPERSONATES = '''

import socket as _socket

try:
    _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    print("made a Unix socket")
except PermissionError:
    print("no Unix socket")
'''

FAKE_SERVER = r'''
import json, os, socket, sys, time
path = sys.argv[1]
listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
listener.bind(path)
listener.listen(8)
open(sys.argv[2], "w").write(str(os.getpid()))
while True:
    connection, _ = listener.accept()
    connection.send(json.dumps({"ready": True}).encode())
    message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 2)
    request = json.loads(message)
    # claims to have forked a worker, and reports it passed: a right exit, no events
    connection.send(json.dumps({"started": request["id"], "pid": os.getpid()}).encode())
    open(sys.argv[2] + ".served", "w").write("1")
    for fd in fds:
        os.close(fd)
'''


@filtered
def test_the_learners_code_cannot_make_a_unix_socket(tmp_path, warm_on):
    result = grade_text(tmp_path, "softmax", solution_text("softmax") + IMPERSONATES,
                        ["python"])
    assert result.ok and "no Unix socket" in result.learner_output


@linux_only
def test_a_process_answering_on_the_socket_is_not_trusted_for_answering(tmp_path, warm_on):
    folder = warm_process.folder()
    path = folder / f"{warm_process.key(warm_process.will_interpret(False))}.sock"
    marker = tmp_path / "fake.pid"
    fake = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(path), str(marker)])
    try:
        read_pid(marker)
        result = grade_text(tmp_path, "softmax", WRONG, ["python"])
        assert not result.ok and result.parts[0].passed < result.parts[0].graded
        assert not Path(str(marker) + ".served").exists(), "the check used the impostor"
        assert any("is not the course's" in note for note in result.notes), result.notes
        text = " ".join(rendered(result).split())
        assert "not the course's (another command listens there)" in text
    finally:
        fake.kill()
        fake.wait()
    later_checks_are_honest(tmp_path)


@linux_only
def test_garbage_on_the_socket_does_not_end_the_warm_process(tmp_path, warm_on):
    assert grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"]).ok
    server = warm_server_pid(warm_on)
    (path,) = (warm_on / f"triton-course-{os.getuid()}").glob("*.sock")
    for garbage in (b"not json", b"[1, 2]", json.dumps({"id": "x", "argv": 5}).encode(),
                    b"\xff\xfe", b"[" * 100000):  # the last nests past Python's recursion
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(str(path))
        sock.send(garbage)
        sock.settimeout(5)
        with contextlib.suppress(OSError):
            while sock.recv(1 << 16):  # "ready", then the server hangs up on it
                pass
        sock.close()
    assert alive(server)
    warm_process._connected.clear()
    again = grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"])
    assert again.ok and FORKED in [what for _, what in again.timeline]
    assert warm_server_pid(warm_on) == server


# --- 4. Limits the learner's own code cannot lift ----------------------------------------------

LIFTS_THE_CAP = '''

import resource as _resource


def softmax_python(values):
    try:
        _resource.setrlimit(_resource.RLIMIT_AS, (_resource.RLIM_INFINITY,
                                                  _resource.RLIM_INFINITY))
        print("cap lifted")
    except (ValueError, OSError):
        print("cap kept")
    rows = []
    while True:
        rows.append(bytearray(64 << 20))  # 64 MiB a step, past the cap
'''


@linux_only
def test_the_memory_cap_holds_against_the_learners_own_code(tmp_path, mode):
    if not mode.interpret:
        pytest.skip("the cap applies on the CPU only: CUDA reserves far more address space")
    can_lift = os.geteuid() == 0  # root may raise a hard limit: only the filter stops it
    if can_lift and containment.machine() not in containment._SYSCALLS:
        pytest.skip("as root, without the filter, a hard limit can be raised")
    result = grade_text(tmp_path, "softmax", solution_text("softmax") + LIFTS_THE_CAP,
                        ["python"], memory_gib=0.5)
    first = result.parts[0].cases[0].verdict
    assert "cap kept" in result.learner_output and "cap lifted" not in result.learner_output
    assert first.status == "error" and "MemoryError" in first.summary, first.summary


def test_the_cap_is_hard_as_well_as_soft():
    done = subprocess.run([sys.executable, "-c", (
        "import resource\nfrom learning.grader import loading\n"
        "loading.cap_memory(1.0)\nprint(*resource.getrlimit(resource.RLIMIT_AS))")],
        env=dict(os.environ, PYTHONPATH=course_pythonpath()), capture_output=True, text=True,
        timeout=60)
    soft, hard = (int(x) for x in done.stdout.split())
    assert soft == hard != resource.RLIM_INFINITY


def test_an_event_frame_larger_than_any_event_ends_the_run_with_what_was_seen(tmp_path):
    module = solution_text("softmax") + '''

import os as _os
import struct as _struct


def softmax_python(values):
    for fd in range(3, 64):  # whatever the event pipe is: announce a frame of 1 TB on each
        try:
            _os.write(fd, _struct.pack("<Q", 1 << 40))
        except OSError:
            pass
    return [1.0]
'''
    started = time.monotonic()
    result = grade_text(tmp_path, "softmax", module, ["python"])
    verdict = result.parts[0].cases[0].verdict
    assert verdict.status == "error" and "could not read what the process sent" in \
        verdict.summary, verdict.summary
    assert "pipe" not in verdict.summary and not verdict.causes
    assert time.monotonic() - started < 60


# --- 5. Text from the learner's code is shown, never acted on ----------------------------------

ESCAPE_CODES = "\\x1b[2J\\x1b[1A\\x1b[2K\\x1b]0;title\\x07\\x1b]52;c;aGk=\\x07\\r 50%|###\\u202e"
SAYS_ESCAPES = f'''

class _Odd:
    def __repr__(self):
        return "odd{ESCAPE_CODES}"


def softmax_python(values):
    print("printed{ESCAPE_CODES}")
    if len(values) == 1:
        return _Odd()
    raise ValueError("message{ESCAPE_CODES}")
'''


@pytest.mark.parametrize("terminal", [False, True])
def test_escape_sequences_from_the_learners_code_are_shown_not_executed(tmp_path, terminal):
    result = grade_text(tmp_path, "softmax", solution_text("softmax") + SAYS_ESCAPES,
                        ["python"])
    text = rendered(result, terminal=terminal)
    for raw in ("\x1b[2J", "\x1b[1A", "\x1b[2K", "\x1b]", "\x07", "\r", "\u202e"):
        assert raw not in text, repr(raw)
    flat = text.replace("\n", "")
    for shown in ("printed\\x1b[2J", "message\\x1b[2J", "\\x1b]52;c;aGk=\\x07", "\\r 50%",
                  "\\u202e"):
        assert shown in flat, shown
    if terminal:  # rich's own colours still reach a terminal
        assert "\x1b[" in text
    as_json = report.to_json(result)
    assert "printed\x1b[2J\x1b[1A" in as_json["learner_output"]  # --json keeps it exact


def test_the_command_shows_escapes_at_80_columns_piped(tmp_path):
    write_module(tmp_path, "softmax", solution_text("softmax") + SAYS_ESCAPES)
    done = subprocess.run([sys.executable, "-m", "learning.check", "softmax", "--part", "python",
                           "--root", str(tmp_path)], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="80", PYTHONPATH=course_pythonpath()),
                          timeout=300)
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "\r" not in done.stdout
    assert "\\x1b[2J" in done.stdout
    assert all(len(line) <= 80 for line in done.stdout.splitlines())


# --- 6. Values that lie are judged by their plain values ----------------------------------------

LYING_VALUES = '''

import math as _math


class _Float(float):
    def __float__(self):
        return 0.25

    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


class _List(list):
    def __iter__(self):
        return iter([0.5])

    def __len__(self):
        return 1


def softmax_python(values):
    top = max(values)
    exps = [_math.exp(v - top) for v in values]
    total = sum(exps)
    return _List(_Float(e / total{scale}) for e in exps)
'''


@pytest.mark.parametrize("scale, passes", [("", True), (" * 2", False)])
def test_subclasses_of_float_and_list_are_judged_by_their_values(tmp_path, scale, passes):
    result = grade_text(tmp_path, "softmax", LYING_VALUES.format(scale=scale), ["python"])
    part = result.parts[0]
    assert all(c.verdict.status in ("passed", "failed") for c in part.cases), rendered(result)
    assert part.status == ("passed" if passes else "failed")


def test_a_tensor_subclass_is_judged_by_its_values(tmp_path):
    module = solution_text("softmax") + '''

import torch as _torch

_right = softmax_triton


class _Lying(_torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        return result * 0 if isinstance(result, _torch.Tensor) else result


def softmax_triton(x):
    return _right(x).as_subclass(_Lying)
'''
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    assert result.ok, rendered(result)


def test_an_event_the_grader_could_not_read_is_never_sent():
    from learning.grader.channel import Channel

    class Odd:
        pass

    read, write = os.pipe()
    try:
        channel = Channel(write)
        channel.send("done", "python", "case", Odd())
        from learning.grader import childproc

        size = childproc.FRAME_HEADER.unpack(os.read(read, 8))[0]
        event = childproc.load_event(os.read(read, size))
    finally:
        os.close(read)
    assert event[0] == "done" and event[3].values is None
    assert "could not be passed to the grader as plain data" in event[3].note


# --- 7. The reference by a roundabout route -----------------------------------------------------

PYTHON_PART_ONLY = "\n".join(
    line for line in solution_text("softmax").split("@triton.jit")[0].splitlines()
    if not line.startswith(("import torch", "import triton")))


@pytest.mark.parametrize("route", ["copied", "exec", "forgotten", "read, changed, run",
                                   "read through a link", "read through its folder",
                                   "its cached bytecode", "bytecode made elsewhere"])
def test_the_reference_reached_by_any_route_is_noted(tmp_path, route):
    # a copy made before the check, outside the learner's folder (one below it, made before
    # the check, is a module of theirs, as free to match the reference as their own file)
    copy = tmp_path.parent / f"{tmp_path.name}-elsewhere" / "mine.py"
    copy.parent.mkdir()
    copy.write_text(PYTHON_PART_ONLY, encoding="utf-8")
    solution = str(solution_path("softmax"))
    link = copy.parent / "notes.txt"
    # the reference's own compiled cache, as any import of it writes one; and its code compiled
    # under another file's name, marshalled where the course never looks
    cached = importlib.util.cache_from_source(solution)
    py_compile.compile(solution, cfile=cached)
    elsewhere = copy.parent / "code.bin"
    elsewhere.write_bytes(marshal.dumps(compile(PYTHON_PART_ONLY, str(copy), "exec")))
    from_code = ("import marshal as _m, math, types as _t\n_code = _m.loads(open({!r}, 'rb')"
                 ".read(){})\n_f = next(c for c in _code.co_consts if getattr(c, 'co_name', '')"
                 " == 'softmax_python')\nsoftmax_python = _t.FunctionType(_f, {{'math': math}})\n")
    module = {
        "its cached bytecode": from_code.format(cached, "[16:]"),
        "bytecode made elsewhere": from_code.format(str(elsewhere), ""),
        # its text read and run with a line added to every function: other bytecode, same code
        "read, changed, run": f"import os as _os\n_fd = _os.open({solution!r}, _os.O_RDONLY)\n"
                              "_text = _os.read(_fd, 1 << 20).decode()\n_os.close(_fd)\n"
                              "_text = _text.replace('\\n    return ',\n"
                              "                      '\\n    _unused = 0\\n    return ')\n"
                              "exec(_text.split('@triton.jit')[0])\n",
        # opened by a name relative to a descriptor of its folder: the open event has no folder
        "read through its folder": f"import os as _os\n_d = _os.open({str(Path(solution).parent)!r}"
                                   ", _os.O_RDONLY)\n_fd = _os.open('solution.py', _os.O_RDONLY, "
                                   "dir_fd=_d)\n_text = _os.read(_fd, 1 << 20).decode()\n"
                                   "_text = _text.replace('\\n    return ',\n"
                                   "                      '\\n    _unused = 0\\n    return ')\n"
                                   "exec(_text.split('@triton.jit')[0])\n",
        "read through a link": f"import os as _os\n_os.symlink({solution!r}, {str(link)!r})\n"
                               f"exec(open({str(link)!r}).read().split('@triton.jit')[0])\n",
        "copied": f"import importlib.util as _u\n_s = _u.spec_from_file_location('mine', "
                  f"{str(copy)!r})\n_m = _u.module_from_spec(_s)\n_s.loader.exec_module(_m)\n"
                  "softmax_python = _m.softmax_python\n",
        "exec": f"exec(open({str(copy)!r}).read())\n",
        "forgotten": "import sys\nimport learning.exercises.softmax.solution as _s\n"
                     "softmax_python = _s.softmax_python\n"
                     "del sys.modules['learning.exercises.softmax.solution']\n",
    }[route]
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.ok
    assert any("learning.exercises.softmax.solution" in name for name in result.borrowed), \
        result.borrowed
    assert "your code loaded the course's reference code" in " ".join(rendered(result).split())


@pytest.mark.parametrize("imported", [
    "from learning.exercises.softmax.exercise import _python_softmax as softmax_python",
    "import learning.exercises.softmax.explainer as _e\nsoftmax_python = _e.__name__",
    "from learning.grader import registry as _r\n"
    "softmax_python = _r.find('softmax').parts[0].reference.__globals__['_python_softmax']",
], ids=["the declaration's reference", "the worked example", "through the registry"])
def test_the_exercises_declaration_and_worked_example_are_the_courses_answers_too(tmp_path,
                                                                                  imported):
    # the worker loaded the declaration to build the cases: an import of it by the learner's
    # code would find it loaded, and run nothing the watch could see, were it not forgotten
    # (with the exercises the registry kept, whose functions lead to it through their globals)
    result = grade_text(tmp_path, "softmax", imported + "\n", ["python"])
    module = "explainer" if "explainer" in imported else "exercise"
    assert f"learning.exercises.softmax.{module}" in result.borrowed, result.borrowed


def test_the_exercises_the_worker_held_are_not_found_through_the_collector(tmp_path):
    # the cycles the forgotten declarations leave (and the warm process's copies) are frozen
    # out of gc's lists: a search of every object finds no function of a declaration's
    module = ("import gc, types\n\n"
              "_found = [o for o in gc.get_objects() if type(o) is types.FunctionType and "
              "o.__globals__.get('__name__', '').startswith('learning.exercises.')]\n"
              "print('found', len(_found))\n"
              "def softmax_python(values):\n    return _found[0].__globals__['_python_softmax']"
              "(values)\n")
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert "found 0" in result.learner_output and not result.ok, result.learner_output
    # the freeze undone first: the lists hold them again, and reading them is noted
    result = grade_text(tmp_path, "softmax", module.replace("import gc, types\n\n",
                                                            "import gc, types\ngc.unfreeze()\n"),
                        ["python"])
    assert borrowed.UNFROZEN in result.borrowed, (result.borrowed, result.learner_output)


def test_the_labs_kernels_another_checkouts_answers_and_the_git_history_are_answers_too(
        tmp_path):
    # the lab's probes hold whole kernels; another clone of the course holds the same answers,
    # read and changed a little (so that no fingerprint matches); git's objects hold every
    # version of them
    other = course_copy(tmp_path)
    history = other / ".git" / "objects" / "ab"
    history.mkdir(parents=True)
    (history / "cdef").write_bytes(b"compressed")
    tweak = ("_text = open({!r}).read().split('@triton.jit')[0]\n"
             "exec(_text.replace('\\n    return ', '\\n    _unused = 0\\n    return '))\n")
    routes = {
        "lab.probes.backward_variants": "import lab.probes.backward_variants\n",
        "learning.exercises.softmax.solution": tweak.format(
            str(other / "learning" / "exercises" / "softmax" / "solution.py")),
        borrowed.HISTORY: f"open({str(history / 'cdef')!r}, 'rb').read()\n",
    }
    for name, route in routes.items():
        result = grade_text(tmp_path, "softmax", route + PYTHON_PART_ONLY, ["python"])
        assert name in result.borrowed, (name, result.borrowed)


# The watch of the course's code, found the plain ways (a local of a frame on the stack, a
# traceback's frames, the collector's lists) and changed before the reference is imported
FIND_THE_WATCH = """
import gc, sys

def _watches():
    frame = sys._getframe()
    while frame is not None:
        if type(frame.f_locals.get("watch")).__name__ == "Watch":
            yield frame.f_locals["watch"]
        frame = frame.f_back
    try:
        raise ValueError
    except ValueError as error:
        frame = error.__traceback__.tb_frame
        while frame is not None:
            if type(frame.f_locals.get("watch")).__name__ == "Watch":
                yield frame.f_locals["watch"]
            frame = frame.f_back
    yield from (o for o in gc.get_objects() if type(o).__name__ == "Watch")

"""
WATCH_CHANGES = {
    "busy with the learner's frame": "_w._busy_at = sys._getframe()\n",
    "its busy flag of old": "_w._busy = True\n",
    "learner_file": "_w.learner_file = {solution!r}\n",
    "a method shadowed": "_w._own_work = lambda: True\n",
    "a method replaced": "type(_w)._hook = lambda self, event, args: None\n",
    "its findings": "_w.by_path = type('Deaf', (set,), {{'add': lambda self, x: None}})()\n",
}


@pytest.mark.parametrize("change", WATCH_CHANGES)
def test_the_watch_changed_by_the_module_still_sees_the_reference(tmp_path, change):
    solution = str(solution_path("softmax"))
    module = (FIND_THE_WATCH + "for _w in _watches():\n    "
              + WATCH_CHANGES[change].format(solution=solution) +
              "    break\nelse:\n    raise SystemExit('no watch found')\n"
              "import learning.exercises.softmax.solution as _s\n"
              "sys.modules.pop('learning.exercises.softmax.solution', None)\n"
              "softmax_python = _s.softmax_python\n")
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.parts[0].passed == result.parts[0].graded > 0, rendered(result)  # it ran
    assert result.borrowed, rendered(result)
    note = " ".join(rendered(result).split())
    assert "no part's pass is recorded" in note, note
    if change not in ("busy with the learner's frame", "its busy flag of old"):
        assert "your code changed the check's watch" in note, note


# Two ways past a watch that tells each name once: a busy mark set from a frame that runs
# with the watch module's globals, and the names it found put in its sets beforehand and
# taken out again after each use
WATCH_EVADED = {
    "busy under its globals": """
_G = vars(sys.modules["learning.grader.borrowed"])
_BUSY = compile("w._busy_at = sys._getframe(0)\\nout = call()\\nw._busy_at = None", "<b>", "exec")

def _quietly(call):
    scope = {"w": _w, "call": call}
    exec(_BUSY, _G, scope)
    return scope["out"]
""",
    "its sets filled, then emptied": """
_w.by_path.add("learning.exercises.softmax.solution")
for _name in ("_reported", "_told"):
    getattr(_w, _name, set()).add("learning.exercises.softmax.solution")

def _quietly(call):
    try:
        return call()
    finally:
        _w.by_path.clear()
        _w.copies.clear()
""",
}


@pytest.mark.parametrize("route", WATCH_EVADED)
def test_the_watch_evaded_by_the_module_still_tells_the_reference(tmp_path, route):
    module = (FIND_THE_WATCH + "_w = next(_watches())\n" + WATCH_EVADED[route] +
              "def _load():\n"
              "    import importlib\n"
              "    loaded = importlib.import_module('learning.exercises.softmax.solution')\n"
              "    sys.modules.pop('learning.exercises.softmax.solution', None)\n"
              "    return loaded\n"
              "_S = _quietly(_load)\n"
              "def softmax_python(values):\n"
              "    return _quietly(lambda: _S.softmax_python(values))\n")
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.parts[0].passed == result.parts[0].graded > 0, rendered(result)  # it ran
    assert "learning.exercises.softmax.solution" in result.borrowed, rendered(result)


@pytest.mark.interpreter  # what it says of the interpreter's compiling; compiled, see below
def test_a_lab_file_imported_is_named_as_loaded_not_as_copied_into_itself(tmp_path):
    # Triton's interpreter compiles each kernel's source again, under its file's name, as it
    # decorates it: that is the lab's file loaded, not its kernels copied into it
    result = grade_text(tmp_path, "softmax",
                        "from lab.probes import probe_kernels\n" + PYTHON_PART_ONLY, ["python"])
    assert "lab.probes.probe_kernels" in result.borrowed, result.borrowed
    assert not [name for name in result.borrowed if "copied into" in name], result.borrowed


def test_a_catalogued_version_is_the_courses_answer_too(tmp_path):
    """The catalogue's right versions pass every case: a module that loads one is told so, like
    one that loads the solution."""
    module = ("import learning.exercises.softmax.catalogue as _c\n"
              "import math\n\n"
              "def softmax_python(values):\n"
              "    top = max(values)\n"
              "    exps = [math.exp(v - top) for v in values]\n"
              "    return [e / sum(exps) for e in exps]\n")
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.ok
    assert result.borrowed == ["learning.exercises.softmax.catalogue"], result.borrowed
    assert "your code loaded the course's reference code" in " ".join(rendered(result).split())


def test_the_answers_are_each_exercises_solution_catalogue_declaration_and_worked_example():
    from learning import exercises
    from learning.grader import borrowed

    for name in exercises.NAMES:
        for file in exercises.FILES:
            found = borrowed.reference_name(str(exercises.path(name, file)))
            # the declaration holds the float64 reference, the worked example its steps
            if file in ("solution.py", "catalogue.py", "exercise.py", "explainer.py"):
                assert found == f"learning.exercises.{name}.{file.removesuffix('.py')}", found
            else:  # the stub: no answer in it
                assert found == "", (name, file, found)
    assert borrowed.reference_name(str(exercises.FOLDER / "__init__.py")) == ""


def test_the_lab_s_shipped_files_are_the_courses_code_and_a_learners_own_file_there_is_not():
    from learning.grader import borrowed
    from learning.grader.childproc import COURSE_ROOT

    probe = COURSE_ROOT / "lab" / "probes" / "backward_variants.py"
    assert probe.exists() and borrowed.reference_name(str(probe)) == \
        "lab.probes.backward_variants"
    assert borrowed.reference_name(str(COURSE_ROOT / "lab" / "production.py")) == \
        "lab.production"
    # a file the learner writes into lab/ (it needs not exist to be named): their own; and the
    # lab's package marker, a docstring that any import of a module under lab/ runs
    for mine in ("lab/my_softmax.py", "lab/probes/my_sweep.py", "lab/__init__.py"):
        assert borrowed.reference_name(str(COURSE_ROOT / mine)) == "", mine
    # the list is the lab as it is (python -m learning.computed writes it)
    from learning.grader import integrity

    listed = (COURSE_ROOT / borrowed.LAB_LIST).read_text(encoding="utf-8")
    assert listed == integrity.lab_text() and "lab/probes/backward_variants.py\n" in listed


def test_a_function_of_the_learners_own_is_not_taken_for_the_reference(tmp_path):
    helper = tmp_path / "helpers_of_mine.py"
    helper.write_text("import math\n\ndef stable(values):\n    top = max(values)\n"
                      "    exps = [math.exp(v - top) for v in values]\n"
                      "    return [e / sum(exps) for e in exps]\n", encoding="utf-8")
    result = grade_text(tmp_path, "softmax", "from helpers_of_mine import stable as "
                        "softmax_python\n", ["python"])
    assert result.ok and result.borrowed == []


# --- 8. The course's own files ------------------------------------------------------------------

def course_copy(tmp_path: Path) -> Path:
    """A copy of the course's code, where a test may tamper with the files."""
    root = tmp_path / "course"
    shutil.copytree(COURSE_ROOT / "learning", root / "learning",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in integrity.TOP_LEVEL:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(COURSE_ROOT / name, root / name)
    return root


def run_check(root: Path, folder: Path, *arguments: str, env: dict | None = None):
    # wide: the notes quote long temporary paths, which would fold at 80 columns
    environment = dict(os.environ, PYTHONPATH=str(root), COLUMNS="400", LEARNING_WARM="0",
                       LEARNING_FORKSERVER="0")
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "learning.check", "softmax", "--part",
                           "python", "--root", str(folder), *arguments], cwd=root,
                          env=environment, capture_output=True, text=True, timeout=300)


def test_a_check_refuses_to_grade_with_the_courses_files_changed(tmp_path):
    root = course_copy(tmp_path)
    folder = tmp_path / "learner"
    folder.mkdir()
    write_module(folder, "softmax", WRONG)
    reference = root / "learning" / "exercises" / "softmax" / "exercise.py"
    reference.write_text(reference.read_text(encoding="utf-8") + "\n# changed\n",
                         encoding="utf-8")
    done = run_check(root, folder)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and "(learning/exercises/softmax/exercise.py)" in lines[0], done.stdout
    assert "nothing was graded" in lines[0] and "git checkout -- learning" in lines[0]


# what the learner's code does to reach a later check, or what runs after it
TAMPERS = '''

import os as _os
from pathlib import Path as _Path

from learning.grader import state as _state

with open({reference!r}, "a") as _handle:
    _handle.write("\\nraise SystemExit('tampered')\\n")
with open({shadow!r}, "w") as _handle:  # shadows json for the next check
    _handle.write("raise SystemExit('hijacked')\\n")
_os.chmod({other!r}, 0o400)
_here = _Path(__file__).resolve().parent
_forged = _state.load(_here)  # read with the key beside it, so signed again on save
_forged.record("matmul", "python", "passed", 9, 9)
_state.save(_here, _forged)
(_here / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\\necho planted\\n")
with open(_here / ".git" / "config", "a") as _handle:
    _handle.write("[core]\\n\\thooksPath = /tmp\\n")
'''


def test_a_module_that_rewrites_the_courses_files_is_undone_and_told(tmp_path):
    # the course's files and their permissions, a module planted where Python imports, the
    # progress file (a grade signed with the key beside it), git's hooks and config
    root = course_copy(tmp_path)
    folder = tmp_path / "learner"
    (folder / ".git" / "hooks").mkdir(parents=True)
    config = folder / ".git" / "config"
    config.write_text("[core]\n\tbare = false\n")
    reference = root / "learning" / "exercises" / "softmax" / "exercise.py"
    original = reference.read_bytes()
    other = root / "learning" / "course.py"
    mode = stat.S_IMODE(other.stat().st_mode)
    assert mode != 0o400
    write_module(folder, "softmax", solution_text("softmax"))
    assert run_check(root, folder).returncode == 0  # a key and a first grade exist
    before = (folder / ".course-state" / "progress.json").read_bytes()
    write_module(folder, "softmax", solution_text("softmax") + TAMPERS.format(
        reference=str(reference), shadow=str(root / "json.py"), other=str(other)))
    done = run_check(root, folder)
    text = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the course's own files changed (learning/exercises/softmax/exercise.py) and were put " \
        "back" in text, done.stdout
    assert "json.py appeared where Python would import it" in text
    assert reference.read_bytes() == original
    assert not (root / "json.py").exists()
    assert stat.S_IMODE(other.stat().st_mode) == mode
    assert "the permissions of learning/course.py changed and were put back" in text
    assert state.load(folder).grade("matmul", "python") is None
    assert state.load(folder).grade("softmax", "python").status == "passed"
    assert (folder / ".course-state" / "progress.json").read_bytes() != before  # regraded
    assert ".course-state/progress.json changed and was put back (grades are written by the " \
        "check" in text, text
    assert not (folder / ".git" / "hooks" / "pre-commit").exists()
    assert config.read_text() == "[core]\n\tbare = false\n"
    assert ".git/config changed and was put back (the changed copy is in" in text
    assert ".git/hooks/pre-commit appeared where git, pip or the course would read it" in text
    kept = list((folder / ".course-state" / "set-aside").iterdir())
    assert any(p.name.endswith("config") for p in kept), kept  # the changed copy, kept
    write_module(folder, "softmax", WRONG)
    assert run_check(root, folder).returncode == 1
    write_module(folder, "softmax", solution_text("softmax"))
    right = run_check(root, folder)
    assert right.returncode == 0, right.stdout + right.stderr


def test_the_digests_of_the_courses_files_are_current():
    assert integrity.changed() == [], "run python -m learning.computed"


def test_a_virtual_environments_scripts_and_a_new_key_are_put_back(tmp_path):
    # a script first on PATH (a new "git"), an edited activate, an edited pyvenv.cfg, and a key
    # made while the learner's code ran: every one undone
    from learning.grader import nearby

    venv, learner = tmp_path / "venv", tmp_path / "learner"
    (venv / "bin").mkdir(parents=True)
    (learner / ".course-state").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    activate = venv / "bin" / "activate"
    activate.write_text("export VIRTUAL_ENV=here\n")
    snapshot = nearby.Snapshot(tmp_path / "course", learner, prefix=str(venv),
                               base_prefix="/usr")
    with open(activate, "a") as handle:
        handle.write("alias python=evil\n")
    (venv / "pyvenv.cfg").write_text("home = /tmp/evil\n")
    (venv / "bin" / "git").write_text("#!/bin/sh\n")
    (learner / ".course-state" / "key").write_bytes(b"chosen by the module")
    (learner / "pytest.ini").write_text("[pytest]\naddopts = -p planted\n")
    changes = snapshot.repair(tmp_path / "aside")
    assert not (learner / "pytest.ini").exists() and "pytest.ini" in changes.set_aside
    assert activate.read_text() == "export VIRTUAL_ENV=here\n"
    assert (venv / "pyvenv.cfg").read_text() == "home = /usr/bin\n"
    assert not (venv / "bin" / "git").exists()
    assert not (learner / ".course-state" / "key").exists()
    assert changes.grades == [".course-state/key"]
    assert sorted(Path(p).name for p in changes.restored) == ["activate", "pyvenv.cfg"]
    kept = sorted(p.name.split("-", 2)[-1] for p in (tmp_path / "aside").iterdir())
    assert kept == ["activate", "git", "key", "pytest.ini", "pyvenv.cfg"], kept


# --- 9. State files are data --------------------------------------------------------------------

@linux_only
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_state_file_that_is_not_a_file_is_set_aside_without_waiting(tmp_path, capsys, kind):
    path = state.state_path(tmp_path)
    path.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    write_module(tmp_path, "softmax", solution_text("softmax"))
    assert check.main(["softmax", "--part", "python", "--root", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not a regular file" in out and "set aside" in out
    assert state.load(tmp_path).grade("softmax", "python").status == "passed"
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    assert progress.main(["--root", str(tmp_path)]) == 0
    assert "not a regular file" in " ".join(capsys.readouterr().out.split())


def test_a_forged_grade_is_left_out_and_keeps_the_solution_closed(tmp_path, capsys):
    path = state.state_path(tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps({"format": state.FORMAT, "grades": {"softmax": {
        part: {"status": "passed", "passed": 99, "total": 99, "checked_at": "2026-01-01T00:00:00",
               "source": "", "mac": "0" * 64} for part in ("python", "triton")}}}),
        encoding="utf-8")
    write_module(tmp_path, "softmax", stub_text("softmax"))
    assert progress.main(["--root", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "99/99" not in out and "not recorded by a check" in out
    assert solution.main(["softmax", "--root", str(tmp_path)]) == 1
    assert "not checked yet" in " ".join(capsys.readouterr().out.split())


def test_a_part_not_started_is_said_so_without_a_count_of_its_cases(tmp_path, capsys):
    # the check leaves out the cases this machine cannot run; a count here would not be its
    write_module(tmp_path, "rmsnorm", stub_text("rmsnorm"))
    assert check.main(["rmsnorm", "--root", str(tmp_path)]) == 1
    capsys.readouterr()
    assert solution.main(["rmsnorm", "--root", str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "triton: not started" in out and "cases passed" not in out, out


def test_a_grade_of_another_version_of_the_file_does_not_open_the_solution(tmp_path, capsys):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    assert check.main(["softmax", "--root", str(tmp_path)]) == 0
    write_module(tmp_path, "softmax", stub_text("softmax"))
    capsys.readouterr()
    assert solution.main(["softmax", "--root", str(tmp_path)]) == 1
    assert "softmax.py has changed since that check" in \
        " ".join(capsys.readouterr().out.split())
    assert progress.main(["--root", str(tmp_path), "--json"]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out)["lessons"] if r["lesson"] == "04"]
    assert row["parts"]["python"]["of_current_file"] is False


# --- 10. Closing the terminal, Ctrl-C, a killed check -------------------------------------------

ENDLESS = '''
import os

with open(os.path.join(os.path.dirname(__file__), "worker.pid"), "w") as handle:
    handle.write(str(os.getpid()))


def softmax_python(values):
    while True:
        pass
'''


@linux_only
@pytest.mark.parametrize("path, number", [
    # the quick run stops one check of each path; every other signal and path is exhaustive
    (path, number) if (path, number) in (("warm", signal.SIGTERM), ("fresh", signal.SIGINT))
    else pytest.param(path, number, marks=pytest.mark.exhaustive)
    for path in ("warm", "fresh")
    for number in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGKILL)])
def test_a_check_stopped_by_a_signal_ends_its_worker(tmp_path, warm_on, path, number):
    write_module(tmp_path, "softmax", ENDLESS)
    env = dict(os.environ, PYTHONPATH=course_pythonpath(), LEARNING_FORKSERVER="0",
               LEARNING_WARM="1" if path == "warm" else "0")
    check_process = subprocess.Popen(
        [sys.executable, "-m", "learning.check", "softmax", "--part", "python", "--root",
         str(tmp_path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True)
    try:
        worker = read_pid(tmp_path / "worker.pid", 120)
        os.kill(check_process.pid, number)
        check_process.wait(timeout=30)
        assert gone_within(worker, 10), "the worker outlived the check"
    finally:
        with contextlib.suppress(OSError):
            os.killpg(check_process.pid, signal.SIGKILL)
        _, err = check_process.communicate(timeout=30)
    if number != signal.SIGKILL:
        assert check_process.returncode == (130 if number == signal.SIGINT else 128 + number)
        assert b"Traceback" not in err, err.decode()


# --- 11. What a walk as a hostile learner found after the above --------------------------------

@linux_only
def test_the_grader_process_is_not_dumpable_once_it_has_run_learner_code(tmp_path):
    # /proc/<pid>/mem and /proc/<pid>/fd of a dumpable process are open to its user: the
    # learner's code could write into the check's memory, or straight into its stdout
    import ctypes

    assert grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"]).ok
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens any process's /proc files")
@linux_only
def test_the_learners_code_cannot_open_the_checks_memory_or_descriptors(tmp_path):
    module = solution_text("softmax") + f'''

for _name in ("mem", "fd/1"):
    try:
        open("/proc/{os.getpid()}/" + _name, "rb").close()
        print("opened", _name)
    except OSError:
        print("refused", _name)
'''
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert "opened" not in result.learner_output and "refused mem" in result.learner_output


@filtered
def test_io_uring_and_the_checks_process_group_are_out_of_reach(tmp_path):
    module = solution_text("softmax") + f'''

import ctypes as _ctypes
import os as _os

_libc = _ctypes.CDLL(None, use_errno=True)
_params = _ctypes.create_string_buffer(120)
_fd = _libc.syscall(425, 8, _params)  # io_uring_setup
print("io_uring", "refused" if _fd < 0 else "made")
try:
    _os.killpg({os.getpgid(os.getpid())}, 0)
    print("group reached")
except PermissionError:
    print("group refused")
'''
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert "io_uring refused" in result.learner_output
    assert "group refused" in result.learner_output


def test_the_learners_processes_are_limited_in_number():
    done = subprocess.run([sys.executable, "-c", (
        "import resource\nfrom learning.grader import containment\n"
        "assert containment.limit_tasks(100)\n"
        "print(*resource.getrlimit(resource.RLIMIT_NPROC))")],
        env=dict(os.environ, PYTHONPATH=course_pythonpath()), capture_output=True, text=True,
        timeout=60)
    soft, hard = (int(x) for x in done.stdout.split())
    assert soft == hard != resource.RLIM_INFINITY


def test_the_reference_compiled_into_functions_without_exec_is_noted(tmp_path):
    module = f'''
import types

_code = compile(open({str(solution_path("softmax"))!r}).read()
                .split("@triton.jit")[0], "/tmp/notes.py", "exec")
_function = next(c for c in _code.co_consts if getattr(c, "co_name", "") == "softmax_python")
import math
softmax_python = types.FunctionType(_function, {{"math": math}})
'''
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.ok, rendered(result)
    assert any("learning.exercises.softmax.solution (softmax_python)" in name
               for name in result.borrowed), result.borrowed


@linux_only
@pytest.mark.parametrize("filtered_here", [
    True, pytest.param(False, marks=pytest.mark.exhaustive)], ids=["filter", "no-filter"])
@pytest.mark.compile_check
def test_a_stopped_compile_check_costs_seconds(tmp_path, mode, monkeypatch, filtered_here):
    # under the filter the learner's code cannot stop it; without, the check gives up on it
    if not mode.interpret:
        pytest.skip("the compile check follows an interpreter run")
    if filtered_here and containment.machine() not in containment._SYSCALLS:
        pytest.skip("the seccomp filter covers x86-64 and aarch64 Linux")
    if not filtered_here:
        monkeypatch.setenv(containment.SWITCH, "0")
        monkeypatch.delenv("LEARNING_FORKSERVER", raising=False)  # a fresh worker
    # only this test's compile check: other tests' checks may be compiling beside it
    mine = f"--grader-pid\0{os.getpid()}\0".encode()
    module = solution_text("softmax") + f'''

import os as _os
import signal as _signal

_right = softmax_triton


def softmax_triton(x):
    for _name in _os.listdir("/proc"):
        try:
            with open(f"/proc/{{_name}}/cmdline", "rb") as handle:
                command = handle.read()
            if b"learning.grader.gpu_compile" in command and {mine!r} in command:
                _os.kill(int(_name), _signal.SIGSTOP)
                print("stopped it")
        except (OSError, ValueError):
            pass
    return _right(x)
'''
    started = time.monotonic()
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    assert time.monotonic() - started < 60
    check = result.parts[0].compile_check
    if filtered_here:
        assert "stopped it" not in result.learner_output and check is not None and check.ran
    else:
        assert "stopped it" in result.learner_output
        assert check is not None and check.ran and not result.ok, check
        (unvouched,) = check.rejected
        assert unvouched.status == "unvouched" and "stopped" in unvouched.message, check


@linux_only
@pytest.mark.parametrize("signal_sent", [signal.SIGSTOP, signal.SIGKILL], ids=["stop", "kill"])
def test_a_compile_check_signalled_before_it_reads_the_module_vouches_for_nothing(
        tmp_path, signal_sent):
    # the worker runs the learner's code while the compile check's process is still starting:
    # a signal then is as likely the learner's as one after, and leaves the kernel unvouched
    module = tmp_path / "softmax.py"
    module.write_text(solution_text("softmax"))
    compiler = childproc.CompileRun(module)
    compiler.start()
    os.kill(compiler.process.pid, signal_sent)  # long before it has imported torch
    launch = gpu_compile.Launch("triton", "softmax_kernel", (("x_ptr", "*fp32"),), ())
    started = time.monotonic()
    results, note = compiler.finish([launch])
    assert time.monotonic() - started < 15
    assert note == "", note
    (result,) = results
    word = "stopped" if signal_sent == signal.SIGSTOP else f"signal {int(signal_sent)}"
    assert result.status == "unvouched" and word in result.message, result


@linux_only
def test_a_warm_process_whose_socket_is_removed_ends(tmp_path, warm_on):
    assert grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"]).ok
    server = warm_server_pid(warm_on)
    for connection in list(warm_process._connected.values()):
        connection.close()
    warm_process._connected.clear()
    (path,) = (warm_on / f"triton-course-{os.getuid()}").glob("*.sock")
    path.unlink()
    assert gone_within(server, 15), "a server nobody can reach idled on"


def test_the_course_guard_puts_back_the_manifest_and_start_up_files(tmp_path, monkeypatch):
    root = course_copy(tmp_path)
    site_folder = tmp_path / "site-packages"
    site_folder.mkdir()
    (site_folder / "existing.pth").write_text("import os\n", encoding="utf-8")
    monkeypatch.setattr(installed, "site_folders", lambda: [str(site_folder)])
    learner = tmp_path / "learner"
    learner.mkdir()
    guard = integrity.Guard(learner, root)
    manifest = root / "learning" / integrity.MANIFEST.name
    kept = manifest.read_bytes()
    manifest.write_bytes(kept + b"0" * 64 + b"  learning/__init__.py\n")
    (site_folder / "existing.pth").write_text("import os; os.system('x')\n", encoding="utf-8")
    (root / "learning" / "hidden").mkdir()
    (root / "learning" / "hidden" / "x.py").write_text("", encoding="utf-8")
    (learner / ".course-state").mkdir()
    (learner / ".course-state" / "set-aside").write_text("a file, not a folder")
    repairs = guard.repair(learner / ".course-state" / "set-aside")
    assert manifest.read_bytes() == kept
    assert (site_folder / "existing.pth").read_text() == "import os\n"
    assert not (root / "learning" / "hidden").exists()
    assert any("hidden" in entry and "now" in entry for entry in repairs.set_aside), repairs
    assert integrity.changed(root) == []


def test_emoji_codes_and_line_separators_from_the_learner_are_shown_as_written(tmp_path):
    module = solution_text("softmax") + '''

def softmax_python(values):
    print("done :thumbs_up:")
    raise ValueError("first\\u2028second\\x85third")
'''
    write_module(tmp_path, "softmax", module)
    done = subprocess.run([sys.executable, "-m", "learning.check", "softmax", "--part", "python",
                           "--root", str(tmp_path)], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="200", PYTHONPATH=course_pythonpath()),
                          timeout=300)
    assert "done :thumbs_up:" in done.stdout and "\U0001f44d" not in done.stdout
    assert "first\\u2028second\\x85third" in done.stdout
    assert "\u2028" not in done.stdout and "\x85" not in done.stdout


def test_an_output_far_larger_than_any_case_is_not_read(tmp_path):
    from learning.grader import summarise
    from learning.grader.tensors import TensorSpec

    largest = max(math.prod(a.shape) for e in registry.all_exercises() for p in e.parts
                  for c in p.cases for a in c.make_args() if isinstance(a, TensorSpec))
    assert largest * 8 < summarise.MAX_VALUES  # room for any case's output
    module = solution_text("softmax") + f'''

import torch as _torch


_calls = []


def softmax_triton(x):
    _calls.append(x)
    if len(_calls) > 1:  # the first case is the one looked at: the others need no 128 MB
        raise ValueError("not the first case")
    return _torch.zeros({summarise.MAX_VALUES + 1}, dtype=_torch.float32)
'''
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    verdict = result.parts[0].cases[0].verdict
    assert verdict.status == "failed" and "returned shape (33554433,)" in verdict.summary
    import torch

    returned = summarise.summarise(torch.zeros(summarise.MAX_VALUES + 1), (), ())
    assert returned.values is None and "more than any case's output" in returned.note
    listed = summarise.summarise([[0.0] * 1024] * (summarise.MAX_VALUES // 1024 + 1), (), ())
    assert listed.values is None and "more than any case's output" in listed.note


@filtered
def test_no_thread_of_the_check_can_be_stopped(tmp_path):
    # kill() takes any thread's id and stops the whole process: stop signals reach nothing
    # but the learner's own process
    threads = [int(t) for t in os.listdir(f"/proc/{os.getpid()}/task")]
    module = solution_text("softmax") + f'''

import os as _os
import signal as _signal

for _tid in {threads!r}:
    try:
        _os.kill(_tid, _signal.SIGSTOP)
        print("stopped", _tid)
    except OSError:
        pass
'''
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.ok and "stopped" not in result.learner_output


def test_the_reference_compiled_under_the_courses_own_file_name_is_noted(tmp_path):
    module = f'''
import types

_code = compile(open({str(solution_path("softmax"))!r}).read()
                .split("@triton.jit")[0], {str(COURSE_ROOT / "learning" / "notes.py")!r}, "exec")
_function = next(c for c in _code.co_consts if getattr(c, "co_name", "") == "softmax_python")
import math
softmax_python = types.FunctionType(_function, {{"math": math}})
'''
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.ok, rendered(result)
    assert any("learning.exercises.softmax.solution (softmax_python)" in name
               for name in result.borrowed), result.borrowed


def test_installed_code_the_grader_runs_is_watched_and_set_aside_when_changed(tmp_path,
                                                                             monkeypatch):
    # too large to keep a copy of (torch, numpy, rich): a change sets the file aside, so that
    # the next process fails to import it instead of running what the learner's code planted
    planted_in = tmp_path / "site" / "rich" / "__init__.py"
    monkeypatch.setattr(installed, "installed_prefixes", lambda: (f"{tmp_path / 'site'}/",))
    planted_in.parent.mkdir(parents=True)
    planted_in.write_text("VERSION = 1\n", encoding="utf-8")
    guard = integrity.Guard(tmp_path, module_files=(str(planted_in),))
    with open(planted_in, "a", encoding="utf-8") as handle:
        handle.write("print('planted')\n")
    os.utime(planted_in, (0, 0))  # the modification time set back: the change time stays
    repairs = guard.repair(tmp_path / ".course-state" / "set-aside")
    assert not planted_in.exists() and repairs.installed == [str(planted_in)]
    assert "reinstall its package" in repairs.note("aside")


def test_a_module_the_grader_has_not_imported_yet_is_watched_with_its_package(tmp_path,
                                                                            monkeypatch):
    # a package the check's process has loaded (rich) imports some of its modules only later,
    # while the result is shown (rich's table of character widths): one of those, changed by
    # the learner's code, would run in the check's own process, so every file of the package
    # is watched, not only those loaded
    site = tmp_path / "site"
    package = site / "lazypackage"
    (package / "tables").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    later = package / "tables" / "wide.py"
    later.write_text("WIDTH = 2\n", encoding="utf-8")
    monkeypatch.setattr(installed, "installed_prefixes", lambda: (f"{site}/",))
    monkeypatch.syspath_prepend(str(site))
    import lazypackage  # noqa: F401 - loaded, as rich is; lazypackage.tables.wide is not
    try:
        guard = integrity.Guard(tmp_path)
        with open(later, "a", encoding="utf-8") as handle:
            handle.write("print('planted')\n")
        repairs = guard.repair(tmp_path / ".course-state" / "set-aside")
    finally:
        sys.modules.pop("lazypackage", None)
    assert not later.exists() and repairs.installed == [str(later)]


def test_the_width_table_rich_loads_late_is_loaded_before_the_learners_code_runs(tmp_path):
    import rich.cells

    integrity.Guard(tmp_path)
    before = set(sys.modules)
    rich.cells.cell_len("\u00e9\u5b57 \u00fc")
    assert set(sys.modules) == before, set(sys.modules) - before


def test_another_checkouts_files_are_never_watched_or_set_aside(tmp_path, monkeypatch):
    # A warm process of another checkout of the course (or another version of it) lists its
    # own course files: a check of this one must neither watch them nor move them away, even
    # when they change while the learner's code runs (a maintainer's edit, say).
    other = tmp_path / "other-checkout" / "learning" / "exercises" / "elementwise.py"
    other.parent.mkdir(parents=True)
    other.write_text("EXERCISE = 1\n", encoding="utf-8")
    guard = integrity.Guard(tmp_path, module_files=(str(other),))
    other.write_text("EXERCISE = 2\n", encoding="utf-8")
    repairs = guard.repair(tmp_path / ".course-state" / "set-aside")
    assert other.read_text(encoding="utf-8") == "EXERCISE = 2\n" and not repairs.installed
    # and only this course's servers' lists are read at all
    sockets = Path(tempfile.mkdtemp(prefix="warm-", dir="/tmp"))  # a socket path is short
    monkeypatch.setenv(warm_process.SWITCH, "1")
    monkeypatch.setenv("TMPDIR", str(sockets))
    monkeypatch.setattr(tempfile, "tempdir", str(sockets))
    where = warm_process.folder()
    ours = where / f"{warm_process.key(True)}.sock{forkserver.MODULES_SUFFIX}"
    ours.write_text("/ours/torch/__init__.py\n", encoding="utf-8")
    (where / f"0123456789abcdef0123.sock{forkserver.MODULES_SUFFIX}").write_text(
        f"{other}\n", encoding="utf-8")
    try:
        assert warm_process.module_files() == ("/ours/torch/__init__.py",)
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def test_a_case_the_learners_process_reports_skipped_is_not_skipped_unless_due(tmp_path):
    # the learner's code runs in the process that reports each case: patched, its channel can
    # turn every failing case into "skipped", and a part whose few cases left pass would pass
    module = solution_text("softmax").replace("maximum = max(values)", "maximum = 0.0") + '''

from learning.grader.channel import Channel as _Channel
from learning.grader.returned import Skipped as _Skipped

_send = _Channel.send


def _quiet(self, *event):
    if event and event[0] == "done" and not event[2].startswith("single element"):
        event = (*event[:3], _Skipped("needs a CUDA GPU"))
    return _send(self, *event)


_Channel.send = _quiet
'''
    result = grade_text(tmp_path, "softmax", module, ["python"])
    (part,) = result.parts
    assert part.status == "failed" and not result.ok
    skipped = [c for c in part.cases if c.verdict.status == "skipped"]
    assert not skipped, [c.name for c in skipped]
    not_run = [c for c in part.cases if c.verdict.status == "not-run"]
    assert len(not_run) == len(part.cases) - 1
    assert all("reported this case skipped" in c.verdict.summary for c in not_run)


def test_a_bfloat16_case_is_skipped_only_where_the_start_up_said_the_gpu_lacks_it():
    # compiled on a GPU with bfloat16 (as the worker said before the learner's import), a
    # bfloat16 case reported skipped is not believed; on one without, it is
    from learning.grader import judging
    from learning.grader.worker_events import Heard

    part = registry.find("softmax").part("triton")
    (bf16,) = [c for c in part.cases if c.name == "bfloat16"]
    (plain,) = [c for c in part.cases if c.name == "width 3"]
    for said, believed in ((("mode", False, "CUDA GPU found", True), False),
                           (("mode", False, "CUDA GPU found", False), True),
                           (("mode", False, "CUDA GPU found"), False)):  # an older worker
        heard = Heard()
        heard.take(said)
        assert judging._may_skip(heard, bf16) is believed, said
        assert not judging._may_skip(heard, plain)
    heard = Heard()
    heard.take(("mode", False, "CUDA GPU found", False))
    heard.phase = "cases"
    heard.take(("mode", False, "CUDA GPU found", True))  # after the import: not believed
    assert judging._may_skip(heard, bf16)


@linux_only
def test_a_warm_process_killed_mid_check_costs_a_rerun_not_a_grade(tmp_path, warm_on):
    import threading

    from learning.grader import part_runs

    if not part_runs._filtered():
        pytest.skip("without the filter a lost warm process is judged as it stands")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    assert grade_text(first, "softmax", solution_text("softmax"), ["python"]).ok
    server = warm_server_pid(warm_on)
    assert server > 0  # os.kill(0, ...) would end this test's whole process group
    marker = tmp_path / "started"
    module = solution_text("softmax") + f'''

import os as _os
import time as _time

_right = softmax_python


def softmax_python(values):
    if not _os.path.exists({str(marker)!r}):  # only the first run of the first case waits
        with open({str(marker)!r}, "w") as handle:
            handle.write("started")
        _time.sleep(5)
    return _right(values)
'''

    def kill_the_server():  # what the out-of-memory killer might do
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(server, signal.SIGKILL)

    killer = threading.Thread(target=kill_the_server)
    killer.start()
    result = grade_text(second, "softmax", module, ["python"])
    killer.join()
    assert result.ok, rendered(result)
    assert any("went away during the check" in note for note in result.notes), result.notes


def test_a_set_aside_folder_or_state_folder_turned_into_a_link_leads_nowhere(tmp_path):
    # a link in place of .course-state/set-aside would carry what is set aside (a .pth, say)
    # wherever it points; one in place of .course-state would take the grades put back
    from learning.grader import nearby

    elsewhere = tmp_path / "site-packages"
    elsewhere.mkdir()
    learner = tmp_path / "learner"
    (learner / ".course-state").mkdir(parents=True)
    (learner / ".course-state" / "set-aside").symlink_to(elsewhere)
    planted = learner / "zz.pth"
    planted.write_text("import os\n")
    moved = nearby.move_aside(planted, learner / ".course-state" / "set-aside")
    assert not list(elsewhere.iterdir()) and not planted.exists()
    assert "(now " in moved and str(elsewhere) not in moved
    key = learner / ".course-state" / "key"
    key.write_bytes(b"k")
    snapshot = nearby.Snapshot(tmp_path / "course", learner)
    os.rename(learner / ".course-state", tmp_path / "moved")
    (learner / ".course-state").symlink_to(tmp_path / "moved")
    changes = snapshot.repair(tmp_path / "aside")
    state_folder = learner / ".course-state"
    assert state_folder.is_dir() and not state_folder.is_symlink()
    assert key.read_bytes() == b"k"
    assert any("a link or file in place of the folder" in s for s in changes.set_aside)


def test_a_compiled_cache_planted_beside_the_module_is_never_run(tmp_path):
    # an unchecked hash-based .pyc is used whatever its source holds: planted with the
    # reference's code beside an untouched stub, it would pass, and hide every later edit
    import importlib.util
    import py_compile

    learner = tmp_path / "learner"
    learner.mkdir()
    module = write_module(learner, "softmax", stub_text("softmax")) / "softmax.py"
    answer = tmp_path / "answer.py"
    answer.write_text(PYTHON_PART_ONLY, encoding="utf-8")
    py_compile.compile(str(answer), cfile=importlib.util.cache_from_source(str(module)),
                       dfile=str(module),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    result = grade_text(learner, "softmax", stub_text("softmax"), ["python"])
    assert result.parts[0].status == "not-started", rendered(result)


def test_a_compiled_cache_of_installed_code_changed_is_set_aside(tmp_path, monkeypatch):
    # Python runs a library's cache in place of its source: one the learner's code rewrote
    # (a header copied from the real one makes it look current) must not run in the next check.
    # A library of the test's own stands in for an installed one loaded by the grader.
    import importlib.util
    import py_compile

    library = tmp_path / "site" / "library.py"
    library.parent.mkdir()
    library.write_text("VALUE = 1\n")
    cache = Path(importlib.util.cache_from_source(str(library)))
    py_compile.compile(str(library), cfile=str(cache))
    monkeypatch.setattr(installed, "loaded_files", lambda: {str(library)})
    guard = integrity.Guard(tmp_path)
    cache.write_bytes(b"not a compiled module")
    repairs = guard.repair(tmp_path / "aside")
    assert not cache.exists() and library.read_text() == "VALUE = 1\n"
    assert "compiled caches of installed code" in repairs.note("aside")
    # a cache made where there was none is set aside too
    guard = integrity.Guard(tmp_path)
    cache.write_bytes(b"not a compiled module either")
    assert guard.repair(tmp_path / "aside").compiled and not cache.exists()


def test_a_git_folder_swapped_for_a_file_that_leads_elsewhere_is_put_back(tmp_path):
    # .git renamed, and a .git file put in its place that leads to a git folder whose config
    # runs a program (core.fsmonitor): the original comes back, the file goes
    from learning.grader import nearby

    learner = tmp_path / "learner"
    (learner / ".git" / "hooks").mkdir(parents=True)
    (learner / ".git" / "config").write_text("[core]\n")
    snapshot = nearby.Snapshot(tmp_path / "course", learner)
    evil = tmp_path / "evil-git"
    shutil.copytree(learner / ".git", evil)
    (evil / "config").write_text("[core]\n\tfsmonitor = /tmp/planted.sh\n")
    os.rename(learner / ".git", learner / ".git-old")
    (learner / ".git").write_text(f"gitdir: {evil}\n")
    changes = snapshot.repair(tmp_path / "aside")
    assert (learner / ".git").is_dir() and not (learner / ".git-old").exists()
    assert (learner / ".git" / "config").read_text() == "[core]\n"
    assert any(".git, replaced" in s and "the original was put back" in s
               for s in changes.set_aside), changes.set_aside


def test_a_pass_with_the_reference_loaded_is_not_recorded(tmp_path, capsys):
    write_module(tmp_path, "softmax", "from learning.exercises.softmax.solution import "
                 "softmax_python\n")
    # its exit status says so too: a script that trusts it must not take the pass for theirs
    assert check.main(["softmax", "--part", "python", "--root", str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "so no part's pass is recorded" in out and "Well done" not in out
    assert "Next: write softmax.py without the course's reference code" in out
    assert check.main(["softmax", "--part", "python", "--root", str(tmp_path), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] and not document["recorded"] and document["borrowed"]
    assert state.load(tmp_path).grade("softmax", "python") is None
    write_module(tmp_path, "softmax", solution_text("softmax"))  # the learner's own, passing
    assert check.main(["softmax", "--part", "python", "--root", str(tmp_path)]) == 0
    assert state.load(tmp_path).grade("softmax", "python").status == "passed"


@pytest.mark.compile_check
@linux_only
def test_the_compile_check_runs_the_learners_statements_only_after_every_run(tmp_path, mode):
    # run earlier, a thread of the module's, started in the compile check's process, could
    # change the grader's files while the check still reads them: the statements run only
    # once the launches are in (the compile check's own frame holds them by then)
    if not mode.interpret:
        pytest.skip("the compile check follows an interpreter run")
    marker = tmp_path / "when.txt"
    module = solution_text("softmax") + f'''

import sys as _sys


@(lambda function: function)  # decorated: the compile check's partial import runs it too
def _note_when():
    frame, received = _sys._getframe(), False
    while frame is not None:
        if frame.f_code.co_name == "run" and "gpu_compile" in frame.f_code.co_filename:
            received = "launches" in frame.f_locals
        frame = frame.f_back
    with open({str(marker)!r}, "w") as handle:
        handle.write("after the runs" if received else "during the runs")


_noted = _note_when() if "learning.grader.gpu_compile" in " ".join(_sys.orig_argv) else None
'''
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    assert result.ok, rendered(result)
    assert marker.read_text() == "after the runs"


@pytest.mark.compile_check
def test_garbage_on_the_compile_checks_pipe_gets_a_note_not_a_traceback(tmp_path, mode):
    # the compile check's process runs the learner's statements too, with its event pipe open:
    # what they write there is not trusted to be the course's events
    if not mode.interpret:
        pytest.skip("the compile check follows an interpreter run")
    for garbage in ('("compiled", 5)', 'b"not a pickle"', '("finished", 1, 2)'):
        module = solution_text("softmax") + f'''

_GARBLE = """
import os, pickle, struct, sys
if "learning.grader.gpu_compile" in " ".join(sys.orig_argv):
    payload = {garbage}
    payload = payload if isinstance(payload, bytes) else pickle.dumps(payload)
    os.write(int(sys.argv[sys.argv.index("--fd") + 1]),
             struct.pack("<Q", len(payload)) + payload)
"""
_garbled = exec(_GARBLE)  # an assignment: the compile check's partial import runs it
'''
        result = grade_text(tmp_path, "softmax", module, ["triton"])
        check = result.parts[0].compile_check
        # and a check that could not vouch for the kernels keeps the part from passing
        assert not result.ok and check is not None and check.ran, rendered(result)
        (unvouched,) = check.rejected
        assert unvouched.status == "unvouched", garbage
        assert "not one of the course's events" in unvouched.message, unvouched.message


@linux_only
def test_a_socket_that_accepts_no_connection_costs_seconds_not_the_check(tmp_path):
    # A listener whose queue is full never answers a connect: looking through the warm
    # folder's sockets (for a server to use, or stale ones to retire) gives up on it.
    import threading

    from learning.grader import warm

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(str(tmp_path / "full.sock"))
    listener.listen(0)
    fillers = []
    for _ in range(3):  # fill the queue; the connects that do not fit are refused at once
        filler = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        filler.setblocking(False)
        with contextlib.suppress(OSError):
            filler.connect(str(tmp_path / "full.sock"))
        fillers.append(filler)
    done = []
    looking = threading.Thread(target=lambda: done.append(
        (warm._connect(tmp_path / "full.sock"),
         warm._retire_stale(tmp_path, tmp_path / "fresh.sock", False))), daemon=True)
    looking.start()
    looking.join(4 * warm.CONNECT_SECONDS + 5)
    try:
        assert done == [(None, None)], "a socket that accepts nothing held the check"
    finally:
        for s in (listener, *fillers):
            s.close()


def test_a_server_whose_key_a_module_made_stale_ends_once_replaced(tmp_path, warm_on):
    # the key names the course's files by their times: a module that touches one makes every
    # later check start a fresh server, and the one before, which no check can reach again,
    # must not idle on holding torch (one more each time such a module is checked). A copy of
    # the course is touched, not the suite's own: a key that changed under them would make the
    # warm tests running beside this one start servers of their own.
    root = course_copy(tmp_path)
    folder = tmp_path / "learner"
    folder.mkdir()
    warm = {"LEARNING_WARM": "1", "TMPDIR": str(warm_on)}
    write_module(folder, "softmax", solution_text("softmax"))
    assert run_check(root, folder, env=warm).returncode == 0
    first = warm_server_pid(warm_on)
    touched = root / "triton_kernels.py"
    write_module(folder, "softmax", solution_text("softmax")
                 + f"\n\nimport os as _os\n_os.utime({str(touched)!r})\n")
    done = run_check(root, folder, env=warm)
    assert done.returncode == 0, done.stdout + done.stderr
    write_module(folder, "softmax", solution_text("softmax"))
    done = run_check(root, folder, env=warm)
    assert done.returncode == 0, done.stdout + done.stderr
    assert gone_within(first, 10), "the server of the stale key idled on"
    assert warm_server_pid(warm_on) not in (0, first)  # the one socket left: a fresh server's


def test_a_course_folder_renamed_by_the_module_is_put_back_and_told(tmp_path):
    # renamed mid-check, every path the guard keeps leads nowhere: the check would pass and
    # say nothing, and the learner's next command would find no course where it was
    root = course_copy(tmp_path)
    folder = tmp_path / "learner"
    folder.mkdir()
    write_module(folder, "softmax", solution_text("softmax") + f'''

import os as _os
_os.rename({str(root)!r}, {str(tmp_path / "elsewhere")!r})
''')
    done = run_check(root, folder)
    text = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout + done.stderr
    assert root.is_dir() and not (tmp_path / "elsewhere").exists()
    assert f"{root} (to elsewhere) was renamed and was put back" in text, text
    write_module(folder, "softmax", WRONG)
    assert run_check(root, folder).returncode == 1


@pytest.mark.parametrize("how", ["removed", "renamed", "made a link"])
def test_a_course_subfolder_the_module_removes_is_made_again_and_told(tmp_path, how):
    # Files are put back where they were; with their folder gone they had nowhere to go, and
    # every later command of the course failed on an import
    root = course_copy(tmp_path)
    folder = tmp_path / "learner"
    folder.mkdir()
    target = root / "learning" / "exercises" / "softmax"
    attack = {
        "removed": f"_shutil.rmtree({str(target)!r})",
        "renamed": f"_os.rename({str(target)!r}, {str(target) + '_old'!r})",
        "made a link": f"_shutil.copytree({str(target)!r}, {str(tmp_path / 'evil')!r}); "
                       f"_shutil.rmtree({str(target)!r}); "
                       f"_os.symlink({str(tmp_path / 'evil')!r}, {str(target)!r})",
    }[how]
    write_module(folder, "elementwise", solution_text("elementwise") + f"""

import os as _os
import shutil as _shutil
{attack}
""")
    def check(name):
        environment = dict(os.environ, PYTHONPATH=str(root), COLUMNS="400", LEARNING_WARM="0",
                           LEARNING_FORKSERVER="0")
        return subprocess.run([sys.executable, "-m", "learning.check", name, "--part", "python",
                               "--root", str(folder)], cwd=root, env=environment,
                              capture_output=True, text=True, timeout=300)

    done = check("elementwise")
    text = " ".join(done.stdout.split())
    assert target.is_dir() and not target.is_symlink(), done.stdout + done.stderr
    assert "learning/exercises/softmax" in text and "were made again" in text, text
    assert not (root / "learning" / "exercises" / "softmax_old").exists()
    # the course works after it: the untouched stub of another exercise is not started
    write_module(folder, "softmax", (root / "learning" / "exercises" / "softmax" / "stub.py")
                 .read_text(encoding="utf-8"))
    done = check("softmax")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert "not started" in done.stdout, done.stdout + done.stderr
    write_module(folder, "elementwise", solution_text("elementwise"))
    assert check("elementwise").returncode == 0


@pytest.fixture
def cold_worker_library(tmp_path, monkeypatch) -> Path:
    """A library of the test's own standing in for installed code (torch, triton) that only
    the check's worker loads: in the worker's user site-packages, loaded at its start-up
    (sitecustomize), with no warm process; the check's own process never loads it."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site_folder = tmp_path / "user" / "lib" / version / "site-packages"
    site_folder.mkdir(parents=True)
    library = site_folder / "sentinel_library.py"
    library.write_text("VALUE = 1\n", encoding="utf-8")
    (site_folder / "sitecustomize.py").write_text("import sentinel_library  # noqa\n",
                                                  encoding="utf-8")
    monkeypatch.setenv("PYTHONUSERBASE", str(tmp_path / "user"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site_folder), course_pythonpath()]))
    monkeypatch.setenv(warm_process.SWITCH, "0")
    monkeypatch.setattr(forkserver, "enabled", lambda: False)  # a worker of its own start-up
    monkeypatch.setattr(installed, "installed_prefixes", lambda: (f"{site_folder}/",))
    return library


def test_installed_code_a_cold_worker_loaded_and_the_module_changed_is_set_aside(
        tmp_path, cold_worker_library):
    # With no warm process, the check's own process never loads what its worker runs (torch,
    # triton): the worker says, before the learner's code runs, what it loaded.
    library = cold_worker_library
    folder = tmp_path / "learner"
    folder.mkdir()
    planted = (f"with open({str(library)!r}, 'a') as _handle:\n"
               "    _handle.write('print(\"planted\")\\n')\n" + PYTHON_PART_ONLY)
    result = grade_text(folder, "softmax", planted, ["python"])
    assert not library.exists(), "the changed library was left where the next worker runs it"
    note = " ".join(" ".join(result.notes).split())
    assert "installed code the grader runs changed" in note and "sentinel_library" in note, note


@linux_only
def test_a_shared_library_a_cold_worker_mapped_and_the_module_rewrote_is_set_aside(
        tmp_path, cold_worker_library):
    # torch's libc10.so, numpy's BLAS: no module names them, yet every later process that
    # loads one runs it as the learner's code left it (rewritten in place, the same size: a
    # cold check after it failed to import torch). What the worker has mapped is watched.
    library = cold_worker_library.with_name("sentinel_shared.so")
    library.write_bytes(b"\x7fELF" + bytes(4092))
    starts = cold_worker_library.with_name("sitecustomize.py")
    starts.write_text(starts.read_text(encoding="utf-8") + (
        "import mmap as _mmap\n"
        f"with open({str(library)!r}, 'rb') as _file:\n"
        "    _held = _mmap.mmap(_file.fileno(), 0, access=_mmap.ACCESS_READ)\n"),
        encoding="utf-8")
    folder = tmp_path / "learner"
    folder.mkdir()
    planted = (f"with open({str(library)!r}, 'r+b') as _handle:\n"
               "    _handle.write(b'\\0\\0\\0\\0')\n" + PYTHON_PART_ONLY)
    result = grade_text(folder, "softmax", planted, ["python"])
    assert not library.exists(), "the rewritten library was left where the next worker maps it"
    note = " ".join(" ".join(result.notes).split())
    assert "installed code the grader runs changed" in note and "sentinel_shared" in note, note


@linux_only
def test_a_warm_process_that_mapped_a_library_the_module_rewrote_is_ended(tmp_path, warm_on,
                                                                          monkeypatch):
    # a library rewritten in place is what a process that has it mapped runs from then on:
    # the warm process, and every worker it would fork for later checks. It is ended, and
    # the next check starts a fresh one (which no longer finds the library, set aside).
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site_folder = tmp_path / "user" / "lib" / version / "site-packages"
    site_folder.mkdir(parents=True)
    library = site_folder / "sentinel_shared.so"
    library.write_bytes(b"\x7fELF" + bytes(4092))
    (site_folder / "sitecustomize.py").write_text(
        "import mmap as _mmap\n"
        f"with open({str(library)!r}, 'rb') as _file:\n"
        "    _held = _mmap.mmap(_file.fileno(), 0, access=_mmap.ACCESS_READ)\n",
        encoding="utf-8")
    monkeypatch.setenv("PYTHONUSERBASE", str(tmp_path / "user"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site_folder), course_pythonpath()]))
    monkeypatch.setattr(installed, "installed_prefixes", lambda: (f"{site_folder}/",))
    folder = tmp_path / "learner"
    folder.mkdir()
    planted = (f"with open({str(library)!r}, 'r+b') as _handle:\n"
               "    _handle.write(b'\\0\\0\\0\\0')\n" + PYTHON_PART_ONLY)
    sockets = warm_on / f"triton-course-{os.getuid()}"
    result = grade_text(folder, "softmax", planted, ["python"])
    assert FORKED in [what for _, what in result.timeline]
    assert not library.exists(), "the rewritten library was left where the next worker maps it"
    note = " ".join(" ".join(result.notes).split())
    assert "sentinel_shared" in note and "the warm process, which had that code loaded, was " \
        "ended" in note, note
    assert not list(sockets.glob("*.sock")), "the warm process's socket is still offered"


def test_a_compiled_cache_of_what_a_cold_worker_loaded_is_set_aside_when_made(
        tmp_path, cold_worker_library):
    # Python runs a library's compiled cache in place of its source: one the learner's code
    # made (its header copied from a real one would make it look current) is set aside.
    import importlib.util

    cache = Path(importlib.util.cache_from_source(str(cold_worker_library)))
    folder = tmp_path / "learner"
    folder.mkdir()
    planted = (f"import os as _os\n_os.makedirs({str(cache.parent)!r}, exist_ok=True)\n"
               f"open({str(cache)!r}, 'wb').write(b'planted')\n" + PYTHON_PART_ONLY)
    result = grade_text(folder, "softmax", planted, ["python"])
    assert not cache.exists(), "the planted cache was left where the next worker runs it"
    assert "compiled caches of installed code" in " ".join(result.notes), result.notes


@linux_only
def test_the_worker_goes_on_to_the_learners_code_only_once_the_grader_read_its_words():
    # A process can open its own pipe again for reading (/proc/self/fd/N) and take out what
    # the grader has not read yet: what the worker said before the learner's code ran (the
    # stamps of the installed files, the phase) is read by the grader first.
    from learning.grader.channel import Channel

    read_end, write_end = os.pipe()
    channel = Channel(write_end)
    channel.send("installed", {"/a/file.py": (1, 2, 3)})
    assert not channel.drained(seconds=0.2)  # nobody read it
    stolen = os.open(f"/proc/self/fd/{write_end}", os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert os.read(stolen, 1 << 16)  # what the learner's code could take, had it run
    finally:
        os.close(stolen)
    channel.send("importing")
    started = time.monotonic()
    reader = threading.Timer(0.3, lambda: os.read(read_end, 1 << 16))
    reader.start()
    assert channel.drained(seconds=5.0) and time.monotonic() - started >= 0.25
    reader.join()
    os.close(read_end)


# A process of the learner's own computes out of the audit hook's sight: one forked keeps the
# hook and says what it saw; a Python started afresh (or a shell, which may start one) is noted.
_SOLUTION = str(solution_path("softmax"))
_CHILD = f"open({_SOLUTION!r}).read(); print(0.5)"
STARTS_A_PROCESS = {
    "subprocess": f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {_CHILD!r}])\n",
    "os.system": f"import os, sys\nos.system(sys.executable + ' -c ' + repr({_CHILD!r}))\n",
    "posix_spawn": f"import os, sys\n_pid = os.posix_spawn(sys.executable, ['python', '-c', "
                   f"{_CHILD!r}], dict(os.environ))\nos.waitpid(_pid, 0)\n",
    "a copy of python, in a shell": "import os, shutil, subprocess, sys, tempfile\n"
                                    "_copy = os.path.join(tempfile.mkdtemp(), 'calc')\n"
                                    "shutil.copy(os.path.realpath(sys.executable), _copy)\n"
                                    f"subprocess.run([_copy, '-c', {_CHILD!r}])\n",
    "a script whose first line names python": (
        "import os, subprocess, sys, tempfile\n"
        "_script = os.path.join(tempfile.mkdtemp(), 'calc')\n"
        "with open(_script, 'w') as _f:\n"
        f"    _f.write('#!' + sys.executable + '\\n' + {_CHILD!r})\n"
        "os.chmod(_script, 0o755)\n"
        "subprocess.run([_script])\n"),
    "multiprocessing, spawned": "import multiprocessing\n"
                                "_p = multiprocessing.get_context('spawn').Process(target=print)\n"
                                "_p.start()\n_p.join()\n",
    "multiprocessing, forked": "import multiprocessing\n"
                               "def _borrow():\n"
                               "    import learning.exercises.softmax.solution  # noqa\n"
                               "_p = multiprocessing.get_context('fork').Process(target=_borrow)\n"
                               "_p.start()\n_p.join()\n",
}


# The original of the function multiprocessing starts programs with, taken past the check's
# wrapper of it: dug out of the wrapper, or loaded afresh; then a Python started with it
_UNWRAPPED_START = (
    "import os, sys\n"
    "def _run(fork_exec):\n"
    "    import _posixsubprocess, multiprocessing.util as _u\n"
    "    _kept = _posixsubprocess.fork_exec\n"
    "    _posixsubprocess.fork_exec = fork_exec\n"
    "    try:\n"
    f"        _pid = _u.spawnv_passfds(os.fsencode(sys.executable), [sys.executable, '-c', "
    f"{_CHILD!r}], [])\n"
    "        os.waitpid(_pid, 0)\n"
    "    finally:\n"
    "        _posixsubprocess.fork_exec = _kept\n")
STARTS_PAST_THE_WRAPPER = {
    "dug out of the wrapper": _UNWRAPPED_START + (
        "import _posixsubprocess as _p, gc\n"
        "_held = [c.cell_contents for c in _p.fork_exec.__closure__]\n"
        "_original = [v for h in _held if type(h).__name__ == 'generator'\n"
        "             for v in h.gi_frame.f_locals.values() if callable(v)] or "
        "[h for h in _held if callable(h)]\n"
        "_run(_original[0])\n"),
    "through the collector": _UNWRAPPED_START + (
        "import _posixsubprocess as _p, gc\n"
        "_held = [c.cell_contents for c in _p.fork_exec.__closure__]\n"
        "_original = [v for h in _held for v in gc.get_referents(h) "
        "if getattr(v, '__name__', '') == 'fork_exec' and v is not _p.fork_exec]\n"
        "_run(_original[0])\n"),
    # where it is built into Python its fresh import raises no event: what it leaves in
    # sys.modules is looked at once the cases ran
    "replaced in sys.modules": "import sys, types\n"
                               "sys.modules['_posixsubprocess'] = types.ModuleType('x')\n",
    "loaded afresh": _UNWRAPPED_START + (
        "import importlib\n"
        "sys.modules.pop('_posixsubprocess')\n"
        "_run(importlib.import_module('_posixsubprocess').fork_exec)\n"),
}


@linux_only
@pytest.mark.parametrize("route", sorted(STARTS_PAST_THE_WRAPPER))
def test_a_program_started_past_the_checks_wrapper_is_noted(tmp_path, route):
    result = grade_text(tmp_path, "softmax", STARTS_PAST_THE_WRAPPER[route] + PYTHON_PART_ONLY,
                        ["python"])
    assert result.ok, rendered(result)
    assert any(n.startswith(borrowed.STARTED) for n in result.borrowed), result.borrowed


@linux_only
@pytest.mark.parametrize("route", sorted(STARTS_A_PROCESS))
def test_a_python_the_module_starts_is_noted_and_its_pass_not_recorded(tmp_path, route):
    result = grade_text(tmp_path, "softmax", STARTS_A_PROCESS[route] + PYTHON_PART_ONLY,
                        ["python"])
    assert result.ok, rendered(result)
    assert result.borrowed, route
    line = " ".join(rendered(result).split())
    assert "so no part's pass is recorded" in line, line


# The lesson names softmax's steps and the variables that hold them: a learner's own helper
# module, beside theirs, may match the reference's bytecode as their own file may.
OWN_STEPS = """import math


def softmax_steps(row):
    maximum = max(row)
    shifted = [v - maximum for v in row]
    numerator = [math.exp(s) for s in shifted]
    denominator = sum(numerator)
    output = [n / denominator for n in numerator]
    return output
"""


@pytest.mark.parametrize("where", ["mysteps", "mine.steps"])
def test_a_helper_module_of_the_learners_own_is_not_taken_for_a_copy(tmp_path, where):
    # beside their file, or in a package of theirs below it
    path = tmp_path / (where.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OWN_STEPS, encoding="utf-8")
    time.sleep(0.1)  # written before the check, as a learner's files are
    module = f"from {where} import softmax_steps\n\n\ndef softmax_python(values):\n" \
             "    return softmax_steps(values)\n"
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.ok and result.borrowed == [], result.borrowed


def test_a_copy_of_the_reference_written_into_a_package_during_the_check_is_noted(tmp_path):
    # a file that appeared while the check ran is no module of the learner's own
    (tmp_path / "mine").mkdir()
    module = f"""import importlib, os, shutil
_here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mine", "steps.py")
shutil.copyfile({str(solution_path("softmax"))!r}, _here)
softmax_python = importlib.import_module("mine.steps").softmax_python
"""
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert any("copied into steps.py" in name for name in result.borrowed), result.borrowed


def test_a_hard_link_to_the_reference_made_beside_the_module_is_noted(tmp_path):
    # its own path, in the learner's folder, made while the check runs: found by its inode
    module = f"""import importlib.util, os
_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_notes.py")
if not os.path.exists(_path):
    os.link({str(solution_path("softmax"))!r}, _path)
_spec = importlib.util.spec_from_file_location("_notes", _path)
_notes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_notes)
softmax_python = _notes.softmax_python
"""
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert "learning.exercises.softmax.solution" in result.borrowed, result.borrowed


def test_a_program_the_module_starts_is_noted_whatever_it_is_called(tmp_path):
    module = "import subprocess\nsubprocess.run(['true'])\n" + PYTHON_PART_ONLY
    result = grade_text(tmp_path, "softmax", module, ["python"])
    assert result.ok and any(n.startswith(borrowed.STARTED) for n in result.borrowed), \
        result.borrowed


# What Triton does on a GPU machine the first time it launches a kernel: it builds its launcher
# with the machine's compiler, told where Python's headers are, and ``platform`` asks ``file``
# about the Python program. Neither runs Python; both had been taken for it, and no pass on a
# GPU was recorded.
LIBRARY_STARTS = """
import shutil, subprocess, sys
_compiler = shutil.which('cc') or shutil.which('gcc')
if _compiler:
    subprocess.run([_compiler, '--version', '-O3', '-I/usr/include/python3.12',
                    '-lpython3.12'], capture_output=True)
if shutil.which('file'):
    subprocess.run(['file', '-b', sys.executable], capture_output=True)
"""


@linux_only
def test_the_tools_libraries_start_are_not_taken_for_python(tmp_path):
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("file")):
        pytest.skip("no C compiler and no file program on this machine")
    result = grade_text(tmp_path, "softmax", LIBRARY_STARTS + PYTHON_PART_ONLY, ["python"])
    assert result.ok and result.borrowed == [], result.borrowed


def _tool(folder: Path, name: str) -> str:
    """A program named ``name`` that does nothing (a copy of ``true``)."""
    path = folder / name
    shutil.copy(shutil.which("true"), path)
    return str(path)


@linux_only
def test_which_started_programs_run_code_out_of_sight(tmp_path):
    gcc, file = _tool(tmp_path, "gcc"), _tool(tmp_path, "file")
    tools = frozenset(os.path.realpath(path) for path in (gcc, file))
    shell_as_calc = tmp_path / "calc"
    shell_as_calc.symlink_to(shutil.which("sh"))
    script = tmp_path / "helper"
    script.write_text(f"#!{gcc}\n", encoding="utf-8")
    script.chmod(0o755)
    cases = {  # argv: whether it may run code out of the hook's sight
        (gcc, "x.c", "-I/usr/include/python3.12", "-lpython3.12", "-o", "x.so"): False,
        (file, "-b", "/usr/bin/python3.12"): False,
        (gcc, "-wrapper", "python3,-c,print(1)", "x.c"): True,
        (gcc, "--wrapper=python3", "x.c"): True,
        (gcc, f"-B{tmp_path}", "x.c"): True,
        (gcc, f"@{tmp_path / 'options'}", "x.c"): True,
        (gcc, "-Wl,-plugin,evil.so", "x.c"): True,  # handed on to the linker
        (gcc, "-plugin", "evil.so", "-o", "a"): True,
        ("perl", "-e", "exec 'python3'"): True,  # not a library's tool: any program counts
        (str(shell_as_calc), "-c", "python3"): True,  # a shell by another name
        (str(script), "x"): True,  # a script, whatever its first line names
        (sys.executable, "-c", "print(1)"): True,
        ("ls", "-l", "/"): True,
    }
    for argv, runs in cases.items():
        assert borrowed._unwatched(argv[0], list(argv), tools) is runs, argv
    assert borrowed._unwatched(3, ["python3"], tools)  # an open file, exec'ed by number


@linux_only
def test_a_library_tool_given_a_preload_counts_as_any_program():
    if not shutil.which("uname"):
        pytest.skip("no uname on this machine")
    watch = borrowed.Watch(os.path.join(tempfile.gettempdir(), "nowhere.py"))
    plain = (None, [shutil.which("uname")], None, None)
    watch._started("subprocess.Popen", plain)
    assert watch.started == set()
    preloaded = dict(os.environ, LD_PRELOAD="/tmp/library-of-the-learner.so")
    watch._started("subprocess.Popen", (*plain[:3], preloaded))
    assert len(watch.started) == 1, watch.started
    # a compiler finds its assembler on the PATH it is given: one of the learner's counts
    watch.started.clear()
    watch._started("subprocess.Popen", (*plain[:3], dict(os.environ, PATH="/tmp/theirs")))
    assert len(watch.started) == 1, watch.started


@linux_only
def test_a_tools_name_found_on_a_path_of_the_learners_is_not_the_tool(tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("no gcc on this machine")
    tools = borrowed._library_tools()
    _tool(tmp_path, "gcc")
    starts = {  # each event as the start of ['gcc', 'x.c'] with PATH set to tmp_path raises it
        "subprocess.Popen": (None, ["gcc", "x.c"], None, {"PATH": str(tmp_path)}),
        "learning.fork_exec": (["gcc", "x.c"], [str(tmp_path / "gcc"), shutil.which("gcc")]),
        "os.posix_spawn": ("gcc", ["gcc", "x.c"], {"PATH": str(tmp_path)}),
    }
    for event, args in starts.items():
        program, argv = borrowed._STARTS[event](args)
        assert borrowed._unwatched(program, argv, tools), event
    program, argv = borrowed._STARTS["subprocess.Popen"]((None, ["gcc", "x.c"], None, None))
    assert not borrowed._unwatched(program, argv, tools)  # the machine's own


TORCH_PASSED_AS_A_KERNEL = '''
import torch
from learning.grader import calls as _calls

_calls.LaunchCounter.taken = lambda self: 1  # "a kernel ran"
_calls.LaunchCounter.computed_by_torch = lambda self, result, made: ""
_calls.LaunchCounter.changed_since_launch = lambda self, result: ()


def softmax_triton(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
'''


_DO_NOTHING_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)


'''
# torch's answer put between two launches of a kernel that stores nothing: the walk back from
# the result stops at the memory the launches were given, and the last launch left torch's
# values there
TORCH_BETWEEN_LAUNCHES = _DO_NOTHING_KERNEL + '''
def softmax_triton(x):
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    launch = softmax_kernel[(x.shape[0],)]
    block = triton.next_power_of_2(x.shape[1])
    launch(output, x, output.stride(0), x.stride(0), x.shape[1], BLOCK=block)
    output.copy_(torch.softmax(x.float(), dim=-1))
    launch(output, x, output.stride(0), x.stride(0), x.shape[1], BLOCK=block)
    return output
'''


def test_torchs_answer_written_between_two_launches_is_not_the_kernels(tmp_path):
    result = grade_text(tmp_path, "softmax", TORCH_BETWEEN_LAUNCHES, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"written-by-torch"}, keys
    assert "what torch's softmax computed was written into the memory of the tensor " \
        "returned" in \
        " ".join(rendered(result).split())


def test_only_torchs_computations_written_into_a_kernels_memory_are_looked_at():
    # a kernel working in place on a copy of its input starts from torch's clone: no claim
    # (its stores may leave some case's bits as they were); torch.softmax copied in is one
    from learning.grader import lineage

    clone_of_input = {10: ("clone", [1])}
    softmax_copied_in = {10: ("copy_", [20]), 20: ("softmax", [1])}
    scaled_in_place = {10: ("mul_", [10, 1])}
    assert lineage.computed_into(10, clone_of_input) == ""
    assert lineage.computed_into(10, {10: ("empty_like", [1])}) == ""
    assert lineage.computed_into(10, softmax_copied_in) == "softmax"
    assert lineage.computed_into(10, scaled_in_place) == "mul"  # (in place: by its function)


# torch's answer put in the output's own storage, just past the part returned: the kernel
# fetches it by an offset that no shape or stride it was given says
ANSWER_PAST_THE_VIEW = """
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, out_stride, in_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=0.0).to(tl.float32)
    hidden = out_ptr + tl.num_programs(0) * out_stride + row * out_stride + cols
    answer = tl.load(hidden, mask=mask, other=0.0)
    tl.store(out_ptr + row * out_stride + cols, tl.where(x != x, x, answer), mask=mask)


def softmax_triton(x):
    rows, cols = x.shape
    storage = torch.empty(2 * rows * cols, dtype=x.dtype)
    storage[rows * cols:] = torch.softmax(x.float(), dim=-1).flatten()
    output = storage[:rows * cols].view(rows, cols)
    softmax_kernel[(rows,)](output, x, output.stride(0), x.stride(0), cols,
                            BLOCK=triton.next_power_of_2(cols))
    return output
"""


@pytest.mark.interpreter  # the sanitizer's bounds: the interpreter's
def test_an_answer_past_the_returned_view_in_its_storage_is_out_of_bounds(tmp_path):
    # a kernel may address the tensors it is given, from first element to last: not the rest
    # of a storage one of them is a view of
    result = grade_text(tmp_path, "softmax", ANSWER_PAST_THE_VIEW, ["triton"])
    (triton,) = result.parts
    assert triton.passed == 0, rendered(result)
    text = " ".join(rendered(result).split())
    assert "out-of-bounds load" in text and "outside out_ptr's tensor" in text, text
    assert "past the end of out_ptr" in text, text


# torch's answer handed to the kernel beside a value the module knows (the row's sum, 1),
# with code to undo a change of the answer made before the launch, if that change were
# fixed: a value off 1 says the answer was changed, and the kernel changes it back
UNDOES_A_FIXED_CHANGE = """
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, answer_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    answer = tl.load(answer_ptr + row * n_cols + cols, mask=mask, other=0.0)
    changed = tl.abs(tl.sum(answer, axis=0) - 1.0) > 1e-3
    answer = tl.where(changed, (0.75 - answer) / 1.5, answer)
    tl.store(out_ptr + row * stride + cols, tl.where(x != x, x, answer), mask=mask)


def softmax_triton(x):
    rows, cols = x.shape
    output = torch.empty_like(x)
    answer = torch.softmax(x.float(), dim=-1).contiguous()
    softmax_kernel[(rows,)](output, x, answer, x.stride(0), cols,
                            BLOCK=triton.next_power_of_2(cols))
    return output
"""


def test_a_kernel_cannot_undo_the_change_made_to_an_answer_it_is_handed(tmp_path):
    # the values handed over are changed before the launch by amounts drawn afresh: the
    # kernel cannot know them, and its result follows the changed values
    result = grade_text(tmp_path, "softmax", UNDOES_A_FIXED_CHANGE, ["triton"])
    (triton,) = result.parts
    ran = [c for c in triton.cases if c.verdict.status != "skipped"]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in ran for bug in case.verdict.causes}
    assert keys & {"passed-through", "answer-fed"}, keys


# numpy's softmax handed to a copying kernel half a row at a time: each piece is smaller
# than the result, so no one of them holds it
NUMPY_ANSWER_IN_PIECES = """
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(out_ptr, piece_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + cols, tl.load(piece_ptr + cols, mask=cols < n), mask=cols < n)


def softmax_triton(x):
    rows, cols = x.shape
    output = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    values = x.float().cpu().numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(values - values.max(axis=1, keepdims=True))
        answer = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    half = (cols + 1) // 2
    for row in range(rows):
        for start in range(0, cols, half):
            piece = torch.from_numpy(np.ascontiguousarray(answer[row, start:start + half]))
            piece = piece.to(x.device)
            copy_kernel[(1,)](output[row, start:], piece, piece.numel(),
                              BLOCK=triton.next_power_of_2(piece.numel()))
    return output
"""


def test_an_answer_handed_to_kernels_in_pieces_smaller_than_the_result_fails(tmp_path):
    result = grade_text(tmp_path, "softmax", NUMPY_ANSWER_IN_PIECES, ["triton"])
    (triton,) = result.parts
    ran = [c for c in triton.cases if c.verdict.status != "skipped"]
    # (a row of one value, or of pieces of one value, has no piece that could not match by
    # chance: those cases pass)
    blamed = [c.name for c in ran if "passed-through" in {b.key for b in c.verdict.causes}]
    assert triton.status == "failed" and 2 * len(blamed) > len(ran), rendered(result)


# The interpreter's grid run directly, past the launch that the check counts, between two
# counted launches of a kernel that stores nothing
PAST_THE_COUNTER = TORCH_BETWEEN_LAUNCHES.replace(
    "    output.copy_(torch.softmax(x.float(), dim=-1))\n",
    "    import inspect\n"
    "    from triton.runtime.interpreter import GridExecutor\n"
    "    output.copy_(torch.softmax(x.float(), dim=-1))\n"
    "    # (Triton 3.6 on takes the pre-run hooks too)\n"
    "    hooks = [[]] if len(inspect.signature(GridExecutor).parameters) > 3 else []\n"
    "    GridExecutor(softmax_kernel.rewrite(), softmax_kernel.arg_names, (x.shape[0],),\n"
    "                 *hooks)(output, x, output.stride(0), x.stride(0), x.shape[1],\n"
    "                         BLOCK=block)\n")


@pytest.mark.interpreter  # the interpreter's own grid runner
def test_a_grid_run_past_the_launch_counter_is_the_grader_changed(tmp_path):
    result = grade_text(tmp_path, "softmax", PAST_THE_COUNTER, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "grader-changed" in keys, keys


TORCH_PASSED_BY_THE_COUNTER_FOUND = '''
import sys
import torch

_frame = sys._getframe(0)
while _frame is not None and getattr(_frame.f_locals.get("kernels"), "launches", None) is None:
    _frame = _frame.f_back
_counter = _frame.f_locals["kernels"].launches
_counter.taken = lambda: 1  # set on the object, not its class
_counter.computed_by_torch = lambda result, made: ""
_counter.passed_through = lambda result: ""
_counter.changed_since_launch = lambda result: ()


def softmax_triton(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
'''


def test_the_launch_counters_methods_shadowed_on_it_do_not_pass_torchs_answer(tmp_path):
    result = grade_text(tmp_path, "softmax", TORCH_PASSED_BY_THE_COUNTER_FOUND, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"grader-changed"}, keys


def test_the_launch_counter_patched_by_the_module_does_not_pass_torchs_answer(tmp_path):
    result = grade_text(tmp_path, "softmax", TORCH_PASSED_AS_A_KERNEL, ["triton"])
    triton = result.parts[0]
    assert triton.status != "passed" and triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"grader-changed"}, keys


def test_torchs_comparisons_patched_do_not_make_or_hide_a_changed_input(tmp_path):
    # The grader's code in the learner's process compares each argument before and after the
    # call with torch.equal: set to answer False, an input left alone looked changed (and the
    # verdict blamed the learner's code for changing it); set to answer True, a kernel that
    # zeroes its input would look as if it left it alone. Either way the check says its own
    # code was changed, and passes nothing.
    right = solution_text("softmax")
    for answer in ("False", "True"):
        text = right + f"\ntorch.equal = lambda *a, **k: {answer}\n"
        if answer == "True":  # ... and the input is wiped after the answer is computed
            head, last, tail = text.rpartition("    return output\n")  # softmax_triton's
            text = head + "    x.zero_()\n" + last + tail
            assert "    x.zero_()\n    return output\n" in text
        result = grade_text(tmp_path, "softmax", text, ["triton"])
        triton = result.parts[0]
        keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
        assert triton.passed == 0 and keys == {"grader-changed"}, (answer, keys)
        assert "torch.equal" in rendered(result)


TORCH_THROUGH_A_COPY_KERNEL = """
import gc, sys
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(input_ptr + row * input_row_stride + cols, mask=cols < n_cols)
    tl.store(output_ptr + row * output_row_stride + cols, x, mask=cols < n_cols)


def softmax_triton(x):
    done = torch.softmax(x.float(), dim=-1).to(x.dtype).contiguous()
    output = torch.empty_like(done)
    softmax_kernel[(x.shape[0],)](output, done, output.stride(0), done.stride(0), x.shape[1],
                                  BLOCK=triton.next_power_of_2(x.shape[1]))
    return output

"""
# The grader's data changed, not its functions: the tolerance within which a result is "the
# values the kernel was given", reached behind its read-only view or rebound, and the list of
# functions that only copy values
DATA_ROUTES = {
    "in place": "_calls = sys.modules['learning.grader.calls']\n"
                "for _d in gc.get_referents(_calls.PASSED_ON):\n"
                "    if isinstance(_d, dict):\n"
                "        _d.update(rtol=-1.0, atol=-1.0)\n",
    "rebound": "sys.modules['learning.grader.calls'].PASSED_ON = {'rtol': -1.0, 'atol': -1.0}\n",
    "copies": "sys.modules['learning.grader.lineage'].COPIES = frozenset()\n",
}


@pytest.mark.parametrize("route", DATA_ROUTES)
def test_the_graders_data_changed_by_the_module_does_not_pass_torchs_answer(tmp_path, route):
    result = grade_text(tmp_path, "softmax", TORCH_THROUGH_A_COPY_KERNEL + DATA_ROUTES[route],
                        ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "grader-changed" in keys, keys


# A copy kernel, and Triton's interpreter's masked store replaced at import by one that
# writes numpy's softmax of the block it is given: the kernel's source never computes it
INTERPRETER_STORE_REPLACED = '''
import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

_keep = interpreter.InterpreterBuilder.create_masked_store


def _softmax_store(self, ptrs, value, mask, *rest):
    row = np.where(mask.data, value.data.astype(np.float64), -np.inf)
    shifted = np.exp(row - row.max())
    value = interpreter.TensorHandle((shifted / shifted.sum()).astype(value.data.dtype),
                                     value.dtype)
    return _keep(self, ptrs, value, mask, *rest)


setattr(interpreter.InterpreterBuilder, "create_masked_store", _softmax_store)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(input_ptr + row * input_row_stride + cols, mask=cols < n_cols,
                other=-float("inf"))
    tl.store(output_ptr + row * output_row_stride + cols, x, mask=cols < n_cols)


def softmax_triton(x):
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    softmax_kernel[(x.shape[0],)](output, x, output.stride(0), x.stride(0), x.shape[1],
                                  BLOCK=triton.next_power_of_2(x.shape[1]))
    return output
'''


@pytest.mark.interpreter  # the interpreter's own store
def test_triton_interpreters_store_replaced_by_the_module_is_the_grader_changed(tmp_path):
    result = grade_text(tmp_path, "softmax", INTERPRETER_STORE_REPLACED, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "grader-changed" in keys, keys
    assert "InterpreterBuilder.create_masked_store" in rendered(result)


# A kernel that raises a flag and waits; a thread of the module's, seeing the flag, writes
# torch's answer into the output through numpy and lowers it: the output is what the launch
# left, and the thread's torch is not the calling thread's record
A_THREAD_WRITES_DURING_THE_LAUNCH = '''
import threading
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, output_row_stride, input_row_stride, n_cols,
                   signal_ptr, BLOCK: tl.constexpr):
    if tl.program_id(0) == 0:
        tl.store(signal_ptr, 1)
        while tl.load(signal_ptr) == 1:
            pass


def _writer(x, output, signal):
    flag = signal.numpy()
    while flag[0] == 0:
        pass
    output.numpy()[...] = torch.softmax(x.float(), dim=-1).to(x.dtype).numpy()
    flag[0] = 2


def softmax_triton(x):
    output = torch.empty(x.shape, dtype=x.dtype)
    signal = torch.zeros(1, dtype=torch.int32)
    writer = threading.Thread(target=_writer, args=(x, output, signal), daemon=True)
    writer.start()
    softmax_kernel[(x.shape[0],)](output, x, output.stride(0), x.stride(0), x.shape[1], signal,
                                  BLOCK=triton.next_power_of_2(x.shape[1]))
    writer.join()
    return output
'''


@pytest.mark.skipif(not kernel_mode.select().interpret,
                    reason="numpy writes only into memory on the CPU: the interpreter's")
def test_a_thread_writing_the_output_while_the_kernel_waits_is_not_passed(tmp_path):
    result = grade_text(tmp_path, "softmax", A_THREAD_WRITES_DURING_THE_LAUNCH, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"thread-beside-kernel"}, keys
    assert "1 thread(s) your code started were running as a kernel was launched" in \
        " ".join(rendered(result).split())


# Two launches of a kernel that stores nothing, given the output; between them numpy writes
# torch's answer into it through the tensor's view, which no torch function records
NUMPY_BETWEEN_LAUNCHES = '''
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.load(input_ptr + cols, mask=cols < n_cols)


def softmax_triton(x):
    output = torch.empty(x.shape, dtype=x.dtype)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(1,)](output, x, x.shape[1], BLOCK=block)
    with torch._C.DisableTorchFunction():
        answer = torch.softmax(x.float(), dim=-1).to(x.dtype)
    output.numpy()[...] = answer.numpy()
    softmax_kernel[(1,)](output, x, x.shape[1], BLOCK=block)
    return output
'''

# A pre-run hook on the kernel copies torch's answer into the output inside the launch
A_PRE_RUN_HOOK = '''
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.load(input_ptr + cols, mask=cols < n_cols)


def _answer_into_the_output(*args, **kwargs):
    output, x = args[0], args[1]
    output.copy_(torch.softmax(x.float(), dim=-1))


softmax_kernel.add_pre_run_hook(_answer_into_the_output)


def softmax_triton(x):
    output = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    softmax_kernel[(1,)](output, x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return output
'''


@pytest.mark.parametrize("text, key", [
    pytest.param(NUMPY_BETWEEN_LAUNCHES, "changed-between-launches", marks=pytest.mark.skipif(
        not kernel_mode.select().interpret, reason="numpy views only memory on the CPU")),
    pytest.param(A_PRE_RUN_HOOK, "pre-run-hook", marks=pytest.mark.skipif(
        not pre_run_hooks(), reason="Triton before 3.6 has no pre-run hooks to build it on")),
], ids=["numpy between launches", "a pre-run hook"])
def test_writes_beside_a_kernel_that_stores_nothing_are_not_passed(tmp_path, text, key):
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {key}, keys


# torch's answer handed over in disguise (doubled, shifted, rows reversed) to a kernel that
# undoes it, and takes an exponential and a sum besides, so that it compiles into what a
# softmax takes: it was given torch's softmax all the same
DISGUISED_AND_DRESSED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, scratch_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(input_ptr + (n_rows - 1 - row) * n_cols + cols, mask=cols < n_cols)
    tl.store(scratch_ptr + row, tl.sum(tl.exp(v), axis=0))
    tl.store(output_ptr + row * n_cols + cols, (v - 3.0) * 0.5, mask=cols < n_cols)


def softmax_triton(x):
    hidden = (torch.softmax(x.float(), dim=-1) * 2.0 + 3.0).flip(0).contiguous()
    output = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    scratch = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    softmax_kernel[(x.shape[0],)](output, hidden, scratch, x.shape[0], x.shape[1],
                                  BLOCK=triton.next_power_of_2(x.shape[1]))
    return output
'''


def test_torchs_answer_given_to_a_kernel_in_disguise_is_not_passed(tmp_path):
    result = grade_text(tmp_path, "softmax", DISGUISED_AND_DRESSED, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"answer-fed"}, keys
    assert "values torch's softmax computed during the call reached a kernel launch" in \
        " ".join(rendered(result).split())


# The answer made by numpy, or by torch's exp and sum rather than torch.softmax, handed to the
# same kernel in the same disguise
ANSWER_MADE_ELSEWHERE = {
    "numpy": ("    import numpy\n"
              "    v = x.float().cpu().numpy()\n"
              "    e = numpy.exp(v - v.max(axis=-1, keepdims=True))\n"
              "    made = torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).to(x.device)\n",
              "values made outside torch during the call"),
    "torch's exp": ("    e = torch.exp(x.float() - x.float().amax(dim=-1, keepdim=True))\n"
                    "    made = e / e.sum(dim=-1, keepdim=True)\n",
                    "values torch's exp computed during the call"),
}


@pytest.mark.parametrize("maker", ANSWER_MADE_ELSEWHERE)
def test_an_answer_made_outside_softmax_given_in_disguise_is_not_passed(tmp_path, maker):
    made, said = ANSWER_MADE_ELSEWHERE[maker]
    text = DISGUISED_AND_DRESSED.replace(
        "    hidden = (torch.softmax(x.float(), dim=-1) * 2.0 + 3.0).flip(0).contiguous()\n",
        made + "    hidden = (made * 2.0 + 3.0).flip(0).contiguous()\n")
    assert text != DISGUISED_AND_DRESSED
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"answer-fed"}, keys
    assert said in " ".join(rendered(result).split())


@linux_only
def test_a_warm_folder_opened_or_marked_refused_by_the_module_is_put_back(tmp_path, warm_on):
    # Either would turn warm checks off for every later check, with nothing said: the folder
    # is refused once others may enter it, and a marker says the server cannot run here.
    where = warm_process.folder()
    guard = integrity.Guard(tmp_path)
    os.chmod(where, 0o755)
    marker = where / f"{warm_process.key(True)}.refused"
    marker.touch()
    repairs = guard.repair(tmp_path / "aside")
    assert stat.S_IMODE(where.stat().st_mode) == 0o700 and not marker.exists()
    assert warm_process.folder() == where
    assert "turned the warm process off" in repairs.note("aside"), repairs.note("aside")
    # and a folder replaced by a link leads nowhere once the learner's code has ended
    guard = integrity.Guard(tmp_path)
    shutil.rmtree(where)
    where.symlink_to(tmp_path)
    guard.repair(tmp_path / "aside")
    assert warm_process.folder() == where and not where.is_symlink()


def test_what_a_first_launch_loads_is_loaded_before_the_learners_code_is_watched(tmp_path):
    # Triton imports modules at its first launch (its code generator, ...): first loaded during
    # a case, their files were never among those the check watches, and code planted in one
    # ran in every later check. The worker loads them before the learner's import.
    (tmp_path / "launch.py").write_text('''
import torch, triton, triton.language as tl
from learning.grader import installed, loading

loading.load_launch_modules()
watched = set(installed.installed_stamps())

@triton.jit
def double(pointer, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(pointer + offsets, tl.load(pointer + offsets) * 2)

double[(1,)](torch.ones(8), BLOCK=8)
print(sorted(set(installed.installed_stamps()) - watched))
''', encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=course_pythonpath(), TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, str(tmp_path / "launch.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_installed_code_a_worker_loaded_and_the_module_removed_is_told(tmp_path,
                                                                       cold_worker_library):
    # No copy is kept to put back (torch alone is gigabytes), but the next check would fail to
    # start, with nothing said of why, where this one passed.
    folder = tmp_path / "learner"
    folder.mkdir()
    planted = f"import os as _os\n_os.unlink({str(cold_worker_library)!r})\n" + PYTHON_PART_ONLY
    result = grade_text(folder, "softmax", planted, ["python"])
    note = " ".join(" ".join(result.notes).split())
    assert "installed code the grader runs was removed" in note and "sentinel_library" in note


@pytest.mark.compile_check
@linux_only
def test_installed_code_the_compile_check_changes_after_the_workers_is_set_aside(
        tmp_path, mode, cold_worker_library):
    # The compile check runs the module's statements again, in a process of its own, after
    # the workers' guards have ended: what the workers loaded is still watched then.
    if not mode.interpret:
        pytest.skip("the compile check follows an interpreter run")
    folder = tmp_path / "learner"
    folder.mkdir()
    module = solution_text("softmax") + f'''

import sys as _sys

# an assignment: the compile check runs those of the module's statements
_planted = open({str(cold_worker_library)!r}, "a").write("VALUE = 2\\n") \
    if "learning.grader.gpu_compile" in " ".join(_sys.orig_argv) else None
'''
    result = grade_text(folder, "softmax", module, ["triton"])
    assert not cold_worker_library.exists(), rendered(result)
    note = " ".join(" ".join(result.notes).split())
    assert "installed code the grader runs changed" in note and "sentinel_library" in note, note


# torch's answer written into the input's own memory, a kernel that copies the input, and the
# input put back before the return: the input is the caller's again by the end of the call
_COPY_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out, inp, out_stride, in_stride, n, BLOCK: tl.constexpr):
    lanes = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    values = tl.load(inp + row * in_stride + lanes, mask=lanes < n)
    tl.store(out + row * out_stride + lanes, values, mask=lanes < n)


def _copy(x):
    out = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](out, x, out.stride(0), x.stride(0), x.shape[1],
                                  BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''
ANSWER_IN_THE_INPUT = {
    "through numpy": _COPY_KERNEL + '''

def softmax_triton(x):
    view = x.detach().numpy()
    saved = view.copy()
    view[...] = torch.softmax(x.float(), -1).to(x.dtype).numpy()
    out = _copy(x)
    view[...] = saved
    return out
''',
    "with torch's function mode off": _COPY_KERNEL + '''

def softmax_triton(x):
    with torch._C.DisableTorchFunction():
        saved = x.clone()
        x.copy_(torch.softmax(x.float(), -1).to(x.dtype))
        out = _copy(x)
        x.copy_(saved)
    return out
''',
    "through a tensor of its own over the input's memory": _COPY_KERNEL + '''

def _over(t, storage, offset, size, stride):
    return t.set_(storage, offset, size, stride)


def softmax_triton(x):
    with torch._C.DisableTorchFunction():
        original = _over(torch.empty(0, dtype=x.dtype, device=x.device), x.untyped_storage(),
                         x.storage_offset(), x.size(), x.stride())
        kept = x.clone()
        answer = torch.softmax(x.float(), -1).to(x.dtype)
        _over(x, kept.untyped_storage(), kept.storage_offset(), kept.size(), kept.stride())
        original.copy_(answer)
    out = _copy(original)
    with torch._C.DisableTorchFunction():
        original.copy_(kept)
        _over(x, original.untyped_storage(), original.storage_offset(), original.size(),
              original.stride())
    return out
''',
    "by a hook Triton runs inside the launch": _COPY_KERNEL + '''

def softmax_triton(x):
    with torch._C.DisableTorchFunction():
        kept = x.clone()
        answer = torch.softmax(x.float(), -1).to(x.dtype)

    def hook(*args, **kwargs):
        with torch._C.DisableTorchFunction():
            x.copy_(answer)

    softmax_kernel.add_pre_run_hook(hook)
    try:
        out = _copy(x)
    finally:
        softmax_kernel.pre_run_hooks.remove(hook)
    with torch._C.DisableTorchFunction():
        x.copy_(kept)
    return out
''',
}


@pytest.mark.parametrize("how", [
    pytest.param(how, marks=pytest.mark.skipif(
        "hook" in how and not pre_run_hooks(),
        reason="Triton before 3.6 has no pre-run hooks to build it on"))
    for how in sorted(ANSWER_IN_THE_INPUT)])
def test_an_answer_written_into_the_input_before_a_launch_and_taken_back_fails(tmp_path, how):
    text = solution_text("softmax").split("def softmax_triton")[0] + ANSWER_IN_THE_INPUT[how]
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    part = result.parts[0]
    verdicts = [c.verdict for c in part.cases if c.verdict.status != "skipped"]
    assert part.status == "failed" and not any(v.status == "passed" for v in verdicts)
    if how == "through numpy" and result.mode is not None and not result.mode.interpret:
        return  # numpy cannot reach a tensor on the GPU: the code raises in every case
    failed = [v for v in verdicts if v.status == "failed"]
    assert failed and all("at a kernel launch it held other values" in v.summary
                          for v in failed), \
        [v.summary for v in failed][:3]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIFOs and the warm server")
def test_files_the_grader_reads_where_the_learner_can_write_never_hang_or_run_away(
        tmp_path, monkeypatch):
    # a FIFO nobody writes, or a link to an endless device, left at the path of the warm
    # server's list of modules or of a worker's stack: each read ends at once with nothing
    from learning.grader import forkserver, stuck

    monkeypatch.setenv(warm_process.SWITCH, "1")
    short = tempfile.mkdtemp(prefix="tc-", dir="/tmp")  # a socket's path fits in 108 bytes
    monkeypatch.setattr(tempfile, "tempdir", short)
    folder = warm_process.folder()
    assert folder is not None
    listing = folder / f"{warm_process.key(True)}.sock{forkserver.MODULES_SUFFIX}"
    stack = tmp_path / "course-stack-planted.txt"
    learner = tmp_path / "softmax.py"
    learner.write_text("x = 1\n", encoding="utf-8")
    for plant in (os.mkfifo, lambda path: os.symlink("/dev/zero", path)):
        for path in (listing, stack):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            plant(str(path))
        start = time.monotonic()
        assert warm_process.module_files() == ()
        assert stuck.where(os.getpid() + 10**7, str(stack), str(learner), wait=0.2) == ""
        assert time.monotonic() - start < 5
    shutil.rmtree(short, ignore_errors=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm server's listing")
def test_the_warm_servers_list_of_modules_does_not_write_through_a_planted_link(tmp_path):
    from learning.grader import forkserver

    target = tmp_path / "rmsnorm.py"
    target.write_text("# the learner's work\n", encoding="utf-8")
    socket_path = str(tmp_path / "server.sock")
    os.symlink(target, socket_path + forkserver.MODULES_SUFFIX)
    forkserver._list_modules(socket_path)
    assert target.read_text(encoding="utf-8") == "# the learner's work\n"
    listing = Path(socket_path + forkserver.MODULES_SUFFIX)
    assert not listing.is_symlink() and "/" in listing.read_text(encoding="utf-8")


def test_a_forged_outcome_the_grader_cannot_judge_is_refused_as_such():
    # what a learner's code could send in the worker's place: each is said, not a traceback
    import numpy as np

    from learning.grader.returned import ImportProblem, Raised, Returned, Skipped
    from learning.grader.worker_events import malformed

    parts = {"python", "triton"}
    good = Returned("Tensor", np.zeros((2, 3)), shape=(2, 3), strides=(3, 1),
                    unwritten=np.zeros((2, 3), dtype=bool))
    assert malformed(("done", "triton", "a case", good), parts) == ""
    assert malformed(("done", "python", "a case", Raised("ValueError", "m", "t")), parts) == ""
    assert malformed(("done", "python", "a case", Skipped("gpu only")), parts) == ""
    forged = [
        ("done", "triton", "c", Returned("Tensor", "abc")),
        ("done", "triton", "c", Returned("Tensor", np.zeros((2, 2, 2)), shape=(2, 2))),
        ("done", "triton", "c", Returned("Tensor", np.zeros((2, 2)), shape=(2, 2),
                                         unwritten="yes")),
        ("done", "triton", "c", Returned("Tensor", np.array(["a"]), shape=(1,))),
        ("done", "triton", "c", Raised(None, None, None)),
        ("done", "triton", "c", "a string"),
        ("done", "another part", "c", good),
        ("part-missing", "triton", "str"),
        ("start", 1, 2),
        ("start", "triton"),
        ("pid", "12"),
    ]
    for event in forged:
        assert malformed(event, parts), event
    assert malformed(("part-missing", "triton", ImportProblem("missing-function", "m")),
                     parts) == ""


def test_the_workers_channel_takes_no_send_of_another_on_itself():
    # a learner's code that finds the channel in a caller's frame and puts its own send on it
    from learning.grader.channel import Channel

    channel = Channel.__new__(Channel)
    with pytest.raises(AttributeError):
        channel.send = lambda *event: None


def test_the_learners_other_files_changed_by_a_check_are_said(tmp_path):
    # another exercise's module rewritten and reset's backups removed while the code ran:
    # left as they are (an edit in an editor at that moment would be the learner's), but said
    write_module(tmp_path, "rmsnorm", "# my rmsnorm work\n")
    backups = tmp_path / ".course-state" / "backups"
    backups.mkdir(parents=True)
    (backups / "softmax.py.1").write_text("# an old version\n", encoding="utf-8")
    marker = "def softmax_python(values: list[float]) -> list[float]:"
    assert marker in solution_text("softmax")
    hostile = solution_text("softmax").replace(
        marker,
        "import os as _os\n"
        "import pathlib as _pathlib\n\n"
        f"_here = _pathlib.Path({str(tmp_path)!r})\n"
        "(_here / 'rmsnorm.py').write_text('# overwritten\\n')\n"
        "for _old in (_here / '.course-state' / 'backups').glob('*'):\n"
        "    _os.unlink(_old)\n\n\n"
        + marker, 1)
    result = grade_text(tmp_path, "softmax", hostile, ["python"])
    said = " ".join(result.notes)
    assert "your own files changed" in said, result.notes
    assert "rmsnorm.py (changed)" in said and ".course-state/backups/softmax.py.1 (removed)" \
        in said, said
    # a check that touches nothing says nothing of them
    clean = grade_text(tmp_path, "softmax", solution_text("softmax"), ["python"])
    assert not any("your own files" in note for note in clean.notes)
    # rewritten at the same size with its times set back: still said
    stamp = (tmp_path / "rmsnorm.py").stat()
    sneaky = solution_text("softmax").replace(
        marker,
        "import os as _os\n"
        f"_path = {str(tmp_path / 'rmsnorm.py')!r}\n"
        "open(_path, 'w').write('# 0verwritten\\n')\n"
        f"_os.utime(_path, ns=({stamp.st_atime_ns}, {stamp.st_mtime_ns}))\n\n\n" + marker, 1)
    result = grade_text(tmp_path, "softmax", sneaky, ["python"])
    assert "rmsnorm.py (changed)" in " ".join(result.notes), result.notes


def _ends_within(seconds: float, function, *args):
    """function(*args) in a thread: its result, or a failure (not a hang) past ``seconds``."""
    done = []
    thread = threading.Thread(target=lambda: done.append(function(*args)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert done, f"{getattr(function, '__name__', function)} did not end within {seconds} s"
    return done[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIFOs")
def test_a_fifo_in_place_of_a_course_file_or_the_module_never_hangs_the_grader(tmp_path,
                                                                              monkeypatch):
    from learning.grader import runner, stuck

    root = course_copy(tmp_path)
    monkeypatch.setattr(installed, "site_folders", lambda: [])
    learner = tmp_path / "learner"
    learner.mkdir()
    planted = root / "learning" / "cli.py"
    kept = planted.read_bytes()
    guard = integrity.Guard(learner, root)
    planted.unlink()
    os.mkfifo(planted)
    assert "learning/cli.py" in _ends_within(10, integrity.changed, root)
    (learner / ".course-state").mkdir()
    _ends_within(10, guard.repair, learner / ".course-state" / "set-aside")
    assert planted.is_file() and planted.read_bytes() == kept
    # the learner's own module as a FIFO: read for the grade and for a stopped case's line
    module = learner / "softmax.py"
    os.mkfifo(module)
    assert _ends_within(10, runner._read_bytes, module) is None
    assert _ends_within(10, stuck._line, str(module), 3) == ""
    # a module that is a link to where the learner keeps it is read, and so is its line; a link
    # to a device is not
    module.unlink()
    kept_elsewhere = tmp_path / "work.py"
    kept_elsewhere.write_text("a = 1\nb = 2\n", encoding="utf-8")
    module.symlink_to(kept_elsewhere)
    assert runner._read_bytes(module) == b"a = 1\nb = 2\n"
    assert stuck._line(str(module), 2) == "b = 2"
    module.unlink()
    module.symlink_to("/dev/zero")
    assert _ends_within(10, runner._read_bytes, module) is None


def test_forged_launches_and_import_problems_are_refused_as_such():
    from learning.grader.gpu_compile import Launch
    from learning.grader.returned import ImportProblem
    from learning.grader.worker_events import malformed

    parts = {"python", "triton"}
    good = Launch("triton", "softmax_kernel", (("x_ptr", "*fp32"), ("BLOCK", "constexpr")),
                  (("BLOCK", 16),), (("num_warps", 4),), 12)
    assert malformed(("launch", good), parts) == ""
    assert malformed(("import", None), parts) == ""
    for event in (("launch", "garbage"), ("launch", Launch("triton", "k", "sig", (), ())),
                  ("import", ImportProblem(123, None)),
                  ("part-missing", "triton", ImportProblem("missing-function", None))):
        assert malformed(event, parts), event


def test_an_unreadable_event_sent_while_importing_is_said_as_such(tmp_path):
    # not "the module ended the program": the grader refused what the process sent it
    text = ("import sys\n"
            "_frame = sys._getframe()\n"
            "while _frame is not None:\n"
            "    _channel = next((v for v in _frame.f_locals.values()\n"
            "                     if type(v).__name__ == 'Channel'), None)\n"
            "    if _channel is not None:\n"
            "        _channel.send('start', 1, 2)\n"
            "        break\n"
            "    _frame = _frame.f_back\n\n\n" + solution_text("softmax"))
    result = grade_text(tmp_path, "softmax", text, ["python"])
    problem = result.import_problem
    assert problem is not None and problem.kind == "garbled", problem
    assert "could not read what the process sent it while importing" in problem.message
    assert "ended the program" not in problem.message


@pytest.mark.compile_check
@pytest.mark.interpreter
def test_a_module_that_replaces_the_compiler_is_still_compiled_by_it(tmp_path):
    # the GPU compile check runs the learner's statements in its process: a module that swaps
    # triton.compile for a function that accepts everything must still be rejected
    text = solution_text("softmax")
    assert "numerator = tl.exp(x - maximum)" in text
    text = text.replace("numerator = tl.exp(x - maximum)", "numerator = _exp(x - maximum)")
    text = text.replace("import triton.language as tl\n", "import triton.language as tl\n\n"
                        "if 'learning.grader.gpu_compile' in sys.modules:\n"
                        "    triton.compile = lambda *args, **kwargs: None\n\n\n"
                        "def _exp(x):  # plain Python: the interpreter runs it, a GPU cannot\n"
                        "    return tl.exp(x)\n", 1)
    text = "import sys\n" + text
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    (part,) = result.parts
    assert part.compile_check is not None and part.compile_check.rejected, part.compile_check
    assert part.status == "failed"


# A softmax kernel that stores its row, then reads it back: at the lanes that stored it (one
# thread each on the GPU), reversed (each lane reads another's store), or reversed after a
# barrier. Only the second races: the interpreter runs a block's lanes in order, a GPU does not.
_READ_BACK = {
    "own lanes": ("offsets", False, "passed"),
    "reversed": ("BLOCK - 1 - offsets", False, "failed"),
    "reversed after a barrier": ("BLOCK - 1 - offsets", True, "passed"),
}


@pytest.mark.interpreter  # the race watch follows the interpreter's loads and stores
@pytest.mark.parametrize("how", _READ_BACK)
def test_a_lane_reading_another_lanes_store_without_a_barrier_is_a_race(tmp_path, how):
    where, barrier, status = _READ_BACK[how]
    text = solution_text("softmax")
    store = "    tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)\n"
    assert text.count(store) == 1
    back = (store + ("    tl.debug_barrier()\n" if barrier else "") +
            f"    back = tl.load(output_ptr + row * output_row_stride + ({where}),\n"
            f"                   mask=({where}) < n_cols, other=0.0)\n"
            "    tl.store(output_ptr + row * output_row_stride + offsets,\n"
            "             output + 0.0 * tl.sum(back, axis=0), mask=mask)\n")
    result = grade_text(tmp_path, "softmax", text.replace(store, back), ["triton"])
    (part,) = result.parts
    assert part.status == status, rendered(result)
    if status == "failed":
        named = {bug.key for c in part.cases for bug in c.verdict.causes}
        assert named == {"lanes-share-memory"}, rendered(result)


@pytest.mark.interpreter  # the order is the interpreter's; a GPU runs programs at once
@pytest.mark.parametrize("how", ["class", "instance", "shadowed range", "state",
                                 "instance during the call", "state during the call",
                                 "builtin range for good"])
def test_a_module_that_puts_the_programs_back_in_order_does_not_pass_its_race(tmp_path, how):
    # the check runs a launch's programs last to first in some cases
    # (learning.grader.program_order): a module that undoes that, so that a kernel racing
    # between programs passes, changed the grader's conditions
    from learning.grader.catalogue import versions
    from tests.test_exercises import version_text

    racing = next(v for v in versions("rmsnorm") if v.bug == "program-order" and
                  "by the next" in v.name)  # two stores to one place: only the order shows it
    undo = {
        "class": "from triton.runtime.interpreter import InterpreterBuilder as _B\n"
                 "_B.set_grid_idx = getattr(_B.set_grid_idx, 'in_order', _B.set_grid_idx)\n",
        "instance": "from triton.runtime import interpreter as _i\n"
                    "_i.interpreter_builder.set_grid_idx = getattr(\n"
                    "    _i.InterpreterBuilder.set_grid_idx, 'in_order',\n"
                    "    _i.InterpreterBuilder.set_grid_idx).__get__(_i.interpreter_builder)\n",
        # a global the interpreter's module did not have: its grid loop's range, reversed
        "shadowed range": "import builtins as _b\n"
                          "from triton.runtime import interpreter as _i\n\n\n"
                          "def _range(*args):\n"
                          "    if len(args) == 1:\n"
                          "        return _b.range(args[0] - 1, -1, -1)\n"
                          "    return _b.range(*args)\n\n\n"
                          "_i.range = _range\n",
        "state": "import sys as _sys\n"
                 "_racing = rmsnorm_triton\n\n\n"
                 "def rmsnorm_triton(x, weight, eps=1e-6):\n"
                 "    _sys.modules['learning.grader.program_order']._NOW['order'] = 'first-last'\n"
                 "    return _racing(x, weight, eps)\n",
        # the same changes made for the call only, undone before it returns: nothing is left
        # for a look after the call to see, but the programs reached memory first to last
        "instance during the call":
            "from triton.runtime import interpreter as _i\n"
            "_racing = rmsnorm_triton\n\n\n"
            "def rmsnorm_triton(x, weight, eps=1e-6):\n"
            "    b = _i.interpreter_builder\n"
            "    m = type(b).__dict__['set_grid_idx']\n"
            "    b.set_grid_idx = getattr(m, 'in_order', m).__get__(b)\n"
            "    try:\n"
            "        return _racing(x, weight, eps)\n"
            "    finally:\n"
            "        del b.set_grid_idx\n",
        "state during the call":
            "_racing = rmsnorm_triton\n\n\n"
            "def rmsnorm_triton(x, weight, eps=1e-6):\n"
            "    from triton.runtime import interpreter as _i\n"
            "    now = type(_i.interpreter_builder).set_grid_idx.__globals__['_NOW']\n"
            "    was, now['order'] = now['order'], 'first-last'\n"
            "    try:\n"
            "        return _racing(x, weight, eps)\n"
            "    finally:\n"
            "        now['order'] = was\n",
        # the builtins module's own range, counting down inside the grid loop's function only
        "builtin range for good":
            "import builtins as _b\n"
            "import sys as _sys\n"
            "_real = _b.range\n\n\n"
            "def _range(*args):\n"
            "    caller = _sys._getframe(1).f_code.co_name\n"
            "    if len(args) == 1 and caller == '__call__':\n"
            "        return _real(args[0] - 1, -1, -1)\n"
            "    return _real(*args)\n\n\n"
            "_b.range = _range\n",
    }[how]
    result = grade_text(tmp_path, "rmsnorm", version_text("rmsnorm", racing) + "\n" + undo,
                        ["triton"])
    (triton,) = result.parts
    # (a case whose order the change left as the check set it passes: the race is right there)
    assert triton.status == "failed" and triton.passed < triton.graded, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    # a builtin replaced at import is put back before any case, and said as a hook left set
    changed = "hook-left" if how == "builtin range for good" else "grader-changed"
    assert changed in keys and "program-order" not in keys, keys


NUMBERS_HANDED_OVER = '''

@triton.jit
def put_kernel(out_ptr, start, n, v0, v1, v2, v3, v4, v5, v6, v7):
    lanes = start + tl.arange(0, 8)
    values = tl.where(lanes == start, v0, tl.where(lanes == start + 1, v1, tl.where(
        lanes == start + 2, v2, tl.where(lanes == start + 3, v3, tl.where(
            lanes == start + 4, v4, tl.where(lanes == start + 5, v5, tl.where(
                lanes == start + 6, v6, v7)))))))
    tl.store(out_ptr + lanes, values, mask=lanes < n)


_real = rmsnorm_triton


def rmsnorm_triton(x, weight, eps=1e-6):
    _real(x, weight, eps)  # the real kernel runs, into memory thrown away
    out = torch.empty_like(x)
    answer = torch.nn.functional.rms_norm(x.float(), (x.shape[1],), weight.float(),
                                          eps).flatten().tolist()
    for start in range(0, len(answer), 8):
        chunk = (answer[start:start + 8] + [0.0] * 8)[:8]
        put_kernel[(1,)](out, start, len(answer), *chunk)
    return out
'''


@pytest.mark.exhaustive  # a launch for every eight values: a minute and a half, interpreted
def test_an_answer_handed_to_a_kernel_as_plain_numbers_does_not_pass(tmp_path):
    # torch's answer taken out with tolist() reaches the kernels as float arguments, eight a
    # launch, and a kernel only stores them: no tensor of the answer is ever given to one
    result = grade_text(tmp_path, "rmsnorm", solution_text("rmsnorm") + NUMBERS_HANDED_OVER,
                        ["triton"])
    (triton,) = result.parts
    assert triton.status == "failed", rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "answer-fed" in keys, keys
    said = " ".join(c.verdict.summary for c in triton.cases)
    assert "different plain numbers reached the kernel launches" in said


def test_a_part_line_keeps_its_indent_where_it_wraps_at_80_columns(tmp_path):
    # "not started: ... NotImplementedError; lessons/...md starts it." wraps at 80 columns:
    # its second line stays under the part, not at the left edge with the headers
    result = grade_text(tmp_path, "softmax", stub_text("softmax"), ["python", "triton"])
    lines = rendered(result, width=80).splitlines()
    started = [i for i, line in enumerate(lines) if "not started:" in line]
    assert started, lines
    for i in started:
        assert lines[i].startswith("  not started:"), lines[i]
        follow = lines[i + 1]
        assert follow.startswith("  ") and "starts it." in follow, lines[i:i + 2]


# A profile hook set in the function: it sees the grader's own calls after the learner's
# returns, and clears the note that torch computed the answer on its way to the pipe
VERDICT_REWRITTEN_BY_A_HOOK = '''
import sys
import torch


def _rewrite(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "send":
        sent = frame.f_locals.get("event")
        if sent and sent[0] == "done" and hasattr(sent[3], "computed_by_torch"):
            sent[3].computed_by_torch = sent[3].passed_through = sent[3].answer_fed = ""
            sent[3].kernel_launches = sent[3].kernel_launches or 1


def softmax_triton(x):
    sys.{setter}(_rewrite)
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
'''


@pytest.mark.parametrize("setter", ["setprofile", "settrace"])
def test_a_hook_left_set_by_the_function_is_put_back_and_fails_the_case(tmp_path, setter):
    result = grade_text(tmp_path, "softmax", VERDICT_REWRITTEN_BY_A_HOOK.replace(
        "{setter}", setter), ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"hook-left"}, keys
    assert f"sys.{setter}" in triton.cases[0].verdict.summary


def test_a_hook_set_by_the_plain_python_part_fails_it_too(tmp_path):
    module = solution_text("softmax") + (
        "\n\ndef _hook(frame, event, arg):\n    return None\n\n\n_plain = softmax_python\n\n\n"
        "def softmax_python(row):\n    __import__('sys').setprofile(_hook)\n"
        "    return _plain(row)\n")
    result = grade_text(tmp_path, "softmax", module, ["python"])
    python = result.parts[0]
    assert python.passed == 0, rendered(result)
    keys = {bug.key for case in python.cases for bug in case.verdict.causes}
    assert keys == {"hook-left"}, keys


# torch's answer handed to a copy kernel, and kept by the inputs' bytes: the grader's run for
# evidence, made with the same inputs, is handed the kept result and launches nothing
KEPT_BY_THE_INPUTS = _COPY_KERNEL + '''
_seen = {}


def softmax_triton(x):
    key = (tuple(x.shape), str(x.dtype), x.detach().cpu().numpy().tobytes())
    if key in _seen:
        return _seen[key].clone()
    out = _copy(torch.softmax(x.float(), dim=-1).to(x.dtype).contiguous())
    _seen[key] = out.clone()
    return out
'''


def test_a_result_kept_by_its_inputs_and_handed_back_to_the_evidence_run_fails(tmp_path):
    result = grade_text(tmp_path, "softmax", KEPT_BY_THE_INPUTS, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "result-kept" in keys, keys


MONITORING_LEFT_ON = '''
import sys
import torch


def _seen(code, offset):
    return None


def softmax_triton(x):
    monitoring = sys.monitoring
    if monitoring.get_tool(3) is None:
        monitoring.use_tool_id(3, "watcher")
    monitoring.register_callback(3, monitoring.events.PY_START, _seen)
    monitoring.set_events(3, monitoring.events.PY_START)
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
'''


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring came with Python "
                    "3.12; this Python has no such hook to leave set")
def test_a_monitoring_tool_left_on_is_put_back_and_fails_the_case(tmp_path):
    result = grade_text(tmp_path, "softmax", MONITORING_LEFT_ON, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"hook-left"}, keys
    assert "sys.monitoring" in triton.cases[0].verdict.summary


# A kernel handed a row statistic torch computed under a name no exercise lists as its answer
# (a sum divided on the host, a row's amax): the kernel only applies it
CENTRES_FROM_TORCH = '''
import torch
import triton
import triton.language as tl


@triton.jit
def centre_rows_kernel(out, inp, centres, out_stride, in_stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    x = tl.load(inp + row * in_stride + lanes, mask=lanes < n).to(tl.float32)
    tl.store(out + row * out_stride + lanes, x - tl.load(centres + row), mask=lanes < n)


def centre_rows_triton(x, op):
    if op not in ("max", "mean"):
        raise ValueError(f"op must be 'max' or 'mean', not {op!r}")
    if x.ndim != 2 or x.stride(1) != 1:
        raise ValueError("expected a 2-D tensor with contiguous columns")
    values = x.float()
    centres = values.{statistic} if op == "{op}" else values.amax(dim=1)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    centre_rows_kernel[(x.shape[0],)](out, x, centres.contiguous(), out.stride(0), x.stride(0),
                                      x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''
STATISTICS = {"a sum divided on the host": ("sum(dim=1) / x.shape[1]", "mean", "sum"),
              "a row's amax": ("amax(dim=1)", "max", "amax")}


@pytest.mark.parametrize("statistic", STATISTICS)
def test_a_row_statistic_torch_computed_is_answer_fed(tmp_path, statistic):
    code, op, name = STATISTICS[statistic]
    module = CENTRES_FROM_TORCH.replace("{statistic}", code).replace("{op}", op)
    result = grade_text(tmp_path, "reductions", module, ["triton"])
    triton = result.parts[0]
    assert triton.passed < len(triton.cases), rendered(result)
    blamed = [c for c in triton.cases if "answer-fed" in {b.key for b in c.verdict.causes}]
    assert any(f"torch's {name}" in c.verdict.summary for c in blamed), rendered(result)


# torch's product under another name, negated on the host and negated back by a kernel that
# copies: never equal to what the kernel was given, and no exercise lists the name
PRODUCT_UNDER_ANOTHER_NAME = '''
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(out, inp, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + at, -tl.load(inp + at, mask=at < n), mask=at < n)


def matmul_triton(a, b):
    flipped = torch.linalg.matmul(a.float(), b.float()).neg().contiguous()
    out = torch.empty(flipped.shape, dtype=a.dtype, device=a.device)
    matmul_kernel[(triton.cdiv(flipped.numel(), 1024),)](out, flipped, flipped.numel(),
                                                         BLOCK=1024)
    return out
'''


def test_a_product_under_another_name_handed_to_a_kernel_is_answer_fed(tmp_path):
    result = grade_text(tmp_path, "matmul", PRODUCT_UNDER_ANOTHER_NAME, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "answer-fed" in keys, keys


# Half the rows written by torch's softmax before the launch, the kernel given a view of the
# other half of the same output: the rows torch wrote are no part of what the kernel is given
HALF_THE_ROWS_BY_TORCH = '''
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out, inp, out_stride, in_stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    x = tl.load(inp + row * in_stride + lanes, mask=lanes < n, other=-float("inf"))
    x = x.to(tl.float32) - tl.max(x.to(tl.float32), axis=0)
    e = tl.exp(x)
    tl.store(out + row * out_stride + lanes, e / tl.sum(e, axis=0), mask=lanes < n)


def softmax_triton(x):
    out = torch.empty_like(x)
    half = x.shape[0] // 2
    out[:half] = torch.softmax(x[:half].float(), dim=-1).to(x.dtype)
    rest, inputs = out[half:], x[half:]
    softmax_kernel[(rest.shape[0],)](rest, inputs, rest.stride(0), inputs.stride(0), x.shape[1],
                                     BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''


def test_rows_torch_wrote_beside_the_view_a_kernel_stores_are_answer_fed(tmp_path):
    result = grade_text(tmp_path, "softmax", HALF_THE_ROWS_BY_TORCH, ["triton"])
    triton = result.parts[0]
    assert triton.status == "failed", rendered(result)
    # the values torch gave the kernel, or torch's rows left beside what the kernel stored
    # (zeroed, the kernel's stores leave them)
    blamed = [c for c in triton.cases
              if {"answer-fed", "written-by-torch"} & {b.key for b in c.verdict.causes}]
    assert blamed and "torch's softmax" in blamed[0].verdict.summary, rendered(result)


# A row's count of columns summed on the host from torch.ones: computed from shapes alone, no
# value of the answer's, so a kernel that masks with it is the learner's own honest work
COUNT_FROM_SHAPES = '''
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out, inp, counts, out_stride, in_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    inside = lanes < tl.load(counts + row)
    x = tl.load(inp + row * in_stride + lanes, mask=inside, other=-float("inf"))
    x = x.to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out + row * out_stride + lanes, e / tl.sum(e, axis=0), mask=inside)


def softmax_triton(x):
    if x.ndim != 2:
        raise ValueError("expected a 2-D tensor")
    if x.stride(1) != 1:
        raise ValueError("the last dimension must have stride 1")
    counts = torch.ones(x.shape, dtype=torch.int32, device=x.device).sum(dim=1).to(torch.int32)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    for _ in range(2):  # launched twice with the same counts: still no value of the answer's
        softmax_kernel[(x.shape[0],)](out, x, counts, out.stride(0), x.stride(0),
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''


def test_a_sum_of_shapes_alone_handed_to_a_kernel_is_no_part_of_the_answer(tmp_path):
    result = grade_text(tmp_path, "softmax", COUNT_FROM_SHAPES, ["triton"])
    triton = result.parts[0]
    assert triton.status == "passed", rendered(result)


# Each row's maximum and sum taken by torch under names no list holds (a pooling over the
# whole row), the kernel only applying them: seen as reductions by the shapes they return
POOLED_ROW_STATISTICS = '''
import math
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out, inp, top, total, out_stride, in_stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    x = tl.load(inp + row * in_stride + lanes, mask=lanes < n, other=0.0).to(tl.float32)
    e = tl.exp(x - tl.load(top + row))
    tl.store(out + row * out_stride + lanes, e / tl.load(total + row), mask=lanes < n)


def softmax_triton(x):
    n = x.shape[1]
    values = x.float()
    top = F.max_pool1d(values[None], n)[0, :, 0].contiguous()
    total = (F.avg_pool1d(torch.pow(math.e, values - top[:, None])[None], n)[0, :, 0] * n)
    out = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](out, x, top, total.contiguous(), out.stride(0), x.stride(0),
                                  n, BLOCK=triton.next_power_of_2(n))
    return out
'''


def test_a_reduction_under_a_name_no_list_holds_is_seen_by_its_shapes(tmp_path):
    result = grade_text(tmp_path, "softmax", POOLED_ROW_STATISTICS, ["triton"])
    triton = result.parts[0]
    assert triton.status == "failed", rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "answer-fed" in keys, keys
    assert "torch's max_pool1d" in " ".join(rendered(result).split()) or \
        "torch's avg_pool1d" in " ".join(rendered(result).split())


# A garbage collector's callback, set as the module is imported, that clears the grader's
# note of torch's answer in whatever frame a collection interrupts
GC_CALLBACK = TORCH_THROUGH_A_COPY_KERNEL + '''

def _tidy(phase, info):
    if phase != "stop":
        return
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if type(value).__name__ == "Returned":
                value.answer_fed = value.passed_through = ""
        frame = frame.f_back


gc.callbacks.append(_tidy)
gc.set_threshold(20)
'''


def test_a_garbage_collectors_callback_is_put_back_and_fails_the_case(tmp_path):
    result = grade_text(tmp_path, "softmax", GC_CALLBACK, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "hook-left" in keys, keys


# A kernel that only copies what it is handed, and stores it with a use of exp that changes
# nothing (what the compile check asks to see): the tests below hand it torch's or numpy's
# answer by routes the record of torch's work once missed
COPYING_KERNEL = '''
import math

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(out, given, out_stride, given_stride, n, SIGN: tl.constexpr,
                BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    p = tl.load(given + row * given_stride + lanes, mask=lanes < n, other=0.0)
    unused = tl.sum(tl.exp(p), axis=0) * 0.0
    tl.store(out + row * out_stride + lanes, SIGN * p + unused, mask=lanes < n)


def hand_over(x, given, sign):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    copy_kernel[(x.shape[0],)](out, given, out.stride(0), given.stride(0), x.shape[1],
                               SIGN=sign, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def softmax_triton(x):
{body}
'''
HANDED_OVER = {
    # an operator called by its overload: recorded as "_softmax.default"
    "torch's softmax by its aten overload": '''
    answer = torch.ops.aten._softmax.default(x.float(), 1, False).neg()
    return hand_over(x, answer, -1.0)''',
    # a softmax from in-place methods (whose history the last in-place step once ended) and
    # reductions under names no list holds
    "a softmax built in place from unlisted reductions": '''
    y = x.float().clone()
    index = torch.zeros(x.shape, dtype=torch.int64, device=x.device)
    top = torch.zeros((x.shape[0], 1), device=x.device)
    top.scatter_reduce_(1, index, y, "amax", include_self=False)
    top.masked_fill_(top == -math.inf, 0.0)
    y = torch.pow(math.e, y.sub_(top))
    total = torch.zeros((x.shape[0], 1), device=x.device)
    total.scatter_add_(1, index, y)
    return hand_over(x, y.div_(total).neg_(), -1.0)''',
    # numpy's answer handed over half a row per launch: no launch is given as many values as
    # the result holds, all of them together are
    "numpy's answer in half rows": '''
    v = x.double().numpy()
    e = np.exp(v - v.max(axis=1, keepdims=True))
    answer = torch.from_numpy(np.ascontiguousarray(-(e / e.sum(axis=1, keepdims=True))))
    out = torch.empty(x.shape, dtype=x.dtype)
    half = (x.shape[1] + 1) // 2
    for r in range(x.shape[0]):
        for s in range(0, x.shape[1], half):
            piece = answer[r:r + 1, s:s + half]
            out[r:r + 1, s:s + half] = hand_over(piece, piece, -1.0)
    return out''',
    # torch's answer kept aside, handed back when the values given to the kernel are seen
    # changed after the launch (the grader's run for evidence)
    "an answer kept aside for the run that changes it": '''
    answer = torch.softmax(x.float(), dim=-1)
    kept = answer.clone()
    out = hand_over(x, answer, 1.0)
    if not torch.equal(answer, kept):
        return kept.to(x.dtype)
    return out''',
    # a tensor subclass whose own __torch_function__ runs with the record off: its neg()
    # returns torch's answer
    "a tensor subclass's own __torch_function__": '''
    class Quiet(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            with torch._C.DisableTorchFunctionSubclass():
                if getattr(func, "__name__", "") == "neg":
                    return -torch.softmax(args[0].float(), dim=-1)
                return func(*args, **(kwargs or {}))

    return hand_over(x, x.as_subclass(Quiet).neg().as_subclass(torch.Tensor), -1.0)''',
    # Triton takes any object with data_ptr and dtype as a pointer: a wrapper of torch's
    # answer, which the launch counter (looking at torch tensors) once passed over
    "triton.reinterpret's wrapper": '''
    return hand_over(x, triton.reinterpret(torch.softmax(x.float(), dim=-1), tl.float32), 1.0)''',
    "an object that only holds the pointer": '''
    class Pointer:  # every attribute its tensor's (shape, strides, storage), but no tensor
        def __init__(self, tensor):
            self.tensor = tensor

        def __getattr__(self, name):
            return getattr(self.tensor, name)

    return hand_over(x, Pointer(torch.softmax(x.float(), dim=-1)), 1.0)''',
    # numpy's answer (doubled: no longer the result's values) written into a torch buffer,
    # which the record saw only allocated
    "numpy's answer written into a torch buffer": '''
    v = x.double().numpy()
    e = np.exp(v - v.max(axis=1, keepdims=True))
    buffer = torch.empty(x.shape)
    buffer.numpy()[:] = 2 * e / e.sum(axis=1, keepdims=True)
    return hand_over(x, buffer, 0.5)''',
    # the same in a buffer kept from the import, which a launch of the same case's first
    # call had left as it is: no workspace of the kernels'
    "numpy's answer written into a buffer made at import": '''
    v = x.double().numpy()
    e = np.exp(v - v.max(axis=1, keepdims=True))
    buffer = KEPT[:x.numel()].view(x.shape)
    buffer.numpy()[:] = 2 * e / e.sum(axis=1, keepdims=True)
    return hand_over(x, buffer, 0.5)''',
    # a softmax from torch functions no list names: a row's maximum by msort, its sum by the
    # first bin of an FFT
    "torch functions no list names": '''
    y = x.float()
    top = torch.msort(y.T)[-1][:, None]
    e = torch.pow(math.e, y - torch.where(torch.isinf(top), 0.0, top))
    total = torch.fft.fft(e)[:, :1].real
    return hand_over(x, 2 * e / total, 0.5)''',
    # numpy's answer written into a buffer torch filled with one constant (a fill's constant
    # and the inputs' values are what a padded input may hold, and nothing more)
    "numpy's answer written into a torch.full buffer": '''
    v = x.double().numpy()
    e = np.exp(v - v.max(axis=1, keepdims=True))
    buffer = torch.full(x.shape, -1.0)
    buffer.numpy()[:] = 2 * e / e.sum(axis=1, keepdims=True)
    return hand_over(x, buffer, 0.5)''',
    # ... and into the padding of an input padded honestly by torch.cat
    "numpy's answer written into an input's padding": '''
    v = x.double().numpy()
    e = np.exp(v - v.max(axis=1, keepdims=True))
    n = x.shape[1]
    padded = torch.cat([x.float(), torch.full(x.shape, -float("inf"))], dim=1)
    padded.numpy()[:, n:] = 2 * e / e.sum(axis=1, keepdims=True)
    return hand_over(x, padded[:, n:], 0.5)''',
    # ... and put together from fills of each of its values (a fill's constant is no value
    # of the answer's only while there are few of them)
    "plain Python's answer made of fills": '''
    rows = []
    for row in x.double().tolist():
        top = max(row)
        e = [math.exp(v - top) if top != -math.inf else 0.0 for v in row]
        rows.append(torch.cat([torch.full((1,), 2 * v / (sum(e) or 1.0)) for v in e]))
    return hand_over(x, torch.stack(rows), 0.5)''',
    # plain Python's answer put in a torch buffer one element at a time (an item set was a
    # copy of nothing)
    "plain Python's answer set item by item": '''
    buffer = torch.empty(x.shape)
    for i, row in enumerate(x.double().tolist()):
        top = max(row)
        e = [math.exp(v - top) if top != -math.inf else 0.0 for v in row]
        for j, v in enumerate(e):
            buffer[i, j] = 2 * v / (sum(e) or 1.0)
    return hand_over(x, buffer, 0.5)''',
    # a row's maximum and sum by poolings padded to return as many values as they read: no
    # shape said a reduction, and no list named them
    "padded poolings": '''
    y = x.float()[None]
    n = y.shape[-1]
    top = torch.nn.functional.max_pool1d(y, 2 * n - 1, stride=1, padding=n - 1)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.pow(math.e, y - top)
    total = torch.nn.functional.avg_pool1d(e, 2 * n - 1, stride=1, padding=n - 1,
                                           count_include_pad=True) * (2 * n - 1)
    return hand_over(x, (2 * e / total)[0], 0.5)''',
    # torch's answer with one item set afterwards: the set once ended the buffer's history
    "torch's answer with an item set after it": '''
    answer = 2 * torch.softmax(x.float(), dim=-1)
    answer[0, 0] = float(answer[0, 0])
    return hand_over(x, answer, 0.5)''',
}


@pytest.mark.interpreter  # (numpy's arrays of the half rows are the CPU's)
@pytest.mark.parametrize("route", HANDED_OVER)
def test_an_answer_handed_over_by_a_route_once_unseen_fails(tmp_path, route):
    module = COPYING_KERNEL.replace("{body}", HANDED_OVER[route].strip("\n")).replace(
        "def softmax_triton(x):", "KEPT = torch.zeros(1 << 16)\n\n\ndef softmax_triton(x):")
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    triton = result.parts[0]
    # (a buffer holding one repeated value is what an allocation holds: a width-1 softmax,
    # every value 1, written into one is not told from it)
    passed = {case.name for case in triton.cases if case.verdict.status == "passed"}
    assert passed <= {"single column"} and triton.status == "failed", rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    # (a case may be caught as reading none of the inputs instead: a row of few values put
    # together from fills of each is what a padded input's padding is, to the record)
    assert keys and keys <= {"answer-fed", "passed-through", "inputs-unread"}, keys


# The interpreter computes tl.exp with numpy's exp, looked up at each call: a module that sets
# np.exp to a table of the answer's rows has a kernel that loads x and stores exp(x) store the
# answer
NUMPY_EXP_TABLE = '''
import numpy as np
import torch
import triton
import triton.language as tl

_exp, _rows = np.exp, {}


def _answered(a, *args, **kwargs):
    if not args and not kwargs and isinstance(a, np.ndarray):
        row = _rows.get(a.tobytes())
        if row is not None:
            return row.copy()
    return _exp(a, *args, **kwargs)


np.exp = _answered


@triton.jit
def softmax_kernel(out, inp, out_stride, in_stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    x = tl.load(inp + row * in_stride + lanes, mask=lanes < n, other=-float("inf"))
    e = tl.exp(x.to(tl.float32))
    tl.store(out + row * out_stride + lanes, e / (tl.sum(e * 0.0, axis=0) + 1.0), mask=lanes < n)


def softmax_triton(x):
    block = triton.next_power_of_2(x.shape[1])
    answer = torch.softmax(x.float(), dim=-1).numpy()
    _rows.clear()
    for r, values in enumerate(x.float().numpy()):
        key = np.full(block, -np.inf, np.float32)
        key[:x.shape[1]] = values
        row = np.zeros(block, np.float32)
        row[:x.shape[1]] = answer[r]
        _rows[key.tobytes()] = row
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    softmax_kernel[(x.shape[0],)](out, x, out.stride(0), x.stride(0), x.shape[1], BLOCK=block)
    return out
'''


@pytest.mark.interpreter  # numpy computes the kernel's values only there
def test_numpy_functions_replaced_under_the_interpreter_fail_the_kernel_part(tmp_path):
    result = grade_text(tmp_path, "softmax", NUMPY_EXP_TABLE, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"grader-changed"}, keys
    assert "numpy.exp" in rendered(result)


# Objects built to raise as the grader reads them: the learner's call raised, or returned
# something no tensor, and every case after it still runs
UNREADABLE = {
    "an exception whose class name raises": ('''
class Nameless(type):
    @property
    def __name__(cls):
        raise RuntimeError("no name")


class Failure(Exception, metaclass=Nameless):
    pass


def softmax_triton(x):
    raise Failure("boom")
''', "could not be read"),
    "a result whose __class__ raises": ('''
class Shapeless:
    @property
    def __class__(self):
        raise RuntimeError("no class")


def softmax_triton(x):
    return Shapeless()
''', "Shapeless"),
}


@pytest.mark.parametrize("route", UNREADABLE)
def test_objects_that_raise_as_they_are_read_fail_each_case_as_the_learners(tmp_path, route):
    text, said = UNREADABLE[route]
    result = grade_text(tmp_path, "softmax", "import torch\n" + text, ["triton"])
    triton = result.parts[0]
    assert triton.cases and all(case.verdict.status in ("failed", "error", "skipped")
                                for case in triton.cases), rendered(result)
    assert not [case for case in triton.cases if case.verdict.status == "not-run"]
    assert said in rendered(result)


def test_a_call_that_raises_once_what_its_kernel_was_given_is_changed_fails(tmp_path):
    # torch's answer handed to a copy kernel, and a raise where the module sees it changed (the
    # run for evidence): a run that raised once said nothing either way, and the claim fell
    body = '''
    answer = torch.softmax(x.float(), dim=-1)
    kept = answer.clone()
    out = hand_over(x, answer, 1.0)
    if not torch.equal(answer, kept):
        raise RuntimeError("not now")
    return out'''
    module = COPYING_KERNEL.replace("{body}", body.strip("\n"))
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys and keys <= {"answer-fed", "passed-through"}, keys


def test_a_result_kept_between_calls_and_a_dummy_launch_on_the_repeat_fails(tmp_path):
    # the first call copies torch's answer through a kernel and keeps it; a repeat with the
    # same inputs (each run for evidence) launches a kernel that writes elsewhere and hands
    # the kept result back: it says nothing of what the kernels do with what they are given
    body = '''
    key = (tuple(x.shape), str(x.dtype), x.float().cpu().numpy().tobytes())
    if key in KEPT:
        hand_over(x, x.float(), 1.0)
        return KEPT[key].clone()
    out = hand_over(x, torch.softmax(x.float(), dim=-1), 1.0)
    KEPT[key] = out.clone()
    return out'''
    module = COPYING_KERNEL.replace("{body}", body.strip("\n")).replace(
        "def softmax_triton(x):", "KEPT = {}\n\n\ndef softmax_triton(x):")
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys and keys <= {"answer-fed", "passed-through"}, keys


@pytest.mark.gpu  # (the interpreter reads a pointer's memory through its storage)
def test_a_pointer_to_memory_the_grader_cannot_find_fails_the_case(tmp_path):
    # a tensor made at import, filled with torch's answer, handed over through an object that
    # is no tensor and hides its storage (a compiled launch needs only data_ptr and dtype):
    # the launch counter cannot follow that memory
    body = '''
    class Pointer:
        def __init__(self, tensor):
            self.tensor = tensor

        def __getattr__(self, name):
            if name in ("untyped_storage", "base"):
                raise AttributeError(name)
            return getattr(self.tensor, name)

    kept = STASH[:x.numel()].view(x.shape)
    kept.copy_(torch.softmax(x.float(), dim=-1))
    return hand_over(x, Pointer(kept), 1.0)'''
    module = COPYING_KERNEL.replace("{body}", body.strip("\n")).replace(
        "def softmax_triton(x):",
        "STASH = torch.zeros(1 << 20, device='cuda')\n\n\ndef softmax_triton(x):")
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert "pointer-unseen" in keys, rendered(result)


# tl.sum runs as Python under the interpreter: a module that replaces it with numpy's softmax
# of its input has a kernel that stores exp(log(tl.sum(x))) store the answer
TL_SUM_REPLACED = '''
import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _softmax_instead(input, axis=None, keep_dims=False, **options):
    values = input.handle.data.astype(np.float64)
    e = np.exp(values - values.max())
    return tl.core.tensor(TensorHandle((e / e.sum()).astype(np.float32), tl.float32), input.type)


tl.sum = _softmax_instead


@triton.jit
def softmax_kernel(out, inp, out_stride, in_stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    x = tl.load(inp + row * in_stride + lanes, mask=lanes < n, other=-float("inf"))
    tl.store(out + row * out_stride + lanes, tl.exp(tl.log(tl.sum(x.to(tl.float32), axis=0))),
             mask=lanes < n)


def softmax_triton(x):
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    softmax_kernel[(x.shape[0],)](out, x, out.stride(0), x.stride(0), x.shape[1],
                                  BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''


@pytest.mark.interpreter  # the interpreter runs triton.language's functions as Python
def test_a_triton_language_function_replaced_under_the_interpreter_fails(tmp_path):
    result = grade_text(tmp_path, "softmax", TL_SUM_REPLACED, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"grader-changed"}, keys
    assert "triton.language.sum" in rendered(result)


def test_a_call_that_raises_once_what_its_kernels_stored_is_changed_fails(tmp_path):
    # numpy's answer returned beside a copy kernel's launch, and a raise where the module
    # sees what the kernel stored changed (the run for evidence that changes it)
    body = '''
    scratch = hand_over(x, x, 1.0)
    if not torch.equal(scratch, x):
        raise RuntimeError("not now")
    v = x.double().cpu().numpy()
    e = np.exp(v - v.max(axis=1, keepdims=True))
    answer = torch.from_numpy(np.ascontiguousarray(e / e.sum(axis=1, keepdims=True)))
    return answer.to(device=x.device, dtype=x.dtype)'''
    module = COPYING_KERNEL.replace("{body}", body.strip("\n"))
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"not-from-kernels"}, keys
    assert "raised instead of returning values that follow them" in \
        triton.cases[0].verdict.summary


# Triton takes a tuple of pointers as one kernel argument: torch's answer inside one was once
# no tensor the launch counter looked at
ANSWER_IN_A_TUPLE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(pair, out, out_stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    p = tl.load(pair[0] + row * n + lanes, mask=lanes < n, other=0.0)
    unused = tl.sum(tl.exp(p), axis=0) * 0.0
    tl.store(out + row * out_stride + lanes, p + unused, mask=lanes < n)


def softmax_triton(x):
    answer = torch.softmax(x.float(), dim=-1).contiguous()
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    copy_kernel[(x.shape[0],)]((answer, answer), out, out.stride(0), x.shape[1],
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''


def test_an_answer_handed_over_in_a_tuple_of_pointers_fails(tmp_path):
    result = grade_text(tmp_path, "softmax", ANSWER_IN_A_TUPLE, ["triton"],
                        compile_check=False)  # the compile check's own test aside
    triton = result.parts[0]
    assert triton.passed == 0, rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys and keys <= {"answer-fed", "passed-through"}, keys


def test_a_file_of_the_workers_packages_changed_is_set_aside_though_never_imported(
        tmp_path, monkeypatch):
    # the checking process imports neither triton nor torch, and a worker loads only some of
    # their files: an execute bit taken off Triton's ptxas turned the compile check off for
    # every later check, unseen. Every file of those packages is watched from the check
    site = tmp_path / "site"
    binary = site / "workerpackage" / "bin" / "ptxas"
    binary.parent.mkdir(parents=True)
    (site / "workerpackage" / "__init__.py").write_text("", encoding="utf-8")
    binary.write_bytes(b"\x7fELF")
    binary.chmod(0o755)
    monkeypatch.setattr(installed, "installed_prefixes", lambda: (f"{site}/",))
    monkeypatch.setattr(installed, "WORKER_PACKAGES", {"workerpackage": ""})
    monkeypatch.syspath_prepend(str(site))
    guard = integrity.Guard(tmp_path)
    binary.chmod(0o644)
    repairs = guard.repair(tmp_path / ".course-state" / "set-aside")
    assert repairs.installed == [str(binary)], repairs
    assert "reinstall its package" in repairs.note("aside")


def test_a_fold_of_strided_views_is_a_reduction(tmp_path):
    # a row's maximum and sum by pairwise steps over its even and odd columns, halving until
    # one is left: each step returns as many values as each view it reads, none as many as
    # the row it reads them from
    body = '''
    def fold(values, step):
        while values.shape[1] > 1:
            if values.shape[1] % 2:
                values = torch.cat((values, values[:, -1:]), dim=1)
            values = step(values[:, 0::2], values[:, 1::2])
        return values

    y = x.float()
    top = fold(y, torch.maximum)
    e = torch.pow(math.e, y - torch.where(torch.isinf(top), 0.0, top))
    total = fold(torch.cat((e, torch.zeros_like(e)), dim=1), torch.add)
    return hand_over(x, 2 * e / total, 0.5)'''
    module = COPYING_KERNEL.replace("{body}", body.strip("\n"))
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    triton = result.parts[0]
    passed = {case.name for case in triton.cases if case.verdict.status == "passed"}
    assert passed <= {"single column"} and triton.status == "failed", rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys and keys <= {"answer-fed", "passed-through"}, keys


def test_a_copy_of_the_output_taken_after_torch_wrote_over_it_fails(tmp_path):
    # the kernel stores a copy of x; torch's answer is written over its output, and a clone of
    # that output returned: the clone's own memory was no launch's, so its change was unseen
    body = '''
    out = hand_over(x, x, 1.0)
    out.copy_(torch.softmax(x.float(), dim=-1))
    return out.clone()'''
    module = COPYING_KERNEL.replace("{body}", body.strip("\n"))
    result = grade_text(tmp_path, "softmax", module, ["triton"])
    triton = result.parts[0]
    passed = {case.name for case in triton.cases if case.verdict.status == "passed"}
    assert passed <= {"single column"} and triton.status == "failed", rendered(result)
    keys = {bug.key for case in triton.cases for bug in case.verdict.causes}
    assert keys == {"changed-after-kernel"}, keys


# Whole learner modules, each a route that once passed a kernel part with the answer computed
# outside the kernels (tests/routes/), and what the grader now says of each: the cause keys
# its failing cases may name. Every one also carries a dummy exponential and sum, kept alive in
# a store with weight zero, for the GPU compile check's list of operations.
ROUTES = {
    # torch's softmax handed over as int32 bits: a change of 1 to 127 to each integer moved
    # the floats by less than the check's tolerance
    "softmax_int32_bits": ("softmax", {"answer-fed", "passed-through"}),
    "matmul_int32_bits": ("matmul", {"answer-fed", "passed-through"}),
    # 600 alternating mul_ and div_ pushed softmax past the steps the record follows
    "softmax_history_overflow_scaled": ("softmax", {"answer-fed", "passed-through"}),
    # numpy's answer packed two float32 to a float64: half as many values as the result
    "softmax_numpy_packed_float64": ("softmax", {"answer-fed", "passed-through"}),
    # pow(e, x), a pairwise maximum of clones and index_put_ with accumulate: names on no list
    "softmax_unlisted_torch_ops_scaled": ("softmax", {"answer-fed", "passed-through"}),
    # exp as 1 / (cosh - sinh), a row's maximum and sum as pairwise folds of where(gt(a, b), a,
    # b) and + over clones of its halves: combining pieces of one memory into fewer values
    "softmax_unlisted_ops_cosh_sinh_where_add_folds": ("softmax", {"answer-fed",
                                                                   "passed-through"}),
    # an answer made where the record cannot see it, the kernels' stored zeros added to it
    "softmax_autograd_gradient": ("softmax", {"not-from-kernels", "computed-by-torch"}),
    "softmax_disable_torch_function": ("softmax", {"not-from-kernels", "computed-by-torch"}),
    "softmax_numpy_plus_kernel_zeros": ("softmax", {"not-from-kernels", "computed-by-torch"}),
    "attention_numpy_plus_kernel_zeros": ("attention", {"not-from-kernels", "computed-by-torch"}),
    # the same answer multiplied by the ones the kernel stored: zeroed, the stores zero it too
    "softmax_numpy_times_kernel_ones": ("softmax", {"not-from-kernels", "computed-by-torch"}),
    # torch's values as a tl.constexpr tuple, after a decoy launch for the compile check
    "softmax_constexpr_tuple_decoy_compile": ("softmax", {"answer-fed"}),
    # the same with each float's bits as a Python int
    "softmax_constexpr_tuple_of_int_bits": ("softmax", {"answer-fed"}),
    # torch's softmax copied into a copy of the input through a second storage over its bytes
    # (torch.from_numpy of its numpy view), which the record keyed apart
    "softmax_aliasing_storage": ("softmax", {"answer-fed", "passed-through"}),
    "matmul_aliasing_storage": ("matmul", {"answer-fed", "passed-through"}),
    # torch's values in a module global tl.constexpr tuple the kernel reads, set before it runs
    "softmax_global_constexpr_tuple": ("softmax", {"answer-fed"}),
    # numpy's softmax written as int32 bits into a tensor from torch.empty, unseen
    "softmax_numpy_bits_in_int32_allocation": ("softmax", {"answer-fed", "passed-through"}),
}
# A third walk's routes: torch (or numpy) computes the answer before the launch under names no
# list holds (roll butterflies, a custom op, gumbel_softmax with its noise cancelled, a copy of
# a tensor onto itself), and the kernel only scales what it is given; or the launcher sees the
# evidence run's change and relaunches from a copy kept aside. Run again with the inputs
# changed before each launch, each returns the same values
_UNREAD = {"inputs-unread", "answer-fed", "passed-through", "not-from-kernels",
           "computed-by-torch", "written-by-torch"}
ROUTES.update({route: (route.partition("_")[0], _UNREAD) for route in (
    "softmax_roll_butterfly", "matmul_broadcast_roll_butterfly",
    "softmax_numpy_into_allocation_then_mul_", "softmax_torch_library_custom_op",
    "softmax_torch_softmax_of_unseen_input_copy", "softmax_gumbel_softmax_noise_cancelled",
    "softmax_evidence_run_detected_and_undone", "softmax_self_copy_ends_history",
    "matmul_self_copy_ends_history")})


@pytest.mark.parametrize("route", ROUTES)
def test_a_route_that_once_passed_torchs_answer_fails(tmp_path, route):
    exercise, keys = ROUTES[route]
    text = (Path(__file__).parent / "routes" / f"{route}.py").read_text(encoding="utf-8")
    result = grade_text(tmp_path, exercise, text, ["triton"])
    triton = result.parts[0]
    assert triton.status != "passed", rendered(result)
    named = {bug.key for case in triton.cases for bug in case.verdict.causes}
    # (a case may also be caught as reading none of the inputs, the most general of them)
    assert named <= keys | {"wrong-values", "inputs-unread"}, (named, rendered(result))
    # compiled, a route written for the interpreter may fail otherwise (a tuple constexpr
    # Triton's compiler refuses, a crash), and so may one that an older Triton's interpreter
    # cannot run (3.3 indexes no constexpr tuple): failing at all is what counts there
    raised = triton_version() < (3, 4) and all(
        c.verdict.status == "error" for c in triton.cases if c.verdict.status != "skipped")
    assert named or raised or not kernel_mode.select().interpret, rendered(result)


# Honest launchers the checks above once failed (tests/honest_launchers.py): each prepares the
# inputs with torch in a way that keeps their values (masks, constants, copies by index), or
# scatters the kernel's output into place, and each kernel computes the softmax itself
@pytest.mark.parametrize("name", sorted(honest_launchers.LAUNCHERS))
def test_an_honest_launcher_that_prepares_its_inputs_with_torch_passes(tmp_path, name):
    reference = solution_text("softmax")
    assert reference.count(honest_launchers.REFERENCE_LAUNCH) == 1, "the reference's launch moved"
    text = reference.replace(honest_launchers.REFERENCE_LAUNCH, honest_launchers.LAUNCHERS[name])
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    triton = result.parts[0]
    failures = {c.name: c.verdict.summary for c in triton.cases
                if c.verdict.status not in ("passed", "skipped")}
    assert not failures, failures


# The same scratch launcher, wrong: its key leaves out the width, so a narrower call of the same
# rows and block reads the columns a wider call left behind
def test_a_scratch_buffer_kept_for_another_width_fails(tmp_path):
    honest = honest_launchers.LAUNCHERS["padded_scratch_kept_between_calls"]
    assert honest.count("(n_rows, n_cols, block,") == 1
    launcher = honest.replace("(n_rows, n_cols, block,", "(n_rows, block,")
    text = solution_text("softmax").replace(honest_launchers.REFERENCE_LAUNCH, launcher)
    result = grade_text(tmp_path, "softmax", text, ["triton"])
    failed = [c.name for c in result.parts[0].cases if c.verdict.status == "failed"]
    assert failed == ["narrower rows next"], rendered(result)


PLANTED = '''
import os as _os
import sys as _sys
with open({marker!r}, "a") as _f:
    _f.write(" ".join(_sys.argv[:2]) + "\\n")
'''


@pytest.mark.parametrize("planted", ["a namespace package", "a scratch file"])
def test_a_file_in_the_learners_folder_never_runs_in_the_grader_s_own_process(tmp_path, planted):
    # Python puts the folder a command starts in first on the path: copy and pickle try
    # `from org.python.core import PyStringMap`, and a folder org/python/core/ (no __init__.py)
    # written there by the module, or a careless scratch copy.py, ran in the check's own
    # process, where a payload can make every later verdict a pass
    folder = tmp_path / "learner"
    folder.mkdir()
    marker = tmp_path / "ran.txt"
    payload = PLANTED.format(marker=str(marker))
    if planted == "a namespace package":
        write_module(folder, "elementwise", solution_text("elementwise") + f"""
import os as _os
_core = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "org", "python", "core")
_os.makedirs(_core, exist_ok=True)
with open(_os.path.join(_core, "PyStringMap.py"), "w") as _f:
    _f.write({payload!r})
""")
    else:
        (folder / "copy.py").write_text(payload + "from_scratch = True\n", encoding="utf-8")
        write_module(folder, "elementwise", solution_text("elementwise"))

    def check(name):
        environment = dict(os.environ, PYTHONPATH=course_pythonpath(), COLUMNS="400",
                           LEARNING_WARM="0", LEARNING_FORKSERVER="0")
        return subprocess.run([sys.executable, "-m", "learning.check", name, "--part", "python",
                               "--root", str(folder)], cwd=folder, env=environment,
                              capture_output=True, text=True, timeout=300)

    done = check("elementwise")
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, \
        done.stdout + done.stderr
    ran = marker.read_text(encoding="utf-8") if marker.exists() else ""
    # no process of the grader's ran it: the check's own never, nor the worker's own imports
    assert "learning/check.py" not in ran and "learning.check" not in ran, ran
    if planted == "a namespace package":
        assert not (folder / "org").exists(), "a folder a later import runs is left in place"
    # and the verdicts after it are the learner's: a wrong module fails, a stub is not started
    write_module(folder, "elementwise", solution_text("elementwise").replace(
        "max(", "min(", 1))
    assert check("elementwise").returncode == 1
    write_module(folder, "rmsnorm", (COURSE_ROOT / "learning" / "exercises" / "rmsnorm" /
                                     "stub.py").read_text(encoding="utf-8"))
    done = check("rmsnorm")
    assert done.returncode == 1 and "not started" in done.stdout, done.stdout + done.stderr
    ran = marker.read_text(encoding="utf-8") if marker.exists() else ""
    assert "learning/check.py" not in ran and "learning.check" not in ran, ran


@pytest.mark.parametrize("python_writes", [True, False])
def test_a_result_in_a_buffer_too_large_to_copy_is_still_compared_with_what_the_kernel_left(
        tmp_path, python_writes):
    # the kernel stores a constant into a 300 MiB buffer, and plain Python then writes the
    # answer into the view it returns: memories over 256 MiB were not kept after a launch,
    # so the change went unseen and the part passed
    text = solution_text("elementwise")
    text = text.replace('''    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    add_relu_kernel[grid](out, x, y, n, BLOCK=BLOCK)
    return out''', '''    n = x.numel()
    big = torch.empty(300 * 2**20 // x.element_size(), dtype=x.dtype, device=x.device)
    add_relu_kernel[(triton.cdiv(max(n, 1), 1024),)](big, x, y, n, BLOCK=1024)
    PYTHON_WRITES
    return big[:n]''')
    assert "PYTHON_WRITES" in text
    if python_writes:
        text = text.replace("    out = tl.maximum(x + y, 0.0)\n",
                            "    out = tl.maximum(x + y, 0.0) * 0.0 + 7.0\n")
        assert "* 0.0 + 7.0" in text
        text = text.replace("PYTHON_WRITES", "big[:n] = torch.tensor([max(a + b, 0.0) for a, b "
                            "in zip(x.tolist(), y.tolist())], dtype=x.dtype)")
    else:  # the kernel's own answer, in a large buffer: right
        text = text.replace("PYTHON_WRITES", "pass")
    result = grade_text(tmp_path, "elementwise", text, ["triton"])
    verdicts = [c.verdict for c in result.parts[0].cases if c.verdict.status != "skipped"]
    if python_writes:
        assert verdicts and all(not v.passed for v in verdicts)
        assert all("changed after the last kernel launch" in v.summary for v in verdicts)
    else:
        assert verdicts and all(v.passed for v in verdicts), [v.summary for v in verdicts]


def test_a_list_that_holds_itself_is_told_at_once_not_read_until_a_time_limit(tmp_path):
    text = solution_text("elementwise")
    marker = "def add_relu_python"
    start = text.index(marker)
    end = text.index("\n    return ", start)
    line_end = text.index("\n", end + 1)
    returned = text[end + len("\n    return "):line_end]
    text = text[:end] + f"\n    held = list({returned})\n    held.append(held)\n    return held" \
        + text[line_end:]
    result = grade_text(tmp_path, "elementwise", text, ["python"])
    verdicts = [c.verdict for c in result.parts[0].cases]
    assert all(v.status == "failed" for v in verdicts), [v.status for v in verdicts]
    assert all("nest more than" in v.summary and "holds itself" in v.summary for v in verdicts)
    assert sum(v.seconds for v in verdicts) < 10


@pytest.mark.parametrize("where, replaced", [
    ("import", "builtins.len = lambda o: 3"),
    ("import", "builtins.__build_class__ = None"),
    ("call", "builtins.isinstance = lambda *a: True"),
])
def test_a_builtin_the_learners_code_replaces_is_put_back_and_fails_the_case(
        tmp_path, where, replaced):
    # replaced at import, len made the grader unable to read what its own process sent, and
    # __build_class__ ended the worker as if the grader's code had failed: the learner's code
    # was not named
    text = solution_text("elementwise")
    if where == "import":
        text += f"\nimport builtins\n{replaced}\n"
    else:
        start = text.index("def add_relu_python(")
        body = text.index('"""', text.index('"""', start) + 3) + 3
        text = text[:body] + f"\n    import builtins\n    {replaced}" + text[body:]
    result = grade_text(tmp_path, "elementwise", text, ["python"])
    verdicts = [c.verdict for c in result.parts[0].cases]
    name = replaced.split(" =")[0]
    # said with the first case (an import's, once; a call's, every time), so the part fails
    assert not result.ok and not verdicts[0].passed
    assert name in verdicts[0].summary and verdicts[0].bug.key == "hook-left", \
        verdicts[0].summary
    if where == "call":
        assert not any(v.passed for v in verdicts)
    assert all("grader's own code failed" not in v.summary for v in verdicts)
    right = grade_text(tmp_path, "elementwise", solution_text("elementwise"), ["python"])
    assert right.ok


GUARD_WATCH = '''
import atexit, sys
from learning.grader import integrity
first = []
made = integrity.Guard.__init__
def watched(self, *args, **kwargs):
    made(self, *args, **kwargs)
    if not first:
        first.append(set(sys.modules))
integrity.Guard.__init__ = watched
atexit.register(lambda: print("IMPORTED AFTER THE GUARD:",
                              sorted(set(sys.modules) - first[0]) if first else "no guard"))
from learning import check
sys.exit(check.main(sys.argv[1:]))
'''


@pytest.mark.parametrize("module, arguments", [
    ("wrong", ()), ("wrong", ("--json",)), ("stub", ()), ("right", ("--part", "python"))])
def test_the_check_process_imports_nothing_after_its_guard_is_taken(tmp_path, module,
                                                                     arguments):
    # a module the judging process first imports after the learner's code ran runs its file,
    # or a compiled cache of it, as that code left it: a cache written for rich.padding
    # (imported to draw the result) made every later verdict a pass
    text = {"wrong": solution_text("softmax").replace("denominator = sum(numerator)",
                                                      "denominator = sum(numerator) + 1.0"),
            "stub": (COURSE_ROOT / "learning" / "exercises" / "softmax" / "stub.py").read_text(
                encoding="utf-8"),
            "right": solution_text("softmax")}[module]
    write_module(tmp_path, "softmax", text)
    script = tmp_path / "watch_imports.py"
    script.write_text(GUARD_WATCH, encoding="utf-8")
    environment = dict(os.environ, PYTHONPATH=course_pythonpath(), COLUMNS="80")
    done = subprocess.run([sys.executable, str(script), "softmax", "--root", str(tmp_path),
                           *arguments], cwd=tmp_path, env=environment, capture_output=True,
                          text=True, timeout=600)
    said = [line for line in done.stdout.splitlines() + done.stderr.splitlines()
            if line.startswith("IMPORTED AFTER THE GUARD:")]
    assert said == ["IMPORTED AFTER THE GUARD: []"], done.stdout[-2000:] + done.stderr[-2000:]


def test_a_module_added_to_the_standard_librarys_folder_is_set_aside(tmp_path):
    # sitecustomize.py in the standard library's folder runs at every Python's start, and a
    # module there is found before site-packages: the folder is watched like site-packages
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    if not os.access(stdlib, os.W_OK):
        pytest.skip(f"{stdlib} cannot be written here, by a learner's code either")
    planted = stdlib / "course_test_planted.py"
    assert not planted.exists()
    text = solution_text("elementwise") + f"\nopen({str(planted)!r}, 'w').write('X = 1')\n"
    try:
        grade_text(tmp_path, "elementwise", text, ["python"])
        assert not planted.exists(), "a module written into the standard library was left"
    finally:
        with contextlib.suppress(OSError):
            planted.unlink()


def test_a_result_in_a_memory_too_large_even_to_hash_fails_as_uncompared():
    # past calls.LARGEST_DIGESTED_BYTES (a GPU has no memory cap to stop it) what a launch left
    # is not kept at all: a result there is failed as uncompared, not passed unseen
    import numpy as np
    import torch

    from learning.grader import calls, compare
    from learning.grader.returned import Returned

    counter = calls.LaunchCounter()
    big = torch.zeros(64)
    counter.too_large.add(big.untyped_storage().data_ptr())
    assert counter.changed_since_launch(big[:10]) == ()
    assert counter.uncompared == [0]
    part = registry.find("elementwise").part("triton")
    case = part.cases[0]
    returned = Returned("Tensor", values=np.zeros(10), shape=(10,), strides=(1,),
                        dtype="float32", device="cpu", uncompared=(0,), kernel_launches=1)
    verdict = compare._judge_structure(part, returned, np.zeros(10),
                                       {"dtype": "float32", "device": "cpu",
                                        "filename": "elementwise.py"})
    assert verdict is not None and verdict.bug.key == "output-uncompared", verdict
    assert case.name


def test_a_zip_made_where_the_path_names_one_is_set_aside(tmp_path, monkeypatch):
    # python311.zip is on every process's path, ahead of the standard library, and usually
    # absent: one made there would be imported from by the next check's processes
    zip_path = tmp_path / "site" / "python3xx.zip"
    zip_path.parent.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(zip_path)])
    monkeypatch.setattr(installed, "is_installed", lambda path, prefixes=None: True)
    learner = tmp_path / "learner"
    learner.mkdir()
    guard = integrity.Guard(learner)
    zip_path.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip archive
    guard.repair(tmp_path / "aside")
    assert not zip_path.exists()
