"""Long outputs (``fathom run listing``): the log's records in the prompt at exact lengths, the
item-level grading worked by hand, the output budget and its refusals, truncation counted, and what
simulated readers score on it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from family_checks import refused_run

from fathom.cli import main
from fathom.errors import SpecError
from fathom.plan.check import check_run
from fathom.prompts import log_records as logs
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.report.compare import compare_runs
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.listing import MARGIN, ListingTask, draw_log, grade, item_scores

INTERVAL_RULE = (
    "The 95% interval is Wilson's where every score is 0 or 1 or there are fewer than 30 of them (of "
    "their mean, for fractional ones), else a percentile bootstrap's over them."
)

TOKENIZERS = {name: load_tokenizer(name) for name in ("char", "cl100k_base")}


def task(tokenizer: str, lengths: tuple[int, ...], items: tuple[int, ...], **options: Any) -> ListingTask:
    spec = RunSpec(
        "listing", "sim:perfect", tokenizer, lengths, (), 3, template="none", items=items, **options
    )
    return ListingTask(spec, TOKENIZERS[tokenizer])


def sample(tokenizer: str, length: int, items: int, index: int = 0) -> Sample:
    return task(tokenizer, (length,), (items,)).prepare(Cell(f"listing:{items}", length, None, index))


def context_lines(made: Sample, tokenizer: str) -> list[str]:
    prompt = made.prompt
    text = TOKENIZERS[tokenizer].decode(
        prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
    )
    return [line for line in text.split("\n") if line.startswith("#") and " | user=" in line]


def test_precision_recall_and_f1_of_a_fixed_answer_worked_by_hand() -> None:
    gold = ["#10001", "#10002", "#10003", "#10004"]
    # Three named, two of them right, one twice (counted once), and a wrong one: P = 2/3, R = 2/4.
    answer = "Here they are:\n#10002\n#10004\n#10004\n#99999\n"
    scores = item_scores(answer, gold)
    assert (scores.precision, scores.recall) == (pytest.approx(2 / 3), 0.5)
    assert scores.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))  # 4/7
    assert scores.f1 == pytest.approx(4 / 7)
    assert grade(answer, gold).matched == ("#10002", "#10004")
    assert grade("#10001 #10002 #10003 #10004", gold).value == 1.0
    assert grade("none match", gold).value == 0.0
    assert grade("#100011", gold).value == 0.0  # six digits are no id of five


def test_a_log_has_its_matches_and_as_many_look_alikes_each_sharing_one_field() -> None:
    for seed in range(50):
        drawn = draw_log(random.Random(seed), 1 + seed)
        assert len(drawn.lines) == 2 * len(drawn.matching) == 2 * (1 + seed)
        key = logs.condition(drawn.user, drawn.action)
        assert [logs.ids_in(line)[0] for line in drawn.lines if key in line] == list(drawn.matching)
        for line in drawn.lines:
            if key not in line:  # a look-alike: the user or the action, never both
                assert (f"user={drawn.user} |" in line) != (f"action={drawn.action} |" in line)
        assert len({logs.ids_in(line)[0] for line in drawn.lines}) == len(drawn.lines)


@pytest.mark.parametrize("tokenizer", ["char", "cl100k_base"])
@pytest.mark.parametrize(("length", "items"), [(2048, 8), (8192, 32)])
def test_every_prompt_is_its_length_with_its_records_in_order(
    tokenizer: str, length: int, items: int
) -> None:
    made = sample(tokenizer, length, items)
    assert len(made.prompt.ids) == made.prompt.target_tokens == length
    found = context_lines(made, tokenizer)
    assert len(found) == 2 * items
    key = made.query_keys[0]
    assert tuple(logs.ids_in(line)[0] for line in found if key in line) == made.answers
    expected = logs.listed(list(made.answers))
    assert made.max_new_tokens == -(-5 * len(TOKENIZERS[tokenizer].encode(expected)) // 4) + MARGIN


def test_a_given_max_new_tokens_overrides_the_derived_budget() -> None:
    made = task("char", (2048,), (8,), max_new_tokens=7).prepare(Cell("listing:8", 2048, None, 0))
    assert made.max_new_tokens == 7


def test_more_items_than_fit_are_refused_with_how_many_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fit = task("char", (2048,), (1,)).fitting(2048)
    assert fit > 1
    task("char", (2048,), (fit,)).prepare(Cell(f"listing:{fit}", 2048, None, 0))  # the most that fit builds
    args = ["run", "listing", "--model", "sim:perfect", "--tokenizer", "char", "--lengths", "2k,8k"]
    err = refused_run([*args, "--items", f"4,{fit + 1}"], tmp_path / "runs", capsys)
    assert f"--items {fit + 1} does not fit" in err and f"at most {fit} items fit" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "listin"], "unknown task 'listin' (did you mean 'listing'?)"),
        (["run", "listing", "--items", "8,x"], "--items takes whole counts"),
        (["run", "listing", "--items", "0"], "at least 1"),
        (["run", "niah", "--items", "8"], "--items goes with listing runs"),
    ],
)
def test_bad_input_is_one_line_and_no_folder(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused_run([*args, "--model", "sim:perfect", "--lengths", "4k"], tmp_path / "runs", capsys)
    assert says in err, err


def test_a_budget_past_the_backend_s_context_is_refused_before_any_sample() -> None:
    made = task("char", (2048,), (8,))
    budget = made.prepare(Cell("listing:8", 2048, None, 0)).max_new_tokens
    assert budget == 69 + MARGIN  # 8 ids of six characters and 7 newlines (55), a quarter more, the margin
    backend = SimpleNamespace(
        name="openai:stand-in", tokenizer=TOKENIZERS["char"], max_prompt_tokens=2048 + 50
    )
    with pytest.raises(SpecError) as refused:
        check_run(made.spec, made, backend)  # type: ignore[arg-type]
    assert "exceed the backend's context of 2098 tokens" in str(refused.value)
    assert f"2048 prompt tokens + {budget} new" in str(refused.value)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """sim:perfect, sim:cliff (a sure reader inside 4k, none past it) and sim:perfect held to a budget
    of 40 tokens, on one small listing sweep."""
    root = tmp_path_factory.mktemp("listing")
    models = {
        "perfect": ("sim:perfect",),
        "cliff": ("sim:cliff?window=4096&accuracy=1&floor=0",),
        "cut": ("sim:perfect?budget=obey", "--max-new-tokens", "40"),
    }
    folders = {}
    for name, (model, *more) in models.items():
        folders[name] = root / name
        args = ["run", "listing", "--model", model, *more, "--tokenizer", "char", "--lengths", "2k,8k"]
        assert main([*args, "--items", "2,8", "--samples", "4", "--run-dir", str(folders[name])]) == 0
    return folders


def section(folder: Path) -> dict[str, Any]:
    listing: dict[str, Any] = json.loads((folder / "summary.json").read_text())["listing"]
    return listing


def test_sim_perfect_lists_every_record_within_its_budget(runs: dict[str, Path]) -> None:
    listing = section(runs["perfect"])
    cells = {(c["items"], c["length"]): c for c in listing["cells"]}
    assert sorted(cells) == [(2, 2048), (2, 8192), (8, 2048), (8, 8192)]
    for cell in cells.values():
        assert (cell["n"], cell["mean"], cell["precision"], cell["recall"], cell["truncated"]) == (
            4,
            1.0,
            1.0,
            1.0,
            0,
        )
    assert listing["truncated"] == 0
    assert [row["mean"] for row in listing["effective_length"]] == [8192, 8192]
    records = [json.loads(line) for line in (runs["perfect"] / "samples.jsonl").read_text().splitlines()]
    for record in (r for r in records if not r.get("control")):
        assert record["max_new_tokens"] == -(-5 * len(logs.listed(record["answers"])) // 4) + MARGIN  # char
    page = (runs["perfect"] / "report.html").read_text()
    assert '<section id="listing">' in page
    # The interval's rule as score_interval applies it (a page once said "a bootstrap's" for any cell).
    assert INTERVAL_RULE in page


def test_sim_cliff_drops_past_its_window(runs: dict[str, Path]) -> None:
    means = {(c["items"], c["length"]): c["mean"] for c in section(runs["cliff"])["cells"]}
    assert means == {(2, 2048): 1.0, (8, 2048): 1.0, (2, 8192): 0.0, (8, 8192): 0.0}


def test_compare_pairs_listing_samples_by_id_and_tests_each_cell(runs: dict[str, Path]) -> None:
    comparison = compare_runs(runs["perfect"], runs["cliff"])
    assert comparison.overall.pairs == 16 and comparison.left_out_unpaired == 0
    assert (comparison.overall.worse, comparison.overall.better) == (8, 0)
    by_cell = {(c.task, c.length): (c.test.pairs, c.test.worse) for c in comparison.cells}
    assert by_cell == {("listing:2", 2048): (4, 0), ("listing:8", 2048): (4, 0),
                       ("listing:2", 8192): (4, 4), ("listing:8", 8192): (4, 4)}  # fmt: skip


def test_a_truncated_answer_is_scored_as_it_stands_and_counted(runs: dict[str, Path]) -> None:
    listing = section(runs["cut"])
    cells = {(c["items"], c["length"]): c for c in listing["cells"]}
    # Two ids ("#12345\n#12345", 13 characters) fit 40; eight (55) do not: five whole ids and "#1234".
    assert [cells[(2, n)]["truncated"] for n in (2048, 8192)] == [0, 0]
    assert [cells[(8, n)]["truncated"] for n in (2048, 8192)] == [4, 4]
    assert listing["truncated"] == 8
    assert cells[(8, 2048)]["recall"] == pytest.approx(5 / 8) and cells[(8, 2048)]["precision"] == 1.0
    assert cells[(8, 2048)]["mean"] == pytest.approx(2 * 0.625 / 1.625)
    records = [json.loads(line) for line in (runs["cut"] / "samples.jsonl").read_text().splitlines()]
    # The no-context controls' refusal is cut too (45 characters), but a control is no cell of the grid.
    cut = [r for r in records if r["finish_reason"] == "length" and not r.get("control")]
    assert len(cut) == 8 and all(len(r["output"]) == 40 for r in cut)


def test_the_questions_example_id_is_never_a_record_s() -> None:
    # An answer that echoes the example scores a false hit, never a true one.
    [example] = logs.ids_in(logs.question("alice", "refund"))
    assert int(example.lstrip("#")) not in logs.IDS and grade(example, ["#10000"]).value == 0.0
