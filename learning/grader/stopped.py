"""What to tell the learner when a worker process stopped before it said it had finished: an
import that never completed, or a case that timed out, crashed, exited or garbled the pipe.

Facts first: each sentence says what was seen (the limit, the signal, the exit status, how much
was printed) and names a cause only where that is what such an ending usually means.
"""

from __future__ import annotations

from learning.grader import childproc, compare
from learning.grader.returned import ImportProblem
from learning.grader.worker_run import WorkerRun

# What a time-out's message says before its usual reasons (cut where the case's rerun in the
# other order of programs shows the reason: learning.grader.part_runs).
USUAL_REASON = "; the usual reason is "
# Printed output past which a timed-out case says how much was printed: writing megabytes to a
# pipe takes seconds of its own.
PRINTED_A_LOT = 1_000_000
# A process seen stopped, in /proc, twice a second apart.
STOPPED = ("it was seen stopped, as a stop signal (SIGSTOP, SIGTSTP) leaves a process, and a "
           "stopped process never continues by itself; it was ended then. Code can send its "
           "own process that signal (os.kill(os.getpid(), signal.SIGSTOP)); the check sends none")
# A worker that ended with childproc.CHANNEL_LOST_STATUS.
CHANNEL_LOST = ("the file descriptor it reports over was closed, or now names another file, so "
                "nothing more could be sent, and it ended. Code that closes or replaces file "
                "descriptors it did not open (os.closerange, os.close, os.dup2) does this: close "
                "only what your code opened")
# A worker that ended with childproc.GRADER_FAILED_STATUS.
GRADER_FAILED = ("the grader's own code failed there (exit status {status}, which the grader "
                 "keeps for its own errors), so this says nothing about your code; its "
                 "traceback is in the output below. Please report it with that output")
# The crash causes that speak of loads and stores, which only a kernel part has.
MEMORY_FAULT_CAUSES = {childproc.SIGNAL_CAUSES["SIGSEGV"], childproc.SIGNAL_CAUSES["SIGBUS"]}


def import_problem(run: WorkerRun) -> ImportProblem | None:
    """What kept the learner's module from importing in ``run``: what the import reported
    (None: it imported), or, where the process stopped before it said, how it stopped."""
    return run.heard.import_problem if run.heard.imported else import_failure(run)


def import_failure(run: WorkerRun) -> ImportProblem:
    """The process stopped before the learner's module finished importing: say how."""
    name = run.settings.module_path.name
    ended = run.ended
    if run.heard.phase == "start-up":
        verdict = failure_verdict(run)
        return ImportProblem("start-up", f"the grader's process could not start: "
                             f"{verdict.summary}; the output below may say why")
    if ended.garbled:  # seen, not explained (see failure_verdict)
        return ImportProblem("garbled", f"the grader could not read what the process sent it "
                             f"while importing {name} ({ended.garbled[:200]}), so the import "
                             "has no result; the process was ended")
    if ended.stopped:
        return ImportProblem("crashed", f"the process was stopped while importing {name}: "
                             f"{STOPPED}")
    if ended.timed_out:
        return ImportProblem(
            "timed-out", f"importing {name} timed out after {run.import_seconds:g} s: code "
            "at the top level of the module runs on import; an endless loop or a long "
            "computation there belongs inside a function")
    code = ended.returncode
    if code == childproc.GRADER_FAILED_STATUS:
        return ImportProblem("grader-failed", f"the check could not import {name}: "
                             + GRADER_FAILED.format(status=code))
    if code == childproc.CHANNEL_LOST_STATUS:
        return ImportProblem("exited", f"the process lost its channel to the grader while "
                             f"importing {name}: {CHANNEL_LOST}")
    crashed = childproc.crash(code)
    if crashed is not None:
        return ImportProblem("crashed", f"the process crashed ({crashed.what}) while "
                             f"importing {name}")
    return ImportProblem("exited", f"{name} ended the program while being imported "
                         f"(exit status {code}): code at the top level of the module runs on "
                         "import; do not call sys.exit or os._exit there")


def failure_verdict(run: WorkerRun) -> compare.Verdict:
    """What to say about the case that was running when the process stopped answering."""
    current, ended = run.heard.current, run.ended
    name = f"{current.part}/{current.case}" if current else "start-up"
    exercise = run.settings.exercise
    if ended.garbled:
        # Observed, not explained: the worker sends only plain data, but the learner's
        # code runs in its process and could write to the same descriptor.
        return compare.Verdict(
            "error", f"the grader could not read what the process sent it in case {name} "
            f"({ended.garbled[:200]}), so the case has no result; the process was ended")
    if ended.stopped:
        return compare.Verdict("crashed", f"the process was stopped in case {name}: {STOPPED}")
    if ended.timed_out:
        kernels = exercise.part(current.part).needs_kernels if current else False
        usual = ("a loop in the kernel or the launcher whose condition never turns false "
                 "(an index or offset that is never advanced), or a launch far larger than "
                 "the case needs: the interpreter runs every program in turn") if kernels \
            else ("a loop whose condition never turns false: a while loop whose index or "
                  "bound is never advanced, or a list that grows as it is walked")
        limit = run.case_limit(current.part if current else None)
        printed = run.printed
        if printed >= PRINTED_A_LOT:  # seen, not guessed: say it beside the usual reason
            usual += (f". It also printed {printed:,} bytes by then, and printing that "
                      "much takes time of its own: take the prints out and check again")
        stopped = f"; when it was stopped it was running {ended.stuck_at}" \
            if ended.stuck_at else ""
        return compare.Verdict(
            "timed-out", f"did not finish within {limit:g} s in case {name} "
            f"(the reference takes well under a second){stopped}{USUAL_REASON}{usual}",
            seconds=float(limit))  # it ran at least that long: not the 0 of a case never run
    if ended.status_lost:
        return compare.Verdict(
            "crashed", f"the process stopped answering in case {name}, and the warm "
            "process that started it stopped answering too, so how it ended is unknown")
    code = ended.returncode
    if code == childproc.GRADER_FAILED_STATUS:
        return compare.Verdict("error", f"no result for case {name}: "
                               + GRADER_FAILED.format(status=code))
    if code == childproc.CHANNEL_LOST_STATUS:
        return compare.Verdict("crashed", f"the process lost its channel to the grader in case "
                               f"{name}: {CHANNEL_LOST}")
    crashed = childproc.crash(code)
    if crashed is not None:
        what, cause = crashed
        kernels = exercise.part(current.part).needs_kernels if current else True
        if not kernels and cause in MEMORY_FAULT_CAUSES:  # a Python part has no loads
            cause = ("a memory fault in native code the function called (ctypes, a C "
                     "extension), or a signal the code sent itself: plain Python has no "
                     "loads or stores that could fault")
        return compare.Verdict(
            "crashed", f"the process crashed ({what}) in case {name}"
            f"{': ' + cause if cause else ''}")
    return compare.Verdict(
        "crashed", f"the process exited (status {code}) in case {name}: the code ended the "
        "program (sys.exit, os._exit) instead of returning",
        causes=(compare.COMMON_BUGS["exited"],))
