"""learning.check as a learner meets it: its output, its exit codes, and what it never does."""

import os

import pytest

from learning import check
from learning.grader import mode as kernel_mode
from tests.helpers import solution_text, stub_text, write_module

WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}


@pytest.fixture(autouse=True)
def wide_plain_console(monkeypatch):
    for key, value in WIDE.items():
        monkeypatch.setenv(key, value)


def run_check(capsys, *argv):
    code = check.main(list(argv))
    return code, capsys.readouterr().out


def with_python(body: str) -> str:
    return f"{solution_text('softmax')}\n\n{body}\n"


def test_check_passes_the_reference_and_points_to_the_next_lesson(tmp_path, capsys):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path))
    assert code == 0
    assert "Grade: Python 11/11" in out
    assert "kernels: Triton interpreter (CPU)" in out or "compiled on the GPU" in out
    assert "Well done" in out


def test_grades_that_cannot_be_saved_are_reported_and_still_steer_the_next_step(tmp_path,
                                                                               capsys):
    # a file where the state folder should be: nothing can be saved, and the check says so;
    # its next step comes from this run's grades, not from the empty saved ones
    write_module(tmp_path, "softmax", solution_text("softmax"))
    (tmp_path / ".course-state").write_text("not a folder")
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python")
    assert code == 0 and "Grade: Python 11/11" in out
    assert "the grades could not be saved in" in out
    assert "Next: lessons/04-softmax.md" not in out
    # a hint that cannot be remembered says how to get the next one
    write_module(tmp_path, "softmax", stub_text("softmax"))
    code = check.main(["softmax", "--root", str(tmp_path), "--hint"])
    out = capsys.readouterr().out
    assert code == 0 and "Hint 1 of" in out and "ask for the next one with --hint 2" in out


def test_check_reports_not_started_with_the_lesson_to_read(tmp_path, capsys):
    write_module(tmp_path, "softmax", stub_text("softmax"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path))
    assert code == 1
    assert "Python not started · Triton not started" in out
    assert "lessons/04-softmax.md" in out and "lessons/08-softmax-triton.md" in out


