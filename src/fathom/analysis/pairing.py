"""Two runs' samples paired, and the paired test: the exact sign test over the pairs, Holm's
correction over groups of them, each group's verdict, and a group per task over its items. What the
comparison of two runs is made of: their grids' cells (``paired``), a real suite's tasks
(``suite_pairs``) and their no-context controls (``control``).

Two runs of one spec that differ only in the model build byte-identical prompts (same seeds, tokenizer
and task identity), so every sample of the new run has a twin in the base run that asked the very same
question. Comparing twins removes the variation between needles, which unpaired tests would have to
average away.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from fathom.analysis.ruler import task_order
from fathom.analysis.stats import bootstrap_interval
from fathom.errors import RunFolderError
from fathom.manifest import Manifest
from fathom.records import SampleRecord

TEST = "exact McNemar (sign test on paired scores)"
CORRECTION = "holm"

Verdict = Literal["regressed", "improved", "unchanged"]
Pair = tuple[SampleRecord, SampleRecord]  # (base, new), the same sample id and prompt


@dataclass(frozen=True)
class PairedTest:
    """The exact sign test over some pairs: ``worse`` pairs scored lower in the new run, ``better``
    higher; ties carry no evidence of a change either way and are left out of the test."""

    pairs: int
    base_mean: float
    new_mean: float
    worse: int
    better: int
    p_value: float

    @property
    def difference(self) -> float:
        return self.new_mean - self.base_mean

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "difference": self.difference}


def sign_test(worse: int, better: int) -> float:
    """The two-sided exact sign test: min(1, 2 P(X <= min(worse, better))) with X ~ Binomial(n, 1/2),
    n = worse + better. On 0/1 scores this is the exact McNemar test.

    Exact in integers with one division at the end, which Python rounds correctly for integers of any
    size, so it neither overflows nor loses precision for n in the thousands. Each binomial coefficient
    is the one before times (n - i) / (i + 1), exactly: summing math.comb(n, i) afresh for every i
    takes seconds at n = 5000, this takes milliseconds.
    """
    if worse < 0 or better < 0:
        raise ValueError(f"counts must be >= 0, got worse={worse}, better={better}")
    n = worse + better
    if n == 0:
        return 1.0
    tail, coefficient = 0, 1  # coefficient = math.comb(n, i)
    for i in range(min(worse, better) + 1):
        tail += coefficient
        coefficient = coefficient * (n - i) // (i + 1)
    return min(1.0, 2 * tail / (1 << n))


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: the i-th smallest (from 0) times
    (m - i), kept non-decreasing and capped at 1. Rejecting where the adjusted p is below alpha keeps
    the chance of any false rejection at most alpha, whatever the dependence between the tests."""
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_test(pairs: Sequence[Pair]) -> PairedTest:
    """The sign test on the per-pair differences of scores; fractional scores count by their sign."""
    if not pairs:
        raise ValueError("no pairs to test")
    worse = sum(1 for base, new in pairs if new.score < base.score)
    better = sum(1 for base, new in pairs if new.score > base.score)
    return PairedTest(
        pairs=len(pairs),
        base_mean=math.fsum(base.score for base, _ in pairs) / len(pairs),
        new_mean=math.fsum(new.score for _, new in pairs) / len(pairs),
        worse=worse,
        better=better,
        p_value=sign_test(worse, better),
    )


@dataclass(frozen=True)
class RunRecords:
    """A run as a comparison reads it: its folder, its manifest, its graded samples and, apart from
    them, its no-context controls (none in a run made with --no-control or before controls)."""

    path: Path
    manifest: Manifest
    samples: Sequence[SampleRecord]
    controls: Sequence[SampleRecord] = ()


class Twins(NamedTuple):
    """The samples two runs share, as ``pairs`` of one sample id and one item (errored ones too); and
    those left out: ids whose item differs between the runs, ids in one run only."""

    pairs: list[Pair]
    other_items: int
    unpaired: int


def twins(base: RunRecords, new: RunRecords) -> Twins:
    """Pair the runs' samples; refuse runs that share ids but no item, or whose twins' prompts differ."""
    base_samples, new_samples = _by_id(base), _by_id(new)
    shared = sorted(base_samples.keys() & new_samples.keys())
    # A real suite's sample id is a place in its data file: runs that read different files can hold
    # different items there, which asked different questions.
    same = [i for i in shared if base_samples[i].item_id == new_samples[i].item_id]
    if shared and not same:
        first = shared[0]
        raise RunFolderError(
            f"'{base.path}' and '{new.path}' hold different items under all {len(shared)} sample ids they "
            f"share (first: {first}, item {base_samples[first].item_id} against "
            f"{new_samples[first].item_id}): they read different data files; compare runs of one --data"
        )
    _check_same_hashes({i: base_samples[i] for i in same}, new_samples)
    unpaired = len(base_samples.keys() ^ new_samples.keys())
    return Twins([(base_samples[i], new_samples[i]) for i in same], len(shared) - len(same), unpaired)


