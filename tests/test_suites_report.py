"""A real suite's runs as the report, ``fathom runs`` and ``fathom compare`` show them: each task's score
with its interval (score_interval's: Wilson's or a bootstrap's), the judges beside the
metric, the mean over tasks where a sweep has an effective length, and two checkpoints compared task by
task on the same items, the pairs of different items left out.

A run asks each item at every length limit, so wherever the limits are pooled the unit is the item
(each scored by its mean over the limits), not the sample: the same question at 1k and at 8k is not two
independent pieces of evidence. The fixture's data is chosen so that counting samples would give other
numbers (a narrower interval, a regression that is not one), and the tests pin the items' numbers.

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
from fathom.analysis.suites import item_means, mean_over_tasks, task_table
from fathom.cli import main
from fathom.records import SampleRecord
from fathom.report.html.suites import suite_section
from fathom.report.text import suite_tasks_text

TASKS = ("hotpotqa", "multifieldqa_en")
# Eight items: with items as the unit, a task all of whose 7 changed items fell has p = 2 / 2^7, which
# Holm over two tasks doubles to 1/32 < 0.05; four items could never regress (2 / 2^4 = 0.125).
ITEMS = 8
LENGTHS = (1024, 8192)  # with the char tokenizer, 1k cuts every item's prompt and 8k none


def write_data(folder: Path, order: tuple[int, ...] = tuple(range(ITEMS))) -> Path:
    """LongBench files of two tasks, ``ITEMS`` items each, in ``order``."""
    folder.mkdir(parents=True)
    for task in TASKS:
        _jsonl(folder / f"{task}.jsonl", [longbench_item(i) for i in order])
    return folder


def make_run(folder: Path, data: Path, scores: dict[str, list[float]]) -> Path:
    """A run of both tasks at both lengths whose scores are then ``scores[task]``: the samples in the
    order 1k item 0..7, then 8k item 0..7."""
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


# hotpotqa's scores are 0/1, and each item scores the same at both limits: items 0-6 right, item 7
# wrong, so its items' means are 0/1 too (Wilson's interval over the 8 items).
# multifieldqa_en's are fractional (the bootstrap); its items' means over the two limits are in
# BASE_ITEM_MEANS, each the mean of its 1k and 8k scores.
BASE = {
    "hotpotqa": [1, 1, 1, 1, 1, 1, 1, 0] * 2,
    "multifieldqa_en": [
        *(0.5, 0.25, 0.25, 0.5, 0.75, 0.0, 0.25, 0.5),  # 1k, items 0-7
        *(0.75, 0.5, 0.25, 0.5, 1.0, 0.25, 0.5, 0.5),  # 8k
    ],
}
# The new checkpoint: hotpotqa falls on items 0-6 at both limits (item 7 was already 0). multifieldqa_en
# falls by 0.25 on items 0-4 at both limits; items 5 and 6 score as before, and item 7 is 0.25 better at
# 1k and 0.25 worse at 8k: as an item, a tie. Its items' means: 0.375, 0.125, 0, 0.25, 0.625, 0.125,
# 0.375, 0.5 (2.375 in all).
NEW = {
    "hotpotqa": [0] * 16,
    "multifieldqa_en": [
        *(0.25, 0.0, 0.0, 0.25, 0.5, 0.0, 0.25, 0.75),  # 1k, items 0-7
        *(0.5, 0.25, 0.0, 0.25, 0.75, 0.25, 0.5, 0.25),  # 8k
    ],
}
BASE_ITEM_MEANS = {
    "hotpotqa": [1.0] * 7 + [0.0],
    "multifieldqa_en": [0.625, 0.375, 0.25, 0.5, 0.875, 0.125, 0.375, 0.5],
}


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


def test_each_task_has_its_score_over_all_lengths_with_an_interval_over_its_items_and_at_each(
    runs: Path,
) -> None:
    suites = summary(runs / "base")["suites"]
    hotpot, multifield = suites["by_task"]
    assert (hotpot["task"], hotpot["scoring"], hotpot["n"], hotpot["items"], hotpot["errors"]) == (
        "hotpotqa",
        "longbench:qa_f1",
        16,
        8,
        0,
    )
    # 14 of 16 samples right, 7 of 8 items: the mean is the samples' 14/16 (each item at both limits, so
    # the items' 7/8 too), the interval Wilson's over the items, 7 of 8: [0.529, 0.978]. Counted as
    # samples it would be Wilson's of 14 of 16, [0.640, 0.965], as though each question were two.
    assert hotpot["mean"] == 7 / 8 and (hotpot["ci_low"], hotpot["ci_high"]) == wilson_interval(7, 8)
    assert hotpot["truncated"] == 8  # the 8 prompts at 1k were cut, none at 8k
    # At one limit each item is one sample: 7 of 8 right, Wilson's over them.
    at_1k, at_8k = hotpot["lengths"]
    assert (at_1k["length"], at_1k["n"], at_1k["mean"], at_1k["truncated"]) == (1024, 8, 7 / 8, 8)
    assert (at_1k["ci_low"], at_1k["ci_high"]) == wilson_interval(7, 8) and "items" not in at_1k
    assert (at_8k["length"], at_8k["mean"], at_8k["truncated"]) == (8192, 7 / 8, 0)
    # Fractional scores: 3.0 at 1k and 4.25 at 8k, 7.25 over the 16 samples = 29/64, which is the mean of
    # the items' means too (3.625 / 8); the interval is Wilson's of that mean over the 8 items (too few
    # fractional means for the bootstrap: stats.BOOTSTRAP_LEAST).
    assert (multifield["n"], multifield["items"], multifield["mean"]) == (16, 8, 29 / 64)
    assert (multifield["ci_low"], multifield["ci_high"]) == pytest.approx(
        wilson_interval(3.625, 8), abs=1e-12
    )
    assert multifield["lengths"][0]["mean"] == 3 / 8 and multifield["lengths"][1]["mean"] == 4.25 / 8
    # Two tasks of 8 items each: every item weighs the same, so the interval is that of the 16 items'
    # means (fractional, and fewer than 30: Wilson's of 85/128 over 16), and the mean is
    # (7/8 + 29/64) / 2 = 85/128.
    mean = suites["mean"]
    assert (mean["tasks"], mean["items"], mean["n"], mean["mean"]) == (2, 16, 32, 85 / 128)
    assert (mean["ci_low"], mean["ci_high"]) == pytest.approx(wilson_interval(85 / 8, 16), abs=1e-12)


def sample(task: str, item: int, length: int, score: float, error: str | None = None) -> SampleRecord:
    return dataclasses.replace(
        record(0),
        task=task,
        sample=item,
        item_id=f"{task}{item}",
        length=length,
        score=score,
        error=error,
        original_tokens=900,
    )


def test_tasks_of_unequal_size_weigh_the_same_in_the_mean_over_tasks_and_items_are_the_unit() -> None:
    # Task a: two items at 1k and 8k, item 0 right at both, item 1 wrong at 1k and right at 8k: item
    # means 1.0 and 0.5. Task b: four items at both limits, 0.5, 0.5, 0.2, 0.2 at each, and a fifth that
    # errored at both (no grade: in neither n, items nor the mean).
    a = [
        sample("a", 0, 1024, 1.0),
        sample("a", 1, 1024, 0.0),
        sample("a", 0, 8192, 1.0),
        sample("a", 1, 8192, 1.0),
    ]
    b = [sample("b", i, length, s) for length in (1024, 8192) for i, s in enumerate((0.5, 0.5, 0.2, 0.2))]
    b += [sample("b", 4, length, 0.0, error="timeout") for length in (1024, 8192)]
    assert item_means(a) == [1.0, 0.5] and item_means(b) == [0.5, 0.5, 0.2, 0.2]
    # Without an item id, the sample's place in its file is the item (the same at every limit).
    assert item_means([dataclasses.replace(r, item_id=None) for r in a]) == [1.0, 0.5]
    mean = mean_over_tasks(a + b)
    # a's mean is 3/4 and b's 2.8/8 = 0.35, so 0.55 (the mean over the 12 graded samples would be 5.8/12,
    # 0.483; over the 6 items 2.9/6, 0.483 too). Each item weighs 1 / its task's items: weights 1/2 twice
    # and 1/4 four times, so the effective number of items is 2^2 / (2/4 + 4/16) = 16/3, and the
    # interval Wilson's of 0.55 over 16/3 (too few for the weighted bootstrap).
    assert (mean.tasks, mean.items, mean.n) == (2, 6, 12) and mean.mean == pytest.approx(0.55)
    assert (mean.ci_low, mean.ci_high) == pytest.approx(wilson_interval(0.55 * 16 / 3, 16 / 3), abs=1e-12)
    assert mean_over_tasks([]).mean is None
    row_a, row_b = task_table(a + b)
    # a's samples are 0/1 but its item means are not (1.0 and 0.5): Wilson's of 1.5 over the 2 items,
    # where the 4 samples would have had Wilson's of 3 of 4. At each limit, Wilson's over its 2 samples.
    assert (row_a["n"], row_a["items"], row_a["mean"]) == (4, 2, 0.75)
    assert (row_a["ci_low"], row_a["ci_high"]) == wilson_interval(1.5, 2)
    at_1k, at_8k = row_a["lengths"]
    assert (at_1k["mean"], at_1k["ci_low"], at_1k["ci_high"]) == (0.5, *wilson_interval(1, 2))
    assert (at_8k["mean"], at_8k["ci_low"], at_8k["ci_high"]) == (1.0, *wilson_interval(2, 2))
    assert (row_b["n"], row_b["items"], row_b["errors"], row_b["mean"]) == (8, 4, 2, pytest.approx(0.35))
    assert (row_b["ci_low"], row_b["ci_high"]) == pytest.approx(wilson_interval(1.4, 4), abs=1e-12)


def test_the_report_prints_the_tasks_and_the_mean_over_them(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(runs / "base")]) == 0
    out = capsys.readouterr().out
    # Wilson's interval of 7 of 8 by hand: centre (0.875 + z²/16) / (1 + z²/8) = 0.7533, half-width
    # z √(0.875 · 0.125 / 8 + z²/256) / (1 + z²/8) = 0.2242 (z = 1.96): over all limits 7 of 8 items,
    # at 1k 7 of 8 samples.
    assert (
        "  hotpotqa          all  87.5% [52.9, 97.8]    16 prompts (8 items at 2 limits), 8 cut  "
        "(longbench:qa_f1)"
    ) in out
    assert "                     1k  87.5% [52.9, 97.8]    8 prompts, 8 cut" in out
    low, high = score_interval(BASE_ITEM_MEANS["hotpotqa"] + BASE_ITEM_MEANS["multifieldqa_en"])[1:]
    assert (
        f"mean over 2 tasks, each weighing the same: 66.4% [{100 * low:.1f}, {100 * high:.1f}] "
        "(32 prompts (16 items at 2 limits))"
    ) in out
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
    assert "Wilson's where every score is 0 or 1 or there are fewer than 30 of them" in table
    # Each task's row: its 8 items and 16 samples, the metric's score over the items' means (hotpotqa
    # 7 of 8; multifieldqa_en's BASE_ITEM_MEANS sum to 3.625, / 8 = 45.3%), its 8 prompts cut at 1k,
    # then the judge's mean: at 1k the cut prompts lose every answer and sim:perfect says it found
    # none (the judge's 0), at 8k it answers with the reference (1), so 8 of 16 = 0.50 in both tasks.
    assert [(r["task"], r["mean"], r["truncated"]) for r in written["suites"]["by_task"]] == [
        ("hotpotqa", 0.875, 8),
        ("multifieldqa_en", 0.453125, 8),
    ]
    assert [(j["task"], j["judge"], j["judge_n"]) for j in section["by_task"]] == [
        ("hotpotqa", 0.5, 16),
        ("multifieldqa_en", 0.5, 16),
    ]
    for task, mean in (("hotpotqa", "87.5%"), ("multifieldqa_en", "45.3%")):
        cells = f"<td>{task}</td><td>longbench:qa_f1</td><td>all</td><td>8</td><td>16</td><td>{mean}</td>"
        row = table[table.index(cells) : table.index("</tr>", table.index(cells)) + 5]
        assert row.endswith("<td>8</td><td>0.50</td></tr>")  # 8 cut, then the judge
    assert "<td>1k</td><td>8</td><td>8</td>" in table
    # A suite's headline is its mean over tasks, not RULER's effective length.
    assert "mean over 2 tasks, each weighing the same" in page and "effective length" not in page


def test_an_older_summary_without_the_tables_shows_none() -> None:
    older = {"truncated": 0, "samples": 2, "truncation": [], "splits": [], "by_actual_length": []}
    assert suite_tasks_text(older) == [] and suite_section(older, []) == ""


def test_a_summary_written_before_items_were_counted_shows_its_samples_alone() -> None:
    scored = {"n": 8, "errors": 0, "mean": 0.5, "ci_low": 0.2, "ci_high": 0.8, "truncated": 0}
    row = {"task": "hotpotqa", "scoring": "longbench:qa_f1", **scored, "lengths": []}
    older = {"by_task": [row], "mean": {"tasks": 1, **scored}}
    head, task, mean = suite_tasks_text(older)
    assert head == (
        "score by task, over all length limits and at each (95% interval: Wilson's where every score is 0 "
        "or 1 or there are fewer than 30 of them (of their mean, for fractional ones), else a percentile "
        "bootstrap's over them; over all limits it is over the items, each scored by its mean over them; "
        "prompts cut to the limit):"
    )
    assert task == "  hotpotqa   all  50.0% [20.0, 80.0]    8 prompts, 0 cut  (longbench:qa_f1)"
    assert mean.endswith("50.0% [20.0, 80.0] (8 prompts)")
    assert "<td>all</td><td></td><td>8</td>" in suite_section(older, [])


def test_runs_lists_a_suite_runs_mean_over_tasks(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (base,) = [line for line in lines if "  base  " in line]
    low, high = score_interval(BASE_ITEM_MEANS["hotpotqa"] + BASE_ITEM_MEANS["multifieldqa_en"])[1:]
    # The suite's runs here ask no controls (--no-control): its control column is empty.
    assert base.endswith(f"complete  ctl —  mean 66.4% [{100 * low:.1f}, {100 * high:.1f}] over 2 tasks")
    assert "effective" not in base


def test_compare_tests_each_task_over_its_items_and_a_regressed_task_fails_the_command(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = runs / "comparison"
    assert main(["compare", str(runs / "base"), str(runs / "new"), "--out", str(out)]) == 1
    text = capsys.readouterr().out
    data = json.loads((out / "compare.json").read_text())
    hotpot, multifield = data["tasks"]
    # hotpotqa, item by item, each its mean over the two limits: items 0-6 from 1 to 0, item 7 a tie at 0.
    # 7 worse, none better: two-sided p = 2 / 2^7 = 1/64. The gate's one-sided p is 1/128, and its
    # adjusted p too: 12 items moved in all, so every one of the 2^12 flips (an item flips whole, at
    # both limits) is enumerated, and no other test reaches 1/128 without hotpotqa's 7 all worse.
    low, high = bootstrap_interval([-1.0] * 7 + [0.0])
    assert hotpot == {
        "task": "hotpotqa",
        "items": 8,
        "pairs": 16,
        "base_mean": 7 / 8,
        "new_mean": 0.0,
        "worse": 7,
        "better": 0,
        "p_value": 1 / 64,
        "difference": -7 / 8,
        "difference_ci_low": low,
        "difference_ci_high": high,
        "p_adjusted": 1 / 128,
        "verdict": "regressed",
    }
    assert low < -7 / 8 < high  # the bootstrap's resamples hold more or fewer of the one tie
    # multifieldqa_en: items 0-4 worse by 0.25, items 5-7 ties (item 7's +0.25 at 1k and -0.25 at 8k
    # average to 0): 5 worse, none better, two-sided p = 2 / 2^5 = 1/16. The items' means: 3.625 / 8 =
    # 29/64 before, 2.375 / 8 = 19/64 after. The gate's one-sided p is 1/32, and so is its adjusted p:
    # the tests left when it steps down to it (itself and the 1k cell, whose 6 moved items include its 5)
    # all reach 1/32 only when those 5 flip worse together. Counted as 16 samples it would have been 11
    # worse (items 0-4 at both limits, item 7 at 8k) and 1 better: the items are the evidence, not twice.
    assert (multifield["items"], multifield["pairs"], multifield["worse"], multifield["better"]) == (
        8,
        16,
        5,
        0,
    )
    assert (multifield["base_mean"], multifield["new_mean"], multifield["difference"]) == (
        29 / 64,
        19 / 64,
        -10 / 64,
    )
    assert multifield["p_value"] == 1 / 16
    assert multifield["p_adjusted"] == 1 / 32 and multifield["verdict"] == "regressed"
    assert (multifield["difference_ci_low"], multifield["difference_ci_high"]) == bootstrap_interval(
        [-0.25] * 5 + [0.0] * 3
    )
    # The cells stay per sample (each item at one limit is one pair): hotpotqa's are 7 worse of 8,
    # two-sided p = 1/64 each; multifieldqa_en's 1k 5 worse, 1 better, p = 2 (1 + 6) / 2^6 = 7/32, its
    # 8k 6 worse, p = 2 / 2^6 = 1/32. The gate's one-sided adjusted p: 1/128 for hotpotqa's (as its
    # task), 7/64 for multifieldqa_en's 1k (P(X >= 5) of 6, which nothing else reaches alone), and 1/32
    # for its 8k (its own 1/64, raised to the task's 1/32 as the step-down keeps them in order).
    assert [(c["pairs"], c["p_value"], c["p_adjusted"]) for c in data["cells"]] == [
        (8, 1 / 64, 1 / 128),
        (8, 1 / 64, 1 / 128),
        (8, 7 / 32, 7 / 64),
        (8, 1 / 32, 1 / 32),
    ]
    assert [c["verdict"] for c in data["cells"]] == ["regressed", "regressed", "unchanged", "regressed"]
    assert data["regressions"] == 2  # the tasks' verdicts, as a suite's comparison counts them
    # Over all 32 pairs of samples (reported, no verdict): 14 + 11 worse, 1 better.
    assert data["pairs"] == 32 and data["overall"]["p_value"] == sign_test(25, 1) == 2 * 27 / 2**26
    assert "effective_length" not in data and data["left_out"] == {"errors": 0, "unpaired": 0, "items": 0}
    assert data["data_differences"] == []
    assert "effective length" not in text
    lines = text.splitlines()
    assert (
        "  hotpotqa: 87.5% → 0.0% (-87.5 points, "
        f"95% interval {100 * low:+.1f} to {100 * high:+.1f}; 8 items: 7 worse, 0 better), p = 0.0156, "
        "adjusted p = 0.00781: regressed"
    ) in lines
    low, high = multifield["difference_ci_low"], multifield["difference_ci_high"]
    assert (
        "  multifieldqa_en: 45.3% → 29.7% (-15.6 points, "
        f"95% interval {100 * low:+.1f} to {100 * high:+.1f}; 8 items: 5 worse, 0 better), p = 0.0625, "
        "adjusted p = 0.0312: regressed"
    ) in lines
    assert "regressed tasks (by the gate): hotpotqa, multifieldqa_en" in text
    assert "improved tasks (by the gate): none" in text
    assert "cells (task x length limit, 4, drawn in compare.html): 3 regressed, 0 improved" in text
    assert "gate: REGRESSED: overall, length 1k, length 8k, task hotpotqa, task multifieldqa_en, " in text
    page = (out / "compare.html").read_text()
    assert "<h3>By task</h3>" in page and "regressed tasks" in page and "effective length" not in page
    assert "<th>items</th>" in page and "<td>hotpotqa</td><td>87.5%</td><td>0.0%</td><td>-87.5</td>" in page
    assert "<td>8</td><td>7</td><td>0</td>" in page  # hotpotqa's items, worse and better


def test_pairs_of_different_items_are_left_out_with_a_warning(
    tmp_path: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of the same files elsewhere pairs as one; files whose items 0 and 1 swapped places leave
    those two items' pairs out, at both lengths and in both tasks: 8 of the 32."""
    swapped = make_run(tmp_path / "swapped", write_data(tmp_path / "data", (1, 0, *range(2, ITEMS))), NEW)
    out = tmp_path / "comparison"
    # hotpotqa's items left, 2-7: 2-6 from 1 to 0 and 7 a tie, two-sided p = 2 / 2^5 = 1/16, one-sided
    # 1/32; multifieldqa_en's: 2-4 worse, 5-7 ties, two-sided p = 2 / 2^3 = 1/4. The 8 items that moved
    # are flipped whole (at both limits): hotpotqa's 5 all worse by chance is 1/32, and no other test
    # reaches its p otherwise, so it regressed on the items it has, and the command fails.
    assert main(["compare", str(runs / "base"), str(swapped), "--out", str(out)]) == 1
    text = capsys.readouterr().out
    data = json.loads((out / "compare.json").read_text())
    assert data["left_out"] == {"errors": 0, "unpaired": 0, "items": 8} and data["pairs"] == 24
    assert data["data_differences"] == ["hotpotqa.jsonl", "multifieldqa_en.jsonl"]
    tested = [
        (t["items"], t["pairs"], t["worse"], t["better"], t["p_value"], t["p_adjusted"])
        for t in data["tasks"]
    ]
    assert tested == [(6, 12, 5, 0, 1 / 16, 1 / 32), (6, 12, 3, 0, 1 / 4, 1 / 8)]
    assert [t["verdict"] for t in data["tasks"]] == ["regressed", "unchanged"] and data["regressions"] == 1
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
    assert data["left_out"]["items"] == 0 and data["pairs"] == 32 and data["data_differences"] == []


def test_runs_that_share_no_item_are_refused(
    tmp_path: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rotated = make_run(tmp_path / "rotated", write_data(tmp_path / "data", (*range(1, ITEMS), 0)), NEW)
    capsys.readouterr()
    assert main(["compare", str(runs / "base"), str(rotated), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "hold different items under all 32 sample ids they share" in err
    assert "compare runs of one --data" in err
    assert not (tmp_path / "out").exists()
