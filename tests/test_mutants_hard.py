"""``fathom.analysis.hard`` where its own tests leave it open: a needle found whatever the case of the
answer that names it (their records' needles are numbers, whose case cannot differ)."""

from __future__ import annotations

import dataclasses
from typing import Any

from test_store import record

from fathom.analysis.hard import (
    PositionRow,
    ScoreRow,
    Share,
    all_or_nothing,
    distance_table,
    form_table,
    literal_cost,
    needle_positions,
    neighbour_table,
    odd_name_table,
)
from fathom.analysis.stats import wilson_interval
from fathom.records import SampleRecord

TWO = dataclasses.replace(
    record(0),
    needle_token_offsets=(100, 900),
    needle_depths=(0.15, 0.85),
    needle_values=("Funhaven", "Thuskbury"),
    needle_roles=("gold", "gold"),
    answers=("Funhaven", "Thuskbury"),
    matched=("FUNHAVEN",),
)


def test_a_gold_is_found_whatever_the_case_the_answer_names_it_in() -> None:
    # The needle at 0.15 (bin 0.1-0.2) named in capitals is found; the one at 0.85 is not.
    assert needle_positions([TWO]) == [
        PositionRow(0.1, 0.2, Share(1, 1, 1.0, *wilson_interval(1, 1))),
        PositionRow(0.8, 0.9, Share(1, 0, 0.0, *wilson_interval(0, 1))),
    ]


def test_a_sample_with_two_golds_counts_for_all_or_nothing() -> None:
    (row,) = all_or_nothing([TWO])  # one of its two golds found: not all
    assert (row.label, row.n, row.mean) == ("1024", 1, 0.0)


def test_parts_a_whole_haystack_apart_fall_in_the_last_bin() -> None:
    parts = dataclasses.replace(TWO, needle_depths=(0.0, 1.0), needle_roles=("part", "part"))
    (row,) = distance_table([parts])
    assert (row.label, row.n) == ("0.9-1.0", 1)


def test_errored_samples_and_controls_count_nowhere() -> None:
    errored = dataclasses.replace(TWO, error="backend_error: timed out")
    control = dataclasses.replace(TWO, control=True)
    assert needle_positions([errored, control]) == [] and all_or_nothing([errored, control]) == []


def test_the_literal_cost_pairs_each_sample_with_its_twin_of_either_name_at_each_length() -> None:
    def asked(task: str, length: int, sample: int, score: float) -> SampleRecord:
        return dataclasses.replace(record(sample), task=task, length=length, score=score)

    low, literal = [0.0, 0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0, 1.0]
    records = [
        *(asked("niah", 1024, i, score) for i, score in enumerate(low)),
        *(asked("niah:literal", 1024, i, score) for i, score in enumerate(literal)),
        # A variant's twin is named with "+literal"; a sample with no twin (2) is in no pair.
        asked("niah:code", 2048, 0, 1.0), asked("niah:code", 2048, 1, 1.0), asked("niah:code", 2048, 2, 0.0),
        asked("niah:code+literal", 2048, 0, 0.0), asked("niah:code+literal", 2048, 1, 1.0),
        # Another task's pair at the same length, depth and sample: a pair of its own.
        asked("niah", 2048, 0, 0.0), asked("niah:literal", 2048, 0, 1.0),
    ]  # fmt: skip
    # 1k: the literal twin right where the low-overlap sample was wrong 3 times, the reverse once, one
    # tie; the sign test: n = 4, 2 P(X <= 1) = 2 (1 + 4) / 16 = 0.625. 2k: each way once, one tie:
    # n = 2, 2 P(X <= 1) = 1.5, capped at 1.
    assert literal_cost(records) == [
        {"length": 1024, "pairs": 5, "low_overlap": 0.4, "literal": 0.8, "cost": 0.4, "literal_better": 3,
         "low_overlap_better": 1, "p_value": 0.625},
        {"length": 2048, "pairs": 3, "low_overlap": 2 / 3, "literal": 2 / 3, "cost": 0.0, "literal_better": 1,
         "low_overlap_better": 1, "p_value": 1.0},
    ]  # fmt: skip


