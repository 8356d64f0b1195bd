"""Reading an index back: its runs as the objects fathom's series and listing take, without the
run folders (which may since have moved, grown or gone: an index says what they held when indexed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fathom.index.database import IndexFileError, reading
from fathom.index.rows import path_key
from fathom.manifest import Manifest
from fathom.records import AnyRecord, record_from_json
from fathom.report.runs import RunEntry, by_creation, run_entry
from fathom.run.store import latest_records

_Run = tuple[int, str, str, int]  # a runs row as read here: run_id, path, manifest, damaged


@dataclass(frozen=True)
class IndexedRun:
    """One run folder as indexed: what ``RunFolder.read_manifest`` and ``RunFolder.records`` gave,
    but for damaged lines, which are left out here and counted (``damaged``)."""

    path: Path
    manifest: Manifest
    records: list[AnyRecord]  # in the order written
    damaged: int

    def latest(self) -> list[AnyRecord]:
        """One record per sample, the last written, as ``RunFolder.latest`` gives it."""
        return latest_records(self.records)


def read_runs(index: Path, folders: Sequence[Path] | None = None) -> list[IndexedRun]:
    """The runs ``index`` holds, by path; or those of ``folders``, in their order: each a run folder,
    or a folder holding run folders, as ``fathom index`` took them. A folder with no run in the index
    is an error naming the command that indexes it."""
    with reading(index) as connection:
        runs = connection.execute("SELECT run_id, path, manifest, damaged FROM runs ORDER BY path").fetchall()
        chosen = runs if folders is None else _of(runs, folders, index)
        ids = [run_id for run_id, *_ in chosen]
        lines = connection.execute(
            "SELECT run_id, json FROM samples WHERE list_contains(?, run_id) ORDER BY run_id, line", [ids]
        ).fetchall()
    records: dict[int, list[AnyRecord]] = {run_id: [] for run_id in ids}
    for run_id, line in lines:
        records[run_id].append(record_from_json(json.loads(line)))
    return [
        IndexedRun(Path(path), Manifest.from_json(json.loads(manifest)), records[run_id], damaged)
        for run_id, path, manifest, damaged in chosen
    ]


def indexed_entries(index: Path, folder: Path | None = None) -> list[RunEntry]:
    """``fathom runs --index``: the index's runs (those of ``folder``, where named) as listed."""
    runs = read_runs(index, None if folder is None else [folder])
    return by_creation([run_entry(run.path, run.manifest, run.latest()) for run in runs])


def _of(runs: list[_Run], folders: Sequence[Path], index: Path) -> list[_Run]:
    chosen: dict[int, _Run] = {}
    for folder in folders:
        key = path_key(folder)
        found = [run for run in runs if key in (run[1], str(Path(run[1]).parent))]
        if not found:
            raise IndexFileError(
                f"index '{index}' holds no run folder '{folder}', nor any inside it: "
                f"index it first (fathom index {folder} --out {index})"
            )
        chosen |= {run[0]: run for run in found}
    return list(chosen.values())
