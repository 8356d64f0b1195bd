"""Long outputs' numbers (``fathom.tasks.listing``): the score (item-level F1) per item count and
length with its 95% interval, beside each cell's mean precision and recall, how many of its answers
were cut at their output budget, and the largest budget; and each item count's effective length on
the mean and on the lower bound.

Its records are RULER-style (depths drawn per sample), so a listing run's summary is RULER's grid
(a task per item count, ``listing:N``) with this section beside it, as state tracking's is. Precision
and recall are read again from each record's output and answers (the matching ids) by the grader's
own ``item_scores``; a truncated answer is one whose finish reason is ``length``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fathom.analysis.select import family_run
from fathom.analysis.stats import effective_by, rows_by
from fathom.records import SampleRecord
from fathom.tasks.counted_lines import cell_count
from fathom.tasks.listing import TASK, item_scores

PREFIX = TASK + ":"


is_listing_run = family_run(PREFIX)


def is_truncated(record: SampleRecord) -> bool:
    """An answer the backend cut at its output budget."""
    return record.finish_reason == "length"


def listing_summary(records: Iterable[SampleRecord], threshold: float = 0.85) -> dict[str, Any]:
    """The listing section of summary.json: ``cells`` (items x length: the F1's statistics, mean
    ``precision`` and ``recall`` over the scored answers, ``truncated`` answers and the largest
    ``max_new_tokens``), ``truncated`` (answers cut, over the run) and ``effective_length`` (per item
    count: the longest length whose F1, and every shorter one's, is at least ``threshold``, on the
    mean and on the 95% lower bound)."""
    cells = budget_cells([r for r in records if r.task.startswith(PREFIX)], "items", _extras)
    return {
        "threshold": threshold,
        "cells": cells,
        "truncated": sum(cell["truncated"] for cell in cells),
        "effective_length": effective_by(cells, "items", threshold),
    }


def budget_cells(
    rows: Sequence[SampleRecord], axis: str, extras: Callable[[list[SampleRecord]], dict[str, Any]]
) -> list[dict[str, Any]]:
    """The cells of a family whose answers have a budget each (``TASK:COUNT`` by length, the count
    named ``axis``): each one's score statistics, ``extras`` of its records, its ``truncated``
    answers and its largest ``max_new_tokens``. Long outputs' and mrcr's alike."""
    groups: defaultdict[tuple[int, int], list[SampleRecord]] = defaultdict(list)
    for record in rows:
        groups[_cell(record)].append(record)
    cells = []
    for cell in rows_by(rows, _cell, (axis, "length")):
        group = groups[(cell[axis], cell["length"])]
        scored = [r for r in group if r.error is None]
        budget = {
            "truncated": sum(is_truncated(r) for r in scored),
            "max_new_tokens": max(r.max_new_tokens for r in group),
        }
        cells.append(cell | extras(scored) | budget)
    return cells


def _cell(record: SampleRecord) -> tuple[int, int]:
    """A record's cell: its count and length (one key, for the table and its extras)."""
    return cell_count(record.task), record.length


def _extras(scored: list[SampleRecord]) -> dict[str, Any]:
    items = [item_scores(r.output, r.answers) for r in scored]
    return {
        "precision": sum(s.precision for s in items) / len(items) if items else None,
        "recall": sum(s.recall for s in items) / len(items) if items else None,
    }
