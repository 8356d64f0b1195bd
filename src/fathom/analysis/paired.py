"""Did a new checkpoint regress against its baseline? Paired exact tests over the samples two runs share.

Each sample of the new run is paired with its twin in the base run, which asked the very same question
(``fathom.analysis.pairing``). The verdict is the gate's (``fathom.analysis.gate``): one-sided exact
sign tests overall, per length, per task and per cell, adjusted together, and the effective length's
drop on a paired bootstrap. The cells keep their two-sided test for the map, with the gate's adjusted
p and verdict. The runs' no-context controls are compared beside (``fathom.analysis.control``), as a
family of their own that no verdict reads.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fathom.analysis.control import ControlComparison, compare_controls
from fathom.analysis.effective import EffectiveLength, run_effective_length
from fathom.analysis.failures import FAILURE_KINDS, REJECTED, failure_counts, rejected_lure
from fathom.analysis.gate import CellKey, Gate, cell_key, gate, has_variants
from fathom.analysis.pairing import (
    TEST,
    Pair,
    PairedTest,
    RunRecords,
    Verdict,
    graded_pairs,
    item_pairs,
    paired_test,
    twins,
)

# Re-exported: the comparison's statistics, which hard.py and the tests read from here.
from fathom.analysis.pairing import holm_adjust as holm_adjust
from fathom.analysis.pairing import sign_test as sign_test
from fathom.analysis.suites import is_suite_run, item_key
from fathom.analysis.thinking import ThinkingComparison, compare_thinking
from fathom.errors import RunFolderError
from fathom.manifest import Identity, Manifest
from fathom.records import SampleRecord

# What a real suite's runs may differ in and still have asked the same questions: the folder and the
# files its items were read from. Each pair must then be of one item (``twins``) with one prompt.
SUITE_INPUTS = ("spec.data", "task.files")
# What any two runs may differ in and still have asked the same questions: whether each was also asked
# without its context (--no-control), which adds records and changes none of the samples' prompts.
RUN_OPTIONS = ("spec.control",)


@dataclass(frozen=True)
class RunRef:
    path: Path
    model: str

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "model": self.model}


@dataclass(frozen=True)
class CellComparison:
    length: int
    depth: float | None  # NIAH's cells
    task: str | None  # RULER's cells, and NIAH's in a run of several variants
    test: PairedTest  # two-sided, as the map describes the cell
    p_adjusted: float  # the gate's, for a drop, over all its tests
    verdict: Verdict  # the gate's

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
    """Two runs of one spec compared pair by pair: the gate's tests at every level, the cells' map,
    and their effective lengths on the pairs both graded."""

    base: RunRef
    new: RunRef
    alpha: float
    left_out_errors: int  # pairs with an error in either run: no grade to compare
    left_out_unpaired: int  # samples present in one run only (a partial run)
    overall: PairedTest  # all pairs pooled, two-sided: the change described (the gate tests it too)
    cells: tuple[CellComparison, ...]
    base_effective_length: EffectiveLength
    new_effective_length: EffectiveLength
    gate: Gate  # the verdict's tests (``fathom.analysis.gate``)
    # Where the runs' machines or backend builds differ, which alone can change greedy answers.
    machine_differences: tuple[str, ...] = ()
    # Each failure kind's count among the samples both runs hold (errored ones too), in FAILURE_KINDS'
    # order: the pairs plus those left out for an error; then, where either run has one, REJECTED: the
    # right answers that named a look-alike only to reject it.
    failures: tuple[FailureChange, ...] = ()
    # The no-context controls compared: flagged where the new run answers more of them. Reported
    # beside the verdicts, never among them: knowing an answer without the context is no regression
    # in using it.
    controls: ControlComparison = dataclasses.field(default_factory=ControlComparison)
    # Where either run read reasoning (thinking models): each run's reasoning tokens and samples still
    # thinking over the samples both hold, cell by cell. Reported beside the verdicts, never among them.
    thinking: ThinkingComparison | None = None

    @property
    def verdict(self) -> Verdict:
        """What ``fathom compare`` exits on: regressed when any of the gate's tests found a drop."""
        return "regressed" if self.gate.regressed else "unchanged"

    @property
    def regressed(self) -> Sequence[Tested]:
        return [c for c in self.cells if c.verdict == "regressed"]

    @property
    def improved(self) -> Sequence[Tested]:
        return [c for c in self.cells if c.verdict == "improved"]

    def to_json(self) -> dict[str, Any]:
        overall, gate = self.overall, self.gate.to_json()
        return {
            "base": self.base.to_json(),
            "new": self.new.to_json(),
            "alpha": self.alpha,
            "verdict": self.verdict,
            "correction": gate["scheme"],
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
            "controls": self.controls.to_json(),
            "gate": gate,
        } | ({} if self.thinking is None else {"thinking": self.thinking.to_json()})


