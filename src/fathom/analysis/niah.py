"""Turn sample records into accuracy tables, effective length and a lost-in-the-middle index.

Pure functions over ``SampleRecord``: no I/O, so reports, plots and tests share one source of numbers.
Samples whose ``error`` is set never reached a grade; they are counted per cell but are not data points.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fathom.records import SampleRecord

Z_95 = 1.959964
# The percentile bootstrap for fractional scores: fixed resamples and seed, so a report is reproducible.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0

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


def wilson_interval(successes: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` out of ``n``; fractional successes are allowed.

    Wilson rather than the normal approximation because cells are small (k of 5-20) and accuracy sits
    near 0 or 1, where the normal interval collapses to zero width or leaves [0, 1].
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if n == 0:
        return 0.0, 1.0
    # Clamped: a sum of float scores can drift a hair outside [0, n].
    p = min(1.0, max(0.0, successes / n))
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def score_interval(scores: Sequence[float]) -> tuple[float | None, float, float]:
    """Mean and 95% interval of graded scores in [0, 1]; the mean is None when there are none.

    Binary scores (every one 0 or 1) get the Wilson interval. Fractional ones (RULER's "all" metric: the
    share of references found) are not Bernoulli draws, so they get a percentile bootstrap over samples
    with a fixed seed. A single fractional score has no spread to resample and falls back to Wilson,
    which is wide, rather than a zero-width interval that would look certain.
    """
    if not scores:
        return None, 0.0, 1.0
    mean = math.fsum(scores) / len(scores)
    if len(scores) < 2 or all(s in (0.0, 1.0) for s in scores):
        low, high = wilson_interval(math.fsum(scores), len(scores))
        return mean, low, high
    low, high = bootstrap_interval(scores)
    return mean, max(0.0, low), min(1.0, high)


def bootstrap_interval(
    values: Sequence[float], weights: Sequence[float] | None = None
) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of a (weighted) mean, resampling the values with a
    fixed seed. Weights pool unequal groups: the mean per token of documents of unequal size."""
    data = np.asarray(values, dtype=float)
    weight = np.ones(len(data)) if weights is None else np.asarray(weights, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(data), size=(BOOTSTRAP_RESAMPLES, len(data)))
    means = (data[picks] * weight[picks]).sum(axis=1) / weight[picks].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def group_stats(group: Sequence[SampleRecord]) -> dict[str, Any]:
    """A group of records as a grid cell's fields: the scored count, the errors, the mean score with
    its 95% interval, and whether any prompt ran beyond the model's trained window."""
    scores = [r.score for r in group if r.error is None]
    mean, low, high = score_interval(scores)
    return {
        "n": len(scores),
        "errors": len(group) - len(scores),
        "mean": mean,
        "ci_low": low,
        "ci_high": high,
        "beyond_window": any(r.beyond_window for r in group),
    }


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
        CellStats(length=length, depth=depth, **group_stats(group))
        for (length, depth), group in sorted(groups.items())
    ]


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


def longest_passing(
    points: Iterable[tuple[int, float | None]], threshold: float, strict: bool = False
) -> int | None:
    """The longest length whose score, and every shorter length's, is at least ``threshold`` (above it
    when ``strict``). Scanned from the shortest length; a None score fails and ends the scan."""
    best = None
    for length, score in sorted(points, key=lambda p: p[0]):
        if score is None or score < threshold or (strict and score == threshold):
            break
        best = length
    return best


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


def error_kinds(records: Iterable[SampleRecord]) -> dict[str, int]:
    """Errors counted by kind, the part before the first ':' (e.g. "timeout: after 600s" -> "timeout")."""
    kinds = Counter(r.error.split(":", 1)[0].strip() for r in records if r.error is not None)
    return dict(sorted(kinds.items()))


# Why a sample was not fully right, in the order failure_kind checks them: the first that applies.
FAILURE_KINDS = ("error", "beyond_window", "empty", "partial", "refusal", "wrong_answer")
# Lower-case phrases of a model that declines, or says it cannot find the answer, rather than giving a
# wrong one; matched anywhere in the output, with typographic apostrophes read as plain ones.
REFUSAL_PHRASES = (
    "i cannot",
    "i can't",
    "i could not find",
    "i couldn't find",
    "i'm sorry",
    "i am sorry",
    "i am unable",
    "i'm unable",
    "i don't know",
    "i do not know",
    "as an ai",
)


def failure_kind(record: SampleRecord) -> str | None:
    """Why a sample failed, as one of ``FAILURE_KINDS``; None when it is fully right.

    "error": never graded (``error`` set). "beyond_window": wrong on a prompt longer than the trained
    window, where failing is what the window predicts. "empty": a blank output. "partial": some but
    not all references found (RULER's fractional "all" metric), a different miss from finding none.
    "refusal": declined or said it found nothing (``REFUSAL_PHRASES``). "wrong_answer": the rest.
    """
    if record.error is not None:
        return "error"
    if record.score >= 1.0:
        return None
    if record.beyond_window:
        return "beyond_window"
    if not record.output.strip():
        return "empty"
    if record.score > 0.0:
        return "partial"
    said = record.output.lower().replace("\u2019", "'")
    if any(phrase in said for phrase in REFUSAL_PHRASES):
        return "refusal"
    return "wrong_answer"


def summarize(records: Iterable[SampleRecord], threshold: float = 0.85) -> dict[str, Any]:
    """Everything a report needs, as plain JSON-ready values."""
    rows = list(records)
    cells = cell_table(rows)
    lengths = length_table(cells)
    return {
        "cells": [dataclasses.asdict(c) for c in cells],
        "lengths": [dataclasses.asdict(row) for row in lengths],
        "effective_length": {
            "threshold": threshold,
            "mean": effective_length(lengths, threshold),
            "lower_bound": effective_length(lengths, threshold, use_lower_bound=True),
        },
        "lost_in_the_middle_index": lost_in_the_middle_index(cells),
        "samples": len(rows),
        "errors": sum(1 for r in rows if r.error is not None),
        "error_kinds": error_kinds(rows),
    }
