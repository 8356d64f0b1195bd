"""What every RULER family shares: the setting it builds in, the draft it returns, and filling a
token budget with whole units (lines, list entries, documents) to within a few tokens."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from fathom.errors import CorpusError
from fathom.packages import package_dir
from fathom.prompts import Prompt, PromptText
from fathom.prompts.haystack.index import Ids
from fathom.prompts.templates import ChatTemplate
from fathom.prompts.tokenizers import Tokenizer
from fathom.tasks.ruler.catalogue import Variant

QUESTION = "{question}"


@dataclass(frozen=True)
class Setting:
    """What a family builds with: the model's tokenizer and template, and the run's choices."""

    tokenizer: Tokenizer
    template: ChatTemplate
    system: str | None
    corpus: str | None  # the user's haystack for essay tasks; None keeps RULER's essays


@dataclass(frozen=True, eq=False)
class Draft:
    """One sample as a family built it."""

    prompt: Prompt
    text: PromptText  # the words around the context (for chat backends), with {question} in ``after``
    question: str
    answers: tuple[str, ...]
    kind: str  # what the answers are: numbers, uuids, variables, words, answer
    query_keys: tuple[str, ...]  # where a simulated reader finds the evidence


class Family(Protocol):
    def draft(self, target: int, rng: random.Random) -> Draft:
        """A sample whose prompt has at most ``target`` tokens and misses it by a few at most."""
        ...

    def identity(self) -> dict[str, Any]:
        """What, beyond the variant and the setting, decides the prompts (data hashes)."""
        ...


FamilyFactory = Callable[[Variant, Setting], Family]


def task_text(variant: Variant, setting: Setting, fields: dict[str, str], query: str) -> PromptText:
    """The variant's template split at ``{context}``: ``fields`` filled everywhere, the query kept as
    ``{question}`` after the context and written out in the answer prefix."""
    family = variant.text
    before, after = family.template.split("{context}")
    for name, value in fields.items():
        before, after = before.replace(f"{{{name}}}", value), after.replace(f"{{{name}}}", value)
    prefix = family.answer_prefix.replace("{query}", query)
    for name, value in fields.items():
        prefix = prefix.replace(f"{{{name}}}", value)
    return PromptText(before, after.replace("{query}", QUESTION), prefix, setting.system)


def encode_units(tokenizer: Tokenizer, texts: Sequence[str]) -> list[Ids]:
    return [np.asarray(ids, dtype=np.int32) for ids in tokenizer.encode_batch(list(texts))]


def fill(units: Iterable[Ids], budget: int, lookahead: int = 256) -> tuple[list[Ids], list[int]]:
    """Whole units in order while they fit ``budget``; then, to close the gap, any of the next
    ``lookahead`` units that still fit, or that fit in place of a shorter chosen one; what is left
    (units all of one size leave up to a unit) is the head of a passed-over unit, cut to fit.
    Returns the chosen units, in order, and their indexes in ``units``."""
    chosen: list[Ids] = []
    indexes: list[int] = []
    spare: list[tuple[int, Ids]] = []  # units passed over, candidates for swaps
    left = budget
    for index, ids in enumerate(units):
        if len(ids) <= left:
            chosen.append(ids)
            indexes.append(index)
            left -= len(ids)
        else:
            spare.append((index, ids))
        if left == 0 or len(spare) > lookahead:
            break
    chosen, indexes, left = _swap_closer(chosen, indexes, spare, left)
    if left > 0 and spare:
        index, ids = spare[0]
        chosen.append(ids[:left])
        indexes.append(index)
    return chosen, indexes


def _swap_closer(
    chosen: list[Ids], indexes: list[int], spare: list[tuple[int, Ids]], left: int
) -> tuple[list[Ids], list[int], int]:
    """Close the gap ``left`` by trading chosen units for longer spare ones, best trade first: when
    all units are alike in size (uuid lines, say), no further unit fits, but a slightly longer one
    in place of a shorter one often does."""
    by_size: dict[int, int] = {}  # a chosen unit of each size, by position
    for position, ids in enumerate(chosen):
        by_size.setdefault(len(ids), position)
    for index, ids in sorted(spare, key=lambda item: -len(item[1])):
        if left == 0:
            break
        trades = [size for size in by_size if 0 < len(ids) - size <= left]
        if not trades:
            continue
        size = min(trades)  # the largest gain that still fits
        position = by_size.pop(size)
        left -= len(ids) - size
        chosen[position], indexes[position] = ids, index
        for other, unit in enumerate(chosen):  # keep one position per size for later trades
            if len(unit) == size and other != position:
                by_size.setdefault(size, other)
                break
    return chosen, indexes, left


def chunks(make: Callable[[int], Sequence[str]], tokenizer: Tokenizer, size: int = 512) -> Iterator[Ids]:
    """Units made and tokenised ``size`` at a time, without end."""
    while True:
        yield from encode_units(tokenizer, make(size))


@functools.cache
def word_list(name: str) -> tuple[str, ...]:
    """A wonderwords list (nounlist, adjectivelist, verblist), as RULER draws its words from them."""
    folder = package_dir("wonderwords")
    path = folder / "assets" / f"{name}.txt" if folder else None
    if path is None or not path.is_file():
        raise CorpusError("RULER's word lists come from the wonderwords package: pip install wonderwords")
    return tuple(w.strip() for w in path.read_text(encoding="utf-8").splitlines() if w.strip())


def solved_example(text: PromptText, context: str, question: str, answer: str) -> str:
    """A worked instance of a task as one string (instruction, context, question, answer prefix and
    answer), the way RULER shows a model one before the real task."""
    return text.before + context + text.after.replace(QUESTION, question) + text.answer_prefix + answer


def after_example(text: PromptText, example: str, separator: str) -> PromptText:
    """The task text with a worked example before it: it is part of the head, never of the context."""
    return replace(text, before=example + separator + text.before)
