"""The grader: what ``python -m learning.check`` runs, in its own process and in the learner's.

Its modules are listed, one line each, in ``learning/__init__.py``.
"""
