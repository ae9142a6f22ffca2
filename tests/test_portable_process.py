"""The grader's processes started as on Windows, run here with LEARNING_PORTABLE_PROCESS=1.

Windows cannot fork, pass a descriptor or kill a process group, so there a check starts every
worker fresh, hands it the event pipe's handle and ends its process tree with taskkill (pipes
are read by threads on every system). The switch makes a check on Linux take that path, with
only the Windows calls, each in a function of its own, left to their POSIX counterparts; the
end of this file tests those functions with stand-ins for what only Windows has.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from learning import check
from learning.grader import childproc, handover, registry, stopped
from learning.grader.worker_events import CaseKey
from learning.grader.worker_run import Settings, WorkerRun
from tests.helpers import alive, gone_within, grade_text, solution_text, write_module

SOFTMAX = registry.find("softmax")


@pytest.fixture
def portable(monkeypatch):
    """Checks in this test start their processes as on Windows. The test suite's fork server
    stays asked for (LEARNING_FORKSERVER), so a worker forked from it would show the switch
    failed. Counts how often a process was started and a process tree ended."""
    monkeypatch.setenv(handover.PORTABLE_SWITCH, "1")
    calls = {"spawn": 0, "kill": 0}
    spawn_options, end = handover.spawn_options, handover.end

    def counted_spawn(fd):
        calls["spawn"] += 1
        return spawn_options(fd)

    def counted_kill(process, learner_pid=0):
        calls["kill"] += 1
        return end(process, learner_pid)

    monkeypatch.setattr(handover, "spawn_options", counted_spawn)
    monkeypatch.setattr(handover, "end", counted_kill)
    return calls


def forked(result) -> bool:
    return any("forked from a warm process" in what for _, what in result.timeline)


def test_the_switch_chooses_the_portable_path(monkeypatch):
    monkeypatch.delenv(handover.PORTABLE_SWITCH, raising=False)
    assert not handover.portable()  # this is Linux: workers may fork from a warm process
    monkeypatch.setenv(handover.PORTABLE_SWITCH, "1")
    assert handover.portable()
    monkeypatch.delenv(handover.PORTABLE_SWITCH)
    monkeypatch.setattr(handover, "os", types.SimpleNamespace(**{**vars(os), "name": "nt"}))
    assert handover.portable()  # on Windows, always


@pytest.mark.compile_check
def test_a_right_answer_passes_every_part(tmp_path, portable, mode):
    result = grade_text(tmp_path, "softmax", solution_text("softmax"))
    assert result.ok, [(c.name, c.verdict.summary) for p in result.parts for c in p.cases
                       if not c.verdict.passed]
    assert [p.status for p in result.parts] == ["passed", "passed"]
    assert not forked(result)
    if mode.interpret:  # the GPU compile check's process was started the same way, and answered
        compile_check = result.parts[1].compile_check
        assert compile_check is not None and compile_check.ran, compile_check
        assert portable["spawn"] == 2
    assert portable["kill"] >= portable["spawn"] >= 1


def test_a_wrong_answer_is_caught(tmp_path, portable):
    module = solution_text("softmax") + "\n\ndef softmax_python(values):\n    return list(values)\n"
    result = grade_text(tmp_path, "softmax", module, ["python"])
    (part,) = result.parts
    assert part.status == "failed" and not result.ok
    first = part.cases[0].verdict
    assert first.status == "failed" and first.mismatch_count == 3, first.summary
    assert not forked(result) and portable["spawn"] == 1


def test_an_endless_loop_is_ended_at_the_time_limit_with_every_process_it_started(
        tmp_path, portable):
    marker = tmp_path / "pids"
    module = solution_text("softmax") + f'''

import os as _os
import subprocess as _subprocess
import sys as _sys


def softmax_python(values):
    child = _subprocess.Popen([_sys.executable, "-c", "import time; time.sleep(600)"])
    with open({str(marker)!r}, "w") as handle:
        handle.write(f"{{_os.getpid()}} {{child.pid}}")
    while True:
        pass
'''
    start = time.monotonic()
    result = grade_text(tmp_path, "softmax", module, ["python"], case_seconds=2)
    seconds = time.monotonic() - start
    (part,) = result.parts
    verdict = part.cases[0].verdict
    assert verdict.status == "timed-out"
    assert verdict.summary.startswith("did not finish within 2 s in case python/worked example")
    assert {c.verdict.status for c in part.cases[1:]} == {"not-run"}
    worker, child = (int(pid) for pid in marker.read_text().split())
    assert gone_within(worker, 5), "the worker outlived the check"
    assert gone_within(child, 5), "the process the learner's code started outlived the check"
    assert portable["kill"] == 1 and seconds < 60


# the spawned worker's status comes back one way whatever ended it: the quick run exits; a
# signal is exhaustive here, and quick on the forked path in test_robustness's
# test_a_process_killed_by_a_signal_is_reported_with_the_signal_and_its_likely_cause
@pytest.mark.parametrize("call, summary", [
    ("os._exit(3)", "the process exited (status 3) in case python/worked example: the code "
                    "ended the program"),
    pytest.param("os.abort()", "the process crashed (signal 6, SIGABRT) in case python/worked "
                 "example: the process aborted itself", marks=pytest.mark.exhaustive),
])
def test_a_process_that_dies_in_a_case_is_reported(tmp_path, portable, call, summary):
    module = solution_text("softmax") + f"\n\nimport os\n\ndef softmax_python(values):\n" \
                                        f"    {call}\n"
    result = grade_text(tmp_path, "softmax", module, ["python"])
    (part,) = result.parts
    verdict = part.cases[0].verdict
    assert verdict.status == "crashed" and verdict.summary.startswith(summary), verdict.summary
    assert {c.verdict.status for c in part.cases[1:]} == {"not-run"}
    assert not result.ok and not forked(result)


def test_a_large_result_and_a_flood_of_output_come_through(tmp_path, portable):
    """26 MB of float64 values in one event, and 3 MB printed: the output is kept up to its
    cap and the rest counted, and the result arrives whole."""
    module = solution_text("softmax") + '''

def softmax_python(values):
    import torch

    print("x" * 3_000_000)
    return torch.arange(3_300_000, dtype=torch.float64)
'''
    write_module(tmp_path, "softmax", module)
    run = WorkerRun(Settings(SOFTMAX, tmp_path / "softmax.py"), [SOFTMAX.part("python")],
                    only={"python": ["worked example"]})
    run.execute()
    assert run.heard.finished and not run.ended.timed_out and not run.ended.garbled
    values = run.heard.outcomes[("python", "worked example")].values
    assert values.shape == (3_300_000,) and values[0] == 0 and values[-1] == 3_299_999
    assert values.sum() == 3_299_999 * 3_300_000 // 2
    dropped = 3_000_001 - childproc.MAX_CAPTURED_BYTES  # the line and its newline, less the cap
    assert run.output == "x" * childproc.MAX_CAPTURED_BYTES + f"\n[output cut: {dropped} more " \
                                                              "bytes]"
    assert portable["spawn"] == 1


def test_ctrl_c_during_a_check_ends_the_worker_at_once(tmp_path, portable, monkeypatch):
    """What watch's Ctrl-C does: the worker (in a process group of its own, which Ctrl-C does
    not reach) is ended at once, not after the 5 s given to a worker that stopped talking."""
    module = solution_text("softmax") + f"""

