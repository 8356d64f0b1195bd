"""Deterministic graders, the built-in scoring methods (``fathom.registry`` finds them by name,
with plugins'). All compare case-insensitively and record which references matched.

- ``contains``: 1 if every reference occurs in the output, else 0 (the needle test's grader).
- ``exact``: 1 if the output, with or without an answer prefix ("The answer is"), stripped of quotes
  and end punctuation, equals a reference; a longer output that merely starts or ends with it is 0.
- ``all``: the fraction of references that occur (RULER's string_match_all).
- ``any``: 1 if any reference occurs (RULER's string_match_part).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fathom.records import Score

_PREFIX = re.compile(r"^\s*(?:the\s+)?answer\b\s*(?:is\b)?\s*[:\-]?\s*", re.IGNORECASE)
_EDGES = " \t\n\"'`.,;:!?"


def found_in(output: str, phrases: Sequence[str]) -> tuple[str, ...]:
    """The phrases that occur in ``output``, case-insensitively, in the order given."""
    lowered = output.lower()
    return tuple(ref for ref in phrases if ref.lower() in lowered)


def _contains(output: str, references: Sequence[str]) -> Score:
    found = found_in(output, references)
    return Score(float(len(found) == len(references)), found, "contains")


def _exact(output: str, references: Sequence[str]) -> Score:
    # The whole output too: a reference may itself start with "answer" ("Answer Island"), which the
    # prefix would eat.
    answers = {text.strip(_EDGES).lower() for text in (output, _PREFIX.sub("", output))}
    found = tuple(ref for ref in references if ref.strip(_EDGES).lower() in answers)
    return Score(float(bool(found)), found, "exact")


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
