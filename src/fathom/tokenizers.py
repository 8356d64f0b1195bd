"""Tokenizers: one small protocol, several implementations, one loader by name.

Lengths in fathom are always counted with the model's own tokenizer on the final prompt, so the
tokenizer is part of a run's identity: ``identity`` is a stable hash of everything that changes ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """What fathom needs from a tokenizer."""

    name: str
    chat_template: str | None  # a Jinja chat template shipped with the tokenizer, if any
    bos_token: str | None
    eos_token: str | None

    @property
    def identity(self) -> str:
        """Stable sha256 hex digest of the vocabulary, merges, specials and settings."""
        ...

    def encode(self, text: str) -> list[int]:
        """Ids of ordinary text; special-token strings in it are treated as plain text."""
        ...

    def encode_with_specials(self, text: str) -> list[int]:
        """Ids of template text, where special-token strings become their special ids."""
        ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` over many texts, in parallel where the implementation can."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        ...
