"""What a wrong output looks like, described from the data alone.

When no known mistake's replay matches a failing output, the grader says what it sees and no
more: how far off the values are (and what arithmetic makes errors of that size), where they
differ, whether they are the reference scaled, another row of it, the input unchanged, or rows
that no longer sum to one. Every sentence here is a fact about the two arrays, never a guess at
the code that produced them.
"""

from __future__ import annotations

from learning.grader.numbers import close, counted, format_value

# Relative errors of this size are what rounding to these formats gives (unit roundoff 2**-24,
# 2**-11, 2**-8), with room for the few operations of a kernel: (upper bound, description).
# Each: (upper bound, the narrowest storage dtype in which it can arise, description). A
# float16 or bfloat16 size is named only for a case stored in that dtype.
PRECISIONS = (
    (1e-12, "float64", "only the last digits differ, as a different order of the same "
                       "float64 operations gives"),
    (5e-7, "float64", "the size of float32 rounding (float32 keeps about 7 significant "
                      "digits; float64, Python's float, about 16)"),
    (2e-3, "float16", "the size of float16 rounding (float16 keeps about 3 significant "
                      "digits)"),
    (1.6e-2, "bfloat16", "the size of bfloat16 rounding (bfloat16 keeps about 2 significant "
                         "digits)"),
)
MAX_ROWS_COMPARED = 256  # rows searched for "this row is another row of the reference"


def describe_values(got, want, atol: float, rtol: float, inputs=(), properties=(),
                    dtype: str = "float64", names=(), pieces=()) -> list[str]:
    """Sentences about how ``got`` differs from ``want`` (float64 arrays of one shape);
    ``dtype`` is what the case's tensors are stored in (float64 for Python lists); ``names``
    are the parameter names of ``inputs``, where known; ``pieces`` the named results stacked
    along the second-to-last axis (dq, dk, dv), each position then named in its own."""
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or got.size == 0:
        return []
    bad = ~close(got, want, atol, rtol)
    if not bad.any():
        return []
    scaled = _scaled(got, want, bad, atol)
    copied = _same_as_input(got, inputs) or _rows_of_input(got, inputs, names)
    # values an input holds already carry its digits: no sign of rounding, to decimal places
    # or to a format's precision
    rounded = "" if copied else _rounded(got, want)
    where = _first_in_piece(bad, pieces) if pieces else _where(bad)
    said = [s for s in (where, rounded or _size(got, want, bad, dtype,
                                                      systematic=bool(scaled or copied)),
                        scaled, copied,
                        _other_rows(got, want, bad, atol, rtol),
                        _all_zero(got)) if s]
    if "row-sums" in properties:
        said += [s for s in [_row_sums(got)] if s]
    return said


def by_piece(bad, pieces: tuple[tuple[str, int], ...]) -> str:
    """What differs in each named result stacked along the second-to-last axis: "dQ and dK
    match; in dV 255 of 256 values differ"."""
    import numpy as np

    start, right, wrong = 0, [], []
    for name, length in pieces:
        part = np.take(bad, range(start, start + length), axis=-2)
        start += length
        count = int(part.sum())
        if count:
            wrong.append(f"in {name} {count} of {part.size} values "
                         f"{'differs' if count == 1 else 'differ'}")
        else:
            right.append(name)
    said = f"{' and '.join(right)} {'matches' if len(right) == 1 else 'match'}" if right else ""
    return "; ".join(s for s in [said, *wrong] if s)


def in_piece(pieces: tuple[tuple[str, int], ...], index) -> str:
    """"dV[0, 0, 3, 1]": the element at ``index`` of the whole output, named in its piece."""
    if not pieces or len(index) < 2:
        return ""
    start, row = 0, int(index[-2])
    for name, length in pieces:
        if row < start + length:
            inner = [int(i) for i in index]
            inner[-2] = row - start
            return f"{name}[{', '.join(str(i) for i in inner)}]"
        start += length
    return ""


def _first_in_piece(bad, pieces: tuple[tuple[str, int], ...]) -> str:
    """Where the first differing value lies, named in its piece: "the first at dK[0, 0, 1, 0]"
    (by_piece says how many differ in each)."""
    import numpy as np

    flat = np.flatnonzero(bad)
    if not len(flat):
        return ""
    return f"the first at {in_piece(pieces, np.unravel_index(int(flat[0]), bad.shape))}"


