"""Records, manifests and summaries as a contract: every older form reads, a newer one is refused.

``fixtures/records-vN`` is a run folder (manifest.json, samples.jsonl and the summary.json it derived)
written by the fathom of the last commit whose records were of schema N, run from an export of
that commit (so git_sha is null):

- v1, 1b49822: ``fathom run niah --model sim:cliff --tokenizer char --lengths 4k,16k --depths 0,1
  --samples 2`` (one needle per record, as scalars; no plan in the manifest)
- v2, 8da41b1: ``fathom run ruler --model sim:cliff --tokenizer cl100k_base --lengths 4k,16k
  --samples 1`` (depths drawn per sample: depth null, several needles)
- v3, e6878bf and v4, a78617b: ``fathom run niah --model 'sim:cliff?window=1536' --tokenizer char
  --lengths 1k,2k --depths 0.5 --samples 2 --perplexity --answer-logprob`` (perplexity records,
  answer log-probabilities, no-context controls; v4 with each record's run fingerprint)
- v5, the commit after 820ebcc: ``fathom run niah --model sim:pattern-matcher --tokenizer char --lengths
  2k,4k --depths 0.5 --samples 2 --needle latent-1 --distractors 2 --haystack-offset random`` (hard
  needles: roles and values, literal twins as task niah:literal, offsets, redraws, overlap)
- v6, the commit that added the real suites: ``fathom run longbench --suite-tasks hotpotqa --data DIR
  --model sim:perfect --tokenizer char --lengths 1k,8k --samples 2``, DIR written by
  ``tests/test_suites.py``'s ``write_suites`` (items, splits, truncation: 1k cuts every prompt)
- v7, dfda978's tree: ``fathom run niah --model 'sim:cliff?window=1k&delay=0.01' --tokenizer char
  --lengths 1k,2k --depths 0,1 --samples 2`` (the backend's prefill and decode seconds)
- v8, the tree that added it: ``fathom run niah --model 'llamacpp:smollm2?threads=2' --lengths 1k
  --depths 0,1 --samples 2 --scoring exact`` (what came first of each answer, forced; the answer
  ``exact`` compared where it is not the output)
- v10, the tree that added it: ``fathom run niah --model 'sim:perfect?knows=0.5' --tokenizer char
  --lengths 1k,2k --depths 0.5 --samples 2 --needle latent-1`` (the odd-name reader's grade on each
  low-overlap sample's prompt, none on the controls and probes)
- v11, the tree that added it: ``fathom run niah --model 'sim:perfect?knows=0.5' --tokenizer char
  --lengths 2k,64k --depths 0.25,0.75 --samples 1 --needle latent-1`` (the near neighbours of each
  low-overlap sample's places that its window names: "New York" and "York" beside New York City)
- v13, the tree that added it: ``fathom run niah --model sim:thinker --lengths 1k,2k --depths 0.5
  --samples 3 --thinking-budget 120 --keep-reasoning`` (reasoning apart from the answer: its tokens and
  text; answered, cut after thinking, and still thinking when the budget ran out)

A new record schema adds its fixture here, written by the fathom that introduces it.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fathom.analysis import stats
from fathom.analysis.summary import SUMMARIES, RunFacts, run_summary
from fathom.cli import main
from fathom.errors import NewerSchemaError, RunFolderError
from fathom.manifest import Manifest
from fathom.records import (
    ErrorKind,
    PerplexityRecord,
    SampleRecord,
    error_kind,
    is_retried,
    record_from_json,
)
from fathom.report.files import SUMMARY, read_summary
from fathom.report.runs import list_runs
from fathom.run.runner import run
from fathom.run.store import QUARANTINE, RunFolder
from fathom.schemas import MANIFEST_SCHEMA, RECORD_SCHEMA, SUMMARY_SCHEMA, Versions
from fathom.spec import RunSpec

FIXTURES = Path(__file__).parent / "fixtures"
VERSIONS = range(1, RECORD_SCHEMA + 1)


def fixture(version: int) -> Path:
    return FIXTURES / f"records-v{version}"


def lines(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def test_there_is_a_fixture_of_every_record_schema() -> None:
    """Bumping RECORD_SCHEMA asks for a fixture of the new version, which the next bump keeps."""
    assert {p.name for p in FIXTURES.glob("records-v*")} == {f"records-v{v}" for v in VERSIONS}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_line_of_every_schema_reads_in_todays_form(version: int) -> None:
    assert lines(fixture(version))  # a fixture with no line would pass the loop unread
    for line in lines(fixture(version)):
        assert line["schema"] == version
        record = record_from_json(line)
        assert record.schema == RECORD_SCHEMA
        assert record_from_json(json.loads(json.dumps(record.to_json()))) == record  # and round-trips


@pytest.mark.parametrize("version", VERSIONS)
def test_an_old_run_analyses_to_the_summary_its_own_fathom_wrote(
    version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Today's analysis of the upgraded records gives, number for number, the summary.json that the
    fathom of that schema derived from them (read in today's form of it), under the interval rule of
    that summary's schema: before 9, the bootstrap from two fractional scores up."""
    _with_the_interval_rule_of(fixture(version), monkeypatch)
    folder = RunFolder(fixture(version))
    summary = dataclasses.replace(run_summary(folder.latest()), run=RunFacts.of(folder.read_manifest()))
    written = json.loads((fixture(version) / SUMMARY).read_text())
    today = json.loads(json.dumps(summary.to_json()))
    assert as_of(today, written.get("schema", 1)) == SUMMARIES.upgrade(written)
    read = read_summary(fixture(version))
    assert read is not None and json.loads(json.dumps(read.to_json())) == SUMMARIES.upgrade(written)


