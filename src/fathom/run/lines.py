"""Reading samples.jsonl: every line is a record of this run, damaged, or the torn tail of a write.

One policy for every reader and writer. A line that ends in a newline and is not a record of this
run (not UTF-8, not JSON, not an object, not a record, or a record of another run) is *damaged*:
a reader refuses the folder and names the line; the run's writer moves it aside, to
``samples.quarantine``, before it appends. Bytes after the last newline are a *torn tail*: a write
in flight, or one a kill cut short. Readers leave it alone (a writer may be finishing it); the
writer, which holds the folder's lock and so knows no write is in flight, moves it aside too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fathom.errors import NewerSchemaError
from fathom.records import AnyRecord, record_from_json

R = TypeVar("R")


@dataclass(frozen=True)
class Damage:
    """A complete line of samples.jsonl that is no record of this run."""

    line: int  # 1-based
    reason: str
    raw: bytes  # the line as it was on disk, without its newline


@dataclass(frozen=True)
class Parsed(Generic[R]):
    records: list[R]
    damaged: list[Damage]
    torn: bytes  # whatever follows the last newline
    good: list[bytes]  # the records' lines as they were on disk, newline included


def parse(data: bytes, identity: str | None, name: str) -> Parsed[AnyRecord]:
    """Every line of ``data`` (the file ``name``), sorted into records and damage. ``identity`` is
    the run's fingerprint; records without one predate it and count as the run's own. A record of
    a newer schema is no damage but a newer fathom's: NewerSchemaError, for readers and writers
    alike, before anything is moved."""
    return parse_lines(data, name, lambda data: _sample_record(data, identity))


def parse_lines(data: bytes, name: str, reader: Callable[[dict[str, Any]], R]) -> Parsed[R]:
    """``parse`` for any JSONL of records: ``reader`` makes one from a line's object, raising
    TypeError, ValueError or KeyError for an object that is none (damage)."""
    last = data.rfind(b"\n")
    lines = data[:last].split(b"\n") if last >= 0 else []
    records, damaged, good = [], [], []
    for number, raw in enumerate(lines, start=1):
        try:
            record, reason = _record(raw, reader)
        except NewerSchemaError as exc:
            raise exc.at(f"{name} line {number}") from None
        if record is None:
            damaged.append(Damage(number, reason, raw))
        else:
            records.append(record)
            good.append(raw + b"\n")
    torn = data[last + 1 :]
    return Parsed(records, damaged, torn, good)


class _Foreign(Exception):
    """A record, but another run's: damage all the same, named as such."""


def _sample_record(data: dict[str, Any], identity: str | None) -> AnyRecord:
    record = record_from_json(data)
    if identity is not None and record.run_identity not in (None, identity):
        raise _Foreign(f"a record of another run (identity {record.run_identity}, this run's is {identity})")
    return record


def _record(raw: bytes, reader: Callable[[dict[str, Any]], R]) -> tuple[R | None, str]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None, "not JSON" if text.strip() else "an empty line"
    except RecursionError:
        return None, "JSON nested too deeply"
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not a record object"
    try:
        return reader(data), ""
    except _Foreign as exc:
        return None, str(exc)
    except (TypeError, ValueError, KeyError) as exc:
        return None, f"not a record ({_first_line(exc)})"


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