def compare_records(base: RunRecords, new: RunRecords, alpha: float = 0.05) -> Comparison:
    """Compare two runs of one spec that differ only in the model; refuse runs whose prompts differ."""
    if not 0.0 < alpha < 1.0:
        raise RunFolderError(f"alpha must lie strictly between 0 and 1, got {alpha}: pass e.g. --alpha 0.05")
    base_identity, new_identity = base.manifest.identity, new.manifest.identity
    check_same_prompts(base, new)
    pairs, _, unpaired = twins(base, new)
    graded = graded_pairs(pairs)
    if not graded:
        raise RunFolderError(
            f"'{base.path}' and '{new.path}' share no sample that both graded without an error: "
            "finish both runs (run the same command again to resume), then compare"
        )
    suite = is_suite_run(base.samples)
    verdicts = gate(
        graded,
        alpha,
        item_key if suite else _sample_id,
        item_pairs(graded, item_key) if suite else None,
        effective=not suite,
    )
    return Comparison(
        base=RunRef(base.path, base_identity.spec.model),
        new=RunRef(new.path, new_identity.spec.model),
        alpha=alpha,
        left_out_errors=len(pairs) - len(graded),
        left_out_unpaired=unpaired,
        overall=paired_test(graded),
        cells=_compare_cells(graded, verdicts),
        base_effective_length=run_effective_length([b for b, _ in graded]),
        new_effective_length=run_effective_length([n for _, n in graded]),
        machine_differences=tuple(machine_differences(base.manifest, new.manifest)),
        failures=failure_changes(pairs),
        controls=compare_controls(base, new, alpha),
        gate=verdicts,
        thinking=compare_thinking([b for b, _ in pairs], [n for _, n in pairs]),
    )


def _sample_id(record: SampleRecord) -> str:
    return record.sample_id


def failure_changes(pairs: Sequence[Pair]) -> tuple[FailureChange, ...]:
    """Each failure kind's count in the base run and in the new, over the same samples."""
    base, new = failure_counts(b for b, _ in pairs), failure_counts(n for _, n in pairs)
    kinds = tuple(FailureChange(kind, base[kind], new[kind]) for kind in FAILURE_KINDS)
    # Beside them, though no failure, where either run has one: right answers that named a look-alike
    # only to reject it.
    rejected = FailureChange(
        REJECTED, sum(rejected_lure(b) for b, _ in pairs), sum(rejected_lure(n) for _, n in pairs)
    )
    return (*kinds, rejected) if rejected.base or rejected.new else kinds


def check_same_prompts(base: RunRecords, new: RunRecords) -> None:
    """Refuse two runs that did not build the same prompts (``_check_same_prompts``), what a real
    suite's runs may differ in aside: what ``compare_records`` checks first, and ``fathom series``
    of every run before it compares any."""
    may_differ = RUN_OPTIONS + (SUITE_INPUTS if is_suite_run(base.samples) else ())
    _check_same_prompts(base.manifest.identity, new.manifest.identity, may_differ)


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


def _compare_cells(pairs: Sequence[Pair], verdicts: Gate) -> tuple[CellComparison, ...]:
    """One comparison per cell, in the gate's order (task: RULER's suite order, or a NIAH run's
    variants by name; length; depth), with the gate's adjusted p and verdict."""
    variants = has_variants(pairs)
    groups: defaultdict[CellKey, list[Pair]] = defaultdict(list)
    for pair in pairs:
        groups[cell_key(pair[0], variants)].append(pair)
    cells = []
    for test in verdicts.at("cell"):
        length = test.length or 0  # a cell always has its length
        tested = paired_test(groups[test.task, length, test.depth])
        cells.append(CellComparison(length, test.depth, test.task, tested, test.p_adjusted, test.verdict))
    return tuple(cells)


def machine_differences(base: Manifest, new: Manifest) -> list[str]:
    """The machines and backend builds that made two runs' records, where they are not all one:
    a real model's greedy answers may differ for that reason alone, so a paired comparison should
    say so. Each run is read at every start (a resume elsewhere too, ``Manifest.resumes``). What a
    manifest does not record (an older fathom's) is no difference that can be judged."""
    found = []
    for what, field in (("CPU", "cpu"), ("backend build", "backend_build")):
        seen: list[Any] = []
        for start in (*base.starts(), *new.starts()):
            value = getattr(start.environment, field)
            if value is not None and value not in seen:
                seen.append(value)
        if len(seen) > 1:
            found.append(f"{what} ({' vs '.join(map(_short, seen))})")
    return found


def machine_warning(differences: Sequence[str]) -> str:
    """The warning that reports print where ``machine_differences`` found any."""
    return (
        f"the runs' records come from more than one machine or build ({'; '.join(differences)}): a real "
        "model's greedy answers can change with these alone, so part of any difference may be the machine's"
    )


def _short(value: Any) -> str:
    if isinstance(value, dict) and "model" in value:
        return f"{value['model']}, {len(value.get('simd') or ())} SIMD flags"
    return json.dumps(value, sort_keys=True)[:80]
