"""Two runs of a real suite compared task by task: what a checkpoint on LongBench or InfiniteBench is
judged on.

A suite reports one score per task, so its comparison's verdicts are per task: the exact sign test
over the task's pairs (its items at every length limit), Holm's correction over the tasks, and the
mean paired difference with a 95% percentile-bootstrap interval of the pairs' differences (F1 and
ROUGE are fractional, so a difference is no count of flips). The task x length cells are compared as
every run's are (``fathom.analysis.paired``) and drawn in the heatmap; the verdicts, and so ``fathom
compare``'s exit status, are the tasks'.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.analysis.paired import (
    Comparison,
    Pair,
    PairedTest,
    RunRecords,
    Verdict,
    compare_records,
    graded_pairs,
    tested_groups,
    twins,
)
from fathom.analysis.ruler import task_order
from fathom.analysis.stats import bootstrap_interval


@dataclass(frozen=True)
class TaskComparison:
    """One task over all its pairs; ``ci_low`` and ``ci_high`` bound the mean of new minus base."""

    task: str
    test: PairedTest
    ci_low: float
    ci_high: float
    p_adjusted: float  # Holm's, over the tasks
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            **self.test.to_json(),
            "difference_ci_low": self.ci_low,
            "difference_ci_high": self.ci_high,
            "p_adjusted": self.p_adjusted,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class SuiteComparison(Comparison):
    """A comparison of two suite runs: the cells as any comparison's, the tasks with the verdicts; the
    pairs left out because the runs held different items under one sample id, and the data files whose
    contents differ (samples are then paired only where both runs read the same item)."""

    tasks: tuple[TaskComparison, ...] = ()
    left_out_items: int = 0
    data_differences: tuple[str, ...] = ()

    @property
    def regressed(self) -> Sequence[TaskComparison]:
        return [t for t in self.tasks if t.verdict == "regressed"]

    @property
    def improved(self) -> Sequence[TaskComparison]:
        return [t for t in self.tasks if t.verdict == "improved"]

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        # RULER's thresholds say nothing of a suite's tasks: its effective lengths are no result.
        del data["effective_length"]
        data["left_out"]["items"] = self.left_out_items
        return data | {
            "tasks": [task.to_json() for task in self.tasks],
            "data_differences": list(self.data_differences),
        }


def compare_suites(base: RunRecords, new: RunRecords, alpha: float = 0.05) -> SuiteComparison:
    """Compare two suite runs of one spec that differ in the model (and may differ in the data folder):
    the cells as ``compare_records`` does, and each task."""
    comparison = compare_records(base, new, alpha)
    pairs, other_items, _ = twins(base, new)
    by_task: defaultdict[str, list[Pair]] = defaultdict(list)
    for pair in graded_pairs(pairs):
        by_task[pair[0].task].append(pair)
    tasks = task_order(by_task)
    tested = tested_groups([by_task[task] for task in tasks], alpha)
    fields = {field.name: getattr(comparison, field.name) for field in dataclasses.fields(comparison)}
    return SuiteComparison(
        **fields,
        tasks=tuple(
            TaskComparison(task, test, *bootstrap_interval(_differences(by_task[task])), p, verdict)
            for task, (test, p, verdict) in zip(tasks, tested, strict=True)
        ),
        left_out_items=other_items,
        data_differences=_data_differences(base, new),
    )


def _differences(pairs: Sequence[Pair]) -> list[float]:
    return [new.score - base.score for base, new in pairs]


def _data_differences(base: RunRecords, new: RunRecords) -> tuple[str, ...]:
    """The data files whose sha256 differs between the runs, or that only one of them read."""
    first, second = (run.manifest.identity.task.get("files", {}) for run in (base, new))
    return tuple(sorted(name for name in first.keys() | second.keys() if first.get(name) != second.get(name)))
