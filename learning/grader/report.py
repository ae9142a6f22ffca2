"""How a check's results look: rich text for a person, one JSON document for a program."""

from __future__ import annotations

import re
import textwrap

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from learning import course
from learning.cli import visible
from learning.grader import mode as kernel_mode
from learning.grader import registry, results
from learning.grader.borrowed import CHANGED, STARTED
from learning.grader.compare import DECIMALS, format_value
from learning.grader.declarations import Exercise, Part
from learning.grader.numbers import counted
from learning.grader.state import State

STATUS_STYLE = {
    "passed": ("PASS", "green"),
    "failed": ("FAIL", "red"),
    "error": ("ERROR", "red"),
    "not-started": ("TODO", "yellow"),
    "skipped": ("SKIP", "dim"),
    "not-run": ("NOT RUN", "dim"),
    "timed-out": ("TIMEOUT", "red"),
    "crashed": ("CRASH", "red"),
}


def render(console: Console, result: results.CheckResult, state: State | None = None,
           show_next: bool = True, watching: bool = False):
    """Print one exercise's check; ``state`` lets a failure quote a hint already shown."""
    state = state or State()
    exercise = result.exercise
    console.print(f"[bold]check {exercise.name}[/bold] · "
                  f"{escape(visible(str(result.module_path)))}",
                  highlight=False)
    if result.mode is not None:
        console.print(f"kernels: {result.mode.label}, because {escape(result.mode.reason)}",
                      style="dim", highlight=False)
    if result.import_problem is not None:
        _render_import_problem(console, result)
    for part_result in result.parts:
        _render_part(console, exercise, part_result, state, result.memory_map,
                     result.import_problem)
    if result.module_changed:
        console.print(f"\n[yellow]Note:[/yellow] {exercise.filename} was "
                      f"{result.module_changed} while it was checked (by your code or another "
                      "program): the grades above are not recorded, since the check reads the "
                      "file more than once (a kernel's source is read again when it is first "
                      "launched) and may have graded two texts; check it again",
                      highlight=False)
    if result.borrowed:
        console.print(f"\n[yellow]Note:[/yellow] {escape(borrowed_line(result.borrowed))}",
                      highlight=False)
    for note in result.notes:
        console.print(f"\n[yellow]Note:[/yellow] {escape(note)}", highlight=False)
    if result.learner_output.strip():
        console.print("\n[bold]What your code printed[/bold]")
        console.print(visible(result.learner_output.rstrip()), highlight=False, markup=False,
                      emoji=False)
    _render_summary(console, result, state if show_next else None, watching)


def borrowed_line(names: list[str]) -> str:
    """What the check saw the learner's code load of the course's reference code, and the
    programs it started that run code the check cannot watch (learning.grader.borrowed)."""
    started = [n.removeprefix(STARTED) for n in names if n.startswith(STARTED)]
    changed = [n.removeprefix(CHANGED) for n in names if n.startswith(CHANGED)]
    loaded = [n for n in names if not n.startswith((STARTED, CHANGED))]
    said = [f"your code changed {what}" for what in changed]
    if loaded:
        said.append(f"your code loaded the course's reference code ({_some(loaded, ', ')}) "
                    "while it was checked")
    if started:
        said.append(f"your code started {_some(started, '; ')}, whose code the check cannot "
                    "watch (it may load the course's reference code)")
    return "; ".join(said) + (": a case it passed may have been computed by that code, not "
                              "yours, so no part's pass is recorded")


def _some(names: list[str], between: str, shown: int = 3) -> str:
    """The first ``shown`` names, and how many more (asking the registry loads every
    exercise's declaration: fifteen names would bury the sentence)."""
    more = len(names) - shown
    return between.join(names[:shown]) + (f"{between}and {more} more" if more > 0 else "")


def _render_import_problem(console: Console, result: results.CheckResult):
    problem = result.import_problem
    console.print(f"\n[red]Could not load {result.exercise.filename}:[/red] "
                  f"{escape(visible(problem.message))}", highlight=False)
    if problem.traceback:
        console.print("\n".join(traceback_lines(visible(problem.traceback), console.width)),
                      highlight=False, markup=False)


