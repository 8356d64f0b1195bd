"""Haystack hygiene: a needle must be the only place its answer and its subject appear.

A corpus can already say what a needle says: a 7-digit number in a code haystack, a made-up town
that happens to be a word of the text, a landmark a low-overlap question leads to. A sample whose
haystack states its answer (or names its key, or a distractor's value) measures nothing. Each
sample's needles are checked against the whole corpus its haystack is cut from (stricter than its
window, and the same for every window) and redrawn, with the reason recorded, when the corpus
already holds one of them. Low-overlap needles are the exception: their places are famous cities
that any long corpus names somewhere, so they are checked against the windows the sample's
haystacks are cut from, case and all (``window_mentions``; ``tasks/niah.py``). The needle's likeness
to the corpus (the highest content-word Jaccard index between it and any one sentence or line) is
recorded beside each sample, so a needle that reads like its haystack is seen. The corpus's words
are indexed once per corpus text and cached on disk (``haystack/words.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from fathom.prompts.haystack.words import WORD, WordIndex, word_index
from fathom.prompts.latent import content_words

# Redraws before a sample is refused: a corpus that holds every fresh draw is no haystack for it.
MAX_REDRAWS = 20
# Words in more units than this (a template's "number", "special") are scored once per set of them
# and cached; the rest are scored per needle. Only the speed depends on it, never the result.
_COMMON = 256


class HaystackCheck:
    """What a corpus already says, for checking needles against it (case-insensitively, whole
    words only: "Thundmere" is not in "Thundmeres")."""

    def __init__(self, text: str) -> None:
        self._original = text

    @functools.cached_property
    def _text(self) -> str:
        return self._original.lower()

    @functools.cached_property
    def _index(self) -> WordIndex:
        """The corpus's words, read from the cache or made, on the first question: a run that never
        asks pays nothing."""
        return word_index(self._original)

    def similarity(self, text: str) -> float:
        """The highest Jaccard index between the content words of ``text`` and of one sentence (or
        line) of the corpus: 1.0 when the corpus holds the needle's words in one sentence, near 0
        for a needle unlike anything in it."""
        words = content_words(text)
        index = self._index
        postings = {word: at for word in words if (at := index.holders(word)) is not None}
        common = frozenset(word for word, at in postings.items() if len(at) > _COMMON)
        rare = [at for word, at in postings.items() if word not in common]
        # Not one count per unit of the corpus (a scan of 100k units per needle): the units the
        # common words reach are scored counting those words alone (cached), which is the true index
        # of those no rare word reaches and too low for the others; the units a rare word reaches
        # are then scored counting every word they share. Each unit's true index is among the two
        # and neither exceeds it, so the best is the definition's, to the bit.
        best = self._best_of(common, len(words)) if common else 0.0
        if rare:
            units, counts = np.unique(np.concatenate(rare), return_counts=True)
            for word in common:
                holders = postings[word]
                at = np.minimum(np.searchsorted(holders, units), len(holders) - 1)
                counts += holders[at] == units
            best = max(best, _jaccard(counts, len(words), index.sizes[units]))
        return best

    @functools.cached_property
    def _best_of(self) -> Callable[[frozenset[str], int], float]:
        """The best index over the units that some of ``words`` reach, counting those words only,
        for a needle of ``size`` content words: cached, since a sweep's needles share their common
        words (a template's "special", "magic", "number") and differ in rare ones."""

        @functools.lru_cache(maxsize=1024)
        def best_of(words: frozenset[str], size: int) -> float:
            index = self._index
            holders = [at for word in words if (at := index.holders(word)) is not None]
            units, counts = np.unique(np.concatenate(holders), return_counts=True)
            return _jaccard(counts, size, index.sizes[units])

        return best_of

    def mentions(self, phrases: Iterable[str]) -> tuple[str, ...]:
        """The phrases the corpus holds as whole words, in the order given."""
        return tuple(phrase for phrase in phrases if self._holds(phrase))

    def _holds(self, phrase: str) -> bool:
        lowered = phrase.lower().strip()
        # Most phrases hold a word the corpus never uses (a random number, a made-up name): no scan.
        return self._index.holds_words(WORD.findall(lowered)) and _whole_words(self._text, lowered)


def window_mentions(text: str, phrases: Iterable[str]) -> tuple[str, ...]:
    """The phrases ``text`` holds as whole words, case and all, in the order given: a sample's window
    checked for place names, where "Nice" and "Split" are cities and "nice" and "split" are words."""
    return tuple(phrase for phrase in phrases if _whole_words(text, phrase))


def _whole_words(text: str, phrase: str) -> bool:
    """Whether ``text`` holds ``phrase`` with no word going on at either end."""
    # str.find, then the edges by hand: a regular expression with look-arounds is some 100x slower
    # over a corpus of megabytes.
    at = text.find(phrase)
    while at >= 0:
        end = at + len(phrase)
        if not _word_edge(text, at - 1) and not _word_edge(text, end):
            return True
        at = text.find(phrase, at + 1)
    return False


def _jaccard(shared: NDArray[np.int64], size: int, sizes: NDArray[np.int64]) -> float:
    """The highest Jaccard index of a needle of ``size`` content words and units of ``sizes`` with
    which it shares ``shared`` words."""
    return float((shared / (size + sizes - shared)).max())


def _word_edge(text: str, index: int) -> bool:
    """Whether the character at ``index`` (inside ``text``) continues a word."""
    return 0 <= index < len(text) and (text[index].isalnum() or text[index] == "_")


@functools.lru_cache(maxsize=8)
def haystack_check(text: str) -> HaystackCheck:
    """The check of a corpus's text, made once per process: runs (and tests) over the same corpus
    share its word index."""
    return HaystackCheck(text)
