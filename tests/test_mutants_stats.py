"""NIAH's numbers' details that the analysis tests leave open, each pinned by a value worked out by
hand: pooling fractional cells, a length with nothing scored, the depth bands' edges, and the
threshold a summary is asked for."""

from __future__ import annotations

import dataclasses
import math

import pytest
from test_store import record

from fathom.analysis.failures import failure_counts, failure_kind
from fathom.analysis.niah import (
    CellStats,
    LengthStats,
    effective_length,
    length_table,
    lost_in_the_middle_index,
    summarize,
    worst_depth_effective_length,
)
from fathom.analysis.ruler import LengthScore, TaskCell, length_scores, ruler_aggregates
from fathom.analysis.stats import (
    effective_by,
    rows_by,
    score_interval,
    weighted_score_interval,
    wilson_interval,
)


def cell(
    length: int, depth: float, n: int, mean: float | None, errors: int = 0, beyond: bool = False
) -> CellStats:
    low, high = wilson_interval((mean or 0.0) * n, n)
    return CellStats(length, depth, n, errors, mean, low, high, beyond)


def test_a_length_pools_its_cells_samples_fractional_scores_included() -> None:
    cells = [
        cell(1024, 0.0, 3, 0.5),  # RULER-style fractional scores: 1.5 of 3
        cell(1024, 1.0, 1, 1.0, errors=2, beyond=True),
        cell(2048, 0.0, 0, None, errors=3),  # every sample failed: nothing scored
    ]
    low, high = wilson_interval(2.5, 4)
    assert length_table(cells) == [
        LengthStats(1024, 4, 2, 2.5 / 4, low, high, True),
        LengthStats(2048, 0, 3, None, 0.0, 1.0, False),
    ]


def rows(*means: tuple[int, int, float | None]) -> list[LengthStats]:
    return [
        LengthStats(length, n, 0, mean, 0.0 if mean is None else mean, 1.0, False)
        for length, n, mean in means
    ]


def test_a_length_with_nothing_scored_fails_whatever_the_threshold() -> None:
    lengths = rows((1024, 5, 1.0), (2048, 0, None), (4096, 5, 1.0))
    assert effective_length(lengths, threshold=0.0) == 1024
    assert effective_length(lengths, threshold=0.0, use_lower_bound=True) == 1024


def test_a_length_with_one_scored_sample_counts() -> None:
    assert effective_length(rows((1024, 1, 1.0), (2048, 1, 1.0), (4096, 1, 0.0))) == 2048


def test_the_worst_depth_default_threshold_is_085_from_both_sides() -> None:
    # Called without a threshold: a worst cell at exactly 0.85 passes, at 0.84 it fails; the other
    # depth's cell is 1.0, so the length's worst cell is the one that decides.
    def at(worst: float) -> list[CellStats]:
        return [cell(1024, 0.0, 20, 1.0), cell(1024, 0.5, 20, worst)]

    assert worst_depth_effective_length(at(0.85)) == 1024
    assert worst_depth_effective_length(at(0.84)) is None


def test_the_depth_bands_include_their_bounds() -> None:
    # Edges: 0.1 and 0.9 (1 and 0.5 of 2 each: 3 of 4); middle: 0.3 and 0.7 (0 and 0.5: 1 of 4);
    # 0.2 and 0.8 belong to neither.
    cells = [
        cell(1024, 0.1, 2, 1.0),
        cell(1024, 0.2, 2, 0.0),
        cell(1024, 0.3, 2, 0.0),
        cell(1024, 0.7, 2, 0.5),
        cell(1024, 0.8, 2, 1.0),
        cell(1024, 0.9, 2, 0.5),
    ]
    assert lost_in_the_middle_index(cells) == pytest.approx(0.75 - 0.25)


def test_a_summary_judges_the_effective_length_at_the_threshold_it_is_given() -> None:
    # 20 of 20 at 1k (Wilson lower bound 0.839) and 12 of 20 at 2k (mean 0.6, lower bound 0.387).
    samples = [
        dataclasses.replace(record(i), sample_id=f"niah|L{length}|D0.5000|S{i}", length=length, score=score)
        for length, passed in ((1024, 20), (2048, 12))
        for i, score in enumerate([1.0] * passed + [0.0] * (20 - passed))
    ]
    assert summarize(samples, threshold=0.5)["effective_length"] == {
        "threshold": 0.5,
        "mean": 2048,
        "lower_bound": 1024,
        "worst_depth": 2048,  # one depth: its cell is the length
    }
    assert summarize(samples)["effective_length"] == {
        "threshold": 0.85,
        "mean": 1024,
        "lower_bound": None,
        "worst_depth": 1024,
    }


def test_a_ruler_length_is_beyond_the_window_when_any_of_its_tasks_is() -> None:
    grid = [
        TaskCell("vt", 1024, 2, 0, 1.0, 0.5, 1.0, False),
        TaskCell("cwe", 1024, 2, 0, 0.5, 0.25, 0.75, False),
        TaskCell("vt", 2048, 2, 0, 0.0, 0.0, 0.5, True),
        TaskCell("cwe", 2048, 2, 0, 0.5, 0.25, 0.75, False),
    ]
    # The bounds: each side's distances from the task means in quadrature, over the 2 tasks (MOVER).
    assert length_scores(grid) == [
        LengthScore(1024, 2, 0.75, pytest.approx(0.75 - math.sqrt(0.5**2 + 0.25**2) / 2), 0.875, False),
        LengthScore(2048, 2, 0.25, 0.125, pytest.approx(0.25 + math.sqrt(0.5**2 + 0.25**2) / 2), True),
    ]


