"""DuckDB's errors in work on a usable index are failures of the work, never a verdict that the file
is unusable: the message names what failed and the fix, and the index keeps what it had committed."""

from __future__ import annotations

from pathlib import Path

import pytest

duckdb = pytest.importorskip("duckdb", reason="needs the index extra: pip install -e '.[index]'")

from fathom.index import database  # noqa: E402  (after the skip: it needs DuckDB)
from fathom.index.database import IndexFileError  # noqa: E402

# About 20 MB of text to build in one string: far over the 2 MB the statement is allowed.
TOO_BIG = "SELECT string_agg(i::VARCHAR, ',') FROM range(3000000) t(i)"


def keys(index: Path) -> set[str]:
    with database.reading(index) as connection:
        return {key for (key,) in connection.execute("SELECT key FROM index_meta").fetchall()}


def test_running_out_of_memory_keeps_what_was_committed_and_says_so(tmp_path: Path) -> None:
    index = tmp_path / "results.duckdb"
    with database.writing(index) as connection:
        connection.execute("INSERT INTO index_meta VALUES ('committed', '1')")
    with pytest.raises(IndexFileError) as failed, database.writing(index) as connection:
        connection.begin()
        connection.execute("INSERT INTO index_meta VALUES ('uncommitted', '1')")
        connection.execute("SET memory_limit = '2MB'")
        connection.execute(TOO_BIG).fetchall()
    message = str(failed.value)
    assert message.startswith(f"index '{index}': DuckDB failed (Out of Memory Error")
    assert message.endswith(
        "what was not committed is not in it: index fewer run folders at a time, or free memory"
    )
    assert "delete" not in message and "no index" not in message
    assert "committed" in keys(index) and "uncommitted" not in keys(index)


def test_a_failing_query_on_a_read_index_is_no_refusal_of_the_file(tmp_path: Path) -> None:
    index = tmp_path / "results.duckdb"
    with database.writing(index):
        pass
    with pytest.raises(IndexFileError) as failed, database.reading(index) as connection:
        connection.execute("SELECT * FROM no_such_table")
    message = str(failed.value)
    assert message.startswith(f"index '{index}': DuckDB failed (Catalog Error: Table with name no_such_table")
    assert message.endswith("if it happens again, index the run folders into a new file")
    assert "fathom_version" in keys(index)  # the index is read as before


def test_a_file_duckdb_cannot_open_is_still_refused_as_no_index(tmp_path: Path) -> None:
    index = tmp_path / "results.duckdb"
    index.write_bytes(b"run,score\n1,0.5\n" * 400)
    refused = pytest.raises(IndexFileError, match=r"is no index this fathom can use \(.*delete this one")
    with refused, database.reading(index):
        pass
