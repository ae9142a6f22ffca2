"""The softmax worked example: the [1, 2, 3] table, the overflow it avoids, the six named steps."""

from __future__ import annotations

import math
import sys

from learning.explainers.page import Heading, Page, Step, Steps, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "a row of scores (4,5,6)"
DEFAULT_ROW = (1.0, 2.0, 3.0)
DECIMALS = 9
HUGE = 1e15  # from here on a number is written with an exponent, not hundreds of digits


def number(value: float) -> str:
    """A value as the lesson prints it: 9 decimals, integers without them, and a value that
    is exactly a shorter decimal (an input of 0.5) as that decimal."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if abs(value) >= HUGE:
        return f"{value:.{DECIMALS}e}"
    if value == int(value):
        return str(int(value))
    return _short(value) or f"{value:.{DECIMALS}f}"


def _short(value: float) -> str:
    """The shortest decimal that reads back as ``value``, where it has at most 9 decimals."""
    shortest = repr(float(value))
    decimals = shortest.partition(".")[2]
    return shortest if "e" not in shortest and len(decimals) <= DECIMALS else ""


def fixed(value: float) -> str:
    """Always 9 decimals (exponentials and probabilities)."""
    if math.isnan(value) or math.isinf(value) or abs(value) >= HUGE:
        return number(value)
    return f"{value:.{DECIMALS}f}"


def stable_softmax(row) -> dict:
    """The six steps on one row, each result kept under its name."""
    maximum = max(row)
    shifted = [x - maximum for x in row]  # every entry <= 0 (NaN for a row of only -inf)
    numerator = [math.exp(s) for s in shifted]  # so exp never overflows
    denominator = math.fsum(numerator)
    output = [n / denominator if denominator > 0 else math.nan for n in numerator]
    return {"maximum": maximum, "shifted": shifted, "numerator": numerator,
            "denominator": denominator, "output": output}


def naive_exp(x: float) -> str:
    """math.exp(x) as a learner would call it, or what goes wrong."""
    try:
        return fixed(math.exp(x))
    except OverflowError:
        return "OverflowError"


def table(row) -> Table:
    """The worked table: Column, Input x, x - max(x), Exponential, Divide by the sum."""
    steps = stable_softmax(row)
    divide = f"Divide by {fixed(steps['denominator'])}"
    rows = tuple(
        (str(i), number(x), number(s), fixed(e), fixed(y))
        for i, (x, s, e, y) in enumerate(zip(row, steps["shifted"], steps["numerator"],
                                             steps["output"]))
    )
    total = math.fsum(steps["output"])
    caption = f"The last column sums to {fixed(total)}."
    return Table(("Column", "Input x", "x - max(x)", "Exponential", divide), rows, caption)


def overflow_table(row) -> Table:
    """The same row, exponentiated directly and after the shift."""
    steps = stable_softmax(row)
    rows = tuple((number(x), naive_exp(x), number(s), fixed(e))
                 for x, s, e in zip(row, steps["shifted"], steps["numerator"]))
    return Table(("Input x", "math.exp(x) directly", "x - max(x)", "math.exp(x - max(x))"), rows)


def _values(values) -> str:
    return "[" + ", ".join(number(v) for v in values) + "]"


def steps(row) -> Steps:
    """The six named steps with their values for ``row``."""
    s = stable_softmax(row)
    return Steps((
        Step("maximum", "maximum = max(values)", "reduction", number(s["maximum"])),
        Step("shifted", "shifted[i] = values[i] - maximum", "elementwise", _values(s["shifted"])),
        Step("numerator", "numerator[i] = exp(shifted[i])", "elementwise",
             _values(s["numerator"])),
        Step("denominator", "denominator = sum(numerator)", "reduction",
             fixed(s["denominator"])),
        Step("output", "output[i] = numerator[i] / denominator", "elementwise",
             _values(s["output"])),
        Step("store", "write output[i] for every valid i", "elementwise", "the row is written"),
    ))


def shifted_by(row, amount: float) -> list[float]:
    return [x + amount for x in row]


def page(row=None) -> Page:
    """The whole worked example; ``row`` replaces [1, 2, 3] when the learner gives one."""
    custom = row is not None
    row = list(row) if custom else list(DEFAULT_ROW)
    result = Page(f"Softmax of {_values(row)}")
    result.add(
        Text("Subtract the row's maximum, exponentiate, divide by the sum. Every numerator and "
             "the denominator carry the same factor exp(-max), so the shift changes nothing "
             "but the size of the numbers."),
        table(row),
    )
    if not custom:
        shifted = shifted_by(row, 1000.0)
        same = all(math.isclose(a, b, rel_tol=0, abs_tol=1e-15) for a, b in
                   zip(stable_softmax(row)["output"], stable_softmax(shifted)["output"]))
        result.add(
            Heading(f"The same row plus 1000: {_values(shifted)}"),
            Text(f"The shifted inputs are {_values(stable_softmax(shifted)['shifted'])} again, so "
                 f"the probabilities are {'identical' if same else 'different'}. Exponentiating "
                 f"directly overflows a double once x passes "
                 f"{math.log(sys.float_info.max):.2f}:"),
            overflow_table(shifted),
        )
    else:
        result.add(Heading("Exponentiated directly"), overflow_table(row))
    if all(x == -math.inf for x in row):
        result.add(Text("A row of only -inf has no softmax: (-inf) - (-inf) is NaN, and so is "
                        "every output. torch.softmax gives NaN here too."))
    result.add(Heading("The six named steps"), steps(row))
    if len(row) != next_power_of_two(len(row)):
        result.add(
            Heading(f"In a Triton block of {next_power_of_two(len(row))} lanes (lesson 08)"),
            Text("The padded lanes must load -inf: it cannot become the maximum and adds "
                 "exp(-inf) = 0 to the sum. A fill of 0 changes the denominator:"),
            padding_table(row),
        )
    return result


def fusion_traffic(rows: int, cols: int, element_bytes: int = 4) -> Table:
    """The lower bound on a fused softmax's memory traffic: one read and one write per element."""
    tensor = rows * cols * element_bytes
    total = 2 * tensor
    return Table(
        ("Tensor", "Elements", "Bytes per element", "One read + one write", "MiB"),
        ((f"{rows}×{cols}", f"{rows * cols:,}", str(element_bytes), f"{total:,} bytes",
          f"{total / 2**20:g}"),),
        caption=f"2 × {rows} × {cols} × {element_bytes} = {total:,} bytes.",
    )


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def padded_block(row, fill: float) -> list[float]:
    """The row as a program loads it: BLOCK lanes, the ones past the row holding ``fill``."""
    return list(row) + [fill] * (next_power_of_two(len(row)) - len(row))


