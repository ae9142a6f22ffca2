"""The softmax exercise: the reference passes, the stub is not started, every catalogued
version gets the verdict it must get."""


from learning.catalogue import versions
from learning.exercises.softmax import EXERCISE


def test_every_declared_bug_is_caught_by_some_catalogued_version():
    from learning.compare import COMMON_BUGS

    named = {v.bug for v in versions("softmax") if v.bug}
    declared = {bug.key for part in EXERCISE.parts for bug in part.bugs}
    # Bugs without a catalogued version are there only as the fallback cause of a case.
    fallbacks = {"wrong-length", "not-normalised", "row-offset", "all-minus-inf", "fp16", "bf16",
                 "wrong-values"}
    assert declared - named <= fallbacks, declared - named - fallbacks
    assert named <= declared | set(COMMON_BUGS)
