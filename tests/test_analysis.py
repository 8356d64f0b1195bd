"""Tests for fathom.analysis.niah: intervals, grouping, effective length, lost-in-the-middle, summary."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fathom.analysis.niah import (
    CellStats,
    LengthStats,
    cell_table,
    effective_length,
    length_table,
    lost_in_the_middle_index,
    summarize,
)
from fathom.analysis.stats import bootstrap_interval, score_interval, weighted_score_interval, wilson_interval
from fathom.records import SampleRecord


def record(
    length: int = 1024,
    depth: float = 0.5,
    score: float = 1.0,
    error: str | None = None,
    beyond_window: bool = False,
    sample: int = 0,
) -> SampleRecord:
    return SampleRecord(
        sample_id=f"niah|L{length}|D{depth:.4f}|S{sample}",
        task="niah",
        length=length,
        depth=depth,
        sample=sample,
        seed=0,
        prompt_sha256="0" * 64,
        target_tokens=length,
        actual_tokens=length,
        needle_kind="number",
        needle_token_offsets=(int(length * depth),),
        needle_depths=(depth,),
        question="What is the magic number?",
        answers=("42",),
        output="42" if score else "",
        finish_reason="stop",
        score=score,
        matched=("42",) if score else (),
        scoring="contains",
        latency_s=0.1,
        beyond_window=beyond_window,
        error=error,
    )


def length_row(length: int, mean: float, n: int = 20, low: float | None = None) -> LengthStats:
    ci_low = mean if low is None else low
    return LengthStats(length, n, 0, mean, ci_low, 1.0, False)


def cell(depth: float, mean: float, n: int = 10, length: int = 1024) -> CellStats:
    return CellStats(length, depth, n, 0, mean, 0.0, 1.0, False)


# Reference values from the closed form, computed by hand with z = 1.959964.
@pytest.mark.parametrize(
    ("successes", "n", "expected"),
    [
        (8, 10, (0.4902, 0.9433)),
        (0, 3, (0.0, 0.5615)),
        (3, 3, (0.4385, 1.0)),
        (5, 10, (0.2366, 0.7634)),
    ],
)
def test_wilson_matches_hand_computed_values(successes: int, n: int, expected: tuple[float, float]) -> None:
    assert wilson_interval(successes, n) == pytest.approx(expected, abs=1e-4)


@given(n=st.integers(1, 2000), data=st.data())
def test_wilson_bounds_are_where_the_score_test_is_exactly_z(n: int, data: st.DataObject) -> None:
    """Wilson's interval is the set of p whose score statistic |k/n - p| / sqrt(p(1 - p) / n) is at most
    z: each bound inside (0, 1) solves (k/n - p)^2 = z^2 p (1 - p) / n, whatever the closed form."""
    k = data.draw(st.integers(1, n - 1) if n > 1 else st.just(0))
    low, high = wilson_interval(k, n)
    for bound in (low, high):
        if 0.0 < bound < 1.0:
            assert (k / n - bound) ** 2 == pytest.approx(1.959964**2 * bound * (1 - bound) / n, rel=1e-6)
    assert low < k / n < high or k == 0


def test_wilson_without_samples_is_the_whole_range() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_rejects_negative_n() -> None:
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        wilson_interval(0, -1)


@given(n=st.integers(1, 500), frac=st.floats(0.0, 1.0))
def test_wilson_contains_the_estimate_and_stays_in_range(n: int, frac: float) -> None:
    low, high = wilson_interval(frac * n, n)
    assert 0.0 <= low <= frac + 1e-9
    assert frac - 1e-9 <= high <= 1.0


BOOTSTRAP_VALUES = [0.1, 0.9, 0.4, 0.4, 0.75, 0.0, 1.0, 0.6, 0.3, 0.55, 0.2, 0.85]


def test_bootstrap_is_the_percentile_bootstrap_with_the_documented_seed() -> None:
    """2000 resamples with replacement drawn by numpy's default_rng(0), and the 2.5th and 97.5th
    percentiles of their means (docs/niah.md, "The numbers": a seeded percentile bootstrap), done here
    apart."""
    values = np.asarray(BOOTSTRAP_VALUES)
    picks = np.random.default_rng(0).integers(0, len(values), size=(2000, len(values)))
    expected = np.percentile(values[picks].mean(axis=1), [2.5, 97.5])
    low, high = bootstrap_interval(BOOTSTRAP_VALUES)
    assert (low, high) == pytest.approx(tuple(expected), rel=1e-12)
    assert low < float(values.mean()) < high
    assert bootstrap_interval(BOOTSTRAP_VALUES) == (low, high)  # the same every time
    # Weights that are all equal change nothing; the weighted bootstrap resamples (value, weight) pairs.
    assert bootstrap_interval(BOOTSTRAP_VALUES, [3.0] * 12) == pytest.approx((low, high), rel=1e-12)
    weights = np.arange(1.0, 13.0)
    weighted = (values[picks] * weights[picks]).sum(axis=1) / weights[picks].sum(axis=1)
    assert bootstrap_interval(BOOTSTRAP_VALUES, weights.tolist()) == pytest.approx(
        tuple(np.percentile(weighted, [2.5, 97.5])), rel=1e-12
    )


def test_bootstrap_bounds_lie_near_the_exact_bootstrap_quantiles() -> None:
    """For five scores every resample is one of 5^5 = 3125 equally likely tuples, so the bootstrap
    distribution of the mean is known exactly; 2000 draws put its 2.5th percentile between the exact
    1st and 5th percentiles, and the 97.5th between the 95th and 99th (each all but certain)."""
    values = [0.0, 0.25, 0.25, 0.75, 1.0]
    means = sorted(sum(pick) / 5 for pick in itertools.product(values, repeat=5))

    def quantile(q: float) -> float:
        return means[min(len(means) - 1, int(q * len(means)))]

    low, high = bootstrap_interval(values)
    assert quantile(0.01) <= low <= quantile(0.05) < 0.45 < quantile(0.95) <= high <= quantile(0.99)


def _wilson_by_hand(p: float, n: int) -> tuple[float, float]:
    """Wilson's closed form at z = 1.959964: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    z2 = 1.959964**2
    centre, half = p + z2 / (2 * n), 1.959964 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (centre - half) / (1 + z2 / n), (centre + half) / (1 + z2 / n)


