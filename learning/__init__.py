"""The course machinery: the exercise registry, the grader, and the learner's commands."""
