"""A suite's data file is read item by item with a bound on each: a line or item over the limit is
refused in one line naming its file and line (or item), before any work and without reading it whole;
LongBench v2's one JSON list is decoded an item at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_suites import FILLER, longbench_item, write_suites

from fathom.cli import main
from fathom.tasks.suites import reading
from fathom.tasks.suites.reading import MOST_ITEM, DataError, json_list, jsonl_lines

SMALL = 64 << 10  # the limit, lowered where a test writes real text


def run(data: Path, out: Path, suite: str, tasks: str) -> int:
    argv = ["run", suite, "--suite-tasks", tasks, "--data", str(data), "--model", "sim:perfect"]
    return main([*argv, "--tokenizer", "char", "--lengths", "1k", "--out", str(out), "--no-progress"])


def bytes_read() -> int:
    """What this process has read through read calls so far, from any file (Linux counts it)."""
    (line,) = [line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar:")]
    return int(line.split()[1])


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts the bytes read as Linux does")
def test_a_191_mb_line_is_refused_at_the_limit_without_reading_it_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_suites(tmp_path / "data")
    path = data / "hotpotqa.jsonl"
    first = json.dumps(longbench_item(0)).encode() + b"\n"
    path.write_bytes(first)
    with path.open("r+b") as handle:  # a second line of 191 MB, sparse: no disk is spent
        handle.truncate(len(first) + 191_000_000)
    before = bytes_read()
    assert run(data, tmp_path / "runs", "longbench", "hotpotqa") == 2
    # The line up to the limit (64 MiB) and the little else a refused run reads: never the 191 MB.
    assert bytes_read() - before < MOST_ITEM + 16 * 2**20
    err = capsys.readouterr().err
    assert err == (
        f"fathom: error: {path} line 2 is longer than the 64 MiB a suite item may be (the longest real "
        "ones are a few MB): is it the suite's official file?\n"
    )
    assert not (tmp_path / "runs").exists()


def test_a_line_is_read_no_further_than_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "MOST_ITEM", SMALL)
    path = tmp_path / "task.jsonl"
    path.write_bytes(b"short\n" + b"x" * (SMALL * 8) + b"\nnever reached\n")
    asked: list[int] = []
    real_open = Path.open

    def recording(self: Path, *args: object, **kwargs: object) -> object:
        handle = real_open(self, *args, **kwargs)  # type: ignore[call-overload]
        real_readline = handle.readline
        handle.readline = lambda size=-1: asked.append(size) or real_readline(size)
        return handle

    monkeypatch.setattr(Path, "open", recording)
    lines = jsonl_lines(path)
    assert next(lines) == (1, b"short\n")
    with pytest.raises(DataError, match=r"task.jsonl line 2 is longer than the 0 MiB"):
        next(lines)
    assert asked == [SMALL + 1, SMALL + 1]


def test_a_line_exactly_at_the_limit_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "MOST_ITEM", SMALL)
    path = tmp_path / "task.jsonl"
    path.write_bytes(b"a" * SMALL + b"\n" + b"b" * SMALL)
    assert [len(line) for _, line in jsonl_lines(path)] == [SMALL + 1, SMALL]


def v2_item(number: int, context: str = FILLER) -> dict[str, str]:
    return {
        "_id": f"v2-{number}",
        "domain": "Single-Document QA",
        "sub_domain": "Novel",
        "difficulty": "hard",
        "length": "short",
        "question": "Who built the mill?",
        **{f"choice_{letter}": letter.lower() for letter in "ABCD"},
        "answer": "A",
        "context": context,
    }


@pytest.mark.parametrize("indent", [None, 4])
def test_a_json_list_is_decoded_an_item_at_a_time_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indent: int | None
) -> None:
    monkeypatch.setattr(reading, "_CHUNK", 1000)  # so that items straddle chunks
    items = [v2_item(i, FILLER[: 500 * i]) for i in range(8)]
    path = tmp_path / "data.json"
    path.write_text(json.dumps(items, indent=indent, ensure_ascii=False), encoding="utf-8")
    assert [item for _, item in json_list(path, "LongBench v2", 100)] == items
    assert [number for number, _ in json_list(path, "LongBench v2", 3)] == [0, 1, 2]


def test_only_the_items_asked_for_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file goes on with damage after the items asked for: it is never reached."""
    monkeypatch.setattr(reading, "_CHUNK", 1000)
    path = tmp_path / "data.json"
    path.write_text("[" + ",".join(json.dumps(v2_item(i)) for i in range(2)) + ", {broken" + "x" * 10_000)
    assert [item["_id"] for _, item in json_list(path, "LongBench v2", 2)] == ["v2-0", "v2-1"]


def test_an_item_over_the_limit_is_refused_with_its_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "MOST_ITEM", SMALL)
    monkeypatch.setattr(reading, "_CHUNK", 4096)
    path = tmp_path / "data.json"
    big = v2_item(1, "word " * SMALL)
    path.write_text(json.dumps([v2_item(0), big, v2_item(2)]))
    items = json_list(path, "LongBench v2", 10)
    assert next(items)[1]["_id"] == "v2-0"
    with pytest.raises(DataError, match=r"data.json item 1 is longer than the 0 MiB a suite item may be"):
        next(items)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"a": 1}', "is not a JSON list: use LongBench v2's official file"),
        ("", "is not a JSON list"),
        ('[{"a": 1} {"b": 2}]', "item 1 is not JSON (expected ',' or ']' after an item)"),
        ('[{"a": 1}, {"b": ', "item 1 is not JSON (Expecting value)"),
        ('[{"a": 1}, nope]', "item 1 is not JSON (Expecting value)"),
    ],
)
def test_a_malformed_list_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "data.json"
    path.write_text(text)
    with pytest.raises(DataError) as refused:
        list(json_list(path, "LongBench v2", 10))
    assert str(refused.value).startswith(f"{path} {why}")


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(b'[{"a": "\xff"}]')
    with pytest.raises(DataError, match=r"data\.json is not UTF-8"):
        list(json_list(path, "LongBench v2", 10))


def test_the_limit_is_well_above_the_longest_real_items() -> None:
    """LongBench v2's longest items reach 2M words, about 12 MB: the limit is several times that."""
    assert MOST_ITEM >= 4 * 12_000_000
