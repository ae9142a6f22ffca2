"""The course machinery: the exercise registry, the grader, and the learner's commands."""

import os

# Triton 3.9 warns, at every kernel compiled, that its default of fusing a multiply and an add
# into one instruction (on) turns off in 3.10. The course's kernels and measurements assume it
# on, Triton's default from 3.3 to 3.9: saying so keeps the warning out of every run of the
# course's commands and of the learner's check. A setting of the learner's own wins.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

# LEARNING_WITHOUT_TRITON=1: every course process behaves as on a machine without Triton, as
# macOS is (learning.grader.mode); the tests grade that mode on a machine that has Triton.
if os.environ.get("LEARNING_WITHOUT_TRITON"):
    from learning.grader import mode as _mode

    _mode.hide_triton_if_asked()