def _where(bad) -> str:
    import numpy as np

    count, size = int(bad.sum()), bad.size
    # Rows and columns describe a matrix; a tensor of more dimensions (attention's (batch,
    # heads, seq, d)) is described element by element, each named by its index in its shape.
    if bad.ndim <= 1 or bad.shape[0] == 1 or bad.ndim > 2:
        flat = np.flatnonzero(bad)
        first, last = _index(int(flat[0]), bad.shape), _index(int(flat[-1]), bad.shape)
        if count == size:
            return f"every one of the {size} values differs" if size > 1 else ""
        if count == 1:
            return f"only element {first} of {size} differs"
        if count == int(flat[-1]) - int(flat[0]) + 1:
            return f"only elements {first} to {last} of {size} differ"
        return f"{count} of {size} elements differ, the first at {first}"
    rows = bad.reshape(bad.shape[0], -1)
    bad_rows = np.flatnonzero(rows.any(axis=1))
    n_rows = rows.shape[0]
    if len(bad_rows) == n_rows:
        where = "every row differs"
    elif len(bad_rows) == n_rows - 1 and bad_rows[0] == 1:
        where = "row 0 is right and every later row differs"
    elif len(bad_rows) <= 3:
        names = ", ".join(str(int(r)) for r in bad_rows)
        where = f"only row{'s' if len(bad_rows) > 1 else ''} {names} of {n_rows} differ" \
            f"{'' if len(bad_rows) > 1 else 's'}"
    else:
        where = f"{len(bad_rows)} of {n_rows} rows differ, the first is row {int(bad_rows[0])}"
    cols = np.flatnonzero(rows.any(axis=0))
    width = rows.shape[1]
    if len(cols) < width:
        first, last = int(cols[0]), int(cols[-1])
        if first == last:
            where += f", only in column {first} of {width}"
        elif last == width - 1 and len(cols) == last - first + 1:
            where += f", only in columns {first} to {last} (the end of the row)"
        elif len(cols) == last - first + 1:
            where += f", only in columns {first} to {last}"
    return where


def _index(flat: int, shape: tuple[int, ...]) -> str:
    """A position in an array of ``shape`` as the learner indexes it: 17 in one dimension
    (and in a single row), (0, 1, 0, 1) in a tensor of more than two."""
    import numpy as np

    if len(shape) <= 2:
        return str(flat)
    return "(" + ", ".join(str(int(i)) for i in np.unravel_index(flat, shape)) + ")"


def _size(got, want, bad, dtype: str = "float64", systematic: bool = False) -> str:
    import numpy as np

    finite = bad & np.isfinite(got) & np.isfinite(want)
    if not finite.any():
        return ""
    diff = np.abs(got - want)[finite]
    scale = np.abs(want)[finite]
    worst = int(np.argmax(diff))
    text = f"the largest difference is {format_value(float(diff[worst]))}"
    nonzero = scale > 0
    if not nonzero.any():
        return text
    relative = float(np.max(diff[nonzero] / scale[nonzero]))
    text += f", the largest relative difference {relative:.2g}"
    errors = (got - want)[finite]
    # All one way, or all toward zero (or all away from it): a scale, or errors of one
    # direction, are no rounding whatever their size.
    if systematic or _one_way(errors) or _one_way(errors * np.sign(want[finite])):
        return text
    for bound, needs, description in PRECISIONS:
        if relative <= bound:
            usable = needs == "float64" or dtype == needs or \
                (needs == "float16" and dtype == "bfloat16")
            return f"{text}: {description}" if usable else text
    return text


def _rounded(got, want) -> str:
    """Every value is the reference rounded to some number of decimal places. Said instead of
    the size of the difference, whose match with a format's rounding (float32's, say) would
    point at a conversion that is not there."""
    import numpy as np

    finite = np.isfinite(want)
    if not finite.any() or not np.any(got[finite]) or not np.array_equal(
            np.isfinite(got), finite):
        return ""  # all zeros (or NaN where the reference is finite) is no rounding
    # np.round may differ from Python's round by an ulp
    fits = [places for places in range(1, 12)
            if np.allclose(got[finite], np.round(want[finite], places), rtol=1e-15, atol=0)]
    if fits:
        # round numbers fit several: 0.399999968 is 0.4 to 1 place and to 6, and the learner
        # may have used any of them, so all of them are said
        last = max(p for p in fits if all(q in fits for q in range(fits[0], p + 1)))
        if last == fits[0]:
            return f"every value is the reference rounded to {counted(last, 'decimal place')}"
        return f"every value is the reference rounded to {fits[0]} to {last} decimal places " \
               f"(any of them gives these values)"
    return ""


