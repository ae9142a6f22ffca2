"""Every exercise of the course, in lesson order: one module each, listed once here."""

from learning.exercises import (
    softmax,
)

EXERCISES = (
    softmax.EXERCISE,
)
