"""Deterministic graders, the built-in scoring methods (``fathom.registry`` finds them by name,
with plugins'). All compare case-insensitively and record which references matched.

- ``contains``: 1 if every reference is named in the output, else 0 (the needle test's grader). A
  number is named only as a whole number (``named_in``): 2484111 is not named by "12484111".
- ``ordered``: 1 if every reference is named, in the order given, else 0 (a split code's halves).
- ``exact``: 1 if the output, with or without an answer prefix ("The answer is", "Answer:"), stripped
  of markdown emphasis, quotes and end punctuation (``extract_answer``), equals a reference; a longer
  output that merely starts or ends with it is 0.
- ``all``: the fraction of references that occur (RULER's string_match_all).
- ``any``: 1 if any reference occurs (RULER's string_match_part).
- ``mrcr``: multi-round co-reference's, as OpenAI's MRCR grades: the reference opens with a random
  prefix of ``MRCR_PREFIX_CHARS`` characters; an output that does not open with it (not even after
  whitespace) is 0, else the score is difflib's ``SequenceMatcher`` ratio of the rest against the
  reference's rest (2 x matches / both lengths: 1 for the same text, 0 for nothing in common).

``all`` and ``any`` keep RULER's plain containment, so that RULER's scores stay comparable with its
published ones. ``committed_lures`` reads which look-alike values an answer commits to, and which it
names only to reject them ("2484111, not 9546144").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
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


# A reference all of digits is a number, and is named only as a whole number: a run of digits, its
# thousands perhaps grouped by commas ("2,484,111" names 2484111), touching no other digit and no
# decimal point with digits after it ("12484111" and "2484111.5" are other numbers; "is 2484111." names it).
_DIGITS = re.compile(r"[0-9]+")
_NUMBER = re.compile(r"(?<![0-9])(?<![0-9]\.)(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?![0-9])(?!\.[0-9])")
# A negation that rejects the value it governs; "not sure", "don't know" and the like hedge, not reject.
_NEGATION = re.compile(
    r"\b(?:not|never|rather than|instead of)\b(?!\s+(?:sure|certain|confident))"
    r"|n't\b(?!\s+(?:sure|know|tell|remember))"
)
# A clause: what lies between a sentence's end, a semicolon or colon, a bracket or a line break. A
# comma ends none: "9546144 is X's number, not Y's" is one clause.
_CLAUSE = re.compile(r"[^.!?;:()\[\]{}\n]+")
_WORD = re.compile(r"\w")
Span = tuple[int, int]


def found_in(output: str, phrases: Sequence[str]) -> tuple[str, ...]:
    """The phrases that occur in ``output``, case-insensitively, in the order given (RULER's plain
    containment: "2484111" occurs in "12484111")."""
    lowered = output.lower()
    return tuple(ref for ref in phrases if ref.lower() in lowered)


def _said(output: str) -> str:
    """The output as the readers below read it: lower-case, typographic apostrophes as plain ones
    (each one character for one, so offsets hold)."""
    return output.lower().replace("\u2019", "'")


def _mentions(said: str, phrase: str) -> list[Span]:
    """Where ``said`` (``_said``) names ``phrase``: a number as a whole number (``_NUMBER``), anything
    else as it occurs, case-insensitively."""
    if _DIGITS.fullmatch(phrase):
        return [m.span() for m in _NUMBER.finditer(said) if m.group().replace(",", "") == phrase]
    key = phrase.lower()
    if not key:
        return [(0, 0)]
    spans, start = [], said.find(key)
    while start >= 0:
        spans.append((start, start + len(key)))
        start = said.find(key, start + 1)
    return spans


def named_in(output: str, phrases: Sequence[str]) -> tuple[str, ...]:
    """The phrases that ``output`` names, in the order given: as ``found_in``, but a number only as a
    whole number ("12484111" does not name 2484111; "2,484,111" does)."""
    said = _said(output)
    return tuple(ref for ref in phrases if _mentions(said, ref))


def whole_numbers(output: str) -> tuple[str, ...]:
    """Every whole number ``output`` names, in order, as ``named_in`` reads them ("2,484,111" is
    2484111; "2484111.5" names none), commas dropped."""
    return tuple(m.group().replace(",", "") for m in _NUMBER.finditer(output))


def in_order(output: str, references: Sequence[str]) -> bool:
    """Whether ``output`` names every reference in the order given: a mention of each one after a
    mention of the one before it ("2449 9056", not "9056 2449")."""
    said, after = _said(output), 0
    for ref in references:
        ends = [end for start, end in _mentions(said, ref) if start >= after]
        if not ends:
            return False
        after = min(ends)
    return True


def _rejected(said: str, mentions: Sequence[Span]) -> set[Span]:
    """The mentions (sorted) that a negation in their clause rejects. Each negation rejects one: the
    mention right after it, with nothing but spaces, quotes or marks between ("not 9546144", "rather
    than '9546144'"); else the mention its clause opens with, where no other stands between the two
    ("9546144 is X's number, not Y's"; "9546144 is not the answer")."""
    rejected = set()
    for clause in _CLAUSE.finditer(said):
        low, high = clause.span()
        inside = [m for m in mentions if low <= m[0] and m[1] <= high]
        for cue in _NEGATION.finditer(said, low, high):
            after = next((m for m in inside if m[0] >= cue.end()), None)
            if after is not None and not _WORD.search(said, cue.end(), after[0]):
                rejected.add(after)
                continue
            before = [m for m in inside if m[1] <= cue.start()]
            if len(before) == 1 and not _WORD.search(said, low, before[0][0]):
                rejected.add(before[0])
    return rejected


def committed_lures(output: str, lures: Sequence[str], answers: Sequence[str]) -> tuple[str, ...]:
    """The look-alike values (``lures``) that ``output`` commits to: named (``named_in``) at least once
    where no negation rejects the mention (``_rejected``). "2484111 or 9546144" commits to 9546144;
    "2484111, not 9546144" and "2484111. (9546144 is X's number, not Y's.)" do not. The answers'
    mentions are read beside the lures' (a negation rejects one mention, whichever value it names)."""
    said = _said(output)
    spans = {value: _mentions(said, value) for value in {*lures, *answers}}
    rejected = _rejected(said, sorted(span for found in spans.values() for span in found))
    return tuple(lure for lure in lures if any(span not in rejected for span in spans[lure]))


def _contains(output: str, references: Sequence[str]) -> Score:
    found = named_in(output, references)
    return Score(float(len(found) == len(references)), found, "contains")


def _ordered(output: str, references: Sequence[str]) -> Score:
    found = named_in(output, references)
    return Score(float(len(found) == len(references) and in_order(output, references)), found, "ordered")


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


def _share(output: str, references: Sequence[str]) -> Score:
    found = named_in(output, references)
    return Score(len(found) / len(references), found, "share")


def _any(output: str, references: Sequence[str]) -> Score:
    found = found_in(output, references)
    return Score(float(bool(found)), found, "any")


# The random prefix an MRCR answer opens with: its characters (alphanumerics, drawn per sample).
MRCR_PREFIX_CHARS = 10


def _mrcr(output: str, references: Sequence[str]) -> Score:
    # MRCR's rule as published: the prefix must open the output as it stands (no stripping first),
    # then both are compared without it, character by character, with difflib's defaults as MRCR's
    # (the answer second: past 200 characters its most frequent characters are the junk heuristic's).
    reference = references[0]
    prefix, target = reference[:MRCR_PREFIX_CHARS], reference[MRCR_PREFIX_CHARS:]
    if not output.startswith(prefix):
        return Score(0.0, (), "mrcr")
    ratio = SequenceMatcher(None, output[MRCR_PREFIX_CHARS:], target).ratio()
    return Score(ratio, (reference,) if ratio == 1.0 else (), "mrcr")


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
    # A no-context control answered its question when it scores above this: any credit for a method
    # whose credit must be earned (a name found), more than chance for a similarity, which unrelated
    # texts earn too (``analysis.control.answered``).
    answered_above: float = 0.0


# Bumped when a method grades the same answer otherwise; a run that names a versioned method records
# its version, so a run graded the old way does not resume under the new (2: exact takes the answer
# out of a chatty output; contains 2 names a number only as a whole number; ordered 1, so that a split
# needle's run from before it, graded by contains, does not resume under it).
SCORING_VERSIONS = {"exact": 2, "contains": 2, "ordered": 1, "share": 1}

SCORERS: dict[str, ScoringEntry] = {
    "contains": ScoringEntry(_contains, "every reference is named, numbers whole (niah's default)"),
    "ordered": ScoringEntry(_ordered, "every reference is named, in order (niah's default for split)"),
    "share": ScoringEntry(_share, "the fraction of references named, numbers whole (niah's for several)"),
    "exact": ScoringEntry(_exact, "the output, without an answer prefix, is a reference"),
    "all": ScoringEntry(_all, "the fraction of references that occur (RULER's string_match_all)"),
    "any": ScoringEntry(_any, "1 if any reference occurs (RULER's string_match_part)"),
    # Two unrelated passages of the prose corpus, 30 words each, scored 0.25 (median) and at most 0.43
    # in 200 draws: a control over 0.5 is nearer the piece than any chance text came, so the piece is
    # known without its chat (the control's prefix is in its question, so copying it earns nothing).
    "mrcr": ScoringEntry(
        _mrcr, "the prefix opens the output, then the rest's similarity ratio (MRCR's)", answered_above=0.5
    ),
}


def grade(entry: ScoringEntry, output: str, references: Sequence[str]) -> Score:
    """Grade ``output`` against ``references`` (at least one) with the scoring method."""
    if not references:
        raise ValueError("a sample needs at least one reference answer to be scored")
    return entry.grade(output, references)
