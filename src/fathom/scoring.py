"""Deterministic graders, the built-in scoring methods (``fathom.registry`` finds them by name,
with plugins'). All compare case-insensitively and record which references matched.

- ``contains``: 1 if every reference occurs in the output, else 0 (the needle test's grader).
- ``exact``: 1 if the output, with or without an answer prefix ("The answer is", "Answer:"), stripped
  of markdown emphasis, quotes and end punctuation (``extract_answer``), equals a reference; a longer
  output that merely starts or ends with it is 0.
- ``all``: the fraction of references that occur (RULER's string_match_all).
- ``any``: 1 if any reference occurs (RULER's string_match_part).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fathom.records import Score

# An answer prefix: "The answer is", "Answer:", "The final answer is -", "My answer:".
_PREFIX = re.compile(
    r"^\s*(?:(?:the|my)\s+)?(?:final\s+)?answer\b\s*(?:is\b)?\s*[:\-\u2013]?\s*", re.IGNORECASE
)
# What a chatty answer wraps its answer in, on either side: whitespace, quotes (typographic ones
# too), markdown emphasis and code (**x**, *x*, _x_, `x`) and end punctuation. Taken off one by
# one, not as pairs, so an emphasis that also covers the prefix ("**Answer:** x") goes as well.
_EDGES = " \t\r\n\"'`*_.,;:!?\u201c\u201d\u2018\u2019\u00ab\u00bb"


def found_in(output: str, phrases: Sequence[str]) -> tuple[str, ...]:
    """The phrases that occur in ``output``, case-insensitively, in the order given."""
    lowered = output.lower()
    return tuple(ref for ref in phrases if ref.lower() in lowered)


def _contains(output: str, references: Sequence[str]) -> Score:
    found = found_in(output, references)
    return Score(float(len(found) == len(references)), found, "contains")


def extract_answer(output: str) -> str:
    """The answer a chatty output gives: without its wrapping (``_EDGES``), a leading answer prefix
    (taken once: "Answer: Answer Island" is "Answer Island"), and the wrapping inside that prefix."""
    return _PREFIX.sub("", output.strip(_EDGES), count=1).strip(_EDGES)


def _exact(output: str, references: Sequence[str]) -> Score:
    # The output unwrapped but with its prefix too: a reference may itself start with "answer"
    # ("Answer Island"), which the prefix would eat.
    candidates = (output.strip(_EDGES), extract_answer(output))
    said = [candidate.lower() for candidate in candidates]
    keys = {ref: ref.strip(_EDGES).lower() for ref in references}
    found = tuple(ref for ref in references if keys[ref] in said)
    # The text compared, for the record: the one that matched (the unwrapped output first), else the
    # extracted answer; None where that is just the output, so plain answers record nothing more.
    matched = {keys[ref] for ref in found}
    compared = next((c for c, low in zip(candidates, said, strict=True) if low in matched), candidates[1])
    extracted = None if compared == output.strip() else compared
    return Score(float(bool(found)), found, "exact", extracted)


def _all(output: str, references: Sequence[str]) -> Score:
    found = found_in(output, references)
    return Score(len(found) / len(references), found, "all")


def _any(output: str, references: Sequence[str]) -> Score:
    found = found_in(output, references)
    return Score(float(bool(found)), found, "any")


class Grader(Protocol):
    """A scoring method: the output and the references (at least one) in, a Score out, whose
    ``method`` names it in the record."""

    def __call__(self, output: str, references: Sequence[str], /) -> Score: ...


@dataclass(frozen=True)
class ScoringEntry:
    """A scoring method as the registry holds it (``--scoring NAME``): fathom's own below, a
    plugin's through the ``fathom.scorers`` entry-point group."""

    grade: Grader
    summary: str


# Bumped when a method grades the same answer otherwise; a run that names a versioned method records
# its version, so a run graded the old way does not resume under the new (2: exact takes the answer
# out of a chatty output).
SCORING_VERSIONS = {"exact": 2}

SCORERS: dict[str, ScoringEntry] = {
    "contains": ScoringEntry(_contains, "every reference occurs in the output (niah's default)"),
    "exact": ScoringEntry(_exact, "the output, without an answer prefix, is a reference"),
    "all": ScoringEntry(_all, "the fraction of references that occur (RULER's string_match_all)"),
    "any": ScoringEntry(_any, "1 if any reference occurs (RULER's string_match_part)"),
}


def grade(entry: ScoringEntry, output: str, references: Sequence[str]) -> Score:
    """Grade ``output`` against ``references`` (at least one) with the scoring method."""
    if not references:
        raise ValueError("a sample needs at least one reference answer to be scored")
    return entry.grade(output, references)
