"""Many paired sign tests adjusted together: Westfall and Young's step-down minP over sign flips.

A comparison's gate asks one question at several levels at once (overall, per length, per task, per
cell), and the levels overlap: a length's pairs are also the overall test's. Holm's or Bonferroni's
correction would pay for every test as if it were independent of the others, so pooling a length
would cost the power that pooling was for. Flipping pairs instead measures the dependence: under the
null that the two runs are exchangeable within every pair (the same model asked twice), swapping a
pair's base and new scores is as likely as not, independently across pairs. Each flip vector gives
every test a p-value; the adjusted p of a test is the chance, over flips, that the smallest p among
it and the tests less significant than it falls at or below its own (the step-down minP of Westfall
and Young, 1993). It controls the chance of flagging any test whose null is true at alpha, whatever
the others' truth (their subset pivotality holds: a test's flips touch only its own pairs).

Only discordant pairs move under a flip, so only they are flipped. Up to ``EXACT_UNITS`` flip units,
every flip vector is enumerated and the adjusted p is exact; beyond, ``RESAMPLES`` random vectors
with a fixed seed (reproducible), counted as (hits + 1) / (resamples + 1), which is valid.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RESAMPLES = 10_000
SEED = 0
EXACT_UNITS = 13  # 2**13 = 8,192 flip vectors: fewer than the resamples, and exact
_CHUNK = 1_000  # flip vectors a pass: bounds memory at (chunk x units) and (chunk x tests)
# A p of a flip and the observed p can be one number computed by two routes.
_SAME = 1e-9

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SignTest:
    """One test's evidence: each observation's flip unit (the pair, or a suite's item, which flips
    whole) and sign (-1: worse in the new run, +1: better); ties carry none and are not listed."""

    units: tuple[Hashable, ...]
    signs: tuple[int, ...]

    @property
    def worse(self) -> int:
        return sum(1 for s in self.signs if s < 0)

    @property
    def better(self) -> int:
        return sum(1 for s in self.signs if s > 0)


@functools.lru_cache(maxsize=4096)
def upper_tail(n: int) -> Floats:
    """P(X >= w) for X ~ Binomial(n, 1/2), w = 0..n: exact in integers, one division each."""
    counts = [0] * (n + 2)
    coefficient = 1  # math.comb(n, w), built up from w = 0
    for w in range(n + 1):
        counts[w] = coefficient
        coefficient = coefficient * (n - w) // (w + 1)
    tail, running = [0.0] * (n + 1), 0
    for w in range(n, -1, -1):
        running += counts[w]
        tail[w] = running / (1 << n)
    return np.array(tail)


def one_sided(worse: int, better: int) -> float:
    """The exact sign test's one-sided p for a drop: P(X >= worse), X ~ Binomial(worse + better, 1/2)."""
    return float(upper_tail(worse + better)[worse])


@dataclass(frozen=True)
class Adjusted:
    """Each test's one-sided p for a drop and for a rise, each adjusted over all the tests, and the
    smallest p over all tests in each flip vector (sorted), for the power the gate had."""

    drop: tuple[float, ...]
    drop_adjusted: tuple[float, ...]
    rise: tuple[float, ...]
    rise_adjusted: tuple[float, ...]
    least_p: Floats  # per flip vector, the smallest drop p over the tests, ascending
    exact: bool

    def chance_least_p_at_most(self, p: float) -> float:
        """The share of flip vectors whose smallest drop p is at most ``p``."""
        return float(np.searchsorted(self.least_p, p * (1 + _SAME), side="right")) / len(self.least_p)


