"""RULER's four categories (retrieval, multi-hop tracing, aggregation, question answering): each one's
mean over its tasks per length, its interval the tasks' own combined by MOVER, in summary.json, the
terminal text and report.html. The numbers are worked by hand from a grid built by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fathom.analysis.ruler import TaskCell, category_scores
from fathom.analysis.summary import RulerGrid, Summary
from fathom.cli import main
from fathom.report.categories_text import categories_text
from fathom.tasks.ruler.catalogue import CATEGORIES, SUITE

GRID = [
    TaskCell("niah_single_1", 4096, 10, 0, 1.0, 0.8, 1.0, False),
    TaskCell("niah_multivalue", 4096, 10, 0, 0.5, 0.3, 0.7, False),
    TaskCell("niah_single_1", 8192, 10, 0, 0.9, 0.6, 1.0, True),
    TaskCell("niah_multivalue", 8192, 10, 0, 0.1, 0.0, 0.4, True),
    TaskCell("vt", 4096, 10, 0, 0.6, 0.4, 0.8, False),
    TaskCell("vt", 8192, 10, 0, 0.2, 0.1, 0.5, True),
    TaskCell("cwe", 4096, 10, 10, None, 0.0, 1.0, False),  # every sample an error: nothing scored
    TaskCell("fwe", 4096, 10, 0, 0.2, 0.1, 0.4, False),
    TaskCell("cwe", 8192, 10, 0, 0.3, 0.1, 0.6, True),
    TaskCell("fwe", 8192, 10, 0, 0.5, 0.2, 0.8, True),
    TaskCell("state:4", 4096, 10, 0, 0.0, 0.0, 0.3, False),  # no RULER task: in no category
]


def test_the_categories_are_the_papers_and_cover_the_suite_once() -> None:
    assert list(CATEGORIES) == ["retrieval", "multi-hop tracing", "aggregation", "question answering"]
    assert CATEGORIES["retrieval"] == (
        "niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
        "niah_multikey_3", "niah_multivalue", "niah_multiquery",
    )  # fmt: skip
    assert (CATEGORIES["multi-hop tracing"], CATEGORIES["aggregation"]) == (("vt",), ("cwe", "fwe"))
    assert CATEGORIES["question answering"] == ("qa_1", "qa_2")
    assert sorted(t for tasks in CATEGORIES.values() for t in tasks) == sorted(SUITE)


def test_each_category_is_the_mean_of_its_tasks_with_their_intervals_combined() -> None:
    rows = category_scores(GRID)
    # No qa task in the grid: no question answering row; state:4 is in none.
    assert [(r["category"], r["tasks"]) for r in rows] == [
        ("retrieval", ["niah_single_1", "niah_multivalue"]),
        ("multi-hop tracing", ["vt"]),
        ("aggregation", ["cwe", "fwe"]),
    ]
    retrieval, tracing, aggregation = ({r["length"]: r for r in row["lengths"]} for row in rows)
    # 4k: (1.0 + 0.5) / 2 = 0.75; below sqrt(0.2^2 + 0.2^2) / 2, above sqrt(0^2 + 0.2^2) / 2 = 0.1.
    at_4k = retrieval[4096]
    assert (at_4k["tasks"], at_4k["mean"], at_4k["beyond_window"]) == (2, 0.75, False)
    assert at_4k["ci_low"] == pytest.approx(0.75 - math.sqrt(0.08) / 2)
    assert at_4k["ci_high"] == pytest.approx(0.85)
    # 8k: (0.9 + 0.1) / 2 = 0.5; below sqrt(0.3^2 + 0.1^2) / 2, above sqrt(0.1^2 + 0.3^2) / 2.
    at_8k = retrieval[8192]
    assert at_8k["mean"] == pytest.approx(0.5) and at_8k["beyond_window"] is True
    assert at_8k["ci_low"] == pytest.approx(0.5 - math.sqrt(0.1) / 2)
    assert at_8k["ci_high"] == pytest.approx(0.5 + math.sqrt(0.1) / 2)
    # One task: its own interval.
    assert [(r["mean"], r["ci_low"], r["ci_high"]) for r in tracing.values()] == [
        (0.6, 0.4, 0.8),
        (0.2, 0.1, 0.5),
    ]
    # 4k: cwe has nothing scored, so no mean over fwe alone; 8k: (0.3 + 0.5) / 2.
    assert (aggregation[4096]["tasks"], aggregation[4096]["mean"], aggregation[4096]["ci_low"]) == (
        1,
        None,
        None,
    )
    assert aggregation[8192]["mean"] == pytest.approx(0.4)
    assert aggregation[8192]["ci_low"] == pytest.approx(0.4 - math.sqrt(0.2**2 + 0.3**2) / 2)
    assert aggregation[8192]["ci_high"] == pytest.approx(0.4 + math.sqrt(0.3**2 + 0.3**2) / 2)


def test_a_run_of_no_ruler_task_has_no_categories() -> None:
    assert category_scores([GRID[-1]]) == []


def test_the_categories_read_back_and_a_summary_without_them_still_reads() -> None:
    base = {"schema": 7, "kind": "ruler", "samples": 1, "errors": 0, "error_kinds": {}, "grid": [],
            "lengths": [], "aggregates": {}, "depth_profile": []}  # fmt: skip
    without = Summary.from_json(base)
    assert isinstance(without.sweep, RulerGrid) and without.sweep.categories == ()
    assert "categories" not in without.to_json()  # left out where empty, as before it existed
    rows = category_scores(GRID)
    summary = Summary.from_json(base | {"categories": rows})
    assert (
        isinstance(summary.sweep, RulerGrid) and summary.to_json()["categories"] == summary.sweep.categories
    )
    assert [row["category"] for row in summary.sweep.categories] == [
        "retrieval",
        "multi-hop tracing",
        "aggregation",
    ]


def test_the_terminal_gives_each_category_a_line_with_its_intervals() -> None:
    assert categories_text([]) == []
    assert categories_text(category_scores(GRID)) == [
        "by RULER's category (percent, mean over its tasks [95% interval]):",
        "  retrieval         (2 tasks)  4k 75.0 [60.9, 85.0], 8k 50.0 [34.2, 65.8]",
        "  multi-hop tracing (1 task)   4k 60.0 [40.0, 80.0], 8k 20.0 [10.0, 50.0]",
        "  aggregation       (2 tasks)  4k n/a, 8k 40.0 [22.0, 61.2]",
    ]


@pytest.mark.essays
def test_a_ruler_run_prints_and_reports_its_categories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sim:one-fact on the whole suite at 8k: the retrieval category holds its 25% on multi-value and
    multi-query beside 100% on the six one-key tasks: (6 + 0.25 + 0.25) / 8 = 81.25%."""
    args = ["run", "ruler", "--model", "sim:one-fact", "--tokenizer", "cl100k_base", "--lengths", "8k"]
    assert main([*args, "--samples", "1", "--no-control", "--run-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "by RULER's category (percent, mean over its tasks [95% interval]):" in out
    assert "  retrieval          (8 tasks)  8k 81.2 [" in out
    report = (tmp_path / "run" / "report.html").read_text()
    assert "<h3>By RULER's category (mean over its tasks, 95% interval)</h3>" in report
    assert "<td>question answering</td><td>qa_1, qa_2</td>" in report
