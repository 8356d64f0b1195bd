"""fathom compare of thinking models (issue #35 item 1): each run's reasoning tokens a sample and its
samples still thinking, over the samples both hold and cell by cell, with the change, in compare.json,
the terminal and compare.html; nothing where neither run reads reasoning. Every number by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fathom.analysis.thinking import ThinkingChange, ThinkingComparison, compare_thinking
from fathom.cli import main
from fathom.records import THINKING, SampleRecord
from fathom.report.compare_text import thinking_comparison_text


def record(length: int, sample: int, tokens: int | None, **fields: Any) -> SampleRecord:
    values: dict[str, Any] = dict(
        sample_id=f"niah|L{length}|D0.5000|S{sample}", task="niah", length=length, depth=0.5,
        sample=sample, seed=0, prompt_sha256="0" * 64, target_tokens=length, actual_tokens=length,
        needle_kind="number", needle_token_offsets=(), needle_depths=(), question="q", answers=("7",),
        output="7", finish_reason="stop", score=1.0, matched=("7",), scoring="contains", latency_s=0.0,
        beyond_window=False, reasoning_tokens=tokens,
    )  # fmt: skip
    values.update(fields)
    return SampleRecord(**values)


BASE = [
    record(1024, 0, 100),
    record(1024, 1, 50),
    record(1024, 2, 200, finish_reason=THINKING, output="", score=0.0),
    record(2048, 0, 30),
    record(2048, 1, 999, error="backend_error: HTTP 500 (1 attempt)"),  # an error: left out
]
NEW = [
    record(1024, 0, 80),
    record(1024, 1, 40),
    record(1024, 2, 60),
    record(2048, 0, None),  # no reasoning read
    record(2048, 1, 10),
]


def test_each_cell_has_both_runs_tokens_the_change_and_the_samples_still_thinking() -> None:
    assert compare_thinking(BASE, NEW) == ThinkingComparison(
        # base: (100 + 50 + 200 + 30) / 4 = 95.0 (the error left out); new: (80 + 40 + 60 + 10) / 4 = 47.5
        ThinkingChange(None, None, None, 95.0, 47.5, 1, 0),
        (
            # 350 / 3 (116.7 to a tenth) and 180 / 3 = 60.0: -56.7
            ThinkingChange("niah", 1024, 0.5, 350 / 3, 60.0, 1, 0),
            ThinkingChange("niah", 2048, 0.5, 30.0, 10.0, 0, 0),
        ),
    )
    comparison = compare_thinking(BASE, NEW)
    assert comparison is not None
    assert [cell.change for cell in comparison.cells] == [-56.7, -20.0]
    assert comparison.to_json() == {
        "base_tokens_mean": 95.0,
        "new_tokens_mean": 47.5,
        "tokens_change": -47.5,
        "base_still_thinking": 1,
        "new_still_thinking": 0,
        "cells": [
            {
                "task": "niah",
                "length": 1024,
                "depth": 0.5,
                "base_tokens_mean": 116.7,
                "new_tokens_mean": 60.0,
                "tokens_change": -56.7,
                "base_still_thinking": 1,
                "new_still_thinking": 0,
            },
            {
                "task": "niah",
                "length": 2048,
                "depth": 0.5,
                "base_tokens_mean": 30.0,
                "new_tokens_mean": 10.0,
                "tokens_change": -20.0,
                "base_still_thinking": 0,
                "new_still_thinking": 0,
            },
        ],
    }
    assert thinking_comparison_text(comparison) == [
        "thinking (reasoning kept apart from the answer; base → new, over the samples both runs hold): "
        "95 → 47.5 (-47.5) tokens a sample, still thinking 1 → 0",
        "  1k, niah, depth 50%: 116.7 → 60 (-56.7) tokens a sample, still thinking 1 → 0",
        "  2k, niah, depth 50%: 30 → 10 (-20) tokens a sample, still thinking 0 → 0",
    ]


def test_a_run_that_reads_no_reasoning_beside_one_that_does() -> None:
    plain = [record(r.length, r.sample, None) for r in BASE]
    comparison = compare_thinking(plain, BASE)
    assert comparison is not None
    assert comparison.overall == ThinkingChange(None, None, None, None, 95.0, 0, 1)
    assert [(c.length, c.base_tokens, c.new_tokens, c.change) for c in comparison.cells] == [
        (1024, None, 350 / 3, None),
        (2048, None, 30.0, None),
    ]
    assert thinking_comparison_text(comparison)[1] == (
        "  1k, niah, depth 50%: none → 116.7 tokens a sample, still thinking 0 → 1"
    )


def test_the_change_is_the_unrounded_means_difference_to_a_tenth() -> None:
    """Means of 4/3 and 5/3 tokens are 1.3 and 1.7 to a tenth; their difference is 1/3, so 0.3, where
    the difference of the rounded means would say 0.4."""
    base = [record(1024, 0, 1), record(1024, 1, 1), record(1024, 2, 2)]
    new = [record(1024, 0, 1), record(1024, 1, 2), record(1024, 2, 2)]
    comparison = compare_thinking(base, new)
    assert comparison is not None
    assert (comparison.overall.change, comparison.overall.means) == (0.3, (1.3, 1.7))
    assert comparison.to_json()["tokens_change"] == comparison.to_json()["cells"][0]["tokens_change"] == 0.3
    assert thinking_comparison_text(comparison)[0].endswith(
        "1.3 → 1.7 (+0.3) tokens a sample, still thinking 0 → 0"
    )


def test_runs_that_read_no_reasoning_compare_with_nothing_said_of_it() -> None:
    plain = [record(r.length, r.sample, None) for r in NEW]
    assert compare_thinking(plain, plain) is None
    assert thinking_comparison_text(None) == []


@pytest.fixture(scope="module")
def thinkers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sim:thinker (up to 256 tokens of thinking) and sim:thinker?think=128, each with a budget of 120."""
    root = tmp_path_factory.mktemp("thinkers")
    grid = ["--lengths", "1k,2k", "--depths", "0.5", "--samples", "3", "--thinking-budget", "120"]
    for name, model in (("base", "sim:thinker"), ("new", "sim:thinker?think=128")):
        argv = ["run", "niah", "--model", model, *grid, "--no-control", "--no-progress"]
        assert main([*argv, "--run-dir", str(root / name)]) == 0
    return root


