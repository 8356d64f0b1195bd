"""What every RULER family shares: the setting it builds in, the draft it returns, the steps RULER's
own sizing search takes through its units (``Steps``, for ``--fill ruler``), filling a token budget
with whole units (lines, list entries, documents) to within a few tokens, and RULER's haystacks of
lines (``Lines``)."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from fathom.errors import CorpusError, PromptError
from fathom.packages import package_dir
from fathom.prompts import Prompt, PromptText
from fathom.prompts.haystack.index import Ids
from fathom.prompts.names import Split
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
    # Which part of vt's, cwe's, fwe's and qa's draws (``splits.py``): training's for ``fathom export``.
    split: Split = "eval"


@dataclass(frozen=True, eq=False)
class Draft:
    """One sample as a family built it."""

    prompt: Prompt
    text: PromptText  # the words around the context (for chat backends), with {question} in ``after``
    question: str
    answers: tuple[str, ...]
    kind: str  # what the answers are: numbers, uuids, variables, words, answer
    query_keys: tuple[str, ...]  # where a simulated reader finds the evidence
    look_alikes: tuple[str, ...] = ()  # the values of the keys not asked about (``Sample.look_alikes``)


@dataclass(frozen=True)
class Steps:
    """The counts of a family's haystack units that RULER's sizing search tries at one length (the
    ``incremental`` of its generators): ``first``, and ``first`` plus or minus whole ``step``s, at
    least one unit and at most ``most`` (the units there are; None: no end)."""

    first: int
    step: int
    unit: str  # what is counted, as messages name it: "noise lines", "essay words", ...
    most: int | None = None

    @property
    def least(self) -> int:
        """The smallest count the steps reach: RULER never sizes a haystack below it."""
        return (self.first - 1) % self.step + 1


class Family(Protocol):
    def draft(self, target: int, rng: random.Random, count: int | None = None) -> Draft:
        """A sample whose prompt has at most ``target`` tokens and misses it by a few at most; or,
        with ``count``, one whose haystack holds that many of the family's units (``steps``),
        whatever its length (``--fill ruler``: ``sizing.py`` measures it)."""
        ...

    def steps(self, length: int) -> Steps:
        """The counts RULER's search tries for a cell of ``length`` (tokens to generate included)."""
        ...

    def appended(self, draft: Draft) -> str:
        """The answer as RULER's search appends it to the prompt it measures ("" where it appends
        none): the count it keeps leaves room for it."""
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


# A piece of a unit in at most so many tokens, or None: what closes the gap whole units leave.
Cut = Callable[[Ids, int], Ids | None]


def fill(
    units: Iterable[Ids], budget: int, cut: Cut, lookahead: int = 256
) -> tuple[list[Ids], list[int], bool]:
    """Whole units in order while they fit ``budget``; then, to close the gap, any of the next
    ``lookahead`` units that still fit, or that fit in place of a shorter chosen one; what is left
    (units all of one size leave up to a unit) is ``cut`` from a passed-over unit, and opens the
    list (a line's tail: the list never ends inside a unit). Returns the chosen units, in order,
    their indexes in ``units``, and whether the first is such a piece."""
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
    piece = cut(spare[0][1], left) if left > 0 and spare else None
    if piece is None:
        return chosen, indexes, False
    return [piece, *chosen], [spare[0][0], *indexes], True


def line_tail(tokenizer: Tokenizer) -> Cut:
    """The longest tail of a line (its ids) in at most so many tokens, without the space a word
    opens with, so that it can open the context right after a newline; None where no tail with a
    word is that short (a line of punctuation alone, ".\\n", would read as noise of its own)."""

    def cut(line: Ids, tokens: int) -> Ids | None:
        tails = [tokenizer.decode(line[-k:].tolist()).lstrip(" ") for k in range(1, len(line) + 1)]
        worded = [tail for tail in tails if any(c.isalnum() for c in tail)]
        fits = [ids for ids in encode_units(tokenizer, worded) if len(ids) <= tokens] if worded else []
        return max(fits, key=len) if fits else None

    return cut


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


def lines_close_the_context(text: PromptText) -> PromptText:
    """The task text for a context of whole lines: the newline RULER writes between the context and
    the question ends the context's last line instead, so the ids spliced there are those of the
    whole text (a BPE of cl100k's kind reads ".\\n" as one token, never "." then "\\n")."""
    if not text.after.startswith("\n"):
        raise PromptError(f"a context of lines needs a newline before the question, not {text.after[:20]!r}")
    return replace(text, after=text.after[1:])


