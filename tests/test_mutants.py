"""Mutation testing of the grader: wrong versions of every reference solution, made by small
edits of its syntax tree, must each be failed, unless they compute the same outputs.

Every reference solution (``learning/exercises/NAME/solution.py``) whose exercise is registered
is mutated (a swapped operator, a dropped mask, another ``other`` fill, an index or offset
shifted by one, a dropped reduction, max and min or sum and max swapped) in the functions one
part calls, and a seeded sample of the mutants is graded, one part per process. The test asserts
that the grader never crashes or hangs, and that every mutant that passes is equivalent: run
outside the grader, its outputs agree with the reference solution's within the part's tolerance
on every case.

``LEARNING_MUTANTS_PER_PART`` (default 2; the softmax exercise gets four times as many) sets
the sample size; the kill rate is reported as a warning and in any failure message.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import random
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from learning.exercises import solution_path
from learning.grader import compare, registry, runner
from learning.grader.declarations import Exercise, Part
from tests.helpers import course_pythonpath

PER_PART = int(os.environ.get("LEARNING_MUTANTS_PER_PART", "2"))
FOCUS = {"softmax": 4}  # the course's centre gets a larger sample
SEED = 20260
GRADE_SECONDS = 150  # one mutant's check, on a loaded machine; a hang would take far longer

_SWAPPED_OPERATORS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
                      ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_REDUCTIONS = {"sum", "max", "min"}
_SWAPPED_NAMES = {"max": ["min", "sum"], "min": ["max"], "sum": ["max"],
                  "maximum": ["minimum"], "minimum": ["maximum"]}


@dataclass(frozen=True)
class Mutant:
    exercise: str
    part: str
    description: str
    source: str


def _called_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _edits(node: ast.AST) -> list[tuple[str, object]]:
    """The mutations this node allows: (description, function that edits a copy in place)."""
    edits = []
    if isinstance(node, ast.BinOp) and type(node.op) in _SWAPPED_OPERATORS:
        new = _SWAPPED_OPERATORS[type(node.op)]
        edits.append((f"{type(node.op).__name__} -> {new.__name__}",
                      lambda n, new=new: setattr(n, "op", new())))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
            type(node.ops[0]) in _SWAPPED_OPERATORS:
        new = _SWAPPED_OPERATORS[type(node.ops[0])]
        edits.append((f"{type(node.ops[0]).__name__} -> {new.__name__}",
                      lambda n, new=new: setattr(n, "ops", [new()])))
    if isinstance(node, ast.Call):
        name = _called_name(node)
        for index, keyword in enumerate(node.keywords):
            if keyword.arg == "mask":
                edits.append(("drop the mask", lambda n, i=index: n.keywords.pop(i)))
            if keyword.arg == "other":
                edits.append(("other=0.0", lambda n, i=index: setattr(
                    n.keywords[i], "value", ast.Constant(0.0))))
        if name in ("arange", "program_id"):
            edits.append((f"{name}(...) + 1", "shift"))
        if name == "range" and node.args:
            edits.append(("range stop - 1", lambda n: n.args.__setitem__(
                -1 if len(n.args) > 1 else 0,
                ast.BinOp(n.args[-1 if len(n.args) > 1 else 0], ast.Sub(), ast.Constant(1)))))
        if name in _REDUCTIONS and node.args:
            edits.append((f"drop the reduction {name}", "drop"))
        for other in _SWAPPED_NAMES.get(name, ()):
            edits.append((f"{name} -> {other}", lambda n, o=other: _rename_call(n, o)))
    if isinstance(node, ast.Subscript) and isinstance(node.slice, (ast.Name, ast.Constant)) \
            and isinstance(node.ctx, ast.Load):
        edits.append(("index + 1", lambda n: setattr(
            n, "slice", ast.BinOp(n.slice, ast.Add(), ast.Constant(1)))))
    return edits


def _rename_call(node: ast.Call, name: str):
    if isinstance(node.func, ast.Attribute):
        node.func.attr = name
    else:
        node.func.id = name


class _Replace(ast.NodeTransformer):
    """Edits that replace a node: shift a call's result by one, or drop a reduction."""

    def __init__(self, target: int, how: str):
        self.target, self.how, self.position = target, how, -1

    def generic_visit(self, node):
        return super().generic_visit(node)

    def visit(self, node):
        self.position += 1
        if self.position == self.target:
            if self.how == "shift":
                return ast.BinOp(node, ast.Add(), ast.Constant(1))
            argument = node.args[0]
            if isinstance(node.func, ast.Name):  # sum(values) -> values[0]: one term only
                return ast.Subscript(argument, ast.Constant(0), ast.Load())
            return argument  # tl.sum(x, axis=0) -> x
        return self.generic_visit(node)


