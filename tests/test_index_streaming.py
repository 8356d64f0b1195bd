"""fathom index streams a run folder (issue #30): its files are read, made into columns and inserted a
chunk of records at a time, inside the one transaction that replaces the run. The rows are those a
whole-folder read made (line numbers, each line as written, the latest of each sample), wherever the
chunks end; the memory is a chunk's, not the folder's; a failure mid-folder leaves the run as it was."""

from __future__ import annotations

import gc
import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from test_streaming_readers import big_run

from fathom.cli import main
from fathom.index import build, index_runs
from fathom.index.build import INDEXED
from fathom.records import Cell
from fathom.run.judgements import JUDGEMENTS

duckdb = pytest.importorskip("duckdb", reason="needs the index extra: pip install -e '.[index]'")

FIXTURE = Path(__file__).parent / "fixtures" / "records-v12"
TABLES = {"runs": "run_id", "samples": "run_id, line", "judgements": "run_id, line"}


def table(index: Path, name: str) -> list[tuple[Any, ...]]:
    """Every row of the index's table ``name``, in a fixed order."""
    with duckdb.connect(str(index), read_only=True) as connection:
        rows: list[tuple[Any, ...]] = connection.execute(
            f"SELECT * FROM {name} ORDER BY {TABLES[name]}"
        ).fetchall()
    return rows