def line_slots(count: int, needles: int, rng: random.Random) -> list[int]:
    """Where needles go among ``count`` lines, sorted: before distinct lines drawn uniformly, as RULER
    draws them (``random.sample(range(count), needles)``: never after the last line); fewer lines
    than needles share them."""
    if count >= needles:
        return sorted(rng.sample(range(count), needles))
    return sorted(rng.choices(range(max(count, 1)), k=needles))


# How an element of a line haystack is written in the context, given whether it opens the context
# and whether it closes it: RULER joins its elements with a separator, which goes on the side a
# tokenizer merges it into (a newline ends the line before it, a space opens the word after it).
Unit = Callable[[str, bool, bool], str]


class Lines:
    """A RULER haystack of lines (niah's noise, vt's noise): ``count`` copies of one noise element
    with needles (chain statements) inserted before the copies their slots name, as RULER inserts
    them into its list; a slot of ``count`` or more puts a needle after the last copy (RULER never
    does: ``line_slots`` draws below ``count``). The noise's units are tokenised once, so a
    layout's size is known before it is built: ``count`` is what a RULER-style sizing search sets,
    and ``fit`` sets it (with a lead) to fill a budget exactly."""

    def __init__(self, tokenizer: Tokenizer, noise: str, unit: Unit) -> None:
        self.tokenizer, self.noise, self.unit = tokenizer, noise, unit
        self._noise: dict[tuple[bool, bool], Ids] = {}
        self._leads: dict[int, Ids | None] = {}
        self._tail = line_tail(tokenizer)

    def noise_ids(self, first: bool = False, last: bool = False) -> Ids:
        if (first, last) not in self._noise:
            text = self.unit(self.noise, first, last)
            self._noise[first, last] = np.asarray(self.tokenizer.encode(text), dtype=np.int32)
        return self._noise[first, last]

    def size(self, count: int, needles: Sequence[str]) -> int:
        """The tokens of ``count`` lines and the needles after a lead (no element opens the
        context); without one, the first element may lose a token (its leading space)."""
        last = [i == len(needles) - 1 and count == 0 for i in range(len(needles))]
        units = [self.unit(n, False, closes) for n, closes in zip(needles, last, strict=True)]
        total = sum(len(ids) for ids in encode_units(self.tokenizer, units)) if units else 0
        if count:
            total += (count - 1) * len(self.noise_ids()) + len(self.noise_ids(last=True))
        return total

    def fit(self, budget: int, needles: Sequence[str]) -> tuple[int, int]:
        """The most lines that fit ``budget`` with the needles, and the tokens left for a lead
        (negative where the needles alone overflow it)."""
        one = self.size(1, needles)
        if budget < one:
            return 0, budget - self.size(0, needles)
        count = 1 + (budget - one) // len(self.noise_ids())
        return count, budget - self.size(count, needles)

    def parts(
        self, count: int, needles: Sequence[str], slots: Sequence[int], lead: int = 0
    ) -> list[tuple[Ids, bool]]:
        """The context as ``assemble`` takes it: a lead of ``lead`` tokens (a line's tail, so the
        context never ends mid-sentence), then the lines with the needles (in the order given, at
        their ``slots``) before theirs."""
        order = sorted(range(len(needles)), key=lambda i: slots[i])  # stable: a shared slot keeps order
        elements: list[str | None] = []  # None: a noise line
        placed = 0
        for line in range(count):
            while placed < len(order) and slots[order[placed]] <= line:
                elements.append(needles[order[placed]])
                placed += 1
            elements.append(None)
        elements += [needles[i] for i in order[placed:]]
        found = self.lead(lead) if lead > 0 else None
        parts: list[tuple[Ids, bool]] = [(found, False)] if found is not None else []
        flags = [(i == 0 and found is None, i == len(elements) - 1) for i in range(len(elements))]
        units = [self.unit(e, *flag) for e, flag in zip(elements, flags, strict=True) if e is not None]
        needle_ids = iter(encode_units(self.tokenizer, units) if units else [])
        for element, (first, last) in zip(elements, flags, strict=True):
            needle = element is not None
            parts.append((next(needle_ids) if needle else self.noise_ids(first, last), needle))
        return parts

    def lead(self, tokens: int) -> Ids | None:
        """A line's tail of ``tokens`` tokens, or the longest shorter one (``line_tail``): what opens
        the context where whole lines leave a gap. It ends where a line ends; it may open
        mid-sentence."""
        if tokens not in self._leads:
            self._leads[tokens] = self._tail(self.noise_ids(), tokens)
        return self._leads[tokens]