def test_the_relative_effective_length_needs_a_score_above_the_cutoff() -> None:
    # Half of the 1k score, 80, is 40: 2k scores exactly that, which is not above it.
    aggregates = ruler_aggregates({1024: 80.0, 2048: 40.0}, relative_threshold=0.5)
    assert (aggregates.relative_cutoff, aggregates.effective_length_relative) == (40.0, 1024)
    assert (
        ruler_aggregates({1024: 80.0, 2048: 40.5}, relative_threshold=0.5).effective_length_relative == 2048
    )


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({"score": 1.0, "beyond_window": True, "error": None}, None),  # fully right, wherever it was
        ({"score": 0.0, "error": "backend_error: HTTP 500"}, "error"),
        ({"score": 0.0, "beyond_window": True}, "beyond_window"),
        ({"score": 0.0, "output": " \n\t"}, "empty"),
        ({"score": 1.0, "output": "1234567 or 7654321", "lured": ("7654321",)}, None),
        (
            {"score": 0.0, "output": "1234567 or 7654321", "matched": ("1234567",), "lured": ("7654321",)},
            "hedged",
        ),
        ({"score": 0.0, "output": "7654321", "matched": (), "lured": ("7654321",)}, "distractor"),
        ({"score": 0.5, "output": "1234567"}, "partial"),
        ({"score": 0.0, "output": "I\u2019m sorry, the text does not say."}, "refusal"),
        ({"score": 0.0, "output": "7654321"}, "wrong_answer"),
    ],
)
def test_each_failed_sample_has_the_first_failure_kind_that_applies(
    changes: dict[str, object], kind: str | None
) -> None:
    assert failure_kind(dataclasses.replace(record(0), **changes)) == kind  # type: ignore[arg-type]


def test_failures_are_counted_by_kind_with_the_fully_right_under_none() -> None:
    right = record(0)
    wrong = dataclasses.replace(record(1), score=0.0, output="7654321", matched=())
    empty = dataclasses.replace(record(2), score=0.0, output="", matched=())
    assert failure_counts([right, wrong, empty, wrong]) == {
        None: 1,
        "error": 0,
        "still_thinking": 0,
        "beyond_window": 0,
        "stopped": 0,
        "empty": 1,
        "hedged": 0,
        "distractor": 0,
        "partial": 0,
        "refusal": 0,
        "wrong_answer": 2,
    }


def test_a_negative_count_has_no_interval() -> None:
    with pytest.raises(ValueError) as raised:
        wilson_interval(1, -1)
    assert str(raised.value) == "n must be >= 0, got -1"


def test_a_perfect_score_reaches_one_and_drift_above_it_is_clamped() -> None:
    # At n = 20 the arithmetic of the upper bound for 20 of 20 lands a hair above 1.
    assert wilson_interval(20, 20)[1] == 1.0
    # A sum of float scores a hair above n reads as n.
    assert wilson_interval(3.0000000000000004, 3) == wilson_interval(3, 3)


def test_a_cell_row_names_its_haystack_likeness_only_where_records_hold_one() -> None:
    old = [dataclasses.replace(record(i), sample_id=f"niah|L1024|D0.5000|S{i}") for i in range(2)]
    new = [dataclasses.replace(r, haystack_similarity=0.1 * (i + 1)) for i, r in enumerate(old)]
    assert "similarity" not in summarize(old)["cells"][0]
    assert summarize(new)["cells"][0]["similarity"] == 0.2


def test_a_mixed_binary_run_of_30_or_more_gets_wilsons_interval_not_a_bootstrap() -> None:
    """36 of 40 (0s and 1s, above BOOTSTRAP_LEAST): Wilson's interval by hand, z = 1.959964: centre
    (0.9 + z^2/80) / (1 + z^2/40) = 0.864951, half-width 0.095469: [0.769482, 0.960420]."""
    mean, low, high = score_interval([1.0] * 36 + [0.0] * 4)
    assert mean == 0.9
    assert (low, high) == (pytest.approx(0.769482, abs=1e-6), pytest.approx(0.960420, abs=1e-6))


@pytest.mark.parametrize(("scores", "weights"), [([1.0, 0.0], [0.5]), ([1.0], [0.5, 0.5])])
def test_weights_not_one_to_one_with_the_scores_are_refused(
    scores: list[float], weights: list[float]
) -> None:
    """Fewer than BOOTSTRAP_LEAST scores: Wilson's branch pairs them; a weight too few or too many is
    a caller's mistake, never a mean of the scores that happen to have a weight."""
    with pytest.raises(ValueError, match="zip"):
        weighted_score_interval(scores, weights)


def test_each_value_has_the_effective_length_of_its_own_cells() -> None:
    """ops 1 holds 1k and 2k; ops 2 holds 1k and fails 2k: 2k and 1k, each of its own cells only."""
    cells = [
        {"ops": ops, "length": length, "mean": mean, "ci_low": mean}
        for ops, length, mean in [(1, 1024, 1.0), (1, 2048, 1.0), (2, 1024, 1.0), (2, 2048, 0.0)]
    ]
    assert effective_by(cells, "ops", 0.85) == [
        {"ops": 1, "mean": 2048, "lower_bound": 2048},
        {"ops": 2, "mean": 1024, "lower_bound": 1024},
    ]


def test_a_key_with_more_or_fewer_parts_than_names_is_refused() -> None:
    with pytest.raises(ValueError, match="zip"):
        rows_by([record(0)], lambda r: (r.length,), ("ops", "length"))