def tables(index: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {name: table(index, name) for name in TABLES}


def retried(line: bytes, output: str) -> bytes:
    """A newer record of ``line``'s sample: a resume's second attempt."""
    return json.dumps(json.loads(line) | {"output": output}).encode() + b"\n"


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """records-v12's run (19 records) with damage between them, two retried samples and a torn tail:
    in chunks of 3 records, the first damage falls just after a chunk's end, the second in a chunk's
    middle, a retry of a sample in another chunk, and the torn tail just after the last chunk's end."""
    folder = shutil.copytree(FIXTURE, tmp_path / "damaged")
    lines = (FIXTURE / "samples.jsonl").read_bytes().splitlines(keepends=True)
    (folder / "samples.jsonl").write_bytes(b"".join([
        *lines[:3], b"\xff\xfe\n", *lines[3:5], b"{not json\n", *lines[5:],
        retried(lines[0], "a second attempt"), retried(lines[4], "another"), b'{"partial": ',
    ]))  # fmt: skip
    return folder


# The rows a whole-folder read gave ``damaged`` (line, latest): every record at its line, damaged
# lines 4 and 7 and the torn tail left out, lines 1 and 6 outdated by their retries at 22 and 23.
EXPECTED = [(1, False), (2, True), (3, True), (5, True), (6, False), *((n, True) for n in range(8, 24))]


@pytest.mark.parametrize("chunk", [1, 3, 4, build.CHUNK_RECORDS])
def test_rows_are_a_whole_reads_wherever_the_chunks_end(
    damaged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(build, "CHUNK_RECORDS", chunk)
    index = tmp_path / "index.duckdb"
    (outcome,) = index_runs([damaged], index)
    assert (outcome.state, outcome.records, outcome.damaged) == (INDEXED, 21, 2)
    assert outcome.first_damage == "samples.jsonl line 4: not UTF-8 text"
    lines = (damaged / "samples.jsonl").read_bytes().split(b"\n")
    rows = table(index, "samples")
    assert [(row[1], row[2]) for row in rows] == EXPECTED
    # Each row's json is its line as written, byte for byte.
    assert [row[-1].encode() for row in rows] == [lines[number - 1] for number, _ in EXPECTED]
    assert [run[15:19] for run in table(index, "runs")] == [(21, 2, 0, 0)]  # records, damaged, judgements


def test_a_chunks_rows_are_those_of_a_single_chunk_for_every_fixture_and_judgements(
    damaged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    for fixture in [*sorted(FIXTURE.parent.glob("records-v*")), FIXTURE.parent / "run-before-move"]:
        shutil.copytree(fixture, runs / fixture.name)
    shutil.copytree(damaged, runs / "damaged")
    judged = runs / "judged"
    grid = ["--tokenizer", "char", "--lengths", "1k", "--depths", "2", "--samples", "2", "--no-progress"]
    assert main(["run", "niah", "--model", "sim:cliff?window=1k", "--judge", "sim-judge:reference", *grid,
                 "--run-dir", str(judged)]) == 0  # fmt: skip
    verdicts = (judged / JUDGEMENTS).read_bytes().splitlines(keepends=True)
    (judged / JUDGEMENTS).write_bytes(b"".join([*verdicts[:2], b"[1, 2]\n", *verdicts[2:], b"{"]))
    whole = tables(_indexed(runs, tmp_path / "whole.duckdb"))
    monkeypatch.setattr(build, "CHUNK_RECORDS", 2)
    chunked = tables(_indexed(runs, tmp_path / "chunked.duckdb"))
    assert len(whole["runs"]) == 16 and len(whole["judgements"]) == len(verdicts) >= 4
    assert [row[1] for row in whole["judgements"]] == [1, 2, *range(4, len(verdicts) + 2)]
    assert chunked == whole


def _indexed(runs: Path, index: Path) -> Path:
    index_runs([runs], index)
    return index


def test_a_failure_mid_folder_leaves_the_run_as_it_was(
    damaged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "index.duckdb"
    index_runs([damaged], index)
    before = tables(index)
    with (damaged / "samples.jsonl").open("ab") as handle:
        handle.write(b"}\n")  # the torn tail completed (as damage): the folder changed
    monkeypatch.setattr(build, "CHUNK_RECORDS", 3)
    inserted = []
    insert = build._insert

    def failing(connection: Any, name: str, columns: Any) -> None:
        inserted.append(name)
        if len(inserted) == 2:
            raise RuntimeError("the disk filled up")
        insert(connection, name, columns)

    monkeypatch.setattr(build, "_insert", failing)
    with pytest.raises(RuntimeError, match="the disk filled up"):
        index_runs([damaged], index)
    assert inserted == ["samples", "samples"]  # the first chunk went in, and was rolled back
    assert tables(index) == before
    # A run new to the index: no row of it at all.
    inserted.clear()
    with pytest.raises(RuntimeError, match="the disk filled up"):
        index_runs([damaged], tmp_path / "new.duckdb")
    assert {name: len(rows) for name, rows in tables(tmp_path / "new.duckdb").items()} == dict.fromkeys(
        TABLES, 0
    )


def test_indexing_holds_a_chunk_and_not_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    size = big_run(folder)
    index = tmp_path / "index.duckdb"
    index_runs([FIXTURE], index)  # DuckDB's and the index's own first costs, paid outside the count
    gc.collect()
    tracemalloc.start()
    try:
        (outcome,) = index_runs([folder], index)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.records > 15_000
    # A chunk's lines (CHUNK_BYTES), their records and columns: a few times CHUNK_BYTES, where a
    # whole-folder read held every line and record (over 3x the file).
    assert peak < 8 * build.CHUNK_BYTES < size / 2, (peak, size)


def test_a_list_column_empty_in_most_rows_of_a_full_chunk_is_typed_by_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A chunk of CHUNK_RECORDS records (no bytes bound) whose literal_neighbours are empty but on odd
    # rows: DuckDB's default sample of 1,000 rows saw only empty lists and refused the rest's strings.
    monkeypatch.setattr(build, "CHUNK_BYTES", 1 << 40)
    folder = shutil.copytree(FIXTURE, tmp_path / "run")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["identity"]["spec"]["samples"] = build.CHUNK_RECORDS
    (folder / "manifest.json").write_text(json.dumps(manifest))
    control = json.loads((FIXTURE / "samples.jsonl").read_text().splitlines()[5])
    del control["run_identity"]  # the spec changed: a record without one is the run's own
    with (folder / "samples.jsonl").open("w") as out:
        for index in range(build.CHUNK_RECORDS):
            at = Cell("niah", control["length"], control["depth"], index, True)
            neighbours = ["Galata"] if index % 16 == 13 else []
            out.write(json.dumps(control | {"sample": index, "sample_id": at.id,
                                            "literal_neighbours": neighbours}) + "\n")  # fmt: skip
    index = tmp_path / "index.duckdb"
    (outcome,) = index_runs([folder], index)
    assert (outcome.state, outcome.records) == (INDEXED, build.CHUNK_RECORDS)
    with duckdb.connect(str(index), read_only=True) as connection:
        found = connection.execute("SELECT line FROM samples WHERE len(literal_neighbours) = 1").fetchall()
    assert [line for (line,) in found] == list(range(14, build.CHUNK_RECORDS + 1, 16))