def test_a_not_implemented_error_from_elsewhere_is_an_error_not_a_part_not_started(
        tmp_path, capsys):
    # attention's Python part, written, calls softmax.py's, still a stub: the stub's raise is
    # another module's, and "not started" would send the learner to a lesson already done
    write_module(tmp_path, "softmax", stub_text("softmax"))
    write_module(tmp_path, "attention", solution_text("attention") + """

from softmax import softmax_python as _from_softmax

_written = attention_python


def attention_python(*args, **kwargs):
    _from_softmax([1.0])
    return _written(*args, **kwargs)
""")
    code, out = run_check(capsys, "attention", "--root", str(tmp_path), "--part", "python")
    assert code == 1 and "not started" not in out
    assert "raised NotImplementedError: softmax_python is not written yet" in out
    # a library's abstract method raises it too (as a torch operation with no kernel for its
    # arguments does)
    write_module(tmp_path, "softmax", with_python(
        "def softmax_python(values):\n    import asyncio\n"
        "    asyncio.AbstractEventLoop().is_running()"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python")
    assert code == 1 and "not started" not in out and "raised NotImplementedError" in out


def test_a_hint_asked_after_a_pass_says_which_parts_pass_and_when_the_reference_opens(
        tmp_path, capsys):
    # the Python part of reductions passes, its Triton part is not checked yet: the lessons'
    # own command, with --part python, must not say every part passes or offer a locked
    # reference
    write_module(tmp_path, "reductions", solution_text("reductions"))
    code, out = run_check(capsys, "reductions", "--root", str(tmp_path), "--part", "python")
    assert code == 0 and "Python 10/10" in out, out
    code, out = run_check(capsys, "reductions", "--root", str(tmp_path), "--part", "python",
                          "--hint")
    flat = " ".join(out.split())
    assert "The python part of reductions passes" in flat and "Every part" not in flat, flat
    assert "opens once every part passes" in flat
    # every part passed (traffic has one): the reference is offered
    write_module(tmp_path, "traffic", solution_text("traffic"))
    run_check(capsys, "traffic", "--root", str(tmp_path))
    code, out = run_check(capsys, "traffic", "--root", str(tmp_path), "--hint")
    flat = " ".join(out.split())
    assert "Every part of traffic passes" in flat
    assert "python -m learning.solution traffic shows the reference" in flat


def test_the_next_step_repeats_the_parts_the_learner_asked_for(tmp_path, capsys):
    # "--part plan" on a stub: the command to run next grades that part again, not every part
    write_module(tmp_path, "matmul", stub_text("matmul"))
    code, out = run_check(capsys, "matmul", "--root", str(tmp_path), "--part", "plan")
    assert code == 1 and "Plan not started" in out
    assert out.rstrip().endswith("then run python -m learning.check matmul --part plan"), out
    # a wrong plan: fix it, then run the same command again
    wrong = stub_text("matmul").replace(
        'raise NotImplementedError("matmul_plan is not written yet: lesson 12\'s second task")',
        "return {}")
    write_module(tmp_path, "matmul", wrong)
    code, out = run_check(capsys, "matmul", "--root", str(tmp_path), "--part", "plan")
    assert code == 1
    assert "Next: fix matmul.py, then run python -m learning.check matmul --part plan again" \
        in out, out
    # every part asked for: the plain command
    code, out = run_check(capsys, "matmul", "--root", str(tmp_path))
    assert "then run python -m learning.check matmul again" in out, out


def test_check_exits_zero_when_the_started_part_passes_and_the_other_is_not_started(
        tmp_path, capsys):
    text = stub_text("softmax").replace(
        '    raise NotImplementedError("softmax_python is not written yet: lesson 04 starts it")',
        "    m = max(values)\n    e = [math.exp(v - m) for v in values]\n"
        "    return [x / sum(e) for x in e]")
    write_module(tmp_path, "softmax", text)
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path))
    assert code == 0
    assert "Python 11/11 · Triton not started" in out


