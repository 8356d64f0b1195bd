"""The statistics every analysis shares: 95% intervals for small groups of scores in [0, 1], a group
of records as a grid cell's fields, and the longest length that passes a threshold."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from fathom.records import SampleRecord

Z_95 = 1.959964
# The percentile bootstrap for fractional scores: fixed resamples and seed, so a report is reproducible.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
# The fewest fractional scores that get the percentile bootstrap; fewer get Wilson's interval of their
# mean. The bootstrap of a handful of scores covers far less than 95% (benchmarks/interval_coverage.py,
# five shapes of scores: 25-77% at k = 3, 42-88% at k = 6), while Wilson's of the mean is not too
# narrow, as no score in [0, 1] varies more than a pass/fail score of the same mean (97-100% there).
# From 30 scores the bootstrap covers 94-95% on four of the shapes (82% on scores mostly 0), and is
# narrower where the scores vary less than pass/fail ones.
BOOTSTRAP_LEAST = 30
# score_interval's rule in words, for the texts and pages that show its intervals.
SCORE_INTERVAL_RULE = (
    f"Wilson's where every score is 0 or 1 or there are fewer than {BOOTSTRAP_LEAST} of them (of their "
    "mean, for fractional ones), else a percentile bootstrap's over them"
)


def wilson_interval(successes: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` out of ``n``; fractional successes are allowed, and a
    fractional ``n`` (an effective number of scores, ``weighted_score_interval``'s).

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
    share of references found; an F1; a similarity) are not Bernoulli draws: from ``BOOTSTRAP_LEAST``
    of them they get a percentile bootstrap over samples with a fixed seed; fewer (a cell of k = 3 or
    6) get Wilson's interval of their mean, as the bootstrap of so few looks far more certain than it
    is (one score of 0.99 among five 1s made [0.995, 1], where six 1s make Wilson's [0.61, 1]).
    """
    if not scores:
        return None, 0.0, 1.0
    mean = math.fsum(scores) / len(scores)
    if len(scores) < BOOTSTRAP_LEAST or all(s in (0.0, 1.0) for s in scores):
        low, high = wilson_interval(math.fsum(scores), len(scores))
        return mean, low, high
    low, high = bootstrap_interval(scores)
    return mean, max(0.0, low), min(1.0, high)


def weighted_score_interval(scores: Sequence[float], weights: Sequence[float]) -> tuple[float, float]:
    """The 95% interval of a weighted mean of scores in [0, 1] (a suite's items, each weighing one over
    its task's items): the weighted bootstrap from ``BOOTSTRAP_LEAST`` scores, else Wilson's interval
    of the weighted mean over the effective number of scores, Kish's (sum of w)^2 / sum of w^2, which
    unequal weights make smaller than their count."""
    if len(scores) >= BOOTSTRAP_LEAST:
        low, high = bootstrap_interval(scores, weights)
        return max(0.0, low), min(1.0, high)
    total = math.fsum(weights)
    mean = math.fsum(s * w for s, w in zip(scores, weights, strict=True)) / total
    effective = total * total / math.fsum(w * w for w in weights)
    return wilson_interval(mean * effective, effective)


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


def rows_by(
    records: Iterable[SampleRecord], key: Callable[[SampleRecord], tuple[Hashable, ...]], names: Sequence[str]
) -> list[dict[str, Any]]:
    """One row per value of ``key``, sorted: its parts under ``names``, then ``group_stats``' fields
    (a score table along any axis: operations x length, task x distance, ...)."""
    groups: defaultdict[tuple[Any, ...], list[SampleRecord]] = defaultdict(list)
    for record in records:
        groups[key(record)].append(record)
    return [{**dict(zip(names, k, strict=True)), **group_stats(groups[k])} for k in sorted(groups)]


def effective_by(cells: Sequence[dict[str, Any]], name: str, threshold: float) -> list[dict[str, Any]]:
    """Per value of ``name`` among ``cells`` (rows of ``rows_by`` with a length): the longest length
    whose score, and every shorter one's, is at least ``threshold``, on the mean and on the 95%
    lower bound."""
    effective = []
    for value in sorted({c[name] for c in cells}):
        mine = [c for c in cells if c[name] == value]
        effective.append(
            {
                name: value,
                "mean": longest_passing([(c["length"], c["mean"]) for c in mine], threshold),
                "lower_bound": longest_passing([(c["length"], c["ci_low"]) for c in mine], threshold),
            }
        )
    return effective
