"""A run folder's contents as the index's rows: one per run, one per record, one per judgement.

Columns are built as arrays, one per column, for DuckDB to take a chunk of records whole (a row at a
time is a hundred times slower); a folder is read and inserted a chunk at a time (``build``). Strings
are stored as DuckDB takes them, valid UTF-8: a lone surrogate that a JSON escape put into an answer
is shown as '?' in its column, while the row's ``json`` keeps the line as written, exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from fathom.judgement import JudgementRecord
from fathom.manifest import Manifest
from fathom.records import AnyRecord, PerplexityRecord, error_kind
from fathom.run.lines import Damage
from fathom.run.store import is_final

# The records' own fields that the samples table holds as columns, under their own names; a field a
# perplexity record lacks (depth, score, output, ...) is NULL in its row.
SAMPLE_FIELDS = (
    "sample_id", "task", "length", "depth", "sample", "seed", "control", "score", "error", "output",
    "answers", "scoring", "finish_reason", "target_tokens", "actual_tokens", "beyond_window", "latency_s",
    "prefill_s", "decode_s", "first_token", "needle_kind", "item_id", "truncated", "prompt_sha256",
    "probe", "latent_items", "odd_name_score", "literal_neighbours", "needle_forms", "reasoning_tokens",
)  # fmt: skip
# What a perplexity record's row holds for the flags only sample records have: it is neither.
_ABSENT = {"control": False, "truncated": False}
JUDGEMENT_FIELDS = (
    "sample_id", "prompt_sha256", "answer_sha256", "role", "judge", "judge_identity", "rubric",
    "rubric_sha256", "score", "reason", "reply", "attempts", "latency_s", "error",
)  # fmt: skip

Columns = dict[str, np.ndarray[Any, np.dtype[Any]]]
# ``run_row``'s values into the runs table: its labels come as two lists, keys and values, for a MAP.
INSERT_RUN = f"INSERT INTO runs VALUES ({'?, ' * 14}map(?::VARCHAR[], ?::VARCHAR[]){', ?' * 6})"
# A record counts for its sample (``fathom.run.store.latest_records``: the last one written) unless a
# later line of its run holds the same sample. A chunk cannot know the lines after it, so its records
# go in as latest and those a later line outdates are unflagged once the whole file is in, by the
# run's id (twice), in the same transaction.
UNFLAG_OUTDATED = """
UPDATE samples SET latest = false
FROM (SELECT sample_id, max(line) AS last FROM samples WHERE run_id = ? GROUP BY sample_id) AS newest
WHERE samples.run_id = ? AND samples.sample_id = newest.sample_id AND samples.line < newest.last
"""

R = TypeVar("R")


@dataclass(frozen=True)
class Line(Generic[R]):
    """A record as read, with its line: its number in its file, its bytes as written (newline aside)."""

    number: int
    raw: bytes
    record: R


@dataclass
class Tally:
    """What the stream of one file's lines has seen: records and damaged lines, the first damage."""

    records: int = 0
    damaged: int = 0
    first_damage: Damage | None = None

    def damage(self, damage: Damage) -> None:
        self.damaged += 1
        self.first_damage = self.first_damage or damage


def run_row(
    run_id: int,
    path: Path,
    manifest: Manifest,
    samples: Tally,
    judgements: Tally,
    stamp: str,
) -> list[Any]:
    """The runs table's row, in its columns' order."""
    spec = manifest.spec
    labels = manifest.labels
    row = [
        run_id, path_key(path), path.name, manifest.identity.fingerprint,
        spec.task, spec.model, spec.tokenizer, spec.lengths, spec.depths,
        spec.samples, spec.seed, manifest.planned, manifest.environment.created,
        manifest.environment.fathom_version, tuple(labels), tuple(labels.values()),
        samples.records, samples.damaged, judgements.records, judgements.damaged,
        json.dumps(manifest.to_json(), sort_keys=True), stamp,
    ]  # fmt: skip
    return [_cell(value) for value in row]


def sample_columns(run_id: int, lines: Sequence[Line[AnyRecord]]) -> Columns:
    """The samples table's columns for a chunk of a run's records, in the order written, each flagged
    ``latest`` until ``UNFLAG_OUTDATED`` unflags those a later line outdates."""
    records = [line.record for line in lines]
    columns = _common(run_id, lines)
    columns |= {
        "latest": np.ones(len(records), dtype=bool),
        "final": np.array([is_final(r) for r in records], dtype=bool),
        "kind": _objects("perplexity" if isinstance(r, PerplexityRecord) else "sample" for r in records),
        "error_kind": _objects(None if r.error is None else _text(error_kind(r.error)) for r in records),
    }
    fields = {
        name: _objects(_cell(getattr(r, name, _ABSENT.get(name))) for r in records) for name in SAMPLE_FIELDS
    }
    return columns | fields


def judgement_columns(run_id: int, lines: Sequence[Line[JudgementRecord]]) -> Columns:
    """The judgements table's columns for a chunk of a run's judgements, in the order written."""
    records = [line.record for line in lines]
    fields = {name: _objects(_cell(getattr(r, name)) for r in records) for name in JUDGEMENT_FIELDS}
    return _common(run_id, lines) | fields


def _common(run_id: int, lines: Sequence[Line[Any]]) -> Columns:
    """Each record's run, line number in its file and line as written."""
    return {
        "run_id": np.full(len(lines), run_id, dtype=np.int32),
        "line": np.fromiter((line.number for line in lines), dtype=np.int32, count=len(lines)),
        # The line as written, newline aside; it was read as UTF-8, and is stored exactly.
        "json": _objects(line.raw.decode("utf-8") for line in lines),
    }


def _objects(values: Iterable[Any]) -> np.ndarray[Any, np.dtype[Any]]:
    """A column of Python values (None for NULL); a list stays one cell, not a dimension."""
    return np.fromiter(values, dtype=object)


def _cell(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, tuple):
        return [_cell(item) for item in value]
    return value


def _text(text: str) -> str:
    """``text`` as valid UTF-8, which DuckDB requires: a lone surrogate (JSON can escape one) as '?'."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def path_key(path: Path) -> str:
    """How the index names a run folder: its resolved path, as text DuckDB can hold."""
    return _text(str(path.resolve()))
