"""Two runs of a real suite compared task by task: what a checkpoint on LongBench or InfiniteBench is
judged on.

A suite reports one score per task, so its comparison's verdicts are per task: the exact sign test
over the task's items, Holm's correction over the tasks, and the mean paired difference with a 95%
percentile-bootstrap interval over the items (F1 and ROUGE are fractional, so a difference is no
count of flips). An item asked at several length limits is one pair, of its mean scores over them:
the same question at 1k and at 8k is not two independent pieces of evidence, and counting it twice
would narrow the interval and shrink the p-value of the gate. The task x length cells are compared as
every run's are (``fathom.analysis.paired``) and drawn in the heatmap; the verdicts, and so ``fathom
compare``'s exit status, are the tasks'.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
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
from fathom.analysis.suites import item_key


@dataclass(frozen=True)
class TaskComparison:
    """One task over its items, each one pair (``_item_pair``): ``test`` counts items where it says
    pairs, and its means are the items'; ``pairs`` is how many pairs of samples they were made of.
    ``ci_low`` and ``ci_high`` bound the mean of new minus base over the items."""

    task: str
    pairs: int
    test: PairedTest
    ci_low: float
    ci_high: float
    p_adjusted: float  # Holm's, over the tasks
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        test = self.test.to_json()
        return {
            "task": self.task,
            "items": test.pop("pairs"),
            "pairs": self.pairs,
            **test,
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
    graded = graded_pairs(pairs)
    by_item: defaultdict[tuple[str, str], list[Pair]] = defaultdict(list)
    for pair in graded:
        by_item[item_key(pair[0])].append(pair)
    by_task: defaultdict[str, list[Pair]] = defaultdict(list)
    for (task, _), item_pairs in by_item.items():
        by_task[task].append(_item_pair(item_pairs))
    counts = Counter(base_record.task for base_record, _ in graded)
    tasks = task_order(by_task)
    tested = tested_groups([by_task[task] for task in tasks], alpha)
    fields = {field.name: getattr(comparison, field.name) for field in dataclasses.fields(comparison)}
    return SuiteComparison(
        **fields,
        tasks=tuple(
            TaskComparison(
                task, counts[task], test, *bootstrap_interval(_differences(by_task[task])), p, verdict
            )
            for task, (test, p, verdict) in zip(tasks, tested, strict=True)
        ),
        left_out_items=other_items,
        data_differences=_data_differences(base, new),
    )


def _item_pair(pairs: Sequence[Pair]) -> Pair:
    """An item's pairs at its length limits as one pair: each run's mean score over them."""
    base, new = pairs[0]
    return (
        dataclasses.replace(base, score=math.fsum(b.score for b, _ in pairs) / len(pairs)),
        dataclasses.replace(new, score=math.fsum(n.score for _, n in pairs) / len(pairs)),
    )


def _differences(pairs: Sequence[Pair]) -> list[float]:
    return [new.score - base.score for base, new in pairs]


def _data_differences(base: RunRecords, new: RunRecords) -> tuple[str, ...]:
    """The data files whose sha256 differs between the runs, or that only one of them read."""
    first, second = (run.manifest.identity.task.get("files", {}) for run in (base, new))
    return tuple(sorted(name for name in first.keys() | second.keys() if first.get(name) != second.get(name)))
