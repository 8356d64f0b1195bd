"""Haystacks: named corpora of several domains, folders and mixtures, tokenised once per tokenizer,
with their unit boundaries (sentences for prose, lines for code)."""

from fathom.prompts.haystack.catalogue import CatalogueEntry, CorpusInfo, corpus_catalogue, corpus_info
from fathom.prompts.haystack.corpora import Corpus, load_corpus
from fathom.prompts.haystack.index import TokenizedCorpus, tokenize_corpus

__all__ = [
    "CatalogueEntry",
    "Corpus",
    "CorpusInfo",
    "TokenizedCorpus",
    "corpus_catalogue",
    "corpus_info",
    "load_corpus",
    "tokenize_corpus",
]
