"""Worked examples, one module per topic, each computing its page at run time without torch."""

import importlib

TOPICS = {
    "softmax": "learning.explainers.softmax",
    "elementwise": "learning.explainers.elementwise",
    "reductions": "learning.explainers.reductions",
    "traffic": "learning.explainers.traffic",
    "rmsnorm": "learning.explainers.rmsnorm",
    "softmax_backward": "learning.explainers.softmax_backward",
    "online_softmax": "learning.explainers.online_softmax",
    "bench": "learning.explainers.bench",
}


def load(topic: str):
    """The explainer module for ``topic``; KeyError if the course has none."""
    return importlib.import_module(TOPICS[topic])
