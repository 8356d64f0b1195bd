"""``fathom index``: run folders into the index, incrementally, and the index out to Parquet.

A folder is read as fathom's own readers read it (``fathom.run.lines``: a damaged line is left out
and counted, a torn last line is a write in flight) and never written to. One whose manifest.json,
samples.jsonl and judgements.jsonl are unchanged since it was indexed is skipped; a changed one is
replaced in one transaction; one that is gone from a folder named again is dropped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.errors import FathomError
from fathom.index.database import TABLES, reading, writing
from fathom.index.rows import INSERT_RUN, Columns, judgement_columns, path_key, run_row, sample_columns
from fathom.judgement import JudgementRecord
from fathom.manifest import Manifest
from fathom.records import AnyRecord
from fathom.report.runs import run_folders
from fathom.run.judgements import JUDGEMENTS, judgement_reader
from fathom.run.lines import Parsed, read_file, read_samples
from fathom.run.store import MANIFEST, SAMPLES, RunFolder
from fathom.safe_files import write_through

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

log = logging.getLogger(__name__)

INDEXED, UNCHANGED, DROPPED, UNREADABLE = "indexed", "unchanged", "dropped", "unreadable"


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


@dataclass(frozen=True)
class _Folder:
    """A run folder as read: everything its rows are made of."""

    manifest: Manifest
    samples: Parsed[AnyRecord]
    judgements: Parsed[JudgementRecord]


def index_runs(folders: Sequence[Path], index: Path) -> list[Outcome]:
    """Bring the run folders in ``folders`` (each a run folder, or a folder holding them, as
    ``fathom runs`` lists them) into ``index``, made if absent; what was done with each."""
    # Every named folder is looked into before the index is opened: a mistyped one writes nothing.
    named = [folder.resolve() for folder in folders]
    found = list(dict.fromkeys(path.resolve() for folder in folders for path in run_folders(folder)))
    with writing(index) as connection:
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
                _replace(connection, run_id, None)
                outcomes.append(Outcome(path, DROPPED))
        return outcomes


def _index(connection: DuckDBPyConnection, path: Path, run_id: int, indexed: str | None) -> Outcome:
    try:
        # Stamped before it is read: a write after this shows in the next stamp, so nothing is missed.
        stamp = _stamp(path)
        if stamp == indexed:
            return Outcome(path, UNCHANGED)
        folder = _read(path)
    except (FathomError, OSError) as exc:
        problem = str(exc)
        log.warning("left out run folder '%s' (not indexed): %s", path, problem)
        if indexed is not None:  # the index says what the folders hold now: its old rows go
            _replace(connection, run_id, None)
        return Outcome(path, UNREADABLE, problem=problem)
    row = run_row(run_id, path, folder.manifest, folder.samples, folder.judgements, stamp)
    tables = {"samples": sample_columns(run_id, folder.samples)}
    tables["judgements"] = judgement_columns(run_id, folder.judgements)
    _replace(connection, run_id, (row, tables))
    samples, judgements = folder.samples, folder.judgements
    damage = [(SAMPLES, d) for d in samples.damaged] + [(JUDGEMENTS, d) for d in judgements.damaged]
    first = f"{damage[0][0]} line {damage[0][1].line}: {damage[0][1].reason}" if damage else None
    return Outcome(
        path, INDEXED, len(samples.records), len(samples.damaged), len(judgements.records),
        len(judgements.damaged), first,
    )  # fmt: skip


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


def _read(path: Path) -> _Folder:
    folder = RunFolder(path)
    manifest = folder.read_manifest()
    # The lines kept: the index stores each record's line as written.
    samples = read_samples(folder.samples_path, manifest, keep_lines=True)
    judgements = read_file(path / JUDGEMENTS, judgement_reader(manifest.judges), keep_lines=True)
    return _Folder(manifest, samples, judgements)


def _replace(
    connection: DuckDBPyConnection, run_id: int, rows: tuple[list[Any], dict[str, Columns]] | None
) -> None:
    """One run's rows replaced by ``rows`` (its runs row and its other tables' columns), or dropped
    (None), in one transaction: a reader sees the run as it was or as it is, never half of it."""
    connection.begin()
    try:
        for table in TABLES:
            connection.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        if rows is not None:
            row, tables = rows
            connection.execute(INSERT_RUN, row)
            for table, columns in tables.items():
                connection.register("batch", columns)
                connection.execute(f"INSERT INTO {table} BY NAME SELECT * FROM batch")
                connection.unregister("batch")
        connection.commit()
    except BaseException:
        connection.rollback()
        raise


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
