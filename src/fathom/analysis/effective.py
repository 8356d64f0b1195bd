"""A run's effective length from its samples, NIAH's or RULER's: what ``fathom runs`` lists for a run
and ``fathom compare`` sets beside the other run's."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fathom.analysis.niah import summarize
from fathom.analysis.ruler import ruler_summary
from fathom.analysis.select import is_literal_twin, is_ruler_run
from fathom.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from fathom.records import SampleRecord
from fathom.tasks.ruler.catalogue import RULER_THRESHOLD

NIAH_THRESHOLD = 0.85
# A length's score and its threshold can be one number computed by two routes.
_SAME = 1e-9


@dataclass(frozen=True)
class EffectiveLength:
    """A run's effective length judged on the mean score and on its 95% lower bound, and NIAH's at
    its worst depth (``niah.worst_depth_effective_length``); None for RULER, whose depths are drawn."""

    mean: int | None
    lower_bound: int | None
    worst_depth: int | None = None


def run_effective_length(samples: Sequence[SampleRecord]) -> EffectiveLength:
    """NIAH's effective length (threshold 0.85) or RULER's (its absolute threshold, 85.6), each on the
    mean and on the 95% lower bound, and NIAH's at the worst depth; all None without samples."""
    if not samples:
        return EffectiveLength(None, None)
    samples = [r for r in samples if not is_literal_twin(r.task)]  # as the summary pools them
    if not samples:
        return EffectiveLength(None, None)
    if is_ruler_run(samples):
        aggregates = ruler_summary(samples)["aggregates"]
        return EffectiveLength(
            aggregates["mean"]["effective_length"], aggregates["lower_bound"]["effective_length"]
        )
    effective = summarize(samples, NIAH_THRESHOLD)["effective_length"]
    return EffectiveLength(effective["mean"], effective["lower_bound"], effective["worst_depth"])


@dataclass(frozen=True)
class EffectiveLengthChange:
    """Both runs' effective lengths on the paired samples, and the paired bootstrap's judgement of a
    drop: each run's 95% interval, the change's in steps of the sweep's lengths (negative: shorter),
    ``p_value`` the share of resamples in which the new run's is not shorter, and whether that share
    stays within the gate's share of alpha (a drop seen in the data and in all but that share of the
    resamples)."""

    base: int | None
    new: int | None
    base_low: int | None
    base_high: int | None
    low: int | None  # the new run's
    high: int | None
    steps_low: int
    steps_high: int
    p_value: float
    alpha: float
    regressed: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def effective_length_change(
    pairs: Sequence[tuple[SampleRecord, SampleRecord]], alpha: float
) -> EffectiveLengthChange | None:
    """Resample the pairs within each cell (a pair keeps its base and new together, so the runs'
    dependence is kept) and judge both runs' effective lengths in every resample, as
    ``run_effective_length`` judges them; None without pairs outside the literal twins."""
    kept = [(b, n) for b, n in pairs if not is_literal_twin(b.task)]  # as the summary pools them
    if not kept:
        return None
    scale = _EffectiveScale.of([b for b, _ in kept])
    cells: defaultdict[tuple[str, int, float | None], list[tuple[float, float]]] = defaultdict(list)
    for b, n in kept:
        cells[b.task, b.length, b.depth].append((b.score, n.score))
    lengths = sorted({length for _, length, _ in cells})
    weights = scale.weights(cells)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    totals = np.zeros((2, BOOTSTRAP_RESAMPLES + 1, len(lengths)))  # row 0: the data as it is
    for key, scores in cells.items():
        values = np.asarray(scores)
        picks = np.vstack(
            [np.arange(len(values)), rng.integers(0, len(values), (BOOTSTRAP_RESAMPLES, len(values)))]
        )
        sums = values[picks].sum(axis=1)  # (resamples + 1, 2)
        totals[:, :, lengths.index(key[1])] += weights[key] * sums.T
    steps = np.stack([scale.passing(totals[run], scale.complete(cells, lengths)) for run in (0, 1)])
    change = steps[1] - steps[0]
    resampled = change[1:]
    p_value = float(np.mean(resampled >= 0))
    named = [None, *lengths]  # a step of -1: no length passes

    def length(step: float) -> int | None:
        return named[int(step) + 1]

    def interval(values: npt.NDArray[np.int64]) -> tuple[float, float]:
        low, high = np.quantile(values, [0.025, 0.975], method="inverted_cdf")
        return float(low), float(high)

    base_low, base_high = interval(steps[0, 1:])
    new_low, new_high = interval(steps[1, 1:])
    steps_low, steps_high = interval(resampled)
    return EffectiveLengthChange(
        base=length(steps[0, 0]),
        new=length(steps[1, 0]),
        base_low=length(base_low),
        base_high=length(base_high),
        low=length(new_low),
        high=length(new_high),
        steps_low=int(steps_low),
        steps_high=int(steps_high),
        p_value=p_value,
        alpha=alpha,
        regressed=bool(change[0] < 0 and p_value <= alpha),
    )


@dataclass(frozen=True)
class _EffectiveScale:
    """How a run kind turns per-length scores into an effective length: NIAH pools a length's samples
    and passes at 0.85 or above; RULER averages its tasks' means and passes above 85.6%."""

    ruler: bool

    @classmethod
    def of(cls, samples: Sequence[SampleRecord]) -> _EffectiveScale:
        return cls(is_ruler_run(samples))

    def weights(self, cells: Mapping[tuple[str, int, float | None], Sequence[Any]]) -> dict[Any, float]:
        """Each cell's weight in its length's score, per pair: a length's mean is then a weighted sum."""
        at_length: defaultdict[int, int] = defaultdict(int)
        tasks: defaultdict[int, set[str]] = defaultdict(set)
        by_task: defaultdict[tuple[str, int], int] = defaultdict(int)
        for (task, length, _), scores in cells.items():
            at_length[length] += len(scores)
            tasks[length].add(task)
            by_task[task, length] += len(scores)
        if self.ruler:
            return {k: 1.0 / (len(tasks[k[1]]) * by_task[k[0], k[1]]) for k in cells}
        return {k: 1.0 / at_length[k[1]] for k in cells}

    def complete(
        self, cells: Mapping[tuple[str, int, float | None], Any], lengths: Sequence[int]
    ) -> list[bool]:
        """Whether each length has every task: RULER's score at a length missing one is no score."""
        if not self.ruler:
            return [True] * len(lengths)
        tasks = {task for task, _, _ in cells}
        return [{task for task, at, _ in cells if at == length} == tasks for length in lengths]

    def passing(self, scores: npt.NDArray[np.float64], complete: Sequence[bool]) -> npt.NDArray[np.int64]:
        """Per resample (rows of ``scores``, a column a length), the index of the effective length
        among the lengths; -1 for none."""
        passes = scores * 100.0 > RULER_THRESHOLD + _SAME if self.ruler else scores >= NIAH_THRESHOLD - _SAME
        passes &= np.asarray(complete)[None, :]
        leading: npt.NDArray[np.int64] = np.cumprod(passes, axis=1).sum(axis=1)
        return leading - 1
