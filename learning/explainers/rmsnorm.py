"""The RMSNorm worked example: a small row by hand, the usual mistakes on it, the overflow that
rescaling avoids, and what a padded lane must hold in lesson 09's kernel."""

from __future__ import annotations

import math
import sys

from learning.cli import ArgumentError
from learning.page import Heading, Page, Step, Steps, Table, Text

DEFAULT_ROW = (1.0, 2.0, 2.0, 4.0)
DEFAULT_WEIGHT = (1.0, 0.5, 2.0, 1.0)
EPS = 1e-6
HUGE = 1e200  # the overflow demonstration multiplies the row by this
DECIMALS = 9


def number(value: float) -> str:
    """9 decimals; whole numbers without them; very large or small ones in e-notation."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value != 0 and (abs(value) >= 1e15 or abs(value) < 1e-6):
        return f"{value:.6g}"
    if value == int(value):
        return str(int(value))
    return f"{value:.{DECIMALS}f}"


def _values(values) -> str:
    return "[" + ", ".join(number(v) for v in values) + "]"


def short(value: float) -> str:
    """An input as the learner typed it: 0.5, 2, 1e+200."""
    return f"{value:.10g}"


def _inputs(values) -> str:
    return "[" + ", ".join(short(v) for v in values) + "]"


# ---------------------------------------------------------------------------------------------
# The arithmetic, in plain Python.


def by_hand(row, weight, eps: float = EPS) -> dict:
    """The formula as written: square, mean, add eps, root, divide, weight."""
    squares = [x * x for x in row]
    total = math.fsum(squares)
    mean_square = total / len(row)
    rms = math.sqrt(mean_square + eps)
    normalised = [x / rms for x in row]
    output = [v * w for v, w in zip(normalised, weight)]
    return {"squares": squares, "total": total, "mean_square": mean_square, "rms": rms,
            "normalised": normalised, "output": output}


def rescaled(row, weight, eps: float = EPS) -> dict:
    """The version lesson 05 asks for: divide by the largest |x| first, so no square overflows."""
    largest = max(abs(x) for x in row)
    if largest == 0.0:
        zeros = [0.0 for _ in row]
        return {"largest": 0.0, "scaled": zeros, "mean_square": 0.0, "rms": math.sqrt(eps),
                "output": zeros}
    scaled = [x / largest for x in row]
    mean_square = math.fsum(s * s for s in scaled) / len(row)
    rms = math.sqrt(mean_square + eps / largest / largest)
    output = [s / rms * w for s, w in zip(scaled, weight)]
    return {"largest": largest, "scaled": scaled, "mean_square": mean_square, "rms": rms,
            "output": output}


def _mistakes(row, weight, eps: float = EPS):
    """(name, outputs) for the right formula and the usual wrong ones, on one row."""
    n = len(row)
    ms = math.fsum(x * x for x in row) / n
    mean = math.fsum(row) / n
    variance = math.fsum((x - mean) ** 2 for x in row) / n
    return (
        ("right: x / sqrt(mean(x²) + eps) · w", by_hand(row, weight, eps)["output"]),
        ("eps outside: x / (sqrt(mean(x²)) + eps) · w",
         [x / (math.sqrt(ms) + eps) * w for x, w in zip(row, weight)]),
        ("sum, not mean: x / sqrt(sum(x²) + eps) · w",
         [x / math.sqrt(ms * n + eps) * w for x, w in zip(row, weight)]),
        ("no weight: x / sqrt(mean(x²) + eps)", by_hand(row, weight, eps)["normalised"]),
        ("mean subtracted (LayerNorm)",
         [(x - mean) / math.sqrt(variance + eps) * w for x, w in zip(row, weight)]),
    )


# ---------------------------------------------------------------------------------------------
# Blocks.


def _split(numbers) -> tuple[list[float], list[float]]:
    """A marker's numbers: the row, then as many weights (or none: weights of 1)."""
    values = [float(v) for v in numbers]
    if len(values) % 2:
        return values, [1.0] * len(values)
    half = len(values) // 2
    return values[:half], values[half:]


def table(numbers) -> Table:
    """The row worked by hand: x, x², x / rms, weight, output."""
    row, weight = _split(numbers)
    steps = by_hand(row, weight)
    lines = tuple((str(i), short(x), number(sq), number(v), short(w), number(y))
                  for i, (x, sq, v, w, y) in enumerate(zip(row, steps["squares"],
                                                           steps["normalised"], weight,
                                                           steps["output"])))
    caption = (f"Sum of squares {number(steps['total'])}, mean square "
               f"{number(steps['mean_square'])}, plus eps = {EPS:g}: "
               f"{number(steps['mean_square'] + EPS)}; its square root, the RMS, is "
               f"{number(steps['rms'])}.")
    return Table(("Column", "x", "x²", "x / rms", "weight", "output"), lines, caption)


def steps(numbers) -> Steps:
    """The rescaled version's named steps, each a reduction or elementwise work."""
    row, weight = _split(numbers)
    s = rescaled(row, weight)
    return Steps((
        Step("largest", "largest = max(abs(v) for v in values)", "reduction",
             number(s["largest"])),
        Step("scaled", "scaled[i] = values[i] / largest", "elementwise", _values(s["scaled"])),
        Step("mean_square", "mean_square = sum(scaled[i]**2) / n", "reduction",
             number(s["mean_square"])),
        Step("rms", "rms = sqrt(mean_square + eps / largest / largest)", "one value",
             number(s["rms"])),
        Step("output", "output[i] = scaled[i] / rms * weight[i]", "elementwise",
             _values(s["output"])),
        Step("store", "write output[i] for every valid i", "elementwise", "the row is written"),
    ))


