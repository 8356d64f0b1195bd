"""``fathom index``: run folders into the index, incrementally, and the index out to Parquet.

A folder is read as fathom's own readers read it (``fathom.run.lines``: a damaged line is left out
and counted, a torn last line is a write in flight) and never written to. One whose manifest.json,
samples.jsonl and judgements.jsonl are unchanged since it was indexed is skipped; a changed one is
replaced in one transaction; one that is gone from a folder named again is dropped.

A folder's files are streamed: read, made into columns and inserted a chunk of records at a time, so
that the memory held is a chunk's, whatever the files' sizes; the chunks go into the one transaction
that replaces the run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fathom.errors import FathomError
from fathom.index.database import TABLES, reading, writing
from fathom.index.rows import (
    INSERT_RUN,
    UNFLAG_OUTDATED,
    Columns,
    Line,
    Tally,
    judgement_columns,
    path_key,
    run_row,
    sample_columns,
)
from fathom.manifest import Manifest
from fathom.report.runs import run_folders
from fathom.run.judgements import JUDGEMENTS, judgement_reader
from fathom.run.lines import Damage, Overlong, file_lines, read_line, sample_reader
from fathom.run.store import MANIFEST, SAMPLES, RunFolder
from fathom.safe_files import write_through

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

log = logging.getLogger(__name__)

INDEXED, UNCHANGED, DROPPED, UNREADABLE = "indexed", "unchanged", "dropped", "unreadable"
# A chunk ends at CHUNK_RECORDS records or CHUNK_BYTES of their lines, whichever comes first. An INSERT
# costs about 6 ms whatever its size (a 20 MB samples.jsonl of 1.3 KB lines: 4.1 s in chunks of 64 KiB,
# 2.6 s of 1 MiB, 2.1 s of 10,000 records), so a chunk of hundreds of records pays it once in many. The
# bytes bound the memory, long lines or short: a chunk holds about 4.5x its lines' bytes (its lines,
# records and columns; 4.7 MB at the peak), and a perplexity record's line is 1 MB by itself. The
# records bound the rows of short lines (judgements), each with its record and its cells.
CHUNK_RECORDS = 10_000
CHUNK_BYTES = 1 << 20

R = TypeVar("R")


@dataclass(frozen=True)
class Outcome:
    """What ``index_runs`` did with one run folder."""

    path: Path
    state: str  # INDEXED, UNCHANGED, DROPPED or UNREADABLE
    records: int = 0
    damaged: int = 0  # lines of samples.jsonl left out: no record of this run
    judgements: int = 0
    judgements_damaged: int = 0
    first_damage: str | None = None  # the first damaged line's file, number and reason
    problem: str | None = None  # why an unreadable folder could not be read


def index_runs(folders: Sequence[Path], index: Path) -> list[Outcome]:
    """Bring the run folders in ``folders`` (each a run folder, or a folder holding them, as
    ``fathom runs`` lists them) into ``index``, made if absent; what was done with each."""
    # Every named folder is looked into before the index is opened: a mistyped one writes nothing.
    named = [folder.resolve() for folder in folders]
    found = list(dict.fromkeys(path.resolve() for folder in folders for path in run_folders(folder)))
    with writing(index) as connection:
        # A chunk's columns typed from all their values: DuckDB's default looks at 1,000 rows spread
        # across them, and a list column whose rows looked at are all empty is typed NULL[], which
        # refuses the strings of the rest (a low-overlap run's literal_neighbours, 2 rows in 16).
        connection.execute(f"SET pandas_analyze_sample = {CHUNK_RECORDS}")
        rows = connection.execute("SELECT path, run_id, stamp FROM runs").fetchall()
        known = {key: (run_id, stamp) for key, run_id, stamp in rows}
        next_id = max((run_id for _, run_id, _ in rows), default=0) + 1
        outcomes = []
        for path in found:
            run_id, stamp = known.get(path_key(path), (None, None))
            if run_id is None:
                run_id, next_id = next_id, next_id + 1
            outcomes.append(_index(connection, path, run_id, stamp))
        # Gone: indexed from a folder named now (or named itself), no longer found in it.
        found_keys = {path_key(path) for path in found}
        for key, (run_id, _) in known.items():
            path = Path(key)
            if key not in found_keys and (path in named or path.parent in named):
                _drop(connection, run_id)
                outcomes.append(Outcome(path, DROPPED))
        return outcomes


def _index(connection: DuckDBPyConnection, path: Path, run_id: int, indexed: str | None) -> Outcome:
    try:
        # Stamped before it is read: a write after this shows in the next stamp, so nothing is missed.
        stamp = _stamp(path)
        if stamp == indexed:
            return Outcome(path, UNCHANGED)
        manifest = RunFolder(path).read_manifest()
        with _replacing(connection, run_id):
            samples, judgements = _insert_folder(connection, run_id, path, manifest)
            connection.execute(INSERT_RUN, run_row(run_id, path, manifest, samples, judgements, stamp))
    except (FathomError, OSError) as exc:
        problem = str(exc)
        log.warning("left out run folder '%s' (not indexed): %s", path, problem)
        if indexed is not None:  # the index says what the folders hold now: its old rows go
            _drop(connection, run_id)
        return Outcome(path, UNREADABLE, problem=problem)
    damage = [(SAMPLES, samples.first_damage), (JUDGEMENTS, judgements.first_damage)]
    first = next((f"{name} line {found.line}: {found.reason}" for name, found in damage if found), None)
    return Outcome(
        path, INDEXED, samples.records, samples.damaged, judgements.records, judgements.damaged, first
    )


def _stamp(path: Path) -> str:
    """What tells a changed folder from an unchanged one without reading it: each file's size, and its
    modification and change times (the change time cannot be set back, as ``touch -d`` or ``cp -p``
    set the modification time back)."""
    parts = []
    for name in (MANIFEST, SAMPLES, JUDGEMENTS):
        try:
            found = os.stat(path / name)
        except FileNotFoundError:
            parts.append(f"{name} -")
            continue
        parts.append(f"{name} {found.st_size} {found.st_mtime_ns} {found.st_ctime_ns}")
    return "; ".join(parts)


def _insert_folder(
    connection: DuckDBPyConnection, run_id: int, path: Path, manifest: Manifest
) -> tuple[Tally, Tally]:
    """A run folder's samples.jsonl and judgements.jsonl into their tables, a chunk at a time; what
    each held. Each line is stored as written (the index keeps it), and no more than a chunk's."""
    samples = Tally()
    for chunk in _chunks(path / SAMPLES, lambda: sample_reader(manifest), samples):
        _insert(connection, "samples", sample_columns(run_id, chunk))
    connection.execute(UNFLAG_OUTDATED, [run_id, run_id])
    judgements = Tally()
    read_judgement = judgement_reader(manifest.judges)
    for judged in _chunks(path / JUDGEMENTS, lambda: read_judgement, judgements):
        _insert(connection, "judgements", judgement_columns(run_id, judged))
    return samples, judgements


