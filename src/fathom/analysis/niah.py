"""NIAH's numbers from sample records: accuracy per (length, depth) and per length, effective length
(pooled over depths, and at the worst depth) and a lost-in-the-middle index.

Pure functions over ``SampleRecord``: no I/O, so reports, plots and tests share one source of numbers.
Samples whose ``error`` is set never reached a grade; they are counted per cell but are not data points.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fathom.analysis.failures import error_kinds
from fathom.analysis.stats import group_stats, longest_passing, wilson_interval
from fathom.records import SampleRecord

# Depth bands for the lost-in-the-middle index: the edges a model tends to find and the middle it tends
# to miss. Depths between the bands (e.g. 0.2, 0.8) belong to neither, so the contrast stays sharp.
EDGE_LOW, EDGE_HIGH = 0.1, 0.9
MIDDLE_LOW, MIDDLE_HIGH = 0.3, 0.7


@dataclass(frozen=True)
class CellStats:
    """Accuracy at one (length, depth); ``mean`` is None when no sample there was scored."""

    length: int
    depth: float
    n: int
    errors: int
    mean: float | None
    ci_low: float
    ci_high: float
    beyond_window: bool
    # The highest likeness of a sample's needles to their corpus (prompts/hygiene.py); None where
    # the records predate it.
    similarity: float | None = None


@dataclass(frozen=True)
class LengthStats:
    """Accuracy at one length, pooled over depths; ``mean`` is None when nothing there was scored."""

    length: int
    n: int
    errors: int
    mean: float | None
    ci_low: float
    ci_high: float
    beyond_window: bool


def _pool(cells: Iterable[CellStats]) -> tuple[float, int]:
    """Summed score and count of the cells' scored samples: each sample weighs the same, not each cell.

    A cell's sum is its mean times its n, rounded to 9 decimals: k / n * n is not always k in floating
    point, and 1 of 3 pooled with 118 of 137 would otherwise read 0.8499999999999999, not 119 / 140 =
    0.85, failing a length that scores exactly the threshold.
    """
    scored = [(c.mean, c.n) for c in cells if c.mean is not None]
    return math.fsum(round(mean * n, 9) for mean, n in scored), sum(n for _, n in scored)


def cell_table(records: Iterable[SampleRecord]) -> list[CellStats]:
    """One row per (length, depth), sorted by length then depth.

    For records at fixed depths (NIAH's); records whose depths were drawn per sample (RULER's, with
    ``depth`` None) are refused: ``fathom.analysis.ruler`` groups those by task instead.
    """
    groups: defaultdict[tuple[int, float], list[SampleRecord]] = defaultdict(list)
    for record in records:
        if record.depth is None:
            raise ValueError(f"record {record.sample_id} has no fixed depth: analyse it by task, not depth")
        groups[record.length, record.depth].append(record)
    return [
        CellStats(length=length, depth=depth, **group_stats(group), similarity=_similarity(group))
        for (length, depth), group in sorted(groups.items())
    ]


def _similarity(group: Sequence[SampleRecord]) -> float | None:
    return max((r.haystack_similarity for r in group if r.haystack_similarity is not None), default=None)


def length_table(cells: Iterable[CellStats]) -> list[LengthStats]:
    """One row per length, pooling the scored samples of its cells."""
    by_length: defaultdict[int, list[CellStats]] = defaultdict(list)
    for cell in cells:
        by_length[cell.length].append(cell)
    rows = []
    for length, group in sorted(by_length.items()):
        total, n = _pool(group)
        low, high = wilson_interval(total, n)
        rows.append(
            LengthStats(
                length=length,
                n=n,
                errors=sum(c.errors for c in group),
                mean=total / n if n else None,
                ci_low=low,
                ci_high=high,
                beyond_window=any(c.beyond_window for c in group),
            )
        )
    return rows


def effective_length(
    lengths_stats: Iterable[LengthStats], threshold: float = 0.85, use_lower_bound: bool = False
) -> int | None:
    """The longest length whose score, and every shorter length's, is at least ``threshold``.

    It stops at the first failing length even if longer ones recover: a model that misses at 16k
    cannot be trusted at 32k because it happened to pass there. A length with nothing scored fails,
    since it gives no evidence. ``use_lower_bound`` judges by the Wilson lower bound instead of the
    mean, so a pass must survive sampling noise.
    """
    points = [
        (row.length, None if row.n == 0 else (row.ci_low if use_lower_bound else row.mean))
        for row in lengths_stats
    ]
    return longest_passing(points, threshold)


def worst_depth_effective_length(cells: Iterable[CellStats], threshold: float = 0.85) -> int | None:
    """The longest length up to which every depth's cell, not only the pooled length, scores at least
    ``threshold``: a hole at one depth (a cell at 50% beside cells at 100%) can pass pooled, not here.

    The pooled rule applied to each length's worst cell: its mean at exactly the threshold passes, the
    scan stops at the first failing length, and a cell with nothing scored fails its length. It is
    judged on the cells' means only, never their 95% intervals: a cell holds few samples, and the
    Wilson lower bound of 20 of 20 is 0.84, so on the lower bound nearly every run would pass nothing.
    """
    by_length: defaultdict[int, list[float | None]] = defaultdict(list)
    for cell in cells:
        by_length[cell.length].append(cell.mean)
    points = []
    for length, means in by_length.items():
        scored = [mean for mean in means if mean is not None]
        points.append((length, min(scored) if len(scored) == len(means) else None))
    return longest_passing(points, threshold)


def _pooled_mean(cells: Iterable[CellStats]) -> float | None:
    total, n = _pool(cells)
    return total / n if n else None


def lost_in_the_middle_index(cells: Sequence[CellStats]) -> float | None:
    """Edge-depth accuracy minus middle-depth accuracy over all lengths; positive: the middle is worse."""
    edges = _pooled_mean(c for c in cells if c.depth <= EDGE_LOW or c.depth >= EDGE_HIGH)
    middle = _pooled_mean(c for c in cells if MIDDLE_LOW <= c.depth <= MIDDLE_HIGH)
    if edges is None or middle is None:
        return None
    return edges - middle


def _row(cell: CellStats) -> dict[str, Any]:
    row = dataclasses.asdict(cell)
    if row["similarity"] is None:  # records from before it: the row as it was
        del row["similarity"]
    return row


def summarize(records: Iterable[SampleRecord], threshold: float = 0.85) -> dict[str, Any]:
    """Everything a report needs, as plain JSON-ready values."""
    rows = list(records)
    cells = cell_table(rows)
    lengths = length_table(cells)
    return {
        "cells": [_row(c) for c in cells],
        "lengths": [dataclasses.asdict(row) for row in lengths],
        "effective_length": {
            "threshold": threshold,
            "mean": effective_length(lengths, threshold),
            "lower_bound": effective_length(lengths, threshold, use_lower_bound=True),
            "worst_depth": worst_depth_effective_length(cells, threshold),
        },
        "lost_in_the_middle_index": lost_in_the_middle_index(cells),
        "samples": len(rows),
        "errors": sum(1 for r in rows if r.error is not None),
        "error_kinds": error_kinds(rows),
    }
