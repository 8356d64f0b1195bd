"""Haystack hygiene: a needle must be the only place its answer and its subject appear.

A corpus can already say what a needle says: a 7-digit number in a code haystack, a made-up town
that happens to be a word of the text, a landmark a low-overlap question leads to. A sample whose
haystack states its answer (or names its key, or a distractor's value) measures nothing. Each
sample's needles are checked against the whole corpus its haystack is cut from (stricter than its
window, and the same for every window) and redrawn, with the reason recorded, when the corpus
already holds one of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_WORD = re.compile(r"\w+")
# Redraws before a sample is refused: a corpus that holds every fresh draw is no haystack for it.
MAX_REDRAWS = 20


class HaystackCheck:
    """What a corpus already says, for checking needles against it (case-insensitively, whole
    words only: "Thundmere" is not in "Thundmeres")."""

    def __init__(self, text: str) -> None:
        self._text = text.lower()
        self._words = frozenset(_WORD.findall(self._text))

    def mentions(self, phrases: Iterable[str]) -> tuple[str, ...]:
        """The phrases the corpus holds as whole words, in the order given."""
        return tuple(phrase for phrase in phrases if self._holds(phrase))

    def _holds(self, phrase: str) -> bool:
        lowered = phrase.lower().strip()
        words = _WORD.findall(lowered)
        # Most phrases hold a word the corpus never uses (a random number, a made-up name): no scan.
        if not words or not all(word in self._words for word in words):
            return False
        # str.find, then the edges by hand: a regular expression with look-arounds is some 100x
        # slower over a corpus of megabytes.
        at = self._text.find(lowered)
        while at >= 0:
            end = at + len(lowered)
            if not _word_edge(self._text, at - 1) and not _word_edge(self._text, end):
                return True
            at = self._text.find(lowered, at + 1)
        return False


def _word_edge(text: str, index: int) -> bool:
    """Whether the character at ``index`` (inside ``text``) continues a word."""
    return 0 <= index < len(text) and (text[index].isalnum() or text[index] == "_")
