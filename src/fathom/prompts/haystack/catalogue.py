"""What a run records of its haystack corpus, and the list of corpora fathom knows by name."""

from __future__ import annotations

from dataclasses import dataclass

from fathom.errors import CorpusError
from fathom.prompts.haystack.corpora import NAMED_CORPORA, Corpus, load_corpus
from fathom.prompts.haystack.index import TokenizedCorpus, tokenize_corpus
from fathom.prompts.tokenizers import Tokenizer


@dataclass(frozen=True)
class CorpusInfo:
    """A corpus as a manifest records it: ``units`` is sentence, line or (for a mixture) mixture;
    ``tokens`` counts the tokenised index (it differs by tokenizer; None where none was given)."""

    name: str
    source: str
    licence: str
    sha256: str
    units: str
    tokens: int | None = None


@dataclass(frozen=True)
class CatalogueEntry:
    """A corpus fathom knows by name: ``info`` where it can be read here, else ``missing`` says
    what to install."""

    name: str
    about: str
    licence: str
    info: CorpusInfo | None
    missing: str | None


def corpus_info(corpus: Corpus, indexed: TokenizedCorpus | None = None) -> CorpusInfo:
    tokens = None if indexed is None else len(indexed.ids)
    units = "mixture" if corpus.components else corpus.units
    return CorpusInfo(corpus.name, corpus.source, corpus.licence, corpus.sha256, units, tokens)


def corpus_catalogue(tokenizer: Tokenizer | None = None) -> tuple[CatalogueEntry, ...]:
    """Every named corpus, read here where it can be; with a tokenizer, its size in that
    tokenizer's tokens (tokenising each once, then from the cache)."""
    entries = []
    for name, named in NAMED_CORPORA.items():
        try:
            corpus = load_corpus(name)
        except CorpusError as exc:
            entries.append(CatalogueEntry(name, named.about, named.licence, None, str(exc)))
            continue
        indexed = None if tokenizer is None else tokenize_corpus(corpus, tokenizer)
        entries.append(CatalogueEntry(name, named.about, named.licence, corpus_info(corpus, indexed), None))
    return tuple(entries)
