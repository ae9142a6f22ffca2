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


def format_value(value: float, decimals: int = DECIMALS) -> str:
    """A number with nine decimals (or ``decimals``), or in scientific notation where those
    would hide it."""
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    digits = max(6, decimals - 3)  # significant digits after the first, in scientific notation
    if value != 0 and abs(value) < 1e-6:
        return f"{value:.{digits}e}"
    return f"{value:.{decimals}f}" if abs(value) < 1e6 else f"{value:.{digits}g}"


def format_values(values, limit: int = 8, decimals: int = DECIMALS) -> str:
    import numpy as np

    flat = np.asarray(values, dtype=np.float64).ravel()
    shown = ", ".join(format_value(float(v), decimals) for v in flat[:limit])
    more = f", ... ({flat.size - limit} more)" if flat.size > limit else ""
    return f"[{shown}{more}]"


def decimals_to_tell_apart(want, got, limit: int = 64, wrong=None) -> int:
    """The decimals that print every differing pair among the first ``limit`` of ``want`` and
    ``got`` as two different numbers (DECIMALS at least, 17 at most): a mismatch shown as the
    same digits on both sides tells the reader nothing. ``wrong`` (a mask of their shape), where
    given, keeps to the pairs outside the tolerance: values that pass, off in their last bits,
    would otherwise print every value to 17 digits and send the reader after rounding."""
    import numpy as np

    want = np.asarray(want, dtype=np.float64).ravel()
    got = np.asarray(got, dtype=np.float64).ravel()
    if want.shape != got.shape:
        return DECIMALS
    needed = DECIMALS
    differs = (want != got) & np.isfinite(want) & np.isfinite(got)
    if wrong is not None and np.shape(wrong) != () and np.size(wrong) == want.size:
        differs &= np.asarray(wrong, dtype=bool).ravel()
    differing = np.flatnonzero(differs)[:limit]
    for i in differing:
        w, g = float(want[i]), float(got[i])
        while needed < 17 and format_value(w, needed) == format_value(g, needed):
            needed += 1
    return needed


def counted(count: int, noun: str, plural: str = "") -> str:
    """'1 row', '3 rows': a count with its noun in the right number (``plural`` when adding
    an s is wrong)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def verb(count: int, singular: str, plural: str) -> str:
    """The verb that agrees with ``count`` things: verb(1, 'was', 'were') is 'was'."""
    return singular if count == 1 else plural