import os as _os
import time as _time


def softmax_python(values):
    with open({str(tmp_path / "pid")!r}, "w") as handle:
        handle.write(str(_os.getpid()))
    _time.sleep(600)
"""
    write_module(tmp_path, "softmax", module)
    handle, pressed = WorkerRun._handle, []

    def interrupted(run, event):
        handle(run, event)
        if event[0] == "start":
            while not ((tmp_path / "pid").exists() and (tmp_path / "pid").read_text()):
                time.sleep(0.05)  # the file exists a moment before the pid is in it
            pressed.append(time.monotonic())
            raise KeyboardInterrupt

    monkeypatch.setattr(WorkerRun, "_handle", interrupted)
    run = WorkerRun(Settings(SOFTMAX, tmp_path / "softmax.py"), [SOFTMAX.part("python")])
    with pytest.raises(KeyboardInterrupt):
        run.execute()
    assert time.monotonic() - pressed[0] < 2
    assert not alive(int((tmp_path / "pid").read_text())) and portable["kill"] >= 1


def test_check_grades_on_windows_instead_of_refusing(tmp_path, capsys, monkeypatch):
    """os.name and sys.platform as on Windows, for check and the process functions; the two
    Windows calls, which cannot run here, are replaced by their POSIX counterparts."""
    write_module(tmp_path, "softmax", solution_text("softmax"))
    windows_calls = []

    def spawn_options(fd):
        windows_calls.append("spawn")
        return fd, {"pass_fds": (fd,), "start_new_session": True}

    def kill_tree(pid):
        windows_calls.append("kill")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)

    monkeypatch.setattr(handover, "_windows_spawn_options", spawn_options)
    monkeypatch.setattr(handover, "_windows_kill_tree", kill_tree)
    as_on_windows = types.SimpleNamespace(**{**vars(os), "name": "nt"})
    monkeypatch.setattr(handover, "os", as_on_windows)
    monkeypatch.setattr(sys, "platform", "win32")
    code = check.main(["softmax", "--part", "python", "--memory", "2", "--root", str(tmp_path)])
    monkeypatch.setattr(sys, "platform", "linux")
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert "Python 11/11" in out and "WSL" not in out
    assert "note: --memory caps nothing on Windows" in out
    assert windows_calls == ["spawn", "kill"]


# --- what only Windows has, with stand-ins ----------------------------------------------------


def test_on_windows_the_event_pipe_is_handed_over_as_the_one_handle_inherited(monkeypatch):
    seen = []
    msvcrt = types.SimpleNamespace(get_osfhandle=lambda fd: 1000 + fd,
                                   open_osfhandle=lambda handle, flags: (handle, flags))
    monkeypatch.setitem(sys.modules, "msvcrt", msvcrt)
    monkeypatch.setattr(os, "set_handle_inheritable", lambda *a: seen.append(a), raising=False)
    monkeypatch.setattr(subprocess, "STARTUPINFO", types.SimpleNamespace, raising=False)
    monkeypatch.setattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200, raising=False)
    monkeypatch.setattr(os, "O_BINARY", 0x8000, raising=False)
    number, options = handover._windows_spawn_options(5)
    assert number == 1005 and seen == [(1005, True)]
    assert options["startupinfo"].lpAttributeList == {"handle_list": [1005]}
    assert options["close_fds"] is True and options["creationflags"] == 0x200
    assert set(options) == {"startupinfo", "close_fds", "creationflags"}
    assert handover._windows_open_handle(1005) == (1005, os.O_WRONLY | 0x8000)


def test_on_windows_a_process_tree_is_ended_with_taskkill(monkeypatch):
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda argv, **options: ran.append(argv))
    handover._windows_kill_tree(4321)
    assert ran == [["taskkill", "/F", "/T", "/PID", "4321"]]

    def missing(argv, **options):
        raise FileNotFoundError(argv[0])

    monkeypatch.setattr(subprocess, "run", missing)
    handover._windows_kill_tree(4321)  # no taskkill: end() ends the process itself


def test_ending_a_process_on_windows_takes_taskkill_then_ends_the_process_itself(monkeypatch):
    steps = []
    monkeypatch.setattr(handover, "_windows_kill_tree", lambda pid: steps.append(("tree", pid)))
    monkeypatch.setattr(handover, "os", types.SimpleNamespace(**{**vars(os), "name": "nt"}))
    process = types.SimpleNamespace(pid=77, kill=lambda: steps.append(("kill", 77)),
                                    wait=lambda timeout: steps.append(("wait", timeout)) or 1)
    assert handover.end(process) == 1
    assert steps == [("tree", 77), ("kill", 77), ("wait", handover.STATUS_SECONDS)]


@pytest.mark.parametrize("code, words, cause", [
    (-11, "signal 11, SIGSEGV", "likely an out-of-bounds load or store"),
    (0xC0000005, "exception 0xC0000005, an access violation",
     "likely an out-of-bounds load or store"),
    (0xC0000409, "exception 0xC0000409, a fast fail", "the process ended itself at once"),
    (0xC0000135, "exception 0xC0000135, an unhandled exception", ""),
])
def test_a_crash_is_named_from_its_exit_status(code, words, cause):
    named, why = childproc.crash(code)
    assert named == words and cause in why


@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_an_exit_status_of_the_programs_own_is_no_crash(code):
    assert childproc.crash(code) is None


def test_a_worker_ended_by_a_windows_exception_is_reported_as_a_crash():
    run = WorkerRun(Settings(SOFTMAX, Path("softmax.py")), [SOFTMAX.part("triton")])
    run.heard.current, run.ended.returncode = CaseKey("triton", "width 3"), 0xC0000005
    verdict = stopped.failure_verdict(run)
    assert verdict.status == "crashed"
    assert verdict.summary == "the process crashed (exception 0xC0000005, an access violation) " \
                              "in case triton/width 3: likely an out-of-bounds load or " \
                              "store (or a pointer computed from the wrong tensor)"
