"""The lessons in reading order, as data: what each teaches and which exercise it grades."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent
LESSONS_DIR = COURSE_ROOT / "lessons"


@dataclass(frozen=True)
class Lesson:
    number: str  # "04", or "A1" for a workshop
    slug: str
    title: str
    exercise: str  # the module the learner edits, without ".py"
    part: str  # the part of that module this lesson starts
    also: tuple[str, ...] = ()  # further parts of the same module that this lesson grades

    @property
    def filename(self) -> str:
        return f"{self.number}-{self.slug}.md"

    @property
    def path(self) -> Path:
        return LESSONS_DIR / self.filename

    @property
    def available(self) -> bool:
        return self.path.exists()


LESSONS = (
    Lesson("01", "elementwise", "Elementwise work and the block model", "elementwise", "python"),
    Lesson("02", "traffic", "Memory traffic: bytes, intensity, the roofline", "traffic", "python"),
    Lesson("03", "reductions", "Reductions and their identities", "reductions", "python"),
    Lesson("04", "softmax", "Softmax: derive the kernel before optimizing it", "softmax", "python"),
    Lesson("05", "rmsnorm", "RMSNorm", "rmsnorm", "python"),
    Lesson("06", "first-kernel", "Your first Triton kernel: program ids, blocks, masks",
           "elementwise", "triton"),
    Lesson("07", "reductions-triton", "Reductions in Triton: masked loads and the other identity",
           "reductions", "triton"),
    Lesson("08", "softmax-triton", "Fused softmax on the GPU", "softmax", "triton"),
    Lesson("09", "rmsnorm-triton", "Fused RMSNorm on the GPU", "rmsnorm", "triton"),
    Lesson("10", "measuring", "Measuring kernels: do_bench, GB/s, the roofline, autotuning",
           "traffic", "bench"),
    Lesson("11", "softmax-backward", "The softmax backward pass", "softmax_backward", "triton",
           also=("python", "autograd")),
    Lesson("A1", "online-softmax", "Workshop: online softmax for rows wider than a block",
           "online_softmax", "triton", also=("python",)),
    Lesson("12", "matmul", "Tiled matrix multiplication: tl.dot, the K loop, 0 padding, L2 order, "
           "autotuning", "matmul", "python", also=("triton", "plan")),
    Lesson("13", "attention", "FlashAttention forward: softmax over key tiles, causal masks, the "
           "-inf guard", "attention", "python", also=("triton",)),
    Lesson("14", "attention-backward", "FlashAttention backward: lesson 11's softmax backward, "
           "tiled, with the scores recomputed", "attention_backward", "python",
           also=("triton",)),
)


def lesson_for(exercise: str, part: str) -> Lesson | None:
    for lesson in LESSONS:
        if lesson.exercise == exercise and part in (lesson.part, *lesson.also):
            return lesson
    return None


def lesson_after(lesson: Lesson) -> Lesson | None:
    """The next lesson that exists, in reading order."""
    later = LESSONS[LESSONS.index(lesson) + 1:]
    return next((candidate for candidate in later if candidate.available), None)


def next_lesson(progress, graded: dict[str, tuple[str, ...]],
                kernels: bool = True, start: Lesson | None = None) -> Lesson | None:
    """The first lesson, in reading order, that is not done: one of its graded parts has not
    passed, or (a lesson with nothing to grade, such as 10) no later lesson has been started.
    ``graded`` maps each exercise to its part names; ``progress`` is a
    learning.grader.state.State. With ``kernels`` False (no Triton here, and ``graded`` names
    only the parts that launch no kernel) a lesson with none of those cannot be done here, and
    is passed over. With ``start`` (the lesson of a part just passed) the search begins at that
    lesson, so that the same exercise's other part, or the lesson after, comes next rather than
    an earlier lesson the learner skipped; it wraps to the earliest lesson not done only when
    nothing from ``start`` on remains."""
    first = LESSONS.index(start) if start is not None else 0
    order = list(range(first, len(LESSONS))) + list(range(first))
    for index in order:
        lesson = LESSONS[index]
        if not lesson.available:
            continue
        parts = [p for p in (lesson.part, *lesson.also) if p in graded.get(lesson.exercise, ())]
        if parts:
            if any((grade := progress.grade(lesson.exercise, part)) is None
                   or grade.status != "passed" for part in parts):
                return lesson
        elif kernels and not any(progress.grade(later.exercise, part) is not None
                     for later in LESSONS[index + 1:] for part in (later.part, *later.also)):
            return lesson
    return None

