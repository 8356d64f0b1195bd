"""A training run's checkpoints as a series: many runs of one spec, in order, each with its own
numbers and each compared with the baseline and with the best checkpoint before it.

Each checkpoint's own numbers are the run's, as its summary has them (``fathom.analysis.niah``,
``ruler``, ``suites``): the overall score, the score per length and per task with their 95% intervals,
and the effective length on the mean and on the lower bound. Its comparisons are ``fathom compare``'s
(``paired.compare_records`` and its gate): against the baseline (the first run, or one named), and
against the best checkpoint before it, the best being the one with the highest overall mean score
(the earlier of two equal ones). Then, per level of the gate (overall, each length, each task, the
effective length), the first checkpoint where it regressed against each. The series regressed when
its last checkpoint did, against either: what ``fathom series`` exits 1 on.

Pure functions over runs already read (``RunRecords``), so a series can come from run folders or from
an index of them. Each run's own numbers are ``fathom.analysis.checkpoint``'s.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fathom.analysis.checkpoint import Numbers, run_numbers
from fathom.analysis.paired import Comparison, check_same_prompts, compare_records
from fathom.analysis.pairing import RunRecords
from fathom.errors import RunFolderError, SpecError

BEST_RULE = "the checkpoint before it with the highest overall mean score (the earlier of equal ones)"
Against = Literal["baseline", "best"]
AGAINST: tuple[Against, ...] = ("baseline", "best")
EFFECTIVE = "effective length"  # the gate's level beside its sign tests' levels
# A label orders numerically when every run's value is a plain decimal number ("1200", "0.5", "1e3"),
# never "nan" or "inf", which float() would take.
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _against_json(comparison: Comparison | None) -> dict[str, Any] | None:
    """A comparison as the series keeps it: the run it is against, the overall change, the gate."""
    if comparison is None:
        return None
    overall, gate = comparison.overall, comparison.gate
    return {
        "base": str(comparison.base.path),
        "regressed": regressed(comparison),
        "overall": {
            "pairs": overall.pairs,
            "base_mean": overall.base_mean,
            "new_mean": overall.new_mean,
            "worse": overall.worse,
            "better": overall.better,
        },
        "gate": gate.to_json(),
    }


@dataclass(frozen=True)
class Step:
    """A checkpoint in the series: its numbers, its comparison with the baseline (None for the
    baseline itself) and with the best checkpoint before it (None for the first; ``best`` is that
    checkpoint's index), and the 95% interval of its effective length (the gate's paired bootstrap,
    on the samples it shares with the baseline; None where there is none)."""

    numbers: Numbers
    baseline: Comparison | None
    best: Comparison | None
    best_index: int | None
    effective_interval: tuple[int | None, int | None] | None

    def against(self, which: Against) -> Comparison | None:
        return self.baseline if which == "baseline" else self.best

    @property
    def regressed(self) -> bool:
        return any(regressed(self.against(which)) for which in AGAINST)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.numbers.to_json(),
            "effective_length_interval": _pair(self.effective_interval),
            "regressed": self.regressed,
            "against_baseline": _against_json(self.baseline),
            "best_before": self.best_index,
            "against_best": _against_json(self.best),
        }


def _pair(interval: tuple[int | None, int | None] | None) -> list[int | None] | None:
    return None if interval is None else list(interval)


@dataclass(frozen=True)
class FirstRegression:
    """The first checkpoint (``step``, its index) where one of the gate's tests regressed against the
    baseline or the best before it: ``level`` overall, length, task or effective length, ``name`` the
    test's (``8k``, ``niah_single_1``)."""

    against: Against
    level: str
    name: str
    step: int


@dataclass(frozen=True)
class Series:
    alpha: float
    by: str | None  # the label the checkpoints are ordered by; None: as given
    baseline: Numbers
    baseline_index: int | None  # its place among the steps; None for a run outside them
    baseline_interval: tuple[int | None, int | None] | None
    steps: tuple[Step, ...]
    first_regressions: tuple[FirstRegression, ...]

    @property
    def regressed(self) -> bool:
        """Whether the last checkpoint regressed, against the baseline or the best before it."""
        return self.steps[-1].regressed

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "by": self.by,
            "best": BEST_RULE,
            "baseline": {
                **self.baseline.to_json(),
                "index": self.baseline_index,
                "effective_length_interval": _pair(self.baseline_interval),
            },
            "checkpoints": [step.to_json() for step in self.steps],
            "first_regressions": [
                {**dataclasses.asdict(first), "path": str(self.steps[first.step].numbers.path)}
                for first in self.first_regressions
            ],
            "regressed": self.regressed,
        }


def regressed(comparison: Comparison | None) -> bool:
    return comparison is not None and comparison.gate.regressed


def order_runs(runs: Sequence[RunRecords], by: str | None) -> list[RunRecords]:
    """The runs ordered by the label ``by``: as numbers where every value is one, else as text; as
    given without it. A run without the label, or two runs with one value, are refused."""
    if by is None:
        return list(runs)
    lacking = [run for run in runs if by not in run.manifest.labels]
    if lacking:
        first = lacking[0]
        has = ", ".join(sorted(first.manifest.labels)) or "none"
        more = f" (and {len(lacking) - 1} more)" if len(lacking) > 1 else ""
        raise SpecError(
            f"run '{first.path}'{more} has no label '{by}' to order by (its labels: {has}): label each "
            f"checkpoint's run (fathom run ... --label {by}=VALUE), or leave out --by to keep the order given"
        )
    values = [run.manifest.labels[by] for run in runs]
    numeric = all(_NUMBER.fullmatch(value) for value in values)
    ordered = sorted(runs, key=lambda run: _key(run.manifest.labels[by], numeric))
    for earlier, later in itertools.pairwise(ordered):
        if _key(earlier.manifest.labels[by], numeric) == _key(later.manifest.labels[by], numeric):
            raise SpecError(
                f"runs '{earlier.path}' and '{later.path}' have one {by} ({later.manifest.labels[by]}): a "
                f"series orders its checkpoints by {by}, so give each its own or leave one out"
            )
    return ordered