def padding_table(row) -> Table:
    """One row loaded into a power-of-two block twice: padded with -inf, and with 0."""
    right = stable_softmax(padded_block(row, -math.inf))
    wrong = stable_softmax(padded_block(row, 0.0))
    rows = []
    for lane in range(len(padded_block(row, 0.0))):
        real = lane < len(row)
        rows.append((
            str(lane),
            "data" if real else "padding",
            number(padded_block(row, -math.inf)[lane]),
            fixed(right["output"][lane]) if real else "(not stored)",
            number(padded_block(row, 0.0)[lane]),
            fixed(wrong["output"][lane]) if real else "(not stored)",
        ))
    real_sum = math.fsum(wrong["output"][:len(row)])
    caption = (f"With -inf the maximum is {number(right['maximum'])} and the stored outputs sum "
               f"to {fixed(math.fsum(right['output'][:len(row)]))}. With 0 the maximum is "
               f"{number(wrong['maximum'])}, the padding adds "
               f"{fixed(math.fsum(wrong['numerator'][len(row):]))} to the denominator, and the "
               f"stored outputs sum to {fixed(real_sum)}.")
    return Table(("Lane", "Holds", "Loaded (-inf fill)", "Output", "Loaded (0 fill)",
                  "Output"), tuple(rows), caption)


def block_cost(*widths: int) -> Table:
    """What one block per row costs: BLOCK is the next power of two, the rest is padding."""
    rows = []
    for width in widths:
        block = next_power_of_two(width)
        rows.append((f"{width:,}", f"{block:,}", f"{block - width:,}",
                     f"{100 * width / block:.1f}%"))
    return Table(("Row width", "BLOCK", "Padded lanes", "Lanes doing work"), tuple(rows))


# The widest and narrowest finite floats of each format: (largest, smallest positive subnormal).
FLOAT_LIMITS = (
    ("float64 (a Python float)", sys.float_info.max, 2.0 ** -1074),
    ("float32", (2 - 2.0 ** -23) * 2.0 ** 127, 2.0 ** -149),
    ("float16", 65504.0, 2.0 ** -24),
)


def exp_limits(_numbers=None) -> Table:
    """Where exp(x) stops being a finite, nonzero number in each float format."""
    rows = []
    for name, largest, smallest in FLOAT_LIMITS:
        # exp(x) overflows once x > log(largest); it rounds to 0 once it is below half the
        # smallest subnormal, i.e. x < log(smallest / 2).
        rows.append((name, f"{math.log(largest):.2f}",
                     f"{math.log(smallest) - math.log(2):.2f}"))
    return Table(("Format", "exp(x) overflows once x passes", "exp(x) rounds to 0 below"),
                 tuple(rows), "Computed from each format's largest value and smallest "
                              "subnormal: log(largest) and log(smallest / 2).")


# Blocks a lesson can embed by name, each taking the marker's numbers as one list
# (see learning.computed).
BLOCKS = {
    "table": table,
    "overflow": overflow_table,
    "steps": steps,
    "fusion_traffic": lambda numbers: fusion_traffic(*numbers),
    "padding": padding_table,
    "block_cost": lambda numbers: block_cost(*numbers),
    "exp_limits": exp_limits,
}
