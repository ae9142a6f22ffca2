"""Numbers as the grader compares and prints them: agreement within a tolerance, and text."""

from __future__ import annotations

DECIMALS = 9


def close(got, want, atol: float, rtol: float):
    """Elementwise agreement; NaN agrees only with NaN, infinities only with themselves."""
    import numpy as np

    with np.errstate(all="ignore"):
        both_nan = np.isnan(got) & np.isnan(want)
        near = np.abs(got - want) <= atol + rtol * np.abs(want)
        return both_nan | (got == want) | (near & np.isfinite(got) & np.isfinite(want))


def format_value(value: float) -> str:
    """A number with nine decimals, or in scientific notation where those would hide it."""
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if value != 0 and abs(value) < 1e-6:
        return f"{value:.6e}"
    return f"{value:.{DECIMALS}f}" if abs(value) < 1e6 else f"{value:.6g}"


def format_values(values, limit: int = 8) -> str:
    import numpy as np

    flat = np.asarray(values, dtype=np.float64).ravel()
    shown = ", ".join(format_value(float(v)) for v in flat[:limit])
    more = f", ... ({flat.size - limit} more)" if flat.size > limit else ""
    return f"[{shown}{more}]"


def counted(count: int, noun: str, plural: str = "") -> str:
    """'1 row', '3 rows': a count with its noun in the right number (``plural`` when adding
    an s is wrong)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def verb(count: int, singular: str, plural: str) -> str:
    """The verb that agrees with ``count`` things: verb(1, 'was', 'were') is 'was'."""
    return singular if count == 1 else plural
