"""Grade an exercise module: ``python -m learning.check softmax``.

Runs every part of the exercise (the Python derivation, the Triton kernel) against its cases,
prints each case with its purpose and verdict, a grade per part, and the next step, and
records the grades for ``learning.progress``. Exits 0 only when at least one part is started
and every started part passes. With no name it checks the next unfinished exercise; ``--all``
checks every one; ``--hint`` shows the next hint instead of grading; ``--json`` prints one
JSON document instead of text.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.markup import escape

from learning import cli, course
from learning.cli import ArgumentError, CommandParser, HelpShown, make_console
from learning.grader import mode as kernel_mode
from learning.grader import registry, report, runner, state
from learning.grader.childproc import MEMORY_ALLOWANCE_GIB
from learning.grader.declarations import Exercise
from learning.grader.results import CheckResult


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m learning.check",
                           description="Grade your exercise module against its cases.")
    parser.add_argument("exercise", nargs="?",
                        help="the exercise to grade, e.g. softmax (default: the next unfinished)")
    parser.add_argument("--all", action="store_true", help="check every exercise, in order")
    parser.add_argument("--part", action="append", dest="parts", metavar="PART",
                        help="grade only this part (python, triton, or one its lesson "
                        "names); may be repeated")
    parser.add_argument("--hint", nargs="?", const=0, type=_hint_level, metavar="N",
                        help="show the next hint for the first unfinished part (or hint N), "
                        "grade nothing")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--map", metavar="CASE",
                        help="draw which program of your kernel read and wrote which element "
                        "in this case, beside the reference kernel (run in the interpreter); "
                        "without it, a check draws its first failing kernel case that is small")
    parser.add_argument("--interpret", action="store_true",
                        help="run kernels in Triton's interpreter even on a GPU machine")
    parser.add_argument("--memory", type=cli.positive("GiB", 65536), metavar="GIB",
                        help="memory your code may use beyond the grader's own, in GiB, on the "
                        f"CPU, on Linux (default: {MEMORY_ALLOWANCE_GIB:g}); past it your code "
                        "gets a MemoryError")
    parser.add_argument("--timeout", type=cli.positive("seconds", 86400), metavar="SECONDS",
                        help="time limit for one case (default: 10 s for Python, 60 s for kernels)")
    parser.add_argument("--root", type=cli.folder, metavar="DIR",
                        help="the folder holding your exercise files (default: the course folder)")
    # learning.watch's own: a next step says to save the file, which checks it again
    parser.add_argument("--watching", action="store_true", help=argparse.SUPPRESS)
    return parser


def _refuse(console, message: str, as_json: bool) -> int:
    """A one-line error, status 2; with --json, a JSON document that says it, on stdout, for a
    tool that reads the output as JSON."""
    if as_json:
        print(json.dumps({"ok": False, "error": message}, indent=2))
    else:
        console.print(f"check: {escape(message)}", style="red", highlight=False)
    return 2


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    as_json = "--json" in (sys.argv[1:] if argv is None else argv)
    try:
        options = build_parser().parse_args(argv)
        root = options.root or default_root()
        progress = state.load(root)
        targets = _targets(options, progress)
        wanted_map = _wanted_map(options, targets)
    except HelpShown as shown:
        return shown.code
    except (ArgumentError, registry.UnknownExercise) as error:
        return _refuse(console, str(error), as_json)
    if progress.note and not options.json:
        console.print(f"note: {escape(progress.note)}", style="yellow", highlight=False)
    if not targets:
        console.print("Every exercise that has a lesson passes. Well done."
                      if kernel_mode.triton_missing() is None else
                      kernel_mode.python_parts_done_line(), highlight=False)
        return 0
    if options.hint is not None:
        try:
            return show_hint(console, targets[0], options.parts, root, progress, options.hint,
                             options.json)
        except ArgumentError as error:
            return _refuse(console, str(error), options.json)
    if options.memory is not None and not sys.platform.startswith("linux") \
            and not options.json:
        console.print(f"note: --memory caps nothing on {_system_name()} (the cap is a Linux "
                      "address-space limit); the time limit still ends a runaway allocation",
                      style="yellow", highlight=False)
    problem = _interpreter_problem(targets, options)
    if problem:  # every kernel part would fail for a reason that is not the learner's
        return _refuse(console, problem, options.json)
    # Without Triton (macOS) the kernel parts cannot run: the others are graded as anywhere,
    # and one line says which were not and where to take them.
    graded, unavailable = _runnable_parts(targets, options.parts)
    results = []
    progress, saved = None, True
    for exercise in targets:
        if not graded[exercise.name]:
            continue  # every part asked for needs Triton, which is missing here
        result = runner.grade(exercise, root, graded[exercise.name], options.interpret,
                              options.timeout,
                              memory_gib=options.memory, memory_map=wanted_map,
                              first_steps=True)
        if result.environment_problem:  # found by the worker: as above, not the learner's
            return _refuse(console, result.environment_problem, options.json)
        result.asked = tuple(p.part.name for p in result.parts if options.parts)
        progress, saved_now = _record(root, result, None if saved else progress)
        saved = saved and saved_now
        results.append(result)
        if not options.json:
            if len(targets) > 1:
                console.rule(exercise.name)
            report.render(console, result, progress, show_next=len(targets) == 1,
                          watching=options.watching)
    final = progress if progress is not None else state.load(root)
    if not saved:  # the grades above stand, but nothing after this run will know them
        note = (f"note: the grades could not be saved in {state.state_path(root).parent} (a "
                f"read-only folder, or a file in its place): progress, --hint and solution "
                f"will not know about this check")
        if options.json:
            print(note, file=sys.stderr)
        else:
            console.print(escape(note), style="yellow", highlight=False)
    line = _unavailable_line(unavailable, len(targets))
    if options.json:
        document = report.to_json(results[0], final) if len(results) == 1 and \
            not options.all else {"ok": bool(results) and all(r.ok for r in results),
                                  "exercises": [report.to_json(r, final) for r in results],
                                  "next": report.next_lesson_line(final)}
        if unavailable:
            document["not_run_here"] = {"parts": unavailable, "message": line}
        print(json.dumps(document, indent=2))
    elif len(results) > 1:  # one summary and one next step for the whole run
        passing = [r.exercise.name for r in results if r.ok]
        console.rule("summary")
        console.print(f"{len(passing)} of {len(results)} exercises pass"
                      f"{': ' + ', '.join(passing) if passing else ''}. "
                      f"{report.next_lesson_line(final)}", highlight=False)
    if line and not options.json:
        console.print(escape(line), style="yellow", highlight=False)
    if not results:  # nothing could be graded here: not the learner's doing
        return 2
    # a pass that may be the course's reference code's (borrowed) is not the learner's
    return 0 if all(r.ok and not r.borrowed for r in results) else 1


def _system_name() -> str:
    return {"win32": "Windows", "darwin": "macOS"}.get(sys.platform, sys.platform)


def _runnable_parts(targets: list[Exercise], asked: list[str] | None
                    ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """({exercise: the parts to grade}, {exercise: the kernel parts that cannot run here})."""
    graded, unavailable = {}, {}
    missing = kernel_mode.triton_missing()
    for exercise in targets:
        names = asked or [p.name for p in exercise.parts]
        cannot = [n for n in names if missing and exercise.part(n).needs_kernels]
        graded[exercise.name] = [n for n in names if n not in cannot]
        if cannot:
            unavailable[exercise.name] = cannot
    return graded, unavailable


def _unavailable_line(unavailable: dict[str, list[str]], checked: int) -> str:
    """One line for every part not run here: named for one exercise, counted for several."""
    if not unavailable:
        return ""
    if checked == 1:
        (parts,) = unavailable.values()
        return kernel_mode.triton_unavailable_line(parts)
    count = sum(len(parts) for parts in unavailable.values())
    return kernel_mode.triton_unavailable_line(
        [f"{count} parts of {len(unavailable)} exercises"])


def _interpreter_problem(targets: list[Exercise], options) -> str | None:
    """What keeps Triton's interpreter from running these kernel parts here, when they surely
    will run in it. Where a GPU driver answers, the worker decides (it imports torch anyway,
    and importing it here too would cost seconds) and reports the same problem."""
    parts = [p for e in targets for p in e.parts if not options.parts or p.name in options.parts]
    if not any(p.needs_kernels for p in parts) or kernel_mode.triton_missing():
        return None
    problem = kernel_mode.interpreter_problem()
    if problem and (options.interpret or kernel_mode.env_asks_for_interpreter()
                    or not kernel_mode.cuda_driver_sees_a_gpu()):
        return problem
    return None


def _wanted_map(options, targets: list[Exercise]) -> bool | str:
    """The case --map names, checked before anything runs; else whether to map the first
    failing kernel case (one exercise checked: a summary of --all draws none)."""
    if options.map is None:
        return len(targets) == 1 and not options.all
    if len(targets) != 1 or options.all:
        raise ArgumentError("--map draws a case of one exercise: name the exercise, not --all")
    from learning.grader import memory_map

    try:
        return memory_map.find_case(targets[0], options.map, options.parts)[1]
    except memory_map.UnknownCase as error:
        raise ArgumentError(str(error)) from None


def default_root() -> Path:
    """The course folder, where the exercise modules live; the current folder if it has them."""
    here = Path.cwd()
    return here if (here / "learning").is_dir() else course.COURSE_ROOT


def _targets(options, progress: state.State) -> list[Exercise]:
    """The exercises to check, with the argument errors a learner can make caught here."""
    if options.all and options.exercise:
        raise ArgumentError("give an exercise name or --all, not both")
    if options.all:
        targets = list(registry.all_exercises())
    elif options.exercise:
        targets = [registry.find(options.exercise)]
    else:
        kernels = kernel_mode.triton_missing() is None
        targets = [e for e in [next_unfinished(progress, kernels)] if e is not None]
    if options.parts:  # --part python --part python: one part, graded once
        options.parts = list(dict.fromkeys(options.parts))
    for exercise in targets:
        for name in options.parts or ():
            if name not in [p.name for p in exercise.parts]:
                known = ", ".join(p.name for p in exercise.parts)
                raise ArgumentError(f"exercise '{exercise.name}' has no part '{name}' "
                                    f"(it has: {known})")
    return targets


def next_unfinished(progress: state.State, kernels: bool = True) -> Exercise | None:
    """The exercise of the first lesson, in reading order, whose parts have not all passed
    (with ``kernels`` False, of the parts that launch none: Triton is missing here)."""
    exercises = {e.name: e for e in registry.all_exercises()}
    for lesson in course.LESSONS:
        exercise = exercises.get(lesson.exercise)
        if exercise is None or not lesson.available:
            continue
        for part in (lesson.part, *lesson.also):
            if part not in [p.name for p in exercise.parts]:
                continue
            if not kernels and exercise.part(part).needs_kernels:
                continue
            grade = progress.grade(exercise.name, part)
            if grade is None or grade.status != "passed":
                return exercise
    return None


def _record(root: Path, result: CheckResult,
            unsaved: state.State | None = None) -> tuple[state.State, bool]:
    """Save the grades; reloaded first so that a check running beside this one is kept (or
    ``unsaved``, the grades of this run that could not be saved). A part that ran no case (its
    module did not import) keeps its last grade: nothing was measured; the exercise is marked
    as not importing instead, until a check imports it again. Returns the grades, and whether
    they were saved."""
    progress = unsaved if unsaved is not None else state.load(root)
    name = result.exercise.name
    if result.import_problem is not None:
        # those two are the grader's, not the file's
        if result.import_problem.kind not in ("start-up", "grader-failed"):
            progress.import_failed(name, result.import_problem.message)
    else:
        progress.imported(name)
    source = "" if result.graded_source is None else state.source_digest(result.graded_source)
    for part_result in result.parts:
        # a pass the course's own reference code may have computed is not the learner's; a
        # file changed as it was checked was read more than once (a kernel's source is read
        # from the file again when it is first launched), so no one text earned its grades
        if part_result.status == "not-run" or result.module_changed or (
                result.borrowed and part_result.status == "passed"):
            continue
        progress.record(result.exercise.name, part_result.part.name, part_result.status,
                        part_result.passed, part_result.graded, source)
    return progress, state.save(root, progress) is not None


def _hint_level(text: str) -> int:
    try:
        level = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the hint level must be a whole number, not "
                                         f"{text!r}") from None
    if level < 1:
        raise argparse.ArgumentTypeError(f"hints are numbered from 1, not {level}")
    return level


def show_hint(console, exercise: Exercise, parts: list[str] | None, root: Path,
              progress: state.State, wanted: int = 0, as_json: bool = False) -> int:
    """Print the next hint of the first part not yet passed (or of the part asked for), or
    hint ``wanted`` when it is given."""
    # The stored grades are of code that imported: for a module that does not import now they
    # would pick the hint, and count it as seen, for code that is not there.
    problem = runner.import_problem(exercise, root)
    if problem is not None:
        return _no_hint_until_it_imports(console, exercise, problem, as_json)
    # Without Triton the kernel parts can never pass here: their hints wait until asked for.
    candidates = [exercise.part(name) for name in parts] if parts else \
        [p for p in exercise.parts if not p.needs_kernels or kernel_mode.triton_missing() is None]
    here = "" if parts or len(candidates) == len(exercise.parts) else " that runs here"
    digest = state.file_digest(root / exercise.filename)

    def passes(part) -> bool:
        """Its last grade a pass, of the file as it is now (a pass recorded of another text,
        before the file was restored to the stub, say, is not this file's)."""
        grade = progress.grade(exercise.name, part.name)
        return grade is not None and grade.status == "passed" and (
            not grade.source or not digest or grade.source == digest)

    unfinished = [p for p in candidates if not passes(p)]
    part = (unfinished or candidates)[0]
    if not unfinished and not wanted:  # nothing left to be stuck on: no hint repeated
        runnable = [p for p in exercise.parts
                    if not p.needs_kernels or kernel_mode.triton_missing() is None]
        every = all(passes(p) for p in runnable)
        which = f"Every part of {exercise.name}{here} passes" if every or not parts else \
            f"The {' and '.join(p.name for p in candidates)} " \
            f"{'part' if len(candidates) == 1 else 'parts'} of {exercise.name} " \
            f"{'passes' if len(candidates) == 1 else 'pass'}"
        reference = f"python -m learning.solution {exercise.name} shows the reference" \
            if every else (f"the reference (python -m learning.solution {exercise.name}) "
                           "opens once every part passes")
        console.print(f"{which}. --hint N still shows hint N, and {reference}.",
                      highlight=False)
        return 0
    if not part.hints:
        console.print(f"The {part.name} part of {exercise.name} has no hints yet; its lesson "
                      "has some at the end of the task.", highlight=False)
        return 0
    if wanted > len(part.hints):
        raise ArgumentError(f"the {part.name} part of {exercise.name} has {len(part.hints)} "
                            f"hints, so there is no hint {wanted}")
    level = wanted or min(progress.hints_seen(exercise.name, part.name) + 1, len(part.hints))
    # Saved first: a reader that stops early (check --hint | head -1) has still seen it.
    progress.saw_hint(exercise.name, part.name, max(level, progress.hints_seen(exercise.name,
                                                                             part.name)))
    if state.save(root, progress) is None and level < len(part.hints):
        # not remembered: the next --hint would show this one again
        note = (f"note: could not save that you saw this hint in "
                f"{state.state_path(root).parent}; ask for the next one with --hint "
                f"{level + 1}")
        if as_json:
            print(note, file=sys.stderr)
        else:
            console.print(escape(note), style="yellow", highlight=False)
    if as_json:
        print(json.dumps({"exercise": exercise.name, "part": part.name, "level": level,
                          "of": len(part.hints), "hint": part.hints[level - 1]}, indent=2))
        return 0
    console.print(f"[bold]Hint {level} of {len(part.hints)}[/bold] for the {part.name} part of "
                  f"{exercise.name} ({part.function}):", highlight=False)
    console.print(escape(part.hints[level - 1]), highlight=False)
    if level == len(part.hints):
        once = "the part passes" if len(exercise.parts) == 1 else \
            f"every part of {exercise.name} passes"
        console.print(f"That is the last hint. Once {once}, python -m learning.solution "
                      f"{exercise.name} shows the reference solution.", style="dim",
                      highlight=False)
    elif wanted:
        console.print(f"{report.hint_command(exercise, part, level + 1)} shows hint "
                      f"{level + 1}.", style="dim", highlight=False)
    else:
        console.print(f"Run the same command again for hint {level + 1}.", style="dim",
                      highlight=False)
    return 0


def _no_hint_until_it_imports(console, exercise: Exercise, problem, as_json: bool) -> int:
    """A sentence instead of a hint (wrapped at the console's width like the rest): the
    module must import first. Nothing is recorded."""
    line = f"No hint: {exercise.filename} must import first ({problem.message}); " \
           f"python -m learning.check {exercise.name} shows the details."
    if as_json:
        print(json.dumps({"exercise": exercise.name, "hint": None, "message": line,
                          "import_problem": {"kind": problem.kind,
                                             "message": problem.message}}, indent=2))
    else:
        console.print(escape(line), style="red", highlight=False)
    return 1


def run() -> int:
    """``main``, ending quietly when the reader of its output goes away (check --json | head:
    ``cli.run``)."""
    return cli.run(main, "check")


if __name__ == "__main__":
    sys.exit(run())
