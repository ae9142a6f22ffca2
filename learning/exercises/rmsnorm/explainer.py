"""The RMSNorm worked example: a small row by hand, the usual mistakes on it, the overflow that
rescaling avoids, and what a padded lane must hold in lesson 09's kernel."""

from __future__ import annotations

import math
import sys

from learning.cli import ArgumentError
from learning.explainers.page import Heading, Page, Step, Steps, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "a row of values (1,2,2,4)"
DEFAULT_ROW = (1.0, 2.0, 2.0, 4.0)
DEFAULT_WEIGHT = (1.0, 0.5, 2.0, 1.0)
EPS = 1e-6
HUGE = 1e200  # the overflow demonstration multiplies the row by this
DECIMALS = 9


def number(value: float) -> str:
    """9 decimals; whole numbers without them, an exact shorter decimal (0.5) as it is; very
    large or small ones in e-notation."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value != 0 and (abs(value) >= 1e15 or abs(value) < 1e-6):
        return f"{value:.6g}"
    if value == int(value):
        return str(int(value))
    shortest = repr(float(value))
    if "e" not in shortest and len(shortest.partition(".")[2]) <= DECIMALS:
        return shortest
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
        ("eps outside (another convention, not graded here): x / (sqrt(mean(x²)) + eps) · w",
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
# Where lesson 09's kernel overflows: its float32 sum of squares, by row width and input dtype.

FLOAT32_MAX = (2 - 2.0**-23) * 2.0**127
BFLOAT16_MAX = (2 - 2.0**-7) * 2.0**127  # float32's exponent, 8 bits of significand
FLOAT16_MAX = 65504.0


def _float32_sum_of_squares(value: float, n: int) -> float:
    """n copies of ``value`` in float32, squared and added pairwise in float32 as the kernel's
    tree reduction adds them (numpy); inf once the sum overflows."""
    import numpy as np

    level = np.full(n, value, dtype=np.float32)
    with np.errstate(over="ignore"):
        level = level * level
        while level.size > 1:
            if level.size % 2:
                level = np.append(level, np.float32(0.0))
            level = level[0::2] + level[1::2]
    return float(level[0])


def _bfloat16(value: float) -> float:
    """``value`` as float32 and then bfloat16 (the top 16 bits, rounded to nearest even)."""
    import struct

    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _sci(value: float, digits: int = 4) -> str:
    """A large or small value as the lessons write it: 1.845e19, 9.998e17, 65504."""
    text = f"{value:.{digits}g}"
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else text


def overflow_limits(numbers) -> Table:
    """For each width n: the |x| at which n float32 squares sum past float32's largest value,
    checked just below and just above it."""
    rows = []
    for n in (int(v) for v in numbers):
        limit = math.sqrt(FLOAT32_MAX / n)
        rows.append((f"{n:,}", _sci(limit, 3),
                     _sci(_float32_sum_of_squares(0.99 * limit, n)),
                     _sci(_float32_sum_of_squares(1.01 * limit, n))))
    root = _sci(math.sqrt(FLOAT32_MAX))
    return Table(("Row width n", "the sum overflows once every value's magnitude passes",
                  "sum of n squares of 0.99 times that", "sum of n squares of 1.01 times that"),
                 tuple(rows),
                 f"float32's largest value is {_sci(FLOAT32_MAX)}, so n squares of the same "
                 f"size overflow once |x| passes sqrt({_sci(FLOAT32_MAX)} / n) = {root} / "
                 f"sqrt(n); any row does, about when its length (the square root of its sum of "
                 f"squares) passes {root}. The sums are computed in float32, squared and added "
                 "pairwise as the kernel's tree adds them.")


def overflow_dtypes(numbers) -> Text:
    """``n, value, widest``: n values of ``value`` in float32 and bfloat16, what the kernel
    then returns, and why float16 rows (at most ``widest`` columns) cannot get there."""
    import numpy as np

    n, value, widest = int(numbers[0]), float(numbers[1]), int(numbers[2])
    total = _float32_sum_of_squares(value, n)
    stored = _bfloat16(value)
    total_bf16 = _float32_sum_of_squares(stored, n)
    with np.errstate(over="ignore"):
        # the kernel: inverse_rms = rsqrt(sum / n + eps), output = x * inverse_rms (weight 1)
        inverse = np.float32(1.0) / np.sqrt(np.float32(total) / np.float32(n) + np.float32(EPS))
        output = float(np.float32(value) * inverse)
    f16_square = _float32_sum_of_squares(FLOAT16_MAX, 1)
    f16_total = _float32_sum_of_squares(FLOAT16_MAX, widest)
    return Text(
        f"{n:,} values of {_sci(value)} square to about {_sci(value * value)} each, far inside "
        f"float32, but their float32 sum is {_sci(total)}: the mean square is infinite, "
        f"rsqrt of it is 0, and every output of the row is {number(output)}, with no error "
        f"raised. bfloat16 keeps float32's exponent: its largest value is "
        f"{_sci(BFLOAT16_MAX)}, so a bfloat16 row can hold such values ({_sci(value)} is "
        f"stored as {_sci(stored)}, and {n:,} of them also sum to {_sci(total_bf16)}), and a "
        f"single bfloat16 value past {_sci(math.sqrt(FLOAT32_MAX))} overflows its own square, "
        f"converted to FP32 or not. float16 cannot get there: its largest value, "
        f"{_sci(FLOAT16_MAX, 5)}, squares to {_sci(f16_square)}, and {widest:,} of those, the "
        f"widest row triton_kernels accepts, sum to {_sci(f16_total)}.")


def _in_those_units(safe: dict) -> str:
    """What the rescaled steps' rms is, in the row's own units."""
    said = ("Dividing the row by its largest magnitude changes nothing but the size of the "
            "numbers, as long as eps is divided by the square of that value too.")
    if safe["largest"] == 0.0:
        return (f"{said} A row of zeros has no magnitude to divide by: the code returns "
                "zeros before any division, so the steps below that divide by largest show "
                "what the row comes to, not a division made: scaled is 0, the rms is sqrt(eps) "
                f"= {number(safe['rms'])} (the RMS of the table), and every output is 0.")
    return (f"{said} The rms below is in those units: times the largest value, "
            f"{number(safe['largest'])}, it is {number(safe['largest'] * safe['rms'])}, the RMS "
            "of the table.")


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
        Text(_in_those_units(safe)),
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
    "overflow_limits": overflow_limits,
    "overflow_dtypes": overflow_dtypes,
}
