"""The closed-book probe of the low-overlap items (#29 item 2): one probe per item and run, recorded as
a control of no sample; a simulated model that knows some items shows the split between all items and
known ones; a backend that cannot answer closed-book is refused before any folder is made; the items
file's review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fathom.analysis.knowledge import knowledge_summary, relative
from fathom.analysis.select import control_records, probe_records, split_records
from fathom.cli import main
from fathom.errors import SpecError
from fathom.prompts.latent import LATENT_VERSION, load_items
from fathom.records import SampleRecord, record_from_json
from fathom.run import runner
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks.probe import grade

SPEC = RunSpec("niah", "sim:perfect?knows=0.5", "char", (1024, 2048), (0.5,), 6, needle="latent-1")


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[SampleRecord]:
    folder = tmp_path_factory.mktemp("probe") / "run"
    runner.run(SPEC, folder, show_progress=False)
    return [r for r in RunFolder(folder).latest() if isinstance(r, SampleRecord)]


def test_each_item_used_is_probed_once_as_a_control_of_no_sample(records: list[SampleRecord]) -> None:
    samples, _ = split_records(records)
    probes = probe_records(records)
    used = {item for r in samples if not r.task.endswith("literal") for item in r.latent_items}
    assert used and sorted(r.probe for r in probes) == sorted(used)
    assert all(r.sample_id == f"probe|{r.probe}" and r.control and r.length == 0 for r in probes)
    assert not set(probes) & set(samples) and not set(probes) & set(control_records(records))
    assert all(len(r.latent_items) == 1 for r in samples)


def test_a_model_that_knows_some_items_splits_all_items_from_the_known(records: list[SampleRecord]) -> None:
    samples, _ = split_records(records)
    known = {r.probe: r.score for r in probe_records(records)}
    assert set(known.values()) == {0.0, 1.0}  # knows=0.5 knows some items, not all
    for record in samples:
        if not record.task.endswith("literal"):  # sim:perfect finds what it knows, nothing else
            assert record.score == known[record.latent_items[0]]
        else:  # the literal question names the anchor: no knowledge needed
            assert record.score == 1.0
    section = knowledge_summary(samples, probe_records(records))
    rows = section["lengths"]
    assert all(row["known"]["mean"] == 1.0 for row in rows if row["known"]["n"])
    assert any(row["all"]["mean"] < 1.0 for row in rows)
    assert section["probes"]["known"] == sum(1 for s in known.values() if s)


def _record(item: str, length: int, score: float) -> SampleRecord:
    data: dict[str, Any] = json.loads(
        (Path(__file__).parent / "fixtures" / "records-v9" / "samples.jsonl").read_text().splitlines()[-1]
    )
    return SampleRecord.from_json(data | {"length": length, "score": score, "latent_items": [item]})


def test_the_effective_length_is_the_longest_that_keeps_85_percent_of_the_items_bases() -> None:
    rows = [
        _record("a", 1024, 1.0),
        _record("a", 2048, 0.0),
        _record("b", 1024, 0.0),
        _record("b", 2048, 0.0),
    ]
    rows += [_record("a", 4096, 1.0), _record("a", 8192, 0.0), _record("b", 4096, 1.0)]
    result = relative(rows)
    assert result["base_lengths"] == [1024, 2048] and result["zero_base"] == 1  # b failed short: left out
    assert [r["ratio"] for r in result["lengths"]] == [1.0, 0.0, 1.0, 0.0]
    assert result["effective_length"] == 1024  # 2048 falls below; the 4096 that recovers does not count


def test_a_place_counts_as_whole_words_in_its_capitals() -> None:
    assert grade("Nice.", ("Nice",)).value == 1.0
    assert grade("It has a nice view of Cannes.", ("Nice",)).value == 0.0
    assert grade("A Parisian landmark.", ("Paris",)).value == 0.0
    assert grade("It is in New York, USA.", ("New York City", "New York")).matched == ("New York",)


class NoKnowledge:
    """A stand-in for a backend that says it cannot answer closed-book (none of fathom's does)."""

    closed_book = False

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def test_a_backend_that_cannot_answer_closed_book_is_refused_before_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = runner.create_backend
    monkeypatch.setattr(runner, "create_backend", lambda *a: NoKnowledge(made(*a)))
    with pytest.raises(SpecError, match=r"cannot answer closed-book.*--no-control"):
        runner.run(SPEC, tmp_path / "run", show_progress=False)
    assert not (tmp_path / "run").exists()
    # without probes (and controls) it runs; a plain run has no probes to refuse
    runner.run(SPEC.__class__(**{**SPEC.__dict__, "control": False, "samples": 1}), tmp_path / "run", False)
    assert not probe_records(list(RunFolder(tmp_path / "run").latest()))


def test_a_record_of_schema_8_holding_a_probe_is_refused() -> None:
    line = json.loads(
        (Path(__file__).parent / "fixtures" / "records-v8" / "samples.jsonl").read_text().split("\n")[0]
    )
    with pytest.raises(TypeError, match="field of schema 9"):
        record_from_json(line | {"probe": "h1-story-bridge"})


def test_the_reviewed_items_have_probes_and_the_weak_ones_are_gone() -> None:
    items = load_items()
    assert LATENT_VERSION == 2 and len(items) == 241
    ids = {item.id for item in items}
    named = {"h2-bust-of-nefertiti", "h2-guernica", "h2-declaration-of-independence", "h1-bulguksa",
             "h2-wanderer-above-the-sea-of-fog", "h1-place-stanislas"}  # fmt: skip
    assert not named & ids
    for item in items:
        assert item.probe.endswith("?") and item.probe_answers[0] == item.chain[-1]
        assert grade(f"{item.chain[-1]}.", item.probe_answers).value == 1.0
    assert len({item.key for item in items}) == len(items)  # an anchor names one item


def test_the_cli_refuses_a_backend_that_cannot_answer_closed_book_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = runner.create_backend
    monkeypatch.setattr(runner, "create_backend", lambda *a: NoKnowledge(made(*a)))
    grid = ["--tokenizer", "char", "--lengths", "2k", "--depths", "0.5", "--samples", "2", "--no-progress"]
    args = [
        "run",
        "niah",
        "--model",
        "sim:perfect",
        "--needle",
        "latent-1",
        *grid,
        "--run-dir",
        str(tmp_path / "run"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "cannot answer closed-book" in err and "--no-control" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
