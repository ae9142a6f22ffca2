"""Every exercise, the same claims: its reference passes, its stub is "not started", every
catalogued version gets the diagnosis it must get, every case catches the bugs it declares,
and a failure names only causes the grader has evidence for."""

import dataclasses
import re
import subprocess
import sys
from collections import defaultdict

import pytest

from learning.exercises import solution_path
from learning.grader import registry, stuck
from learning.grader.catalogue import DIAGNOSES, versions
from learning.grader.compare import COMMON_BUGS
from learning.grader.errors import MEANINGS
from tests.helpers import (
    COURSE_ROOT,
    failing_bugs,
    grade_text,
    named_in,
    solution_text,
    stub_text,
    version_text,
)

EXERCISES = registry.all_exercises()
NAMES = [exercise.name for exercise in EXERCISES]
VERSIONS = [(exercise.name, version) for exercise in EXERCISES
            for version in versions(exercise.name)]
RIGHT = [(name, v) for name, v in VERSIONS if v.bug is None]
# Wrong versions grouped by the mistake they make: one test grades a group once and checks
# both that each version is named and that each case declaring the mistake catches it.
GROUPS = defaultdict(list)
for _name, _version in VERSIONS:
    if _version.bug is not None:
        GROUPS[(_name, _version.part, _version.bug)].append(_version)
TIMEOUT_SECONDS = 2.0  # the case limit for versions that never finish


def _generic(diagnosis: str) -> bool:
    """A diagnosis the grader makes the same way for every exercise: a symptom rule, an
    error's meaning, a time limit, or no known cause."""
    return diagnosis in COMMON_BUGS or diagnosis in DIAGNOSES or diagnosis.startswith("error:")


def _representatives() -> set:
    """The groups the quick run grades: every generic diagnosis once (in the earliest lesson
    that catalogues it, where a check is cheapest), and in every exercise
    its first own (replayed) mistake, so each of the grader's ways of naming a cause, and each
    exercise's replays, is proven by a wrong answer caught. The rest (every catalogued mistake
    of every part) is the exhaustive set."""
    chosen, seen = set(), set()
    order = {name: i for i, name in enumerate(NAMES)}  # lesson order: the small kernels first
    for key in sorted(GROUPS, key=lambda k: (order[k[0]], k)):
        name, part, diagnosis = key
        kind = diagnosis if _generic(diagnosis) else name
        if kind not in seen:
            seen.add(kind)
            chosen.add(key)
    return chosen


def _swept(keys, quick: set):
    """pytest parameters, those outside ``quick`` marked exhaustive."""
    return [pytest.param(*key, marks=() if key in quick else pytest.mark.exhaustive,
                         id=f"{key[0]}/{key[1]}: {key[2]}") for key in keys]


QUICK_GROUPS = _representatives()
# one right version per exercise in the quick run; every other right version in the exhaustive
# set (the reference solution of every part passes in the quick run too)
QUICK_RIGHT = {next(i for i, (n, _) in enumerate(RIGHT) if n == name)
               for name in {n for n, _ in RIGHT}}


@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes_every_case(tmp_path, name):
    result = grade_text(tmp_path, name, solution_text(name))
    assert result.ok
    for part in result.parts:
        failures = {c.name: c.verdict.summary for c in part.cases
                    if c.verdict.status not in ("passed", "skipped")}
        assert part.status == "passed", (part.part.name, failures)


@pytest.mark.parametrize("name", NAMES)
def test_stub_reports_every_part_not_started(tmp_path, name):
    result = grade_text(tmp_path, name, stub_text(name))
    assert [p.status for p in result.parts] == ["not-started"] * len(result.parts)
    assert not result.ok


