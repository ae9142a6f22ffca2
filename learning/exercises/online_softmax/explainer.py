"""The online softmax worked example: one row read in chunks, each lane's running maximum and
rescaled sum traced step by step, then the lanes combined and the row written."""

from __future__ import annotations

import math

from learning.exercises.softmax.explainer import fixed, number, stable_softmax
from learning.explainers.page import Heading, Page, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "a row of scores, -inf allowed (1,-inf,3)"
DEFAULT_ROW = (1.0, -math.inf, 3.0, 0.0, 4.0, -math.inf, 2.0, 6.0, 5.0, 1.0)
DEFAULT_BLOCK = 4


def _row(values) -> str:
    return "[" + ", ".join(number(v) for v in values) + "]"


def block_for(row) -> int:
    """The chunk width the page uses: 4, or 2 for a row too short for two chunks of 4."""
    return DEFAULT_BLOCK if len(row) > DEFAULT_BLOCK else 2


def run(row, block: int) -> dict:
    """The first pass, lane by lane, with every intermediate value kept for the trace."""
    m = [-math.inf] * block
    s = [0.0] * block
    steps = []
    for start in range(0, len(row), block):
        for lane in range(block):
            column = start + lane
            x = row[column] if column < len(row) else -math.inf  # padding past the row
            m_new = max(m[lane], x)
            ref = 0.0 if m_new == -math.inf else m_new  # the guard
            scale = math.exp(m[lane] - ref)
            s_new = s[lane] * scale + math.exp(x - ref)
            steps.append({"chunk": start // block, "lane": lane, "column": column,
                          "padding": column >= len(row), "x": x, "m": m[lane], "m_new": m_new,
                          "ref": ref, "scale": scale, "s": s[lane], "s_new": s_new})
            m[lane], s[lane] = m_new, s_new
    row_max = max(m)
    weights = [math.exp(m_k - row_max) for m_k in m]
    total = math.fsum(s_k * w for s_k, w in zip(s, weights))
    output = [math.exp(x - row_max) / total for x in row]
    return {"steps": steps, "m": m, "s": s, "row_max": row_max, "weights": weights,
            "total": total, "output": output}


def trace_table(row, block: int) -> Table:
    """Every lane at every chunk: what it loads, its maximum, the rescaling, its sum."""
    result = run(row, block)
    rows = []
    for step in result["steps"]:
        where = "pad" if step["padding"] else str(step["column"])
        rows.append((str(step["chunk"]), str(step["lane"]), where, number(step["x"]),
                     number(step["m"]), number(step["m_new"]), number(step["ref"]),
                     fixed(step["scale"]), fixed(step["s_new"])))
    # headers short enough that the table keeps its columns at 80 (a list of cells otherwise)
    columns = ("Chunk", "Lane", "Col", "x", "m before", "m after", "from", "rescale",
               "s after")
    caption = ("rescale = exp(m before − from), and s after = s before × rescale + exp(x − "
               "from). 'from' is the new maximum, or 0 while a lane has seen only -inf (the "
               "guard): then both exponentials are exp(-inf) = 0 instead of exp(NaN). A column "
               "of pad is padding past the row's end, loaded as -inf.")
    return Table(columns, tuple(rows), caption)


def combine_table(row, block: int) -> Table:
    """The lanes brought to the row's maximum and added."""
    result = run(row, block)
    rows = tuple((str(lane), number(m_k), fixed(s_k), fixed(w), fixed(s_k * w))
                 for lane, (m_k, s_k, w) in enumerate(zip(result["m"], result["s"],
                                                          result["weights"])))
    direct = stable_softmax(list(row))["denominator"]
    caption = (f"M = max of the lanes' maxima = {number(result['row_max'])}; S = "
               f"{fixed(result['total'])}. Summing exp(x − M) over the whole row at once gives "
               f"{fixed(direct)}.")
    columns = ("Lane", "m_k", "s_k", "exp(m_k − M)", "s_k × exp(m_k − M)")
    return Table(columns, rows, caption)


def output_table(row, block: int) -> Table:
    """The second pass: exp(x − M) / S for every column, beside the one-block softmax."""
    result = run(row, block)
    reference = stable_softmax(list(row))["output"]
    rows = tuple((str(i), number(x), fixed(y), fixed(r))
                 for i, (x, y, r) in enumerate(zip(row, result["output"], reference)))
    return Table(("Column", "x", "exp(x − M) / S", "softmax, one block"), rows)


def _numbers(numbers) -> tuple[list[float], int]:
    """A computed section's numbers: the block width, then the row."""
    return [float(v) for v in numbers[1:]], int(numbers[0])


def page(row=None) -> Page:
    """The worked trace for ``row`` (default: a row of ten with two masked scores)."""
    row = list(row) if row is not None else list(DEFAULT_ROW)
    block = block_for(row)
    chunks = -(-len(row) // block)
    result = Page(f"Online softmax of {_row(row)} in chunks of {block}")
    result.add(
        Text(f"{len(row)} values in {chunks} chunks of {block} lanes. Lane k sees columns k, "
             f"k + {block}, k + {2 * block}, ...; past the end of the row it loads -inf. Each "
             "lane keeps m, the largest value it has seen, and s, the sum of exp(x − m) over "
             "what it has seen. When m grows, the old s was measured from the old maximum and "
             "is rescaled by exp(m before − m after)."),
        Heading("Pass 1: the running maximum and sum of every lane"),
        trace_table(row, block),
        Heading("Combining the lanes"),
        combine_table(row, block),
        Heading("Pass 2: read the row again and write"),
        output_table(row, block),
    )
    if all(x == -math.inf for x in row):
        result.add(Text("A row of only -inf has no softmax: M is -inf, exp(m_k − M) is NaN, "
                        "and so is every output, as torch.softmax gives."))
    return result


# Blocks a lesson can embed by name; the marker's numbers are the block width, then the row
# (see learning.computed).
BLOCKS = {
    "trace": lambda numbers: trace_table(*_numbers(numbers)),
    "combine": lambda numbers: combine_table(*_numbers(numbers)),
    "output": lambda numbers: output_table(*_numbers(numbers)),
}
