"""The no-context control's numbers: its score, the questions answered without the context, and how
much the context raised the gold answer's log-probability (see ``fathom.tasks.control``)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from fathom.analysis.stats import group_stats
from fathom.records import CONTROL, SampleRecord

# Control answers listed in the report and summary, the highest-scoring first.
EXAMPLES = 10


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
