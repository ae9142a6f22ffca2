"""Every exercise of the course, in lesson order: one module each, listed once here by name.

Nothing is imported here: ``learning.grader.registry`` imports the declarations when it is
first asked, so a command that reads one exercise's files does not import all of them.
"""

NAMES = (
    "elementwise",
    "traffic",
    "reductions",
    "softmax",
    "rmsnorm",
    "softmax_backward",
    "online_softmax",
    "matmul",
    "attention",
    "attention_backward",
)
