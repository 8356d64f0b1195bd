"""How often a cell's 95% interval holds the true mean score, for fractional scores (an F1, a
similarity, RULER's share of references found), by simulation: the percentile bootstrap and Wilson's
interval of the mean, side by side, at several k.

Each trial draws k scores from a known distribution on [0, 1] (its mean is the truth), makes both
intervals as ``fathom.analysis.stats`` makes them, and counts whether each holds the mean.
``stats.score_interval`` takes the bootstrap only from ``BOOTSTRAP_LEAST`` scores up, for what this
prints: the bootstrap of a handful of scores covers far less than 95%.

    python benchmarks/interval_coverage.py [--trials 1000] [--k 3,6,12,30,60]

A measurement, not a test (it asserts nothing); ``tests/test_analysis.py`` checks the rule itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from fathom.analysis.stats import bootstrap_interval, wilson_interval

Draw = Callable[[np.random.Generator, int], np.ndarray]
# Shapes fathom's fractional scores take: spread out, a few levels, mostly right with a rare partial
# answer, U-shaped, and mostly wrong with a rare partial one (a model failing a long-output task).
SHAPES: dict[str, tuple[Draw, float]] = {
    "beta(2,5)": (lambda rng, k: rng.beta(2, 5, k), 2 / 7),
    "0, 0.5 or 1 (0.6, 0.2, 0.2)": (lambda rng, k: rng.choice([0.0, 0.5, 1.0], k, p=[0.6, 0.2, 0.2]), 0.3),
    "1, or 0.3 one time in 10": (lambda rng, k: np.where(rng.random(k) < 0.9, 1.0, 0.3), 0.93),
    "beta(0.5,0.5)": (lambda rng, k: rng.beta(0.5, 0.5, k), 0.5),
    "0, or U(0, 0.4) one time in 10": (
        lambda rng, k: np.where(rng.random(k) < 0.9, 0.0, rng.random(k) * 0.4),
        0.02,
    ),
}


def coverage(draw: Draw, truth: float, k: int, trials: int, seed: int) -> tuple[float, float]:
    """The share of ``trials`` whose bootstrap and Wilson intervals hold ``truth``."""
    rng = np.random.default_rng(seed)
    held = np.zeros(2)
    for _ in range(trials):
        scores = draw(rng, k)
        intervals = (bootstrap_interval(scores), wilson_interval(float(scores.sum()), k))
        for i, (low, high) in enumerate(intervals):
            held[i] += low <= truth <= high
    return held[0] / trials, held[1] / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--k", default="3,6,12,30,60", help="samples a cell, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ks = [int(k) for k in args.k.split(",")]
    print(f"coverage of 95% intervals, {args.trials} trials each (bootstrap / Wilson of the mean)")
    print("shape".ljust(32) + "".join(f"k = {k}".rjust(16) for k in ks))
    for name, (draw, truth) in SHAPES.items():
        cells = [coverage(draw, truth, k, args.trials, args.seed) for k in ks]
        print(name.ljust(32) + "".join(f"{b:.3f} / {w:.3f}".rjust(16) for b, w in cells))


if __name__ == "__main__":
    main()