def test_fewer_than_30_fractional_scores_get_wilsons_interval_of_their_mean_and_30_the_bootstrap() -> None:
    """The percentile bootstrap of a handful of scores is far too narrow (benchmarks/interval_coverage.py);
    one score of 0.99 among five 1s made [0.995, 1]. Below 30 scores a fractional cell gets Wilson's
    interval of its mean, as a pass/fail cell does; from 30, the bootstrap."""
    nearly = [1.0] * 5 + [0.99]
    mean, low, high = score_interval(nearly)
    assert mean == pytest.approx(5.99 / 6) and (low, high) == pytest.approx(
        _wilson_by_hand(5.99 / 6, 6), abs=1e-9
    )
    assert low < 0.61 and bootstrap_interval(nearly) == (0.995, 1.0)
    assert score_interval([0.0, 0.25, 0.25, 0.75, 1.0]) == pytest.approx(
        (0.45, *_wilson_by_hand(0.45, 5)), abs=1e-9
    )
    below = [0.25, 0.5, 0.75] * 9 + [0.25, 0.5]  # 29 scores, mean 14.25 / 29
    assert score_interval(below)[1:] == pytest.approx(_wilson_by_hand(14.25 / 29, 29), abs=1e-9)
    at = [*below, 0.75]  # 30: the bootstrap, narrower here than Wilson's (the scores vary less)
    assert score_interval(at) == (pytest.approx(0.5), *bootstrap_interval(at))
    assert (
        score_interval(at)[2] - score_interval(at)[1]
        < 0.2
        < _wilson_by_hand(0.5, 30)[1] - _wilson_by_hand(0.5, 30)[0]
    )


def test_a_weighted_mean_of_few_scores_gets_wilsons_interval_over_their_effective_number() -> None:
    """Two tasks of 1 and 3 items, each weighing the same: weights 1 and 1/3 (three times), so the
    effective number is (1 + 1)^2 / (1 + 3/9) = 3, and the weighted mean (0.5 + (1 + 0.5 + 0) / 3) / 2
    = 0.5; from 30 scores, the weighted bootstrap."""
    weights = [1.0, 1 / 3, 1 / 3, 1 / 3]
    low, high = weighted_score_interval([0.5, 1.0, 0.5, 0.0], weights)
    assert (low, high) == pytest.approx(_wilson_by_hand(0.5, 3), abs=1e-9)
    scores, many = [0.25, 0.5, 0.75] * 10, [1.0, 0.5, 0.25] * 10
    assert weighted_score_interval(scores, many) == bootstrap_interval(scores, many)
    assert weighted_score_interval(scores[:29], many[:29]) != bootstrap_interval(scores[:29], many[:29])


