"""One checkpoint's own numbers, as its summary has them (``fathom.analysis.niah``, ``ruler``,
``suites``): the overall score, the score per length and per task with their 95% intervals, and the
effective length on the mean and on the lower bound. What ``fathom.analysis.series`` sets side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.analysis.effective import EffectiveLength, run_effective_length
from fathom.analysis.niah import cell_table, length_table
from fathom.analysis.pairing import RunRecords
from fathom.analysis.ruler import length_scores, task_grid, task_order
from fathom.analysis.select import is_literal_twin, is_ruler_run
from fathom.analysis.stats import group_stats, score_interval
from fathom.analysis.suites import is_suite_run, mean_over_tasks, task_table
from fathom.records import SampleRecord


@dataclass(frozen=True)
class Scored:
    """A mean score with its 95% interval over ``n`` scored samples (a suite's pooled task: items);
    the mean is None where nothing was scored."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass(frozen=True)
class AtLength:
    length: int
    score: Scored


@dataclass(frozen=True)
class TaskScore:
    """A task over all the run's lengths (a suite's: its interval over the items) and at each."""

    task: str
    score: Scored
    lengths: tuple[AtLength, ...]


@dataclass(frozen=True)
class Numbers:
    """One run's own numbers: its overall score (NIAH and RULER: the graded samples pooled; a suite:
    the mean over its tasks), per length, per task (RULER, a suite, a NIAH run of several variants),
    and its effective length (None for a suite, whose lengths are limits)."""

    path: Path
    model: str
    task: str
    labels: dict[str, str]
    samples: int
    errors: int
    overall: Scored
    lengths: tuple[AtLength, ...]
    tasks: tuple[TaskScore, ...]
    effective_length: EffectiveLength | None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "model": self.model,
            "task": self.task,
            "labels": self.labels,
            "samples": self.samples,
            "errors": self.errors,
            "overall": dataclasses.asdict(self.overall),
            "lengths": [_at_json(at) for at in self.lengths],
            "tasks": [
                {"task": t.task, **dataclasses.asdict(t.score), "lengths": [_at_json(at) for at in t.lengths]}
                for t in self.tasks
            ],
            "effective_length": None if self.effective_length is None else vars(self.effective_length),
        }


def _at_json(at: AtLength) -> dict[str, Any]:
    return {"length": at.length, **dataclasses.asdict(at.score)}


def run_numbers(run: RunRecords) -> Numbers:
    """A run's overall score, its score per length and per task, and its effective length."""
    samples = list(run.samples)
    suite = is_suite_run(samples)
    asked = [r for r in samples if not is_literal_twin(r.task)]  # as its summary pools them
    if suite:
        mean = mean_over_tasks(samples)
        overall = Scored(mean.mean, mean.ci_low, mean.ci_high, mean.n)
        tasks = tuple(_suite_task(row) for row in task_table(samples))
    else:
        graded = [r.score for r in asked if r.error is None]
        overall = _scored(score_interval(graded), len(graded))
        tasks = _tasks(samples) if len({r.task for r in samples}) > 1 else ()
    return Numbers(
        path=run.path,
        model=run.manifest.spec.model,
        task=run.manifest.spec.task,
        labels=dict(run.manifest.labels),
        samples=len(samples),
        errors=sum(1 for r in samples if r.error is not None),
        overall=overall,
        lengths=_lengths(asked, by_task=suite or is_ruler_run(samples)),
        tasks=tasks,
        effective_length=None if suite else run_effective_length(samples),
    )


def _scored(interval: tuple[float | None, float, float], n: int) -> Scored:
    mean, low, high = interval
    return Scored(mean, low, high, n)


def _row_score(row: dict[str, Any]) -> Scored:
    return Scored(row["mean"], row["ci_low"], row["ci_high"], row["n"])


def _lengths(samples: Sequence[SampleRecord], by_task: bool) -> tuple[AtLength, ...]:
    """Per length: NIAH's pooled over its depths; RULER's and a suite's the mean over tasks."""
    if not by_task:
        rows = length_table(cell_table(samples))
        return tuple(AtLength(r.length, Scored(r.mean, r.ci_low, r.ci_high, r.n)) for r in rows)
    grid = task_grid(samples)
    return tuple(
        AtLength(
            r.length, Scored(r.mean, r.ci_low, r.ci_high, sum(c.n for c in grid if c.length == r.length))
        )
        for r in length_scores(grid)
    )


def _tasks(samples: Sequence[SampleRecord]) -> tuple[TaskScore, ...]:
    """Each task (RULER's, or a NIAH variant) over its lengths and at each."""
    grid = task_grid(samples)
    return tuple(
        TaskScore(
            task,
            _row_score(group_stats([r for r in samples if r.task == task])),
            tuple(
                AtLength(c.length, Scored(c.mean, c.ci_low, c.ci_high, c.n)) for c in grid if c.task == task
            ),
        )
        for task in task_order(r.task for r in samples)
    )


def _suite_task(row: dict[str, Any]) -> TaskScore:
    pooled = Scored(row["mean"], row["ci_low"], row["ci_high"], row["items"])
    return TaskScore(row["task"], pooled, tuple(AtLength(r["length"], _row_score(r)) for r in row["lengths"]))
