"""Did a new checkpoint regress against its baseline? Paired exact tests over the samples two runs share.

Two runs of one spec that differ only in the model build byte-identical prompts (same seeds, tokenizer
and task identity), so every sample of the new run has a twin in the base run that asked the very same
question. Comparing twins removes the variation between needles, which unpaired tests would have to
average away: the exact McNemar test (a sign test on the paired scores) per cell, Holm's correction
over the cells, and a pooled test over all pairs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

from fathom.analysis.effective import EffectiveLength, run_effective_length
from fathom.analysis.failures import FAILURE_KINDS, failure_counts
from fathom.analysis.ruler import task_order
from fathom.analysis.suites import is_suite_run
from fathom.errors import RunFolderError
from fathom.manifest import Identity, Manifest
from fathom.records import SampleRecord

TEST = "exact McNemar (sign test on paired scores)"
CORRECTION = "holm"

Verdict = Literal["regressed", "improved", "unchanged"]
Pair = tuple[SampleRecord, SampleRecord]  # (base, new), the same sample id and prompt
# NIAH cells sit at fixed depths: (None, length, depth), or (task, length, depth) in a run of several
# variants (haystack domains, literal twins), whose cells at one length and depth are not one cell.
# RULER draws depths per sample, so its cells are tasks: (task, length, None).
CellKey = tuple[str | None, int, float | None]
# What a real suite's runs may differ in and still have asked the same questions: the folder and the
# files its items were read from. Each pair must then be of one item (``twins``) with one prompt.
SUITE_INPUTS = ("spec.data", "task.files")


@dataclass(frozen=True)
class RunRef:
    path: Path
    model: str

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "model": self.model}


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


@dataclass(frozen=True)
class CellComparison:
    length: int
    depth: float | None  # NIAH's cells
    task: str | None  # RULER's cells, and NIAH's in a run of several variants
    test: PairedTest
    p_adjusted: float  # Holm's, over all cells of the comparison
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        where = {"length": self.length, "depth": self.depth, "task": self.task}
        return {**where, **self.test.to_json(), "p_adjusted": self.p_adjusted, "verdict": self.verdict}


class Tested(Protocol):
    """What a comparison gives its verdicts to: a cell, or a real suite's task (``suite_pairs``)."""

    @property
    def verdict(self) -> Verdict: ...


@dataclass(frozen=True)
class FailureChange:
    """How many of the samples both runs hold fail by one kind (``fathom.analysis.failures``) in
    each run: a checkpoint that starts answering distractors, or hedging, shows here even where
    its score barely moves."""

    kind: str
    base: int
    new: int


@dataclass(frozen=True)
class Comparison:
    """Two runs of one spec compared pair by pair: per cell with Holm's correction over the cells,
    pooled over all pairs, and their effective lengths on the pairs both graded."""

    base: RunRef
    new: RunRef
    alpha: float
    left_out_errors: int  # pairs with an error in either run: no grade to compare
    left_out_unpaired: int  # samples present in one run only (a partial run)
    overall: PairedTest  # all pairs pooled; reported, not used for the verdicts
    cells: tuple[CellComparison, ...]
    base_effective_length: EffectiveLength
    new_effective_length: EffectiveLength
    # Where the runs' machines or backend builds differ, which alone can change greedy answers.
    machine_differences: tuple[str, ...] = ()
    # Each failure kind's count among the samples both runs hold (errored ones too), in FAILURE_KINDS'
    # order: the pairs plus those left out for an error.
    failures: tuple[FailureChange, ...] = ()

    @property
    def regressed(self) -> Sequence[Tested]:
        return [c for c in self.cells if c.verdict == "regressed"]

    @property
    def improved(self) -> Sequence[Tested]:
        return [c for c in self.cells if c.verdict == "improved"]

    def to_json(self) -> dict[str, Any]:
        overall = self.overall
        return {
            "base": self.base.to_json(),
            "new": self.new.to_json(),
            "alpha": self.alpha,
            "correction": CORRECTION,
            "test": TEST,
            "pairs": overall.pairs,
            "left_out": {"errors": self.left_out_errors, "unpaired": self.left_out_unpaired},
            "overall": {
                "base_mean": overall.base_mean,
                "new_mean": overall.new_mean,
                "worse": overall.worse,
                "better": overall.better,
                "p_value": overall.p_value,
            },
            "cells": [c.to_json() for c in self.cells],
            "machine_differences": list(self.machine_differences),
            "failures": {f.kind: {"base": f.base, "new": f.new} for f in self.failures},
            "effective_length": {
                "base": dataclasses.asdict(self.base_effective_length),
                "new": dataclasses.asdict(self.new_effective_length),
            },
            "regressions": len(self.regressed),
            "improvements": len(self.improved),
        }


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
    """A run as a comparison reads it: its folder, its manifest and its graded samples (no controls)."""

    path: Path
    manifest: Manifest
    samples: Sequence[SampleRecord]


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


