"""What a newcomer met in the terminal and report.html (issue #33): a "Hard needles" section on a plain
run, a samples card that counted 180 where the terminal said 360 (the controls), the excerpt around a
needle opening mid-word, and a suite's "n=6 of 3 items". Each from a small simulated run, or the
summary's rows as they are written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_html_report import data_block

from fathom.cli import main
from fathom.records import SampleRecord
from fathom.report.files import REPORT
from fathom.report.html.excerpt import ELLIPSIS, word_bounded
from fathom.report.html.hard import hard_section
from fathom.report.text import hard_text, hard_to_report, suite_tasks_text

GRID = [
    "--tokenizer",
    "cl100k_base",
    "--lengths",
    "1k,2k",
    "--depths",
    "2",
    "--samples",
    "3",
    "--no-progress",
]
ONE_KIND = {"label": "number", "n": 12, "mean": 1.0, "ci_low": 0.7, "ci_high": 1.0}
OVERLAP = {**ONE_KIND, "shared_words": 5.0, "rouge1": 0.52}


def run(folder: Path, *options: str) -> Path:
    """A simulated NIAH run, with its no-context controls unless ``options`` say otherwise."""
    assert main(["run", "niah", "--model", "sim:cliff", *GRID, *options, "--run-dir", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain run: the number needle, no distractors, one needle a sample, with controls."""
    return run(tmp_path_factory.mktemp("plain") / "run")


def page(folder: Path) -> str:
    return (folder / REPORT).read_text()


def printed(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["report", str(folder)]) == 0
    return capsys.readouterr().out


# 1. The "Hard needles" section only where the run had hard needles.


def test_a_plain_run_has_no_hard_needles_section(plain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = json.loads((plain / "summary.json").read_text())
    assert [*summary["hard"]] == ["overlap"]  # every run records its needles' overlap: one kind here
    assert 'id="hard"' not in page(plain) and "Hard needles" not in page(plain)
    assert "overlap of" not in printed(plain, capsys)


def test_a_run_with_distractors_has_its_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = run(tmp_path / "run", "--distractors", "2")
    html = page(folder)
    assert '<section id="hard"><h2>Hard needles</h2><h3>Distractors</h3>' in html
    assert "Lexical overlap with the question" in html  # beside the hard tables, the overlap is shown
    out = printed(folder, capsys)
    assert "distractors (samples with look-alikes):" in out and "overlap of number needles" in out


def test_an_overlap_table_is_hard_where_it_compares_needle_kinds() -> None:
    assert not hard_to_report({"overlap": [OVERLAP]})
    assert hard_section({"overlap": [OVERLAP]}) == "" and hard_text({"overlap": [OVERLAP]}) == []
    kinds = {"overlap": [OVERLAP, {**OVERLAP, "label": "latent-1", "shared_words": 0.5}]}
    assert hard_to_report(kinds) and "Hard needles" in hard_section(kinds)
    assert len([line for line in hard_text(kinds) if line.startswith("overlap of")]) == 2


def test_a_plain_runs_redraws_are_shown_without_the_hard_heading() -> None:
    hard = {"overlap": [OVERLAP], "redraws": {"samples": 2, "first": ["the corpus holds 1234567"]}}
    assert not hard_to_report(hard)
    section = hard_section(hard)
    assert section.startswith('<section id="redraws"><h3>Needles drawn again</h3><p>2 samples')
    assert "Hard needles" not in section
    assert hard_text(hard) == ["needles drawn again for 2 samples (e.g. the corpus holds 1234567)"]


# 2. The samples and the controls counted alike in the terminal and on the page.


def test_the_terminal_and_the_card_count_samples_and_controls_alike(
    plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2 lengths x 2 depths x k=3 = 12 samples, and a control for each question.
    assert "12 samples + 12 controls, errors: 0" in printed(plain, capsys).splitlines()
    assert '<div class="number"><b>24</b><span>12 samples + 12 controls</span></div>' in page(plain)


def test_a_run_without_controls_counts_its_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = run(tmp_path / "run", "--no-control")
    assert "12 samples, errors: 0" in printed(folder, capsys).splitlines()
    assert '<div class="number"><b>12</b><span>samples</span></div>' in page(folder)


# 3. The excerpt around a needle, shown in whole words.


@pytest.mark.parametrize(
    ("excerpt", "shown"),
    [
        (
            "ngs of the sea. The number is 1234567. Remember it, for the ti",
            "…of the sea. The number is 1234567. Remember it, for the…",
        ),
        (" the sea. The number is 1234567. Remember it.", " the sea. The number is 1234567. Remember it."),
        ("rds\nline two\nthree fo", "…line two\nthree…"),
        ("onlyoneword", "onlyoneword"),
        ("ab cd", "ab cd"),  # nothing left between the cuts: shown whole
        ("", ""),
    ],
)
def test_an_excerpt_is_cut_to_whole_words(excerpt: str, shown: str) -> None:
    assert word_bounded(excerpt) == shown


def test_the_page_shows_each_excerpt_from_a_word_boundary(plain: Path) -> None:
    lines = (plain / "samples.jsonl").read_text().splitlines()
    records = {r.sample_id: r for r in map(SampleRecord.from_json, map(json.loads, lines)) if not r.control}
    shown = json.loads(data_block(page(plain)))["samples"]
    assert len(shown) == len(records)
    trimmed = 0
    for sample in shown:
        (recorded,) = records[sample["id"]].needle_context or ()
        (text,) = sample["context"]
        inner = text.removeprefix(ELLIPSIS).removesuffix(ELLIPSIS).strip()
        at = recorded.index(inner)  # the page shows the record's own text, less its cut ends
        assert at == 0 or recorded[at - 1].isspace()
        end = at + len(inner)
        assert end == len(recorded) or recorded[end].isspace()
        trimmed += text.startswith(ELLIPSIS)
    assert trimmed  # 40 tokens before the needle begin inside a word in some sample


# 4. A suite's counts: the prompts and the items they ask, never "6 of 3 items".


def test_a_suites_counts_name_prompts_and_items_apart() -> None:
    scored = {"n": 6, "errors": 0, "mean": 0.5, "ci_low": 0.2, "ci_high": 0.8, "truncated": 1}
    lengths = [{**scored, "n": 3, "length": 1024}, {**scored, "n": 3, "length": 2048}]
    row = {"task": "qasper", "scoring": "longbench:qa_f1", **scored, "items": 3, "lengths": lengths}
    _, task, at_1k, at_2k, mean = suite_tasks_text(
        {"by_task": [row], "mean": {"tasks": 1, **scored, "items": 3}}
    )
    assert task.endswith("6 prompts (3 items at 2 limits), 1 cut  (longbench:qa_f1)")
    assert at_1k.endswith("3 prompts, 1 cut") and at_2k.endswith("3 prompts, 1 cut")
    assert mean.endswith("(6 prompts (3 items at 2 limits))")
    assert not any("items" in line and " of " in line.split("]")[-1] for line in (task, mean))