def _one_way(values) -> bool:
    values = values[values != 0]
    return values.size > 0 and bool((values > 0).all() or (values < 0).all())


def _scaled(got, want, bad, atol: float = 0.0) -> str:
    """The output is the reference times one number, per row or over the whole output. A
    reference value within ``atol`` of zero is zero to the check: it gives no ratio (the
    rounding noise of an exact 0 times anything is no pattern), and the output must be as
    small there."""
    import numpy as np

    if not (np.isfinite(got).all() and np.isfinite(want).all()):
        return ""
    rows_got = got.reshape(-1, got.shape[-1]) if got.ndim else got.reshape(1, 1)
    rows_want = want.reshape(rows_got.shape)
    factors = []
    for g, w in zip(rows_got, rows_want):
        nonzero = np.abs(w) > max(1e-300, atol)
        if not nonzero.any():
            return ""
        ratio = g[nonzero] / w[nonzero]
        if np.ptp(ratio) > 1e-6 * max(1.0, float(np.max(np.abs(ratio)))) or not np.allclose(
                g[~nonzero], 0.0, atol=max(1e-12, atol * max(1.0, abs(float(ratio[0]))))):
            return ""
        factors.append(float(ratio[0]))
    factors = np.array(factors)
    if np.all(np.abs(factors - 1.0) < 1e-5) or np.all(np.abs(factors) < 1e-9):
        return ""  # noise around the reference, or an output of zeros (said elsewhere)
    if np.ptp(factors) <= 1e-6 * max(1.0, float(np.max(np.abs(factors)))):
        factor = float(factors[0])
        if abs(factor + 1) < 1e-9:
            return "every value is the reference with its sign flipped"
        return f"every value is the reference times {factor:.6g}"
    # the rows farthest from 1, with digits enough to tell each from 1 ("1" reads as unchanged)
    farthest = sorted(np.argsort(-np.abs(factors - 1.0), kind="stable")[:3])
    shown = ", ".join(f"row {i}: {_factor(float(factors[i]))}" for i in farthest)
    more = ", ..." if len(factors) > 3 else ""
    return f"each row is the reference's row times its own number ({shown}{more})"


def _factor(value: float) -> str:
    """``value`` to 4 significant digits, or as many more (up to 9) as it takes not to read
    as 1."""
    for digits in range(4, 10):
        text = f"{value:.{digits}g}"
        if value == 1.0 or float(text) != 1.0:
            return text
    return f"{value:.9g}"


def _same_as_input(got, inputs) -> str:
    import numpy as np

    if got.size < 2:  # one equal number is a coincidence more often than a returned input
        return ""
    for position, value in enumerate(inputs):
        array = np.asarray(value, dtype=np.float64) if _numeric(value) else None
        if array is None or array.shape != got.shape:
            continue
        if close(got, array, 0.0, 1e-6).all():
            which = "the input" if len(inputs) == 1 else f"argument {position + 1}"
            return f"the output equals {which}, unchanged"
    return ""


def _rows_of_input(got, inputs, names=()) -> str:
    """Every row of the output is, exactly, a row of one input (not the input itself)."""
    import numpy as np

    if got.ndim != 2 or got.shape[0] < 2 or got.shape[0] > MAX_ROWS_COMPARED \
            or not np.isfinite(got).all():
        return ""
    for position, value in enumerate(inputs):
        rows = np.asarray(value, dtype=np.float64) if _numeric(value) else None
        if rows is None or rows.ndim != 2 or rows.shape[1] != got.shape[1] \
                or rows.shape[0] > MAX_ROWS_COMPARED:
            continue
        found = []
        for row in got:
            match = np.flatnonzero((rows == row).all(axis=1))
            if match.size == 0:
                break
            found.append(int(match[0]))
        else:
            if found == list(range(len(found))) and rows.shape[0] == len(found):
                continue  # the input whole, said by _same_as_input
            name = names[position] if position < len(names) else f"argument {position + 1}"
            first = f"row 0 is {name}'s row {found[0]}"
            return f"every row of the output is one of {name}'s rows, unchanged ({first})"
    return ""


def _numeric(value) -> bool:
    import numpy as np

    try:
        return np.asarray(value, dtype=np.float64).size > 0
    except (TypeError, ValueError):
        return False