def scored(task: str, sample: int, score: float, **fields: Any) -> SampleRecord:
    return dataclasses.replace(record(sample), task=task, score=score, **fields)


def test_the_odd_name_table_gives_each_variants_score_beside_the_readers_on_its_own_samples() -> None:
    records = [
        scored("niah:b", 0, 1.0, odd_name_score=1.0), scored("niah:b", 1, 0.0, odd_name_score=1.0),
        scored("niah:b", 2, 1.0, odd_name_score=0.0),
        scored("niah:b", 3, 0.0),  # written before the reader was recorded: left out
        scored("niah:b", 4, 0.0, odd_name_score=1.0, error="backend_error: made up"),  # not graded
        scored("niah:a", 0, 0.0, odd_name_score=0.0),
    ]  # fmt: skip
    # b: 2 of 3 right, and the reader 2 of 3; a: one sample, wrong, the reader too.
    two_of_three = {"mean": 2 / 3, "ci_low": wilson_interval(2, 3)[0], "ci_high": wilson_interval(2, 3)[1]}
    none_of_one = {"mean": 0.0, "ci_low": 0.0, "ci_high": wilson_interval(0, 1)[1]}
    assert odd_name_table(records) == [
        {"variant": "niah:a", "n": 1, "score": none_of_one, "odd_name": none_of_one},
        {"variant": "niah:b", "n": 3, "score": two_of_three, "odd_name": two_of_three},
    ]


def test_the_neighbour_table_splits_low_overlap_samples_by_a_near_neighbour_in_their_window() -> None:
    latent = ("item-1",)
    records = [
        scored("niah:latent", 0, 1.0, latent_items=latent, literal_neighbours=("Washington",)),
        scored("niah:latent", 1, 0.0, latent_items=latent, literal_neighbours=("Paris", "Texas")),
        scored("niah:latent", 2, 1.0, latent_items=latent),
        scored("niah:latent+literal", 3, 0.0, latent_items=latent, literal_neighbours=("Paris",)),  # a twin
        scored("niah", 4, 0.0, literal_neighbours=("Paris",)),  # no low-overlap item
    ]
    # Met a neighbour: samples 0 and 1 (1 of 2 right); met none: sample 2 (1 of 1).
    assert neighbour_table(records) == [
        ScoreRow("near neighbour", 2, 0.5, *wilson_interval(1, 2)),
        ScoreRow("none", 1, 1.0, *wilson_interval(1, 1)),
    ]
    assert neighbour_table(records[2:]) == []  # no sample met one


def test_the_form_table_scores_each_value_of_an_axis_the_run_drew_more_than_one_of() -> None:
    records = [
        scored("niah:latent", 0, 1.0, needle_forms=("born/before/plain",)),
        # Two needles of one order: counted once under it, and once under each relation.
        scored("niah:latent", 1, 0.0, needle_forms=("born/after/plain", "lives/after/plain")),
        scored("niah:latent", 2, 1.0, needle_forms=("lives/before/plain",)),
        scored("niah:latent+literal", 3, 0.0, needle_forms=("born/after/odd",)),  # a twin: left out
        scored("niah:latent", 4, 0.0),  # no forms recorded: left out
    ]

    def row(axis: str, label: str, right: int, n: int) -> dict[str, Any]:
        return {
            "axis": axis,
            "label": label,
            "n": n,
            "mean": right / n,
            **dict(zip(("ci_low", "ci_high"), wilson_interval(right, n), strict=True)),
        }

    # Relation: born 1 of 2 (0, 1), lives 1 of 2 (1, 2); order: after 0 of 1, before 2 of 2; one
    # template only, so no rows for it.
    assert form_table(records) == [
        row("relation", "born", 1, 2), row("relation", "lives", 1, 2),
        row("order", "after", 0, 1), row("order", "before", 2, 2),
    ]  # fmt: skip
