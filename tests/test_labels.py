"""Run labels (``fathom run ... --label step=1200``): what a label may be, where the manifest keeps it
(schema 6, outside the identity), what a resume does with it, and ``fathom runs`` showing it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_store import manifest, record

from fathom.cli import main
from fathom.errors import RunFolderError, SpecError
from fathom.manifest import Manifest
from fathom.report.derive import run_spec
from fathom.report.runs import list_runs
from fathom.report.runs_text import runs_text
from fathom.run.labels import check_labels, labels_text, parse_labels
from fathom.run.runner import default_run_dir
from fathom.run.store import RunFolder
from fathom.schemas import MANIFEST_SCHEMA
from fathom.spec import RunSpec

FIXTURES = Path(__file__).parent / "fixtures"
SPEC = RunSpec("niah", "sim:perfect", "char", (1024,), (0.5,), 2)
FLAGS = ["--tokenizer", "char", "--lengths", "1k", "--depths", "0.5", "--samples", "2", "--no-progress"]


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


# --- what a label may be --------------------------------------------------------------------------


def test_labels_parse_in_the_order_given() -> None:
    labels = parse_labels(["step=1200", "ckpt=run-7/step_1200.pt", "lr.peak=3e-4"])
    assert labels == {"step": "1200", "ckpt": "run-7/step_1200.pt", "lr.peak": "3e-4"}
    assert list(labels) == ["step", "ckpt", "lr.peak"]
    assert labels_text(labels) == "step=1200 ckpt=run-7/step_1200.pt lr.peak=3e-4"
    assert parse_labels([]) == {}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["step"], "--label 'step' has no '=': give KEY=VALUE"),
        (["step="], "label step has an empty value"),
        (["step=  "], "label step has an empty value"),
        (["=1200"], "label key '' is not a short name"),
        (["a=b=c"], "label a='b=c' holds a second '='"),
        (["1step=2"], "label key '1step' is not a short name"),
        (["st ep=2"], "label key 'st ep' is not a short name"),
        (["s" * 33 + "=2"], "is not a short name"),
        (["step=1\n2"], "label step holds a control character"),
        (["ckpt=" + "x" * 201], "label ckpt is 201 characters long: at most 200"),
        (["step=1", "step=2"], "--label step is given twice ('1' and '2')"),
    ],
)
def test_a_bad_label_is_one_clear_error(given: list[str], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_labels(given)
    assert message in str(caught.value)


def test_the_longest_label_passes() -> None:
    key, value = "k" + "_" * 31, "v" * 200
    assert check_labels({key: value}) == {key: value}


@pytest.mark.parametrize("label", ["step=", "=x", "a=b=c", "step"])
def test_fathom_run_refuses_a_bad_label_before_anything_is_written(
    label: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli("run", "niah", "--model", "sim:perfect", *FLAGS, "--out", tmp_path / "runs", "--label", label)
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("fathom: error: ") and "label" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_the_python_api_checks_labels_too(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="label step has an empty value"):
        run_spec(SPEC, tmp_path / "run", show_progress=False, labels={"step": ""})
    assert not (tmp_path / "run").exists()


# --- the manifest ---------------------------------------------------------------------------------


def test_labels_are_kept_outside_the_identity(tmp_path: Path) -> None:
    plain, labelled = tmp_path / "plain", tmp_path / "labelled"
    run_spec(SPEC, plain, show_progress=False)
    run_spec(SPEC, labelled, show_progress=False, labels={"step": "1200", "ckpt": "<b>a</b>"})
    written = json.loads((labelled / "manifest.json").read_text())
    assert written["schema"] == MANIFEST_SCHEMA == 6
    assert written["labels"] == {"step": "1200", "ckpt": "<b>a</b>"}
    assert "labels" not in json.loads((plain / "manifest.json").read_text())  # none: no key, as before
    first, second = (RunFolder(path).read_manifest() for path in (plain, labelled))
    assert first.identity.written == second.identity.written
    assert first.identity.fingerprint == second.identity.fingerprint
    assert second.labels == {"step": "1200", "ckpt": "<b>a</b>"} and first.labels == {}
    # The records of both carry the one identity: two checkpoints' runs compare.
    assert cli("compare", plain, labelled, "--out", tmp_path / "compare") == 0


def test_the_default_run_folder_is_the_same_with_and_without_labels(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    assert cli("run", "niah", "--model", "sim:perfect", *FLAGS, "--out", out, "--label", "step=1") == 0
    (folder,) = out.iterdir()
    assert folder == default_run_dir(SPEC, out)
    assert RunFolder(folder).read_manifest().labels == {"step": "1"}


def test_a_schema_5_manifest_still_reads_without_labels() -> None:
    # The newest fixture's manifest, as fathom wrote it at schema 5 (a resume listed, no labels).
    written = json.loads((FIXTURES / "records-v8" / "manifest.json").read_text())
    fifth = written | {"schema": 5, "resumes": []}
    manifest = Manifest.from_json(fifth)
    assert manifest.labels == {} and manifest.schema == MANIFEST_SCHEMA
    assert "labels" not in manifest.to_json()


def test_a_manifest_of_schema_5_with_labels_is_no_manifest() -> None:
    written = json.loads((FIXTURES / "records-v8" / "manifest.json").read_text())
    with pytest.raises(TypeError, match="a field of schema 6, in a manifest of schema 5"):
        Manifest.from_json(written | {"schema": 5, "labels": {"step": "1"}})


@pytest.mark.parametrize("labels", [{"step": 1200}, ["step", "1"], "step=1"])
def test_labels_that_are_not_text_make_a_damaged_manifest(labels: object, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    run_spec(SPEC, folder, show_progress=False)
    path = folder / "manifest.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"labels": labels}))
    with pytest.raises(RunFolderError, match=r"manifest\.json is damaged .*labels"):
        RunFolder(folder).read_manifest()


# --- a resume ---------------------------------------------------------------------------------------


def test_a_resume_without_labels_keeps_the_folders(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    run_spec(SPEC, folder, show_progress=False, labels={"step": "1"})
    result = run_spec(dataclasses.replace(SPEC, samples=3), tmp_path / "other", show_progress=False)
    assert result.written  # (another run: the resume below is of the first)
    run_spec(SPEC, folder, show_progress=False)
    run_spec(SPEC, folder, show_progress=False, labels={"step": "1"})  # the same labels: the same run
    assert RunFolder(folder).read_manifest().labels == {"step": "1"}


@pytest.mark.parametrize(
    ("first", "then", "held"),
    [({"step": "1"}, {"step": "2"}, "labelled step=1, not step=2"),
     ({"step": "1"}, {"step": "1", "ckpt": "a"}, "labelled step=1, not step=1 ckpt=a"),
     ({}, {"step": "2"}, "labelled no labels, not step=2")],
)  # fmt: skip
def test_a_resume_with_other_labels_is_refused_naming_both(
    first: dict[str, str], then: dict[str, str], held: str, tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    run_spec(SPEC, folder, show_progress=False, labels=first)
    before = (folder / "manifest.json").read_bytes(), (folder / "samples.jsonl").read_bytes()
    with pytest.raises(RunFolderError) as caught:
        run_spec(SPEC, folder, show_progress=False, labels=then)
    assert f"run folder '{folder}'" in str(caught.value)
    assert held in str(caught.value) and "resume it without --label" in str(caught.value)
    assert before == ((folder / "manifest.json").read_bytes(), (folder / "samples.jsonl").read_bytes())


def test_a_folder_without_records_takes_the_new_labels(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest().labelled({"step": "1"}))
    folder.close()
    folder.start(manifest().labelled({"step": "2"}))  # nothing recorded yet: nothing to name
    with folder:
        folder.append(record(0))
    assert folder.read_manifest().labels == {"step": "2"}
    with pytest.raises(RunFolderError, match="labelled step=2, not step=3"):
        folder.start(manifest().labelled({"step": "3"}))


# --- fathom runs --------------------------------------------------------------------------------------


def test_fathom_runs_shows_the_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    run_spec(SPEC, runs / "a", show_progress=False, labels={"step": "100", "ckpt": "x"})
    run_spec(SPEC, runs / "b", show_progress=False)
    by_name = {entry.folder.name: entry for entry in list_runs(runs)}
    assert by_name["a"].labels == {"step": "100", "ckpt": "x"} and by_name["b"].labels == {}
    assert cli("runs", runs) == 0
    lines = {line.split()[2]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["a"].split()[3:5] == ["ckpt=x", "step=100"]  # by key, as the manifest keeps them
    assert lines["b"].split()[3] == "sim:perfect"  # an empty labels column
    # Where no run has labels, there is no column at all: the listing is as it always was.
    plain = [entry for entry in list_runs(runs) if not entry.labels]
    assert runs_text(plain)[0].split()[3] == "sim:perfect"
