"""The no-context control: every sample's question asked once more with its context left out.

A sample the model also answers without the context (a memorised data set's question, a guessable
answer, a famous needle) is no evidence that it used the context. The control prompt is the
sample's own prompt with the context cut out, template, instruction, question and answer prefix
kept as they were, so the two differ in the context alone. It costs a short prompt per sample.
Its numbers are ``fathom.analysis.control``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from fathom.prompts import Prompt
from fathom.records import Cell
from fathom.tasks.base import Document, Sample, Task
from fathom.tasks.perplexity import PERPLEXITY


def plan(cells: Callable[[], Iterable[Cell]], control: bool) -> Iterator[Cell]:
    """The run's cells (``cells`` makes them afresh on each call), after one control per sample cell
    when ``control``: the controls first, since they are short and show a memorised or guessable
    question set before the long prompts."""
    if control:
        yield from (dataclasses.replace(c, control=True) for c in cells() if c.task != PERPLEXITY)
    yield from cells()


def sample_cell(cell: Cell) -> Cell:
    """The cell whose sample a control cell asks about."""
    return dataclasses.replace(cell, control=False)


def prepared(task: Task, cell: Cell) -> Sample | Document:
    """A planned cell made concrete: a control cell as its sample without the context, any other (a
    probe is its own sample, asked of the task) as the task prepares it. The runner's and inspect's."""
    if not cell.control or cell.probe is not None:
        return task.prepare(cell)
    sample = task.prepare(sample_cell(cell))
    if not isinstance(sample, Sample):
        raise TypeError(f"control cell {cell.id} is not a sample's")
    return without_context(sample, cell)


def without_context(sample: Sample, control: Cell) -> Sample:
    """The sample's prompt with its context (haystack, needles, documents) cut out."""
    prompt = sample.prompt
    end = prompt.head_tokens + prompt.context_tokens
    ids = np.concatenate([prompt.ids[: prompt.head_tokens], prompt.ids[end:]])
    short = Prompt(ids, target_tokens=len(ids), head_tokens=prompt.head_tokens, context_tokens=0, needles=())
    # No haystack, so no place's neighbour in it: the sample's literal neighbours are not the control's.
    # Nor its conversation: a multi-turn sample's control is its last message alone.
    return dataclasses.replace(sample, cell=control, prompt=short, literal_neighbours=(), chat=None)
