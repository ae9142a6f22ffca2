"""Worked examples, one module per topic, each computing its page at run time without torch.

Two modules are not topics: ``page`` (the blocks a page is made of) and ``facts`` (facts the
lessons state about the reference kernels, as computed sections).
"""

import importlib

TOPICS = {
    "softmax": "learning.explainers.softmax",
    "elementwise": "learning.explainers.elementwise",
    "reductions": "learning.explainers.reductions",
    "traffic": "learning.explainers.traffic",
    "rmsnorm": "learning.explainers.rmsnorm",
    "softmax_backward": "learning.explainers.softmax_backward",
    "online_softmax": "learning.explainers.online_softmax",
    "matmul": "learning.explainers.matmul",
    "attention": "learning.explainers.attention",
    "attention_backward": "learning.explainers.attention_backward",
    "bench": "learning.explainers.bench",
}


# What each topic's --input is, for the help text: one place, beside the topics themselves.
INPUTS = {
    "softmax": "a row of scores (4,5,6)",
    "elementwise": "n,BLOCK (10,4)",
    "reductions": "a row of values (-3,-1,-4)",
    "traffic": "rows,cols[,element_bytes] (4096,4096,4)",
    "rmsnorm": "a row of values (1,2,2,4)",
    "softmax_backward": "a row of scores (1,2,3)",
    "online_softmax": "a row of scores, -inf allowed (1,-inf,3)",
    "matmul": "M,N,K,block, each 1 to 8 (3,2,3,2)",
    "attention": "one query row's scores, -inf allowed (1,-inf,3,0,4)",
    "attention_backward": "dO, 2 queries x 2 numbers (1,0,0,1)",
    "bench": "none: it reads the committed measurements",
}


def load(topic: str):
    """The explainer module for ``topic``; KeyError if the course has none."""
    return importlib.import_module(TOPICS[topic])
