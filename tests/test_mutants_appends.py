"""``fathom.run.appends`` read directly (its callers, the run folder and the judges' writers, test it
through whole folders): the bytes of an appended line, the refusals' messages whole, a short write
undone to the byte, the damage moved aside line by line with its warning, and the order of the calls
that put each on disk (the aside fsynced before the rename over the records). Each value is worked out
by hand from the lines written."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from test_durability import Call, Spy

from fathom.errors import RunFolderError
from fathom.run import appends, lines
from fathom.run.appends import append_line, append_to, quarantine
from fathom.run.lines import Damage, Parsed


def _appended(path: Path, data: dict[str, Any]) -> bytes:
    fd = append_to(path)
    try:
        append_line(fd, data, path)
    finally:
        os.close(fd)
    return path.read_bytes()


def test_a_line_is_the_object_with_sorted_keys_as_json_writes_it_appended_after_what_is_there(
    tmp_path: Path,
) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b'{"x": 0}\n')
    written = _appended(path, {"b": "\u00e9", "a": [1, 2.5], "c": None})
    assert written == b'{"x": 0}\n{"a": [1, 2.5], "b": "\\u00e9", "c": null}\n'


def test_append_to_creates_a_missing_file_and_appends_at_its_end(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    assert _appended(path, {"k": 1}) == b'{"k": 1}\n'
    assert _appended(path, {"k": 2}) == b'{"k": 1}\n{"k": 2}\n'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_refused_and_nothing_is_written(tmp_path: Path, value: float) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b'{"x": 0}\n')
    fd = append_to(path)
    try:
        with pytest.raises(RunFolderError) as raised:
            append_line(fd, {"score": value}, path)
    finally:
        os.close(fd)
    assert str(raised.value) == f"refusing to write NaN or Infinity into {path}: JSON has neither"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert path.read_bytes() == b'{"x": 0}\n'


def test_a_short_write_is_cut_back_to_the_lines_before_it_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk writes 5 of the line's 9 bytes: the file is cut back to its 9 bytes before them
    (not to 4, nor grown to 19), and the line is never fsynced."""
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b'{"x": 0}\n')
    fd = append_to(path)
    real_write, synced = os.write, []
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:5]))
    monkeypatch.setattr(os, "fsync", synced.append)
    try:
        with pytest.raises(RunFolderError) as raised:
            append_line(fd, {"y": 1}, path)
    finally:
        os.close(fd)
    assert str(raised.value) == f"could not write a whole record to {path}: is the disk full?"
    assert path.read_bytes() == b'{"x": 0}\n'
    assert synced == []


def test_the_line_is_written_once_whole_and_then_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "samples.jsonl"
    fd = append_to(path)
    spy = Spy(monkeypatch)
    try:
        calls = spy.during(lambda: append_line(fd, {"k": "v"}, path))
    finally:
        os.close(fd)
    assert calls == [Call("write", str(path), -1), Call("fsync", str(path), len(b'{"k": "v"}\n'))]


def test_a_file_that_cannot_be_opened_is_refused_with_the_systems_reason(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "samples.jsonl"
    with pytest.raises(RunFolderError) as raised:
        append_to(path)
    assert str(raised.value) == f"cannot write {path}: No such file or directory"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_an_error_without_a_reason_is_named_by_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(path: Path) -> int:
        raise OSError("no reason given")

    monkeypatch.setattr(appends, "open_append", fails)
    with pytest.raises(RunFolderError) as raised:
        append_to(tmp_path / "samples.jsonl")
    assert str(raised.value) == f"cannot write {tmp_path / 'samples.jsonl'}: no reason given"


# quarantine: the file's lines and the damage a read of it found, given by hand.
GOOD = [b'{"n": 1}\n', b'{"n": 3}\n', b'{"n": 5}\n']


def _file(tmp_path: Path, *lines_: bytes) -> tuple[Path, Path]:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"".join(lines_))
    return path, tmp_path / "samples.quarantine"


