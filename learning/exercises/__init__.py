"""Every exercise of the course, in lesson order: one module each, listed once here."""

from learning.exercises import (
    elementwise,
    online_softmax,
    reductions,
    softmax,
    softmax_backward,
)

EXERCISES = (
    elementwise.EXERCISE,
    reductions.EXERCISE,
    softmax.EXERCISE,
    softmax_backward.EXERCISE,
    online_softmax.EXERCISE,
)
