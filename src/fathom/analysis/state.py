"""State tracking's numbers (``fathom.tasks.state``): the score per operation count and length, and
per question kind and length, each with its 95% Wilson interval, and each operation count's
effective length on the mean and on the lower bound.

Its records are RULER-style (depths drawn per sample), so a state run's summary is RULER's grid
(a task per operation count, ``state:N``) with this section beside it, as a real suite's is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from fathom.analysis.stats import group_stats, longest_passing
from fathom.records import SampleRecord
from fathom.tasks.state import TASK, op_count

PREFIX = TASK + ":"


def is_state_run(records: Iterable[SampleRecord]) -> bool:
    return any(r.task.startswith(PREFIX) for r in records)


def _rows(
    records: Sequence[SampleRecord], key: Callable[[SampleRecord], Hashable], name: str
) -> list[dict[str, Any]]:
    """One row per (key, length), sorted: the key under ``name``, then ``group_stats``' fields."""
    groups: defaultdict[tuple[Any, int], list[SampleRecord]] = defaultdict(list)
    for record in records:
        groups[key(record), record.length].append(record)
    return [{name: k, "length": length, **group_stats(groups[k, length])} for k, length in sorted(groups)]


def state_summary(records: Iterable[SampleRecord], threshold: float = 0.85) -> dict[str, Any]:
    """The state section of summary.json: ``cells`` (ops x length), ``questions`` (question kind x
    length) and ``effective_length`` (per operation count: the longest length whose score, and every
    shorter one's, is at least ``threshold``, on the mean and on the 95% lower bound)."""
    rows = [r for r in records if r.task.startswith(PREFIX)]
    cells = _rows(rows, lambda r: op_count(r.task), "ops")
    effective = []
    for ops in sorted({c["ops"] for c in cells}):
        mine = [c for c in cells if c["ops"] == ops]
        effective.append(
            {
                "ops": ops,
                "mean": longest_passing([(c["length"], c["mean"]) for c in mine], threshold),
                "lower_bound": longest_passing([(c["length"], c["ci_low"]) for c in mine], threshold),
            }
        )
    return {
        "threshold": threshold,
        "cells": cells,
        "questions": _rows(rows, lambda r: r.needle_kind, "question"),
        "effective_length": effective,
    }
