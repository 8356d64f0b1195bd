"""Why samples failed: errors counted by kind, and each failed sample's one failure kind."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from fathom.records import DISTRACTOR_ROLES, THINKING, FirstToken, SampleRecord, error_kind
from fathom.scoring import named_in


def error_kinds(records: Iterable[SampleRecord]) -> dict[str, int]:
    """Errors counted by kind (``fathom.records.error_kind``), in the kinds' order by name."""
    kinds = Counter(error_kind(r.error) for r in records if r.error is not None)
    return dict(sorted(kinds.items()))


# Why a sample was not fully right, in the order failure_kind checks them: the first that applies.
FAILURE_KINDS = (
    "error",
    "still_thinking",
    "beyond_window",
    "stopped",
    "empty",
    "hedged",
    "distractor",
    "partial",
    "refusal",
    "wrong_answer",
)
# An outcome beside the failure kinds, though no failure: right, and naming a look-alike's value only
# to reject it ("2484111, not 9546144"; ``rejected_lure``). Counted where hedged and distractor are.
REJECTED = "rejected"
# Lower-case phrases of a model that declines, or says it cannot find the answer, rather than giving a
# wrong one; matched anywhere in the output, with typographic apostrophes read as plain ones.
REFUSAL_PHRASES = (
    "i cannot",
    "i can't",
    "i could not find",
    "i couldn't find",
    "i'm sorry",
    "i am sorry",
    "i am unable",
    "i'm unable",
    "i don't know",
    "i do not know",
    "as an ai",
)


def failure_kind(record: SampleRecord) -> str | None:
    """Why a sample failed, as one of ``FAILURE_KINDS``; None when it is fully right.

    "error": never graded (``error`` set). "still_thinking": no answer, the reply having ended inside
    its reasoning (``THINKING``: a think block never closed, the budget spent on thinking), whatever
    the window; a model that would answer given more budget. "beyond_window": wrong on a prompt
    longer than the trained window, where failing is what the window predicts. "stopped": no answer
    at all, its first token the end of generation (``FirstToken.END``: nothing forced a first token,
    or a server ignored min_tokens); a model that would answer if made to start, not one that
    answered blank. "empty": a blank output (whitespace; or nothing, in records that do not say
    why). "hedged": every answer and a distractor's value too (not right). "distractor": a
    distractor's value and not every answer (it answered a look-alike). "partial": some but not all
    references found (RULER's fractional "all" metric), a different miss from finding none.
    "refusal": declined or said it found nothing (``REFUSAL_PHRASES``). "wrong_answer": the rest.
    """
    if record.error is not None:
        return "error"
    if record.score >= 1.0:
        return None
    if record.finish_reason == THINKING:
        return "still_thinking"
    if record.beyond_window:
        return "beyond_window"
    if not record.output.strip():
        return "stopped" if record.first_token == FirstToken.END else "empty"
    if record.lured:
        return "hedged" if set(record.matched) >= set(record.answers) else "distractor"
    if record.score > 0.0:
        return "partial"
    return "refusal" if declines(record.output) else "wrong_answer"


def lowered(text: str) -> str:
    """Lower-case, typographic apostrophes as plain ones: how an output is read for its phrases."""
    return text.lower().replace("\u2019", "'")


def declines(output: str) -> bool:
    """Whether ``output`` declines or says it found nothing: holds one of ``REFUSAL_PHRASES``."""
    said = lowered(output)
    return any(phrase in said for phrase in REFUSAL_PHRASES)


def failure_counts(records: Iterable[SampleRecord]) -> dict[str | None, int]:
    """How many samples fail by each of ``FAILURE_KINDS`` (0 where none does), and under None how
    many are fully right."""
    counts = Counter(failure_kind(r) for r in records)
    return {kind: counts[kind] for kind in (None, *FAILURE_KINDS)}


def hedged_right(record: SampleRecord) -> bool:
    """Right by its task's metric though it also names a look-alike's value (``lured``): RULER's
    multi-key answers that list other keys' values beside the asked one. RULER scores by containment
    and counts them right, and so does fathom, to stay comparable with RULER's published scores (NIAH's
    own distractors score such an answer 0: "hedged"); they are flagged beside the failures instead."""
    return record.error is None and record.score >= 1.0 and bool(record.lured)


def rejected_lures(record: SampleRecord) -> tuple[str, ...]:
    """The distractors' values that the answer names only to reject them: named (``named_in``) but
    not committed to (``lured``; ``fathom.scoring.committed_lures``). None in records graded before
    that reading, whose ``lured`` holds every value named."""
    pairs = zip(record.needle_values, record.needle_roles, strict=True)
    lures = [value for value, role in pairs if role in DISTRACTOR_ROLES]
    return tuple(value for value in named_in(record.output, lures) if value not in record.lured)


def rejected_lure(record: SampleRecord) -> bool:
    """Right, and naming a look-alike's value only to reject it (``REJECTED``)."""
    return record.error is None and record.score >= 1.0 and bool(rejected_lures(record))
