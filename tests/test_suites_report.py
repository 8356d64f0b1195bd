"""A real suite's runs as the report, ``fathom runs`` and ``fathom compare`` show them: each task's score
with its interval (Wilson's for 0/1 scores, a bootstrap for fractional ones), the judges beside the
metric, the mean over tasks where a sweep has an effective length, and two checkpoints compared task by
task on the same items, the pairs of different items left out.

The runs are made by ``fathom run`` on small files in LongBench's layout; their scores are then set by
hand (the prompts, and so the pairs, stay the simulated model's), so every number below is worked out
here from those scores.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from test_store import record
from test_suites import _jsonl, longbench_item

from fathom.analysis.paired import sign_test
from fathom.analysis.stats import bootstrap_interval, score_interval, wilson_interval
from fathom.analysis.suites import mean_over_tasks, task_table
from fathom.cli import main
from fathom.records import SampleRecord
from fathom.report.html.suites import suite_section
from fathom.report.text import suite_tasks_text

TASKS = ("hotpotqa", "multifieldqa_en")
ITEMS = 4
LENGTHS = (1024, 8192)  # with the char tokenizer, 1k cuts every item's prompt and 8k none


def write_data(folder: Path, order: tuple[int, ...] = tuple(range(ITEMS))) -> Path:
    """LongBench files of two tasks, ``ITEMS`` items each, in ``order``."""
    folder.mkdir(parents=True)
    for task in TASKS:
        _jsonl(folder / f"{task}.jsonl", [longbench_item(i) for i in order])
    return folder


def make_run(folder: Path, data: Path, scores: dict[str, list[float]]) -> Path:
    """A run of both tasks at both lengths whose scores are then ``scores[task]``: the samples in the
    order 1k item 0..3, then 8k item 0..3."""
    argv = ["run", "longbench", "--suite-tasks", ",".join(TASKS), "--data", str(data), "--tokenizer", "char"]
    lengths = ",".join(f"{n // 1024}k" for n in LENGTHS)
    common = ["--lengths", lengths, "--samples", str(ITEMS), "--model", "sim:perfect", "--no-control"]
    assert main([*argv, *common, "--run-dir", str(folder), "--no-progress"]) == 0
    path = folder / "samples.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        place = LENGTHS.index(line["length"]) * ITEMS + line["sample"]
        line["score"] = scores[line["task"]][place]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["report", str(folder)]) == 0  # summary.json and report.html from the scores set here
    return folder


# hotpotqa's scores are 0/1 (Wilson's interval), multifieldqa_en's fractional (the bootstrap).
BASE = {"hotpotqa": [1, 0, 1, 1, 1, 1, 1, 1], "multifieldqa_en": [0.5, 0.25, 0.0, 0.5, 0.5, 0.5, 0.25, 0.5]}
# The new checkpoint: hotpotqa falls on 7 of its 8 pairs (the other was already 0); multifieldqa_en is
# better on 2 pairs, worse on 2 and ties on 4.
NEW = {"hotpotqa": [0] * 8, "multifieldqa_en": [0.75, 0.25, 0.0, 0.25, 0.5, 0.75, 0.25, 0.25]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("suites")
    data = write_data(root / "data")
    make_run(root / "base", data, BASE)
    make_run(root / "new", data, NEW)
    return root


def summary(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    return data


def test_each_task_has_its_score_and_interval_over_all_lengths_and_at_each(runs: Path) -> None:
    suites = summary(runs / "base")["suites"]
    hotpot, multifield = suites["by_task"]
    assert (hotpot["task"], hotpot["scoring"], hotpot["n"], hotpot["errors"]) == (
        "hotpotqa",
        "longbench:qa_f1",
        8,
        0,
    )
    # 7 of 8 right: 0/1 scores, so Wilson's interval; the 4 prompts at 1k were cut, none at 8k.
    assert hotpot["mean"] == 7 / 8 and (hotpot["ci_low"], hotpot["ci_high"]) == wilson_interval(7, 8)
    assert hotpot["truncated"] == 4
    at_1k, at_8k = hotpot["lengths"]
    assert (at_1k["length"], at_1k["n"], at_1k["mean"], at_1k["truncated"]) == (1024, 4, 3 / 4, 4)
    assert (at_1k["ci_low"], at_1k["ci_high"]) == wilson_interval(3, 4)
    assert (at_8k["length"], at_8k["mean"], at_8k["truncated"]) == (8192, 1.0, 0)
    # Fractional scores (3.0 over 8): the percentile bootstrap over the samples.
    assert multifield["mean"] == 3 / 8
    assert (multifield["ci_low"], multifield["ci_high"]) == bootstrap_interval(BASE["multifieldqa_en"])
    assert multifield["lengths"][0]["mean"] == 1.25 / 4 and multifield["lengths"][1]["mean"] == 1.75 / 4
    # Two tasks of 8 samples: the mean over tasks is the mean of all 16, (7 + 3) / 16.
    mean = suites["mean"]
    assert (mean["tasks"], mean["n"], mean["mean"]) == (2, 16, 10 / 16)
    assert (mean["ci_low"], mean["ci_high"]) == score_interval(BASE["hotpotqa"] + BASE["multifieldqa_en"])[1:]


def sample(task: str, score: float, error: str | None = None) -> SampleRecord:
    return dataclasses.replace(record(0), task=task, score=score, error=error, original_tokens=900)


def test_tasks_of_unequal_size_weigh_the_same_in_the_mean_over_tasks() -> None:
    records = [sample("a", 1.0), sample("a", 0.0)] + [sample("b", s) for s in (0.5, 0.5, 0.2, 0.2)]
    records.append(sample("b", 0.0, error="timeout"))  # no grade: neither in n nor in the mean
    mean = mean_over_tasks(records)
    # Task a's mean is 0.5 and b's 0.35, so 0.425 (the mean over the 6 samples would be 0.4).
    assert (mean.tasks, mean.n) == (2, 6) and mean.mean == pytest.approx(0.425)
    weights = [1 / 2] * 2 + [1 / 4] * 4
    assert (mean.ci_low, mean.ci_high) == bootstrap_interval([1.0, 0.0, 0.5, 0.5, 0.2, 0.2], weights)
    assert mean_over_tasks([]).mean is None
    (row,) = [r for r in task_table(records) if r["task"] == "b"]
    assert (row["n"], row["errors"], row["mean"]) == (4, 1, pytest.approx(0.35))


def test_the_report_prints_the_tasks_and_the_mean_over_them(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(runs / "base")]) == 0
    out = capsys.readouterr().out
    # Wilson's interval of 7 of 8 by hand: centre (0.875 + z²/16) / (1 + z²/8) = 0.7533, half-width
    # z √(0.875 · 0.125 / 8 + z²/256) / (1 + z²/8) = 0.2242 (z = 1.96); of 3 of 4, 0.6275 ± 0.3269.
    assert "  hotpotqa          all  87.5% [52.9, 97.8]    n=8, 4 cut  (longbench:qa_f1)" in out
    assert "                     1k  75.0% [30.1, 95.4]    n=4, 4 cut" in out
    low, high = score_interval(BASE["hotpotqa"] + BASE["multifieldqa_en"])[1:]
    assert (
        f"mean over 2 tasks, each weighing the same: 62.5% [{100 * low:.1f}, {100 * high:.1f}] (16 samples)"
        in out
    )
    assert "effective length" not in out


def test_the_page_sets_the_judges_beside_the_metric(tmp_path: Path, runs: Path) -> None:
    judged = tmp_path / "judged"
    make_run(judged, runs / "data", BASE)
    assert main(["judge", str(judged), "--judge", "sim-judge:reference", "--no-progress"]) == 0
    written = summary(judged)
    (section,) = written["judges"]
    page = (judged / "report.html").read_text()
    table = page[page.index('<section id="suite-tasks">') :]
    table = table[: table.index("</section>")]
    assert "<th>judge: qa-correctness@1 (0-1)</th>" in table
    # Each task's row: the metric's pooled score and interval, then the judge's mean, as the summary has it.
    for row, judge in zip(written["suites"]["by_task"], section["by_task"], strict=True):
        assert row["task"] == judge["task"]
        cells = f"<td>{row['task']}</td><td>longbench:qa_f1</td><td>all</td><td>8</td>"
        assert cells + f"<td>{row['mean']:.1%}</td>" in table
        assert f"<td>{row['truncated']}</td><td>{judge['judge']:.2f}</td></tr>" in table
    # A suite's headline is its mean over tasks, not RULER's effective length.
    assert "mean over 2 tasks, each weighing the same" in page and "effective length" not in page


def test_an_older_summary_without_the_tables_shows_none() -> None:
    older = {"truncated": 0, "samples": 2, "truncation": [], "splits": [], "by_actual_length": []}
    assert suite_tasks_text(older) == [] and suite_section(older, []) == ""


def test_runs_lists_a_suite_runs_mean_over_tasks(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (base,) = [line for line in lines if "  base  " in line]
    low, high = score_interval(BASE["hotpotqa"] + BASE["multifieldqa_en"])[1:]
    assert base.endswith(f"complete  mean 62.5% [{100 * low:.1f}, {100 * high:.1f}] over 2 tasks")
    assert "effective" not in base


def test_compare_tests_each_task_and_a_regressed_task_fails_the_command(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = runs / "comparison"
    assert main(["compare", str(runs / "base"), str(runs / "new"), "--out", str(out)]) == 1
    text = capsys.readouterr().out
    data = json.loads((out / "compare.json").read_text())
    hotpot, multifield = data["tasks"]
    # hotpotqa: 7 pairs worse, none better, one tie: p = 2 / 2^7; Holm doubles the smaller of the
    # two tasks' p (multifieldqa_en's is 1), 1/32 < 0.05, and the mean fell: regressed.
    differences = [new - base for base, new in zip(BASE["hotpotqa"], NEW["hotpotqa"], strict=True)]
    low, high = bootstrap_interval(differences)
    assert hotpot == {
        "task": "hotpotqa",
        "pairs": 8,
        "base_mean": 7 / 8,
        "new_mean": 0.0,
        "worse": 7,
        "better": 0,
        "p_value": 1 / 64,
        "difference": -7 / 8,
        "difference_ci_low": low,
        "difference_ci_high": high,
        "p_adjusted": 1 / 32,
        "verdict": "regressed",
    }
    assert low < -7 / 8 < high  # the bootstrap's resamples hold more or fewer of the one tie
    # multifieldqa_en: 2 pairs better by 0.25, 2 worse by 0.25, 4 ties: no change.
    assert (multifield["worse"], multifield["better"], multifield["p_value"]) == (2, 2, 1.0)
    assert multifield["difference"] == 0.0 and multifield["p_adjusted"] == 1.0
    assert multifield["verdict"] == "unchanged"
    # No cell of 4 pairs can reach 0.05 after Holm over 4 cells: the task's verdict is the one that
    # fails the command.
    assert [c["verdict"] for c in data["cells"]] == ["unchanged"] * 4 and data["regressions"] == 1
    assert data["overall"]["p_value"] == sign_test(9, 2) == 134 / 2048
    assert "effective_length" not in data and data["left_out"] == {"errors": 0, "unpaired": 0, "items": 0}
    assert data["data_differences"] == []
    assert "effective length" not in text
    assert (
        "  hotpotqa: 87.5% → 0.0% (-87.5 points, "
        f"95% interval {100 * low:+.1f} to {100 * high:+.1f}; 8 pairs: 7 worse, 0 better), p = 0.0156, "
        "adjusted p = 0.0312: regressed"
    ) in text.splitlines()
    assert "regressed tasks (Holm-adjusted p < 0.05 over 2 tasks): hotpotqa" in text
    assert "improved tasks (Holm-adjusted p < 0.05 over 2 tasks): none" in text
    assert (
        "cells (task x length limit, Holm-adjusted over 4 cells, drawn in compare.html): 0 regressed" in text
    )
    page = (out / "compare.html").read_text()
    assert "<h3>By task</h3>" in page and "regressed tasks" in page and "effective length" not in page
    assert "<td>hotpotqa</td><td>87.5%</td><td>0.0%</td><td>-87.5</td>" in page


def test_pairs_of_different_items_are_left_out_with_a_warning(
    tmp_path: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of the same files elsewhere pairs as one; files whose items 0 and 1 swapped places leave
    those two items' pairs out, at both lengths and in both tasks: 8 of the 16."""
    swapped = make_run(tmp_path / "swapped", write_data(tmp_path / "data", (1, 0, 2, 3)), NEW)
    out = tmp_path / "comparison"
    assert main(["compare", str(runs / "base"), str(swapped), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads((out / "compare.json").read_text())
    assert data["left_out"] == {"errors": 0, "unpaired": 0, "items": 8} and data["pairs"] == 8
    assert data["data_differences"] == ["hotpotqa.jsonl", "multifieldqa_en.jsonl"]
    assert [t["pairs"] for t in data["tasks"]] == [4, 4]
    # hotpotqa's pairs left: items 2 and 3 at each length, base 1 and new 0 each: 4 worse.
    assert data["tasks"][0]["worse"] == 4 and data["tasks"][0]["p_value"] == 1 / 8
    assert "left out: 0 with an error in either run, 0 in one run only, 8 whose item differs" in text
    assert (
        "warning: the runs read different data files (hotpotqa.jsonl, multifieldqa_en.jsonl): a sample is "
        "paired only where both runs asked the same item, and the 8 whose items differ are left out"
    ) in text.splitlines()
    assert "different data files" in (out / "compare.html").read_text()
    # The same files in another folder: every pair is of one item, and nothing is said of the data.
    elsewhere = make_run(tmp_path / "elsewhere", write_data(tmp_path / "copy"), NEW)
    assert main(["compare", str(runs / "base"), str(elsewhere), "--out", str(tmp_path / "same")]) == 1
    assert "different data files" not in capsys.readouterr().out
    data = json.loads((tmp_path / "same" / "compare.json").read_text())
    assert data["left_out"]["items"] == 0 and data["pairs"] == 16 and data["data_differences"] == []


def test_runs_that_share_no_item_are_refused(
    tmp_path: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rotated = make_run(tmp_path / "rotated", write_data(tmp_path / "data", (1, 2, 3, 0)), NEW)
    capsys.readouterr()
    assert main(["compare", str(runs / "base"), str(rotated), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "hold different items under all 16 sample ids they share" in err
    assert "compare runs of one --data" in err
    assert not (tmp_path / "out").exists()