def _lesson_label(exercise: Exercise, part: Part) -> str:
    lesson = course.lesson_for(exercise.name, part.name)
    return f"lessons/{lesson.filename}" if lesson else f"lesson {part.lesson}"


def _render_part(console: Console, exercise: Exercise, part_result: results.PartResult,
                 state: State, memory_map=None, import_problem=None):
    part = part_result.part
    status = part_result.status
    header = f"\n[bold]{part.name.capitalize()} part[/bold] — {escape(part.title)} " \
             f"({_lesson_label(exercise, part)})"
    console.print(header, highlight=False)
    if status == "not-run":  # one line, not one per case: none of them could run
        counted = part_result.graded
        cases = f"{counted} case{'' if counted == 1 else 's'}"
        reason = _not_run_reason(exercise, part_result, import_problem)
        _part_line(console, f"[dim]not run[/dim]: {escape(visible(reason))}, so its {cases} "
                            "did not run")
        return
    if status == "not-started":
        where = _lesson_label(exercise, part) + (f', "{part.section}",' if part.section else "")
        _part_line(console, f"[yellow]not started[/yellow]: {part.function} still raises "
                            f"NotImplementedError; {escape(where)} starts it.")
        return
    if status == "missing":
        _part_line(console, f"[red]{escape(visible(part_result.problem.message))}[/red]")
        return
    seen_errors: dict[tuple[str, str], str] = {}
    faults_said: dict[str, str] = {}  # an interpreter's fault, said in full: in which case
    for case_result in part_result.cases:
        fault = case_result.verdict.interpreter_fault
        _render_case(console, case_result, _hint_pointer(exercise, part, case_result, state),
                     _repeat_of(case_result, seen_errors), faults_said.get(fault, ""))
        if fault:
            faults_said.setdefault(fault, case_result.name)
        if memory_map is not None and (memory_map.part, memory_map.case) == \
                (part.name, case_result.name):
            from learning.grader import map_view

            map_view.render(console, memory_map)
    if part_result.compile_check is not None:
        _render_compile_check(console, part_result.compile_check)
    grade_style = "green" if status == "passed" else "red"
    # the GPU compile line above is a check of its own, not one of the cases counted
    check = part_result.compile_check
    compiled = "" if check is None or not check.ran else \
        "; the GPU compile check failed" if check.rejected else "; the GPU compile check passed"
    console.print(f"  [{grade_style}]{part_result.passed}/{part_result.graded} cases passed"
                  f"{compiled}[/{grade_style}]", highlight=False)


def _not_run_reason(exercise: Exercise, part_result: results.PartResult,
                    import_problem=None) -> str:
    """Why a part ran no case, naming the learner's file."""
    if import_problem is None:
        return part_result.not_run
    if import_problem.kind == "missing-file":
        return f"{exercise.filename} is missing"
    if import_problem.kind == "not-a-file":
        return f"{exercise.filename} is not a file Python can read"
    return f"{exercise.filename} could not be imported"


#: Failures that say the same of every case they fail (the call, not its values), each said in
#: full once and referred to after
_SAID_ONCE = ("not-plain-python",)


_NUMBERS = re.compile(r"\d+")


def _repeat_of(case_result: results.CaseResult, seen: dict[tuple[str, str], str]) -> str:
    """The earlier case of the part that raised this same error, or failed for the same
    reason about the call itself (``_SAID_ONCE``), if any (else remember it). The same error
    is the same words and traceback but for their numbers (the lines quoted in the traceback
    still tell lines apart): an access out of bounds at one line, by another program and lane
    in each case, is said in full once (the first line of each, with its numbers, is still
    shown)."""
    verdict = case_result.verdict
    if verdict.status != "error" and getattr(verdict.bug, "key", None) not in _SAID_ONCE:
        return ""
    signature = (_NUMBERS.sub("#", verdict.summary), _NUMBERS.sub("#", verdict.traceback))
    if signature in seen:
        return seen[signature]
    seen[signature] = case_result.name
    return ""


