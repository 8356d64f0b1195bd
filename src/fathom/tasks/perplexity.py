"""Perplexity documents: stretches of a haystack corpus whose every token is scored in context.

A document of length L is the model's BOS (where it has one) and then L corpus tokens from a
sentence boundary on, without any template: plain text, as perplexity is measured. Sample 0 starts
where every NIAH haystack of the corpus starts, so it is the retrieval sweep's own haystack; the
others start at seeded sentence boundaries further in. A document never wraps around the corpus:
repeated text is predicted by copying, which would flatter the perplexity of long documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from fathom.errors import SpecError
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.haystack.corpora import Corpus
from fathom.prompts.needles import needle_rng
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Document

PERPLEXITY = "perplexity"
# Bump when the documents below change.
PERPLEXITY_VERSION = 1


class DocumentBuilder:
    """Documents of one corpus in one tokenizer's tokens."""

    def __init__(self, corpus: Corpus, tokenizer: Tokenizer, seed: int) -> None:
        self.corpus, self.seed = corpus, seed
        self.tokens = tokenize_corpus(corpus, tokenizer)
        self.bos = tokenizer.bos_id

    def cells(self, lengths: tuple[int, ...], samples: int) -> list[Cell]:
        return [Cell(PERPLEXITY, length, None, sample) for length in lengths for sample in range(samples)]

    def build(self, cell: Cell) -> Document:
        body = cell.length - (self.bos is not None)
        available = len(self.tokens.ids)
        if body < 2:
            raise SpecError(f"a perplexity document needs at least 2 tokens, not a length of {cell.length}")
        if body > available:
            raise SpecError(
                f"corpus '{self.corpus.name}' holds {available} tokens, fewer than a {cell.length}-token "
                "perplexity document needs, and repeating it would let the model copy: use a larger "
                "corpus (--corpus essays, or dir:PATH) or shorter lengths"
            )
        offset = self._offset(cell, available - body)
        ids = self.tokens.ids[offset : offset + body]
        if self.bos is not None:
            ids = np.concatenate([np.asarray([self.bos], dtype=np.int32), ids])
        return Document(cell, ids, self.corpus.name, offset)

    def _offset(self, cell: Cell, last: int) -> int:
        """Sample 0 at the corpus's start, like the haystacks; others at a seeded sentence start."""
        if cell.sample == 0:
            return 0
        starts = self.tokens.boundaries[: np.searchsorted(self.tokens.boundaries, last, side="right")]
        rng = needle_rng(self.seed, PERPLEXITY, cell.length, cell.sample)
        return int(starts[rng.randrange(len(starts))])

    def identity(self) -> dict[str, Any]:
        corpus = self.corpus
        return {"version": PERPLEXITY_VERSION, "corpus": corpus.name, "corpus_sha256": corpus.sha256}


class PerplexityTask:
    """``fathom run perplexity``: ``samples`` documents per length, nothing generated."""

    name = PERPLEXITY

    def __init__(self, spec: RunSpec, tokenizer: Tokenizer) -> None:
        self.spec = spec
        self.documents = DocumentBuilder(load_corpus(spec.corpus or "prose"), tokenizer, spec.seed)

    def cells(self) -> Iterator[Cell]:
        return iter(self.documents.cells(self.spec.lengths, self.spec.samples))

    def prepare(self, cell: Cell) -> Document:
        return self.documents.build(cell)

    def identity(self) -> dict[str, Any]:
        return {"task": self.name, **self.documents.identity()}
