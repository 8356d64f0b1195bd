"""The run folder's details that its behaviour tests leave open, each pinned by a value worked out
by hand: what a refused resume names as the difference, how many lines a repair moved, and how a
record's damage is described."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from test_store import manifest, record, started

from fathom.errors import NewerSchemaError, RunFolderError, first_line
from fathom.records import record_from_json
from fathom.run.lines import Damage, Parsed, parse
from fathom.run.store import MANIFEST, QUARANTINE, SAMPLES, RunFolder, _differences, is_final
from fathom.safe_files import LinkedFileError
from fathom.schemas import RECORD_SCHEMA


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
    assert first_line(ValueError("field 'score' is 'x', not float\nmore detail")) == (
        "field 'score' is 'x', not float"
    )
    assert first_line(ValueError("one line")) == "one line"
    # An error without a message is named by its type.
    assert first_line(KeyError()) == "KeyError"
    assert first_line(TypeError("")) == "TypeError"
    # A message that opens with blank lines (a library's) is named by its first words, and one of
    # nothing but white space by its type.
    assert first_line(RuntimeError("\n  CUDA out of memory.\nTried to allocate")) == "CUDA out of memory."
    assert first_line(OSError(" \n ")) == "OSError"


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


def test_an_object_that_is_no_record_is_damage_named_by_the_readersfirst_line() -> None:
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


# The survivors of the fifth round (issue #32, docs/mutation.md): the folder's identity read back,
# claim's lock, a repair's two answers to a newer record, and two refusals read whole.


def test_a_folders_identity_is_the_one_its_records_carry_read_once(tmp_path: Path) -> None:
    started(tmp_path / "run")
    stamped = json.loads((tmp_path / "run" / SAMPLES).read_text().splitlines()[0])["run_identity"]
    assert isinstance(stamped, str) and len(stamped) == 16
    reader = RunFolder(tmp_path / "run")  # never started: the identity comes from the manifest
    assert reader.identity() == stamped
    (tmp_path / "run" / MANIFEST).unlink()  # read once and kept
    assert reader.identity() == stamped


def test_a_claimed_folder_refuses_a_second_writer_at_once_and_a_new_folder_is_left_alone(
    tmp_path: Path,
) -> None:
    started(tmp_path / "run").close()
    first = RunFolder(tmp_path / "run")
    first.claim()
    try:
        with pytest.raises(RunFolderError) as refused:
            RunFolder(tmp_path / "run").claim()
        first.start(manifest())  # the claim's lock is the writer's: start takes no second one
        first.append(record(2))
    finally:
        first.close()
    assert str(refused.value) == (
        f"run folder '{tmp_path / 'run'}' is in use by pid {os.getpid()} (another fathom run writes to "
        "it): wait for it to finish, or give --run-dir another folder"
    )
    assert [r.sample for r in RunFolder(tmp_path / "run").records()] == [0, 1, 2]
    RunFolder(tmp_path / "new").claim()  # no manifest: nothing to claim, nothing made
    assert not (tmp_path / "new").exists()


def test_a_start_with_other_labels_on_a_folder_of_records_is_refused_whole(tmp_path: Path) -> None:
    started(tmp_path / "run")
    with pytest.raises(RunFolderError) as refused:
        RunFolder(tmp_path / "run").start(manifest().labelled({"step": "2"}))
    assert str(refused.value) == (
        f"run folder '{tmp_path / 'run'}' holds records labelled no labels, not step=2: resume it "
        "without --label (it keeps its own), or give another checkpoint's run a new --run-dir"
    )


def test_repair_refuses_a_newer_record_naming_its_option_which_moves_the_line_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = started(tmp_path / "run")
    newer = json.dumps(json.loads(folder.samples_path.read_text().splitlines()[0]) | {"schema": 99})
    with folder.samples_path.open("a") as handle:
        handle.write(newer + "\n")
    before = folder.samples_path.read_bytes()
    with pytest.raises(RunFolderError) as refused:
        RunFolder(folder.path).repair()
    assert str(refused.value) == (
        f"{folder.samples_path} line 3 was written by a newer fathom (record schema 99, this fathom reads "
        f"up to {RECORD_SCHEMA}): upgrade fathom, or 'fathom repair {folder.path} --set-aside-newer' "
        f"moves such lines aside to {QUARANTINE} (a newer fathom can read them there)"
    )
    assert folder.samples_path.read_bytes() == before  # refused: nothing moved
    assert RunFolder(folder.path).repair(set_aside_newer=True) == 1
    assert (folder.path / QUARANTINE).read_text() == newer + "\n"
    assert [r.sample for r in folder.records()] == [0, 1]
    assert caplog.messages == [
        f"moved 1 damaged line(s) of {folder.samples_path} aside to {folder.path / QUARANTINE} (line 3: "
        f"not a record (a newer fathom's record, schema 99; this one reads up to {RECORD_SCHEMA}))"
    ]


def test_a_record_with_an_impossible_value_is_refused_whole_and_those_before_it_kept(
    tmp_path: Path,
) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    with folder:
        folder.append(record(0))
        with pytest.raises(RunFolderError) as refused:
            folder.append(dataclasses.replace(record(1), score=2.0))
    assert str(refused.value) == (
        f"refusing to write the record of 'niah|L1024|D0.5000|S1' into {folder.samples_path}: field "
        "'score' is 2.0, not a finite number in [0, 1] (a scoring method or backend gave an impossible "
        "value; the records before it are kept)"
    )
    assert [r.sample for r in folder.records()] == [0]


def test_a_new_folder_holding_a_link_at_its_records_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / SAMPLES).symlink_to(outside)
    with pytest.raises(LinkedFileError) as refused:
        RunFolder(tmp_path / "run").start(manifest())
    assert str(refused.value).startswith(
        f"'{tmp_path / 'run' / SAMPLES}' is a link or no regular file where fathom keeps its own files"
    )
    # Refused before the lock file is made or the manifest written: the folder holds the link alone.
    assert [p.name for p in (tmp_path / "run").iterdir()] == [SAMPLES]
    assert outside.read_bytes() == b""


@pytest.mark.parametrize("name", [MANIFEST, QUARANTINE])
def test_a_reader_refuses_a_link_at_the_manifest_or_the_quarantine_and_takes_a_plain_subfolder(
    tmp_path: Path, name: str
) -> None:
    other = started(tmp_path / "other")
    folder = started(tmp_path / "run")
    (folder.path / "notes").mkdir()  # no file of fathom's: read past
    assert [r.sample for r in RunFolder(folder.path).records()] == [0, 1]
    (folder.path / name).unlink(missing_ok=True)
    (folder.path / name).symlink_to(other.path / MANIFEST)  # a regular file, through a link
    with pytest.raises(LinkedFileError) as refused:
        RunFolder(folder.path).read_manifest()
    assert str(refused.value).startswith(
        f"'{folder.path / name}' is a link or no regular file where fathom keeps its own files"
    )