def hint_command(exercise: Exercise, part: Part, level: int) -> str:
    """The command that shows exactly hint ``level`` of ``part``."""
    return f"python -m learning.check {exercise.name} --part {part.name} --hint {level}"


def _hint_pointer(exercise: Exercise, part: Part,
                  case_result: results.CaseResult, state: State) -> str:
    """Point a failure at the hint that helps with its known cause: quoted if already shown."""
    level = next((b.hint for b in case_result.verdict.causes
                  if 0 < b.hint <= len(part.hints)), 0)
    if not level:
        return ""
    command = hint_command(exercise, part, level)
    if state.hints_seen(exercise.name, part.name) >= level:
        # a hint's code lines are printed whole by the command; quoted here, indented under the
        # case, they would break: its words are quoted, and the command shows the code again
        text = part.hints[level - 1]
        words = " ".join(line for line in text.splitlines() if not line.startswith("    "))
        return f"hint {level}: {words}" + (f" (its code: {command})" if words != text else "")
    return f"hint {level} of {len(part.hints)} helps with this: {command}"


CASE_INDENT = 10  # a case's details sit under its name, wrapped lines included


def traceback_lines(text: str, width: int) -> list[str]:
    """A traceback's lines for a console ``width`` columns wide. Python marks the failing
    expression with a line of ^ and ~ under it; under a source line too long for the width,
    which wraps, the marks would point at the wrong characters, so they are left out."""
    kept = []
    for line in text.rstrip().splitlines():
        marks = line.strip()
        if marks and set(marks) <= {"^", "~"} and kept and len(kept[-1]) > width:
            continue
        kept.append(line)
    return kept


def _part_line(console: Console, markup: str) -> None:
    """One line for a whole part, indented under its header, wrapped lines too."""
    from rich.padding import Padding

    console.print(Padding(Text.from_markup(markup), (0, 0, 0, 2)))


def _say(console: Console, body: str, indent: int = CASE_INDENT, label: str = "",
         style: str = "", first: Text | None = None, sep: str = " ", hang: int = 0):
    """A detail of a case, wrapped at the console's width with every line under ``indent``
    (rich would start wrapped lines at column 0), and ``hang`` columns further after the
    first (a list item's text). ``label`` starts it in ``style``; ``first`` replaces the
    indent of the first line (a case's status)."""
    width = max(20, console.width - indent)
    # case details carry the learner's text (messages, reprs, tracebacks): shown, not acted on
    body, label = visible(body), visible(label)
    text = f"{label}{sep}{body}" if label else body
    lines = textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False,
                          subsequent_indent=" " * hang) or [""]
    for number, line in enumerate(lines):
        out = first.copy() if number == 0 and first is not None else Text(" " * indent)
        if number == 0 and label:
            out.append(label, style=style)
            out.append(line[len(label):])
        else:
            out.append(line, style="" if label else style)
        console.print(out, highlight=False, soft_wrap=True)


def case_line(purpose: str) -> str:
    """What follows a case's name on its status line: ': <purpose>', or nothing."""
    return f": {purpose}" if purpose else ""


