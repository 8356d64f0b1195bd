"""RULER's analysis (``fathom.analysis.ruler``): the pieces that the tests in mutmut's selection left
open (the eighth round, docs/mutation.md), each pinned by a value worked out by hand: other tasks
ordered with their numbers read as numbers, RULER's categories rolled up from their own tasks, and
the combined interval's upper bound clamped at 1."""

from __future__ import annotations

import pytest

from fathom.analysis.ruler import TaskCell, _by_number, category_scores, mean_interval, task_order


def test_tasks_outside_the_suite_follow_it_their_numbers_read_as_numbers() -> None:
    tasks = ["state:16", "b10", "qa_1", "state:x", "state:4", "niah_single_1", "b2"]
    # The suite's own first (niah before qa), then by name: "b" before "state:", 2 before 10, 4 before
    # 16, and "state:" followed by a number before "state:x" (a name's text is compared with text).
    assert task_order(tasks) == ["niah_single_1", "qa_1", "b2", "b10", "state:4", "state:16", "state:x"]
    assert _by_number("state:16") == ["state:", 16, ""]
    assert _by_number("a1b22") == ["a", 1, "b", 22, ""]
    assert _by_number("plain") == ["plain"]


def cell(task: str, mean: float) -> TaskCell:
    """A task's cell at 1k whose interval is its mean alone."""
    return TaskCell(task, 1024, 10, 0, mean, mean, mean, False)


def test_a_category_holds_the_tasks_of_its_own_that_the_run_has() -> None:
    grid = [cell("niah_single_1", 1.0), cell("niah_single_2", 0.5), cell("vt", 0.25)]
    at_1k = {"length": 1024, "beyond_window": False}
    assert category_scores(grid) == [
        {
            "category": "retrieval",
            "tasks": ["niah_single_1", "niah_single_2"],
            "lengths": [at_1k | {"tasks": 2, "mean": 0.75, "ci_low": 0.75, "ci_high": 0.75}],
        },
        {
            "category": "multi-hop tracing",
            "tasks": ["vt"],
            "lengths": [at_1k | {"tasks": 1, "mean": 0.25, "ci_low": 0.25, "ci_high": 0.25}],
        },
    ]


def test_the_combined_intervals_upper_bound_is_clamped_at_1() -> None:
    """Four tasks at 1 and one at 7/23 whose interval reaches 1: the mean is (4 + 7/23) / 5 and the
    distance above it 16/23 / 5, which sum to 1 exactly, but in floats to 1.0000000000000002."""
    mean, low, high = mean_interval([(1.0, 1.0, 1.0)] * 4 + [(7 / 23, 0.0, 1.0)])
    assert high == 1.0
    # Below: 7/23 / 5 = 7/115 under the mean of 99/115.
    assert (mean, low) == (pytest.approx(99 / 115), pytest.approx(92 / 115))