def test_cells_group_sort_and_exclude_errors() -> None:
    records = [
        record(2048, 0.5, 0.0),
        record(1024, 0.9, 1.0),
        record(1024, 0.1, 1.0, sample=0),
        record(1024, 0.1, 0.5, sample=1),
        record(1024, 0.1, 0.0, error="timeout: 600s", sample=2),
    ]
    cells = cell_table(records)
    assert [(c.length, c.depth) for c in cells] == [(1024, 0.1), (1024, 0.9), (2048, 0.5)]
    first = cells[0]
    assert (first.n, first.errors, first.mean) == (2, 1, pytest.approx(0.75))
    # Two scores, one fractional: Wilson's interval of their mean, 1.5 of 2 (too few for the bootstrap).
    assert (first.ci_low, first.ci_high) == pytest.approx((0.197867, 0.973323), abs=1e-6)
    # All-or-nothing scores get Wilson's: 1 of 1 has the lower bound n / (n + z^2) = 1 / 4.841459.
    assert (cells[1].ci_low, cells[1].ci_high) == pytest.approx((0.206549, 1.0), abs=1e-6)


def test_cell_with_only_errors_has_no_mean() -> None:
    (only,) = cell_table([record(error="http: 500"), record(error="http: 502", sample=1)])
    assert (only.n, only.errors, only.mean) == (0, 2, None)
    assert (only.ci_low, only.ci_high) == (0.0, 1.0)


def test_beyond_window_is_any_sample() -> None:
    (only,) = cell_table([record(beyond_window=False), record(beyond_window=True, sample=1)])
    assert only.beyond_window


def test_length_table_pools_samples_not_cells() -> None:
    records = [record(depth=0.0, score=1.0, sample=i) for i in range(3)] + [record(depth=1.0, score=0.0)]
    (row,) = length_table(cell_table(records))
    assert (row.length, row.n, row.mean) == (1024, 4, pytest.approx(0.75))
    # Wilson's interval of the pooled 3 of 4, not a mean of the cells' own (3 of 3 and 0 of 1): with
    # z^2 = 3.841459, centre (0.75 + 0.480182) / 1.960365 = 0.627527 and half-width
    # 1.959964 * sqrt(0.046875 + 0.060023) / 1.960365 = 0.326886.
    assert (row.ci_low, row.ci_high) == pytest.approx((0.3006, 0.9544), abs=1e-4)


def test_effective_length_monotone_decline() -> None:
    rows = [length_row(1024, 1.0), length_row(2048, 0.9), length_row(4096, 0.6), length_row(8192, 0.2)]
    assert effective_length(rows) == 2048
    assert effective_length(rows, threshold=0.5) == 4096


def test_effective_length_stops_at_a_dip_despite_recovery() -> None:
    rows = [length_row(1024, 1.0), length_row(2048, 0.5), length_row(4096, 0.95)]
    assert effective_length(rows) == 1024


def test_effective_length_none_when_shortest_fails() -> None:
    assert effective_length([length_row(1024, 0.5), length_row(2048, 1.0)]) is None
    assert effective_length([]) is None


def test_effective_length_ignores_input_order() -> None:
    rows = [length_row(4096, 0.2), length_row(1024, 1.0), length_row(2048, 0.9)]
    assert effective_length(rows) == 2048


def test_effective_length_fails_a_length_with_nothing_scored() -> None:
    empty = LengthStats(2048, 0, 3, None, 0.0, 1.0, False)
    assert effective_length([length_row(1024, 1.0), empty, length_row(4096, 1.0)]) == 1024


def test_effective_length_passes_a_length_at_exactly_the_threshold() -> None:
    """The score must be at least the threshold: 17 of 20 is 0.85 exactly (17 / 20 rounds to the same
    double as the literal 0.85) and passes; 16 of 20 = 0.8 does not."""
    assert 17 / 20 == 0.85
    assert effective_length([length_row(1024, 17 / 20), length_row(2048, 16 / 20)]) == 1024
    assert effective_length([length_row(1024, 0.85, low=0.85)], use_lower_bound=True) == 1024
    assert effective_length([length_row(1024, 0.9, low=0.8499999)], use_lower_bound=True) is None
    records = [
        record(length, 0.5, 1.0 if i < hits else 0.0, sample=i)
        for length, hits in ((1024, 20), (2048, 17), (4096, 16))
        for i in range(20)
    ]
    assert summarize(records)["effective_length"]["mean"] == 2048