def _render_case(console: Console, case_result: results.CaseResult, hint: str = "",
                 repeat_of: str = "", fault_said_at: str = ""):
    verdict = case_result.verdict
    label, style = STATUS_STYLE[verdict.status]
    status = Text("  ")
    status.append(f"{label:<7}", style=style)
    status.append(" ")
    # The purpose is what the case tests, never a claim about the learner's code. It follows
    # the name after a colon: purposes are written as descriptions ("3x3 @ 3x2 in tiles of 2:
    # ...") or as claims ("q, k and v must be the same after the call"), and only a colon reads
    # right before both.
    _say(console, case_line(case_result.purpose), label=case_result.name,
         style="bold", first=status, sep="")
    if verdict.status == "skipped" and verdict.summary.startswith("not run:"):
        _say(console, verdict.summary)  # not a routine skip (a GPU-only case): say why
        return
    if verdict.passed or verdict.status in ("skipped", "not-started"):
        return
    if repeat_of:
        same = "the same error as" if verdict.status == "error" else "as"
        _say(console, f"{same} case '{repeat_of}' above: {_first_line(verdict.summary)}")
        return
    for line in (verdict.summary, verdict.where and f"at {verdict.where}",
                 verdict.status == "failed" and verdict.expected
                 and f"expected {verdict.expected}", verdict.got and f"got      {verdict.got}"):
        if line:
            _say(console, line)
    # Short outputs are shown whole above; for long ones, list where they differ.
    for mismatch in verdict.mismatches if verdict.size > 8 else ():
        # in the named result it belongs to, where the output stacks several (dq, dk, dv)
        where = mismatch.piece or f"[{', '.join(str(i) for i in mismatch.index)}]"
        _say(console, f"at {where}: expected {_fmt(mismatch.want, verdict.decimals)}, got "
                      f"{_fmt(mismatch.got, verdict.decimals)}", CASE_INDENT + 2)
    hidden = verdict.mismatch_count - len(verdict.mismatches)
    if hidden > 0 and verdict.size > 8:
        _say(console, f"... and {counted(hidden, 'more mismatch', 'more mismatches')} (cut)",
             CASE_INDENT + 2)
    if verdict.meaning:
        _say(console, verdict.meaning, label="what this error means:", style="yellow")
    if verdict.interpreter_fault:
        # said in full once; after, its first clause and where the rest is
        fault = verdict.interpreter_fault if not fault_said_at else \
            f"{verdict.interpreter_fault.split(':')[0]} (as case '{fault_said_at}' above says)"
        _say(console, fault, label="in the interpreter:", style="yellow")
    if len(verdict.causes) == 1:
        _say(console, verdict.causes[0].cause, label="likely cause:", style="yellow")
    elif verdict.causes:
        _say(console, "", label="likely cause, one of:", style="yellow")
        for bug in verdict.causes:
            _say(console, f"- {bug.cause}", CASE_INDENT + 2, hang=2)
    elif verdict.status == "failed" and verdict.observations:
        _say(console, "", label="no known mistake gives this output; what differs:",
             style="yellow")
        for observation in verdict.observations:
            _say(console, f"- {observation}", CASE_INDENT + 2, hang=2)
    if verdict.first_step:  # observed, as the lines above: the learner's values beside ours
        _say(console, verdict.first_step, label="step by step:", style="yellow")
    if hint:
        _say(console, hint, style="cyan")
    if verdict.traceback:  # escaped first: a \x85 or \u2028 in a message is no line break
        for line in traceback_lines(visible(verdict.traceback), console.width - CASE_INDENT):
            _say(console, line)


def _render_compile_check(console: Console, check: results.CompileCheck):
    """The kernels compiled for a GPU after the interpreter run: what the compiler rejected."""
    from learning.grader.gpu_compile import TARGET_LABEL

    if not check.ran:
        _say(console, f"note: the GPU compile check could not run: {check.note}", 2,
             style="dim")
        return
    rejected = check.rejected
    kernels = ", ".join(sorted({c.kernel for c in check.compiled if c.key}))  # launches only
    label, style = STATUS_STYLE["failed" if rejected else "passed"]
    status = Text("  ")
    status.append(f"{label:<7}", style=style)
    status.append(" ")
    # the GPUs it compiled for (LEARNING_COMPILE_TARGET may name others than the default)
    targets = ", ".join(sorted({c.target for c in check.compiled if c.key})) or TARGET_LABEL
    _say(console, f": the kernels compile for a GPU ({targets}), not only in the "
                  f"interpreter: {kernels}", label="GPU compile", style="bold", first=status,
         sep="")
    for compiled in rejected:
        where = f", line {compiled.line}" if compiled.line else ""
        if compiled.status in ("unvouched", "refused"):
            _say(console, f"{compiled.kernel}: {compiled.message}")
            continue
        _say(console, f"the compiler rejected {compiled.kernel}{where}: {compiled.message}")
        if compiled.hint:
            # The compiler's own words are the evidence for this cause.
            _say(console, compiled.hint, label="likely cause:", style="yellow")
    if check.note:
        _say(console, f"not checked: {check.note}", style="dim")


