"""Every exercise of the course, in lesson order: one module each, listed once here."""

from learning.exercises import (
    attention,
    attention_backward,
    elementwise,
    matmul,
    online_softmax,
    reductions,
    rmsnorm,
    softmax,
    softmax_backward,
    traffic,
)

EXERCISES = (
    elementwise.EXERCISE,
    traffic.EXERCISE,
    reductions.EXERCISE,
    softmax.EXERCISE,
    rmsnorm.EXERCISE,
    softmax_backward.EXERCISE,
    online_softmax.EXERCISE,
    matmul.EXERCISE,
    attention.EXERCISE,
    attention_backward.EXERCISE,
)
