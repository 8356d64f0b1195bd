"""The no-context control: every sample's question asked once more with its context left out.

A sample the model also answers without the context (a memorised data set's question, a guessable
answer, a famous needle) is no evidence that it used the context. The control prompt is the
sample's own prompt with the context cut out, template, instruction, question and answer prefix
kept as they were, so the two differ in the context alone. It costs a short prompt per sample.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from fathom.analysis.niah import group_stats
from fathom.prompts import Prompt
from fathom.records import CONTROL, Cell, SampleRecord
from fathom.tasks.base import Sample
from fathom.tasks.perplexity import PERPLEXITY

# Control answers listed in the report and summary, the highest-scoring first.
EXAMPLES = 10


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


def without_context(sample: Sample, control: Cell) -> Sample:
    """The sample's prompt with its context (haystack, needles, documents) cut out."""
    prompt = sample.prompt
    end = prompt.head_tokens + prompt.context_tokens
    ids = np.concatenate([prompt.ids[: prompt.head_tokens], prompt.ids[end:]])
    short = Prompt(ids, target_tokens=len(ids), head_tokens=prompt.head_tokens, context_tokens=0, needles=())
    return dataclasses.replace(sample, cell=control, prompt=short)


def control_summary(controls: Sequence[SampleRecord], samples: Sequence[SampleRecord]) -> dict[str, Any]:
    """The controls' score (and per task for a suite), the questions answered without the context,
    and, where the gold answer's log-probability was read both ways, how much the context raised it."""
    scored = [r for r in controls if r.error is None]
    by_task: dict[str, list[SampleRecord]] = defaultdict(list)
    for record in controls:
        by_task[record.task].append(record)
    answered = sorted((r for r in scored if r.score > 0), key=lambda r: (-r.score, r.sample_id))
    return {
        **group_stats(controls),
        "answered": len(answered),
        "by_task": {task: group_stats(group) for task, group in sorted(by_task.items())},
        "examples": [_example(r) for r in answered[:EXAMPLES]],
        "answer_logprob_gain": _gain(scored, samples),
    }


def _example(record: SampleRecord) -> dict[str, Any]:
    return {
        "sample_id": record.sample_id,
        "question": record.question,
        "answers": list(record.answers),
        "output": record.output,
        "score": record.score,
    }


def _gain(controls: Sequence[SampleRecord], samples: Sequence[SampleRecord]) -> list[dict[str, Any]]:
    """Per length, the mean of log p(gold answer) with the context minus without it, in nats, over
    the samples where both were read: how much the context tells the model, a continuous signal
    that falls where the model stops using the context, whatever its greedy answers."""
    without = {r.sample_id.removeprefix(f"{CONTROL}|"): r.answer_logprob for r in controls}
    by_length: dict[int, list[float]] = defaultdict(list)
    for record in samples:
        with_context, alone = record.answer_logprob, without.get(record.sample_id)
        if record.error is None and with_context is not None and alone is not None:
            by_length[record.length].append(with_context - alone)
    return [
        {"length": length, "pairs": len(gains), "mean_nats": math.fsum(gains) / len(gains)}
        for length, gains in sorted(by_length.items())
    ]


def control_text(summary: dict[str, Any]) -> str:
    """The control in a line, with a warning when questions were answered without the context."""
    n, answered = summary["n"], summary["answered"]
    mean = "n/a" if summary["mean"] is None else f"{summary['mean']:.1%}"
    line = f"no-context control: {mean} ({answered} of {n} questions answered without the context"
    line += f", {summary['errors']} errors)" if summary["errors"] else ")"
    if answered:
        line += (
            "; warning: those samples' scores are no evidence of using the context "
            "(see report.html, 'No-context control')"
        )
    return line