def _fmt(value: float, decimals: int = DECIMALS) -> str:
    return format_value(value, decimals)


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _render_summary(console: Console, result: results.CheckResult, state: State | None,
                    watching: bool = False):
    grades = []
    for part_result in result.parts:
        name = part_result.part.name.capitalize()
        if part_result.status == "not-started":
            grades.append(f"{name} not started")
        elif part_result.status == "missing":
            grades.append(f"{name} missing")
        elif part_result.status == "not-run":  # no case ran: there is no grade to give
            grades.append(f"{name} not run")
        else:
            check = part_result.compile_check
            statuses = {c.status for c in check.rejected} if check else set()
            rejected = "" if not statuses else " (rejected by the GPU compiler)" \
                if "rejected" in statuses else " (a GPU's launch would refuse it)" \
                if "refused" in statuses else " (the GPU compile check could not vouch for it)"
            grades.append(f"{name} {part_result.passed}/{part_result.graded}{rejected}")
    style = ("yellow" if result.borrowed else "green") if result.ok else "red"
    console.print(f"\n[bold {style}]Grade:[/bold {style}] {' · '.join(grades)}", highlight=False)
    if state is not None:
        console.print(_next_step(result, state, watching), highlight=False)


def _next_step(result: results.CheckResult, state: State | None = None,
               watching: bool = False) -> str:
    """Always end with what to do next: the file to fix, or the next lesson in reading order
    that is not done yet (from the grades kept, this check's included). Under ``watching``
    (learning.watch), saving the file is what checks it again."""
    exercise = result.exercise
    command = f"python -m learning.check {exercise.name}"
    command += "".join(f" --part {name}" for name in result.asked)  # as the learner asked
    again = "save it, and watch checks it again" if watching else f"then run {command} again"
    started = [p for p in result.parts if p.started]
    if not started:
        where = _lesson_label(exercise, result.parts[0].part)
        if watching:
            return f"Next: read {where}, write your code in {exercise.filename} and {again}"
        return f"Next: read {where}, write your code in {exercise.filename}, then run {command}"
    if not result.ok:
        return f"Next: fix {exercise.filename}, {again}"
    if result.borrowed:  # passed, but perhaps by the course's code: nothing recorded
        return f"Next: write {exercise.filename} without the course's reference code or other " \
               f"programs (the note above says what it used), {again}"
    names = joined([p.part.name.capitalize() for p in started])
    done = f"the {names} parts pass" if len(started) > 1 else f"the {names} part passes"
    lessons = [lesson for p in started
               if (lesson := course.lesson_for(exercise.name, p.part.name)) is not None]
    start = min(lessons, key=course.LESSONS.index) if lessons else None
    return f"Well done: {done}. {next_lesson_line(state or State(), start)}"