def test_compare_of_two_thinking_runs_says_their_reasoning(
    thinkers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    out = thinkers / "compared"
    assert main(["compare", str(thinkers / "base"), str(thinkers / "new"), "--out", str(out)]) == 0
    tokens = {
        name: [
            json.loads(line)["reasoning_tokens"]
            for line in (thinkers / name / "samples.jsonl").read_text().splitlines()
        ]
        for name in ("base", "new")
    }
    # The records' lines (base is records-v13's run): 1k then 2k, three samples each.
    assert tokens == {"base": [129, 150, 77, 65, 101, 137], "new": [82, 66, 55, 54, 125, 128]}
    # base: 356 / 3 = 118.7, 303 / 3 = 101, 659 / 6 = 109.8, one still thinking (150, at 1k);
    # new: 203 / 3 = 67.7, 307 / 3 = 102.3, 510 / 6 = 85, none (128 tokens at most: within 120 + 32).
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(
        "thinking (reasoning kept apart from the answer; base → new, over the samples both runs hold): "
        "109.8 → 85 (-24.8) tokens a sample, still thinking 1 → 0"
    )
    assert lines[start + 1 : start + 3] == [
        "  1k, niah, depth 50%: 118.7 → 67.7 (-51) tokens a sample, still thinking 1 → 0",
        "  2k, niah, depth 50%: 101 → 102.3 (+1.3) tokens a sample, still thinking 0 → 0",
    ]
    thinking = json.loads((out / "compare.json").read_text())["thinking"]
    assert (thinking["base_tokens_mean"], thinking["new_tokens_mean"], thinking["tokens_change"]) == (
        109.8,
        85.0,
        -24.8,
    )
    page = (out / "compare.html").read_text()
    assert "<h3>Thinking</h3>" in page
    assert (
        "<tr><td>1k · niah · 50%</td><td>118.7</td><td>67.7</td><td>-51</td><td>1</td><td>0</td></tr>" in page
    )


def test_compare_of_runs_that_do_not_think_has_no_thinking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = ["--lengths", "1k", "--depths", "0.5", "--samples", "2", "--no-control", "--no-progress"]
    for name, model in (("base", "sim:perfect"), ("new", "sim:cliff")):
        assert main(["run", "niah", "--model", model, *grid, "--run-dir", str(tmp_path / name)]) == 0
    capsys.readouterr()
    out = tmp_path / "compared"
    main(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--out", str(out)])
    assert "thinking" not in capsys.readouterr().out
    assert "thinking" not in json.loads((out / "compare.json").read_text())
    assert "<h3>Thinking</h3>" not in (out / "compare.html").read_text()
