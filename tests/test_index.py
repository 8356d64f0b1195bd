"""fathom index: run folders in a DuckDB file, queried with SQL, kept up to date incrementally, read
back as fathom's objects, exported to Parquet; a file that is no index of this fathom refused."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from fathom.cli import main
from fathom.index import INDEX_SCHEMA, index_runs, read_runs
from fathom.judgement import JudgementRecord
from fathom.run.judgements import JUDGEMENTS
from fathom.run.store import RunFolder

duckdb = pytest.importorskip("duckdb", reason="needs the index extra: pip install -e '.[index]'")

GRID = ["--tokenizer", "char", "--lengths", "1k,2k", "--depths", "2", "--samples", "2", "--no-progress"]
# Two checkpoints: one finds every needle, the other none past 1k; the second judged by an LLM judge.
RUNS = {
    "step-100": ["--model", "sim:perfect", "--label", "step=100"],
    "step-200": ["--model", "sim:cliff?window=1k", "--label", "step=200", "--judge", "sim-judge:reference"],
}


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("made")
    for name, options in RUNS.items():
        assert cli("run", "niah", *options, *GRID, "--run-dir", folder / name) == 0
    return folder


@pytest.fixture
def runs(made: Path, tmp_path: Path) -> Path:
    """Copies of the made runs that a test may change."""
    return shutil.copytree(made, tmp_path / "runs")


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and modification time."""
    return {
        str(path.relative_to(folder)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def query(index: Path, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(index), read_only=True) as connection:
        rows: list[tuple[Any, ...]] = connection.execute(sql, list(parameters)).fetchall()
    return rows


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- what the index holds ---------------------------------------------------------------------------


def test_the_index_holds_each_run_with_its_records_and_judgements(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "results.duckdb"
    before = snapshot(runs)
    assert cli("index", runs, "--out", index) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"indexed  {runs / 'step-100'}: 16 records, 0 judgements"
    assert out[1] == f"indexed  {runs / 'step-200'}: 16 records, 8 judgements"  # the graded samples
    assert out[2] == f"{index}: 2 indexed, 0 unchanged; 0 damaged lines left out"
    assert snapshot(runs) == before  # read, never written

    rows = query(index, "SELECT name, path, task, model, tokenizer, lengths, depths, samples, seed, "
                        "labels, records, damaged, judgements FROM runs ORDER BY name")  # fmt: skip
    assert rows == [
        ("step-100", str(runs / "step-100"), "niah", "sim:perfect", "char", [1024, 2048], [0.0, 1.0], 2, 0,
         {"step": "100"}, 16, 0, 0),
        ("step-200", str(runs / "step-200"), "niah", "sim:cliff?window=1k", "char", [1024, 2048], [0.0, 1.0],
         2, 0, {"step": "200"}, 16, 0, 8),
    ]  # fmt: skip
    manifest = json.loads(query(index, "SELECT manifest FROM runs WHERE name = 'step-200'")[0][0])
    assert manifest == json.loads((runs / "step-200" / "manifest.json").read_text())

    written = lines_of(runs / "step-200" / "samples.jsonl")
    held = query(index, "SELECT line, sample_id, length, depth, control, score, output, answers, json FROM "
                        "samples JOIN runs USING (run_id) WHERE name = 'step-200' ORDER BY line")  # fmt: skip
    assert [row[0] for row in held] == list(range(1, 17))
    fields = ("sample_id", "length", "depth", "control", "score", "output", "answers")
    assert [row[1:8] for row in held] == [tuple(r.get(name, False) for name in fields) for r in written]
    assert [json.loads(row[8]) for row in held] == written

    judged = lines_of(runs / "step-200" / JUDGEMENTS)
    rows = query(index, "SELECT sample_id, judge, rubric, score FROM judgements ORDER BY line")
    assert rows == [(j["sample_id"], j["judge"], j["rubric"], j["score"]) for j in judged]


def test_sql_gives_each_checkpoints_score_by_length_and_the_samples_one_newly_failed(
    runs: Path, tmp_path: Path
) -> None:
    index = tmp_path / "results.duckdb"
    index_runs([runs], index)
    # docs/run-index.md's queries, as a user types them.
    by_length = query(index, """
        SELECT r.labels['step'] AS step, s.length, avg(s.score) AS score
        FROM latest_samples s JOIN runs r USING (run_id)
        WHERE NOT s.control GROUP BY ALL ORDER BY step, s.length""")  # fmt: skip
    expected = []
    for step in ("100", "200"):
        graded = [r for r in lines_of(runs / f"step-{step}" / "samples.jsonl") if not r.get("control")]
        for length in (1024, 2048):
            scores = [r["score"] for r in graded if r["length"] == length]
            expected.append((step, length, pytest.approx(sum(scores) / len(scores))))
    assert by_length == expected and by_length[-1][2] == 0.0  # the cliff's 2k
    newly_failed = query(index, """
        SELECT new.sample_id
        FROM latest_samples new JOIN runs n ON n.run_id = new.run_id
        JOIN latest_samples old ON old.sample_id = new.sample_id
        JOIN runs o ON o.run_id = old.run_id
        WHERE n.labels['step'] = ? AND o.labels['step'] = ? AND NOT new.control
          AND old.score >= 0.5 AND new.score < 0.5
        ORDER BY new.sample_id""", "200", "100")  # fmt: skip
    # Step 100 found every needle, so step 200 newly failed each graded sample it failed.
    samples = lines_of(runs / "step-200" / "samples.jsonl")
    failed = sorted(r["sample_id"] for r in samples if not r.get("control") and r["score"] < 0.5)
    assert [row[0] for row in newly_failed] == failed and len(failed) >= 4  # 2k's four at least


def test_every_record_is_kept_and_the_latest_of_each_sample_flagged(runs: Path, tmp_path: Path) -> None:
    path = runs / "step-100" / "samples.jsonl"
    first = lines_of(path)[0]
    retried = first | {"score": 0.0, "output": "a second attempt"}
    with path.open("a") as handle:
        handle.write(json.dumps(retried) + "\n")  # a newer record of the first sample
    index = tmp_path / "results.duckdb"
    index_runs([runs / "step-100"], index)
    rows = query(index, "SELECT line, latest, output FROM samples WHERE sample_id = ? ORDER BY line",
                 first["sample_id"])  # fmt: skip
    assert rows == [(1, False, first["output"]), (17, True, "a second attempt")]
    assert query(index, "SELECT count(*) FROM latest_samples") == [(16,)]


# --- reading it back --------------------------------------------------------------------------------


def test_read_runs_gives_back_what_the_folders_give(runs: Path, tmp_path: Path) -> None:
    index = tmp_path / "results.duckdb"
    index_runs([runs], index)
    got = read_runs(index)
    assert [run.path for run in got] == [runs / "step-100", runs / "step-200"]
    for run in got:
        folder = RunFolder(run.path)
        assert run.manifest == folder.read_manifest()
        assert run.records == folder.records() and run.latest() == folder.latest()
        assert run.damaged == 0
    (one,) = read_runs(index, [runs / "step-200"])
    assert one.path == runs / "step-200" and one.manifest.labels == {"step": "200"}
    assert [run.path.name for run in read_runs(index, [runs / "step-200", runs])] == ["step-200", "step-100"]
    shutil.rmtree(runs)  # the index needs no folder to read back
    assert [run.records for run in read_runs(index)] == [run.records for run in got]


def test_runs_lists_from_the_index_as_from_the_folders(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "results.duckdb"
    index_runs([runs], index)
    capsys.readouterr()
    monkeypatch.chdir(runs.parent)
    assert cli("runs") == 0  # runs/, by default
    listed = capsys.readouterr().out
    assert "step=200" in listed and len(listed.splitlines()) == 2
    assert cli("runs", "--index", index) == 0
    assert capsys.readouterr().out == listed
    assert cli("runs", runs / "step-100", "--index", index) == 0
    assert capsys.readouterr().out.split() == listed.splitlines()[0].split()  # but for the padding
    assert cli("runs", tmp_path, "--index", index) == 2
    err = capsys.readouterr().err
    assert err == (f"fathom: error: index '{index}' holds no run folder '{tmp_path}', nor any inside it: "
                   f"index it first (fathom index {tmp_path} --out {index})\n")  # fmt: skip


# --- incremental ------------------------------------------------------------------------------------


def test_unchanged_folders_are_skipped_and_a_resumed_one_indexed_again(
    made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(made / "step-100", runs / "step-100")
    partial = runs / "partial"
    shutil.copytree(made / "step-100", partial)
    samples = partial / "samples.jsonl"
    samples.write_text("".join(samples.read_text().splitlines(keepends=True)[:5]))  # a run cut short
    index = tmp_path / "results.duckdb"
    assert cli("index", runs, "--out", index) == 0
    assert query(index, "SELECT name, records FROM runs ORDER BY name") == [("partial", 5), ("step-100", 16)]
    capsys.readouterr()

    assert cli("index", runs, "--out", index) == 0
    assert capsys.readouterr().out == f"{index}: 0 indexed, 2 unchanged; 0 damaged lines left out\n"

    command = ["run", "niah", *RUNS["step-100"], *GRID, "--run-dir", partial]
    assert cli(*command) == 0  # resumed: the 11 samples it lacked
    capsys.readouterr()
    assert cli("index", runs, "--out", index) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"indexed  {partial}: 16 records, 0 judgements",
        f"{index}: 1 indexed, 1 unchanged; 0 damaged lines left out",
    ]
    assert query(index, "SELECT name, records FROM runs ORDER BY name") == [("partial", 16), ("step-100", 16)]
    (run,) = read_runs(index, [partial])
    assert run.records == RunFolder(partial).records()
    assert query(index, "SELECT count(*) FROM samples") == [(32,)]  # the old rows replaced, not added to


def test_a_folder_gone_from_a_named_folder_is_dropped_and_others_kept(
    made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(made / "step-100", first / "a")
    shutil.copytree(made / "step-100", first / "b")
    shutil.copytree(made / "step-200", second / "c")
    index = tmp_path / "results.duckdb"
    index_runs([first, second], index)
    shutil.rmtree(first / "b")
    shutil.rmtree(second / "c")
    capsys.readouterr()
    assert cli("index", first, "--out", index) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"dropped  {first / 'b'} (no longer a run folder there)",
        f"{index}: 0 indexed, 1 unchanged, 1 dropped; 0 damaged lines left out",
    ]
    # c's folder was not named this time: the index keeps what it held.
    assert query(index, "SELECT name FROM runs ORDER BY name") == [("a",), ("c",)]
    assert query(index, "SELECT count(DISTINCT run_id) FROM samples") == [(2,)]


def test_a_changed_manifest_is_seen_though_its_size_and_time_are_set_back(runs: Path, tmp_path: Path) -> None:
    index = tmp_path / "results.duckdb"
    index_runs([runs / "step-100"], index)
    path = runs / "step-100" / "manifest.json"
    text, stat = path.read_text(), path.stat()
    path.write_text(text.replace('"step": "100"', '"step": "101"'))  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as touch -d or cp -p would
    assert [o.state for o in index_runs([runs / "step-100"], index)] == ["indexed"]
    assert query(index, "SELECT labels['step'] FROM runs") == [("101",)]


# --- damage, never repaired here --------------------------------------------------------------------


def test_a_damaged_line_is_left_out_and_counted_and_the_folder_left_as_it_was(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = runs / "step-200"
    with (folder / "samples.jsonl").open("ab") as handle:
        handle.write(b"\xff\xfe\n{not json\n")
        handle.write(b'{"partial": ')  # a torn last line: a write in flight, no damage
    with (folder / JUDGEMENTS).open("ab") as handle:
        handle.write(b"[1, 2]\n")
    before = snapshot(runs)
    index = tmp_path / "results.duckdb"
    assert cli("index", folder, "--out", index) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"indexed  {folder}: 16 records, 8 judgements; 3 damaged lines left out (samples.jsonl line 17: "
        f"not UTF-8 text): 'fathom repair {folder}' moves those of samples.jsonl aside, 'fathom judge' those "
        "of judgements.jsonl"
    )
    assert out[1] == f"{index}: 1 indexed, 0 unchanged; 3 damaged lines left out"
    assert snapshot(runs) == before  # nothing moved aside, nothing rewritten
    counts = query(index, "SELECT records, damaged, judgements, judgements_damaged FROM runs")
    assert counts == [(16, 2, 8, 1)]
    assert query(index, "SELECT max(line) FROM samples") == [(16,)]
    (run,) = read_runs(index)
    assert run.damaged == 2 and len(run.records) == 16


def test_a_damaged_line_between_records_keeps_the_records_line_numbers(runs: Path, tmp_path: Path) -> None:
    path = runs / "step-100" / "samples.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:3], b"not a record\n", *lines[3:]]))
    index = tmp_path / "results.duckdb"
    index_runs([runs / "step-100"], index)
    numbers = [line for (line,) in query(index, "SELECT line FROM samples ORDER BY line")]
    assert numbers == [1, 2, 3, *range(5, 18)]


def test_an_unreadable_folder_is_left_out_with_a_warning_and_its_old_rows_dropped(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "results.duckdb"
    index_runs([runs], index)
    (runs / "step-200" / "manifest.json").write_text("{")
    capsys.readouterr()
    assert cli("index", runs, "--out", index) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{index}: 0 indexed, 1 unchanged, 1 unreadable; 0 damaged lines left out\n"
    assert captured.err.startswith(
        f"fathom: warning: left out run folder '{runs / 'step-200'}' (not indexed): "
    )
    assert "manifest.json is damaged" in captured.err
    assert query(index, "SELECT name FROM runs") == [("step-100",)]
    assert query(index, "SELECT count(*) FROM judgements") == [(0,)]


# --- Parquet ----------------------------------------------------------------------------------------


def test_parquet_files_hold_the_tables(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index, parquet = tmp_path / "results.duckdb", tmp_path / "parquet"
    assert cli("index", runs, "--out", index, "--parquet", parquet) == 0
    files = [parquet / f"{table}.parquet" for table in ("runs", "samples", "judgements")]
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {', '.join(map(str, files))}"
    assert sorted(p.name for p in parquet.iterdir()) == sorted(p.name for p in files)
    with duckdb.connect() as connection:
        for path in files:
            table = path.stem
            from_file = connection.execute(f"SELECT * FROM '{path}' ORDER BY ALL").fetchall()
            connection.execute(f"ATTACH '{index}' AS idx (READ_ONLY)")
            assert from_file == connection.execute(f"SELECT * FROM idx.{table} ORDER BY ALL").fetchall()
            connection.execute("DETACH idx")
        assert connection.execute(f"SELECT count(*) FROM '{files[1]}'").fetchall() == [(32,)]


# --- refusals ---------------------------------------------------------------------------------------


def refused(capsys: pytest.CaptureFixture[str], index: Path, runs: Path, *more: str) -> str:
    """The one line ``fathom index`` refuses with (exit 2), the index file and folders untouched."""
    files = snapshot(index.parent)
    capsys.readouterr()
    assert cli("index", runs, "--out", index, *more) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("fathom: error: ")
    assert snapshot(index.parent) == files  # no WAL, no change
    return captured.err


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    for content in (b"", b"run,score\n1,0.5\n" * 400):
        index = tmp_path / "out" / "results.duckdb"
        index.write_bytes(content)
        err = refused(capsys, index, runs)
        assert err.startswith(f"fathom: error: '{index}' is no index this fathom can use (")
        assert "name a new file, or delete this one and index the run folders again" in err


def test_another_duckdb_database_is_refused_and_left_alone(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    index = tmp_path / "out" / "theirs.duckdb"
    with duckdb.connect(str(index)) as connection:
        connection.execute("CREATE TABLE runs (id INTEGER)")
    err = refused(capsys, index, runs)
    assert err == (f"fathom: error: '{index}' is a DuckDB database but not a fathom index (it has no "
                   "index_meta table): give --out a new file\n")  # fmt: skip


def test_an_index_of_a_newer_or_older_schema_is_refused_and_left_alone(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    index = tmp_path / "out" / "results.duckdb"
    index_runs([runs / "step-100"], index)
    for schema, says in ((INDEX_SCHEMA + 1, "written by a newer fathom"), (0, "written by an older fathom")):
        with duckdb.connect(str(index)) as connection:
            connection.execute("UPDATE index_meta SET value = ? WHERE key = 'schema'", [str(schema)])
            connection.execute("UPDATE index_meta SET value = '9.9' WHERE key = 'fathom_version'")
        err = refused(capsys, index, runs)
        assert f"index '{index}' was {says} (9.9, index schema {schema}; this fathom " in err
        assert cli("runs", "--index", index) == 2
        assert says in capsys.readouterr().err


def test_a_damaged_index_is_refused_and_left_alone(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    index = tmp_path / "out" / "results.duckdb"
    index_runs([runs], index)
    with index.open("r+b") as handle:
        handle.seek(4096)  # the database's first block header: its checksum no longer matches
        handle.write(b"\x13" * 4096)
    err = refused(capsys, index, runs)
    assert err.startswith(f"fathom: error: '{index}' is no index this fathom can use (")


def test_a_missing_folder_or_index_writes_nothing(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "results.duckdb"
    assert cli("index", runs, tmp_path / "nowhere", "--out", index) == 2
    assert f"'{tmp_path / 'nowhere'}' does not exist" in capsys.readouterr().err
    assert cli("runs", "--index", index) == 2
    assert capsys.readouterr().err == (f"fathom: error: index '{index}' does not exist: make it with "
                                       f"fathom index RUNS --out {index}\n")  # fmt: skip
    assert not index.exists()


def test_without_duckdb_the_extra_is_named(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # import duckdb now fails, as when not installed
    index = tmp_path / "results.duckdb"
    assert cli("index", runs, "--out", index) == 2
    err = capsys.readouterr().err
    assert err.startswith("fathom: error: duckdb (for fathom index) is not installed; install it with: pip ")
    assert err.rstrip().endswith("[index]'")
    assert not index.exists()


def test_judgements_read_back_as_records(runs: Path, tmp_path: Path) -> None:
    index = tmp_path / "results.duckdb"
    index_runs([runs], index)
    stored = [JudgementRecord.from_json(json.loads(line)) for (line,) in
              query(index, "SELECT json FROM judgements ORDER BY line")]  # fmt: skip
    assert stored == [JudgementRecord.from_json(r) for r in lines_of(runs / "step-200" / JUDGEMENTS)]


def test_a_perplexity_run_is_indexed_with_the_columns_it_has(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "ppl"
    grid = ["--tokenizer", "char", "--lengths", "1k", "--samples", "2", "--no-progress"]
    assert cli("run", "perplexity", "--model", "sim:perfect", *grid, "--run-dir", folder) == 0
    index = tmp_path / "results.duckdb"
    index_runs([folder], index)
    rows = query(index, "SELECT kind, length, depth, control, score, output FROM samples ORDER BY line")
    assert rows == [("perplexity", 1024, None, False, None, None)] * 2
    (run,) = read_runs(index)
    assert run.records == RunFolder(folder).records()


def test_a_low_overlap_runs_probes_shortcut_neighbours_and_forms_are_columns(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "latent"
    forms = ["--relations", "all", "--needle-orders", "all"]
    assert (
        cli(
            "run",
            "niah",
            "--model",
            "sim:perfect?knows=0.5",
            "--needle",
            "latent-1",
            *forms,
            *GRID,
            "--run-dir",
            run,
        )
        == 0
    )
    index = tmp_path / "results.duckdb"
    assert cli("index", tmp_path / "runs", "--out", index) == 0
    rows = query(
        index,
        "SELECT probe, latent_items, odd_name_score, literal_neighbours, needle_forms, json FROM samples",
    )
    for probe, items, odd, neighbours, forms_of, line in rows:
        record = json.loads(line)  # each column is the record's own field
        assert probe == record.get("probe") and odd == record.get("odd_name_score")
        assert items == record.get("latent_items", []) and forms_of == record.get("needle_forms", [])
        assert neighbours == record.get("literal_neighbours", [])
    assert any(probe for probe, *_ in rows)  # the closed-book probes
    assert any(odd is not None for _, _, odd, *_ in rows) and any(forms_of for *_, forms_of, _ in rows)
