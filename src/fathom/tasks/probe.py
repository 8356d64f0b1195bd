"""The closed-book probe: each low-overlap item a run's gold needles are of, its fact asked alone.

An item a model does not know (that Bulguksa is in Gyeongju) fails at 1k and at 128k alike: a failure
of knowledge, not of the context. So a low-overlap run asks each item it uses once more with no
document at all, in the run's own template: "In which city is the Story Bridge?" (the item's
``probe``, ``data/latent_items.json``). A model whose answer names the place (one of the item's
``probe_answers``, as whole words) knows the item; ``fathom.analysis.knowledge`` reads the run's
scores on the items it knows beside those on all items.

A probe is a record of its own kind: a control of no sample (``control`` True, ``probe`` the item's
id, sample id ``probe|ITEM``), asked once per item and run, at no length of the grid, so it never
counts as a sample. Probes come with the no-context controls, before them (the shortest prompts of
all): ``--no-control`` leaves out both.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, runtime_checkable

from fathom.prompts import PromptText
from fathom.prompts.builder import assemble, frame
from fathom.prompts.latent import LatentItem, load_items
from fathom.prompts.templates import ChatTemplate
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell, Score
from fathom.tasks import control
from fathom.tasks.base import Sample, Task

# Bump when the probe's words or grading change: it is part of a low-overlap run's identity.
PROBE_VERSION = 1
PROBE_TEXT = PromptText(
    before="Answer the question below from what you know. There is no document to read.",
    after="\n\nQuestion: {question}\nAnswer in one short sentence.",
    answer_prefix="Answer:",
)
PROBE_KIND = "probe"  # the record's needle_kind
PROBE_SCORING = "probe"  # the record's scoring: a place named as whole words (``grade``)
PROBE_TOKENS = 32  # new tokens: a place in one short sentence


@runtime_checkable
class Probed(Protocol):
    """A task whose samples hide low-overlap needles: the ids of the items its gold needles are of,
    each once, in a fixed order, and the closed-book sample of a probe cell."""

    name: str

    def probed_items(self) -> tuple[str, ...]: ...


@functools.cache
def _by_id() -> dict[str, LatentItem]:
    return {item.id: item for item in load_items()}


@functools.cache
def _by_anchor() -> dict[str, LatentItem]:
    return {item.key: item for item in load_items()}


def item(item_id: str) -> LatentItem:
    """The item of fathom's data file with this id."""
    return _by_id()[item_id]


def items_of(keys: Iterable[str]) -> tuple[str, ...]:
    """The ids of the items whose anchors these are (a low-overlap needle set's ``keys``: an anchor
    names one item of the file), in their order."""
    return tuple(_by_anchor()[key].id for key in keys)


def cells(task: object, asked: bool) -> Iterator[Cell]:
    """One probe cell per item the task's samples use, where ``asked`` (the run asks its controls)
    and the task hides low-overlap needles; none otherwise."""
    if asked and isinstance(task, Probed):
        for item_id in task.probed_items():
            yield Cell(task.name, 0, None, 0, control=True, probe=item_id)


def plan(task: Task, asked: bool) -> Iterator[Cell]:
    """A run's cells: its probes, then its controls and samples (``fathom.tasks.control.plan``); made
    afresh on each call, as the runner counts, skips and orders them."""
    yield from cells(task, asked)
    yield from control.plan(task.cells, asked)


def asks_probes(task: object, asked: bool) -> bool:
    """Whether a run of this task asks any probe (``cells``)."""
    return next(cells(task, asked), None) is not None


def closed_book(cell: Cell, tokenizer: Tokenizer, template: ChatTemplate, system: str | None) -> Sample:
    """The probe cell's sample: its item's fact asked with no document, in the run's template (and
    system prompt), graded by ``grade`` on the item's accepted answers."""
    if cell.probe is None:
        raise ValueError(f"cell {cell.id} is no probe")
    asked = item(cell.probe)
    text = PromptText(PROBE_TEXT.before, PROBE_TEXT.after, PROBE_TEXT.answer_prefix, system)
    head, tail = frame(tokenizer, template, text, asked.probe)
    prompt = assemble(head, [], tail, len(head) + len(tail))
    return Sample(
        cell,
        prompt,
        text,
        asked.probe,
        asked.probe_answers,
        PROBE_KIND,
        query_keys=(asked.key,),
        scoring=PROBE_SCORING,
        max_new_tokens=PROBE_TOKENS,
        grader=grade,
    )


@functools.lru_cache(maxsize=1024)
def _whole(place: str) -> Callable[[str], re.Match[str] | None]:
    return re.compile(rf"(?<!\w){re.escape(place)}(?!\w)").search


def grade(output: str, references: Sequence[str]) -> Score:
    """1 where the answer names one of the places as whole words, in their own capitals: a place is a
    proper noun, and "a nice view" does not name Nice, nor "Parisian" Paris."""
    found = tuple(place for place in references if _whole(place)(output))
    return Score(float(bool(found)), found, PROBE_SCORING)