def test_importing_each_stub_only_defines():
    # one fresh process imports every stub, then every reference solution and triton_kernels,
    # each printing its name once imported: importing torch once, not once per module, and a
    # module that runs code names itself by stopping
    for name in NAMES:
        assert "raise NotImplementedError" in stub_text(name), name
    solutions = [str(solution_path(name)) for name in NAMES]
    probe = "".join(f"import {name}; print({name!r}, flush=True)\n" for name in NAMES) + (
        "import importlib.util, sys\n"
        "for path in sys.argv[1:]:\n"
        "    spec = importlib.util.spec_from_file_location('solution', path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "    print(path, flush=True)\n"
        "import triton_kernels; print('triton_kernels', flush=True)\n")
    done = subprocess.run([sys.executable, "-c", probe, *solutions], capture_output=True,
                          text=True, cwd=COURSE_ROOT,
                          env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [*NAMES, *solutions, "triton_kernels"], done.stderr


@pytest.mark.parametrize("name, version", [
    pytest.param(n, v, marks=() if i in QUICK_RIGHT else pytest.mark.exhaustive,
                 id=f"{n}/{v.part}: {v.name}") for i, (n, v) in enumerate(RIGHT)])
def test_correct_version_passes(tmp_path, name, version):
    result = grade_text(tmp_path, name, version_text(name, version), [version.part])
    (part,) = result.parts
    failures = {c.name: c.verdict.summary for c in part.cases
                if c.verdict.status not in ("passed", "skipped")}
    assert part.status == "passed", failures


def _runs_here(case, mode) -> bool:
    return not case.gpu_only or not mode.interpret


@pytest.mark.parametrize("name, part_name, diagnosis", _swept(sorted(GROUPS), QUICK_GROUPS))
def test_catalogued_mistake_gets_its_diagnosis_where_declared(tmp_path, mode, name, part_name,
                                                             diagnosis):
    exercise = registry.find(name)
    part = exercise.part(part_name)
    graded = {}
    group = [v for v in GROUPS[(name, part_name, diagnosis)]
             if mode.interpret or not v.interpreter_only]
    if not group:
        pytest.skip("the diagnosis rests on the interpreter's bounds checks")
    for version in group:
        folder = tmp_path / str(len(graded))
        folder.mkdir()
        # versions that never finish (in one order of the programs, for a kernel that waits
        # for another program) get a short limit
        limit = TIMEOUT_SECONDS if diagnosis in ("timed-out", "waits-for-another-program") \
            else None
        result = grade_text(folder, name, version_text(name, version), [part_name],
                            case_seconds=limit)
        (graded[version.name],) = result.parts
    for version_name, result in graded.items():
        assert result.status == "failed", version_name
        _assert_diagnosis(result, diagnosis, version_name, mode.interpret)
    # Every case that declares this mistake fails for at least one of its versions, naming it.
    for case in part.cases:
        if diagnosis in case.catches and _runs_here(case, mode):
            caught = [v for v, r in graded.items()
                      if diagnosis in named_in({c.name: c for c in r.cases}[case.name])]
            assert caught, f"case {case.name!r} declares {diagnosis!r} but catches no version"


def _assert_diagnosis(result, diagnosis: str, version: str, interpreted: bool = True):
    failing = [c for c in result.cases if c.verdict.status not in ("passed", "skipped",
                                                                   "not-run")]
    if diagnosis == "timed-out":
        stopped = [c for c in failing if c.verdict.status == "timed-out"]
        assert stopped and not stopped[0].verdict.causes, version
        assert "did not finish within" in stopped[0].verdict.summary
        # and the learner's line it was running, where the stack can be asked for (not Windows)
        assert not stuck.supported() or re.search(
            r"when it was stopped it was running \w+[.]py, line \d+ [(]\w+[)]: \S",
            stopped[0].verdict.summary), (version, stopped[0].verdict.summary)
    elif diagnosis == "unknown":
        # No replay matches: no cause at all, and what differs is said instead.
        assert not failing_bugs(result), (version, failing_bugs(result))
        wrong = [c for c in failing if c.verdict.status == "failed"]
        assert wrong and all(c.verdict.observations for c in wrong), version
    elif diagnosis.startswith("error:"):
        key = diagnosis.removeprefix("error:")
        raised = [c for c in failing if c.verdict.status == "error"]
        assert raised and all(c.verdict.meaning_key == key for c in raised), (
            version, {c.name: c.verdict.meaning_key for c in raised})
        # The learner's line: a Python frame in the interpreter (a compiler's error on a GPU
        # points into the kernel's source instead).
        assert all(c.verdict.where for c in raised) or not interpreted, version
        assert not failing_bugs(result), (version, failing_bugs(result))
    else:
        assert diagnosis in failing_bugs(result), (version, failing_bugs(result))


@pytest.mark.parametrize("exercise", EXERCISES, ids=NAMES)
def test_every_declared_catch_is_proven_by_a_catalogued_version(exercise):
    catalogued = {(v.part, v.bug) for v in versions(exercise.name) if v.bug}
    for part in exercise.parts:
        keys = {bug.key: bug for bug in part.bugs} | {k: b for k, b in COMMON_BUGS.items()
                                                      if k not in {b.key for b in part.bugs}}
        for case in part.cases:
            assert case.purpose, (part.name, case.name)
            for key in case.catches:
                assert key in keys, (part.name, case.name, key)
                assert (part.name, key) in catalogued, (
                    f"{part.name}/{case.name} declares {key!r}, and no catalogued version "
                    "has that mistake")


@pytest.mark.parametrize("exercise", EXERCISES, ids=NAMES)
def test_every_declared_bug_has_a_catalogued_version(exercise):
    """A part's own bugs are each made by some catalogued version (the common ones it only
    words for itself are made by versions of other parts or exercises)."""
    catalogued = {(v.part, v.bug) for v in versions(exercise.name) if v.bug}
    for part in exercise.parts:
        for bug in part.bugs:
            assert bug.key in COMMON_BUGS or (part.name, bug.key) in catalogued, (
                part.name, bug.key)


@pytest.mark.parametrize("exercise", EXERCISES, ids=NAMES)
def test_every_declared_bug_can_be_recognised(exercise):
    """A bug the grader has no evidence for (no replay, no error) could only ever be a guess."""
    for part in exercise.parts:
        for bug in part.bugs:
            assert bug.recognisable or bug.key in COMMON_BUGS, (part.name, bug.key)


@pytest.mark.parametrize("exercise", EXERCISES, ids=NAMES)
def test_every_catalogued_diagnosis_is_known_and_every_part_has_hints(exercise):
    meanings = {f"error:{m.key}" for m in MEANINGS}
    for version in versions(exercise.name):
        if version.bug is None:
            continue
        bugs = {b.key for b in exercise.part(version.part).bugs} | set(COMMON_BUGS)
        assert version.bug in bugs | meanings | set(DIAGNOSES), (version.name, version.bug)
    for part in exercise.parts:
        assert part.hints, f"{exercise.name}/{part.name} has no hints"
        for bug in part.bugs:
            assert 0 <= bug.hint <= len(part.hints), (part.name, bug.key)


@pytest.mark.parametrize("exercise", EXERCISES, ids=NAMES)
def test_every_part_catalogues_an_error_a_timeout_and_an_unknown_mistake(exercise):
    kinds = defaultdict(set)
    for version in versions(exercise.name):
        if version.bug in ("timed-out", "unknown"):
            kinds[version.part].add(version.bug)
        elif version.bug and version.bug.startswith("error:"):
            kinds[version.part].add("error")
    for part in exercise.parts:
        assert {"error", "unknown"} <= kinds[part.name], (part.name, kinds[part.name])
    assert any("timed-out" in k for k in kinds.values()), exercise.name


@pytest.mark.interpreter
def test_a_kernel_that_hangs_in_one_order_of_its_programs_is_told_it_waits_for_another(
        tmp_path, mode):
    if not mode.interpret:
        pytest.skip("the order of a launch's programs is the interpreter's to choose")
    # the catalogued wait: stopped in the order that runs the waiting program first, passed
    # in the other, so the message names the wait instead of a loop that never advances
    (waits,) = [v for v in versions("rmsnorm") if v.bug == "waits-for-another-program"]
    (tmp_path / "waits").mkdir()
    (tmp_path / "forever").mkdir()
    (part,) = grade_text(tmp_path / "waits", "rmsnorm", version_text("rmsnorm", waits),
                         ["triton"], case_seconds=TIMEOUT_SECONDS).parts
    first = next(c for c in part.cases if c.verdict.status != "passed")
    assert first.verdict.status == "timed-out"
    assert [b.key for b in first.verdict.causes] == ["waits-for-another-program"]
    assert "the usual reason" not in first.verdict.summary
    assert "did not finish within" in first.verdict.summary
    # a kernel that never ends in either order: stopped again in the other, and no cause
    forever = waits.source.replace("while tl.atomic_add(scale_ptr + n_rows + row, 0.0) == 0.0:",
                                   "while tl.atomic_add(scale_ptr + n_rows + row, 0.0) >= 0.0:")
    assert forever != waits.source
    text = version_text("rmsnorm", dataclasses.replace(waits, source=forever))
    (part,) = grade_text(tmp_path / "forever", "rmsnorm", text, ["triton"],
                         case_seconds=TIMEOUT_SECONDS).parts
    first = next(c for c in part.cases if c.verdict.status != "passed")
    assert first.verdict.status == "timed-out" and not first.verdict.causes
    assert "the usual reason is a loop" in first.verdict.summary


# Wrappers around lesson 09's kernel that fail only from their second call on: state kept
# between calls. Run alone in a fresh process, as the check's reruns run a case, each passes
# in either order of the programs, which says nothing about the order.
SECOND_CALL_FAILS = {
    "weight kept from the first call": '''
        _KEPT = {}

        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            weight = _KEPT.setdefault(x.dtype, weight.contiguous())
            output = torch.empty_like(x)
            rmsnorm_kernel[(n_rows,)](output, x, weight, output.stride(0), x.stride(0),
                                      n_cols, eps, BLOCK=triton.next_power_of_2(n_cols))
            return output
    ''',
    "output buffer made once": '''
        _BUFFER = []

        def rmsnorm_triton(x, weight, eps=1e-6):
            n_rows, n_cols = x.shape
            if not _BUFFER:
                _BUFFER.append(torch.empty(n_rows * n_cols, dtype=x.dtype, device=x.device))
            output = _BUFFER[0].view(n_rows, n_cols)
            rmsnorm_kernel[(n_rows,)](output, x, weight.contiguous(), output.stride(0),
                                      x.stride(0), n_cols, eps,
                                      BLOCK=triton.next_power_of_2(n_cols))
            return output
    ''',
    "a lock taken and never given back": '''
        import threading

        _LOCK = threading.Lock()

        def rmsnorm_triton(x, weight, eps=1e-6):
            _LOCK.acquire()
            n_rows, n_cols = x.shape
            output = torch.empty_like(x)
            rmsnorm_kernel[(n_rows,)](output, x, weight.contiguous(), output.stride(0),
                                      x.stride(0), n_cols, eps,
                                      BLOCK=triton.next_power_of_2(n_cols))
            return output
    ''',
}


@pytest.mark.interpreter
@pytest.mark.parametrize("what", sorted(SECOND_CALL_FAILS))
def test_a_failure_that_a_fresh_process_hides_is_not_blamed_on_the_programs_order(
        tmp_path, mode, what):
    if not mode.interpret:
        pytest.skip("the order of a launch's programs is the interpreter's to choose")
    (waits,) = [v for v in versions("rmsnorm") if v.bug == "waits-for-another-program"]
    version = dataclasses.replace(waits, source=SECOND_CALL_FAILS[what])
    (part,) = grade_text(tmp_path, "rmsnorm", version_text("rmsnorm", version), ["triton"],
                         case_seconds=TIMEOUT_SECONDS).parts
    assert part.status == "failed", what
    blamed = failing_bugs(part) & {"program-order", "waits-for-another-program"}
    assert not blamed, (what, {c.name: c.verdict.summary for c in part.cases
                               if c.verdict.causes})


@pytest.mark.interpreter
def test_two_programs_adding_into_one_sum_are_told_they_share_memory(tmp_path, mode):
    if not mode.interpret:
        pytest.skip("what each program touches is seen in the interpreter")
    # run one after another the two programs of a row lose no addition, so every value is
    # right; what one read that the other stored is the evidence, named with both programs
    (lost,) = [v for v in versions("rmsnorm") if v.name.startswith("two programs add into")]
    (part,) = grade_text(tmp_path, "rmsnorm", version_text("rmsnorm", lost), ["triton"]).parts
    assert part.passed == 0, [c.verdict.summary for c in part.cases]
    first = part.cases[0].verdict
    assert [b.key for b in first.causes] == ["programs-share-memory"]
    # the programs as the kernel numbers them, in its grid of rows by halves
    assert re.search(r"program \(0, [01]\) read from sum_ptr what program \(0, [01]\) of the "
                     r"same launch stored, and no atomic operation ordered the two",
                     first.summary), first.summary
    # an atomic count by the reader alone, that waits for nothing, orders nothing: the same
    # evidence, in every case, whichever order the case ran in
    (counted,) = [v for v in versions("rmsnorm") if v.name.startswith(
        "a row's scale read after counting in") and "by the next" in v.name]
    (tmp_path / "counted").mkdir()
    (part,) = grade_text(tmp_path / "counted", "rmsnorm", version_text("rmsnorm", counted),
                         ["triton"]).parts
    ran = [c for c in part.cases if "needs a CUDA GPU" not in c.verdict.summary]
    assert part.passed == 0 and ran
    assert all(["programs-share-memory"] == [b.key for b in c.verdict.causes]
               for c in ran), [c.verdict.summary for c in ran]
    # the first case runs last to first: the reader runs before the program that stores
    assert re.search(r"program \d+ stored into scale_ptr where program \d+ of the same launch "
                     r"had read", ran[0].verdict.summary), ran[0].verdict.summary
    assert re.search(r"program \d+ read from scale_ptr what program \d+ of the same launch "
                     r"stored", ran[1].verdict.summary), ran[1].verdict.summary
