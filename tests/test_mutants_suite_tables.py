"""A real suite's tables (``fathom.analysis.suites``) on a few records set by hand: which item a sample
asks, each item's mean, and a task's pooled row, whose interval is over its items, not its samples.
The end-to-end tests reach these only through a whole run's summary; each value here is worked out in
the comment beside it."""

from __future__ import annotations

import dataclasses
import math

import pytest
from test_awkward_fixtures import item

from fathom.analysis.suites import item_key, item_means, mean_over_tasks, task_table, truncation_table
from fathom.records import SampleRecord

Z = 1.959963984540054  # the normal's 97.5% point


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson's 95% score interval, written out: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    p, z2 = successes / n, Z * Z
    centre, half = p + z2 / (2 * n), Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (centre - half) / (1 + z2 / n), (centre + half) / (1 + z2 / n)


def test_an_item_is_its_id_or_else_its_place_in_the_data_file() -> None:
    assert item_key(item("qasper", 3, 1024, 1.0)) == ("qasper", "qasper-3")
    assert item_key(dataclasses.replace(item("qasper", 3, 1024, 1.0), item_id=None)) == ("qasper", "3")


def test_each_items_mean_is_over_its_graded_samples_in_the_order_items_first_appear() -> None:
    records = [
        item("qasper", 1, 1024, 1.0), item("qasper", 0, 1024, 1.0), item("qasper", 1, 2048, 0.0),
        item("qasper", 0, 2048, 0.0, "backend_error: made up"), item("qasper", 0, 4096, 1.0),
    ]  # fmt: skip
    # Item 1: (1 + 0) / 2; item 0: its errored sample left out, (1 + 1) / 2.
    assert item_means(records) == [0.5, 1.0]


def test_a_tasks_pooled_row_counts_cut_prompts_and_takes_its_interval_over_items() -> None:
    # Four items at two limits: 0-2 right at both, 3 wrong at both; item 0's 2k prompt was cut.
    records = [
        dataclasses.replace(
            item("qasper", i, limit, 0.0 if i == 3 else 1.0), truncated=(i, limit) == (0, 2048)
        )
        for i in range(4)
        for limit in (1024, 2048)
    ]
    (row,) = task_table(records)
    # Pooled: 6 of 8 samples right, the interval Wilson's for 3 items of 4 (each item 0 or 1); the
    # samples' own interval would be Wilson's for 6 of 8, narrower.
    low, high = wilson(3, 4)
    assert {key: row[key] for key in ("task", "items", "n", "errors", "mean", "truncated")} == {
        "task": "qasper", "items": 4, "n": 8, "errors": 0, "mean": 0.75, "truncated": 1,
    }  # fmt: skip
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high))
    assert (row["ci_low"], row["ci_high"]) != pytest.approx(wilson(6, 8))
    assert [(cell["length"], cell["n"], cell["mean"], cell["truncated"]) for cell in row["lengths"]] == [
        (1024, 4, 0.75, 0), (2048, 4, 0.75, 1),
    ]  # fmt: skip
    assert (row["lengths"][0]["ci_low"], row["lengths"][0]["ci_high"]) == pytest.approx(wilson(3, 4))


def test_the_mean_over_tasks_of_as_many_items_is_wilsons_over_their_items_without_errors() -> None:
    records = [
        item("qasper", 0, 1024, 1.0), item("qasper", 1, 1024, 0.0), item("hotpotqa", 0, 1024, 1.0),
        item("hotpotqa", 1, 1024, 1.0), item("hotpotqa", 1, 2048, 0.0, "backend_error: made up"),
    ]  # fmt: skip
    # Graded: qasper 1, 0 (mean 0.5); hotpotqa 1, 1 (mean 1.0); the errored sample left out. Two items
    # a task, so each item weighs the same: Wilson's interval for 3 items right of 4.
    mean = mean_over_tasks(records)
    assert (mean.tasks, mean.items, mean.n, mean.mean) == (2, 4, 4, 0.75)
    assert (mean.ci_low, mean.ci_high) == pytest.approx(wilson(3, 4))


def test_the_truncation_table_gives_each_task_and_limit_its_cut_prompts_and_how_much_went() -> None:
    def cut(index: int, original: int | None) -> SampleRecord:
        return dataclasses.replace(item("qasper", index, 1024, 1.0), truncated=True, original_tokens=original)

    records = [
        cut(0, 3000), cut(1, 2048), item("qasper", 2, 1024, 1.0),
        cut(3, None),  # cut, but its length before is not known: not counted as cut
        item("hotpotqa", 0, 2048, 0.0),
    ]  # fmt: skip
    # qasper at 1k: 3000 - 1024 = 1976 tokens removed (1976 / 3000 of the prompt) and 2048 - 1024 =
    # 1024 (half of it).
    assert truncation_table(records) == [
        {"task": "hotpotqa", "length": 2048, "samples": 1, "truncated": 0, "mean_removed_tokens": None,
         "max_removed_tokens": 0, "mean_removed_share": None},
        {"task": "qasper", "length": 1024, "samples": 4, "truncated": 2, "mean_removed_tokens": 1500.0,
         "max_removed_tokens": 1976, "mean_removed_share": (1976 / 3000 + 0.5) / 2},
    ]  # fmt: skip
