"""The regression gate: did the new checkpoint regress, and where? Decided where the evidence is.

A cell of k = 3 pairs cannot be significant (its least one-sided p is 1/8), so a gate that decided
per cell would pass any checkpoint at fathom's default. The gate tests a drop at four levels, each
pooling what the one below it holds: the whole run, each length (its depths, tasks and samples),
each task (a RULER task or a NIAH variant over its lengths; a real suite's task over its items),
and each cell. Every test is the exact sign test, one-sided for a drop (a gate asks whether the
checkpoint got worse; rises are reported apart, by the same test the other way). The tests are
adjusted together by Westfall and Young's step-down minP over paired sign flips (``flips``), which
controls the chance of any false flag at the signs' share of alpha while letting the overlapping
levels share their evidence. The effective length's drop is judged on a paired bootstrap interval
(``effective.effective_length_change``) at the rest of alpha (Bonferroni between the two), so the
whole gate's false-alarm rate is at most alpha.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fathom.analysis.effective import EffectiveLengthChange, effective_length_change
from fathom.analysis.flips import Adjusted, SignTest, adjust
from fathom.analysis.ruler import task_order
from fathom.records import SampleRecord
from fathom.units import format_count, length_or_none

Level = Literal["overall", "length", "task", "cell"]
LEVELS: tuple[Level, ...] = ("overall", "length", "task", "cell")
Verdict = Literal["regressed", "improved", "unchanged"]
Pair = tuple[SampleRecord, SampleRecord]  # (base, new): one sample id, one prompt
# NIAH cells sit at fixed depths: (None, length, depth), or (task, length, depth) in a run of several
# variants (haystack domains, literal twins), whose cells at one length and depth are not one cell.
# RULER draws depths per sample, so its cells are tasks: (task, length, None).
CellKey = tuple[str | None, int, float | None]
# The effective length's share of alpha; the sign tests have the rest. A fifth: the sign tests carry
# the gate's power, and the effective length rarely drops without a length doing so too.
EFFECTIVE_SHARE = 0.2
SIGNS = (
    "one-sided exact sign tests for a drop (overall, per length, per task, per cell), adjusted together "
    "by Westfall-Young step-down minP over paired sign flips"
)
SCHEME = (
    f"{SIGNS} at 80% of alpha; the effective length's drop by a paired bootstrap at 20% of alpha "
    "(Bonferroni between the two)"
)


@dataclass(frozen=True)
class GateTest:
    """One paired test of the gate: a level's group of pairs, its drop test and its verdict."""

    level: Level
    length: int | None  # the length it pools (a length, or a cell's)
    task: str | None  # the task it pools (a task, or a RULER, suite or variant cell's)
    depth: float | None  # a NIAH cell's depth
    pairs: int  # pairs (a suite's task: items), ties included
    base_mean: float
    new_mean: float
    worse: int
    better: int
    p_value: float  # one-sided, for a drop
    p_adjusted: float  # over every sign test of the gate
    verdict: Verdict

    @property
    def name(self) -> str:
        if self.level == "overall":
            return "overall"
        depth = None if self.depth is None else f"depth {self.depth:.0%}"
        length = None if self.length is None else format_count(self.length)
        return ", ".join(part for part in (length, self.task, depth) if part)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class LevelPower:
    """What a level could see: its tests, the most pairs one of them had, and the smallest drop (a
    share of those pairs turning from right to wrong, none the other way) it would have flagged;
    None where no drop could reach significance with so few pairs."""

    level: Level
    tests: int
    pairs: int
    detectable_drop: float | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Gate:
    alpha: float
    tests: tuple[GateTest, ...]
    effective_length: EffectiveLengthChange | None  # None for a real suite's runs
    power: tuple[LevelPower, ...]
    exact: bool  # every flip vector enumerated (else RESAMPLES random ones)

    @property
    def signs_alpha(self) -> float:
        return signs_alpha(self.alpha, self.effective_length is not None)

    @property
    def regressed(self) -> bool:
        return bool(self.fired())

    def at(self, level: Level) -> tuple[GateTest, ...]:
        return tuple(t for t in self.tests if t.level == level)

    def fired(self) -> tuple[str, ...]:
        """Each gating test that found a drop, named with its level."""
        names = [
            f"{t.level} {t.name}" if t.level != "overall" else t.name
            for t in self.tests
            if t.verdict == "regressed"
        ]
        change = self.effective_length
        if change is not None and change.regressed:
            names.append(f"effective length {length_or_none(change.base)} → {length_or_none(change.new)}")
        return tuple(names)

    def to_json(self) -> dict[str, Any]:
        return {
            "scheme": SIGNS if self.effective_length is None else SCHEME,
            "alpha": self.alpha,
            "signs_alpha": self.signs_alpha,
            "exact": self.exact,
            "regressed": self.regressed,
            "fired": list(self.fired()),
            "tests": [t.to_json() for t in self.tests],
            "effective_length": None if self.effective_length is None else self.effective_length.to_json(),
            "power": [p.to_json() for p in self.power],
        }


def cell_key(record: SampleRecord, variants: bool) -> CellKey:
    if record.depth is None:
        return record.task, record.length, None
    return record.task if variants else None, record.length, record.depth


def has_variants(pairs: Sequence[Pair]) -> bool:
    """Whether a NIAH run asked several variants (its cells then carry their task)."""
    return len({base.task for base, _ in pairs if base.depth is not None}) > 1


