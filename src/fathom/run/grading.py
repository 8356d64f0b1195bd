"""How a sample's answers are graded: the model's, and the odd-name reader's on the same prompt.

One grading for both, so that the shortcut baseline beside a low-overlap score (``odd_name_score``)
is what the reader would have scored as a model (``sim:odd-name`` scores exactly that).
"""

from __future__ import annotations

from fathom.prompts.needle_sets import NeedleSet
from fathom.records import Score
from fathom.registry import score
from fathom.scoring import committed_lures
from fathom.tasks.base import Sample


def placed_needles(sample: Sample) -> NeedleSet | None:
    """The sample's needles; none for a control, whose prompt holds none."""
    return sample.needles if sample.needles is not None and sample.prompt.needles else None


def answer_grade(sample: Sample, text: str) -> tuple[Score, tuple[str, ...]]:
    """An answer's grade, by the task's own grader where it has one, and the look-alikes it commits to
    (any makes its score 0; "2484111, not 9546144" is right, not hedged)."""
    if sample.grader is not None:
        graded = sample.grader(text, sample.answers)
    else:
        graded = score(sample.scoring, text, sample.answers)
    needles = placed_needles(sample)
    return graded, committed_lures(text, needles.lures, sample.answers) if needles is not None else ()


def odd_name_score(sample: Sample) -> float | None:
    """The odd-name reader's answer on a low-overlap sample's prompt, graded as the model's is: the
    knowledge-free baseline (``fathom.prompts.odd_names``); None elsewhere, and for a control."""
    if sample.odd_name is None or not sample.prompt.needles:
        return None
    graded, lured = answer_grade(sample, sample.odd_name)
    return 0.0 if lured else graded.value