def mistakes(numbers) -> Table:
    """The usual mistakes on one row, next to the right outputs."""
    row, weight = _split(numbers)
    lines = tuple((name, _values(out)) for name, out in _mistakes(row, weight))
    return Table(("Formula", "Outputs"), lines)


def overflow(numbers) -> Table:
    """The row times 1e200: its squares overflow, the rescaled version does not care."""
    row, weight = _split(numbers)
    huge = [x * HUGE for x in row]
    direct = by_hand(huge, weight)
    safe = rescaled(huge, weight)
    lines = tuple((short(x), number(sq), number(y_direct), number(s), number(y))
                  for x, sq, y_direct, s, y in zip(huge, direct["squares"], direct["output"],
                                                   safe["scaled"], safe["output"]))
    return Table(("x", "x * x", "output, squared directly", "x / largest", "output, rescaled"),
                 lines, caption=f"Squared directly, the mean square is "
                                f"{number(direct['mean_square'])} and every output "
                                f"{number(direct['output'][0])}.")


def padding(numbers) -> Table:
    """What a padded lane adds to RMSNorm's sum of squares and to softmax's denominator."""
    row = [float(v) for v in numbers]
    block = 1 << max(0, (len(row) - 1).bit_length())
    if block == len(row):
        block *= 2  # show at least one padded lane
    pad = block - len(row)
    lines = []
    for label, fill in (("0.0", 0.0), ("-inf", -math.inf)):
        lanes = row + [fill] * pad
        squares = math.fsum(x * x for x in lanes)
        top = max(lanes)
        denominator = math.fsum(math.exp(x - top) for x in lanes)
        lines.append((f"other={label}", _values(lanes), number(squares), number(denominator)))
    top = max(row)
    exact = (number(math.fsum(x * x for x in row)),
             number(math.fsum(math.exp(x - top) for x in row)))
    caption = (f"Without padding the sum of squares is {exact[0]} and softmax's denominator "
               f"{exact[1]}: zero is the identity of the one, -inf of the other.")
    return Table(("Padding", f"Block of {block}", "RMSNorm: sum of x²",
                  "Softmax: sum of exp(x - max)"), tuple(lines), caption)


def block_mean(numbers) -> Table:
    """The same sum of squares divided by n_cols and by BLOCK."""
    row = [float(v) for v in numbers]
    n = len(row)
    block = 1 << max(0, (n - 1).bit_length())
    total = math.fsum(x * x for x in row)
    lines = []
    for label, divisor in ((f"n_cols = {n}", n), (f"BLOCK = {block}", block)):
        rms = math.sqrt(total / divisor + EPS)
        lines.append((label, number(total / divisor), _values([x / rms for x in row])))
    return Table(("Mean over", "Mean square", "Outputs (weight 1)"), tuple(lines))


# ---------------------------------------------------------------------------------------------
# The page.


def page(row=None) -> Page:
    """The whole worked example; ``row`` replaces [1, 2, 2, 4] (with weights of 1)."""
    custom = row is not None
    if custom and any(math.isinf(x) for x in row):
        raise ArgumentError("--input: an infinite value has no RMSNorm; use finite numbers")
    row = list(row) if custom else list(DEFAULT_ROW)
    weight = [1.0] * len(row) if custom else list(DEFAULT_WEIGHT)
    numbers = row + weight
    safe = rescaled(row, weight)
    result = Page(f"RMSNorm of {_inputs(row)}, weight {_inputs(weight)}, eps = {EPS:g}")
    result.add(
        Text("output[i] = x[i] / sqrt(mean of x² + eps) · weight[i]: divide the row by its root "
             "mean square, then scale each column by its weight. One reduction (the mean of "
             "the squares), then elementwise work."),
        table(numbers),
        Heading("The named steps, rescaled first as lesson 05 asks"),
        Text("Dividing the row by its largest magnitude changes nothing but the size of the "
             "numbers, as long as eps is divided by the square of that value too. The rms below "
             f"is in those units: times the largest value, {number(safe['largest'])}, it is "
             f"{number(safe['largest'] * safe['rms'])}, the RMS of the table."),
        steps(numbers),
        Heading("The usual mistakes, on this row"),
        mistakes(numbers),
    )
    if max(abs(x) for x in row) > 0:
        result.add(
            Heading(f"The same row times {short(HUGE)}"),
            Text(f"A double holds values up to about {sys.float_info.max:.2g}, so a square "
                 f"overflows once |x| passes about {math.sqrt(sys.float_info.max):.2g}. "
                 "Divided by its largest value first, the row is back "
                 "in range, and eps divided by that value squared is 0: the outputs are the "
                 "row's own with eps negligible."),
            overflow(numbers),
        )
    zero = rescaled([0.0] * len(row), weight)
    result.add(
        Heading("A row of zeros"),
        Text(f"Its mean square is 0, and eps keeps the division defined: "
             f"0 / sqrt(0 + {EPS:g}) = 0, so the outputs are {_values(zero['output'])}. "
             "Without eps it would be 0 / 0."),
    )
    return result


# Blocks a lesson can embed by name, each taking the marker's numbers as one list: the row and
# then its weights (an odd count means weights of 1), or the row alone for padding and block_mean.
BLOCKS = {
    "table": table,
    "steps": steps,
    "mistakes": mistakes,
    "overflow": overflow,
    "padding": padding,
    "block_mean": block_mean,
}
