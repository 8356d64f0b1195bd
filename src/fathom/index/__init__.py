"""The index: run folders' manifests, records and judgements in one DuckDB file, for SQL over many
runs (every checkpoint of a training run) and for reading them back without the folders.

``fathom index DIR... --out FILE`` (``index_runs``) makes or updates it, skipping unchanged folders;
``read_runs`` gives its runs back as fathom's objects; ``write_parquet`` exports its tables. DuckDB
is the ``index`` extra, imported only when an index is opened. docs/run-index.md lists the tables.
"""

from fathom.index.build import Outcome, index_runs, write_parquet
from fathom.index.database import INDEX_SCHEMA, IndexFileError
from fathom.index.read import IndexedRun, indexed_entries, read_runs

__all__ = [
    "INDEX_SCHEMA",
    "IndexFileError",
    "IndexedRun",
    "Outcome",
    "index_runs",
    "indexed_entries",
    "read_runs",
    "write_parquet",
]
