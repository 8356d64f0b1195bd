"""Deterministic graders. All compare case-insensitively and record which references matched.

- ``contains``: 1 if every reference occurs in the output, else 0 (the needle test's grader).
- ``exact``: 1 if the output, with or without an answer prefix ("The answer is"), stripped of quotes
  and end punctuation, equals a reference; a longer output that merely starts or ends with it is 0.
- ``all``: the fraction of references that occur (RULER's string_match_all).
- ``any``: 1 if any reference occurs (RULER's string_match_part).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from fathom.errors import SpecError
from fathom.records import Score

_PREFIX = re.compile(r"^\s*(?:the\s+)?answer\b\s*(?:is\b)?\s*[:\-]?\s*", re.IGNORECASE)
_EDGES = " \t\n\"'`.,;:!?"


def _found(output: str, references: Sequence[str]) -> tuple[str, ...]:
    lowered = output.lower()
    return tuple(ref for ref in references if ref.lower() in lowered)


def _contains(output: str, references: Sequence[str]) -> Score:
    found = _found(output, references)
    return Score(float(len(found) == len(references)), found, "contains")


def _exact(output: str, references: Sequence[str]) -> Score:
    # The whole output too: a reference may itself start with "answer" ("Answer Island"), which the
    # prefix would eat.
    answers = {text.strip(_EDGES).lower() for text in (output, _PREFIX.sub("", output))}
    found = tuple(ref for ref in references if ref.strip(_EDGES).lower() in answers)
    return Score(float(bool(found)), found, "exact")


def _all(output: str, references: Sequence[str]) -> Score:
    found = _found(output, references)
    return Score(len(found) / len(references), found, "all")


def _any(output: str, references: Sequence[str]) -> Score:
    found = _found(output, references)
    return Score(float(bool(found)), found, "any")


SCORERS: dict[str, Callable[[str, Sequence[str]], Score]] = {
    "contains": _contains,
    "exact": _exact,
    "all": _all,
    "any": _any,
}


def check_method(method: str) -> None:
    if method not in SCORERS:
        raise SpecError(f"unknown scoring '{method}': use one of {', '.join(SCORERS)}")


def score(method: str, output: str, references: Sequence[str]) -> Score:
    """Grade ``output`` against ``references`` (at least one) with the named method."""
    check_method(method)
    if not references:
        raise ValueError("a sample needs at least one reference answer to be scored")
    return SCORERS[method](output, references)
