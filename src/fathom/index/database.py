"""The index file: a DuckDB database holding fathom's tables, opened for writing only once it is known
to be one of this fathom's indexes.

An index is derived data (``fathom index`` makes it again from the run folders), so a file that is no
index of this fathom is refused, never altered: another program's database, a damaged file, an index
of another schema. Each check opens the file read-only; nothing is written before all have passed.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from fathom.errors import FathomError, MissingExtraError, first_line
from fathom.version import __version__

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

# 1: runs, samples (every record, the latest of each sample flagged) and judgements, and index_meta.
# 2: the low-overlap samples' columns: probe, latent_items, odd_name_score, literal_neighbours,
# needle_forms. 3: a thinking model's reasoning tokens (reasoning_tokens; its text stays in the json).
INDEX_SCHEMA = 3
FORMAT = "fathom-index"  # index_meta's "format": what tells fathom's index from another database
TABLES = ("runs", "samples", "judgements")

# The columns a user filters on, typed; each row also holds its source as JSON (the manifest, the
# record's line as samples.jsonl holds it), from which fathom's readers make the objects again. The
# lines are most of the index, so they are zstd's: 1,000 runs' 543 MB of lines made an index of 48 MB,
# where DuckDB's own choice (FSST, block by block) took 224 MiB for the lines alone (benchmarks/README.md).
_SCHEMA = """
CREATE TABLE index_meta (key VARCHAR, value VARCHAR);
CREATE TABLE runs (
    run_id INTEGER, path VARCHAR, name VARCHAR, identity VARCHAR,
    task VARCHAR, model VARCHAR, tokenizer VARCHAR, lengths INTEGER[], depths DOUBLE[],
    samples INTEGER, seed BIGINT, planned INTEGER, created VARCHAR, fathom_version VARCHAR,
    labels MAP(VARCHAR, VARCHAR), records INTEGER, damaged INTEGER, judgements INTEGER,
    judgements_damaged INTEGER, manifest VARCHAR, stamp VARCHAR
);
CREATE TABLE samples (
    run_id INTEGER, line INTEGER, latest BOOLEAN, final BOOLEAN, kind VARCHAR,
    sample_id VARCHAR, task VARCHAR, length INTEGER, depth DOUBLE, sample INTEGER, seed BIGINT,
    control BOOLEAN, score DOUBLE, error VARCHAR, error_kind VARCHAR, output VARCHAR, answers VARCHAR[],
    scoring VARCHAR, finish_reason VARCHAR, target_tokens INTEGER, actual_tokens INTEGER,
    beyond_window BOOLEAN, latency_s DOUBLE, prefill_s DOUBLE, decode_s DOUBLE, first_token VARCHAR,
    needle_kind VARCHAR, item_id VARCHAR, truncated BOOLEAN, prompt_sha256 VARCHAR,
    probe VARCHAR, latent_items VARCHAR[], odd_name_score DOUBLE, literal_neighbours VARCHAR[],
    needle_forms VARCHAR[], reasoning_tokens INTEGER,
    json VARCHAR USING COMPRESSION zstd
);
CREATE TABLE judgements (
    run_id INTEGER, line INTEGER, sample_id VARCHAR, prompt_sha256 VARCHAR, answer_sha256 VARCHAR,
    role VARCHAR, judge VARCHAR, judge_identity VARCHAR, rubric VARCHAR, rubric_sha256 VARCHAR,
    score INTEGER, reason VARCHAR, reply VARCHAR, attempts INTEGER, latency_s DOUBLE, error VARCHAR,
    json VARCHAR USING COMPRESSION zstd
);
CREATE VIEW latest_samples AS SELECT * FROM samples WHERE latest;
"""


class IndexFileError(FathomError):
    """An index file that cannot be used: absent, another database, damaged, of another schema."""


def duckdb() -> ModuleType:
    """DuckDB, which only the index needs: an extra, imported when an index is opened."""
    try:
        return importlib.import_module("duckdb")
    except ImportError:
        raise MissingExtraError("duckdb (for fathom index)", "index") from None


@contextmanager
def writing(path: Path) -> Iterator[DuckDBPyConnection]:
    """The index at ``path`` to write to, made there if absent; refused, untouched, unless it is this
    fathom's. DuckDB's errors, in it or in the caller's statements, are one line naming the file and
    the fix."""
    if path.exists():
        with reading(path):  # the checks, read-only: a refusal writes nothing
            pass
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexFileError(f"cannot make the folder of index '{path}': {exc.strerror or exc}") from None
    made = not path.exists()
    with _connected(path, read_only=False) as connection:
        connection.begin()
        if made:
            connection.execute(_SCHEMA)
            meta = [("format", FORMAT), ("schema", str(INDEX_SCHEMA))]
            connection.executemany("INSERT INTO index_meta VALUES (?, ?)", meta)
        # The fathom that wrote the index last, whose readers decided what its tables hold.
        connection.execute("DELETE FROM index_meta WHERE key = 'fathom_version'")
        connection.execute("INSERT INTO index_meta VALUES ('fathom_version', ?)", [__version__])
        connection.commit()
        yield connection


@contextmanager
def reading(path: Path) -> Iterator[DuckDBPyConnection]:
    """The index at ``path``, read-only; refused unless it is this fathom's."""
    if not path.is_file():
        problem = "is not a file" if path.exists() else "does not exist"
        raise IndexFileError(f"index '{path}' {problem}: make it with fathom index RUNS --out {path}")
    with _connected(path, read_only=True) as connection:
        yield connection


