"""Haystacks: named corpora, tokenised once per tokenizer, with sentence boundaries."""

from fathom.prompts.haystack.corpora import Corpus, load_corpus
from fathom.prompts.haystack.index import TokenizedCorpus, tokenize_corpus

__all__ = ["Corpus", "TokenizedCorpus", "load_corpus", "tokenize_corpus"]