def test_damaged_lines_and_the_torn_tail_go_aside_and_the_records_stay_in_order(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, aside = _file(tmp_path, GOOD[0], b"bad two\n", GOOD[1], b"bad four\n", GOOD[2], b'{"torn')
    aside.write_bytes(b"moved before\n")
    parsed = Parsed[Any]([], [Damage(2, "no JSON"), Damage(4, "not a record")], b'{"torn')
    with caplog.at_level(logging.WARNING, logger="fathom.run.appends"):
        quarantine(parsed, path, aside)
    assert path.read_bytes() == b"".join(GOOD)
    assert aside.read_bytes() == b'moved before\nbad two\nbad four\n{"torn\n'
    assert [r.getMessage() for r in caplog.records] == [
        f"moved 2 damaged line(s) of {path} aside to {aside} (line 2: no JSON)"
    ]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_the_first_line_can_be_the_damaged_one(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path, aside = _file(tmp_path, b"bad one\n", GOOD[0])
    with caplog.at_level(logging.WARNING, logger="fathom.run.appends"):
        quarantine(Parsed[Any]([], [Damage(1, "no JSON")], b""), path, aside)
    assert (path.read_bytes(), aside.read_bytes()) == (GOOD[0], b"bad one\n")
    assert [r.getMessage() for r in caplog.records] == [
        f"moved 1 damaged line(s) of {path} aside to {aside} (line 1: no JSON)"
    ]


def test_a_torn_tail_alone_is_moved_aside_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, aside = _file(tmp_path, GOOD[0], GOOD[1], b'{"n": 5')
    with caplog.at_level(logging.DEBUG, logger="fathom.run.appends"):
        quarantine(Parsed[Any]([], [], b'{"n": 5'), path, aside)
    assert (path.read_bytes(), aside.read_bytes()) == (GOOD[0] + GOOD[1], b'{"n": 5\n')
    assert caplog.records == []


def test_a_file_without_damage_is_left_alone_and_never_opened(tmp_path: Path) -> None:
    """Nothing there to read: a quarantine that opened the file, or made the aside, would fail or show."""
    path, aside = tmp_path / "missing.jsonl", tmp_path / "samples.quarantine"
    quarantine(Parsed[Any]([], [], b""), path, aside)
    assert sorted(tmp_path.iterdir()) == []


def test_an_overlong_line_is_copied_aside_whole_and_the_lines_after_it_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 16)
    monkeypatch.setattr(lines, "_PIECE", 5)
    long = b"x" * 40 + b"\n"
    path, aside = _file(tmp_path, GOOD[0], long, GOOD[1], b"bad\n", GOOD[2])
    quarantine(Parsed[Any]([], [Damage(2, "long"), Damage(4, "bad")], b""), path, aside)
    assert path.read_bytes() == b"".join(GOOD)
    assert aside.read_bytes() == long + b"bad\n"


def test_the_aside_is_on_disk_before_the_records_are_renamed_over_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, aside = _file(tmp_path, GOOD[0], b"bad\n", GOOD[1])
    aside.write_bytes(b"old\n")
    spy = Spy(monkeypatch)
    spy.during(lambda: quarantine(Parsed[Any]([], [Damage(2, "bad")], b""), path, aside))
    synced = [(c.path, c.size) for c in spy.calls if c.name == "fsync"]
    renamed = [i for i, c in enumerate(spy.calls) if c.name == "replace" and c.target == str(path)]
    assert len(renamed) == 1
    # the aside's fsync holds both its lines (flushed first), and comes before the rename
    on_aside = [i for i, c in enumerate(spy.calls) if c.name == "fsync" and c.path == str(aside)]
    assert (str(aside), len(b"old\nbad\n")) in synced
    assert on_aside and max(on_aside) < renamed[0]
    assert (path.read_bytes(), aside.read_bytes()) == (GOOD[0] + GOOD[1], b"old\nbad\n")


def test_a_file_that_cannot_be_read_again_is_refused_with_the_systems_reason(tmp_path: Path) -> None:
    path, aside = tmp_path / "gone.jsonl", tmp_path / "samples.quarantine"
    with pytest.raises(RunFolderError) as raised:
        quarantine(Parsed[Any]([], [Damage(1, "bad")], b""), path, aside)
    assert str(raised.value) == f"cannot move the damage of {path} aside: No such file or directory"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
