"""Grade a learner's exercise module: run it in worker processes, judge what comes back.

``grade`` returns plain results (``learning.grader.results``) and prints nothing;
``learning.check`` renders them. This module holds a check's order of work: the course's own
files checked first, then the parts run (``learning.grader.part_runs``), the extras asked for (a
failing case's named steps, ``learning.grader.steps_run``; a memory map,
``learning.grader.map_run``; the GPU compile check), the course's files repaired, and what could
not run on this machine set apart from what failed.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

# Every module the check reads after the learner's code has run is imported before any run
# (gpu_compile for its events' classes, the recordings' for their use after the workers end):
# a file the learner's code changed is put back before anything reads it, never imported.
from learning.grader import (  # noqa: F401
    childproc,
    compare,
    first_step,
    gpu_compile,
    installed,
    integrity,
    kernel_ops,
    map_run,
    map_view,
    named_steps,
    part_runs,
    state,
    steps_run,
    stopped,
    warm,
)
from learning.grader import memory_map as _memory_map  # noqa: F401
from learning.grader import mode as kernel_mode
from learning.grader.declarations import Exercise
from learning.grader.results import (
    CaseResult,
    CheckResult,
    CompileCheck,
    PartResult,
    Timeline,
    mark_not_run,
)
from learning.grader.returned import ImportProblem
from learning.grader.tensors import TensorSpec
from learning.grader.worker_run import Settings, WorkerRun, aside_folder


def grade(exercise: Exercise, root: Path | None = None, parts: list[str] | None = None,
          force_interpret: bool = False, case_seconds: float | None = None,
          import_seconds: float | None = None, compile_check: bool = True,
          memory_gib: float | None = None, memory_map: bool | str = False,
          first_steps: bool = False) -> CheckResult:
    """Run the learner's ``<root>/<exercise>.py`` against the chosen parts' cases.

    ``case_seconds`` limits each case, ``import_seconds`` the learner's import (default:
    ``worker_run.import_limit(case_seconds)``). With ``compile_check``, kernels that ran in the
    interpreter are also compiled for a GPU target, and what the compiler rejects fails the part.
    ``memory_map`` (True, or a case's name) records a memory map of the first failing kernel
    case small enough to draw, or of that case (``learning.grader.memory_map``). With
    ``first_steps``, a part whose output is wrong and whose code keeps the lesson's names has
    its first failing case run once more with those values recorded, beside the reference's,
    and the case says the first named step whose value differs (``steps_run.first_step_for``).
    """
    start = time.perf_counter()
    # Judging needs numpy: imported before the learner's code runs, which could change the
    # files this process would otherwise import in the middle of a run.
    childproc.import_numpy()
    # Absolute: the learner's process runs in the module's folder, where a relative --root
    # would point somewhere else.
    root = Path(root or Path.cwd()).resolve()
    module_path = root / exercise.filename
    chosen = [exercise.part(name) for name in parts] if parts else list(exercise.parts)
    result = CheckResult(exercise, module_path, [PartResult(p) for p in chosen])
    timeline = Timeline(start, result.timeline)
    tampered = integrity.changed()
    if tampered:  # the grader's own answers cannot be trusted: nothing is graded
        result.environment_problem = integrity.refusal(tampered)
        mark_not_run(result.parts, "not run: " + result.environment_problem)
        result.seconds = time.perf_counter() - start
        return result
    if not module_path.exists():
        result.import_problem = ImportProblem(
            "missing-file", f"{module_path} does not exist: python -m learning.reset "
            f"{exercise.name} --root {shlex.quote(str(root))} puts the original back")
        mark_not_run(result.parts, "the module is missing")
        _skip_what_cannot_run_here(result, force_interpret)
        result.seconds = time.perf_counter() - start
        return result
    unreadable = _not_a_module(module_path)
    if unreadable:  # a FIFO would hang the import, a link to /dev/zero read without end
        result.import_problem = _not_a_file(module_path, unreadable, exercise, root)
        mark_not_run(result.parts, "the module is not a file Python can read")
        _skip_what_cannot_run_here(result, force_interpret)
        result.seconds = time.perf_counter() - start
        return result
    settings = Settings(exercise, module_path, force_interpret, case_seconds, import_seconds,
                        memory_gib)
    text_before = _read_bytes(module_path)
    compiler = childproc.CompileRun(module_path) if compile_check else None
    # The compile check runs the learner's code too: it ends, and what the learner's code did
    # is repaired, before the recordings below run it again (each in a worker repaired as it
    # ends), so that nothing of the learner's runs while the grader reads its own files.
    aside = aside_folder(module_path)
    course = integrity.Guard(module_path.parent, module_files=warm.module_files(),
                             learner_module=module_path)
    try:
        ran = part_runs.run_parts(settings, result, compiler, timeline)
        # what the workers loaded, as each worker's guard left it: the compile check runs the
        # learner's statements again, in a process of its own
        course.watch_installed(installed.stamps_now(ran.installed))
        if compiler is not None and compiler.started:
            timeline.note("compile check: launches sent")
            _attach_compile_check(result, compiler, ran.launches)
            timeline.note("compile check: done")
    finally:
        if compiler is not None and compiler.started:
            compiler.cancel()
        result.add_note(course.repair(aside).note(str(aside)))
    if not (first_steps or memory_map):
        return _finish(result, force_interpret, text_before, module_path, ran, start)
    course = integrity.Guard(module_path.parent, module_files=warm.module_files(),
                             learner_module=module_path)
    try:
        if first_steps:
            for part_result in result.parts:
                if steps_run.first_step_for(result, part_result, text_before, force_interpret,
                                            case_seconds, memory_gib):
                    timeline.note(f"first step: {part_result.part.name} recorded")
        if memory_map:
            result.memory_map = map_run.map_for_check(result, memory_map, case_seconds,
                                                      memory_gib)
            timeline.note("memory map: recorded")
    finally:
        result.add_note(course.repair(aside).note(str(aside)))
    return _finish(result, force_interpret, text_before, module_path, ran, start)


def _finish(result: CheckResult, force_interpret: bool, text_before: bytes | None,
            module_path: Path, ran, start: float) -> CheckResult:
    """What every check ends with: the skips, the module's own change, the output, the time."""
    _skip_what_cannot_run_here(result, force_interpret)
    result.module_changed = _change(text_before, _read_bytes(module_path))
    result.graded_source = text_before
    result.learner_output = childproc.cap_output(ran.output)
    result.seconds = time.perf_counter() - start
    return result


def import_problem(exercise: Exercise, root: Path | None = None) -> ImportProblem | None:
    """What keeps the learner's ``<root>/<exercise>.py`` from importing now, found by the
    import a check makes (in a worker, running no case); None when it imports, when the file
    is missing, or when the grader's own process could not start (nothing is known then)."""
    module_path = Path(root or Path.cwd()).resolve() / exercise.filename
    if not module_path.exists() or integrity.changed():
        return None
    unreadable = _not_a_module(module_path)
    if unreadable:
        return _not_a_file(module_path, unreadable, exercise, module_path.parent)
    run = WorkerRun(Settings(exercise, module_path), [])
    run.execute()
    problem = stopped.import_problem(run)
    return None if problem is None or problem.kind == "start-up" else problem


def _read_bytes(path: Path) -> bytes | None:
    """The module's bytes; None where it is not a regular file of a sane size (a FIFO or a
    link to /dev/zero left in its place would hang the check or read without end)."""
    try:
        return state.read_small_file(path, MODULE_LIMIT, follow=True)
    except (OSError, state.NotData):
        return None


MODULE_LIMIT = state.MODULE_LIMIT  # bytes of the learner's module read at most


def _not_a_file(module_path: Path, what: str, exercise: Exercise,
                root: Path) -> ImportProblem:
    return ImportProblem(
        "not-a-file", f"{module_path} is {what}, not a Python file: put your module back there "
        f"(python -m learning.reset {exercise.name} --root {shlex.quote(str(root))} writes the "
        "original in its place)")


def _not_a_module(path: Path) -> str:
    """What ``path`` is, in words, where it is no regular file of at most MODULE_LIMIT bytes
    (a FIFO, a device, a link to one, a huge file); "" where it is one, or is gone (said
    elsewhere). Looked at without waiting and without reading more than the limit."""
    try:
        state.read_small_file(path, MODULE_LIMIT, follow=True)
    except state.NotData as error:
        return str(error)
    except OSError as error:
        return f"a file that cannot be read ({error.strerror or error})"
    return ""


def _change(before: bytes | None, after: bytes | None) -> str:
    """How the learner's file changed during a check, in a word ("" when it did not)."""
    if before == after:
        return ""
    return "deleted" if after is None else "rewritten"


def _attach_compile_check(result: CheckResult, compiler: childproc.CompileRun, launches: list):
    """Compile what the interpreter launched, and give each kernel part its report."""
    kernel_parts = [p for p in result.parts if p.part.needs_kernels and p.started
                    and p.problem is None]
    if not kernel_parts or result.import_problem is not None or not launches:
        return
    compiled, note = compiler.finish(launches)
    for part_result in kernel_parts:
        mine = [launch for launch in launches if launch.part == part_result.part.name]
        if not mine:
            continue
        if note:
            part_result.compile_check = CompileCheck(False, note)
            continue
        kernels = {launch.kernel for launch in mine}
        found = [c for c in compiled if c.kernel in kernels]
        skipped = [c for c in found if c.status == "not-checked"]
        part_result.compile_check = CompileCheck(
            True, "; ".join(f"{c.kernel}: {c.message}" for c in skipped), found)
        _count_what_they_compute(part_result, sorted(kernels))
        _blame_the_branch(part_result)


def _count_what_they_compute(part_result, kernels: list[str]) -> None:
    """Where every kernel of the part compiled, the kinds of operation they compile into,
    together, against what the part's answer takes (``Part.kernel_ops``): kernels that lack
    them did not compute it, and the check cannot vouch for the result (torch's answer handed
    to them in disguise, values written into their memory by other code, a branch only the
    interpreter runs)."""
    check, needed = part_result.compile_check, part_result.part.kernel_ops
    if not needed or not check.compiled or any(c.status != "ok" for c in check.compiled):
        return  # a kernel not compiled (a rejection is said already; a descriptor's unread)
    found = frozenset(kind for c in check.compiled for kind in c.ops)
    lacking = kernel_ops.missing(needed, found)
    if lacking:
        check.compiled.append(gpu_compile.Compiled(
            " and ".join(kernels) + (" together" if len(kernels) > 1 else ""), "unvouched",
            f"not vouched for: compiled for a GPU, {'they' if len(kernels) > 1 else 'it'} "
            f"never compute{'' if len(kernels) > 1 else 's'} {kernel_ops.said(lacking)}, which "
            "the part's answer takes, so the result did not come from them"))


# Causes read from what the interpreter stored, not from the code: where it ran a kernel the
# compiler rejects for a type a loop changes, they are the interpreter's
READ_FROM_STORED_VALUES = frozenset({"follows-the-fill", "unwritten"})


def _blame_the_branch(part_result) -> None:
    """Where the compiler rejected a kernel for what the interpreter runs otherwise, the
    failing cases' values are not what the kernel means, and its message is their likely
    cause. An ``if`` on a block the interpreter ran as if it were always true: a failing case
    with no cause of its own gets that line. A variable whose type a loop changes (a float16
    accumulator that tl.dot turns float32): the interpreter keeps the first type's name on
    the second type's values, and stores them as such (two bytes of each four-byte element,
    which then also holds what the memory held before), so a cause read from those values
    (an output that follows the memory's old contents, say), or none, gives way to the
    compiler's; a catalogued mistake the values show stands."""
    from learning.grader.declarations import Bug

    rejected = part_result.compile_check.rejected
    failing = [case for case in part_result.cases if case.verdict.status in ("failed", "error")]
    loops = [c for c in rejected if gpu_compile.changes_type_in_a_loop(c.message)]
    if loops:
        where = "; ".join(f"{c.kernel}, line {c.line}" if c.line else c.kernel for c in loops)
        cause = Bug("type-changed-in-loop", f"the GPU compiler rejects the kernel ({where}): "
                    f"{loops[0].hint or loops[0].message}. Triton's interpreter runs such a "
                    "kernel anyway, the values the loop made under the type the variable "
                    "started with, so what it stored says little of your code: fix that line "
                    "first")
        for case in failing:
            if {bug.key for bug in case.verdict.causes} <= READ_FROM_STORED_VALUES:
                case.verdict.causes = (cause,)
        return
    branches = [c for c in rejected if gpu_compile.IF_ON_A_BLOCK in c.message]
    if not branches:
        return
    where = "; ".join(f"{c.kernel}, line {c.line}" if c.line else c.kernel for c in branches)
    cause = Bug("if-on-a-block", f"the GPU compiler rejects an `if` on a block of values "
                f"({where}), and the interpreter ran it as if it were always true, so these "
                "values are not what the kernel means either way: fix that line first, "
                "choosing per lane with tl.where(condition, a, b), or a mask")
    for case in failing:
        if not case.verdict.causes:
            case.verdict.causes = (cause,)


def _interpreting(result: CheckResult, force_interpret: bool) -> bool | None:
    """Whether this check's cases ran (or would have run) on the CPU: from the mode the worker
    reported, else as the worker would choose it; None when that cannot be told here without
    importing torch (a CUDA driver sees a GPU, and the worker said nothing)."""
    if result.mode is not None:
        return result.mode.interpret
    if not force_interpret and not any(p.part.needs_kernels for p in result.parts):
        return True  # no kernels: the worker keeps every tensor on the CPU
    if force_interpret or kernel_mode.env_asks_for_interpreter() \
            or not kernel_mode.cuda_driver_sees_a_gpu():
        return True
    return None


def _skip_what_cannot_run_here(result: CheckResult, force_interpret: bool):
    """A case that cannot run on this machine (a GPU-only case in the interpreter, bfloat16 on
    a GPU without it) is skipped, and so never counted, also when it did not run for another
    reason (an earlier case timed out or crashed the process, the module did not import): the
    grade's denominator is then the same whatever happened. A case that could have run here
    but did not still counts."""
    lacking = next((c.verdict.summary for p in result.parts for c in p.cases
                    if c.verdict.status == "skipped"
                    and c.verdict.summary.startswith("needs bfloat16")), None)
    interpreting = None
    for part_result in result.parts:
        for index, case_result in enumerate(part_result.cases):
            if case_result.verdict.status != "not-run":
                continue
            case = next((c for c in part_result.part.cases if c.name == case_result.name), None)
            if case is None:
                continue
            why = ""
            if case.gpu_only:
                if interpreting is None:
                    interpreting = _interpreting(result, force_interpret)
                if interpreting:
                    why = "needs a CUDA GPU"
            if not why and lacking and any(isinstance(a, TensorSpec) and a.dtype == "bfloat16"
                                           for a in case.make_args()):
                why = lacking
            if why:
                part_result.cases[index] = CaseResult(case_result.name, case_result.purpose,
                                                      compare.Verdict("skipped", why))
