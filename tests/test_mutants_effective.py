"""``fathom.analysis.effective`` on runs small enough to judge by hand: a NIAH length's samples pooled
(not its cells averaged), a RULER length's tasks averaged (not its samples pooled), each threshold
met exactly and missed by a hair, a RULER length missing a task, and the paired bootstrap on cells
whose scores are all alike (every resample is the data, so every interval is a point) or on one cell
of two samples (a resample of two draws passes only when both draw the passing sample: 1 in 4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_store import record

from fathom.analysis.effective import (
    EffectiveLength,
    EffectiveLengthChange,
    effective_length_change,
    run_effective_length,
)
from fathom.records import SampleRecord

Pair = tuple[SampleRecord, SampleRecord]


def _record(task: str, length: int, depth: float | None, index: int, score: float) -> SampleRecord:
    return dataclasses.replace(
        record(index), sample_id=f"{task}|L{length}|D{depth}|S{index}", task=task, length=length,
        depth=depth, score=score,
    )  # fmt: skip


def _cell(task: str, length: int, depth: float | None, base: list[float], new: list[float]) -> list[Pair]:
    """One cell's pairs: sample i scored ``base[i]`` in the base run and ``new[i]`` in the new."""
    assert len(base) == len(new)
    return [
        (_record(task, length, depth, i, b), _record(task, length, depth, i, n))
        for i, (b, n) in enumerate(zip(base, new, strict=True))
    ]


def _same(task: str, length: int, depth: float | None, scores: list[float]) -> list[Pair]:
    return _cell(task, length, depth, scores, scores)


def test_niah_judges_the_mean_on_the_pooled_samples_the_lower_bound_and_the_worst_depth() -> None:
    """1k: 40 of 40 (Wilson's lower bound 91.2%); 2k: 20 of 20 at depth 0.25 and 16 of 20 at 0.75,
    36 of 40 pooled (90%, lower bound 77.0%; its worst depth 80%); 4k: none. Threshold 85%."""
    samples = [
        _record("niah", length, depth, i, float(passed))
        for length, depth, passed_of_20 in [
            (1024, 0.25, 20), (1024, 0.75, 20), (2048, 0.25, 20), (2048, 0.75, 16), (4096, 0.25, 0),
            (4096, 0.75, 0),
        ]
        for i in range(20)
        for passed in [i < passed_of_20]
    ]  # fmt: skip
    assert run_effective_length(samples) == EffectiveLength(2048, 1024, 1024)


def test_literal_twins_are_left_out_of_a_runs_effective_length() -> None:
    kept = [_record("niah", 1024, 0.5, i, 1.0) for i in range(10)]
    twins = [_record("niah:literal", 2048, 0.5, i, 1.0) for i in range(10)]
    assert run_effective_length(kept + twins).mean == 1024
    assert run_effective_length(twins) == EffectiveLength(None, None)
    assert run_effective_length([]) == EffectiveLength(None, None)


def test_no_pairs_or_literal_twins_alone_have_no_change() -> None:
    assert effective_length_change([], 0.05) is None
    assert effective_length_change(_same("niah:literal", 1024, 0.5, [1.0]), 0.05) is None


def _steady(
    base: int | None, new: int | None, step: int, p: float, alpha: float, regressed: bool
) -> EffectiveLengthChange:
    """The change where every resample is the data: each interval the point, each step ``step``."""
    return EffectiveLengthChange(
        base=base, new=new, base_low=base, base_high=base, low=new, high=new, steps_low=step,
        steps_high=step, p_value=p, alpha=alpha, regressed=regressed,
    )  # fmt: skip


def _niah_drop() -> list[Pair]:
    """At 2k the base holds 6 of 7 (6/7 = 0.857 pooled, where its two cells' means average 0.5) and the
    new 5.4 of 7 (0.771); both hold 1k whole and miss 4k. Given with 4k first."""
    return [
        *_same("niah", 4096, 0.5, [0.0] * 3),
        *_same("niah", 1024, 0.5, [1.0] * 3),
        *_cell("niah", 2048, 0.25, [1.0] * 6, [0.9] * 6),
        *_same("niah", 2048, 0.75, [0.0]),
    ]


