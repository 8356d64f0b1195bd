"""A real suite's numbers from its records: each task's score with its interval, the mean over tasks,
scores by the prompts' actual length, what the suite's middle truncation did, and the suite's own
splits (LongBench-E's length buckets, LongBench v2's difficulty and length classes).

A suite's items have lengths of their own, so the run's lengths are only the limits prompts were cut
to. The grid here bins each sample by the tokens its model actually read, at the powers of two that NIAH
and RULER sweep (a prompt of 3,000 tokens is in the 4k column, with a 4k NIAH prompt), so the suites
plot on the same length axis as the synthetic tasks.

A run asks each item at every length limit, so a task's samples over all the limits are not
independent: the same question at 1k and at 8k is one piece of evidence about the model, not two.
Wherever a task's limits are pooled (its row over all limits, the mean over tasks), the 95% interval
is over its items, each scored by its mean over the limits, not over the samples, whose interval
would be too narrow; at one limit each item is one sample, and its interval is over the samples.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fathom.analysis.ruler import task_grid, task_order
from fathom.analysis.stats import group_stats, score_interval, weighted_score_interval
from fathom.records import SampleRecord


def is_suite_run(records: Iterable[SampleRecord]) -> bool:
    """Records of a real suite carry their item's truncation facts."""
    return any(r.original_tokens is not None for r in records)


def length_bin(tokens: int) -> int:
    """The power of two at or above ``tokens``: the NIAH/RULER length a prompt of this size sits at."""
    return 1 << max(0, math.ceil(math.log2(max(tokens, 1))))


def actual_length_grid(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Task x actual-length cells (RULER's task grid, its lengths the bins of the tokens read)."""
    binned = [dataclasses.replace(r, length=length_bin(r.actual_tokens)) for r in records]
    return [dataclasses.asdict(cell) for cell in task_grid(binned)]


def item_key(record: SampleRecord) -> tuple[str, str]:
    """The item a suite's sample asks, the same at every length limit: its task and item id, or its
    place in the task's data file where a record has no id."""
    return record.task, record.item_id or str(record.sample)


def item_means(records: Iterable[SampleRecord]) -> list[float]:
    """Each item's mean score over its graded samples, in the order the items first appear (the
    bootstrap's resamples pick by position); an item with no graded sample has no score to give."""
    scores: defaultdict[tuple[str, str], list[float]] = defaultdict(list)
    for record in records:
        if record.error is None:
            scores[item_key(record)].append(record.score)
    return [math.fsum(group) / len(group) for group in scores.values()]


def task_table(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per task, pooled over the run's length limits and at each limit: the score's cell fields (the
    95% interval is ``stats.score_interval``'s: Wilson's for 0/1 scores and for fewer than 30
    fractional ones such as F1 and ROUGE, else a percentile bootstrap), how many of the prompts were
    cut, and the task's metric. The pooled row's interval is over the task's items (``items`` of
    them, ``_pooled``)."""
    by_task: defaultdict[str, list[SampleRecord]] = defaultdict(list)
    for record in records:
        by_task[record.task].append(record)
    return [
        {
            "task": task,
            "scoring": by_task[task][0].scoring,  # each task is graded by its suite's one metric
            **_pooled(by_task[task]),
            "lengths": [
                {"length": length, **_scored([r for r in by_task[task] if r.length == length])}
                for length in sorted({r.length for r in by_task[task]})
            ],
        }
        for task in task_order(by_task)
    ]


def _scored(group: Sequence[SampleRecord]) -> dict[str, Any]:
    return {**group_stats(group), "truncated": sum(1 for r in group if r.truncated)}


def _pooled(group: Sequence[SampleRecord]) -> dict[str, Any]:
    """A task over all its length limits: the mean of its graded samples, and the 95% interval of its
    items' means (Wilson's only where each item's mean is 0 or 1: an item right at 8k and wrong at 1k
    scores 0.5). Where every item was graded at every limit, the two means are one."""
    means = item_means(group)
    _, low, high = score_interval(means)
    return {"items": len(means), **_scored(group), "ci_low": low, "ci_high": high}


@dataclass(frozen=True)
class TaskMean:
    """The mean score over a suite run's tasks (each pooled over the length limits), each task weighing
    the same whatever its number of items, as the suites average their tasks; with its 95% interval
    (over the items, as each task's) and the tasks, items and scored samples it is over. ``mean`` is
    None when nothing was scored."""

    tasks: int
    items: int
    n: int
    mean: float | None
    ci_low: float
    ci_high: float


def mean_over_tasks(records: Iterable[SampleRecord]) -> TaskMean:
    """The graded samples' ``TaskMean``; errors are left out, as from every score."""
    graded: defaultdict[str, list[SampleRecord]] = defaultdict(list)
    for record in records:
        if record.error is None:
            graded[record.task].append(record)
    # In the tasks' order, not the records': the bootstrap's resamples pick by position.
    tasks = [graded[task] for task in task_order(graded)]
    items = [item_means(group) for group in tasks]
    pooled = [mean for group in items for mean in group]
    if len({len(group) for group in items}) <= 1:
        # Tasks of as many items: each item weighs the same, and the interval is a task's (``_pooled``).
        _, low, high = score_interval(pooled)
    else:
        # Each item weighs 1 / its task's items, so that every task weighs the same in each resample.
        low, high = weighted_score_interval(pooled, [1 / len(group) for group in items for _ in group])
    means = [math.fsum(r.score for r in group) / len(group) for group in tasks]
    mean = math.fsum(means) / len(means) if means else None
    return TaskMean(len(tasks), len(pooled), sum(len(group) for group in tasks), mean, low, high)


def truncation_table(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per task and length limit: how many prompts were cut, and by how much (tokens removed, and the
    share of the prompt they were, averaged over the cut prompts; the most removed from one)."""
    groups: defaultdict[tuple[str, int], list[SampleRecord]] = defaultdict(list)
    for record in records:
        groups[record.task, record.length].append(record)
    rows = []
    for (task, length), group in sorted(groups.items()):
        cut = [r for r in group if r.truncated and r.original_tokens is not None]
        removed = [r.original_tokens - r.actual_tokens for r in cut if r.original_tokens is not None]
        shares = [gone / r.original_tokens for gone, r in zip(removed, cut, strict=True) if r.original_tokens]
        rows.append(
            {
                "task": task,
                "length": length,
                "samples": len(group),
                "truncated": len(cut),
                "mean_removed_tokens": _mean(removed),
                "max_removed_tokens": max(removed, default=0),
                "mean_removed_share": _mean(shares),
            }
        )
    return rows


def split_table(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per task, length limit and split ("length:0-4k", "difficulty:hard"): the score's cell fields."""
    groups: defaultdict[tuple[str, int, str], list[SampleRecord]] = defaultdict(list)
    for record in records:
        for group in record.item_groups:
            groups[record.task, record.length, group].append(record)
    return [
        {"task": task, "length": length, "split": split, **group_stats(groups[task, length, split])}
        for task, length, split in sorted(groups)
    ]


def suite_summary(records: Sequence[SampleRecord]) -> dict[str, Any]:
    """summary.json's ``suites`` section of a real suite's run (its graded samples, no controls)."""
    cut = [r for r in records if r.truncated]
    return {
        "truncated": len(cut),
        "samples": len(records),
        "by_task": task_table(records),
        "mean": dataclasses.asdict(mean_over_tasks(records)),
        "by_actual_length": actual_length_grid(records),
        "truncation": truncation_table(records),
        "splits": split_table(records),
    }


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None
