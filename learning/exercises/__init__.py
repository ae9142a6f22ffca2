"""Every exercise of the course, in lesson order: one module each, listed once here."""

from learning.exercises import (
    online_softmax,
    softmax,
    softmax_backward,
)

EXERCISES = (
    softmax.EXERCISE,
    softmax_backward.EXERCISE,
    online_softmax.EXERCISE,
)
