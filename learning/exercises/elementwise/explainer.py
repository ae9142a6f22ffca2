"""The block model drawn: n elements cut into programs of BLOCK lanes, and the mask that keeps
the last program's spare lanes from touching memory (lessons 01 and 06)."""

from __future__ import annotations

from learning.cli import ArgumentError
from learning.explainers.page import Heading, Page, Table, Text

# What --input takes, for python -m learning.explain's help (an example in brackets)
INPUT = "n,BLOCK (10,4)"
DEFAULT = (10, 4)
MAX_LANES = 64  # lanes the lane-by-lane table will draw


def cdiv(a: int, b: int) -> int:
    """Ceiling division: the number of blocks of b that cover a."""
    return (a + b - 1) // b


def example_inputs(n: int) -> tuple[list[float], list[float]]:
    """The inputs the drawing uses: x climbs through zero, y alternates 2 and 1."""
    x = [i - (n - 1) / 2 for i in range(n)]
    y = [1.0 if i % 2 else 2.0 for i in range(n)]
    return x, y


def plan(n: int, block: int) -> list[dict]:
    """What each program does: its offsets, its mask, how many lanes do work."""
    programs = []
    for pid in range(cdiv(n, block)):
        offsets = [pid * block + lane for lane in range(block)]
        mask = [offset < n for offset in offsets]
        programs.append({"pid": pid, "offsets": offsets, "mask": mask, "valid": sum(mask)})
    return programs


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def launch(numbers) -> Table:
    """One row per program: offsets, mask, lanes doing work."""
    n, block = (int(v) for v in numbers)
    programs = plan(n, block)
    rows = tuple((str(p["pid"]), f"{p['pid']} × {block} = {p['pid'] * block}",
                  ", ".join(str(o) for o in p["offsets"]),
                  " ".join("1" if m else "0" for m in p["mask"]), f"{p['valid']} of {block}")
                 for p in programs)
    lanes = len(programs) * block
    caption = (f"grid = cdiv({n}, {block}) = {len(programs)} programs × {block} lanes = {lanes} "
               f"lanes for {n} elements: {lanes - n} lanes masked off.")
    return Table(("Program", "First offset", "Offsets", f"Mask (offset < {n})", "Lanes at work"),
                 rows, caption)


def lanes(numbers) -> Table:
    """Every lane of every program, with the element it reads, or why it reads nothing."""
    n, block = (int(v) for v in numbers)
    x, y = example_inputs(n)
    rows = []
    for p in plan(n, block):
        for lane, (offset, valid) in enumerate(zip(p["offsets"], p["mask"])):
            if valid:
                total = x[offset] + y[offset]
                rows.append((str(p["pid"]), str(lane), str(offset), "1", _number(x[offset]),
                             _number(y[offset]), _number(total), _number(max(total, 0.0))))
            else:
                rows.append((str(p["pid"]), str(lane), str(offset), "0", "-", "-", "-",
                             "not stored"))
    return Table(("Program", "Lane", "Offset", "Mask", "x", "y", "x + y", "relu(x + y)"),
                 tuple(rows))


def mistakes(numbers) -> Table:
    """The four indexing mistakes of lesson 06, and what each does for this n and BLOCK."""
    n, block = (int(v) for v in numbers)
    programs = cdiv(n, block)
    short = n // block
    unwritten = n - short * block
    past_end = programs * block - n
    rows = (
        ("grid = n // BLOCK", f"{short} programs instead of {programs}",
         f"{unwritten} elements never written" if unwritten else "nothing (n is a multiple)"),
        ("no mask", f"all {programs * block} lanes load and store",
         f"{past_end} lanes read and write past the end" if past_end else
         "nothing (n is a multiple)"),
        ("mask = offsets <= n", f"lane at offset {n} kept",
         "one lane reads and writes past the end" if past_end else
         "one lane past the end, if a program reaches it"),
        ("offsets = pid * BLOCK + lane + 1", "every lane one element late",
         "element 0 never written" if programs else "nothing (no programs)"),
    )
    return Table(("Mistake", "What runs", f"Effect for n = {n}, BLOCK = {block}"), rows)


def grid(numbers) -> Table:
    """Programs and masked lanes for several sizes at one BLOCK: grid(BLOCK, n1, n2, ...)."""
    block, *sizes = (int(v) for v in numbers)
    rows = []
    for n in sizes:
        programs = cdiv(n, block)
        rows.append((str(n), str(programs), str(n // block), str(programs * block - n),
                     str(n - (programs - 1) * block) if programs else "-"))
    return Table(("n", f"cdiv(n, {block})", f"n // {block}", "Lanes masked off",
                  "Valid lanes in the last program"), tuple(rows))


def _check(row) -> tuple[int, int]:
    if row is None:
        return DEFAULT
    if len(row) != 2:
        raise ArgumentError("elementwise takes two numbers, n and BLOCK: --input 10,4")
    n, block = row
    if n != int(n) or n < 1 or block != int(block) or block < 1:
        raise ArgumentError(f"--input: n and BLOCK must be positive whole numbers, not "
                            f"{_number(n)} and {_number(block)}")
    n, block = int(n), int(block)
    if block & (block - 1):
        raise ArgumentError(f"--input: BLOCK must be a power of two (Triton needs one), not "
                            f"{block}")
    if cdiv(n, block) * block > MAX_LANES:
        raise ArgumentError(f"--input: {cdiv(n, block) * block} lanes is more than the "
                            f"{MAX_LANES} the drawing can show")
    return n, block


def page(row=None) -> Page:
    """The drawing for n elements and BLOCK lanes (``--input n,BLOCK``), 10 and 4 by default."""
    n, block = _check(row)
    numbers = (n, block)
    result = Page(f"relu(x + y) for n = {n} elements, BLOCK = {block} lanes per program")
    result.add(
        Text("Each program owns BLOCK consecutive elements: program pid's lanes have offsets "
             "pid * BLOCK + 0, 1, ..., BLOCK - 1. Enough programs are launched to cover n, so "
             "the last one may have lanes past the end; the mask (offset < n) switches them "
             "off, and a lane that is off neither loads nor stores."),
        Heading("The launch"), launch(numbers),
        Heading("Lane by lane"), lanes(numbers),
        Heading("Four ways to get it wrong"), mistakes(numbers),
    )
    return result


BLOCKS = {"launch": launch, "lanes": lanes, "mistakes": mistakes, "grid": grid}
