"""A corpus's words, for checking needles against it (``prompts/hygiene.py``): built once per corpus
text and cached on disk beside the tokenised corpora, so a run reads it rather than making it again.

The index holds the corpus's words (lower-cased word tokens), the pairs of words adjacent in it, and
for each content word (``prompts/latent.content_words``) the units (sentences or lines) that hold it,
with each unit's number of content words. On disk it is an entry of the corpus cache
(``haystack/entry.py``): checked against the sha256 of the text it was made from, its format and the
hash of its arrays, then for values an index could not hold; a bad or foreign entry is a warning and
a rebuild. Building it for the bundled prose corpus (2.7 MB) took 0.44-0.62 CPU s, reading it back
0.02 (the 2-core machine at a load of 7).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fathom.prompts.haystack import entry, index
from fathom.prompts.latent import content_words

# Raised whenever the index's arrays or how they are made change, content_words included (a test
# pins its rules): an entry of another format is never read, its file name carrying the format too.
FORMAT = 1
UNIT_END = re.compile(r"(?<=[.!?])\s+|\n+")
WORD = re.compile(r"\w+")
_MADE_FROM = "corpus text or fathom format"
_SEPARATOR = "\n"  # between the words stored as one text: no word token holds it

Positions = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class WordIndex:
    """What a corpus says, word by word. ``words`` and ``content`` are the corpus's words and content
    words, each once; ``pairs`` the adjacent pairs of words, each coded ``first * len(words) + second``
    by the words' places and sorted; a content word's units are ``units[offsets[i]:offsets[i + 1]]``,
    ascending, for the word at place ``i`` of ``content``; ``sizes`` holds each unit's number of
    content words."""

    words: tuple[str, ...]
    pairs: Positions
    content: tuple[str, ...]
    offsets: Positions
    units: Positions
    sizes: Positions

    @cached_property
    def _places(self) -> dict[str, int]:
        return {word: place for place, word in enumerate(self.words)}

    @cached_property
    def _content_places(self) -> dict[str, int]:
        return {word: place for place, word in enumerate(self.content)}

    def holds_words(self, words: Sequence[str]) -> bool:
        """Whether every one of ``words`` is in the corpus, and each two adjacent in ``words`` are
        adjacent somewhere in it: a phrase that fails this is not in the corpus (no scan needed)."""
        places = [self._places[word] for word in words if word in self._places]
        if not words or len(places) != len(words):
            return False
        codes = np.array(
            [first * len(self.words) + second for first, second in itertools.pairwise(places)], np.int64
        )
        at = np.searchsorted(self.pairs, codes)
        return bool(np.all(at < len(self.pairs))) and bool(np.all(self.pairs[at] == codes))

    def holders(self, word: str) -> Positions | None:
        """The units that hold the content word ``word``, ascending; None for a word none holds."""
        place = self._content_places.get(word)
        return None if place is None else self.units[self.offsets[place] : self.offsets[place + 1]]

    def arrays(self) -> dict[str, NDArray[Any]]:
        """The index as the arrays of its cache entry."""
        return {
            "words": _joined(self.words),
            "pairs": self.pairs,
            "content": _joined(self.content),
            "offsets": self.offsets,
            "units": self.units,
            "sizes": self.sizes,
        }


def build(text: str) -> WordIndex:
    """The index of ``text``, made from it (case-insensitively)."""
    lowered = text.lower()
    places: dict[str, int] = {}
    tokens = np.fromiter((places.setdefault(word, len(places)) for word in WORD.findall(lowered)), np.int64)
    pairs = np.unique(tokens[:-1] * len(places) + tokens[1:])
    units = [content_words(unit) for unit in UNIT_END.split(lowered) if unit.strip()]
    postings: dict[str, list[int]] = {}
    for unit_index, unit in enumerate(units):
        for word in unit:
            postings.setdefault(word, []).append(unit_index)
    counts = np.fromiter(map(len, postings.values()), np.int64, count=len(postings))
    return WordIndex(
        tuple(places),
        pairs,
        tuple(postings),
        np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)]),
        np.fromiter(itertools.chain.from_iterable(postings.values()), np.int64, count=int(counts.sum())),
        np.fromiter(map(len, units), np.int64, count=len(units)),
    )


def word_index(text: str) -> WordIndex:
    """The index of ``text``: from the disk cache, or built and cached."""
    data = text.encode("utf-8")
    sha256 = hashlib.sha256(data).hexdigest()
    path = index.cache_dir() / f"words-v{FORMAT}-{sha256[:16]}.npz"
    made_by = {"format": FORMAT, "text_sha256": sha256}
    # A bound for refusing an oversized entry unread, generous: each array has fewer items (of at
    # most 8 bytes) than the text has bytes, and the words, joined, fewer bytes than the text
    # lower-cased, which lower-casing lengthens by half at most (Ⱥ to ⱥ).
    most = 8 * (len(data) + 1)
    members = {
        name: entry.Member(np.uint8 if name in ("words", "content") else np.int64, most)
        for name in ("words", "pairs", "content", "offsets", "units", "sizes")
    }
    loaded = index.load_entry(path, lambda archive: _read(archive, made_by, members), "indexed again")
    if loaded is not None:
        return loaded
    built = build(text)
    index.save_entry(path, lambda handle: entry.write_arrays(handle, made_by, built.arrays()))
    return built


def _read(archive: Any, made_by: dict[str, Any], members: dict[str, entry.Member]) -> WordIndex:
    arrays = entry.read_arrays(archive, made_by, members, _MADE_FROM)
    words, content = _split(arrays["words"], "words"), _split(arrays["content"], "content words")
    read = WordIndex(words, arrays["pairs"], content, arrays["offsets"], arrays["units"], arrays["sizes"])
    _check_values(read)
    return read


def _joined(words: Sequence[str]) -> NDArray[np.uint8]:
    return np.frombuffer(_SEPARATOR.join(words).encode("utf-8"), dtype=np.uint8)


def _split(data: NDArray[np.uint8], what: str) -> tuple[str, ...]:
    try:
        text = data.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        raise entry.UnusableEntry(f"holds {what} that are not UTF-8") from None
    words = tuple(text.split(_SEPARATOR)) if text else ()
    if len(set(words)) != len(words):
        raise entry.UnusableEntry(f"holds {what} that are not distinct")
    return words


def _check_values(read: WordIndex) -> None:
    """Refuse an index whose arrays do not fit together: one whose hash is its own yet would make a
    lookup fail or read past an array."""
    pairs, offsets, units = read.pairs, read.offsets, read.units
    if pairs.size and (pairs[0] < 0 or pairs[-1] >= len(read.words) ** 2 or np.any(np.diff(pairs) <= 0)):
        raise entry.UnusableEntry("holds word pairs that are not sorted codes of its words")
    if len(offsets) != len(read.content) + 1 or offsets[0] != 0 or offsets[-1] != len(units):
        raise entry.UnusableEntry("holds offsets that do not span its units")
    if np.any(np.diff(offsets) <= 0) or (units.size and (units.min() < 0 or units.max() >= len(read.sizes))):
        raise entry.UnusableEntry("holds units that are not those of its sizes")
    if np.any(read.sizes < 0):
        raise entry.UnusableEntry("holds negative unit sizes")