def _part_functions(tree: ast.Module, part: Part) -> set[str]:
    """The top-level functions ``part.function`` reaches by name, itself included."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    reached, todo = set(), [part.function]
    while todo:
        name = todo.pop()
        if name in reached or name not in defs:
            continue
        reached.add(name)
        todo += [n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name)]
    return reached


def mutants(exercise: Exercise, part: Part) -> list[Mutant]:
    source = solution_path(exercise.name).read_text(encoding="utf-8")
    tree = ast.parse(source)
    functions = _part_functions(tree, part)
    found = []
    for top in tree.body:
        if not isinstance(top, ast.FunctionDef) or top.name not in functions:
            continue
        signature = {id(n) for part_of in (top.args, top.returns, *top.decorator_list)
                     if part_of is not None for n in ast.walk(part_of)}
        for position, node in enumerate(ast.walk(top)):
            if id(node) in signature:
                continue  # annotations and decorators: no behaviour to change
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring
            for description, edit in _edits(node):
                copy_tree = copy.deepcopy(tree)
                function = next(n for n in copy_tree.body
                                if isinstance(n, ast.FunctionDef) and n.name == top.name)
                if isinstance(edit, str):
                    _replace_at(function, position, edit)
                else:
                    edit(list(ast.walk(function))[position])
                text = ast.unparse(ast.fix_missing_locations(copy_tree))
                found.append(Mutant(exercise.name, part.name,
                                    f"{top.name}: {description} (node {position})", text))
    return found


def _replace_at(function: ast.FunctionDef, position: int, how: str):
    """Replace the node at ``position`` of ``ast.walk(function)`` (breadth first)."""
    target = list(ast.walk(function))[position]
    for parent in ast.walk(function):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, _Replace(0, how).visit(target))
                return
            if isinstance(value, list) and any(v is target for v in value):
                index = next(i for i, v in enumerate(value) if v is target)
                value[index] = _Replace(0, how).visit(target)
                return


def sampled() -> list[Mutant]:
    rng = random.Random(SEED)
    chosen = []
    for exercise in registry.all_exercises():
        if not solution_path(exercise.name).exists():
            continue
        for part in exercise.parts:
            candidates = mutants(exercise, part)
            size = min(len(candidates), PER_PART * FOCUS.get(exercise.name, 1))
            chosen += rng.sample(candidates, size)
    return chosen


# ---------------------------------------------------------------------------------------------
# Judging a surviving mutant outside the grader: its outputs against the reference's.

_HARNESS = r"""
import copy, importlib.util, json, math, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np
from learning.grader import registry
from learning.grader.tensors import TensorSpec

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

def values(result):
    if hasattr(result, "detach"):
        return result.detach().double().cpu().numpy()
    return result