def adjust(tests: Sequence[SignTest]) -> Adjusted:
    """Every test's drop and rise p, each adjusted by step-down minP over the same flips."""
    units = sorted({u for test in tests for u in test.units}, key=repr)
    index = {u: i for i, u in enumerate(units)}
    # A[u, g]: the sum of test g's observation signs that flip with unit u. Single precision: the
    # sums are whole numbers far below 2^24 (exact), and float32 products run many times faster here.
    weights = np.zeros((len(units), len(tests)), dtype=np.float32)
    for g, test in enumerate(tests):
        for unit, sign in zip(test.units, test.signs, strict=True):
            weights[index[unit], g] += sign
    sizes = np.array([len(t.signs) for t in tests])
    tails = [upper_tail(int(n)) for n in sizes]
    observed = weights.sum(axis=0, dtype=np.float64)  # the identity flip
    drop = _p_matrix(tails, ((sizes - observed) // 2)[None, :])[0]
    rise = _p_matrix(tails, ((sizes + observed) // 2)[None, :])[0]
    exact = len(units) <= EXACT_UNITS
    drop_order, rise_order = np.argsort(drop, kind="stable"), np.argsort(rise, kind="stable")
    drop_hits, rise_hits = np.zeros(len(tests)), np.zeros(len(tests))
    least: list[Floats] = []
    total = 0
    for flips in _flip_vectors(len(units), exact):
        sums = flips @ weights
        flipped_drop = _p_matrix(tails, (sizes - sums) // 2)
        flipped_rise = _p_matrix(tails, (sizes + sums) // 2)
        drop_hits += _step_down_hits(flipped_drop, drop, drop_order)
        rise_hits += _step_down_hits(flipped_rise, rise, rise_order)
        least.append(flipped_drop.min(axis=1) if len(tests) else np.ones(len(flips)))
        total += len(flips)
    return Adjusted(
        drop=tuple(float(p) for p in drop),
        drop_adjusted=_monotone(drop_hits, total, drop_order, exact),
        rise=tuple(float(p) for p in rise),
        rise_adjusted=_monotone(rise_hits, total, rise_order, exact),
        least_p=np.sort(np.concatenate(least)),
        exact=exact,
    )


def _p_matrix(tails: Sequence[Floats], counts: Floats) -> Floats:
    """Each column's p from its own tail table (a test's size is fixed under flips)."""
    out = np.empty(counts.shape)
    for g, tail in enumerate(tails):
        out[:, g] = tail[counts[:, g].astype(np.int64)]
    return out


def _flip_vectors(units: int, exact: bool) -> list[npt.NDArray[np.float32]]:
    """Every sign vector over ``units`` (exact), or ``RESAMPLES`` random ones with a fixed seed; in
    chunks. The exact list begins with the identity, which the random one leaves out (its +1)."""
    if exact:
        codes = np.arange(1 << units)[:, None] >> np.arange(units)[None, :] & 1
        everything = (1 - 2 * codes).astype(np.float32)
        return [everything[i : i + _CHUNK] for i in range(0, len(everything), _CHUNK)]
    rng = np.random.default_rng(SEED)
    chunks = []
    for start in range(0, RESAMPLES, _CHUNK):
        # Random bits a byte at a time: eight units a draw.
        rows = min(_CHUNK, RESAMPLES - start)
        packed = rng.integers(0, 256, size=(rows, (units + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(packed, axis=1, count=units)
        chunks.append(1 - 2 * bits.astype(np.float32))
    return chunks


def _step_down_hits(flipped: Floats, observed: Floats, order: npt.NDArray[np.intp]) -> Floats:
    """For the j-th most significant test, how many flip vectors have a p at or below its observed p
    among it and every less significant test (the successive minima from the least significant)."""
    ranked = flipped[:, order]
    successive = np.minimum.accumulate(ranked[:, ::-1], axis=1)[:, ::-1]
    hits = (successive <= observed[order] * (1 + _SAME)).sum(axis=0)
    out = np.empty(len(order))
    out[order] = hits
    return out


def _monotone(hits: Floats, total: int, order: npt.NDArray[np.intp], exact: bool) -> tuple[float, ...]:
    """The hit counts as adjusted p-values, kept non-decreasing in the order of significance."""
    p = hits / total if exact else (hits + 1) / (total + 1)
    ranked = np.minimum(1.0, np.maximum.accumulate(p[order]))
    out = np.empty(len(order))
    out[order] = ranked
    return tuple(float(x) for x in out)
