"""The task protocol: which cells a run has, and how one cell becomes a prompt with references."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from fathom.prompts import Prompt, PromptText
from fathom.prompts.haystack.index import Ids
from fathom.records import Cell, Needle


@dataclass(frozen=True, eq=False)
class Sample:
    """A cell made concrete: its prompt, its question and the references that grade the answer."""

    cell: Cell
    prompt: Prompt
    text: PromptText  # the words around the context, for chat backends
    question: str
    answers: tuple[str, ...]
    kind: str  # what is asked for: the needle kind (number, uuid, ...) or the task's own
    # Phrases that mark the evidence in the context; simulated models look for them, real ones ignore them.
    query_keys: tuple[str, ...]
    scoring: str
    max_new_tokens: int
    # The wording that look-alike sentences share with the evidence: a simulated pattern-matcher
    # takes any sentence holding it for the answer.
    patterns: tuple[str, ...] = ()

    @classmethod
    def of_needle(
        cls, cell: Cell, prompt: Prompt, text: PromptText, needle: Needle, scoring: str, max_new_tokens: int
    ) -> Sample:
        keys = (needle.key,)
        return cls(
            cell, prompt, text, needle.question, needle.answers, needle.kind, keys, scoring, max_new_tokens
        )


@dataclass(frozen=True, eq=False)
class Document:
    """A perplexity cell made concrete: a stretch of the corpus whose every token after the first is
    scored given all before it."""

    cell: Cell
    ids: Ids  # the BOS where the model has one, then the corpus tokens
    corpus: str
    corpus_offset: int  # the first corpus token's index in the tokenised corpus


class Task(Protocol):
    """A task: the cells of a run, and how each becomes a Sample (a prompt of its exact length with
    the references that grade it) or a Document (perplexity). Nothing needs to inherit from it."""

    name: str

    def cells(self) -> Iterator[Cell]:
        """Every cell of the run, in the order that lets a prefix cache reuse most tokens; made as
        they are asked for, so a large sweep holds no list of them all."""
        ...

    def prepare(self, cell: Cell) -> Sample | Document: ...

    def identity(self) -> dict[str, Any]:
        """What, beside the spec and tokenizer, decides the prompts (versions, corpus and template
        hashes): two runs with equal identities build byte-identical prompts."""
        ...
