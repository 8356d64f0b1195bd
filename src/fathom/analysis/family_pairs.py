"""Two runs of a family whose tasks lie along one axis compared along it: state tracking by operation
count, the bAbI-style stories by task, long outputs by item count, multi-round co-reference by repeat
count. What a checkpoint on them is judged on, beside the cells.

Each value of the axis is a task of the run (``state:16``, ``babi:qa3``, ``listing:32``), so its test
is the task's (``fathom.analysis.pairing.compare_tasks``, each sample its own item): the exact sign
test over its pairs and the mean paired difference of the score with a 95% percentile-bootstrap
interval; the adjusted p and the verdict are the gate's task level. Beside the score, a family's own
measures, each one's change with its interval over the same pairs (long outputs' precision and recall:
an F1 that holds can hide a model that lists more ids and gets fewer right; mrcr's answers that open
with the prefix, and those exact); and, for every family, the answers cut at their output budget in
each run with the exact sign test over the pairs whose cut changed: a checkpoint that starts running
out of budget loses items for that reason alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from fathom.analysis.listing import is_truncated
from fathom.analysis.paired import Comparison, compare_records
from fathom.analysis.pairing import (
    Pair,
    RunRecords,
    TaskComparison,
    compare_tasks,
    graded_pairs,
    sign_test,
    twins,
)
from fathom.analysis.stats import bootstrap_interval
from fathom.analysis.suite_pairs import gated
from fathom.records import SampleRecord
from fathom.scoring import MRCR_PREFIX_CHARS
from fathom.tasks.counted_lines import cell_count
from fathom.tasks.listing import item_scores

Measure = Callable[[SampleRecord], float]


def _precision(record: SampleRecord) -> float:
    return item_scores(record.output, record.answers).precision


def _recall(record: SampleRecord) -> float:
    return item_scores(record.output, record.answers).recall


def _prefixed(record: SampleRecord) -> float:
    """1 where an mrcr answer opens with its prefix: a drop here is a model that stopped following the
    instruction, not one that lost the piece."""
    return float(record.output.startswith(record.answers[0][:MRCR_PREFIX_CHARS]))


def _exact(record: SampleRecord) -> float:
    return float(record.score == 1.0)


@dataclass(frozen=True)
class Family:
    """A family's name (its tasks' prefix), its axis as its summary names it, the axis's value for a
    task's name (``listing:32`` -> 32), and the measures compared beside its score."""

    name: str
    axis: str
    value: Callable[[str], int | str]
    measures: Mapping[str, Measure] = dataclasses.field(default_factory=dict)


FAMILIES = (
    Family("state", "ops", cell_count),
    Family("babi", "task", str),  # its task's name, as its summary's table has it
    Family("listing", "items", cell_count, {"precision": _precision, "recall": _recall}),
    Family("mrcr", "repeats", cell_count, {"prefixed": _prefixed, "exact": _exact}),
)


def family_of(records: Iterable[SampleRecord]) -> Family | None:
    """The family a run's samples are of, or None for any other run."""
    names = {record.task.partition(":")[0] for record in records if ":" in record.task}
    return next((family for family in FAMILIES if family.name in names), None)


@dataclass(frozen=True)
class MeasureChange:
    """A measure's mean in each run over the pairs, and the mean paired difference (new minus base)
    with its 95% percentile-bootstrap interval."""

    name: str
    base_mean: float
    new_mean: float
    ci_low: float
    ci_high: float

    def to_json(self) -> dict[str, float]:
        return {
            "base_mean": self.base_mean,
            "new_mean": self.new_mean,
            "difference": self.new_mean - self.base_mean,
            "difference_ci_low": self.ci_low,
            "difference_ci_high": self.ci_high,
        }


@dataclass(frozen=True)
class TruncationChange:
    """The answers cut at their budget in each run over the pairs; ``newly`` cut in the new run only,
    ``no_longer`` in the base run only; the two-sided exact sign test over those."""

    base: int
    new: int
    newly: int
    no_longer: int
    p_value: float

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def truncation_change(pairs: Sequence[Pair]) -> TruncationChange:
    newly = sum(is_truncated(n) and not is_truncated(b) for b, n in pairs)
    no_longer = sum(is_truncated(b) and not is_truncated(n) for b, n in pairs)
    return TruncationChange(
        sum(is_truncated(b) for b, _ in pairs),
        sum(is_truncated(n) for _, n in pairs),
        newly,
        no_longer,
        sign_test(newly, no_longer),
    )


def measure_change(name: str, measure: Measure, pairs: Sequence[Pair]) -> MeasureChange:
    base = [measure(b) for b, _ in pairs]
    new = [measure(n) for _, n in pairs]
    interval = bootstrap_interval([n - b for b, n in zip(base, new, strict=True)])
    return MeasureChange(name, math.fsum(base) / len(pairs), math.fsum(new) / len(pairs), *interval)


@dataclass(frozen=True)
class AxisChange:
    """One value of the family's axis: its task's test (the gate's verdict), its measures' changes
    and its truncated answers'."""

    value: int | str
    task: TaskComparison
    measures: tuple[MeasureChange, ...]
    truncated: TruncationChange

    def to_json(self, axis: str) -> dict[str, Any]:
        task = self.task.to_json()
        del task["items"]  # each sample is its own item: as many as the pairs
        return {
            axis: self.value,
            **task,
            "measures": {m.name: m.to_json() for m in self.measures},
            "truncated": self.truncated.to_json(),
        }


@dataclass(frozen=True)
class FamilyComparison(Comparison):
    """A comparison of two runs of a family: the cells and the gate as any comparison's, and the
    family's axis value by value, with the answers cut at their budget over every pair."""

    family: str = ""
    axis: str = ""
    rows: tuple[AxisChange, ...] = ()
    truncated: TruncationChange | None = None

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {
            "family": {
                "name": self.family,
                "axis": self.axis,
                "rows": [row.to_json(self.axis) for row in self.rows],
                "truncated": None if self.truncated is None else self.truncated.to_json(),
            }
        }


def compare_families(base: RunRecords, new: RunRecords, alpha: float = 0.05) -> Comparison:
    """``compare_records``' comparison, with the family's axis compared value by value where the runs
    are of a family (``FAMILIES``); any other run's comparison as it is."""
    comparison = compare_records(base, new, alpha)
    family = family_of(base.samples)
    if family is None:
        return comparison
    graded = graded_pairs(twins(base, new).pairs)
    by_task: defaultdict[str, list[Pair]] = defaultdict(list)
    for pair in graded:
        by_task[pair[0].task].append(pair)
    tasks = gated(compare_tasks(graded, alpha, attrgetter("sample_id")), comparison.gate)
    rows = tuple(
        AxisChange(
            family.value(task.task),
            task,
            tuple(measure_change(name, m, by_task[task.task]) for name, m in family.measures.items()),
            truncation_change(by_task[task.task]),
        )
        for task in tasks
    )
    fields = {field.name: getattr(comparison, field.name) for field in dataclasses.fields(comparison)}
    return FamilyComparison(
        **fields, family=family.name, axis=family.axis, rows=rows, truncated=truncation_change(graded)
    )