@contextmanager
def _connected(path: Path, read_only: bool) -> Iterator[DuckDBPyConnection]:
    """``path`` opened and checked to be this fathom's index. A failure to open or check it is a
    refusal of the file; DuckDB's errors after that, in the caller's statements, are failures of the
    work (a full disk, too little memory), which never call the file unusable."""
    module = duckdb()
    try:
        # Extensions (Parquet, JSON) come built into DuckDB's wheel; never fetched from the network.
        config = {"autoinstall_known_extensions": False}
        connection: DuckDBPyConnection = module.connect(str(path), read_only=read_only, config=config)
    except module.Error as exc:
        raise _refusal(path, exc) from None
    try:
        try:
            if read_only:  # a writer's file was checked by a reader first, or is new
                _check(connection, path)
        except module.Error as exc:
            raise _refusal(path, exc) from None
        yield connection
    except module.Error as exc:
        raise _failed(path, exc, module) from None
    finally:
        connection.close()


def _refusal(path: Path, exc: Exception) -> IndexFileError:
    reason = first_line(exc)
    if "Could not set lock" in reason:  # another process has the file open for writing
        return IndexFileError(f"index '{path}' is in use by another process ({reason}): wait for it")
    return IndexFileError(
        f"'{path}' is no index this fathom can use ({reason}): name a new file, or delete this one and "
        "index the run folders again"
    )


def _failed(path: Path, exc: Exception, module: ModuleType) -> IndexFileError:
    """DuckDB's error in work on a usable index: what went wrong and what to do, the index as it was
    before the statement's transaction (DuckDB discards one that did not commit)."""
    if isinstance(exc, module.OutOfMemoryException):
        fix = "index fewer run folders at a time, or free memory"
    elif isinstance(exc, module.IOException | module.PermissionException):
        fix = "check the free space of its disk and the file's permissions"
    else:
        fix = "if it happens again, index the run folders into a new file"
    return IndexFileError(
        f"index '{path}': DuckDB failed ({first_line(exc)}); what was not committed is not in it: {fix}"
    )


def _check(connection: DuckDBPyConnection, path: Path) -> None:
    tables = {name for (name,) in connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "index_meta" not in tables:
        raise IndexFileError(
            f"'{path}' is a DuckDB database but not a fathom index (it has no index_meta table): "
            "give --out a new file"
        )
    meta = dict(connection.execute("SELECT key, value FROM index_meta").fetchall())
    if meta.get("format") != FORMAT:
        raise IndexFileError(f"'{path}' is a DuckDB database but not a fathom index: give --out a new file")
    schema, writer = meta.get("schema", ""), meta.get("fathom_version", "an unknown version")
    if not schema.isdigit():
        raise _damaged(path, f"its schema is {schema!r:.40}")
    if int(schema) > INDEX_SCHEMA:
        raise IndexFileError(
            f"index '{path}' was written by a newer fathom ({writer}, index schema {schema}; this fathom "
            f"reads schema {INDEX_SCHEMA}): upgrade fathom, or index the run folders into a new file"
        )
    if int(schema) < INDEX_SCHEMA:
        raise IndexFileError(
            f"index '{path}' was written by an older fathom ({writer}, index schema {schema}; this fathom "
            f"writes schema {INDEX_SCHEMA}): delete it and index the run folders again"
        )
    missing = [table for table in TABLES if table not in tables]
    if missing:
        raise _damaged(path, f"it has no {missing[0]} table")


def _damaged(path: Path, reason: str) -> IndexFileError:
    return IndexFileError(f"index '{path}' is damaged ({reason}): delete it and index the run folders again")
