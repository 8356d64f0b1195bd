"""Two runs of a real suite compared task by task: what a checkpoint on LongBench or InfiniteBench is
judged on.

A suite reports one score per task, so its comparison lists each task: the exact sign test over the
task's items and the mean paired difference with a 95% percentile-bootstrap interval over the items
(``fathom.analysis.pairing.compare_tasks``; an item asked at several length limits is one pair, of its
mean scores over them). The verdicts are the gate's (``fathom.analysis.gate``), whose task level tests
the same item pairs, flipping an item whole; its other levels (overall, length limit, cell) gate too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.analysis.gate import Gate
from fathom.analysis.paired import Comparison, compare_records
from fathom.analysis.pairing import RunRecords, TaskComparison, compare_tasks, graded_pairs, twins
from fathom.analysis.suites import item_key


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
    the cells as ``compare_records`` does, and each task over its items."""
    comparison = compare_records(base, new, alpha)
    pairs, other_items, _ = twins(base, new)
    graded = graded_pairs(pairs)
    fields = {field.name: getattr(comparison, field.name) for field in dataclasses.fields(comparison)}
    return SuiteComparison(
        **fields,
        tasks=gated(compare_tasks(graded, alpha, item_key), comparison.gate),
        left_out_items=other_items,
        data_differences=_data_differences(base, new),
    )


def gated(tasks: Sequence[TaskComparison], gate: Gate) -> tuple[TaskComparison, ...]:
    """The tasks with the gate's adjusted p and verdict (a one-task run's task is the overall test): a
    suite's, and a family's along its axis (``family_pairs``)."""
    tested = {test.task: test for test in gate.at("task")} or {
        task.task: gate.at("overall")[0] for task in tasks
    }
    return tuple(
        dataclasses.replace(task, p_adjusted=tested[task.task].p_adjusted, verdict=tested[task.task].verdict)
        for task in tasks
    )


def _data_differences(base: RunRecords, new: RunRecords) -> tuple[str, ...]:
    """The data files whose sha256 differs between the runs, or that only one of them read."""
    first, second = (run.manifest.identity.task.get("files", {}) for run in (base, new))
    return tuple(sorted(name for name in first.keys() | second.keys() if first.get(name) != second.get(name)))
