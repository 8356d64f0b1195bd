"""Power before a run: how many samples per cell the gate needs to see a drop of a given size.

``fathom plan --detect POINTS`` asks it per length (the pairs of a length pooled over its depths and
tasks) and per cell. The model of a drop: each base answer right with chance ``accuracy``, each new
one with ``accuracy - drop``, independently (as two seeds of ``sim:noisy``), so a pair turns worse
with chance a(1 - a + d) and better with (1 - a)(a - d). The test is the gate's one-sided exact sign
test; its threshold is the sign tests' share of alpha split evenly (Bonferroni) over the level's
tests. That is an estimate of the gate, not the gate: its step-down minP pays less than Bonferroni
for tests that move together (a length and its cells) and nothing for tests that cannot reach a
small p (cells of a few pairs), but it does pay a little for the other levels' tests.
``tests/test_power.py`` checks the estimate against the gate's power measured by simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

TARGET_POWER = 0.8
MOST_SAMPLES = 100_000  # per cell: past this, a drop is called undetectable in practice
_NEGLIGIBLE = 1e-12  # a count of discordant pairs less likely than this adds nothing to the power

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Detection:
    """At one level: its tests, the pairs a sample adds to each, the samples per cell needed for
    ``TARGET_POWER`` (None: more than ``MOST_SAMPLES``), and the power at the spec's own k."""

    level: str
    tests: int
    pairs_per_sample: int
    samples: int | None
    power_at_spec: float


def _log_factorials(n: int) -> Floats:
    return np.array([math.lgamma(i + 1) for i in range(n + 1)])


def _log_pmf(n: int, p: float, log_fact: Floats) -> Floats:
    """log P(X = i), X ~ Binomial(n, p), i = 0..n."""
    i = np.arange(n + 1)
    with np.errstate(divide="ignore"):
        out: Floats = log_fact[n] - log_fact[i] - log_fact[n - i] + i * np.log(p) + (n - i) * np.log1p(-p)
    return out


def _log_upper_tails(log_pmf: Floats) -> Floats:
    """log P(X >= i) for every i."""
    return np.logaddexp.accumulate(log_pmf[::-1])[::-1]


def sign_test_power(pairs: int, worse: float, better: float, threshold: float) -> float:
    """The chance that the one-sided exact sign test over ``pairs`` pairs, each worse with chance
    ``worse`` and better with ``better``, reaches p <= ``threshold``."""
    moved = worse + better
    if pairs <= 0 or moved <= 0 or worse <= 0:
        return 0.0
    log_fact = _log_factorials(pairs)
    discordant = np.exp(_log_pmf(pairs, min(moved, 1.0), log_fact))
    share = worse / moved
    power = 0.0
    for count in range(1, pairs + 1):
        if discordant[count] < _NEGLIGIBLE:
            continue
        null_tails = _log_upper_tails(_log_pmf(count, 0.5, log_fact))
        passing = np.nonzero(null_tails <= math.log(threshold) + 1e-12)[0]
        if not len(passing):
            continue
        least = int(passing[0])
        tails = (
            1.0 if share >= 1.0 else float(np.exp(_log_upper_tails(_log_pmf(count, share, log_fact))[least]))
        )
        power += discordant[count] * tails
    return min(1.0, power)


def pair_chances(accuracy: float, drop: float) -> tuple[float, float]:
    """The chance a pair turns worse and better, base right with ``accuracy``, new with it less ``drop``."""
    new = accuracy - drop
    return accuracy * (1.0 - new), (1.0 - accuracy) * new


def samples_needed(
    drop: float, accuracy: float, threshold: float, pairs_per_sample: int, target: float = TARGET_POWER
) -> int | None:
    """The fewest samples per cell with at least ``target`` power (doubling, then bisection; the
    sign test's power saw-tooths with n, so the answer is a k that reaches it, near the least)."""
    worse, better = pair_chances(accuracy, drop)

    def enough(k: int) -> bool:
        return sign_test_power(k * pairs_per_sample, worse, better, threshold) >= target

    high = 1
    while not enough(high):
        high *= 2
        if high > MOST_SAMPLES:
            return None
    low = high // 2  # not enough (or 0)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def detection(
    level: str, tests: int, pairs_per_sample: int, drop: float, accuracy: float, alpha: float, samples: int
) -> Detection:
    """One level's needs: ``alpha`` is the sign tests' share, split over the level's ``tests``."""
    threshold = alpha / tests
    worse, better = pair_chances(accuracy, drop)
    return Detection(
        level,
        tests,
        pairs_per_sample,
        samples_needed(drop, accuracy, threshold, pairs_per_sample),
        sign_test_power(samples * pairs_per_sample, worse, better, threshold),
    )
