"""RULER's numbers from sample records: a task x length grid, per-length scores, RULER's aggregates and
a needle-depth profile.

Pure functions, like the rest of ``fathom.analysis``. The grid, the per-length rows and the depth
profile keep the records' scale, [0, 1]; RULER's aggregates are in percent (0-100), as RULER's tables
print them and as its threshold (85.6) is written.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fathom.analysis.failures import error_kinds
from fathom.analysis.stats import group_stats, longest_passing, score_interval
from fathom.records import SampleRecord
from fathom.tasks.ruler.catalogue import CATEGORIES, RELATIVE_THRESHOLD, RULER_THRESHOLD, SUITE

DEPTH_BINS = 10  # 0-10%, ..., 90-100% of the haystack
POOLED = "all tasks"  # the depth profile's rows pooled over tasks


@dataclass(frozen=True)
class TaskCell:
    """One task at one length; ``mean`` is None when no sample there was scored."""

    task: str
    length: int
    n: int
    errors: int
    mean: float | None
    ci_low: float
    ci_high: float
    beyond_window: bool


@dataclass(frozen=True)
class LengthScore:
    """The score at one length: the mean over tasks of each task's mean, so each task weighs the same
    whatever its sample count; the bounds are a 95% interval of that mean (``mean_interval``).

    All three are None when some task of the run has nothing scored at this length: a mean over another
    set of tasks would not compare with the other lengths.
    """

    length: int
    tasks: int  # tasks with a scored sample at this length
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    beyond_window: bool


@dataclass(frozen=True)
class RulerAggregates:
    """RULER's summary of per-length scores, in percent, lengths ascending.

    ``effective_length``: the longest length whose score, and every shorter one's, exceeds ``threshold``
    (RULER's 85.6). ``effective_length_relative``: the same against ``relative_cutoff``, which is
    ``relative_threshold`` times ``relative_base`` (the score at the shortest length unless given).
    The averages are None when a length has no score.
    """

    lengths: tuple[int, ...]
    scores: tuple[float | None, ...]
    average: float | None
    wavg_inc: float | None  # weights 1..n, the longest length weighs most
    wavg_dec: float | None  # weights n..1, the shortest length weighs most
    threshold: float
    effective_length: int | None
    relative_threshold: float
    relative_base: float | None
    relative_cutoff: float | None
    effective_length_relative: int | None


@dataclass(frozen=True)
class DepthBin:
    """Scored samples of one task (or ``POOLED``) whose needles' mean depth lies in [low, high)."""

    task: str
    low: float
    high: float
    n: int
    mean: float | None
    ci_low: float
    ci_high: float


def task_order(tasks: Iterable[str]) -> list[str]:
    """The tasks present, in RULER's suite order, then any others by name, their numbers read as
    numbers (``state:4`` before ``state:16``)."""
    present = set(tasks)
    return [t for t in SUITE if t in present] + sorted(present - set(SUITE), key=_by_number)


def _by_number(name: str) -> list[str | int]:
    # re.split with a group alternates text and digits, so two keys compare text with text and
    # numbers with numbers, place by place.
    return [int(part) if index % 2 else part for index, part in enumerate(re.split(r"([0-9]+)", name))]


def task_grid(records: Iterable[SampleRecord]) -> list[TaskCell]:
    """One cell per task and length present, tasks in suite order, then lengths ascending."""
    groups: defaultdict[tuple[str, int], list[SampleRecord]] = defaultdict(list)
    for record in records:
        groups[record.task, record.length].append(record)
    rank = {task: i for i, task in enumerate(task_order(task for task, _ in groups))}
    return [
        TaskCell(task=task, length=length, **group_stats(groups[task, length]))
        for task, length in sorted(groups, key=lambda key: (rank[key[0]], key[1]))
    ]


def length_scores(grid: Iterable[TaskCell]) -> list[LengthScore]:
    """One row per length of the grid: the mean over tasks, each task weighing the same."""
    cells = list(grid)
    tasks = {c.task for c in cells}
    by_length: defaultdict[int, list[TaskCell]] = defaultdict(list)
    for cell in cells:
        by_length[cell.length].append(cell)
    rows = []
    for length, group in sorted(by_length.items()):
        scored = [(c.mean, c.ci_low, c.ci_high) for c in group if c.mean is not None]
        mean, low, high = mean_interval(scored) if len(scored) == len(tasks) else (None, None, None)
        rows.append(
            LengthScore(
                length=length,
                tasks=len(scored),
                mean=mean,
                ci_low=low,
                ci_high=high,
                beyond_window=any(c.beyond_window for c in group),
            )
        )
    return rows


def category_scores(grid: Iterable[TaskCell]) -> list[dict[str, Any]]:
    """RULER's four categories (``CATEGORIES``) rolled up from the grid, each one the run has a task
    of: its tasks present and, per length, the mean over them with its 95% interval, as
    ``length_scores`` gives the mean over all tasks (each task weighing the same, intervals combined
    by ``mean_interval``; None at a length where one of them has nothing scored)."""
    cells = list(grid)
    rows = []
    for category, names in CATEGORIES.items():
        tasks = [name for name in names if any(c.task == name for c in cells)]
        if tasks:
            lengths = length_scores(c for c in cells if c.task in tasks)
            rows.append(
                {"category": category, "tasks": tasks, "lengths": [dataclasses.asdict(r) for r in lengths]}
            )
    return rows


def mean_interval(intervals: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """The mean of some (mean, low, high) intervals' means, and its 95% interval: their own intervals
    combined by MOVER (Zou and Donner 2008), each side's distances from the means added in quadrature.

    The tasks' samples are independent, so the mean of T task means has the standard error
    sqrt(sum se_t^2) / T, not the average of the tasks' (averaging the bounds keeps each task's whole
    width: about sqrt(T) times too wide). MOVER reads each se_t off the task's own interval, the Wilson or
    bootstrap one of ``stats.score_interval``, on each side apart. So it keeps Wilson's asymmetry and
    its width at 0% and 100%, where a plug-in standard error (or a bootstrap of the samples) is zero;
    it needs no resampling, and it needs only the grid's cells, as summary.json holds them. One task's
    interval is its own, and the bounds lie within the averaged bounds, so within [0, 1].
    """
    count = len(intervals)
    mean = math.fsum(m for m, _, _ in intervals) / count
    below = math.sqrt(math.fsum((m - low) ** 2 for m, low, _ in intervals)) / count
    above = math.sqrt(math.fsum((high - m) ** 2 for m, _, high in intervals)) / count
    # Clamped: the square roots can round a hair past a bound of 0 or 1.
    return mean, max(0.0, mean - below), min(1.0, mean + above)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _weighted(scores: Sequence[float], weights: Sequence[int]) -> float:
    return math.fsum(s * w for s, w in zip(scores, weights, strict=True)) / sum(weights)


def ruler_aggregates(
    per_length: Mapping[int, float | None],
    base: float | None = None,
    threshold: float = RULER_THRESHOLD,
    relative_threshold: float = RELATIVE_THRESHOLD,
) -> RulerAggregates:
    """RULER's average, weighted averages and effective lengths of per-length scores in percent."""
    lengths = sorted(per_length)
    scores = [per_length[n] for n in lengths]
    known = [s for s in scores if s is not None]
    full = bool(scores) and len(known) == len(scores)
    if base is None and scores:
        base = scores[0]
    cutoff = None if base is None else relative_threshold * base
    points = list(zip(lengths, scores, strict=True))
    increasing = list(range(1, len(known) + 1))
    return RulerAggregates(
        lengths=tuple(lengths),
        scores=tuple(scores),
        average=_mean(known) if full else None,
        wavg_inc=_weighted(known, increasing) if full else None,
        wavg_dec=_weighted(known, increasing[::-1]) if full else None,
        threshold=threshold,
        effective_length=longest_passing(points, threshold, strict=True),
        relative_threshold=relative_threshold,
        relative_base=base,
        relative_cutoff=cutoff,
        effective_length_relative=None if cutoff is None else longest_passing(points, cutoff, strict=True),
    )


def depth_bin(depth: float) -> int:
    """The bin of a depth in 0..1: [0, 0.1) is 0, ..., [0.9, 1.0] is 9."""
    return min(DEPTH_BINS - 1, max(0, math.floor(depth * DEPTH_BINS)))


def _depth_row(task: str, index: int, scores: Sequence[float]) -> DepthBin:
    mean, low, high = score_interval(scores)
    return DepthBin(task, index / DEPTH_BINS, (index + 1) / DEPTH_BINS, len(scores), mean, low, high)


def depth_profile(records: Iterable[SampleRecord]) -> list[DepthBin]:
    """Score by where the needles landed: each scored sample with needle depths goes to the bin of its
    needles' mean depth, per task (suite order) and pooled over tasks (each sample weighing the same).
    Tasks without needles (cwe, fwe) have no depths and no rows; empty bins have no rows."""
    by_task: defaultdict[str, defaultdict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    pooled: defaultdict[int, list[float]] = defaultdict(list)
    for record in records:
        if record.error is None and record.needle_depths:
            index = depth_bin(math.fsum(record.needle_depths) / len(record.needle_depths))
            by_task[record.task][index].append(record.score)
            pooled[index].append(record.score)
    rows = [
        _depth_row(task, index, scores)
        for task in task_order(by_task)
        for index, scores in sorted(by_task[task].items())
    ]
    return rows + [_depth_row(POOLED, index, scores) for index, scores in sorted(pooled.items())]


def _plain(aggregates: RulerAggregates) -> dict[str, Any]:
    """JSON's shapes: the tuples as lists, so the summary reads back equal to itself."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(aggregates).items()}


def _percent(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def ruler_summary(records: Iterable[SampleRecord]) -> dict[str, Any]:
    """Everything a RULER report needs, as plain JSON-ready values.

    The aggregates are computed twice: on the per-length means and on their lower confidence bounds.
    The lower-bound ones judge the relative threshold against the mean's base (the score at the
    shortest length), so both compare with the same short-context score.
    """
    rows = list(records)
    grid = task_grid(rows)
    lengths = length_scores(grid)
    on_mean = ruler_aggregates({r.length: _percent(r.mean) for r in lengths})
    on_lower = ruler_aggregates({r.length: _percent(r.ci_low) for r in lengths}, base=on_mean.relative_base)
    return {
        "kind": "ruler",
        "grid": [dataclasses.asdict(c) for c in grid],
        "lengths": [dataclasses.asdict(r) for r in lengths],
        "aggregates": {"mean": _plain(on_mean), "lower_bound": _plain(on_lower)},
        "categories": category_scores(grid),
        "depth_profile": [dataclasses.asdict(b) for b in depth_profile(rows)],
        "samples": len(rows),
        "errors": sum(1 for r in rows if r.error is not None),
        "error_kinds": error_kinds(rows),
    }
