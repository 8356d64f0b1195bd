"""The task protocol: which cells a run has, and how one cell becomes a prompt with references."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from fathom.backends.base import ChatPrompt
from fathom.prompts import Prompt
from fathom.records import Cell, Needle


@dataclass(frozen=True, eq=False)
class Sample:
    """A cell made concrete: its prompt and the needle whose answers grade it."""

    cell: Cell
    prompt: Prompt
    needle: Needle


class Task(Protocol):
    name: str

    def cells(self) -> list[Cell]:
        """Every cell of the run, in the order that lets a prefix cache reuse most tokens."""
        ...

    def prepare(self, cell: Cell) -> Sample: ...

    def chat(self, sample: Sample) -> ChatPrompt:
        """The sample's prompt as chat messages, for backends that apply their own template."""
        ...

    def identity(self) -> dict[str, Any]:
        """What, beside the spec and tokenizer, decides the prompts (versions, corpus and template
        hashes): two runs with equal identities build byte-identical prompts."""
        ...