def test_failing_case_shows_expected_got_and_likely_cause(tmp_path, capsys):
    write_module(tmp_path, "softmax", with_python(
        "def softmax_python(values):\n    return [math.exp(v) for v in values]"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python")
    assert code == 1
    assert "FAIL" in out and "worked example" in out
    assert "expected [0.090030573, 0.244728471, 0.665240956]" in out
    assert "got      [2.718281828, 7.389056099, 20.085536923]" in out
    assert "likely cause: exponentials alone are not probabilities" in out
    assert "Next: fix softmax.py" in out


def test_learner_exception_shows_the_learners_traceback_not_the_graders(tmp_path, capsys):
    write_module(tmp_path, "softmax", with_python(
        "def softmax_python(values):\n"
        "    total = sum(math.exp(v) for v in values)\n"
        "    return [math.exp(v) / total for v in values]"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python")
    assert code == 1
    assert "raised OverflowError: math range error" in out
    assert f'File "{tmp_path / "softmax.py"}"' in out
    assert not any(f"grader/{name}.py" in out for name in ("worker", "calls", "runner"))
    assert "likely cause: math.exp overflows" in out


def test_syntax_error_names_the_file_and_line(tmp_path, capsys):
    write_module(tmp_path, "softmax", "def softmax_python(values):\n    return [\n")
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path))
    assert code == 1
    assert "syntax error in softmax.py, line" in out
    assert "not run: softmax.py could not be imported" in out and "NOT RUN" not in out


def test_missing_function_asks_whether_it_was_renamed(tmp_path, capsys):
    text = solution_text("softmax").replace("def softmax_triton(", "def my_softmax(")
    write_module(tmp_path, "softmax", text)
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "triton")
    assert code == 1
    assert "softmax.py has no function softmax_triton; did you rename it?" in out


def test_exit_from_learner_code_is_a_failure_never_a_pass(tmp_path, capsys):
    write_module(tmp_path, "softmax", with_python(
        "import sys\n\ndef softmax_python(values):\n    sys.exit(0)"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python")
    assert code == 1
    assert "sys.exit()" in out


def test_hard_exit_from_learner_code_is_reported_as_such(tmp_path, capsys):
    write_module(tmp_path, "softmax", with_python(
        "import os\n\ndef softmax_python(values):\n    os._exit(0)"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python")
    assert code == 1
    assert "the process exited (status 0) in case python/worked example" in out


def test_endless_loop_times_out_and_the_rest_is_not_run(tmp_path, capsys):
    write_module(tmp_path, "softmax", with_python(
        "def softmax_python(values):\n    while True:\n        pass"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python",
                          "--timeout", "1")
    assert code == 1
    assert "did not finish within 1 s in case python/worked example" in out
    assert "likely cause" not in out  # a timeout is a fact; the case's purpose is no cause
    assert "NOT RUN" in out


def test_check_never_writes_the_learners_files(tmp_path, capsys):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python")
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != ".course-state"}
    assert before == after  # only the progress folder is new: no __pycache__, no edits


def test_what_the_learners_code_prints_is_shown_and_cut(tmp_path, capsys):
    write_module(tmp_path, "softmax", with_python(
        "def softmax_python(values):\n"
        "    for i in range(500):\n        print('debug line', i)\n"
        "    m = max(values)\n    e = [math.exp(v - m) for v in values]\n"
        "    return [x / sum(e) for x in e]"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "python")
    assert code == 0
    assert "What your code printed" in out and "debug line 0" in out
    assert "[output cut:" in out


@pytest.mark.parametrize("argv, message", [
    (["sofmax"], "unknown exercise 'sofmax'; did you mean 'softmax'?"),
    (["softmax", "--part", "cuda"], "exercise 'softmax' has no part 'cuda'"),
    (["softmax", "--timeout", "0"], "0 must be a number of seconds above 0"),
    (["softmax", "--timeout", "soon"], "'soon' is not a number"),
    (["softmax", "extra"], "unrecognized arguments: extra"),
])
def test_bad_arguments_get_one_line_and_status_2(capsys, argv, message):
    code, out = run_check(capsys, *argv)
    assert code == 2
    assert message in out
    assert len(out.strip().splitlines()) == 1


def test_missing_module_is_reported_not_crashed(tmp_path, capsys):
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path))
    assert code == 1
    assert "softmax.py does not exist" in out
    # the way back names the folder checked, so that it restores that file, not another
    assert f"python -m learning.reset softmax --root {tmp_path} puts the original back" in \
        " ".join(out.split())


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"),
                    reason="needs FIFOs and /dev/zero (POSIX)")
@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_module_that_is_no_file_is_refused_at_once_unread(tmp_path, capsys, kind):
    # a FIFO hung the import for the whole time limit and was blamed on a loop; a link to
    # /dev/zero (or a file of gigabytes) was read whole, in a process with no memory cap yet,
    # until the system killed it: neither is a module, and neither is opened for reading
    import time

    module = tmp_path / "elementwise.py"
    if kind == "fifo":
        os.mkfifo(module)
    elif kind == "device":
        module.symlink_to("/dev/zero")
    else:
        with open(module, "wb") as handle:
            handle.truncate(3 * 2**30)  # sparse: no disk used
    start = time.monotonic()
    code, out = run_check(capsys, "elementwise", "--root", str(tmp_path))
    said = " ".join(out.split())
    assert code == 1 and time.monotonic() - start < 20
    what = {"fifo": "is a FIFO", "device": "is a device", "huge": "is a file of 3,221,225,472 "
            "bytes"}[kind]
    assert f"{module} {what}, not a Python file" in said, said
    assert "not run: elementwise.py is not a file Python can read" in said
    assert "loop" not in said and "Traceback" not in said
    code, out = run_check(capsys, "elementwise", "--root", str(tmp_path), "--hint")
    assert code == 1 and what in " ".join(out.split()) and time.monotonic() - start < 40


def test_a_nul_byte_in_the_module_is_a_syntax_error_of_no_line(tmp_path, capsys):
    (tmp_path / "elementwise.py").write_bytes(b"x = 1\n\0\n")
    code, out = run_check(capsys, "elementwise", "--root", str(tmp_path))
    said = " ".join(out.split())
    assert code == 1 and "syntax error in elementwise.py: source code string cannot contain " \
        "null bytes" in said and "line None" not in said, said


def test_check_runs_as_a_module_from_a_fresh_process(tmp_path):
    import subprocess
    import sys

    write_module(tmp_path, "softmax", solution_text("softmax"))
    env = dict(os.environ, **WIDE)
    env.pop("LEARNING_FORKSERVER", None)  # as a learner runs it: each worker started afresh
    done = subprocess.run([sys.executable, "-m", "learning.check", "softmax", "--root",
                           str(tmp_path), "--part", "python"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Grade: Python 11/11" in done.stdout


@pytest.mark.interpreter
def test_out_of_bounds_traceback_runs_from_the_launch_down_to_the_kernel_line(tmp_path, capsys):
    unmasked = solution_text("softmax").replace(
        'x = tl.load(input_ptr + row * input_row_stride + offsets, mask=mask, other=-float("inf"))',
        "x = tl.load(input_ptr + row * input_row_stride + offsets)")
    write_module(tmp_path, "softmax", unmasked)
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "triton")
    assert code == 1
    assert "out-of-bounds load" in out
    assert "at softmax.py, line " in out  # the learner's line, named before the traceback
    traceback = out[out.index("Traceback"):]
    launch = traceback.index("softmax_kernel[(n_rows,)](")
    kernel_line = traceback.index("x = tl.load(input_ptr + row * input_row_stride + offsets)")
    assert launch < kernel_line


def test_a_relative_root_is_the_folder_the_learner_means(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "mine"
    folder.mkdir()
    write_module(folder, "softmax", solution_text("softmax"))
    monkeypatch.chdir(tmp_path)
    code, out = run_check(capsys, "softmax", "--root", "mine", "--part", "python")
    assert code == 0, out
    assert "Grade: Python 11/11" in out


class _Events:
    """A worker channel that keeps what it is sent."""

    def __init__(self):
        self.sent = []

    def send(self, *event):
        self.sent.append(event)


def test_the_worker_refuses_kernel_parts_in_a_broken_interpreter_before_importing(
        tmp_path, monkeypatch):
    # Where a GPU driver answers, check leaves the decision to the worker (importing torch in
    # the parent only to ask would cost seconds); the worker must then stop as check would.
    from learning.grader import mode, worker

    problem = "Triton 3.6.0's interpreter cannot (why): python -m pip install \"numpy<2.4\""
    monkeypatch.setattr(mode, "interpreter_problem", lambda: problem)
    monkeypatch.setattr(mode, "select", lambda force_interpret=False: mode.Mode(True, "test"))
    # this process's interpreter keeps running programs first to last, as the other tests
    # that run kernels here expect
    monkeypatch.setattr(worker.program_order, "install", lambda order: True)
    path = write_module(tmp_path, "softmax", "raise SystemExit('must not be imported')\n")
    events = _Events()
    assert worker.run("softmax", str(path / "softmax.py"), ["triton"], False, events) == 0
    assert [e[0] for e in events.sent] == ["mode", "environment"]
    assert events.sent[1][1] == problem


def test_check_prints_the_workers_environment_problem_in_one_line(tmp_path, capsys,
                                                                  monkeypatch):
    from learning.grader import results, runner

    def broken(exercise, *args, **kwargs):
        result = results.CheckResult(exercise, tmp_path / exercise.filename, [])
        result.environment_problem = "Triton 3.6.0's interpreter cannot: install numpy<2.4"
        return result

    monkeypatch.setattr(runner, "grade", broken)
    monkeypatch.setattr(check.kernel_mode, "cuda_driver_sees_a_gpu", lambda: True)
    write_module(tmp_path, "softmax", solution_text("softmax"))
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path))
    assert code == 2 and out.strip() == \
        "check: Triton 3.6.0's interpreter cannot: install numpy<2.4", out
    progress = tmp_path / ".course-state" / "progress.json"  # nothing graded, nothing kept
    assert not progress.exists() or "softmax" not in progress.read_text()


def test_the_gpu_probe_answers_without_importing_torch():
    import subprocess
    import sys

    code = ("import sys; from learning.grader import mode; found = mode.cuda_driver_sees_a_gpu(); "
            "assert 'torch' not in sys.modules; print(found)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    import torch

    # The contract check relies on: no device from the driver means none for torch either.
    assert out in ("True", "False")
    assert out == "True" or not torch.cuda.is_available()
    assert out == "False" or torch.version.cuda is None or torch.cuda.is_available()


# --- a GPU fault: the faulting case again in the interpreter, the rest in a fresh process ----

FAULT = 'raise RuntimeError("CUDA error: an illegal memory access was encountered")'


def faulting_module(first_call: str, later_calls: str) -> str:
    """The reference softmax, except on 'many rows' (37 x 33): the first such call does
    ``first_call`` (as a kernel that faults on a GPU would), every later one ``later_calls``
    (the re-run in the interpreter). A file beside the module counts the calls."""
    body = solution_text("softmax").replace(
        "def softmax_triton(x: torch.Tensor) -> torch.Tensor:",
        "def softmax_triton(x: torch.Tensor) -> torch.Tensor:\n"
        "    import pathlib\n"
        "    marker = pathlib.Path(__file__).with_name('faulted')\n"
        "    if tuple(x.shape) == (37, 33):\n"
        "        if not marker.exists():\n"
        "            marker.write_text('')\n"
        f"            {first_call}\n"
        f"        {later_calls}\n"
        "    return _softmax_triton(x)\n\n\n"
        "def _softmax_triton(x: torch.Tensor) -> torch.Tensor:", 1)
    return body


@pytest.fixture(scope="module")
def faulted_check(tmp_path_factory):
    """One check (both parts, --json) of a module whose 'many rows' faults every time, which the
    two tests of a fault's aftermath read: seconds of interpreter re-runs, taken once."""
    import contextlib
    import io

    folder = tmp_path_factory.mktemp("faulted")
    write_module(folder, "softmax", faulting_module(FAULT, FAULT))
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        for key, value in WIDE.items():
            patch.setenv(key, value)
        code = check.main(["softmax", "--root", str(folder), "--json"])
    return code, out.getvalue()


def test_after_a_gpu_fault_every_later_case_still_runs(faulted_check):
    code, out = faulted_check
    (triton,) = [p for p in __import__("json").loads(out)["parts"] if p["name"] == "triton"]
    cases = {c["name"]: c for c in triton["cases"]}
    assert cases["many rows"]["status"] == "error"
    assert "illegal memory access" in cases["many rows"]["summary"]
    assert "re-run in Triton's interpreter" in cases["many rows"]["summary"]
    after = list(cases)[list(cases).index("many rows") + 1:]
    assert after and all(cases[name]["status"] in ("passed", "skipped") for name in after), \
        {name: cases[name]["status"] for name in after}
    assert code == 1


def test_a_kernel_that_faults_in_most_cases_still_gets_every_case_run(tmp_path, capsys):
    module = solution_text("softmax").replace(
        "def softmax_triton(x: torch.Tensor) -> torch.Tensor:",
        "def softmax_triton(x: torch.Tensor) -> torch.Tensor:\n"
        f"    if x.shape[0] > 1:\n        {FAULT}", 1)
    write_module(tmp_path, "softmax", module)
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "triton",
                          "--json")
    cases = __import__("json").loads(out)["parts"][0]["cases"]
    statuses = {c["name"]: c["status"] for c in cases}
    assert "not-run" not in statuses.values(), statuses
    assert statuses["width 3"] == "passed" and statuses["many rows"] == "error"
    assert sum(s == "error" for s in statuses.values()) >= 8


def test_a_gpu_fault_is_shown_with_the_line_the_interpreter_finds(tmp_path, capsys):
    # the re-run launches a kernel that stores past the output: the sanitizer names the line
    oob = ("out = torch.empty_like(x); _bad_kernel[(1,)](out, 64); return out")
    module = faulting_module(FAULT, oob) + (
        "\n\n@triton.jit\ndef _bad_kernel(out_ptr, n):\n"
        "    offsets = tl.arange(0, 2048)\n"
        "    tl.store(out_ptr + offsets * 1000, offsets.to(tl.float32))\n")
    write_module(tmp_path, "softmax", module)
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "triton",
                          "--json")
    cases = {c["name"]: c for c in __import__("json").loads(out)["parts"][0]["cases"]}
    fault = cases["many rows"]
    problem = kernel_mode.interpreter_problem()
    if problem is not None:  # Triton 3.6 with numpy 2.4 (the H200's): the re-run cannot run,
        # and the fault says why, with the fix, instead of a line
        assert "could not be re-run in Triton's interpreter" in fault["summary"]
        assert problem.split(":")[-1].strip() in fault["summary"]
        return
    assert fault["summary"].startswith("on the GPU: ")
    assert "which checks every address" in fault["summary"] and "out-of-bounds" in \
        fault["summary"]
    assert fault["where"] and "tl.store(out_ptr + offsets * 1000" in fault["where"]
    after = list(cases)[list(cases).index("many rows") + 1:]
    assert all(cases[name]["status"] in ("passed", "skipped") for name in after)


@pytest.mark.gpu
def test_a_real_gpu_fault_names_the_line_and_runs_every_case(tmp_path, capsys):
    far = solution_text("softmax").replace(
        "tl.store(output_ptr + row * output_row_stride + offsets, output, mask=mask)",
        "tl.store(output_ptr + row * output_row_stride * 1000000 + offsets, output, mask=mask)")
    write_module(tmp_path, "softmax", far)
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "triton",
                          "--json")
    cases = __import__("json").loads(out)["parts"][0]["cases"]
    assert code == 1 and not [c["name"] for c in cases if c["status"] == "not-run"]
    faulted = [c for c in cases if "illegal memory access" in c["summary"]]
    assert faulted, [c["summary"] for c in cases]
    from learning.grader import mode

    if mode.interpreter_problem() is None:
        assert any(c["where"] and "tl.store(output_ptr + row * output_row_stride * 1000000"
                   in c["where"] for c in faulted), [c["summary"] for c in faulted]
    else:
        assert all("could not be re-run in Triton's interpreter" in c["summary"]
                   for c in faulted)


def test_any_cuda_error_ends_the_process_but_only_a_bad_address_names_a_cause(tmp_path, capsys):
    # measured on the H200: after an illegal address the next case's launch failed with
    # "operation not supported on global/shared address space", and building the case after
    # that failed in the grader's own code
    other = 'raise RuntimeError("CUDA error: unspecified launch failure")'
    module = solution_text("softmax").replace(
        "def softmax_triton(x: torch.Tensor) -> torch.Tensor:",
        "def softmax_triton(x: torch.Tensor) -> torch.Tensor:\n"
        f"    if tuple(x.shape) == (37, 33):\n        {other}", 1)
    write_module(tmp_path, "softmax", module)
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "triton",
                          "--json")
    cases = {c["name"]: c for c in __import__("json").loads(out)["parts"][0]["cases"]}
    assert cases["many rows"]["status"] == "error" and cases["many rows"]["causes"] == []
    assert "not-run" not in {c["status"] for c in cases.values()}
    assert "exited" not in out


