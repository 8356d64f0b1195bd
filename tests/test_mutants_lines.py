"""The details of ``fathom.run.lines`` that the store's tests leave open, each pinned by a value worked
out by hand: the pieces an over-long line is read by and its size (with and without its newline, at
the bound and one past it), what is copied aside of it, its place among the damage and the records
after it, a record of another run met by ``parse``, and each edge of ``check_sample``. The bound is
made 10 bytes here, pieces 4, so every line below is written out whole."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest
from test_store import manifest, record

from fathom.run import lines
from fathom.run.lines import Damage, Overlong, bounded_lines, check_sample, parse, parse_stream

MOST = 10


@pytest.fixture(autouse=True)
def small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", MOST)
    monkeypatch.setattr(lines, "_PIECE", 4)


@pytest.mark.parametrize(
    ("data", "read", "spilled"),
    [
        # At the bound, with its newline or as a torn tail without: a line.
        (b"0123456789\n", [b"0123456789\n"], b""),
        (b"0123456789", [b"0123456789"], b""),
        # One byte past it: 11 bytes before the newline, read as 11 then the newline's piece.
        (b"01234567890\n", [Overlong(11)], b"01234567890\n"),
        # Pieces of 4 after the first 11 bytes: 11 + 4 + 4 + 2 (the last with the newline).
        (b"0123456789abcdefghij\nok\n", [Overlong(20), b"ok\n"], b"0123456789abcdefghij\n"),
        # The file ends inside it: every byte is counted, and the copy aside is ended with a newline.
        (b"ok\n0123456789abc", [b"ok\n", Overlong(13)], b"0123456789abc\n"),
    ],
    ids=["at-the-bound", "torn-at-the-bound", "one-past", "pieces", "ended-inside"],
)
def test_a_line_longer_than_the_bound_comes_as_its_size_and_is_copied_aside_whole(
    data: bytes, read: list[bytes | Overlong], spilled: bytes
) -> None:
    spill = io.BytesIO()
    assert list(bounded_lines(io.BytesIO(data), spill)) == read
    assert spill.getvalue() == spilled
    assert list(bounded_lines(io.BytesIO(data))) == read  # with nowhere to copy it: read past


def test_an_overlong_line_is_damage_in_its_place_and_the_records_after_it_are_read() -> None:
    first, second = (json.dumps(record(i).to_json()).encode() + b"\n" for i in (0, 1))
    parsed = parse_stream(
        [first, Overlong(12345), second, b"{torn"], "samples.jsonl", lines.sample_reader(manifest())
    )
    assert [r.sample for r in parsed.records] == [0, 1]
    assert parsed.damaged == [Damage(2, "a line of 12,345 bytes, longer than any record (10)")]
    assert parsed.torn == b"{torn"


def test_parse_reads_the_records_as_its_manifests_run_and_another_runs_is_damage() -> None:
    own, other = manifest().identity.fingerprint, manifest(seed=1).identity.fingerprint
    line = json.dumps(replace(record(0), run_identity=other).to_json()).encode() + b"\n"
    parsed = parse(line, manifest(), "samples.jsonl")
    assert parsed.records == []
    assert parsed.damaged == [Damage(1, f"a record of another run (identity {other}, this run's is {own})")]
    assert [r.sample for r in parse(line, None, "samples.jsonl").records] == [0]  # no manifest: any record


def test_a_record_is_of_the_run_up_to_its_last_sample_and_a_binary_grade_is_0_or_1() -> None:
    spec = manifest().spec  # 50 samples a cell, graded by contains
    check_sample(record(49), spec)
    with pytest.raises(ValueError) as raised:
        check_sample(record(50), spec)
    assert str(raised.value) == "sample index 50 is beyond the run's 50 samples per cell"
    check_sample(replace(record(0), odd_name_score=1.0), spec)
    with pytest.raises(ValueError) as raised:
        check_sample(replace(record(0), odd_name_score=0.5), spec)
    assert str(raised.value) == "field 'odd_name_score' is 0.5, but 'contains' grades 0 or 1"


def test_a_list_field_written_as_a_string_is_damage_not_read_as_its_characters() -> None:
    line = json.dumps(record(0).to_json() | {"answers": "1234567"}).encode() + b"\n"
    parsed = parse(line, None, "samples.jsonl")
    assert parsed.records == []
    assert parsed.damaged == [Damage(1, "not a record (field 'answers' is '1234567', not tuple[str, ...])")]
