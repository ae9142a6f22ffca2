"""The softmax backward worked example: the Jacobian of one row, dx worked by hand, and why the
padding of a dot product is 0."""

from __future__ import annotations

import math

from learning.exercises.softmax.explainer import fixed, number, stable_softmax
from learning.explainers.page import Heading, Page, Step, Steps, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "a row of scores (1,2,3)"
DEFAULT_SCORES = (1.0, 2.0, 3.0)
DEFAULT_DY = (1.0, -1.0, 2.0)  # repeated to the row's length for a learner's own scores


def _row(values) -> str:
    return "[" + ", ".join(number(v) if float(v).is_integer() else fixed(v)
                           for v in values) + "]"


def _sum(values) -> str:
    """A sum that is zero up to rounding, printed without a sign."""
    total = math.fsum(values)
    return fixed(0.0 if abs(total) < 5e-10 else total)


def _upstream(n: int) -> list[float]:
    return [DEFAULT_DY[i % len(DEFAULT_DY)] for i in range(n)]


def backward(y, dy) -> dict:
    """The two steps of the backward pass on one row, each result under its name."""
    products = [a * b for a, b in zip(y, dy)]
    dot = math.fsum(products)  # NaN when y is NaN (a row of only -inf)
    centred = [b - dot for b in dy]
    dx = [a * c for a, c in zip(y, centred)]
    return {"products": products, "dot": dot, "centred": centred, "dx": dx}


def jacobian(y) -> list[list[float]]:
    """J[i][j] = d y[i] / d x[j] = y[i] * (1 if i == j else 0) - y[i] * y[j]."""
    return [[a * ((1.0 if i == j else 0.0) - b) for j, b in enumerate(y)]
            for i, a in enumerate(y)]


def _halves(numbers) -> tuple[list[float], list[float]]:
    """A computed section's numbers: the scores x, then as many upstream gradients dy."""
    half = len(numbers) // 2
    return [float(v) for v in numbers[:half]], [float(v) for v in numbers[half:]]


def jacobian_table(x) -> Table:
    """The Jacobian of softmax at the scores x, with each row's sum."""
    y = stable_softmax(list(x))["output"]
    rows = tuple((f"y{i}", *(fixed(v) for v in row), _sum(row))
                 for i, row in enumerate(jacobian(y)))
    columns = ("d / d", *(f"x{j}" for j in range(len(y))), "Row sum")
    caption = (f"y = {_row(y)}. The diagonal is y·(1 − y), everything else −y_i·y_j; "
               "every row sums to 0, because the outputs always sum to 1.")
    return Table(columns, rows, caption)


def table(x, dy) -> Table:
    """dx worked by hand: y, dy, y·dy, dy − dot and dx, with J·dy beside dx to compare."""
    y = stable_softmax(list(x))["output"]
    steps = backward(y, dy)
    via_jacobian = [math.fsum(j * g for j, g in zip(row, dy)) for row in jacobian(y)]
    rows = tuple(
        (str(i), fixed(a), number(b), fixed(p), fixed(c), fixed(d), fixed(v))
        for i, (a, b, p, c, d, v) in enumerate(zip(y, dy, steps["products"], steps["centred"],
                                                   steps["dx"], via_jacobian)))
    caption = (f"dot = sum of y·dy = {fixed(steps['dot'])}. The entries of dx sum to "
               f"{_sum(steps['dx'])}.")
    columns = ("Column", "y", "dy", "y·dy", "dy − dot", "dx = y·(dy − dot)", "J·dy")
    return Table(columns, rows, caption)


def padding_table(x, dy, block: int | None = None) -> Table:
    """The dot product's lanes in a block of a power of two, padded with 0 and with -inf."""
    y = stable_softmax(list(x))["output"]
    block = block or 1 << len(y).bit_length()  # a power of two with at least one padded lane
    pad = block - len(y)
    rows = []
    for lane in range(block):
        real = lane < len(y)
        a, b = (y[lane], dy[lane]) if real else (0.0, 0.0)
        y_inf = y[lane] if real else -math.inf
        rows.append((str(lane), "row" if real else "padding", fixed(a), number(b),
                     fixed(a * b), number(y_inf) if not real else fixed(y_inf),
                     fixed(y_inf * b)))
    sum_zero = math.fsum(a * b for a, b in zip(y + [0.0] * pad, dy + [0.0] * pad))
    sum_inf = sum(a * b for a, b in zip(y + [-math.inf] * pad, dy + [0.0] * pad))
    rows.append(("sum", "", "", "", fixed(sum_zero), "", fixed(sum_inf)))
    columns = ("Lane", "Holds", "y (other=0)", "dy (other=0)", "y·dy", "y (other=-inf)",
               "y·dy with -inf")
    n = len(y)
    caption = (f"A block of {block} lanes for a row of {n}: 0·0 = 0 adds nothing, while "
               "(−inf)·0 is NaN, and one NaN makes the whole sum NaN.")
    if n & (n - 1) == 0 and block == 2 * n:
        # the kernel's own block, next_power_of_2(n), would be n here: no padding to show
        caption += (f" (The kernel's block for a row of {n} is next_power_of_2({n}) = {n}, with "
                    f"no padding; the table takes the next one, {block}, as a row of {n + 1} "
                    "would get.)")
    return Table(columns, tuple(rows), caption)


def steps(x, dy) -> Steps:
    y = stable_softmax(list(x))["output"]
    s = backward(y, dy)
    return Steps((
        Step("dot", "dot = sum(y[j] * dy[j])", "reduction", fixed(s["dot"])),
        Step("dx", "dx[i] = y[i] * (dy[i] - dot)", "elementwise", _row(s["dx"])),
        Step("store", "write dx[i] for every valid i", "elementwise", "the row is written"),
    ))


def page(row=None) -> Page:
    """The worked example for the scores ``row`` (default [1, 2, 3])."""
    x = list(row) if row is not None else list(DEFAULT_SCORES)
    dy = list(DEFAULT_DY) if row is None else _upstream(len(x))
    y = stable_softmax(x)["output"]
    result = Page(f"Softmax backward at x = {_row(x)}, dy = {_row(dy)}")
    result.add(
        Text(f"The forward pass gave y = softmax(x) = {_row(y)}. The backward pass gets y and "
             "dy, the gradient of the loss with respect to y, and returns dx, the gradient with "
             "respect to x."),
        Heading("The Jacobian: how each y moves when one x moves"),
        jacobian_table(x),
        Heading("dx by hand: one dot product, then one elementwise step"),
        Text("dx = J·dy, but J is never built: dx[i] = y[i]·(dy[i] − dot), where dot is the "
             "sum of y·dy over the row. The last column multiplies J by dy the long way, for "
             "comparison."),
        table(x, dy),
    )
    if row is not None:
        result.add(Text("For your own scores, dy repeats [1, -1, 2] to the row's length."))
    if any(math.isnan(v) for v in y):
        result.add(Text("This row has no softmax (a row of only -inf, or a +inf), so y is NaN "
                        "and so is every gradient: torch gives NaN here too."))
    result.add(
        Heading("Padding a dot product"),
        padding_table(x, dy),
        Heading("The steps"),
        steps(x, dy),
    )
    return result


# Blocks a lesson can embed by name, each taking the marker's numbers as one list: the scores,
# then as many upstream gradients (see learning.computed).
BLOCKS = {
    "jacobian": lambda numbers: jacobian_table(numbers),
    "table": lambda numbers: table(*_halves(numbers)),
    "padding": lambda numbers: padding_table(*_halves(numbers)),
    "steps": lambda numbers: steps(*_halves(numbers)),
}
