"""Hygiene for low-overlap needles against the haystack a sample actually reads.

A low-overlap question names a famous place (Paris, Rome, New York City); a long corpus names most of
them somewhere, so checking the whole corpus dropped half the one-hop items and two thirds of the
two-hop ones and left the obscure places. Here a sample is checked against its *window*: ``length``
tokens of its corpus from the sample's start, which hold its haystack (a little more: the frame's
and the needles' tokens are not haystack). A window is read once per corpus, start and length, so a
run whose samples share the corpus's start decodes one per length.

Its places are matched whole-word and case-sensitively ("Nice" is a city, "nice" a word):

- the exact phrase of any place of a gold item's chain (anchor, city, country) in the window of
  *any* of the run's corpora redraws the sample's needles for every corpus alike, so the domains of
  a ``--corpus code,prose`` run hold the same items and characters, cell by cell;
- a near neighbour of them (``prompts/neighbours.py``: "Washington" for "Washington, D.C.",
  "Parisian" for "Paris") in the sample's own window is recorded (``literal_neighbours``), not
  redrawn: an accidental literal distractor a reader can set apart.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from fathom.prompts.haystack.index import TokenizedCorpus
from fathom.prompts.hygiene import window_mentions
from fathom.prompts.needle_sets import NeedleSet
from fathom.prompts.neighbours import neighbours
from fathom.prompts.tokenizers import Tokenizer
from fathom.tasks import probe

# Windows kept decoded: a sweep's lengths at one start, or the latest samples' own starts.
_WINDOWS = 32


class Windows:
    """The texts of a task's sample windows, each decoded once, the latest ``_WINDOWS`` kept."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        @functools.lru_cache(maxsize=_WINDOWS)
        def text(corpus: TokenizedCorpus, length: int, start: int) -> str:
            """``length`` tokens of ``corpus`` from the unit boundary at or after ``start``, as text."""
            return tokenizer.decode(corpus.window(length, start)[0].tolist())

        self.text = text


def held_places(needles: NeedleSet, windows: Iterable[str]) -> tuple[str, ...]:
    """The places of the gold items' chains (``subjects``) that any of ``windows`` names, each once."""
    return tuple(
        dict.fromkeys(place for text in windows for place in window_mentions(text, needles.subjects))
    )


def literal_neighbours(needles: NeedleSet, window: str) -> tuple[str, ...]:
    """The near neighbours of the gold items' places that ``window`` names, each once, in the order
    of the items."""
    candidates = dict.fromkeys(
        name for item_id in probe.items_of(needles.keys) for name in neighbours(probe.item(item_id))
    )
    return window_mentions(window, candidates)