def test_a_niah_drop_of_one_length_in_every_resample_is_a_regression() -> None:
    assert effective_length_change(_niah_drop(), 0.05) == _steady(2048, 1024, -1, 0.0, 0.05, True)


def test_a_drop_in_every_resample_is_a_regression_at_alpha_zero() -> None:
    """p = 0 and alpha = 0: the share of resamples without a drop is within alpha (<=, not <)."""
    assert effective_length_change(_niah_drop(), 0.0) == _steady(2048, 1024, -1, 0.0, 0.0, True)


def test_runs_that_agree_have_p_one_and_no_regression_even_at_alpha_one() -> None:
    """No change: every resample's change is 0, which counts as not shorter (p = 1); p <= alpha = 1,
    but a regression needs the data's change below 0, and 0 is not."""
    same = [(b, b) for b, _ in _niah_drop()]
    assert effective_length_change(same, 1.0) == _steady(2048, 2048, 0, 1.0, 1.0, False)


def test_a_rise_is_no_regression_and_a_run_passing_no_length_has_none() -> None:
    pairs = [*_cell("niah", 1024, 0.5, [0.5] * 2, [0.9] * 2), *_same("niah", 2048, 0.5, [0.2] * 2)]
    assert effective_length_change(pairs, 0.05) == _steady(None, 1024, 1, 1.0, 0.05, False)


@pytest.mark.parametrize(
    ("score", "effective"),
    [(0.85, 1024), (0.85 - 5e-10, 1024), (0.85 - 1e-9, 1024), (0.85 - 2e-9, None), (0.8499, None)],
)
def test_niahs_threshold_is_met_at_0_85_and_within_a_billionth_below(
    score: float, effective: int | None
) -> None:
    pairs = _same("niah", 1024, 0.5, [score])
    assert effective_length_change(pairs, 0.05) == _steady(effective, effective, 0, 1.0, 0.05, False)


# (85.6 + 1e-9) / 100 times 100 is 85.6 + 1e-9 to the last bit: the tolerance's own edge, not above it.
@pytest.mark.parametrize(("score", "effective"), [(0.856, None), ((85.6 + 1e-9) / 100, None), (0.857, 1024)])
def test_rulers_threshold_is_passed_above_85_6_percent_not_at_it(score: float, effective: int | None) -> None:
    pairs = _same("vt", 1024, None, [score])
    assert effective_length_change(pairs, 0.05) == _steady(effective, effective, 0, 1.0, 0.05, False)


def test_ruler_averages_its_tasks_means_at_a_length() -> None:
    """1k: vt 1 of 1, cwe 9 at 0.75: tasks' means average 87.5% (pooled, 77.5%); passes. 2k: vt 9 of 9,
    cwe 1 at 0.7: 85% (pooled, 97%); fails. The new run's cwe scores 0.7 at 1k: 85%, fails."""
    pairs = [
        *_same("vt", 1024, None, [1.0]),
        *_cell("cwe", 1024, None, [0.75] * 9, [0.7] * 9),
        *_same("vt", 2048, None, [1.0] * 9),
        *_same("cwe", 2048, None, [0.7]),
    ]
    assert effective_length_change(pairs, 0.05) == _steady(1024, None, -1, 0.0, 0.05, True)


def test_a_ruler_length_missing_a_task_has_no_score() -> None:
    pairs = [pair for task in ("vt", "cwe") for pair in _same(task, 1024, None, [1.0])]
    pairs += _same("vt", 2048, None, [1.0])  # cwe missing
    assert effective_length_change(pairs, 0.05) == _steady(1024, 1024, 0, 1.0, 0.05, False)