def _key(value: str, numeric: bool) -> float | str:
    return float(value) if numeric else value


def make_series(
    runs: Sequence[RunRecords],
    by: str | None = None,
    baseline: RunRecords | None = None,
    alpha: float = 0.05,
) -> Series:
    """The series of ``runs`` (ordered by the label ``by``, else as given) against ``baseline``: one
    of them (the same path), a run outside them, or by default the first in order. Everything is
    checked before any comparison: at least two runs, none twice, each with graded samples, all of one
    spec (as ``fathom compare`` requires: only the model may differ)."""
    ordered = order_runs(runs, by)
    _check_runs(ordered, baseline)
    reference = ordered[0] if baseline is None else baseline
    at = next((i for i, run in enumerate(ordered) if run.path == reference.path), None)
    numbers = [run_numbers(run) for run in ordered]
    compared: dict[tuple[int, int], Comparison] = {}

    def compare(ref: int, new: int) -> Comparison:
        """Run ``new`` against run ``ref`` (-1: the baseline outside the series), made once. The
        no-context controls are left out: a series shows none of them, and they were a third of the
        time a comparison took."""
        if (ref, new) not in compared:
            base = dataclasses.replace(reference if ref < 0 else ordered[ref], controls=())
            compared[ref, new] = compare_records(base, dataclasses.replace(ordered[new], controls=()), alpha)
        return compared[ref, new]

    against_baseline = [
        None if i == at else compare(-1 if at is None else at, i) for i in range(len(ordered))
    ]
    baseline_interval = next((_interval(c, base=True) for c in against_baseline if c is not None), None)
    steps = []
    for i, (own, against) in enumerate(zip(numbers, against_baseline, strict=True)):
        best = _best_before(numbers, i)
        interval = baseline_interval if i == at else _interval(against, base=False)
        steps.append(Step(own, against, None if best is None else compare(best, i), best, interval))
    return Series(
        alpha=alpha,
        by=by,
        baseline=run_numbers(reference) if at is None else numbers[at],
        baseline_index=at,
        baseline_interval=baseline_interval,
        steps=tuple(steps),
        first_regressions=first_regressions(steps),
    )


def _check_runs(runs: Sequence[RunRecords], baseline: RunRecords | None) -> None:
    if len(runs) < 2:
        raise SpecError(
            f"a series needs at least two runs, got {len(runs)}: name each checkpoint's run folder "
            "(fathom compare BASE NEW compares one run with another)"
        )
    paths = [run.path for run in runs]
    twice = next((path for i, path in enumerate(paths) if path in paths[:i]), None)
    if twice is not None:
        raise SpecError(f"run '{twice}' is named twice: name each checkpoint's run once")
    outside = baseline is not None and baseline.path not in paths
    everything = [*runs, *([baseline] if outside and baseline is not None else [])]
    for run in everything:
        if not run.samples:
            raise RunFolderError(
                f"run folder '{run.path}' has no graded samples (it has not run yet, or it holds perplexity "
                "documents only): run it first, or leave it out of the series"
            )
    first = everything[0]
    for run in everything[1:]:
        try:
            check_same_prompts(first, run)
        except RunFolderError as exc:
            raise RunFolderError(f"'{run.path}' is not a run of the spec of '{first.path}': {exc}") from None


def _best_before(numbers: Sequence[Numbers], index: int) -> int | None:
    """The index of the checkpoint before ``index`` with the highest overall mean (the earliest of
    equal ones); None for the first."""
    if index == 0:
        return None
    means = [-math.inf if n.overall.mean is None else n.overall.mean for n in numbers[:index]]
    return means.index(max(means))


def _interval(comparison: Comparison | None, base: bool) -> tuple[int | None, int | None] | None:
    """The 95% interval of the base run's effective length in a comparison, or of the new run's."""
    change = None if comparison is None else comparison.gate.effective_length
    if change is None:
        return None
    return (change.base_low, change.base_high) if base else (change.low, change.high)


def first_regressions(steps: Sequence[Step]) -> tuple[FirstRegression, ...]:
    """Per comparison (against the baseline, against the best before), per test of the gate at the
    levels overall, length and task, and for the effective length: the first step where it regressed.
    In the order found: step by step, each step's in the gate's order."""
    found: dict[tuple[Against, str, str], FirstRegression] = {}
    for index, step in enumerate(steps):
        for which in AGAINST:
            for level, name in fired(step.against(which)):
                found.setdefault((which, level, name), FirstRegression(which, level, name, index))
    return tuple(sorted(found.values(), key=lambda f: AGAINST.index(f.against)))


def fired(comparison: Comparison | None) -> list[tuple[str, str]]:
    """The gate's regressed tests of a comparison, above the cells, as (level, name); the effective
    length as (``EFFECTIVE``, ``EFFECTIVE``)."""
    if comparison is None:
        return []
    gate = comparison.gate
    found: list[tuple[str, str]] = [
        (t.level, t.name) for t in gate.tests if t.level != "cell" and t.verdict == "regressed"
    ]
    if gate.effective_length is not None and gate.effective_length.regressed:
        found.append((EFFECTIVE, EFFECTIVE))
    return found
