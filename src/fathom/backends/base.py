"""The backend protocol: a batch of requests in, one completion per request out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import parse_qsl

from fathom.haystack.index import Ids
from fathom.records import Completion
from fathom.tokenizers import Tokenizer

# What a backend consumes: exact token ids, the prompt's text (re-tokenised by the backend), or chat
# messages that the backend's server puts into its own template.
InputKind = Literal["ids", "text", "chat"]


@dataclass(frozen=True)
class ChatPrompt:
    """The prompt as messages, for chat endpoints; ``prefill`` opens the assistant's answer where
    the backend supports it (the answer prefix)."""

    system: str | None
    user: str
    prefill: str


@dataclass(frozen=True, eq=False)
class Request:
    """One prompt to complete, greedily, with at least one new token.

    ``ids`` is always the exact prompt; ``text`` is set for text backends and ``chat`` for chat
    backends. ``query_keys`` are the phrases that mark the evidence and ``context`` the span of
    ``ids`` that holds the haystack: simulated models use both to find the needles in the prompt,
    real backends ignore them (the question is in the prompt).
    """

    sample_id: str
    ids: Ids
    max_new_tokens: int
    text: str | None = None
    chat: ChatPrompt | None = None
    stop: tuple[str, ...] = ()
    query_keys: tuple[str, ...] = ()
    context: tuple[int, int] | None = None


def split_options(rest: str) -> tuple[str, dict[str, str]]:
    """``"PATH?n_ctx=8k&threads=2"`` -> ``("PATH", {"n_ctx": "8k", "threads": "2"})``."""
    target, _, query = rest.partition("?")
    return target, dict(parse_qsl(query, keep_blank_values=True))


class Backend(Protocol):
    """A model behind one interface.

    ``tokenizer`` counts every prompt: the model's own where the backend has one, else the one the
    user named. ``exact_lengths`` is False when that tokenizer may not be the model's.
    """

    name: str
    input: InputKind
    tokenizer: Tokenizer
    exact_lengths: bool
    trained_window: int | None  # the context the model was trained for, if known
    max_prompt_tokens: int | None  # the longest prompt + new tokens it accepts; longer is refused

    def settings(self) -> dict[str, Any]:
        """Everything that changes outputs, for the manifest."""
        ...

    def generate(self, requests: Sequence[Request]) -> list[Completion]: ...