def test_a_gpu_fault_keeps_the_grades_of_the_parts_before_it(faulted_check):
    # the Python part ran in the process that later faulted: its grades must survive
    code, out = faulted_check
    python, triton = __import__("json").loads(out)["parts"]
    assert [c["status"] for c in python["cases"]] == ["passed"] * len(python["cases"])
    assert python["cases"] and code == 1
    assert "not-run" not in {c["status"] for c in triton["cases"]}


def test_cases_that_cannot_run_here_are_not_counted_when_an_earlier_case_stops_the_process(
        tmp_path):
    """The denominator is the same whatever happened: a GPU-only case in the interpreter is
    skipped, not counted as not run, when the first case ends the process; the cases that
    could have run here still count."""
    from learning.grader import registry
    from tests.helpers import grade_text

    text = solution_text("matmul") + "\n\ndef matmul_triton(a, b):\n    import os\n" \
                                     "    os._exit(3)\n"
    result = grade_text(tmp_path, "matmul", text, ["triton"])
    part = result.parts[0]
    cases = registry.find("matmul").part("triton").cases
    gpu_only = {c.name for c in cases if c.gpu_only}
    assert gpu_only and result.mode is not None
    statuses = {c.name: c.verdict.status for c in part.cases}
    assert list(statuses.values()).count("not-run") > 0
    if result.mode.interpret:  # the interpreter: the GPU-only cases could never run here
        assert {name for name, status in statuses.items() if status == "skipped"} == gpu_only
        assert part.graded == len(cases) - len(gpu_only)
    else:
        assert part.graded == len(cases)
    assert part.passed == 0


