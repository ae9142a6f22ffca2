"""The course machinery: the commands a learner runs at the top, what grades them below.

Every module at the top is a command, ``python -m learning.NAME``, but for ``cli`` and
``course``, which the commands, the grader and the explainers all read, and ``broken_install``,
which every command's start-up installs. tests/test_layout.py
keeps this list, the folder and the imports (no circles) in step.

    learning/
        check.py         grade an exercise module: its cases, a grade per part, the next step
        explain.py       print a worked example, every number computed as it runs
        watch.py         re-check an exercise each time its file is saved
        progress.py      every lesson in order, the last grade of each part, what to do next
        reset.py         start an exercise over, keeping a backup of the learner's file
        solution.py      show the reference solution once every part that can run here passes
        doctor.py        check that this machine can take the course, and say what to fix
        computed.py      regenerate the computed sections of the documents; --check lists stale ones
        bench/           time kernels on a GPU: ``main`` picks the bench for the kernels named
            rowwise.py       softmax, its backward and RMSNorm in GB/s; the measuring all share
            matmul.py        matrix products in TFLOP/s
            attention.py     attention in TFLOP/s
            attention_backward.py  its backward pass (--backward), against each SDPA backend
        cli.py           what every command shares: argument errors as one line, the console
        broken_install.py  a library the commands need that cannot be imported, in one line
        course.py        the lessons in reading order, and where the course's folders are
        grader/          what ``check`` runs, in its own process and in the learner's
            runner.py        grade a module: the check's order of work, from its files to its grades
            results.py       what a check returns: case, part and check results, and its timeline
            part_runs.py     the parts run in worker processes, a fresh one after a fault or crash
            worker_run.py    one worker process from the grader's side: start it, read it, end it
            worker_events.py what a worker said, event by event, kept as named facts
            stopped.py       a worker that stopped early, in words: timed out, crashed, exited
            judging.py       each case's verdict, and the named bugs the other cases rule out
            map_run.py       the worker run that records a memory map, and which case to map
            steps_run.py     the worker run that records a failing case's named steps
            worker.py        the learner's process: import their module, run the cases, report
            program_order.py the order the interpreter runs a launch's programs in, case by case
            channel.py       the worker's end of the event pipe: one frame of plain data per event
            loading.py       before the learner's import: libraries loaded, memory capped, filter on
            calls.py         one call of the learner's function on a case, described as plain data
            lineage.py       where a kernel part's returned tensor came from: a kernel, or torch
            plain.py         a Python part's call into torch, numpy or triton, which it may not make
            summarise.py     what a call returned and did to its arguments, read as plain data
            recordings.py    the worker's runs that grade nothing: a case's memory map, named steps
            childproc.py     the child processes' plumbing: environment, events, output, signals
            handover.py      hand a child its event pipe, and end it: on POSIX and on Windows
            containment.py   the guard above the learner's process, and the filter it runs under
            integrity.py     the course's own files: checked before a check, repaired after
            nearby.py        what runs after a check (grades, git, the venv): put back if changed
            stuck.py         the learner's line a timed-out case was running when stopped
            learner_code.py  import the learner's module; what it raised, put into words
            compare.py       judge one case against the float64 reference
            replays.py       replays of known mistakes: the evidence before a bug is named
            observe.py       what a wrong output looks like, described from the data alone
            errors.py        what an exception means, when its type and message say so
            returned.py      what a call returned, as plain data that crosses the pipe
            borrowed.py      reference code the learner's process ran, found by path or content
            tampering.py     the grader's own code in the learner's process, compared after a case
            hooks.py         profile and trace hooks the learner's code leaves set: put back
            installed.py     installed code a process loaded, and the stamps of its files
            tensors.py       tensor arguments as data, built alike in both processes
            numbers.py       agreement within a tolerance, and numbers as text
            declarations.py  how an exercise is declared: its parts, cases, bugs, tolerances
            catalogue.py     how an exercise's other versions are declared, and each one's text
            registry.py      every exercise, found by name
            allocations.py   new tensors filled with NaN, and guard bands around them on a GPU
            sanitizer.py     bounds checking for Triton's interpreter
            gpu_arithmetic.py  the interpreter's arithmetic made the GPU's where they differ
            standin.py       a stand-in for triton where it cannot be installed (macOS)
            mode.py          where kernels run: compiled on a CUDA GPU, or in the interpreter
            interpreter_launch.py  one launch method for the interpreter on Triton 3.3 to 3.9
            gpu_compile.py   compile the interpreted kernels for a GPU target, without a GPU
            kernel_source.py what a kernel's source names beyond Triton's language; what it reads
            kernel_ops.py    what a compiled kernel computes, by kind, read from its TTIR
            memory_map.py    record which program read and wrote which element
            map_view.py      draw memory maps, the learner's beside the reference's
            named_steps.py   record the values a function gives the lesson's named steps
            first_step.py    the first named step whose value differs from the reference's
            forkserver.py    a warm process that forks workers (the test suite's, learners')
            warm.py          the learner's warm server: started by a check, reused by the next
            report.py        how a check's results look: rich text, or one JSON document
            state.py         the last grades, the hints shown, modules that did not import
        exercises/       every exercise in a folder of its own, the same files in each: its
                         declaration (parts, cases, known bugs), its stub (the module as a
                         learner first receives it), its reference solution, its catalogue of
                         other versions (known-wrong ones and other styles), its worked example
        explainers/      what the worked examples share, and the topic that is no exercise:
            bench.py         the course's measured figures, drawn from lab/results
            page.py          the blocks a worked example is made of, for a terminal or Markdown
            facts.py         facts the lessons state about the reference kernels
"""

import os
import sys


def _folder_off_the_path():
    """Run as a command, Python put the folder it was started in (the learner's, where their
    exercise modules are) first on the path, ahead of the standard library and every installed
    package: a file or folder there named copy, numpy, triton or org (which copy and pickle try
    to import) would run inside the grader's own processes instead of the module it shadows.
    Nothing of the course needs that folder on the path where the course is installed; where it
    is not, the folder goes last, behind everything it could shadow."""
    import importlib.util

    first = sys.path[0] if sys.path else None
    if first is None or os.path.realpath(first or ".") != os.path.realpath(os.getcwd()):
        return
    del sys.path[0]
    if importlib.util.find_spec("triton_kernels") is None:  # not installed: run from a clone
        sys.path.append(first)


# Run as a command (python -m learning.NAME: argv[0] is "-m" while the package is imported): the
# folder it was started in off the path, and a library of the course's that cannot be imported
# named in one line, not a traceback.
if sys.argv[:1] == ["-m"]:
    _folder_off_the_path()
    from learning import broken_install as _broken_install

    _broken_install.install()

# Triton 3.9 warns, at every kernel compiled, that its default of fusing a multiply and an add
# into one instruction (on) turns off in 3.10. The course's kernels and measurements assume it
# on, Triton's default from 3.3 to 3.9: saying so keeps the warning out of every run of the
# course's commands and of the learner's check. A setting of the learner's own wins.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

# LEARNING_WITHOUT_TRITON=1: every course process behaves as on a machine without Triton, as
# macOS is (learning.grader.mode); the tests grade that mode on a machine that has Triton.
if os.environ.get("LEARNING_WITHOUT_TRITON"):
    from learning.grader import mode as _mode

    _mode.hide_triton_if_asked()
