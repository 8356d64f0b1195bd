"""``fathom compare`` on two runs of a family along its axis (``fathom.analysis.family_pairs``): long
outputs by item count, with precision, recall and the answers cut at their budget; state tracking by
operation count and the bAbI-style stories by task. The numbers are worked by hand from records whose
answers the tests write."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fathom.analysis.family_pairs import FamilyComparison
from fathom.cli import main
from fathom.report.compare import compare_runs, write_comparison
from fathom.report.compare_text import comparison_text

CLIFF = "sim:cliff?window=4096&accuracy=1&floor=0"  # right inside 4k, wrong past it


def run(folder: Path, task: str, model: str, *options: str) -> Path:
    args = ["run", task, "--model", model, "--tokenizer", "char", "--lengths", "2k,8k", *options]
    assert main([*args, "--run-dir", str(folder)]) == 0
    return folder


def rewrite(folder: Path, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """``edit`` each graded sample's record; the no-context controls stay as they were."""
    path = folder / "samples.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    edited = [r if r.get("control") else edit(r) for r in records]
    path.write_text("".join(json.dumps(r) + "\n" for r in edited))


@pytest.fixture(scope="module")
def listing_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sim:perfect on 16 samples: items 2 and 8, at 2k and 8k, 4 samples each."""
    return run(tmp_path_factory.mktemp("listing") / "base", "listing", "sim:perfect", "--items", "2,8",
               "--samples", "4")  # fmt: skip


def _checkpoint(record: dict[str, Any]) -> dict[str, Any]:
    """The new checkpoint's answers: at items 8 and 2k it lists the first half of the ids (recall 1/2,
    precision 1, F1 2/3), two of those four cut at the budget; at items 2 and 8k, sample 0, it adds an
    id that matches nothing (precision 2/3, recall 1, F1 4/5). Every other answer is the base's."""
    answers, where = record["answers"], record["sample_id"]
    if where.startswith("listing:8|L2048|"):
        cut = where.endswith(("S0", "S1"))
        return record | {"output": "\n".join(answers[:4]), "score": 2 / 3,
                         "finish_reason": "length" if cut else "stop"}  # fmt: skip
    if where == "listing:2|L8192|S0":
        wrong = next(f"#{n}" for n in range(10000, 10010) if f"#{n}" not in answers)
        return record | {"output": "\n".join([*answers, wrong]), "score": 0.8}
    return record


@pytest.fixture(scope="module")
def listing_new(listing_base: Path) -> Path:
    new = Path(shutil.copytree(listing_base, listing_base.parent / "new"))
    rewrite(new, _checkpoint)
    return new


def family(base: Path, new: Path) -> FamilyComparison:
    comparison = compare_runs(base, new)
    assert isinstance(comparison, FamilyComparison)
    return comparison


def test_listing_by_items_f1_precision_recall_and_cuts_worked_by_hand(
    listing_base: Path, listing_new: Path
) -> None:
    comparison = family(listing_base, listing_new)
    assert (comparison.family, comparison.axis) == ("listing", "items")
    two, eight = comparison.rows
    assert (two.value, two.task.task, eight.value, eight.task.task) == (2, "listing:2", 8, "listing:8")
    # items 2: 8 pairs, one F1 1 -> 4/5: mean 1 -> (7 + 0.8) / 8; one worse, none better: p = 1.
    assert (two.task.pairs, two.task.test.worse, two.task.test.better) == (8, 1, 0)
    assert two.task.test.base_mean == 1.0 and two.task.test.new_mean == pytest.approx(7.8 / 8)
    assert two.task.test.p_value == 1.0
    precision, recall = two.measures
    assert (precision.name, precision.base_mean) == ("precision", 1.0)
    assert precision.new_mean == pytest.approx(23 / 24)  # (7 + 2/3) / 8
    assert (recall.name, recall.new_mean, recall.ci_low, recall.ci_high) == ("recall", 1.0, 0.0, 0.0)
    assert (two.truncated.base, two.truncated.new, two.truncated.p_value) == (0, 0, 1.0)
    # items 8: 8 pairs, four F1 1 -> 2/3: mean 1 -> 5/6; four worse, none better: p = 2 / 2^4.
    assert (eight.task.test.worse, eight.task.test.better, eight.task.test.p_value) == (4, 0, 0.125)
    assert eight.task.test.new_mean == pytest.approx(5 / 6)
    assert eight.task.ci_low < -1 / 6 < eight.task.ci_high <= 0.0
    precision, recall = eight.measures
    assert (precision.new_mean, precision.ci_low, precision.ci_high) == (1.0, 0.0, 0.0)
    assert recall.new_mean == pytest.approx(0.75)  # (4 x 1/2 + 4) / 8
    assert -0.5 <= recall.ci_low < -0.25 < recall.ci_high <= 0.0
    # Two answers cut in the new run only: the sign test over 2 flips one way, p = 2 / 2^2.
    cut = eight.truncated
    assert (cut.base, cut.new, cut.newly, cut.no_longer, cut.p_value) == (0, 2, 2, 0, 0.5)
    assert comparison.truncated == cut
    # The adjusted p and the verdicts are the gate's task level.
    gate = {test.task: (test.p_adjusted, test.verdict) for test in comparison.gate.at("task")}
    assert {row.task.task: (row.task.p_adjusted, row.task.verdict) for row in comparison.rows} == gate