def compare_records(base: RunRecords, new: RunRecords, alpha: float = 0.05) -> Comparison:
    """Compare two runs of one spec that differ only in the model; refuse runs whose prompts differ."""
    if not 0.0 < alpha < 1.0:
        raise RunFolderError(f"alpha must lie strictly between 0 and 1, got {alpha}: pass e.g. --alpha 0.05")
    base_identity, new_identity = base.manifest.identity, new.manifest.identity
    _check_same_prompts(base_identity, new_identity, SUITE_INPUTS if is_suite_run(base.samples) else ())
    pairs, _, unpaired = twins(base, new)
    graded = graded_pairs(pairs)
    if not graded:
        raise RunFolderError(
            f"'{base.path}' and '{new.path}' share no sample that both graded without an error: "
            "finish both runs (run the same command again to resume), then compare"
        )
    return Comparison(
        base=RunRef(base.path, base_identity.spec.model),
        new=RunRef(new.path, new_identity.spec.model),
        alpha=alpha,
        left_out_errors=len(pairs) - len(graded),
        left_out_unpaired=unpaired,
        overall=paired_test(graded),
        cells=_compare_cells(graded, alpha),
        base_effective_length=run_effective_length([b for b, _ in graded]),
        new_effective_length=run_effective_length([n for _, n in graded]),
        machine_differences=tuple(machine_differences(base.manifest, new.manifest)),
        failures=failure_changes(pairs),
    )


def failure_changes(pairs: Sequence[Pair]) -> tuple[FailureChange, ...]:
    """Each failure kind's count in the base run and in the new, over the same samples."""
    base, new = failure_counts(b for b, _ in pairs), failure_counts(n for _, n in pairs)
    return tuple(FailureChange(kind, base[kind], new[kind]) for kind in FAILURE_KINDS)


def _by_id(run: RunRecords) -> dict[str, SampleRecord]:
    if not run.samples:
        raise RunFolderError(
            f"run folder '{run.path}' has no graded samples to compare (it has not run yet, or it holds "
            "perplexity documents only): run it first"
        )
    return {record.sample_id: record for record in run.samples}


def _check_same_prompts(base: Identity, new: Identity, may_differ: Collection[str] = ()) -> None:
    """Refuse runs that did not build the same prompts: the spec but its model, the tokenizer and the
    task identity (but the keys ``may_differ`` names) must be equal. The backend's identity is what is
    being compared, so it may differ. The specs are compared as written: a key that one lacks is a
    difference to show, as it reads."""
    base_spec, new_spec = base.written["spec"], new.written["spec"]
    differences = [
        f"spec.{key} (base {base_spec.get(key)!r}, new {new_spec.get(key)!r})"
        for key in sorted(base_spec.keys() | new_spec.keys())
        if key != "model" and f"spec.{key}" not in may_differ and base_spec.get(key) != new_spec.get(key)
    ]
    if base.tokenizer.sha256 != new.tokenizer.sha256:
        names = f"base {base.tokenizer.name!r}, new {new.tokenizer.name!r}"
        differences.append(f"tokenizer ({names}, different vocabularies)")
    differences += [
        f"task.{key}"
        for key in sorted(base.task.keys() | new.task.keys())
        if f"task.{key}" not in may_differ and base.task.get(key) != new.task.get(key)
    ]
    if differences:
        raise RunFolderError(
            f"the runs did not see the same prompts; they differ in {'; '.join(differences)}: "
            "compare two runs of one spec (same task, lengths, depths, samples, seed, tokenizer, corpus "
            "and template) that differ only in --model"
        )


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


def _cell_key(record: SampleRecord, variants: bool) -> CellKey:
    if record.depth is None:
        return record.task, record.length, None
    return record.task if variants else None, record.length, record.depth


def _compare_cells(pairs: Sequence[Pair], alpha: float) -> tuple[CellComparison, ...]:
    """One comparison per cell, sorted by task (RULER's suite order, or a NIAH run's variants by
    name), length, depth."""
    # A NIAH run of one variant keeps its cells keyed without a task, as compare.json always had them.
    variants = len({base.task for base, _ in pairs if base.depth is not None}) > 1
    groups: defaultdict[CellKey, list[Pair]] = defaultdict(list)
    for pair in pairs:
        groups[_cell_key(pair[0], variants)].append(pair)
    rank = {task: i for i, task in enumerate(task_order(t for t, _, _ in groups if t is not None))}
    keys = sorted(groups, key=lambda k: (-1 if k[0] is None else rank[k[0]], k[1], k[2] or 0.0))
    return tuple(
        CellComparison(length, depth, task, *tested)
        for (task, length, depth), tested in zip(
            keys, tested_groups([groups[k] for k in keys], alpha), strict=True
        )
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


def machine_differences(base: Manifest, new: Manifest) -> list[str]:
    """What differs between two manifests' machines and backend builds: where it does, a real model's
    greedy answers may differ for that reason alone, so a paired comparison should say so. What
    one manifest does not record (an older fathom's) is no difference that can be judged."""
    found = []
    for a, b, what in (
        (base.environment.cpu, new.environment.cpu, "CPU"),
        (base.environment.backend_build, new.environment.backend_build, "backend build"),
    ):
        if a is not None and b is not None and a != b:
            found.append(f"{what} ({_short(a)} vs {_short(b)})")
    return found


def _short(value: Any) -> str:
    if isinstance(value, dict) and "model" in value:
        return f"{value['model']}, {len(value.get('simd') or ())} SIMD flags"
    return json.dumps(value, sort_keys=True)[:80]