def graded_pairs(pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs that both runs graded: an error in either leaves no grade to compare."""
    return [(b, n) for b, n in pairs if b.error is None and n.error is None]


def _by_id(run: RunRecords) -> dict[str, SampleRecord]:
    if not run.samples:
        raise RunFolderError(
            f"run folder '{run.path}' has no graded samples to compare (it has not run yet, or it holds "
            "perplexity documents only): run it first"
        )
    return {record.sample_id: record for record in run.samples}


def _check_same_hashes(base: dict[str, SampleRecord], new: dict[str, SampleRecord]) -> None:
    """Equal manifests should give equal prompts; a differing hash means the prompt builder changed
    between the runs (a fathom upgrade, an edited corpus file), and twins that are not twins would
    make the test meaningless."""
    differing = sorted(i for i in base.keys() & new.keys() if base[i].prompt_sha256 != new[i].prompt_sha256)
    if differing:
        raise RunFolderError(
            f"{len(differing)} paired samples have different prompts (first: {differing[0]}) although the "
            "manifests match: the prompt builder changed between the runs; re-run both with one fathom "
            "version"
        )


def tested_groups(groups: Sequence[Sequence[Pair]], alpha: float) -> list[tuple[PairedTest, float, Verdict]]:
    """Each group's sign test, its p adjusted by Holm's method over the groups, and its verdict."""
    tests = [paired_test(group) for group in groups]
    adjusted = holm_adjust([t.p_value for t in tests])
    return [(t, p, _verdict(t, p, alpha)) for t, p in zip(tests, adjusted, strict=True)]


def _verdict(test: PairedTest, p_adjusted: float, alpha: float) -> Verdict:
    """Significant after Holm, in the direction of the mean. The signs must point the same way: with
    fractional scores a few large drops can outweigh many small gains, and then the test's evidence
    (the gains) and the mean disagree about the direction, which is no verdict."""
    if p_adjusted >= alpha:
        return "unchanged"
    if test.difference < 0 and test.worse > test.better:
        return "regressed"
    if test.difference > 0 and test.better > test.worse:
        return "improved"
    return "unchanged"


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


def item_pairs(pairs: Sequence[Pair], item: Callable[[SampleRecord], Hashable]) -> dict[str, list[Pair]]:
    """Each task's pairs, one per item: the pairs whose base record has one ``item`` key (a suite's
    item asked at several length limits) made one pair of their mean scores. The same question asked
    at 1k and at 8k is not two independent pieces of evidence, and counting it twice would narrow
    the interval and shrink the p-value of the gate."""
    by_item: defaultdict[Hashable, list[Pair]] = defaultdict(list)
    for pair in pairs:
        by_item[item(pair[0])].append(pair)
    by_task: defaultdict[str, list[Pair]] = defaultdict(list)
    for grouped in by_item.values():
        by_task[grouped[0][0].task].append(_item_pair(grouped))
    return dict(by_task)


def compare_tasks(
    pairs: Sequence[Pair], alpha: float, item: Callable[[SampleRecord], Hashable]
) -> tuple[TaskComparison, ...]:
    """Each task over its items (``item_pairs``): the exact sign test, Holm's correction over the
    tasks, and the mean paired difference with a 95% percentile-bootstrap interval over the items
    (F1 and ROUGE are fractional, so a difference is no count of flips). In RULER's suite order."""
    by_task = item_pairs(pairs, item)
    counts = Counter(base.task for base, _ in pairs)
    tasks = task_order(by_task)
    tested = tested_groups([by_task[task] for task in tasks], alpha)
    return tuple(
        TaskComparison(task, counts[task], test, *bootstrap_interval(differences(by_task[task])), p, verdict)
        for task, (test, p, verdict) in zip(tasks, tested, strict=True)
    )


def _item_pair(pairs: Sequence[Pair]) -> Pair:
    """An item's pairs at its length limits as one pair: each run's mean score over them."""
    base, new = pairs[0]
    return (
        dataclasses.replace(base, score=math.fsum(b.score for b, _ in pairs) / len(pairs)),
        dataclasses.replace(new, score=math.fsum(n.score for _, n in pairs) / len(pairs)),
    )


def differences(pairs: Sequence[Pair]) -> list[float]:
    """Each pair's new score minus its base score."""
    return [new.score - base.score for base, new in pairs]
