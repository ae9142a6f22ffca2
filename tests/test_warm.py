"""The learners' warm server (learning.grader.warm): a re-check forks its worker instead of starting
Python, torch and triton again; anything odd about the server falls back to a fresh process."""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from learning.grader import forkserver, registry, runner, warm
from tests.helpers import solution_text, write_module

FORKED = "worker: forked from a warm process"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the warm server needs fork and Linux sockets")


@pytest.fixture
def warm_on(tmp_path, monkeypatch):
    """The warm server switched on, its sockets in a folder of this test's own."""
    sockets = Path(tempfile.mkdtemp(prefix="warm-", dir="/tmp"))  # a socket path is short
    monkeypatch.setenv(warm.SWITCH, "1")
    monkeypatch.setenv(warm.IDLE_SWITCH, "2")
    monkeypatch.setenv("TMPDIR", str(sockets))
    monkeypatch.setattr(tempfile, "tempdir", str(sockets))
    monkeypatch.setattr(forkserver, "enabled", lambda: False)  # not the test suite's server
    warm._connected.clear()
    yield sockets
    for server in warm._connected.values():
        server.close()
    warm._connected.clear()
    shutil.rmtree(sockets, ignore_errors=True)


def servers(sockets):
    folder = sockets / f"triton-course-{os.getuid()}"
    return sorted(folder.glob("*.sock")) if folder.exists() else []


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def course(tmp_path):
    root = tmp_path / "course"
    root.mkdir(exist_ok=True)
    return root


def grade_softmax(root):
    return runner.grade(registry.find("softmax"), root, parts=["python"])


def test_a_recheck_forks_from_the_server_the_first_check_started(warm_on, tmp_path):
    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    first = grade_softmax(root)
    assert first.ok and FORKED in [what for _, what in first.timeline]
    assert len(servers(warm_on)) == 1
    warm._connected.clear()  # as a new check process would start: connect afresh
    second = grade_softmax(root)
    assert second.ok and FORKED in [what for _, what in second.timeline]
    assert len(servers(warm_on)) == 1, "the second check started another server"


def test_a_wrong_answer_and_a_hang_are_graded_as_without_the_server(warm_on, tmp_path):
    root = course(tmp_path)
    wrong = solution_text("softmax").replace("return output  # store", "return output[::-1]")
    assert wrong != solution_text("softmax")
    write_module(root, "softmax", wrong)
    result = grade_softmax(root)
    assert FORKED in [what for _, what in result.timeline]
    assert not result.ok and result.parts[0].passed < result.parts[0].graded
    write_module(root, "softmax", "def softmax_python(values):\n    while True:\n"
                 "        pass\n")
    result = runner.grade(registry.find("softmax"), root, parts=["python"], case_seconds=1)
    assert FORKED in [what for _, what in result.timeline]
    assert result.parts[0].cases[0].verdict.status == "timed-out"


@pytest.mark.exhaustive  # waits out an idle limit
def test_the_server_exits_when_idle_and_removes_its_socket(warm_on, tmp_path):
    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    assert grade_softmax(root).ok
    (path,) = servers(warm_on)
    for server in warm._connected.values():
        server.close()  # the check process ends
    warm._connected.clear()
    assert wait_for(lambda: not path.exists(), 20), "the idle server did not exit"


def test_a_socket_left_by_a_dead_server_is_replaced(warm_on, tmp_path):
    folder = warm.folder()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    dead.bind(str(folder / f"{warm.key(True)}.sock"))
    dead.close()  # the file stays, and nobody listens on it
    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    result = grade_softmax(root)
    assert result.ok and FORKED in [what for _, what in result.timeline]


def test_a_folder_too_deep_for_a_socket_path_is_not_used(warm_on, tmp_path, monkeypatch):
    deep = warm_on / ("d" * 90)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert warm.folder() is None
    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    result = grade_softmax(root)
    assert result.ok and FORKED not in [what for _, what in result.timeline]


def test_a_folder_others_could_open_is_not_used(warm_on, tmp_path):
    folder = warm_on / f"triton-course-{os.getuid()}"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    result = grade_softmax(root)
    assert result.ok and FORKED not in [what for _, what in result.timeline]
    assert servers(warm_on) == []


def test_switched_off_it_starts_a_process_as_before(warm_on, tmp_path, monkeypatch):
    monkeypatch.setenv(warm.SWITCH, "0")
    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    result = grade_softmax(root)
    assert result.ok and FORKED not in [what for _, what in result.timeline]
    assert servers(warm_on) == []


def test_the_key_names_the_mode_and_the_courses_code(tmp_path, monkeypatch):
    (tmp_path / "learning").mkdir()
    source = tmp_path / "learning" / "module.py"
    source.write_text("x = 1\n")
    monkeypatch.setattr(warm, "COURSE_ROOT", tmp_path)
    before = warm.key(True)
    assert before != warm.key(False)
    source.write_text("x = 22\n")
    assert warm.key(True) != before, "an edit to the course kept the old server"


def test_a_check_from_the_command_line_uses_the_server_of_the_one_before(warm_on, tmp_path):
    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    command = [sys.executable, "-m", "learning.check", "softmax", "--part", "python", "--root",
               str(root)]
    env = dict(os.environ, LEARNING_FORKSERVER="0")
    for _ in range(2):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(servers(warm_on)) == 1


@pytest.mark.gpu
def test_a_gpu_check_forks_and_initialises_cuda_in_the_worker(warm_on, tmp_path):
    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    for _ in range(2):
        warm._connected.clear()
        result = runner.grade(registry.find("softmax"), root)
        assert result.ok and result.mode and not result.mode.interpret, result.mode
        assert FORKED in [what for _, what in result.timeline]
    assert len(servers(warm_on)) == 1


def test_the_readme_says_how_long_the_warm_process_stays():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert f"after {int(warm.IDLE_SECONDS // 60)} minutes without a check" in \
        " ".join(readme.split())
    assert f"{warm.SWITCH}=0" in readme


@pytest.mark.exhaustive  # tests/test_hostile.py stops a warm process in the quick set
def test_a_stopped_server_costs_seconds_not_minutes(warm_on, tmp_path, monkeypatch):
    # a warm server that stops answering (stopped, swapped out) made every check wait three
    # minutes in silence; a fork it does not answer in FORK_SECONDS is given up, and the check
    # starts its own process
    import signal
    import struct

    root = course(tmp_path)
    write_module(root, "softmax", solution_text("softmax"))
    assert grade_softmax(root).ok
    (connection,) = warm._connected.values()
    credentials = connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                             struct.calcsize("3i"))
    pid = struct.unpack("3i", credentials)[0]
    monkeypatch.setattr(forkserver, "FORK_SECONDS", 2.0)
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        again = grade_softmax(root)
        took = time.monotonic() - started
    finally:
        # the check kills a stopped server it gives up on (warm.discard): it may be gone, or
        # a zombie not reaped yet, by now
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert again.ok and FORKED not in [what for _, what in again.timeline]
    assert took < 60, took
