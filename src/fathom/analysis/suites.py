"""A real suite's numbers from its records: each task's score with its interval, the mean over tasks,
scores by the prompts' actual length, what the suite's middle truncation did, and the suite's own
splits (LongBench-E's length buckets, LongBench v2's difficulty and length classes).

A suite's items have lengths of their own, so the run's lengths are only the limits prompts were cut
to. The grid here bins each sample by the tokens its model actually read, at the powers of two that NIAH
and RULER sweep (a prompt of 3,000 tokens is in the 4k column, with a 4k NIAH prompt), so the suites
plot on the same length axis as the synthetic tasks.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fathom.analysis.ruler import task_grid, task_order
from fathom.analysis.stats import bootstrap_interval, group_stats, score_interval
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


def task_table(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per task, pooled over the run's length limits and at each limit: the score's cell fields (the
    95% interval is ``stats.score_interval``'s: Wilson's for 0/1 scores, a percentile bootstrap for
    fractional ones such as F1 and ROUGE), how many of the prompts were cut, and the task's metric."""
    by_task: defaultdict[str, list[SampleRecord]] = defaultdict(list)
    for record in records:
        by_task[record.task].append(record)
    return [
        {
            "task": task,
            "scoring": by_task[task][0].scoring,  # each task is graded by its suite's one metric
            **_scored(by_task[task]),
            "lengths": [
                {"length": length, **_scored([r for r in by_task[task] if r.length == length])}
                for length in sorted({r.length for r in by_task[task]})
            ],
        }
        for task in task_order(by_task)
    ]


def _scored(group: Sequence[SampleRecord]) -> dict[str, Any]:
    return {**group_stats(group), "truncated": sum(1 for r in group if r.truncated)}


@dataclass(frozen=True)
class TaskMean:
    """The mean score over a suite run's tasks (each pooled over the length limits), each task weighing
    the same whatever its number of items, as the suites average their tasks; with its 95% interval
    and the tasks and scored samples it is over. ``mean`` is None when nothing was scored."""

    tasks: int
    n: int
    mean: float | None
    ci_low: float
    ci_high: float


def mean_over_tasks(records: Iterable[SampleRecord]) -> TaskMean:
    """The graded samples' ``TaskMean``; errors are left out, as from every score."""
    scores: defaultdict[str, list[float]] = defaultdict(list)
    for record in records:
        if record.error is None:
            scores[record.task].append(record.score)
    # In the tasks' order, not the records': the bootstrap's resamples pick by position.
    groups = [scores[task] for task in task_order(scores)]
    pooled = [score for group in groups for score in group]
    if len({len(group) for group in groups}) <= 1:
        # Tasks of one size: the mean over tasks is the mean over samples, with its usual interval.
        mean, low, high = score_interval(pooled)
    else:
        # Each sample weighs 1 / its task's size, so that every task weighs the same in each resample.
        weights = [1 / len(group) for group in groups for _ in group]
        mean = math.fsum(math.fsum(group) / len(group) for group in groups) / len(groups)
        low, high = bootstrap_interval(pooled, weights)
    return TaskMean(len(groups), len(pooled), mean, low, high)


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
