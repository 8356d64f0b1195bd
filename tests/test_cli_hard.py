"""fathom run niah with hard needles, end to end: what lands in the records and the summary, a
resume, and every bad input refused in one line before any folder is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.schemas import SUMMARY_SCHEMA

GRID = ["--tokenizer", "char", "--lengths", "2k,4k", "--depths", "0.2,0.8", "--samples", "3", "--no-progress"]


def run(folder: Path, model: str, *options: str) -> int:
    return main(["run", "niah", "--model", model, *GRID, *options, "--run-dir", str(folder)])


def records(folder: Path) -> list[dict[str, object]]:
    lines = (folder / "samples.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if not r.get("control")]


def test_distractors_fool_the_pattern_matcher_in_records_and_summary(tmp_path: Path) -> None:
    assert run(tmp_path / "run", "sim:pattern-matcher", "--distractors", "3") == 0
    rows = records(tmp_path / "run")
    assert len(rows) == 12
    assert all(
        r["needle_roles"] == ["gold", "key-distractor", "class-distractor", "key-distractor"] for r in rows
    )
    lured = [r for r in rows if r.get("lured")]
    assert lured and all(r["score"] == 0.0 for r in lured)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["schema"] == SUMMARY_SCHEMA
    taken = {
        row["length"]: row["lured"]["count"] + row["hedged"]["count"] for row in summary["hard"]["lures"]
    }
    assert taken == {length: sum(1 for r in lured if r["length"] == length) for length in (2048, 4096)}
    # A rerun resumes: nothing to do, nothing written twice.
    before = (tmp_path / "run" / "samples.jsonl").read_bytes()
    assert run(tmp_path / "run", "sim:pattern-matcher", "--distractors", "3") == 0
    assert (tmp_path / "run" / "samples.jsonl").read_bytes() == before


def test_several_domains_and_a_literal_twin_are_variants_of_one_run(tmp_path: Path) -> None:
    assert run(tmp_path / "run", "sim:literal", "--needle", "latent-1", "--corpus", "prose,noise") == 0
    rows = records(tmp_path / "run")
    tasks = sorted({str(r["task"]) for r in rows})
    assert tasks == ["niah:noise", "niah:noise+literal", "niah:prose", "niah:prose+literal"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert set(summary["variants"]) == set(tasks)
    # The literal reader answers every literal twin and no low-overlap question.
    assert all(row["literal"] == 1.0 and row["low_overlap"] == 0.0 for row in summary["hard"]["literal_cost"])
    assert all(r["overlap_words"] == 0 for r in rows if r["task"] in ("niah:noise", "niah:prose"))
    # Each corpus's source, licence, size in the run's tokens and hash, outside the identity.
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    corpora = {c["name"]: c for c in manifest["corpora"]}
    assert set(corpora) == {"prose", "noise"} and corpora["prose"]["licence"] == "public domain"
    assert (
        corpora["noise"]["tokens"]
        == len("The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.")
        + 1
    )
    assert corpora["prose"]["sha256"] == manifest["identity"]["task"]["corpora"]["prose"]


def test_random_offsets_are_recorded_per_sample(tmp_path: Path) -> None:
    assert run(tmp_path / "run", "sim:perfect", "--haystack-offset", "random") == 0
    offsets = [r["haystack_offset"] for r in records(tmp_path / "run")]
    assert all(isinstance(o, int) for o in offsets) and len(set(offsets)) == len(offsets)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--needle", "paraphrase"], "unknown needle kind 'paraphrase': use one of"),
        (["--corpus", "poetry"], "unknown corpus 'poetry': use one of"),
        (["--corpus", "mix:prose=-1,noise=1"], "mix:prose=-1,noise=1"),
        (["--corpus", "mix:prose=a,noise=1"], "mix:prose=a,noise=1"),
        (["--distractors", "60", "--lengths", "2k"], "of the 60 distractors fit"),
        (["--needles", "0"], "--needles 1 or more"),
        (["--needle", "sf", "--distractors", "1"], "sf needle is one fixed sentence"),
        (["--needle", "chain", "--split-distance", "0.9"], "cannot have its parts 0.9 of the haystack apart"),
        (["--needle", "split", "--split-distance", "far"], "--split-distance takes a share of the haystack"),
        (["--haystack-offset", "middle"], "unknown haystack offset 'middle'"),
        (["--corpus", "prose,prose"], "names a corpus twice"),
    ],
)
def test_bad_hard_needle_input_is_one_line_and_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    assert run(tmp_path / "run", "sim:perfect", *options) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_folder_with_no_matching_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "a.py").write_text("x = 1\n")
    assert run(tmp_path / "run", "sim:perfect", "--corpus", f"dir:{tmp_path / 'code'}/**/*.go") == 2
    err = capsys.readouterr().err
    assert "matches no" in err and err.count("\n") == 1