def test_a_length_pooled_from_unequal_cells_at_exactly_the_threshold_passes() -> None:
    """1 of 3 at one depth and 118 of 137 at the other (the rest errors, say) pool to 119 of 140 =
    0.85, which passes; recovering each cell's sum as mean * n in floating point reads 0.84999..."""
    hits = {0.0: (1, 3), 1.0: (118, 137)}
    records = [
        record(1024, depth, 1.0 if i < k else 0.0, sample=i)
        for depth, (k, n) in hits.items()
        for i in range(n)
    ]
    (row,) = length_table(cell_table(records))
    assert (row.n, row.mean) == (140, 119 / 140) and 119 / 140 == 0.85
    assert effective_length([row]) == 1024


def test_lower_bound_variant_is_stricter() -> None:
    records = [
        record(length, 0.5, 1.0 if i < hits else 0.0, sample=i)
        for length, hits in ((1024, 10), (2048, 9), (4096, 10))
        for i in range(10)
    ]
    rows = length_table(cell_table(records))
    assert effective_length(rows, 0.85) == 4096
    # 10/10 has a lower bound of 0.72, so nothing passes at 0.85 by the bound.
    assert effective_length(rows, 0.85, use_lower_bound=True) is None
    assert effective_length(rows, 0.7, use_lower_bound=True) == 1024


def test_lost_in_the_middle_is_positive_for_a_u_shape() -> None:
    cells = [cell(0.0, 1.0), cell(0.1, 0.9), cell(0.5, 0.3), cell(0.7, 0.5), cell(1.0, 1.0)]
    index = lost_in_the_middle_index(cells)
    assert index == pytest.approx((1.0 + 0.9 + 1.0) / 3 - (0.3 + 0.5) / 2)
    assert index is not None and index > 0


def test_lost_in_the_middle_is_negative_when_edges_are_worse() -> None:
    index = lost_in_the_middle_index([cell(0.0, 0.2), cell(0.5, 1.0), cell(1.0, 0.4)])
    assert index == pytest.approx(0.3 - 1.0)


def test_lost_in_the_middle_weights_by_n_and_skips_the_gaps() -> None:
    cells = [cell(0.0, 1.0, n=30), cell(1.0, 0.0, n=10), cell(0.2, 0.0), cell(0.5, 0.5)]
    assert lost_in_the_middle_index(cells) == pytest.approx(0.75 - 0.5)


def test_lost_in_the_middle_needs_both_groups() -> None:
    assert lost_in_the_middle_index([cell(0.0, 1.0), cell(1.0, 1.0)]) is None
    assert lost_in_the_middle_index([cell(0.5, 1.0)]) is None
    empty_middle = CellStats(1024, 0.5, 0, 2, None, 0.0, 1.0, False)
    assert lost_in_the_middle_index([cell(0.0, 1.0), empty_middle]) is None


def test_summarize_is_json_ready_and_counts_errors() -> None:
    records = [
        record(1024, 0.0, 1.0),
        record(1024, 0.5, 1.0),
        record(1024, 1.0, 1.0),
        record(2048, 0.0, 1.0),
        record(2048, 0.5, 0.0),
        record(2048, 0.5, 0.0, error="timeout: after 600s", sample=1),
        record(2048, 1.0, 0.0, error="http: 500", sample=1),
        record(2048, 1.0, 0.0, error="timeout: after 600s", sample=2, beyond_window=True),
    ]
    summary = summarize(records, threshold=0.9)
    assert json.loads(json.dumps(summary, allow_nan=False)) == summary
    assert summary["samples"] == 8
    assert summary["errors"] == 3
    assert summary["error_kinds"] == {"http": 1, "timeout": 2}
    # At 2k the depth 1.0 cell has nothing scored (errors only): it fails the worst depth there.
    assert summary["effective_length"] == {
        "threshold": 0.9,
        "mean": 1024,
        "lower_bound": None,
        "worst_depth": 1024,
    }
    assert summary["lost_in_the_middle_index"] == pytest.approx(1.0 - 0.5)
    assert len(summary["cells"]) == 6
    assert summary["cells"][-1] == {
        "length": 2048,
        "depth": 1.0,
        "n": 0,
        "errors": 2,
        "mean": None,
        "ci_low": 0.0,
        "ci_high": 1.0,
        "beyond_window": True,
    }
    assert [row["n"] for row in summary["lengths"]] == [3, 2]


def test_summarize_of_nothing() -> None:
    summary = summarize([])
    assert summary["cells"] == [] and summary["lengths"] == []
    assert summary["effective_length"]["mean"] is None
    assert summary["lost_in_the_middle_index"] is None
    assert (summary["samples"], summary["errors"], summary["error_kinds"]) == (0, 0, {})