def _chunks(
    path: Path, make_reader: Callable[[], Callable[[dict[str, Any]], R]], tally: Tally
) -> Iterator[list[Line[R]]]:
    """The records of the JSONL file at ``path``, a chunk at a time, each chunk's read by a reader of
    its own (a sample reader holds the values it shares across records: one for the whole file would
    grow with it); its damaged lines counted in ``tally``, and its torn tail, a write in flight, left
    alone."""
    chunk: list[Line[R]] = []
    size, reader = 0, make_reader()
    for number, line in enumerate(file_lines(path), start=1):
        if isinstance(line, Overlong):
            tally.damage(line.damage(number))
            continue
        if not line.endswith(b"\n"):
            break
        read = read_line(number, line[:-1], str(path), reader)
        if isinstance(read, Damage):
            tally.damage(read)
            continue
        chunk.append(Line(number, line[:-1], read))
        size += len(line)
        if len(chunk) == CHUNK_RECORDS or size >= CHUNK_BYTES:
            tally.records += len(chunk)
            yield chunk
            chunk, size, reader = [], 0, make_reader()
    if chunk:
        tally.records += len(chunk)
        yield chunk


def _insert(connection: DuckDBPyConnection, table: str, batch: Columns) -> None:
    """One chunk's columns into ``table``, taken whole. DuckDB finds ``batch`` by its name among this
    frame's variables (a replacement scan) and lets it go when the statement ends; a registered one,
    and with it every string of its chunk, would be held until the commit: the whole folder."""
    connection.execute(f"INSERT INTO {table} BY NAME SELECT * FROM batch")


@contextmanager
def _replacing(connection: DuckDBPyConnection, run_id: int) -> Iterator[None]:
    """One run's rows deleted, and those the block inserts in their place, in one transaction: a reader
    sees the run as it was or as it is, never half of it; a failure in the block leaves it as it was."""
    connection.begin()
    try:
        for table in TABLES:
            connection.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        yield
    except BaseException:
        connection.rollback()
        raise
    connection.commit()  # a commit that fails has rolled back: its error is the one to see


def _drop(connection: DuckDBPyConnection, run_id: int) -> None:
    """One run's rows deleted, in one transaction."""
    with _replacing(connection, run_id):
        pass


def write_parquet(index: Path, folder: Path) -> list[Path]:
    """The index's tables as Parquet files in ``folder`` (runs.parquet, samples.parquet,
    judgements.parquet), for pandas and polars; each written whole, then moved into place (over a
    link there, never through it)."""
    with reading(index) as connection:
        folder.mkdir(parents=True, exist_ok=True)
        return [write_through(folder / f"{table}.parquet", _copy(connection, table)) for table in TABLES]


def _copy(connection: DuckDBPyConnection, table: str) -> Callable[[Path], None]:
    """DuckDB's COPY of ``table`` to a Parquet file at the path it is given."""

    def copy(path: Path) -> None:
        quoted = str(path).replace("'", "''")
        connection.execute(f"COPY {table} TO '{quoted}' (FORMAT parquet)")

    return copy
