"""Needle in a haystack: one needle at a chosen depth of a haystack of a chosen length."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from fathom.errors import SpecError
from fathom.prompts import PromptBuilder, PromptText
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.needles import make_needle, needle_rng
from fathom.prompts.templates import resolve_template
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Document, Sample
from fathom.tasks.perplexity import PERPLEXITY, DocumentBuilder

# Bump when anything below or in the needle generators changes the prompts.
NIAH_VERSION = 1
NIAH_TEXT = PromptText(
    before=(
        "Below is a long document. Somewhere in it is a sentence that answers the question that "
        "follows the document. Read the whole document carefully.\n\n<document>\n"
    ),
    # The closing tag opens with a space: a newline would merge with a full stop ending the
    # haystack in BPE vocabularies (".\n" is one token), and the count would drift.
    after=" </document>\n\nQuestion: {question}\nAnswer in one short sentence, using only the document.",
    answer_prefix="Answer:",
)


class NiahTask:
    name = "niah"

    def __init__(self, spec: RunSpec, tokenizer: Tokenizer) -> None:
        if not spec.depths:
            raise SpecError("no depths given: pass a count (--depths 11) or a list (--depths 0,0.5,1)")
        self.spec = spec
        self.needle_kind = spec.needle or "number"
        self.scoring = spec.scoring or "contains"
        self.max_new_tokens = spec.max_new_tokens or 32
        self.corpus = load_corpus(spec.corpus or "prose")
        self.template = resolve_template(spec.template, tokenizer)
        text = PromptText(NIAH_TEXT.before, NIAH_TEXT.after, NIAH_TEXT.answer_prefix, spec.system_prompt)
        self.builder = PromptBuilder(tokenizer, self.template, text, tokenize_corpus(self.corpus, tokenizer))
        # With --perplexity, documents of the same corpus at the same lengths, k per length.
        self.documents = DocumentBuilder(self.corpus, tokenizer, spec.seed) if spec.perplexity else None

    def cells(self) -> Iterator[Cell]:
        # Length-major, then depth: consecutive prompts share the haystack up to the earlier needle.
        spec = self.spec
        for length in spec.lengths:
            for depth in spec.depths:
                yield from (Cell(self.name, length, depth, index) for index in range(spec.samples))
            if self.documents is not None:
                yield from self.documents.cells((length,), spec.samples)

    def prepare(self, cell: Cell) -> Sample | Document:
        if cell.task == PERPLEXITY and self.documents is not None:
            return self.documents.build(cell)
        rng = needle_rng(self.spec.seed, cell.task, cell.length, cell.depth, cell.sample)
        needle = make_needle(self.needle_kind, rng)
        assert cell.depth is not None  # NIAH cells always have one
        prompt = self.builder.build(cell.length, cell.depth, needle)
        return Sample.of_needle(cell, prompt, self.builder.text, needle, self.scoring, self.max_new_tokens)

    def identity(self) -> dict[str, Any]:
        text = repr(NIAH_TEXT).encode()
        documents = {} if self.documents is None else {"perplexity": self.documents.identity()}
        return {
            **documents,
            "task": self.name,
            "version": NIAH_VERSION,
            "corpus": self.corpus.name,
            "corpus_sha256": self.corpus.sha256,
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "prompt_text_sha256": hashlib.sha256(text).hexdigest(),
        }
