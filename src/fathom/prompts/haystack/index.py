"""A corpus tokenised once per tokenizer, with its unit boundaries (sentence or line starts),
cached on disk.

Every prompt is then built by slicing this array and splicing in the needle's ids: the corpus is
never re-read or re-tokenised per cell. A mixture is not cached: it is interleaved from its
components' cached indexes in milliseconds.
"""

from __future__ import annotations

import logging
import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np
from numpy.typing import NDArray

from fathom.prompts.haystack import entry, mixture
from fathom.prompts.haystack.corpora import Corpus
from fathom.prompts.haystack.files import Units
from fathom.prompts.tokenizers import Tokenizer, vocabulary_size
from fathom.safe_files import replacing

INDEX_VERSION = entry.FORMAT
_LOG = logging.getLogger(__name__)
_ENDS_SENTENCE = re.compile(r"[.!?][\"'\u201d\u2019)]?$")
T = TypeVar("T")

Ids = NDArray[np.int32]
Positions = NDArray[np.int64]


def cache_dir() -> Path:
    """Where tokenised corpora live: $FATHOM_CACHE_DIR, else ~/.cache/fathom."""
    default = Path.home() / ".cache" / "fathom"
    return Path(os.environ.get("FATHOM_CACHE_DIR", default)) / "corpora"