def test_listing_comparison_in_compare_json_the_terminal_and_compare_html(
    listing_base: Path, listing_new: Path, tmp_path: Path
) -> None:
    comparison = family(listing_base, listing_new)
    data, _ = write_comparison(comparison, tmp_path)
    section = json.loads(data.read_text())["family"]
    assert (section["name"], section["axis"], [row["items"] for row in section["rows"]]) == (
        "listing",
        "items",
        [2, 8],
    )
    eight = section["rows"][1]
    assert (eight["task"], eight["pairs"], eight["worse"], eight["better"], eight["p_value"]) == (
        "listing:8",
        8,
        4,
        0,
        0.125,
    )
    assert eight["difference"] == pytest.approx(-1 / 6)
    assert eight["measures"]["recall"]["difference"] == pytest.approx(-0.25)
    assert eight["truncated"] == {"base": 0, "new": 2, "newly": 2, "no_longer": 0, "p_value": 0.5}
    assert section["truncated"] == eight["truncated"]
    text = comparison_text(comparison)
    at = text.index(next(line for line in text if line.startswith("by items (listing;")))
    assert text[at + 3].startswith("  listing:8: 100.0% → 83.3% (-16.7 points, 95% interval")
    assert "8 pairs: 4 worse, 0 better), p = 0.125" in text[at + 3]
    assert text[at + 4].startswith(
        "    precision 100.0% → 100.0% (+0.0 points, 95% interval +0.0 to +0.0); "
        "recall 100.0% → 75.0% (-25.0 points"
    )
    assert text[at + 4].endswith("; cut at the output budget 0 → 2 (2 newly, 0 no longer; p = 0.5)")
    assert "cut at the output budget" not in text[at + 2]  # items 2: no answer cut in either run
    assert any(
        line.startswith(
            "warning: the new run's answers are cut at their output budget more often (0 → 2 of 16 pairs"
        )
        for line in text
    )
    page = (tmp_path / "compare.html").read_text()
    assert (
        "<h3>By items</h3><p><strong>The new run's answers are cut at their output budget more often"
        "</strong> (0 → 2;" in page
    )
    assert "<td>100.0% → 75.0% (-25.0; " in page and "<td>0 → 2</td>" in page


def test_no_warning_where_the_new_run_cuts_as_many_answers(listing_new: Path) -> None:
    comparison = family(listing_new, listing_new)  # the same two answers cut in both runs
    cut = comparison.truncated
    assert cut is not None and (cut.base, cut.new, cut.newly, cut.no_longer, cut.p_value) == (2, 2, 0, 0, 1.0)
    assert not any(
        line.startswith("warning: the new run's answers are cut") for line in comparison_text(comparison)
    )


def test_a_base_that_cut_more_is_no_warning(listing_base: Path, listing_new: Path) -> None:
    comparison = family(listing_new, listing_base)
    cut = comparison.truncated
    assert cut is not None and (cut.base, cut.new, cut.newly, cut.no_longer, cut.p_value) == (2, 0, 0, 2, 0.5)
    text = comparison_text(comparison)
    assert not any(line.startswith("warning: the new run's answers are cut") for line in text)
    assert any(
        line.endswith("cut at the output budget 2 → 0 (0 newly, 2 no longer; p = 0.5)") for line in text
    )


@pytest.mark.parametrize(
    ("task", "options", "axis", "values"),
    [
        ("state", ("--ops", "2,4"), "ops", [2, 4]),
        ("babi", (), "task", ["babi:qa1", "babi:qa2", "babi:qa3", "babi:qa4", "babi:qa5"]),
    ],
)
def test_state_and_babi_are_compared_along_their_axis(
    task: str, options: tuple[str, ...], axis: str, values: list[Any], tmp_path: Path
) -> None:
    # sim:cliff answers every question inside 4k and none past it: at each value, 2 samples at 2k
    # right in both runs, 2 at 8k right in the base only: mean 1 -> 1/2, two worse, p = 2 / 2^2.
    base = run(tmp_path / "base", task, "sim:perfect", "--samples", "2", *options)
    new = run(tmp_path / "new", task, CLIFF, "--samples", "2", *options)
    comparison = family(base, new)
    assert (comparison.family, comparison.axis, [row.value for row in comparison.rows]) == (
        task,
        axis,
        values,
    )
    for row in comparison.rows:
        test = row.task.test
        assert (test.pairs, test.base_mean, test.new_mean, test.worse, test.better, test.p_value) == (
            4,
            1.0,
            0.5,
            2,
            0,
            0.5,
        )
        assert row.measures == () and (row.truncated.base, row.truncated.new) == (0, 0)
    assert (
        json.loads(write_comparison(comparison, tmp_path / "out")[0].read_text())["family"]["rows"][0][axis]
        == values[0]
    )
    text = comparison_text(comparison)
    assert (
        f"by {axis} ({task}; two-sided exact sign test over the pairs; adjusted p: the gate's, for a drop; "
        in "\n".join(text)
    )


def test_a_niah_comparison_has_no_family_section(tmp_path: Path) -> None:
    args = ["--tokenizer", "char", "--lengths", "2k", "--depths", "0.5", "--samples", "2"]
    for name in ("base", "new"):
        assert main(["run", "niah", "--model", "sim:perfect", *args, "--run-dir", str(tmp_path / name)]) == 0
    comparison = compare_runs(tmp_path / "base", tmp_path / "new")
    assert not isinstance(comparison, FamilyComparison)
    assert "family" not in comparison.to_json()