def _with_the_interval_rule_of(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Summary schema 9 gave fewer than 30 fractional scores Wilson's interval of their mean; an older
    summary's fathom took the bootstrap from 2 of them (``stats.BOOTSTRAP_LEAST``)."""
    if json.loads((folder / SUMMARY).read_text()).get("schema", 1) < 9:
        monkeypatch.setattr(stats, "BOOTSTRAP_LEAST", 2)


# Keys of a section that a later summary schema added and that only the records can give (no upgrade
# step can make them from the old summary): today's analysis has them, the old fathom did not.
ADDED = {5: [("suites", "by_task"), ("suites", "mean")], 6: [("hard", "neighbours"), ("hard", "forms")]}


def as_of(summary: dict[str, Any], schema: int) -> dict[str, Any]:
    """Today's summary without the derived keys added after ``schema``."""
    copy = json.loads(json.dumps(summary))
    for version, keys in ADDED.items():
        for section, key in keys if schema < version else ():
            copy.get(section, {}).pop(key, None)
    return copy


def test_schema_1_holds_one_needle_as_scalars_and_reads_as_lists() -> None:
    (raw, *_) = lines(fixture(1))
    (record, *_) = RunFolder(fixture(1)).latest()
    assert isinstance(record, SampleRecord)
    assert record.needle_token_offsets == (raw["needle_token_offset"],)
    assert record.needle_depths == (raw["needle_depth"],)
    assert record.max_new_tokens == 32 and record.answer_logprobs is None and record.run_identity is None


def test_schema_2_ruler_records_have_no_depth_and_several_needles() -> None:
    records = [r for r in RunFolder(fixture(2)).latest() if isinstance(r, SampleRecord)]
    assert all(r.depth is None for r in records)
    assert max(len(r.needle_token_offsets) for r in records) > 1
    summary = read_summary(fixture(2))
    assert summary is not None and summary.kind == "ruler"


@pytest.mark.parametrize("version", [3, 4])
def test_schemas_3_and_4_hold_perplexity_documents_log_probabilities_and_controls(version: int) -> None:
    records = RunFolder(fixture(version)).latest()
    documents = [r for r in records if isinstance(r, PerplexityRecord)]
    samples = [r for r in records if isinstance(r, SampleRecord)]
    assert len(documents) == 4 and all(len(d.logprobs) > 1000 for d in documents)
    assert sum(r.control for r in samples) == 4
    assert all(r.answer_logprob is not None for r in samples)
    stamped = {r.run_identity for r in records}
    if version == 3:
        assert stamped == {None}  # before fingerprints: every record counts as the run's own
    else:
        assert stamped == {RunFolder(fixture(4)).read_manifest().identity.fingerprint}


@pytest.mark.parametrize("version", VERSIONS)
def test_report_re_derives_every_old_run_folder(
    version: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_the_interval_rule_of(fixture(version), monkeypatch)
    copy = shutil.copytree(fixture(version), tmp_path / "run")
    assert main(["report", str(copy)]) == 0
    # A real suite's run (v6's fixture) states its truncation where a sweep states its effective length.
    said = "middle truncation" if version == 6 else "effective length"
    assert (copy / "report.html").is_file() and said in capsys.readouterr().out
    written = json.loads((copy / SUMMARY).read_text())
    old = json.loads((fixture(version) / SUMMARY).read_text())
    assert as_of(written, old.get("schema", 1)) == SUMMARIES.upgrade(old)
    assert (copy / "manifest.json").read_bytes() == (fixture(version) / "manifest.json").read_bytes()


# --- newer forms are refused, not misread -----------------------------------------------------------


def newer(data: dict[str, object], schema: int) -> dict[str, object]:
    return {**data, "schema": schema + 1, "a_field_of_tomorrow": [1, 2]}


def test_a_newer_record_is_refused_by_readers_and_writers_and_nothing_is_moved(tmp_path: Path) -> None:
    copy = shutil.copytree(fixture(RECORD_SCHEMA), tmp_path / "run")
    first = lines(copy)[0]
    with (copy / "samples.jsonl").open("a") as handle:
        handle.write(json.dumps(newer(first, RECORD_SCHEMA)) + "\n")
    before = (copy / "samples.jsonl").read_bytes()
    appended = len(lines(copy))
    message = (
        f"{copy / 'samples.jsonl'} line {appended} was written by a newer fathom (record schema "
        f"{RECORD_SCHEMA + 1}, this fathom reads up to {RECORD_SCHEMA}): upgrade fathom"
    )
    with pytest.raises(NewerSchemaError) as refused:
        RunFolder(copy).records()
    assert str(refused.value) == message
    with pytest.raises(RunFolderError, match=r"upgrade fathom, or 'fathom repair .* --set-aside-newer'"):
        RunFolder(copy).repair()  # the writer, too, leaves a newer fathom's records alone unless told
    assert (copy / "samples.jsonl").read_bytes() == before and not (copy / QUARANTINE).exists()


def test_the_cli_names_a_newer_record_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = shutil.copytree(fixture(RECORD_SCHEMA), tmp_path / "run")
    with (copy / "samples.jsonl").open("a") as handle:
        handle.write(json.dumps({"schema": RECORD_SCHEMA + 1}) + "\n")
    assert main(["report", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "was written by a newer fathom (record schema" in err


def test_a_newer_manifest_is_refused_and_listed_as_unreadable(tmp_path: Path) -> None:
    copy = shutil.copytree(fixture(RECORD_SCHEMA), tmp_path / "runs" / "run")
    path = copy / "manifest.json"
    path.write_text(json.dumps(newer(json.loads(path.read_text()), MANIFEST_SCHEMA)))
    message = (
        f"{path} was written by a newer fathom (manifest schema {MANIFEST_SCHEMA + 1}, this fathom "
        f"reads up to {MANIFEST_SCHEMA}): upgrade fathom"
    )
    with pytest.raises(NewerSchemaError) as refused:
        RunFolder(copy).read_manifest()
    assert str(refused.value) == message
    (entry,) = list_runs(tmp_path / "runs")
    assert entry.status == f"unreadable: {message}"


def test_a_newer_summary_is_refused(tmp_path: Path) -> None:
    copy = shutil.copytree(fixture(RECORD_SCHEMA), tmp_path / "run")
    path = copy / SUMMARY
    path.write_text(json.dumps(newer(json.loads(path.read_text()), SUMMARY_SCHEMA)))
    with pytest.raises(NewerSchemaError, match=r"summary\.json was written by a newer fathom \(summary"):
        read_summary(copy)


# --- within a known schema, keys no fathom wrote are refused ----------------------------------------


@pytest.mark.parametrize(
    ("version", "key"),
    # A key of no schema, and one that schema 5 added, in a record of schema 4.
    [(RECORD_SCHEMA, "needle_colour"), (4, "needle_roles")],
)
def test_a_record_with_a_key_its_schema_never_had_is_damage(tmp_path: Path, version: int, key: str) -> None:
    copy = shutil.copytree(fixture(version), tmp_path / "run")
    with (copy / "samples.jsonl").open("a") as handle:
        handle.write(json.dumps({**lines(copy)[0], key: ["gold"]}) + "\n")
    line = len(lines(copy))
    with pytest.raises(
        RunFolderError, match=rf"line {line} is not a record of this run: not a record \(unknown"
    ):
        RunFolder(copy).records()


@pytest.mark.parametrize("section", ["identity", "backend", "environment"])
def test_a_manifest_with_a_key_its_schema_never_had_is_damaged(tmp_path: Path, section: str) -> None:
    copy = shutil.copytree(fixture(RECORD_SCHEMA), tmp_path / "run")
    path = copy / "manifest.json"
    data = json.loads(path.read_text())
    data[section]["gpu"] = "H100"
    path.write_text(json.dumps(data))
    with pytest.raises(RunFolderError, match=r"manifest\.json is damaged"):
        RunFolder(copy).read_manifest()


def test_the_first_manifests_accepts_ids_is_the_one_retired_key() -> None:
    data = json.loads((fixture(1) / "manifest.json").read_text())
    data["backend"] = {"accepts_ids": True, "trained_window": 8192, "max_prompt_tokens": None}
    assert Manifest.from_json(data).backend.input is None


# --- the forms as data ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_a_manifest_keeps_its_identity_as_written(version: int) -> None:
    written = json.loads((fixture(version) / "manifest.json").read_text())
    manifest = Manifest.from_json(written)
    assert manifest.to_json()["identity"] == written["identity"]
    assert Manifest.from_json(json.loads(json.dumps(manifest.to_json()))) == manifest
    assert (manifest.planned is None) is (version < 3)  # the plan was recorded from schema 3's time on


def test_the_schema_4_fixtures_manifest_writes_back_as_it_was_in_todays_schema() -> None:
    written = json.loads((fixture(8) / "manifest.json").read_text())
    assert written["schema"] == 4  # written before schema 5's resumes, of which it has none
    assert Manifest.from_json(written).to_json() == written | {"schema": MANIFEST_SCHEMA}


def test_a_manifest_of_schema_4_with_resumes_is_no_manifest() -> None:
    written = json.loads((fixture(8) / "manifest.json").read_text())
    with pytest.raises(TypeError, match="a field of schema 5, in a manifest of schema 4"):
        Manifest.from_json(written | {"resumes": []})


def test_a_manifest_of_schema_2_with_judges_is_no_manifest() -> None:
    written = json.loads((fixture(6) / "manifest.json").read_text())
    assert written["schema"] == 2
    with pytest.raises(TypeError, match="a field of schema 3, in a manifest of schema 2"):
        Manifest.from_json(written | {"judges": []})


def test_a_schema_bumped_without_its_step_is_an_error_at_once() -> None:
    with pytest.raises(ValueError, match="record schema 3 needs 2 upgrade steps"):
        Versions("record", 3, ())


def test_steps_run_in_order_from_the_version_written() -> None:
    def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "steps": [*data.get("steps", []), 2]}

    def v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "steps": [*data.get("steps", []), 3]}

    versions = Versions("thing", 3, (v1_to_v2, v2_to_v3))
    assert versions.upgrade({}) == {"schema": 3, "steps": [2, 3]}  # no schema: the first
    assert versions.upgrade({"schema": 2}) == {"schema": 3, "steps": [3]}
    assert versions.upgrade({"schema": 3}) == {"schema": 3}
    with pytest.raises(TypeError, match="not a version number"):
        versions.upgrade({"schema": "2"})


def test_error_kinds_are_data_written_as_text() -> None:
    error = ErrorKind.TOO_LONG.error("9000 tokens exceed n_ctx 8192")
    assert error == "too_long: 9000 tokens exceed n_ctx 8192" and error_kind(error) == ErrorKind.TOO_LONG
    assert error_kind("http: 500") == "http"  # another writer's kind is counted as written
    assert [kind for kind in ErrorKind if kind.retried] == [ErrorKind.BACKEND_ERROR]
    assert is_retried(ErrorKind.BACKEND_ERROR.error("timeout: no reply (5 attempts)"))
    assert not is_retried(ErrorKind.REJECTED.error("HTTP 400: too long")) and not is_retried(None)


def test_a_manifest_of_schema_3_naming_a_scoring_version_is_no_manifest() -> None:
    written = json.loads((fixture(8) / "manifest.json").read_text())
    assert written["identity"]["scoring"] == {"exact": 2}
    with pytest.raises(TypeError, match="a field of schema 4, in a manifest of schema 3"):
        Manifest.from_json(written | {"schema": 3})


def test_an_exact_run_graded_before_the_extraction_does_not_resume_under_it(tmp_path: Path) -> None:
    spec = RunSpec("niah", "sim:perfect", "cl100k_base", (1024,), (0.5,), 1, scoring="exact")
    run(spec, tmp_path / "run", show_progress=False)
    path = tmp_path / "run" / "manifest.json"
    written = json.loads(path.read_text())
    assert written["schema"] == MANIFEST_SCHEMA and written["identity"]["scoring"] == {"exact": 2}
    # The manifest as the fathom before schema 4 wrote it: its exact took the output as it came.
    del written["identity"]["scoring"]
    path.write_text(json.dumps(written | {"schema": 3}))
    with pytest.raises(RunFolderError, match=r"differs in: scoring\)"):
        run(spec, tmp_path / "run", show_progress=False)
    # A run that names no versioned method keeps the identity it always had.
    plain = dataclasses.replace(spec, scoring="all")
    run(plain, tmp_path / "plain", show_progress=False)
    assert "scoring" not in json.loads((tmp_path / "plain" / "manifest.json").read_text())["identity"]
