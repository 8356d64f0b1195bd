"""RULER's per-length 95% interval is an interval of the mean over tasks (issue #33 item 5), not the
average of the tasks' interval bounds, which keeps each task's whole width (about sqrt(T) too wide)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_ruler_analysis import K4, rec

from fathom.analysis.ruler import length_scores, mean_interval, task_grid
from fathom.records import SampleRecord


def scored(task: str, scores: list[float]) -> list[SampleRecord]:
    return [rec(task, K4, score, sample=i) for i, score in enumerate(scores)]


def test_the_interval_combines_the_tasks_intervals_side_by_side() -> None:
    # vt 4 of 4, cwe 0 of 1, qa_1 2 of 4: the means 1, 0 and 0.5, each with its Wilson interval.
    records = scored("vt", [1.0] * 4) + scored("cwe", [0.0]) + scored("qa_1", [1.0, 0.0, 1.0, 0.0])
    (row,) = length_scores(task_grid(records))
    vt, cwe, qa = (0.510109, 1.0), (0.0, 0.793451), (0.150039, 0.849961)
    # By hand: each side's distances from the task means in quadrature, over the 3 tasks.
    below = math.sqrt((1.0 - vt[0]) ** 2 + (0.0 - cwe[0]) ** 2 + (0.5 - qa[0]) ** 2) / 3
    above = math.sqrt((vt[1] - 1.0) ** 2 + (cwe[1] - 0.0) ** 2 + (qa[1] - 0.5) ** 2) / 3
    assert row.mean == pytest.approx(0.5) and row.ci_low is not None and row.ci_high is not None
    assert (row.ci_low, row.ci_high) == pytest.approx((0.5 - below, 0.5 + above), abs=1e-6)
    assert (row.ci_low, row.ci_high) == pytest.approx((0.299316, 0.789067), abs=1e-6)
    # The tasks' bounds averaged, as the per-length row once was: visibly wider on both sides.
    averaged = ((vt[0] + cwe[0] + qa[0]) / 3, (vt[1] + cwe[1] + qa[1]) / 3)
    assert averaged == pytest.approx((0.220049, 0.881137), abs=1e-6)
    assert row.ci_low > averaged[0] + 0.05 and row.ci_high < averaged[1] - 0.05


def stratified_bootstrap(tasks: list[list[float]], resamples: int = 2000) -> tuple[float, float]:
    """The 95% percentile interval of the mean of task means, each task's samples resampled apart."""
    rng = np.random.default_rng(1)
    task_means = [
        np.asarray(s)[rng.integers(0, len(s), size=(resamples, len(s)))].mean(axis=1) for s in tasks
    ]
    low, high = np.percentile(np.mean(task_means, axis=0), [2.5, 97.5])
    return float(low), float(high)


def test_the_interval_agrees_with_a_bootstrap_of_the_mean_over_tasks() -> None:
    # Three tasks of 200 samples at 30%, 60% and 90%: the bootstrap over each task's samples, by hand.
    shares = {"vt": 60, "cwe": 120, "qa_1": 180}
    tasks = {task: [1.0] * hits + [0.0] * (200 - hits) for task, hits in shares.items()}
    (row,) = length_scores(task_grid([r for task, s in tasks.items() for r in scored(task, s)]))
    low, high = stratified_bootstrap(list(tasks.values()))
    assert row.mean == pytest.approx(0.6)
    assert row.ci_low == pytest.approx(low, abs=0.005) and row.ci_high == pytest.approx(high, abs=0.005)
    # The averaged bounds are about 0.058 either side of the mean; the bootstrap's about 0.034.
    cells = task_grid([r for task, s in tasks.items() for r in scored(task, s)])
    averaged_low = sum(c.ci_low for c in cells) / len(cells)
    assert low - averaged_low > 0.02


def test_one_task_keeps_its_own_interval_and_a_perfect_length_keeps_a_width() -> None:
    (cell,) = task_grid(scored("vt", [1.0, 0.0, 1.0]))
    assert mean_interval([(0.5, 0.2, 0.9)]) == (0.5, 0.2, 0.9)
    (row,) = length_scores([cell])
    assert (row.mean, row.ci_low, row.ci_high) == pytest.approx((cell.mean, cell.ci_low, cell.ci_high))
    # Every task at 4 of 4: the Wilson widths combine into a width, never a certain 100%.
    (perfect,) = length_scores(task_grid(scored("vt", [1.0] * 4) + scored("cwe", [1.0] * 4)))
    assert perfect.mean == 1.0 and perfect.ci_high == pytest.approx(1.0)
    assert perfect.ci_low == pytest.approx(1.0 - math.sqrt(2) * (1.0 - 0.510109) / 2, abs=1e-6)
