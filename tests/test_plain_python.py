"""A Python part is the lesson's derivation in plain Python: a call that hands the work to torch,
numpy or triton fails, whatever values it returns (learning.grader.plain)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learning.grader import plain
from tests.helpers import grade_text, named_in, solution_text


def graded_python(tmp_path, exercise: str, body: str):
    """The reference solution with ``body`` appended (later definitions win), its Python part
    graded: the cases that ran."""
    result = grade_text(tmp_path, exercise, f"{solution_text(exercise)}\n\n{body}\n", ["python"])
    (part,) = result.parts
    return part, [c for c in part.cases if c.verdict.status != "skipped"]


@pytest.mark.parametrize("body, named", [
    ('''
import torch


def softmax_python(values):
    return torch.softmax(torch.tensor(values, dtype=torch.float64), 0).tolist()
''', "torch.tensor"),
    ('''
import numpy as np


def softmax_python(values):
    x = np.array(values)
    e = np.exp(x - x.max())
    return (e / e.sum()).tolist()
''', "numpy.array"),
    # a ufunc given a plain list calls nothing the profiler sees: its values, returned, tell
    ('''
import numpy as np


def softmax_python(values):
    maximum = max(values)
    e = np.exp([v - maximum for v in values])
    total = sum(e)
    return [v / total for v in e]
''', "numpy.float64 values"),
    # a tensor made by its class and only operators after: torch's function mode sees them
    ('''
import torch


def softmax_python(values):
    x = torch.Tensor(values).double()
    e = (x - max(values)).exp()
    return [float(v) for v in e / sum(e.tolist())]
''', "torch."),
], ids=["torch.softmax", "numpy arrays", "a numpy ufunc on a list", "a tensor's operators"])
def test_a_python_part_that_calls_a_library_fails_and_names_the_call(tmp_path, body, named):
    part, ran = graded_python(tmp_path, "softmax", body)
    assert part.status == "failed" and ran
    assert all(named_in(c) == {"not-plain-python"} for c in ran), \
        [(c.name, c.verdict.summary) for c in ran]
    assert named in ran[0].verdict.summary, ran[0].verdict.summary
    assert "plain Python" in ran[0].verdict.causes[0].cause


def test_plain_python_in_other_styles_still_passes(tmp_path):
    part, ran = graded_python(tmp_path, "softmax", '''
import statistics


def softmax_python(values):
    shift = max(values)
    e = [math.exp(v - shift) for v in values]
    total = math.fsum(e)
    assert statistics.fmean([1.0, 3.0]) == 2.0  # any of Python's own modules
    return [x / total for x in e]
''')
    assert part.status == "passed", [(c.name, c.verdict.summary) for c in ran]


HONEST = {
    # torch, once imported, replaces inspect.getfile with its own: Python's library calls it
    "inspect": '''
import inspect


def _line_of_caller():
    return inspect.getframeinfo(inspect.currentframe().f_back).lineno


def softmax_python(values):
    assert _line_of_caller() > 0
    maximum = max(values)
    numerator = [math.exp(v - maximum) for v in values]
    denominator = sum(numerator)
    return [n / denominator for n in numerator]
''',
    # a constant the module shares with its kernel, as a kernel needs it: tl.constexpr
    "a tl.constexpr constant": '''
BLOCK = tl.constexpr(2)  # the kernel's block, which the derivation walks the row by


def softmax_python(values):
    maximum = -math.inf
    for start in range(0, len(values), BLOCK):
        maximum = max([maximum, *values[start:start + BLOCK]])
    numerator = [math.exp(v - maximum) for v in values]
    denominator = sum(numerator)
    return [n / denominator for n in numerator]
''',
}


@pytest.mark.parametrize("body", HONEST.values(), ids=HONEST.keys())
def test_honest_plain_python_that_touches_a_library_indirectly_passes(tmp_path, body):
    part, ran = graded_python(tmp_path, "softmax", body)
    assert part.status == "passed", [(c.name, c.verdict.summary) for c in ran]


def test_a_library_called_from_a_thread_the_call_starts_is_seen(tmp_path):
    part, ran = graded_python(tmp_path, "softmax", '''
import concurrent.futures

import torch


def softmax_python(values):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: torch.softmax(torch.tensor(values, dtype=torch.float64),
                                                 0).tolist()).result()
''')
    assert ran and all(named_in(c) == {"not-plain-python"} for c in ran), \
        [(c.name, c.verdict.summary) for c in ran]


def test_library_functions_handed_to_a_thread_pool_are_seen_though_the_pool_calls_them(
        tmp_path):
    """No learner's frame calls them: the pool's worker (Python's own library) does, in a thread
    where torch's function mode is not active. In a thread the call started, that counts."""
    part, ran = graded_python(tmp_path, "softmax", '''
import concurrent.futures

import numpy as np
import torch


def softmax_python(values):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        made = pool.submit(torch.tensor, values, dtype=torch.float64).result()
        done = pool.submit(torch.softmax, made, 0).result()
        return pool.submit(np.ndarray.tolist, pool.submit(torch.Tensor.numpy, done).result()
                           ).result()
''')
    assert ran and all(named_in(c) == {"not-plain-python"} for c in ran), \
        [(c.name, c.verdict.summary) for c in ran]
    assert "torch.tensor at line" in ran[0].verdict.summary, ran[0].verdict.summary


def test_a_value_whose_type_resists_being_read_is_judged_not_the_graders_failure(tmp_path):
    part, ran = graded_python(tmp_path, "softmax", '''
class _Meta(type):
    @property
    def __module__(cls):
        raise RuntimeError("no module here")


class Probability(float, metaclass=_Meta):
    pass


def softmax_python(values):
    maximum = max(values)
    numerator = [math.exp(v - maximum) for v in values]
    denominator = sum(numerator)
    assert not Probability(maximum).is_integer() or True
    return [Probability(n / denominator) for n in numerator]
''')
    assert part.status == "passed", [(c.name, c.verdict.summary) for c in ran]


def test_a_part_returning_plain_data_is_held_to_plain_python_too(tmp_path):
    # the reductions part returns its levels as exact data: padded with numpy, the same levels
    part, ran = graded_python(tmp_path, "reductions", '''
import numpy as np

_plain_tree_reduce = tree_reduce


def tree_reduce(values, op):
    levels = _plain_tree_reduce(values, op)
    levels[0] = [float(v) for v in np.array(levels[0])]
    return levels
''')
    failed = [c for c in ran if c.verdict.status == "failed"]
    assert failed and all(named_in(c) == {"not-plain-python"} for c in failed)
    assert "numpy.array" in failed[0].verdict.summary


def test_the_watch_names_library_calls_and_the_line_that_made_them():
    with plain.Watch() as watch:
        sum([1.0, 2.0])
    assert watch.first == ""
    with plain.Watch() as watch:
        np.array([1.0])
    assert watch.first.startswith("numpy.array at line ")
    assert watch.first.endswith(" of test_plain_python.py")
    x = torch.ones(2)
    with plain.Watch() as watch:
        x.tolist()
    assert watch.first.startswith("torch.Tensor.tolist at line ")
    with plain.Watch() as watch:
        x + 1
    assert watch.first.startswith("torch.")


def test_the_learners_own_profile_function_is_put_back():
    import sys

    seen = []

    def profile(frame, event, arg):
        seen.append(event)

    sys.setprofile(profile)
    try:
        with plain.Watch():
            pass
        assert sys.getprofile() is profile
    finally:
        sys.setprofile(None)


@pytest.mark.parametrize("result, found", [
    ([1.0, 2.0], ""), ([[1.0], [2.0]], ""), ((1, "a"), ""),
    ([1.0, np.float64(2.0)], "numpy.float64 values"),
    ([[1.0], [np.float32(2.0)]], "numpy.float32 values"),
    (np.float64(1.0), "numpy.float64 values"),
    ([torch.tensor(1.0)], "torch.Tensor values"),
])
def test_library_values_in_a_result_are_found(result, found):
    assert plain.in_result(result) == found


def test_a_librarys_finaliser_run_by_a_collection_is_not_the_learners_call():
    import gc
    import weakref

    from torch.utils import hooks  # torch's own code, run when an object of its is freed

    class Cycle:
        pass

    class Hooks(dict):  # a dict a weak reference can point to
        pass

    def make_garbage():
        handle = hooks.RemovableHandle(Hooks())
        cycle = Cycle()
        cycle.me, cycle.handle = cycle, handle
        weakref.finalize(cycle, hooks.RemovableHandle.remove, handle)

    gc.disable()
    try:
        make_garbage()
        with plain.Watch() as watch:
            gc.collect()  # as an automatic collection would, inside the learner's call
        assert watch.first == ""
    finally:
        gc.enable()


def test_numpy_scalars_in_a_returned_dict_are_numpy_values(tmp_path):
    part, ran = graded_python(tmp_path, "traffic", """
import numpy as np

_plain_roofline = roofline


def roofline(*args, **kwargs):
    report = _plain_roofline(*args, **kwargs)
    return {key: np.float64(value) if isinstance(value, float) else value
            for key, value in report.items()}
""")
    failed = [c for c in ran if c.verdict.status == "failed"]
    assert failed and all(named_in(c) == {"not-plain-python"} for c in failed), \
        [(c.name, c.verdict.summary) for c in ran]
    assert "numpy.float64 values" in failed[0].verdict.summary


def test_the_failure_is_said_in_full_once_and_referred_to_after(tmp_path):
    import io

    from rich.console import Console

    from learning.grader import registry, report, runner
    from tests.helpers import write_module

    write_module(tmp_path, "softmax", solution_text("softmax") + """

import numpy as np


def softmax_python(values):
    return np.array(values).tolist()
""")
    result = runner.grade(registry.find("softmax"), tmp_path, ["python"])
    out = io.StringIO()
    report.render(Console(file=out, width=100, color_system=None), result)
    text = out.getvalue()
    assert text.count("softmax_python called numpy.array at line") >= 2
    assert text.count("this part is the lesson's derivation in plain Python") == 1
    assert "as case 'worked example' above: softmax_python called numpy.array" in text