def _other_rows(got, want, bad, atol: float, rtol: float) -> str:
    """Every wrong row is another row of the reference: the program read the wrong row. Said
    only when all of them are, since among many short rows of few values one wrong row can
    equal another row by chance; and within the case's own tolerance, the one that finds the
    row wrong, so that an output off by more than that (rounded, say) is not said to equal a
    reference row that lies as close to its own as two neighbouring rows of attention do."""
    import numpy as np

    if got.ndim != 2 or got.shape[0] < 2 or got.shape[0] > MAX_ROWS_COMPARED:
        return ""
    found = []
    finite = np.isfinite(want).all(axis=1)
    for r in np.flatnonzero(bad.any(axis=1)):
        if not np.isfinite(got[r]).all():
            return ""  # NaN agrees with NaN: no sign of which row was read
        match = next((other for other in range(got.shape[0]) if other != r and finite[other]
                      and close(got[r], want[other], atol, rtol).all()), None)
        if match is None:
            return ""
        found.append((int(r), match))
    if not found:
        return ""
    r, other = found[0]
    return f"row {r} of the output is the reference's row {other}"


def _all_zero(got) -> str:
    import numpy as np

    return "every output is 0" if got.size > 1 and np.all(got == 0) else ""


def _row_sums(got) -> str:
    import numpy as np

    sums = np.atleast_2d(got).sum(axis=-1)
    finite = sums[np.isfinite(sums)]
    if finite.size == 0 or np.all(np.abs(finite - 1.0) <= 1e-6):
        return ""
    low, high = float(finite.min()), float(finite.max())
    if abs(high - low) <= 1e-9 * max(1.0, abs(high)):
        return f"each row sums to {low:.6g}, not 1"
    if f"{low:.6g}" == f"{high:.6g}":  # apart only past the digits shown: not "between 2 and 2"
        return f"each row sums to {low:.6g} (to 6 significant digits), not 1"
    return f"the rows sum to between {low:.6g} and {high:.6g}, not 1"


def describe_exact(got, want) -> list[str]:
    """Sentences about how plain data (a dict of fields, a tuple, a number) differs."""
    if isinstance(got, dict) and isinstance(want, dict):
        return _dict_differences(got, want)
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return [f"it has {counted(len(got), 'item')}, the reference {len(want)}"]
        said = [f"item {i}: {_value_difference(g, w)}" for i, (g, w) in enumerate(zip(got, want))
                if not _equal(g, w)]
        more = len(said) - 4
        return said[:4] + ([f"and {counted(more, 'more item')} "
                            f"{'differs' if more == 1 else 'differ'}"] if more > 0 else [])
    if _number(got) and _number(want):
        return [_value_difference(got, want)]
    return []


def _dict_differences(got: dict, want: dict) -> list[str]:
    said = []
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    if missing:
        said.append("missing keys: " + ", ".join(repr(k) for k in missing))
    if extra:
        said.append("keys the reference does not have: " + ", ".join(repr(k) for k in extra))
    differ = [k for k in want if k in got and not _equal(got[k], want[k])]
    said += [f"{k!r}: {_value_difference(got[k], want[k])}" for k in differ]
    agree = [k for k in want if k in got and k not in differ]
    if differ and agree:
        said.append("these agree with the reference: " + ", ".join(repr(k) for k in agree))
    return said


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more " \
        "characters)"


def _value_difference(got, want) -> str:
    text = f"{_short(got)} where the reference has {_short(want)}"
    if not (_number(got) and _number(want)) or want == 0 or got == want:
        return text
    for digits in range(1, 10):
        if got == round(want, digits) and got != want and got != 0:
            return f"{text}: yours is the reference's value rounded to " \
                f"{counted(digits, 'decimal place')}"
    ratio = got / want
    if ratio == 0:
        return text
    if abs(ratio - round(ratio)) < 1e-9 and round(ratio) not in (0, 1):
        return f"{text}: exactly {round(ratio)} times the reference"
    if abs(1 / ratio - round(1 / ratio)) < 1e-9 and round(1 / ratio) > 1:
        return f"{text}: exactly 1/{round(1 / ratio)} of the reference"
    relative = abs(got - want) / abs(want)
    if relative < 1e-12:
        return f"{text}: only the last digits differ (relative difference {relative:.1g})"
    return f"{text} ({ratio:.4g} times the reference)"


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(a, b) -> bool:
    return type(a) is type(b) and a == b or (_number(a) and _number(b) and a == b)
