"""The backend protocol: a batch of requests in, one completion per request out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fathom.haystack.index import Ids
from fathom.records import Completion


@dataclass(frozen=True, eq=False)
class Request:
    """One prompt to complete, greedily.

    ``ids`` is the exact prompt; ``text`` is set for backends that take text. ``query_keys`` are the
    phrases the question asks about: simulated models use them to find the needle in the prompt,
    real backends ignore them (the question is in the prompt itself).
    """

    sample_id: str
    ids: Ids
    text: str | None
    max_new_tokens: int
    query_keys: tuple[str, ...] = ()


class Backend(Protocol):
    """A model behind one interface. ``accepts_ids`` backends receive ids, the others text."""

    name: str
    accepts_ids: bool
    trained_window: int | None  # the context the model was trained for, if known
    max_prompt_tokens: int | None  # the longest prompt it accepts; longer is an error, never cut

    def settings(self) -> dict[str, Any]:
        """Everything that changes outputs, for the manifest."""
        ...

    def generate(self, requests: Sequence[Request]) -> list[Completion]: ...