def test_every_case_reads_as_its_name_then_a_colon_then_its_purpose():
    """A FAIL line is '<name>: <purpose>' for every case of every exercise: the purpose is no
    longer spliced into 'which tests ...', which made claims such as 'q, k and v must be the
    same after the call' ungrammatical."""
    import io

    from rich.console import Console

    from learning.grader import compare, registry, report, results

    for exercise in registry.all_exercises():
        for part in exercise.parts:
            for case in part.cases:
                assert case.purpose.strip() == case.purpose and case.purpose, case.name
                assert ":" not in case.name, case.name  # the colon ends the name
                assert not case.purpose.endswith("."), case.name
                buffer = io.StringIO()
                console = Console(file=buffer, width=1000, no_color=True)
                result = results.CaseResult(case.name, case.purpose,
                                           compare.Verdict("failed", "wrong values"))
                report._render_case(console, result)
                first = buffer.getvalue().splitlines()[0]
                assert " ".join(first.split()) == f"FAIL {case.name}: {case.purpose}", first
                assert "which tests" not in first


def test_well_done_joins_three_part_names_with_commas():
    from pathlib import Path

    from learning.grader import compare, registry, report, results

    exercise = registry.find("softmax_backward")
    parts = [results.PartResult(p, [results.CaseResult("c", "", compare.Verdict("passed", ""))])
             for p in exercise.parts]
    line = report._next_step(results.CheckResult(exercise, Path("softmax_backward.py"), parts))
    assert "Well done: the Python, Triton and Autograd parts pass." in line
    assert report.joined(["Python", "Triton"]) == "Python and Triton"


