"""The odd-name shortcut beside every low-overlap score (issue 29, item 1): each low-overlap sample
records the odd-name reader's grade on its own prompt (record schema 10), and the summary, the
terminal text and report.html give it beside each low-overlap variant's score, with its interval.

The reader needs no model: its grade is a function of the prompt's context, the same whatever model
the run asks. On ``sim:odd-name`` (that reader as a model) it is the sample's own score.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fathom.analysis.hard import hard_summary
from fathom.analysis.stats import wilson_interval
from fathom.records import SampleRecord, record_from_json
from fathom.report.derive import derive
from fathom.report.files import REPORT
from fathom.report.text import hard_text
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import LATENT_DISTRACTORS, RunSpec, default_distractors

V9 = Path(__file__).parent / "fixtures" / "records-v9"


def records(folder: Path) -> list[SampleRecord]:
    return [r for r in RunFolder(folder).records() if isinstance(r, SampleRecord)]


def latent_run(tmp_path: Path, model: str, distractors: int | None = None, needle: str = "latent-1") -> Path:
    """``needle`` and its literal twins at 1k and 2k, 5 depths, 12 samples: 240 samples; with the
    distractors ``fathom run`` gives it unless told."""
    distractors = default_distractors(needle) if distractors is None else distractors
    spec = RunSpec(
        "niah", model, "cl100k_base", (1024, 2048), (0.1, 0.3, 0.5, 0.7, 0.9), 12, needle=needle,
        distractors=distractors, control=False,
    )  # fmt: skip
    folder = tmp_path / f"{model}-{distractors}-{needle}".replace(":", "-").replace("?", "-")
    run(spec, folder, show_progress=False)
    return folder


def shortcut(samples: list[SampleRecord]) -> tuple[int, int]:
    graded = [r.odd_name_score for r in samples if not r.control]
    assert None not in graded
    return sum(score == 1.0 for score in graded), len(graded)


def test_the_shortcut_is_at_chance_on_the_defaults_and_is_the_readers_own_score(tmp_path: Path) -> None:
    samples = records(latent_run(tmp_path, "sim:odd-name"))  # the default: 3 distractors, 4 characters
    hits, total = shortcut(samples)
    low, high = wilson_interval(hits, total)
    assert total == 240 and low <= 1 / (LATENT_DISTRACTORS + 1) <= high < 0.45, (hits, total)
    # Graded as an answer is: the reader as a model scores exactly what each sample records.
    assert [r.odd_name_score for r in samples] == [r.score for r in samples]


def test_alone_the_odd_name_answers_nearly_always_whatever_the_model(tmp_path: Path) -> None:
    samples = records(latent_run(tmp_path, "sim:perfect?knows=0.5", distractors=0))
    hits, total = shortcut(samples)
    assert total == 240 and hits / total >= 0.95
    # A model that knows half the items scores otherwise: the baseline is the prompt's, not the model's.
    assert sum(r.score for r in samples) / total < 0.85


def test_latent_samples_record_it_and_no_other_record_does(tmp_path: Path) -> None:
    spec = RunSpec("niah", "sim:perfect", "char", (1024,), (0.5,), 2, needle="latent-2")
    run(spec, tmp_path / "latent", show_progress=False)
    lines = [json.loads(line) for line in (tmp_path / "latent" / "samples.jsonl").read_text().splitlines()]
    asked = [d for d in lines if not d.get("control")]
    assert {d["task"] for d in asked} == {"niah", "niah:literal"} and len(asked) == 4
    assert all(d["odd_name_score"] in (0.0, 1.0) for d in asked)
    # Controls (no context to read) and closed-book probes hold none: the key is left out.
    assert [d for d in lines if d.get("control")] and all(
        "odd_name_score" not in d for d in lines if d.get("control")
    )
    run(
        RunSpec("niah", "sim:perfect", "char", (1024,), (0.5,), 2, distractors=2),
        tmp_path / "plain",
        show_progress=False,
    )
    assert "odd_name_score" not in (tmp_path / "plain" / "samples.jsonl").read_text()
    assert all(r.odd_name_score is None for r in records(tmp_path / "plain"))


def test_the_summary_text_and_report_give_it_beside_each_variants_score(tmp_path: Path) -> None:
    folder = latent_run(tmp_path, "sim:perfect?knows=0.5", needle="latent-2")
    samples = records(folder)
    rows = hard_summary(samples)["odd_name"]
    assert [row["variant"] for row in rows] == ["niah", "niah:literal"]
    for row in rows:
        mine = [r for r in samples if r.task == row["variant"]]
        hits = sum(r.odd_name_score == 1.0 for r in mine)
        assert row["n"] == len(mine) == 120
        assert row["odd_name"]["mean"] == hits / 120
        assert (row["odd_name"]["ci_low"], row["odd_name"]["ci_high"]) == pytest.approx(
            wilson_interval(hits, 120)
        )
        assert row["score"]["mean"] == pytest.approx(sum(r.score for r in mine) / 120)
    (asked, _twin) = rows
    lines = [line for line in hard_text({"odd_name": rows}) if "odd-name shortcut on these prompts" in line]
    odd = asked["odd_name"]
    assert lines[0] == (
        f"niah: {asked['score']['mean']:.1%} [{100 * asked['score']['ci_low']:.1f}, "
        f"{100 * asked['score']['ci_high']:.1f}] (n=120); odd-name shortcut on these prompts: "
        f"{odd['mean']:.1%} [{100 * odd['ci_low']:.1f}, {100 * odd['ci_high']:.1f}]"
    )
    assert lines[1].startswith("niah:literal: ") and len(lines) == 2
    derive(RunFolder(folder))
    page = (folder / REPORT).read_text()
    assert "<h3>The odd-name shortcut</h3>" in page and "odd-name shortcut on these prompts" in page
    assert f"<td>{odd['mean']:.1%}</td><td>{odd['ci_low']:.1%} to {odd['ci_high']:.1%}</td>" in page


def test_runs_before_it_show_no_baseline_and_a_schema_9_record_holding_it_is_refused() -> None:
    old = records(V9)
    assert old and all(r.odd_name_score is None for r in old)
    assert "odd_name" not in hard_summary(old)
    line = json.loads((V9 / "samples.jsonl").read_text().splitlines()[-1])
    with pytest.raises(TypeError, match=r"unknown field 'odd_name_score' \(a field of schema 10"):
        record_from_json({**line, "odd_name_score": 1.0})
