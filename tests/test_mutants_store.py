"""The run folder's details that its behaviour tests leave open, each pinned by a value worked out
by hand: what a refused resume names as the difference, how many lines a repair moved, and how a
record's damage is described."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_store import manifest, record, started

from fathom.errors import NewerSchemaError, RunFolderError
from fathom.records import record_from_json
from fathom.run.lines import Damage, Parsed, _first_line, parse
from fathom.run.store import QUARANTINE, RunFolder, _differences, is_final


def test_the_differences_of_two_identities_name_each_key_that_differs() -> None:
    old = {
        "spec": {"seed": 0, "model": "sim:perfect", "corpus": "prose"},
        "task": {"task": "niah", "version": 1},
        "tokenizer": "cl100k_base",
        "backend": {"name": "sim"},
        "gone": 1,
    }
    new = {
        "spec": {"seed": 1, "model": "sim:perfect", "template": "plain"},
        "task": {"task": "niah", "version": 2},
        "tokenizer": "cl100k_base",
        "backend": "sim",
        "added": {"x": 1},
    }
    assert _differences(old, new) == [
        "added",
        "backend",
        "gone",
        "spec.corpus",
        "spec.seed",
        "spec.template",
        "task.version",
    ]


def test_identities_that_differ_nowhere_visible_say_so() -> None:
    assert _differences({"spec": {"seed": 0}}, {"spec": {"seed": 0}}) == ["unknown"]
    assert _differences({}, {}) == ["unknown"]


def test_a_refused_resume_names_the_differences_in_its_message(tmp_path: Path) -> None:
    started(tmp_path / "run", seed=0)
    with pytest.raises(RunFolderError) as raised:
        RunFolder(tmp_path / "run").start(manifest(seed=1))
    assert str(raised.value) == (
        f"run folder '{tmp_path / 'run'}' holds a different run (differs in: spec.seed); refusing to mix "
        "them: pass --run-dir with a new folder, or delete this one"
    )


def test_repair_counts_the_damaged_lines_and_the_torn_tail(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    with folder.samples_path.open("ab") as handle:
        handle.write(b'[1]\nnot json\n{"torn')
    assert RunFolder(folder.path).repair() == 3
    assert (folder.path / QUARANTINE).read_bytes() == b'[1]\nnot json\n{"torn\n'
    with folder.samples_path.open("ab") as handle:
        handle.write(b'{"torn')
    assert RunFolder(folder.path).repair() == 1


def test_a_records_damage_is_described_by_the_first_line_of_the_error() -> None:
    assert _first_line(ValueError("field 'score' is 'x', not float\nmore detail")) == (
        "field 'score' is 'x', not float"
    )
    assert _first_line(ValueError("one line")) == "one line"
    # An error without a message is named by its type.
    assert _first_line(KeyError()) == "KeyError"
    assert _first_line(TypeError("")) == "TypeError"


def test_a_manifest_that_is_not_json_is_named_damaged_with_what_to_do(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    folder.manifest_path.write_bytes(b"{not json")
    with pytest.raises(RunFolderError) as raised:
        folder.read_manifest()
    assert str(raised.value) == (
        f"{folder.manifest_path} is damaged (not the manifest of a run: not JSON text): restore it from a "
        "copy, or move the folder aside and start the run again in a new one"
    )


def test_a_sample_that_failed_on_the_backend_is_not_final_and_others_are() -> None:
    assert is_final(record(0))
    assert not is_final(dataclasses.replace(record(0), error="backend_error: HTTP 503 after 3 tries"))
    assert is_final(dataclasses.replace(record(0), error="length_mismatch: 1033 tokens for a target of 1024"))


def test_a_lone_newline_is_one_empty_damaged_line() -> None:
    assert parse(b"\n", None, "samples.jsonl") == Parsed([], [Damage(1, "an empty line")], b"")


def test_json_nested_too_deeply_for_the_parser_is_damage_that_says_so() -> None:
    raw = b"[" * 100_000 + b"]" * 100_000
    (damage,) = parse(raw + b"\n", None, "samples.jsonl").damaged
    assert damage == Damage(1, "JSON nested too deeply")


def test_an_object_that_is_no_record_is_damage_named_by_the_readers_first_line() -> None:
    data = {"schema": 4, "sample_id": 3}
    with pytest.raises((TypeError, ValueError, KeyError)) as refused:
        record_from_json(data)
    (damage,) = parse(json.dumps(data).encode() + b"\n", None, "samples.jsonl").damaged
    assert damage.reason == f"not a record ({str(refused.value).splitlines()[0]})"


def test_a_record_of_a_newer_fathom_is_named_by_file_and_line() -> None:
    good = json.dumps(record(0).to_json()).encode()
    with pytest.raises(NewerSchemaError) as newer:
        parse(good + b"\n" + b'{"schema": 999}\n', None, "runs/a/samples.jsonl")
    assert str(newer.value).startswith(
        "runs/a/samples.jsonl line 2 was written by a newer fathom (record schema 999"
    )
