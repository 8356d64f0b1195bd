"""A real suite's numbers from its records: scores by the prompts' actual length, what the suite's
middle truncation did, and the suite's own splits (LongBench-E's length buckets, LongBench v2's
difficulty and length classes).

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
from typing import Any

from fathom.analysis.ruler import task_grid
from fathom.analysis.stats import group_stats
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
        "by_actual_length": actual_length_grid(records),
        "truncation": truncation_table(records),
        "splits": split_table(records),
    }


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None
