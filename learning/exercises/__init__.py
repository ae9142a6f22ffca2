"""Every exercise of the course, in lesson order: one folder each, named once here.

``learning/exercises/NAME/`` holds ``exercise.py``, the declaration (its parts, cases, known bugs
and named steps, as ``EXERCISE``), and an ``__init__.py`` of one line that imports nothing.

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
