"""Worked examples, one module per topic, each computing its page at run time without torch.

A topic is an exercise, whose worked example is in its folder
(``learning/exercises/NAME/explainer.py``), or one of ``OTHER_TOPICS``, a module here. Two
modules here are not topics: ``page`` (the blocks a page is made of) and ``facts`` (facts the
lessons state about the reference kernels, as computed sections).

Every topic's module defines ``page(row)``, ``BLOCKS`` (what the lessons' computed sections
call) and ``INPUT`` (what its ``--input`` takes, for the help text).
"""

import importlib

from learning import exercises

OTHER_TOPICS = ("bench",)

TOPICS = {**{name: f"learning.exercises.{name}.explainer" for name in exercises.NAMES},
          **{name: f"{__name__}.{name}" for name in OTHER_TOPICS}}


def load(topic: str):
    """The explainer module for ``topic``; KeyError if the course has none."""
    return importlib.import_module(TOPICS[topic])


def inputs() -> dict[str, str]:
    """What each topic's --input is, as each topic's module says (none of them imports torch)."""
    return {topic: load(topic).INPUT for topic in TOPICS}