@dataclass(frozen=True, eq=False)
class TokenizedCorpus:
    """One unit of a corpus as ids (it starts at a unit boundary) and its unit starts; for a
    mixture, also the name of each component and each token's component."""

    ids: Ids
    boundaries: Positions  # sorted token indices at which a sentence or line starts; 0 is one
    corpus_sha256: str
    tokenizer_identity: str
    domains: tuple[str, ...] = ()
    domain_of: NDArray[np.uint8] | None = None  # an index into domains per token; None for one corpus

    def unit_start(self, start: int) -> int:
        """The unit boundary at or after token ``start`` (taken modulo the corpus), wrapping around
        to the corpus's start past its last boundary."""
        start %= len(self.ids)
        i = int(np.searchsorted(self.boundaries, start))
        return int(self.boundaries[i]) if i < len(self.boundaries) else 0

    def random_start(self, rng: random.Random) -> int:
        """A unit boundary drawn uniformly from all of them: a sample's own haystack offset, to be
        recorded, for ``window``."""
        return int(self.boundaries[rng.randrange(len(self.boundaries))])

    def window(self, n: int, start: int = 0) -> tuple[Ids, Positions]:
        """``n`` tokens from the unit boundary at or after ``start`` on, wrapping around the corpus
        as often as needed, and the unit boundaries strictly inside them."""
        unit = len(self.ids)
        first = self.unit_start(start)
        # Copied a slice at a time, and the boundaries found by bisection where the window does not
        # wrap: an index per token (``np.arange(...) % unit``) and a pass over every boundary cost a
        # 128k window 0.33 ms, more than half of a plain NIAH prompt's building; this, 0.01 ms.
        if first + n <= unit:
            low, high = np.searchsorted(self.boundaries, [first + 1, first + n])
            return self.ids[first : first + n].copy(), self.boundaries[low:high] - first
        chunks = [self.ids[first:]]
        for covered in range(len(chunks[0]), n, unit):
            chunks.append(self.ids[: n - covered])
        ids = np.concatenate(chunks)
        i = int(np.searchsorted(self.boundaries, first))
        rotated = np.concatenate([self.boundaries[i:] - first, self.boundaries[:i] + (unit - first)])
        repeats = -(-n // unit)
        starts = (rotated[None, :] + unit * np.arange(repeats)[:, None]).ravel()
        return ids, starts[(starts > 0) & (starts < n)]


def unit_starts(tokenizer: Tokenizer, ids: Ids, units: Units = "sentence") -> Positions:
    """Token indices where a unit starts: for sentences, a token opening with whitespace that
    follows one ending a sentence; for lines, any token that follows one ending with a newline.

    Each distinct token is decoded once, so this is linear in the corpus with a small constant.
    """
    unique = np.unique(ids)
    texts = [tokenizer.decode([int(t)]) for t in unique]
    if units == "line":
        opens = np.ones(len(texts), dtype=bool)
        closes = np.array([t.endswith("\n") for t in texts], dtype=bool)
    else:
        opens = np.array([t[:1].isspace() for t in texts], dtype=bool)
        closes = np.array([bool(_ENDS_SENTENCE.search(t)) for t in texts], dtype=bool)
    position = np.searchsorted(unique, ids)
    follows_end = closes[position[:-1]] & opens[position[1:]]
    starts = np.flatnonzero(follows_end).astype(np.int64) + 1
    return np.concatenate([np.zeros(1, dtype=np.int64), starts])


def _build(corpus: Corpus, tokenizer: Tokenizer) -> TokenizedCorpus:
    # The leading space makes every repetition of a sentence unit start like any other sentence;
    # lines need none: the newline that ends the corpus ends the line before its repetition.
    prefix = " " if corpus.units == "sentence" else ""
    ids = np.asarray(tokenizer.encode(prefix + corpus.text), dtype=np.int32)
    return TokenizedCorpus(ids, unit_starts(tokenizer, ids, corpus.units), corpus.sha256, tokenizer.identity)


def _mix(corpus: Corpus, tokenizer: Tokenizer) -> TokenizedCorpus:
    streams = [(tokenize_corpus(c, tokenizer), c.units) for c, _ in corpus.components]
    ids, boundaries, domain_of = mixture.interleave(
        [(part.ids, part.boundaries, units) for part, units in streams],
        [weight for _, weight in corpus.components],
        mixture.line_break(tokenizer),
    )
    names = tuple(c.name for c, _ in corpus.components)
    return TokenizedCorpus(ids, boundaries, corpus.sha256, tokenizer.identity, names, domain_of)


def _cache_path(corpus: Corpus, tokenizer: Tokenizer) -> Path:
    name = f"v{INDEX_VERSION}-{corpus.sha256[:16]}-{tokenizer.identity[:16]}.npz"
    return cache_dir() / name


_MEMORY: dict[tuple[str, str], TokenizedCorpus] = {}
_UNWRITABLE: set[Path] = set()  # cache folders already warned about, to warn once per folder


def tokenize_corpus(corpus: Corpus, tokenizer: Tokenizer) -> TokenizedCorpus:
    """The tokenised corpus, from memory, from the disk cache, or built once and cached."""
    key = (corpus.sha256, tokenizer.identity)
    if key in _MEMORY:
        return _MEMORY[key]
    if corpus.components:
        _MEMORY[key] = _mix(corpus, tokenizer)
        return _MEMORY[key]
    path = _cache_path(corpus, tokenizer)
    maker = _maker(corpus, tokenizer)
    indexed = _load(path, maker)
    if indexed is None:
        indexed = _build(corpus, tokenizer)
        _save(path, indexed, maker)
    _MEMORY[key] = indexed
    return indexed


def _maker(corpus: Corpus, tokenizer: Tokenizer) -> entry.Maker:
    # A bound on the tokens, for refusing an oversized entry unread: generous, since a normaliser
    # may lengthen text, but no tokenizer gives four tokens to a byte.
    most_tokens = 4 * len(corpus.text.encode("utf-8")) + 1024
    return entry.Maker(corpus.sha256, most_tokens, tokenizer.identity, vocabulary_size(tokenizer))


def _load(path: Path, maker: entry.Maker) -> TokenizedCorpus | None:
    """The cached tokenised corpus, or None where there is none or it must not be used."""
    arrays = load_entry(path, lambda data: entry.read(data, maker), "tokenised again")
    if arrays is None:
        return None
    return TokenizedCorpus(*arrays, maker.corpus_sha256, maker.tokenizer_identity)


def _save(path: Path, indexed: TokenizedCorpus, maker: entry.Maker) -> None:
    """Cache the tokenised corpus, for the runs after this one."""
    save_entry(path, lambda handle: entry.write(handle, maker, indexed.ids, indexed.boundaries))


def load_entry(path: Path, read: Callable[[Any], T], redone: str) -> T | None:
    """``read`` of the cache entry at ``path``, or None where there is none or it must not be used:
    an entry that is damaged (truncated, empty, not an npz), malformed or not what the run asks for
    is logged (its corpus is then ``redone``: "tokenised again") and rebuilt, and written over. A
    folder in its place is left to ``save_entry`` to warn about."""
    if not path.is_file():
        return None
    try:
        return entry.load(path, read)
    except entry.UnusableEntry as exc:
        _LOG.warning("the corpus cache entry %s %s: it is %s and the entry written over", path, exc, redone)
        return None


def save_entry(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write an entry atomically: a run killed mid-write must not leave a corrupt cache behind. A
    cache that cannot be written (a read-only folder, a full disk) is skipped with one warning."""
    try:
        with replacing(path) as handle:  # a new file renamed over the entry, never through a link
            write(handle)
    except OSError as exc:
        if path.parent not in _UNWRITABLE:
            _UNWRITABLE.add(path.parent)
            _LOG.warning(
                "cannot write the corpus cache %s (%s): corpora are tokenised and indexed anew in each "
                "run; set FATHOM_CACHE_DIR to a writable folder",
                path,
                exc.strerror or exc,
            )