def joined(names: list[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def next_lesson_line(state: State, start: course.Lesson | None = None) -> str:
    """'Next: lessons/NN-name.md', the first lesson not done, or that every one is. Without
    Triton, the first whose Python part is not done, or where to take the Triton parts. With
    ``start``, the lesson of a part that has just passed, the first not done from that lesson
    on in reading order (so the same exercise's Triton part follows its Python part, and the
    parts of that lesson still to pass are named), and the earliest not done only when nothing
    from there on remains."""
    kernels = kernel_mode.triton_missing() is None
    graded = {e.name: tuple(p.name for p in e.parts if kernels or not p.needs_kernels)
              for e in registry.all_exercises()}
    following = course.next_lesson(state, graded, kernels, start)
    if following is None:
        return "Every lesson's exercise passes." if kernels else \
            kernel_mode.python_parts_done_line()
    if not kernels and any(p not in graded[following.exercise]
                           for p in (following.part, *following.also)):
        return f"Next: lessons/{following.filename}, for its Python part (Triton cannot run " \
               "here)."
    if following == start:  # staying on the lesson just worked on: say which parts are left
        left = [p for p in (following.part, *following.also)
                if p in graded.get(following.exercise, ())
                and ((grade := state.grade(following.exercise, p)) is None
                     or grade.status != "passed")]
        if left:
            which = joined([p.capitalize() for p in left])
            command = f"python -m learning.check {following.exercise}" + \
                (f" --part {left[0]}" if len(left) == 1 else "")
            return f"Next: the {which} part{'s' if len(left) > 1 else ''} of " \
                   f"lessons/{following.filename} ({command})."
    return f"Next: lessons/{following.filename}."


def to_json(result: results.CheckResult, state: State | None = None) -> dict:
    """The check as plain data: cases, verdicts and grades, for editors and scripts."""
    exercise = result.exercise
    mode = None
    if result.mode is not None:
        mode = {"interpreter": result.mode.interpret, "reason": result.mode.reason}
    problem = result.import_problem
    return {
        "exercise": exercise.name,
        "module": str(result.module_path),
        "mode": mode,
        "ok": result.ok,
        "recorded": result.ok and not result.borrowed,  # a borrowed pass is not recorded
        "seconds": round(result.seconds, 3),
        "import_problem": None if problem is None else {"kind": problem.kind,
                                                        "message": problem.message},
        "parts": [_part_json(exercise, p) for p in result.parts],
        "learner_output": result.learner_output,
        "borrowed": list(result.borrowed),
        "module_changed": result.module_changed,
        "notes": list(result.notes),
        "next": _next_step(result, state),
        "memory_map": _memory_map_json(result.memory_map),
    }


def _memory_map_json(memory_map) -> dict | None:
    """Which program touched which element in one case (learning.grader.memory_map), or null."""
    if memory_map is None:
        return None
    from learning.grader import memory_map as maps

    return maps.to_json(memory_map)


def _part_json(exercise: Exercise, part_result: results.PartResult) -> dict:
    part = part_result.part
    lesson = course.lesson_for(exercise.name, part.name)
    return {
        "name": part.name,
        "function": part.function,
        "lesson": lesson.filename if lesson else part.lesson,
        "status": part_result.status,
        "passed": part_result.passed,
        "total": part_result.graded,
        "problem": None if part_result.problem is None else part_result.problem.message,
        "cases": [_case_json(c) for c in part_result.cases],
        "gpu_compile": _compile_json(part_result.compile_check),
    }


def _compile_json(check: results.CompileCheck | None) -> dict | None:
    if check is None:
        return None
    return {"ran": check.ran, "note": check.note,
            "kernels": [{"kernel": c.kernel, "status": c.status, "message": c.message,
                         "line": c.line, "likely_cause": c.hint} for c in check.compiled]}


def _case_json(case_result: results.CaseResult) -> dict:
    verdict = case_result.verdict
    return {
        "name": case_result.name,
        "purpose": case_result.purpose,
        "status": verdict.status,
        "summary": verdict.summary,
        # One cause, or null when there is none or several (then "causes" lists them all).
        "bug": verdict.bug.key if len(verdict.causes) == 1 else None,
        "likely_cause": verdict.bug.cause if len(verdict.causes) == 1 else None,
        "causes": [{"key": b.key, "cause": b.cause} for b in verdict.causes],
        "error_meaning": verdict.meaning or None,
        "where": verdict.where or None,
        "observations": list(verdict.observations),
        "first_step": verdict.first_step or None,
        "interpreter_fault": verdict.interpreter_fault or None,
        "expected": verdict.expected,
        "got": verdict.got,
        "mismatches": [{"index": list(m.index), "expected": _number(m.want),
                        "got": _number(m.got), **({"piece": m.piece} if m.piece else {})}
                       for m in verdict.mismatches],
        "traceback": verdict.traceback,
        "seconds": round(verdict.seconds, 4),
    }


def _number(value: float):
    """JSON has no NaN or infinity: those travel as the strings "nan", "inf", "-inf"."""
    return value if value == value and abs(value) != float("inf") else format_value(value)
