"""Records read from a run folder cost little memory (issue #30): no per-record dict (slots), the values
that repeat from record to record held once, log-probabilities as doubles; and none of it changes what
a record is: its JSON form byte for byte, its equality, its pickling (Ray), ``dataclasses.replace``."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from fathom.floats import Floats
from fathom.records import PerplexityRecord, SampleRecord, record_from_json
from fathom.run.lines import parse

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE = FIXTURES / "records-v12" / "samples.jsonl"  # the low-overlap needles' fields, probes
NEWEST = FIXTURES / "records-v13" / "samples.jsonl"  # a thinker's reasoning and its tokens
# -0.0 is what rounding a tiny negative log-probability gives; 1e-05 is written in JSON's exponent form.
LOGPROBS = (-1.23457, -0.0, 0.0, -1e-05, -17.5, -2.0)


def document(logprobs: tuple[float, ...] = LOGPROBS) -> PerplexityRecord:
    return PerplexityRecord(
        "perplexity|L64|S0", "perplexity", 64, 0, 0, "prose", 0, "ab" * 32, 64, 64, 1, logprobs, 0.5, False
    )


def line_of(record: SampleRecord | PerplexityRecord) -> bytes:
    """The record's line as the run's writer writes it (``fathom.run.appends.append_line``)."""
    return (json.dumps(record.to_json(), sort_keys=True, allow_nan=False) + "\n").encode()


def test_records_read_back_write_the_same_bytes() -> None:
    # Schema 12's lines are written back in today's schema (13), which changed nothing else of them.
    older = FIXTURE.read_bytes().replace(b'"schema": 12,', b'"schema": 13,')
    lines = [*older.splitlines(keepends=True), *NEWEST.read_bytes().splitlines(keepends=True)]
    lines.append(line_of(document()))
    parsed = parse(b"".join(lines), None, "samples.jsonl")
    assert not parsed.damaged
    assert [line_of(record) for record in parsed.records] == lines
    assert isinstance(parsed.records[-1], PerplexityRecord)
    assert isinstance(parsed.records[-1].logprobs, Floats)


def test_a_record_read_back_equals_the_one_written_and_hashes_alike() -> None:
    written = document()
    (read,) = parse(line_of(written), None, "samples.jsonl").records
    assert isinstance(read, PerplexityRecord) and isinstance(read.logprobs, Floats)
    assert read == written and written == read and hash(read) == hash(written)
    assert read != dataclasses.replace(written, logprobs=(*LOGPROBS[:-1], -2.5))
    assert pickle.loads(pickle.dumps(read)) == read
    assert dataclasses.replace(read, latency_s=1.0).logprobs is read.logprobs


def test_records_hold_no_dict_of_their_own() -> None:
    (read,) = parse(line_of(document()), None, "samples.jsonl").records
    assert not hasattr(read, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.length = 1  # type: ignore[misc]


def test_integers_among_log_probabilities_are_read_as_written() -> None:
    # Held as doubles they would be written back as 1.0: such a list stays a tuple of what it held.
    data = document().to_json() | {"logprobs": [-1, -0.5]}
    record = record_from_json(data)
    assert isinstance(record, PerplexityRecord) and record.logprobs == (-1, -0.5)
    assert type(record.logprobs[0]) is int
    assert json.dumps(record.to_json(), sort_keys=True) == json.dumps(data, sort_keys=True)


def test_log_probabilities_are_a_read_only_sequence_numpy_reads_without_a_copy() -> None:
    floats = Floats(LOGPROBS)
    assert list(floats) == list(LOGPROBS) and len(floats) == 6 and floats[1] == 0.0
    assert floats[1:3] == LOGPROBS[1:3] and isinstance(floats[1:3], Floats)
    assert floats.to_json() == list(LOGPROBS) and repr(floats).startswith("Floats([-1.23457, -0.0")
    view = np.asarray(floats)
    assert view.dtype == np.float64 and view.tolist() == list(LOGPROBS)
    assert not view.flags.writeable and view.base is not None
    copied = np.asarray(floats, dtype=np.float32)
    assert copied.dtype == np.float32
    with pytest.raises(TypeError):
        Floats.from_json([1.0, True])
    with pytest.raises(TypeError):
        Floats.from_json("1.0")


def test_values_that_repeat_are_held_once_and_others_as_written() -> None:
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    records = parse(b"".join(lines), None, "samples.jsonl").records
    for name in ("task", "scoring", "needle_kind", "finish_reason", "run_identity", "answers", "length"):
        values = [getattr(record, name) for record in records]
        equal = [(x, y) for x in values for y in values if x == y]
        assert len(equal) > len(values) and all(x is y for x, y in equal), name
    # A float is never shared: -0.0 and 0.0, 1 and 1.0 compare equal, and each record keeps its own.
    data = {**json.loads(lines[0]), "score": -0.0}
    plain = parse(b"".join([lines[0], json.dumps(data).encode() + b"\n"]), None, "x").records
    assert [str(r.score) for r in plain] == [str(json.loads(lines[0])["score"]), "-0.0"]