@dataclass(frozen=True)
class _Group:
    level: Level
    key: CellKey
    pairs: tuple[Pair, ...]


def gate(
    pairs: Sequence[Pair],
    alpha: float,
    unit: Callable[[SampleRecord], Hashable],
    tasks: dict[str, list[Pair]] | None = None,
    effective: bool = True,
) -> Gate:
    """The gate over graded pairs. ``unit`` names what flips whole (a pair's sample id; a suite's
    item, asked at several length limits); ``tasks`` gives a suite's task level as item pairs (each
    item's mean over its limits), in place of the pairs pooled by task; ``effective`` judges the
    effective length (not a suite's, whose lengths are limits)."""
    groups = _groups(pairs, tasks)
    sign_tests = [_sign_test(group.pairs, unit) for group in groups]
    adjusted = adjust(sign_tests)
    change = effective_length_change(pairs, alpha * EFFECTIVE_SHARE) if effective else None
    signs = signs_alpha(alpha, change is not None)
    tests = tuple(
        _gate_test(group, test, adjusted, i, signs)
        for i, (group, test) in enumerate(zip(groups, sign_tests, strict=True))
    )
    return Gate(alpha, tests, change, _power(tests, adjusted, signs), adjusted.exact)


def signs_alpha(alpha: float, effective: bool) -> float:
    """The sign tests' share of alpha: all of it, or what the effective length's share leaves."""
    return alpha * (1 - EFFECTIVE_SHARE) if effective else alpha


def _groups(pairs: Sequence[Pair], tasks: dict[str, list[Pair]] | None) -> list[_Group]:
    """The levels' groups, coarsest first. A level of one group (the one length of a one-length run,
    the one task of a one-task run) is the overall test again, and is left out; cells always stay,
    since the map of cells reads their verdicts."""
    variants = has_variants(pairs)
    by: dict[Level, defaultdict[CellKey, list[Pair]]] = {level: defaultdict(list) for level in LEVELS}
    for pair in pairs:
        base = pair[0]
        by["overall"][None, 0, None].append(pair)
        by["length"][None, base.length, None].append(pair)
        by["task"][base.task, 0, None].append(pair)
        by["cell"][cell_key(base, variants)].append(pair)
    if tasks is not None:
        by["task"] = defaultdict(list, {(task, 0, None): items for task, items in tasks.items()})
    rank = {task: i for i, task in enumerate(task_order(k[0] for k in by["task"] if k[0] is not None))}

    def order(key: CellKey) -> tuple[int, int, float]:
        task, length, depth = key
        return -1 if task is None else rank[task], length, depth or 0.0

    return [
        _Group(level, key, tuple(by[level][key]))
        for level in LEVELS
        if level in ("overall", "cell") or len(by[level]) > 1
        for key in sorted(by[level], key=order)
    ]


def _sign_test(pairs: Sequence[Pair], unit: Callable[[SampleRecord], Hashable]) -> SignTest:
    moved = [(unit(b), -1 if n.score < b.score else 1) for b, n in pairs if n.score != b.score]
    return SignTest(tuple(u for u, _ in moved), tuple(s for _, s in moved))


def _gate_test(group: _Group, test: SignTest, adjusted: Adjusted, i: int, alpha: float) -> GateTest:
    """A group's test and verdict: significant in one direction, with the mean moved the same way
    (fractional scores can have many small gains and a few large drops, and then the signs' evidence
    and the mean disagree; that is no verdict, and a rule that only withholds flags keeps the gate's
    error rate)."""
    task, length, depth = group.key
    pairs = group.pairs
    base_mean = math.fsum(b.score for b, _ in pairs) / len(pairs)
    new_mean = math.fsum(n.score for _, n in pairs) / len(pairs)
    verdict: Verdict = "unchanged"
    if adjusted.drop_adjusted[i] < alpha and new_mean < base_mean:
        verdict = "regressed"
    elif adjusted.rise_adjusted[i] < alpha and new_mean > base_mean:
        verdict = "improved"
    return GateTest(
        level=group.level,
        length=length if group.level in ("length", "cell") else None,
        task=task if group.level in ("task", "cell") else None,
        depth=depth if group.level == "cell" else None,
        pairs=len(pairs),
        base_mean=base_mean,
        new_mean=new_mean,
        worse=test.worse,
        better=test.better,
        p_value=adjusted.drop[i],
        p_adjusted=adjusted.drop_adjusted[i],
        verdict=verdict,
    )


def _power(tests: Sequence[GateTest], adjusted: Adjusted, alpha: float) -> tuple[LevelPower, ...]:
    """Per level, the smallest drop it would have flagged: the fewest pairs w, all turned worse, whose
    p (1/2^w) the step-down passes, as a share of the level's largest test. Its adjusted p is the
    chance under these flips that the least p over all tests reaches 1/2^w, which holds the test's
    own chance: adding 1/2^w again would count it twice, and deny a drop the verdict flags (5 of 5
    pairs worse, p = 1/32 at 0.04). Never less than 1/2^w: the data's flips hold the hypothetical
    test's own only where a test of theirs has w signs to flip."""
    out = []
    for level in LEVELS:
        at = [t for t in tests if t.level == level]
        if not at:
            continue
        most = max(t.pairs for t in at)
        least = next(
            (w for w in range(1, most + 1) if max(0.5**w, adjusted.chance_least_p_at_most(0.5**w)) <= alpha),
            None,
        )
        out.append(LevelPower(level, len(at), most, None if least is None else least / most))
    return tuple(out)
