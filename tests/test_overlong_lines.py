"""A line longer than any record (lines.MAX_LINE_BYTES) is damage: readers name it without holding
it, the writer moves it aside whole (a piece at a time), and the index counts it. The bound is made
small here so that a test file need not be hundreds of megabytes."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from test_store import manifest, record, started

from fathom.errors import RunFolderError
from fathom.run import lines
from fathom.run.store import QUARANTINE, RunFolder

MOST = 4096


@pytest.fixture(autouse=True)
def small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", MOST)
    monkeypatch.setattr(lines, "_PIECE", 1000)  # pieces smaller than the bound, as they are for real


def with_line(tmp_path: Path, line: bytes) -> RunFolder:
    """A folder of records 0 and 1 with ``line`` between them."""
    folder = started(tmp_path / "run", count=1)
    with folder.samples_path.open("ab") as handle:
        handle.write(line)
    folder.start(manifest())
    return folder


@pytest.mark.parametrize("size", [MOST + 1, 3 * MOST + 17])
def test_a_line_longer_than_any_record_is_damage_named_with_its_size(tmp_path: Path, size: int) -> None:
    folder = started(tmp_path / "run", count=1)
    with folder.samples_path.open("ab") as handle:
        handle.write(b"x" * size + b"\n")
    why = rf"line 2 is not a record of this run: a line of {size:,} bytes, longer than any record \({MOST:,}"
    with pytest.raises(RunFolderError, match=why):
        folder.records()


def test_a_line_of_exactly_the_bound_is_read_as_a_line(tmp_path: Path) -> None:
    folder = started(tmp_path / "run", count=1)
    with folder.samples_path.open("ab") as handle:
        handle.write(b"x" * MOST + b"\n")
    with pytest.raises(RunFolderError, match="line 2 is not a record of this run: not JSON"):
        folder.records()


@pytest.mark.parametrize("ending", [b"\n", b""])
def test_the_writer_moves_an_overlong_line_aside_whole(tmp_path: Path, ending: bytes) -> None:
    line = bytes(range(32, 127)) * 200 + ending  # 19,000 bytes: several pieces
    folder = with_line(tmp_path, line)
    with folder:
        folder.append(record(1))
    assert [r.sample for r in folder.records()] == [0, 1]
    assert (folder.path / QUARANTINE).read_bytes() == line.rstrip(b"\n") + b"\n"


def test_reading_past_an_overlong_line_never_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    with path.open("wb") as handle:
        for _ in range(400):  # 40 MB, one line with no newline
            handle.write(b"7" * 100_000)
    tracemalloc.start()
    try:
        parsed = lines.read_file(path, dict)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert parsed.records == [] and parsed.torn == b""
    [damage] = parsed.damaged
    assert damage.reason == f"a line of 40,000,000 bytes, longer than any record ({MOST:,})"
    assert peak < 1_000_000


def test_the_index_counts_an_overlong_line_as_damage_and_keeps_the_records(tmp_path: Path) -> None:
    pytest.importorskip("duckdb", reason="needs the index extra: pip install -e '.[index]'")
    from fathom.index import index_runs

    folder = started(tmp_path / "run", count=1)
    with folder.samples_path.open("ab") as handle:
        handle.write(b"{" * (2 * MOST) + b"\n")
    [outcome] = index_runs([folder.path], tmp_path / "results.duckdb")
    assert (outcome.records, outcome.damaged) == (1, 1)
    assert outcome.first_damage is not None and f"a line of {2 * MOST:,} bytes" in outcome.first_damage