exercise = registry.find(sys.argv[1])
part = exercise.part(sys.argv[2])
reference = load(sys.argv[3], "reference_solution")
verdicts = []
for path in sys.argv[4:]:
    mutant = load(path, "mutant_" + os.path.basename(path)[:-3])
    same, close = True, True
    for case in part.cases:
        if case.gpu_only:
            continue
        outputs = []
        for module in (reference, mutant):
            args = tuple(a.build("cpu") if isinstance(a, TensorSpec) else copy.deepcopy(a)
                         for a in case.make_args())
            try:
                outputs.append(values(getattr(module, part.function)(*args)))
            except Exception as exc:
                outputs.append(("raised", type(exc).__name__))
        want, got = outputs
        if part.returns == "exact" or isinstance(want, tuple) or isinstance(got, tuple):
            equal = repr(want) == repr(got)
            same, close = same and equal, close and equal
            continue
        try:
            want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
        except (TypeError, ValueError):
            same = close = False
            continue
        if want.shape != got.shape:
            same = close = False
            continue
        tol = case.tolerance or part.tolerance
        both_nan = np.isnan(want) & np.isnan(got)
        same = same and bool((both_nan | (want == got)).all())
        near = np.abs(got - want) <= tol.atol + tol.rtol * np.abs(want)
        close = close and bool((both_nan | (want == got) | (near & np.isfinite(got))).all())
    verdicts.append("identical" if same else "within tolerance" if close else "differs")
print(json.dumps(verdicts))
"""


def _equivalence(exercise: str, part: str, folder: Path, survivors: list[Mutant]) -> list[str]:
    paths = []
    for index, mutant in enumerate(survivors):
        path = folder / f"survivor_{index}.py"
        path.write_text(mutant.source, encoding="utf-8")
        paths.append(str(path))
    env = dict(os.environ, PYTHONPATH=course_pythonpath(), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-c", _HARNESS, exercise, part,
                           str(solution_path(exercise)), *paths], capture_output=True,
                          text=True, env=env, timeout=600, cwd=str(folder))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.exhaustive
def test_the_grader_fails_every_mutant_that_changes_the_outputs(tmp_path):
    chosen = sampled()
    assert chosen, "no reference solution to mutate"

    def grade(index_mutant):
        index, mutant = index_mutant
        folder = tmp_path / f"m{index}"
        folder.mkdir()
        exercise = registry.find(mutant.exercise)
        (folder / exercise.filename).write_text(mutant.source, encoding="utf-8")
        start = time.monotonic()
        result = runner.grade(exercise, folder, [mutant.part])
        return mutant, result, time.monotonic() - start

    with ThreadPoolExecutor(max_workers=2) as pool:
        graded = list(pool.map(grade, enumerate(chosen)))

    killed, survivors, slow = [], {}, []
    for mutant, result, seconds in graded:
        (part,) = result.parts
        assert all(c.verdict.status in compare.STATUSES for c in part.cases), mutant.description
        if seconds > GRADE_SECONDS:
            slow.append((mutant.description, round(seconds)))
        if part.status == "passed":
            survivors.setdefault((mutant.exercise, mutant.part), []).append(mutant)
        else:
            killed.append(mutant)
    missed, equivalent = [], 0
    for (exercise, part), group in survivors.items():
        folder = tmp_path / f"survivors-{exercise}-{part}"
        folder.mkdir()
        for mutant, verdict in zip(group, _equivalence(exercise, part, folder, group)):
            if verdict == "differs":
                missed.append(f"{exercise}/{part} {mutant.description}")
            else:
                equivalent += 1
    total = len(graded)
    changed = total - equivalent
    rate = f"{len(killed)}/{changed}" if changed else "0/0"
    summary = (f"mutation testing: {total} mutants graded, {len(killed)} failed by the grader, "
               f"{equivalent} equivalent (same outputs within tolerance) passed, "
               f"{len(missed)} wrong ones passed; kill rate of non-equivalent mutants {rate}")
    warnings.warn(summary, stacklevel=1)
    assert not slow, f"{summary}; slow: {slow}"
    assert not missed, f"{summary}; missed: {missed}"
