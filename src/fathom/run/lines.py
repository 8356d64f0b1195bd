"""Reading samples.jsonl: every line is a record of this run, damaged, or the torn tail of a write.

One policy for every reader and writer. A line that ends in a newline and is not a record of this
run (not UTF-8, not JSON, not an object, not a record, a record with an impossible value, or a record
of another run or of a sample its spec never asks) is *damaged*: a reader refuses the folder and
names the line; the run's writer moves it aside, to ``samples.quarantine``, before it appends. Bytes
after the last newline are a *torn tail*: a write in flight, or one a kill cut short. Readers leave
it alone (a writer may be finishing it); the writer, which holds the folder's lock and so knows no
write is in flight, moves it aside too.

Files are read line by line: what is held is the records, never a line or the file whole, so a
reader's memory follows the records, not the file's bytes; the index, which holds no records, reads
each line with ``read_line``, a chunk of lines at a time (``fathom.index.build``). A writer that
moves damage aside keeps no line: it reads the file a second time (``fathom.run.appends.quarantine``).
No line is held longer than a record can be (``MAX_LINE_BYTES``): a longer one is damage, read a
piece at a time and never whole, so a file of one endless line costs no more than a record.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

from fathom.errors import NewerSchemaError, RunFolderError, first_line
from fathom.manifest import Manifest
from fathom.records import AnyRecord, SampleRecord, record_from_json
from fathom.spec import MAX_LENGTH, RunSpec

R = TypeVar("R")

# The longest line a record can take: a perplexity document of MAX_LENGTH tokens, whose
# log-probabilities JSON writes in at most 25 bytes each, and 1 MiB for the rest of the record.
MAX_LINE_BYTES = 25 * MAX_LENGTH + (1 << 20)
_PIECE = 1 << 20  # what an over-long line is read (and copied aside) by


@dataclass(frozen=True)
class Damage:
    """A complete line of samples.jsonl that is no record of this run."""

    line: int  # 1-based
    reason: str


@dataclass(frozen=True)
class Overlong:
    """A line longer than any record (``MAX_LINE_BYTES``), read past, never held: its size."""

    size: int

    def damage(self, number: int) -> Damage:
        return Damage(number, f"a line of {self.size:,} bytes, longer than any record ({MAX_LINE_BYTES:,})")


@dataclass(frozen=True)
class Parsed(Generic[R]):
    records: list[R]
    damaged: list[Damage]
    torn: bytes  # whatever follows the last newline


def parse(data: bytes, manifest: Manifest | None, name: str) -> Parsed[AnyRecord]:
    """Every line of ``data`` (the file ``name``), sorted into records and damage. A record must be of
    ``manifest``'s run and a sample its spec asks (``check_sample``); records without an identity
    predate it and count as the run's own; with no manifest, any record counts. A record of a newer
    schema is no damage but a newer fathom's: NewerSchemaError, for readers and writers alike, before
    anything is moved."""
    return parse_stream(io.BytesIO(data), name, sample_reader(manifest))


def read_file(path: Path, reader: Callable[[dict[str, Any]], R]) -> Parsed[R]:
    """The JSONL file at ``path`` read line by line (``parse_stream``); a missing file holds nothing."""
    return parse_stream(file_lines(path), str(path), reader)


def file_lines(path: Path) -> Iterator[bytes | Overlong]:
    """The lines of the file at ``path``, each with its newline (a last one without is the torn tail),
    read one at a time; a missing file has none."""
    try:
        with path.open("rb") as handle:
            yield from bounded_lines(handle)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RunFolderError(f"cannot read {path}: {exc.strerror or exc}") from None


def bounded_lines(handle: BinaryIO, spill: BinaryIO | None = None) -> Iterator[bytes | Overlong]:
    """The lines of ``handle`` (each with its newline; a last one without is the torn tail), but a line
    longer than ``MAX_LINE_BYTES`` comes as its Overlong, its bytes read a piece at a time and written
    to ``spill`` as they are read (ended with a newline there if the file's did not end it)."""
    while line := handle.readline(MAX_LINE_BYTES + 1):
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            yield line
            continue
        size = 0
        while line:
            size += len(line)
            if spill is not None:
                spill.write(line)
            if line.endswith(b"\n"):
                break
            line = handle.readline(_PIECE)
        else:  # the file ended inside it: far too long to be a write in flight, it is damage
            if spill is not None:
                spill.write(b"\n")
        yield Overlong(size - 1 if line.endswith(b"\n") else size)


def parse_stream(
    lines: Iterable[bytes | Overlong], name: str, reader: Callable[[dict[str, Any]], R]
) -> Parsed[R]:
    """The lines of a binary file (each with its newline; a last one without is the torn tail) as
    records and damage: only the records and each damage's place and reason are held, not the lines."""
    records: list[R] = []
    damaged: list[Damage] = []
    for number, line in enumerate(lines, start=1):
        if isinstance(line, Overlong):
            damaged.append(line.damage(number))
            continue
        if not line.endswith(b"\n"):
            return Parsed(records, damaged, line)  # only the last line lacks its newline
        read = read_line(number, line[:-1], name, reader)
        if isinstance(read, Damage):
            damaged.append(read)
        else:
            records.append(read)
    return Parsed(records, damaged, b"")


def read_line(number: int, raw: bytes, name: str, reader: Callable[[dict[str, Any]], R]) -> R | Damage:
    """Line ``number`` of the file ``name`` (``raw``, its newline aside) as ``reader``'s record, or the
    damage it is; NewerSchemaError, naming the line, for a newer fathom's record."""
    try:
        return _record(raw, reader)
    except _Damaged as exc:
        return Damage(number, str(exc))
    except NewerSchemaError as exc:
        raise exc.at(f"{name} line {number}") from None


def sample_reader(manifest: Manifest | None) -> Callable[[dict[str, Any]], AnyRecord]:
    """How a line's object becomes a record of ``manifest``'s run (any record, with no manifest); the
    values that repeat from record to record are held once (``Shared``)."""
    share = Shared()
    if manifest is None:
        return lambda data: record_from_json(share(data))
    identity, spec = manifest.identity.fingerprint, manifest.spec

    def read(data: dict[str, Any]) -> AnyRecord:
        record = record_from_json(share(data))
        if record.run_identity not in (None, identity):
            raise _Foreign(
                f"a record of another run (identity {record.run_identity}, this run's is {identity})"
            )
        check_sample(record, spec)
        return record

    return read


class Shared:
    """One object for each value that repeats across the records of a read: the JSON parser makes a
    new string for every line's task, scoring method, finish reason, run identity, answers ..., and a
    record held for the analysis would keep each copy (they were most of its memory). Only fields
    whose values repeat are shared; one unique to each record (its id, hash, seconds) would cost an
    entry here and save nothing. Strings, integers and lists of strings: never a float or a bool, which
    compare equal to values of other types (1 == 1.0 == True; -0.0 == 0.0) that the records must keep
    as they were written. Held for one read: the records keep the values, not this."""

    SCALARS = frozenset(
        {
            "task", "length", "target_tokens", "actual_tokens", "max_new_tokens", "needle_kind",
            "question", "output", "finish_reason", "scoring", "error", "answer_error", "run_identity",
            "item_id", "original_tokens", "first_token", "extracted", "probe", "corpus", "record",
        }
    )  # fmt: skip
    TUPLES = frozenset(
        {
            "answers", "matched", "needle_roles", "needle_values", "lured", "redraws", "item_groups",
            "latent_items", "literal_neighbours", "needle_forms",
        }
    )  # fmt: skip

    def __init__(self) -> None:
        self._held: dict[str | int | tuple[str, ...], Any] = {}

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` (a line's object), its repeating values replaced by those held already."""
        for name in self.SCALARS.intersection(data):
            value = data[name]
            if type(value) in (str, int):
                data[name] = self._held.setdefault(value, value)
        for name in self.TUPLES.intersection(data):
            value = data[name]
            if type(value) is list and all(type(item) is str for item in value):
                held = tuple(value)  # what the record holds (``fathom.schemas.read``), made here once
                data[name] = self._held.setdefault(held, held)
        return data


# The scoring methods whose every grade is 0 or 1 (``fathom.scoring``; ``all`` grades the fraction of
# the references found); a closed-book probe's grade is one too. Any other method (a plugin's, a
# suite's metric) grades in [0, 1], which ``fathom.records.check_values`` checks of every record.
_BINARY = frozenset({"contains", "ordered", "exact", "any"})


def check_sample(record: AnyRecord, spec: RunSpec) -> None:
    """ValueError for a record of no sample ``spec`` asks: its length not among the spec's lengths,
    its depth not among its depths, its index beyond its samples per cell (the cheapest sound check:
    the sample id is made of these, ``records.check_values`` ties it to them), or a binary scoring
    method's grade other than 0 or 1. A closed-book probe is asked once per item, at no cell."""
    if isinstance(record, SampleRecord):
        binary = record.scoring in _BINARY or record.probe is not None
        for name, grade in (("score", record.score), ("odd_name_score", record.odd_name_score)):
            if binary and grade not in (None, 0.0, 1.0):
                raise ValueError(f"field '{name}' is {grade}, but '{record.scoring}' grades 0 or 1")
        if record.probe is not None:
            return
    if record.length not in spec.lengths:
        raise ValueError(f"length {record.length} is not one of the run's lengths {list(spec.lengths)}")
    if record.sample >= spec.samples:
        raise ValueError(f"sample index {record.sample} is beyond the run's {spec.samples} samples per cell")
    if not isinstance(record, SampleRecord):
        return
    if record.depth is not None and record.depth not in spec.depths:
        raise ValueError(f"depth {record.depth} is not one of the run's depths {list(spec.depths)}")


class _Foreign(Exception):
    """A record, but another run's: damage all the same, named as such."""


class _Damaged(Exception):
    """A line that is no record of this run; its message says why."""


def _record(raw: bytes, reader: Callable[[dict[str, Any]], R]) -> R:
    """The line's record as ``reader`` makes it (which may be None: a writer that counts the records
    keeps none), or _Damaged."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Damaged("not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise _Damaged("not JSON" if text.strip() else "an empty line") from None
    except RecursionError:
        raise _Damaged("JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise _Damaged(f"a JSON {type(data).__name__}, not a record object")
    try:
        return reader(data)
    except _Foreign as exc:
        raise _Damaged(str(exc)) from None
    except (TypeError, ValueError, KeyError) as exc:
        raise _Damaged(f"not a record ({first_line(exc)})") from None