@pytest.mark.parametrize("flag, value", [("--timeout", "nan"), ("--timeout", "0"),
                                         ("--timeout", "-1"), ("--timeout", "inf"),
                                         ("--memory", "inf"), ("--memory", "1e30"),
                                         ("--memory", "nan"), ("--memory", "x")])
def test_a_limit_that_is_no_finite_positive_number_is_a_one_line_error(tmp_path, capsys, flag,
                                                                       value):
    # nan reached a queue's timeout as a traceback, inf the memory cap as the learner's crash
    write_module(tmp_path, "softmax", solution_text("softmax"))
    code = check.main(["softmax", "--root", str(tmp_path), flag, value])
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert code == 2 and "Traceback" not in said
    assert f"argument {flag}:" in said and "number" in said


@pytest.mark.parametrize("argv", [["softmx"], ["softmax", "--part", "cuda"],
                                  ["softmax", "--timeout", "nan"]])
def test_with_json_a_refused_command_still_prints_json(tmp_path, capsys, argv):
    # an editor reading the output as JSON got a line of text; it gets the error as JSON now
    import json

    code = check.main([*argv, "--root", str(tmp_path), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 2 and document["ok"] is False and document["error"]


def test_a_part_named_twice_is_graded_once_and_a_dot_slash_name_is_the_exercise(tmp_path,
                                                                                capsys):
    write_module(tmp_path, "softmax", stub_text("softmax"))
    code, out = run_check(capsys, "./softmax.py", "--root", str(tmp_path), "--part", "python",
                          "--part", "python")
    assert code == 1 and out.count("Python not started") == 1


def test_a_module_that_breaks_torch_on_import_is_told_why_its_cases_did_not_run(tmp_path,
                                                                                capsys):
    # the inputs are built in the process that imported the learner's module; a patched
    # Tensor.clone broke them, and the text said nothing of why (only --json had it)
    text = stub_text("elementwise").replace(
        "import torch\n", "import torch\ntorch.Tensor.clone = lambda *a, **k: 1 / 0\n", 1)
    assert "1 / 0" in text
    write_module(tmp_path, "elementwise", text)
    code, out = run_check(capsys, "elementwise", "--root", str(tmp_path), "--part", "triton")
    said = " ".join(out.split())
    assert code == 1 and "its input could not be built in the process that imported your " \
        "module (ZeroDivisionError: division by zero)" in said


# Lesson 12's quicker launch: the compiled kernel Triton returns from a first launch, kept per
# specialization and run again through its own runner (``compiled[grid](...)``); every argument
# is passed, constexprs included, in the kernel's order
KEPT_COMPILED_KERNEL = '''
_COMPILED = {}


def _specialization(*arguments):
    """What Triton compiles a kernel for: each pointer's 16-byte alignment, each integer's
    divisibility by 16 and whether it is 1."""
    return tuple((a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, torch.Tensor)
                 else (a % 16 == 0, a == 1) for a in arguments)


def softmax_triton(x: torch.Tensor) -> torch.Tensor:
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got {x.ndim} dimensions")
    if x.stride(1) != 1:
        raise ValueError(f"the last dimension must have stride 1, not {x.stride(1)}")
    n_rows, n_cols = x.shape
    output = torch.empty_like(x, memory_format=torch.contiguous_format)
    block = triton.next_power_of_2(n_cols)
    given = (output, x, output.stride(0), x.stride(0), n_cols)
    key = (block, _specialization(*given))
    if n_rows == 0:
        return output
    if key in _COMPILED:
        _COMPILED[key][(n_rows, 1, 1)](*given, block)
    else:
        _COMPILED[key] = softmax_kernel[(n_rows,)](*given, BLOCK=block)
    return output
'''


@pytest.mark.gpu
def test_a_compiled_kernel_run_through_its_own_runner_counts_as_a_launch(tmp_path, capsys):
    # the launch counter once counted JITFunction.run alone: every case after the first
    # compilation of a specialization failed as "no kernel ran", a wrong verdict on honest code
    kept = solution_text("softmax")
    kept = kept[:kept.index("def softmax_triton(")] + KEPT_COMPILED_KERNEL
    write_module(tmp_path, "softmax", kept)
    code, out = run_check(capsys, "softmax", "--root", str(tmp_path), "--part", "triton",
                          "--json")
    cases = __import__("json").loads(out)["parts"][0]["cases"]
    assert code == 0, [(c["name"], c["summary"]) for c in cases if c["status"] != "passed"]
    assert {c["status"] for c in cases} <= {"passed", "skipped"}