def test_one_cell_of_two_samples_passes_in_a_quarter_of_the_resamples() -> None:
    """Base [1, 0] (mean 0.5: no length), new [1, 1] (1k). A resample passes the base only when both
    draws are the first sample (1 in 4): its 2.5% point is no length and its 97.5% point 1k, and the
    change is +1 in three resamples of four and 0 in one."""
    change = effective_length_change(_cell("niah", 1024, 0.5, [1.0, 0.0], [1.0, 1.0]), 0.05)
    assert change == EffectiveLengthChange(
        base=None, new=1024, base_low=None, base_high=1024, low=1024, high=1024, steps_low=0,
        steps_high=1, p_value=1.0, alpha=0.05, regressed=False,
    )  # fmt: skip


def test_a_drop_seen_in_three_resamples_of_four_is_no_regression() -> None:
    """Base [1, 1] (1k), new [1, 0] (none): the change is -1 in the data and in 3 resamples of 4, and
    0 in the others: p near 0.25 (2,000 resamples: 0.25 +- 0.03 at four standard errors)."""
    change = effective_length_change(_cell("niah", 1024, 0.5, [1.0, 1.0], [1.0, 0.0]), 0.05)
    assert change is not None
    assert (change.base, change.new, change.low, change.high) == (1024, None, None, 1024)
    assert (change.steps_low, change.steps_high, change.regressed) == (-1, 0, False)
    assert 0.22 < change.p_value < 0.28
    # numpy's generator, seeded as every bootstrap of fathom's is (0), drawing the cell's 2,000
    # resamples of 2: the new run holds 1k only where both draws are its first sample
    draws = np.random.default_rng(0).integers(0, 2, (2000, 2))
    assert change.p_value == np.mean((draws == 0).all(axis=1))
    assert change.to_json() == {
        "base": 1024, "new": None, "base_low": 1024, "base_high": 1024, "low": None, "high": 1024,
        "steps_low": -1, "steps_high": 0, "p_value": change.p_value, "alpha": 0.05, "regressed": False,
    }  # fmt: skip


def test_the_intervals_low_end_is_the_50th_of_2000_resamples_never_between_two() -> None:
    """A cell of ten samples scored so that exactly 50 of its 2,000 resamples (numpy's generator,
    seeded 0, as fathom's bootstrap draws them) fall below 0.85, the first resample among them: the
    2.5% point is the 50th smallest (no length), where an interpolation with the 51st would say 1k
    (-0.025 read as step 0), and so would the 50th of the resamples without the first."""
    draws = np.random.default_rng(0).integers(0, 10, (2000, 10))
    # square roots: resamples of other draws have other means; the first resample draws samples 0
    # and 8 most, so they score least
    spread = 0.01 * np.sqrt([1, 3, 4, 5, 8, 6, 7, 9, 2, 10])
    means = spread[draws].mean(axis=1)
    ranked = np.sort(means)
    assert ranked[50] - ranked[49] > 1e-6 and means[0] < ranked[49]
    scores = [float(s) for s in spread + 0.85 - (ranked[49] + ranked[50]) / 2]
    change = effective_length_change(_same("niah", 1024, 0.5, scores), 0.05)
    assert change is not None
    assert (change.base_low, change.base_high, change.low, change.high) == (None, 1024, None, 1024)
    assert (change.steps_low, change.steps_high, change.p_value) == (0, 0, 1.0)


def test_a_drop_in_resamples_but_not_in_the_data_is_no_regression_even_at_alpha_one() -> None:
    """Base [1, 1], new [1, 0.8]: the new run holds 1k (0.9), as the base does, so the change is 0
    whatever share of resamples drops (those drawing the 0.8 twice, the first resample among them:
    numpy's generator seeded 0 draws sample 1 twice first), and p <= 1 is no regression."""
    assert np.random.default_rng(0).integers(0, 2, (2000, 2))[0].tolist() == [1, 1]
    change = effective_length_change(_cell("niah", 1024, 0.5, [1.0, 1.0], [1.0, 0.8]), 1.0)
    assert change is not None
    assert (change.base, change.new, change.steps_low, change.steps_high) == (1024, 1024, -1, 0)
    assert 0.72 < change.p_value < 0.78 and change.regressed is False
