"""A worked example as data (headings, text, tables, steps), for a terminal or for Markdown.

Explainers build pages from numbers they compute at run time; ``learning.explain`` prints them
with rich and ``learning.computed`` writes the same blocks into the lessons as Markdown, so a
number in a lesson is always one the course's own code produced.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Step:
    name: str
    formula: str
    kind: str  # "reduction" or "elementwise"
    value: str


@dataclass(frozen=True)
class Steps:
    steps: tuple[Step, ...]


@dataclass
class Page:
    title: str
    blocks: list = field(default_factory=list)

    def add(self, *blocks) -> Page:
        self.blocks.extend(blocks)
        return self


def to_markdown(block) -> str:
    """One block as Markdown, for the computed sections of a lesson."""
    if isinstance(block, Heading):
        return f"**{block.text}**"
    if isinstance(block, Text):
        return block.text
    if isinstance(block, Table):
        lines = ["| " + " | ".join(block.columns) + " |",
                 "|" + "|".join("---:" for _ in block.columns) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in block.rows]
        if block.caption:
            lines += ["", block.caption]
        return "\n".join(lines)
    if isinstance(block, Steps):
        lines = ["| Step | Formula | Kind | Value |", "|---|---|---|---|"]
        lines += [f"| {s.name} | `{s.formula}` | {s.kind} | {s.value} |" for s in block.steps]
        return "\n".join(lines)
    raise TypeError(f"cannot render {type(block).__name__} as Markdown")
