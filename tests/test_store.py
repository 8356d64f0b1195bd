from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fathom.errors import NewerSchemaError, RunFolderError
from fathom.manifest import Manifest
from fathom.records import SampleRecord
from fathom.run.store import LOCK, QUARANTINE, SAMPLES, RunFolder
from fathom.schemas import MANIFEST_SCHEMA, RECORD_SCHEMA
from fathom.spec import RunSpec


def record(index: int) -> SampleRecord:
    return SampleRecord(
        sample_id=f"niah|L1024|D0.5000|S{index}", task="niah", length=1024, depth=0.5, sample=index,
        seed=0, prompt_sha256="0" * 64, target_tokens=1024, actual_tokens=1024, needle_kind="number",
        needle_token_offsets=(500,), needle_depths=(0.5,), question="q?", answers=("1234567",),
        output="1234567", finish_reason="stop", score=1.0, matched=("1234567",), scoring="contains",
        latency_s=0.0, beyond_window=False,
    )  # fmt: skip


def manifest(seed: int = 0, model: str = "sim:perfect") -> Manifest:
    # Fifty samples a cell: the folders of these tests (and test_guarantees') hold records of samples 0 to 49.
    spec = RunSpec("niah", model, "cl100k_base", (1024,), (0.5,), 50, seed=seed)
    return Manifest.from_json({"schema": 1, "identity": identity(spec.to_json())})


def identity(spec: dict[str, object]) -> dict[str, object]:
    """A run identity with ``spec`` (as JSON) and a made-up tokenizer, task and backend."""
    return {
        "spec": spec,
        "tokenizer": {"name": "cl100k_base", "sha256": "0" * 64},
        "task": {"task": "niah", "version": 1},
        "backend": {"name": str(spec["model"]), "settings": {}},
    }


def named(path: Path) -> str:
    """A pattern for how a message names the run folder ``path``: the path as it is, not a pattern."""
    return re.escape(f"run folder '{path}'")


def started(path: Path, seed: int = 0, count: int = 2) -> RunFolder:
    folder = RunFolder(path)
    folder.start(manifest(seed))
    with folder:
        for index in range(count):
            folder.append(record(index))
    return folder


def test_records_round_trip_stamped_with_their_run(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    own = manifest().identity.fingerprint
    assert [r.sample for r in folder.records()] == [0, 1]
    assert all(r.run_identity == own for r in folder.records())
    assert folder.records()[0] == dataclasses.replace(record(0), run_identity=own)


def test_a_torn_last_line_is_left_to_readers_and_moved_aside_by_the_writer(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    with folder.samples_path.open("a") as handle:
        handle.write('{"sample_id": "niah|L1024|D0.5000|S2", "task": "ni')  # killed mid-write
    assert [r.sample for r in folder.records()] == [0, 1]  # a reader: a write in flight, left out

    folder.start(manifest())  # the writer moves it aside and appends cleanly after it
    with folder:
        folder.append(record(2))
    assert [r.sample for r in folder.records()] == [0, 1, 2]
    assert "niah|L1024|D0.5000|S2" in (folder.path / QUARANTINE).read_text()
    assert all(json.loads(line) for line in folder.samples_path.read_text().splitlines())


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"garbage\n", "not JSON"),
        (b"\xff\xfe\n", "not UTF-8 text"),
        (b"[1,2]\n", "a JSON list, not a record object"),
        (b'{"sample_id": 3}\n', "not a record"),
        (b'{"sample_id": "x", "score": "high"}\n', "not a record"),
        (b"\n", "an empty line"),
    ],
)
def test_a_damaged_line_is_named_by_readers_and_quarantined_by_the_writer(
    tmp_path: Path, line: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    folder = started(tmp_path / "run", count=1)
    with folder.samples_path.open("ab") as handle:
        handle.write(line)
    with pytest.raises(RunFolderError, match=rf"line 2 is not a record of this run: {reason}.*fathom repair"):
        folder.records()

    folder.start(manifest())  # resuming moves the line aside; appends after it stay readable
    with folder:
        folder.append(record(1))
    assert [r.sample for r in folder.records()] == [0, 1]
    assert (folder.path / QUARANTINE).read_bytes() == line
    [moved] = caplog.messages
    aside = folder.path / QUARANTINE
    assert moved.startswith(
        f"moved 1 damaged line(s) of {folder.samples_path} aside to {aside} (line 2: {reason}"
    )


def test_repair_moves_damage_aside_without_resuming(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    with folder.samples_path.open("ab") as handle:
        handle.write(b"[1]\n")
    assert RunFolder(folder.path).repair() == 1
    assert [r.sample for r in folder.records()] == [0, 1]
    assert RunFolder(folder.path).repair() == 0


def test_a_record_of_another_run_is_foreign(tmp_path: Path) -> None:
    other = started(tmp_path / "other", seed=7, count=1)
    folder = started(tmp_path / "run", count=1)
    with folder.samples_path.open("ab") as handle:
        handle.write(other.samples_path.read_bytes())
    for reader in (folder, RunFolder(folder.path)):  # the writer, and a reader that never started it
        with pytest.raises(RunFolderError, match=r"line 2 .* a record of another run"):
            reader.records()


def test_a_record_of_a_newer_fathom_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    newer = json.loads(folder.samples_path.read_text().splitlines()[0]) | {"schema": 99}
    with folder.samples_path.open("a") as handle:
        handle.write(json.dumps(newer) + "\n")
    with pytest.raises(NewerSchemaError) as refused:
        RunFolder(folder.path).records()
    assert str(refused.value) == (
        f"{folder.samples_path} line 3 was written by a newer fathom (record schema 99, this fathom reads "
        f"up to {RECORD_SCHEMA}): upgrade fathom"
    )


def test_a_different_spec_is_refused_and_named(tmp_path: Path) -> None:
    started(tmp_path / "run", seed=0)
    with pytest.raises(RunFolderError) as refused:
        RunFolder(tmp_path / "run").start(manifest(seed=1, model="sim:cliff"))
    assert str(refused.value) == (
        f"run folder '{tmp_path / 'run'}' holds a different run (differs in: backend.name, spec.model, "
        "spec.seed); refusing to mix them: pass --run-dir with a new folder, or delete this one"
    )


def test_a_folder_with_a_manifest_and_no_samples_takes_a_corrected_spec(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest(seed=0))
    folder.close()
    folder.start(manifest(seed=1))  # nothing was written under seed 0: nothing to protect
    folder.close()
    assert folder.read_manifest().spec.seed == 1
    assert caplog.messages == [
        f"run folder '{folder.path}' held a run with no samples; it now holds this one"
    ]


def test_samples_without_a_manifest_are_never_adopted(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    folder.manifest_path.unlink()
    with pytest.raises(RunFolderError) as refused:
        RunFolder(folder.path).start(manifest(seed=1))
    assert str(refused.value) == (
        f"run folder '{folder.path}' holds samples but no manifest.json, so nothing says which run wrote "
        "them: restore its manifest.json, or give --run-dir a new folder"
    )
    assert not folder.manifest_path.exists()  # nothing written, nothing taken over
    assert len(folder.samples_path.read_text().splitlines()) == 2


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"[1]", "a JSON list, not an object"),
        (b"\xff\xfe", "not JSON text"),
        (b"{not json", "not JSON text"),
        (b'{"identity": {"spec": 3}}', "no field 'tokenizer'"),
        (b"", "not JSON text"),
    ],
)
def test_a_damaged_manifest_is_refused_by_readers_and_writers(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    folder = started(tmp_path / "run")
    folder.manifest_path.write_bytes(content)
    for attempt in (folder.read_manifest, lambda: RunFolder(folder.path).start(manifest())):
        with pytest.raises(RunFolderError) as refused:
            attempt()
        assert str(refused.value) == (
            f"{folder.manifest_path} is damaged (not the manifest of a run: {reason}): restore it from a "
            "copy, or move the folder aside and start the run again in a new one"
        )


@pytest.mark.parametrize(
    ("error", "reason"), [(ValueError("first line\nsecond line"), "first line"), (TypeError(), "TypeError")]
)
def test_a_manifest_refused_by_its_reader_is_damaged_for_the_first_line_of_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, reason: str
) -> None:
    folder = started(tmp_path / "run")

    def refuse(data: object) -> Manifest:
        raise error

    monkeypatch.setattr(Manifest, "from_json", refuse)
    with pytest.raises(RunFolderError, match=rf"\(not the manifest of a run: {reason}\): restore it"):
        folder.read_manifest()


def test_a_manifest_of_a_newer_fathom_is_named_with_its_path(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    folder.manifest_path.write_text('{"schema": 99, "identity": {}}')
    with pytest.raises(NewerSchemaError) as refused:
        folder.read_manifest()
    assert str(refused.value) == (
        f"{folder.manifest_path} was written by a newer fathom (manifest schema 99, this fathom reads up to "
        f"{MANIFEST_SCHEMA}): upgrade fathom"
    )


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (PermissionError(13, "Permission denied"), "Permission denied"),
        (OSError("no such device"), "no such device"),
    ],
)
@pytest.mark.parametrize("name", ["manifest.json", SAMPLES])
def test_an_unreadable_manifest_or_samples_file_is_named_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, why: str, name: str
) -> None:
    folder = started(tmp_path / "run")

    def refusing(real: Callable[..., Any]) -> Callable[..., Any]:
        def read(path: Path | str, *args: Any, **kwargs: Any) -> Any:
            if Path(path).name == name:
                raise error  # a file the user cannot read (tests may run as root)
            return real(path, *args, **kwargs)

        return read

    # The manifest is read whole from a descriptor (never through a link), samples.jsonl line by
    # line from a handle.
    monkeypatch.setattr(os, "open", refusing(os.open))
    monkeypatch.setattr(Path, "open", refusing(Path.open))
    with pytest.raises(RunFolderError) as refused:
        RunFolder(folder.path).records()
    assert str(refused.value) == f"cannot read {folder.path / name}: {why}"


@pytest.mark.parametrize(("damaged", "more"), [(1, ""), (2, " (and 1 more)"), (3, " (and 2 more)")])
def test_a_reader_names_the_first_damaged_line_and_counts_the_others(
    tmp_path: Path, damaged: int, more: str
) -> None:
    folder = started(tmp_path / "run", count=1)
    with folder.samples_path.open("ab") as handle:
        handle.write(b"garbage\n" * damaged)
    with pytest.raises(RunFolderError) as refused:
        folder.records()
    assert str(refused.value) == (
        f"{folder.samples_path} line 2 is not a record of this run: not JSON{more}; "
        f"'fathom repair {folder.path}' moves damaged lines aside to {QUARANTINE}"
    )


def test_a_folder_without_manifest_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="not a fathom run folder"):
        RunFolder(tmp_path).read_manifest()
    with pytest.raises(RunFolderError, match=rf"^{named(tmp_path / 'nope')} does not exist$"):
        RunFolder(tmp_path / "nope").read_manifest()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(RunFolderError, match=rf"^{named(tmp_path / 'afile')} is not a folder$"):
        RunFolder(tmp_path / "afile").read_manifest()


def test_unusable_folders_are_named(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(RunFolderError, match=r"'.*afile' is a file"):
        RunFolder(afile).start(manifest())
    with pytest.raises(RunFolderError, match=r"cannot create run folder '.*afile/sub': Not a directory"):
        RunFolder(afile / "sub").start(manifest())


def test_an_unwritable_derived_file_is_a_clear_error(tmp_path: Path) -> None:
    folder = started(tmp_path / "run")
    (folder.path / "summary.json").mkdir()  # stands in for a read-only file (tests may run as root)
    with pytest.raises(RunFolderError, match=r"cannot write .*summary.json: Is a directory"):
        folder.write_derived("summary.json", "{}")


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    try:
        with pytest.raises(RunFolderError, match=r"is in use by pid \d+"):
            RunFolder(tmp_path / "run").start(manifest())
        assert [r.sample for r in folder.records()] == []  # a reader needs no lock
    finally:
        folder.close()
    RunFolder(tmp_path / "run").start(manifest())  # given back on close


@pytest.mark.parametrize(
    ("content", "holder"),
    [(b"\xff" + b"9" * 40, "\ufffd" + "9" * 31), (b" \n", "unknown")],  # not a pid fathom writes: as read
)
def test_a_lock_held_names_its_holder_from_the_first_32_bytes_of_the_lock_file(
    tmp_path: Path, content: bytes, holder: str
) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    try:
        (folder.path / LOCK).write_bytes(content)
        with pytest.raises(RunFolderError) as refused:
            RunFolder(folder.path).start(manifest())
    finally:
        folder.close()
    assert str(refused.value) == (
        f"run folder '{folder.path}' is in use by pid {holder} (another fathom run writes to it): "
        "wait for it to finish, or give --run-dir another folder"
    )


def test_a_folder_whose_lock_cannot_be_opened_is_named_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opener = os.open

    def refusing(path: str | Path, flags: int, mode: int = 0o777) -> int:
        if Path(path).name == LOCK:
            raise PermissionError(13, "Permission denied")  # a read-only folder (tests may run as root)
        return opener(path, flags, mode)

    monkeypatch.setattr("fathom.run.store.os.open", refusing)
    with pytest.raises(RunFolderError) as refused:
        RunFolder(tmp_path / "run").start(manifest())
    assert str(refused.value) == f"cannot write in run folder '{tmp_path / 'run'}': Permission denied"


def test_a_dead_writers_lock_does_not_block(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store import manifest
        from fathom.run.store import RunFolder
        RunFolder(__import__("pathlib").Path({str(tmp_path / "run")!r})).start(manifest())
        os._exit(0)  # dies holding the lock, never closing the folder
    """)
    subprocess.run([sys.executable, "-c", script], check=True)
    assert (tmp_path / "run" / LOCK).is_file()  # the dead writer left its lock file behind
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())  # the kernel dropped the dead process's lock: no "in use" refusal
    with folder:
        folder.append(record(0))
    assert [r.sample for r in folder.records()] == [0]


def test_a_folder_held_beside_its_run_takes_back_only_its_own_runs_manifest(tmp_path: Path) -> None:
    """What ``fathom judge`` does: hold the folder (no run writes meanwhile), then rewrite its manifest
    with one of the same identity; a folder not held, or another run's manifest, is refused."""
    started(tmp_path / "run").close()
    judged = dataclasses.replace(manifest(), planned=7)
    with pytest.raises(RunFolderError, match="was not taken for writing"):
        RunFolder(tmp_path / "run").rewrite_manifest(judged)
    folder = RunFolder(tmp_path / "run")
    assert folder.hold() == manifest()
    try:
        with pytest.raises(RunFolderError, match=r"is in use by pid \d+"):
            RunFolder(tmp_path / "run").start(manifest())
        with pytest.raises(RunFolderError, match="the manifest of another run"):
            folder.rewrite_manifest(manifest(seed=1))
        folder.rewrite_manifest(judged)
    finally:
        folder.close()
    assert RunFolder(tmp_path / "run").read_manifest().planned == 7


def test_a_record_is_one_line_of_sorted_keys_in_a_file_others_may_read_only(tmp_path: Path) -> None:
    old = os.umask(0)  # the mode as given, not as the user's umask trims it
    try:
        folder = started(tmp_path / "run", count=1)
    finally:
        os.umask(old)
    line = folder.samples_path.read_bytes().decode()
    keys = list(json.loads(line))
    assert line.count("\n") == 1 and line.endswith("\n") and keys == sorted(keys)
    for name in (SAMPLES, LOCK):
        assert stat.S_IMODE((folder.path / name).stat().st_mode) == 0o644, name
    # The manifest is for people to read too: two-space indents, keys sorted.
    text = folder.manifest_path.read_text()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert text.startswith('{\n  "backend": {\n    "exact_lengths": true,')


def test_a_record_appended_to_a_folder_not_started_is_refused_naming_the_folder(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match=rf"^{named(tmp_path)} was not started for writing$"):
        RunFolder(tmp_path).append(record(0))


def test_a_record_written_in_part_leaves_no_half_line_and_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = started(tmp_path / "run", count=1)
    whole, write = folder.samples_path.read_bytes(), os.write

    def half(fd: int, data: bytes) -> int:  # what a disk that fills up mid-write does
        return write(fd, data[: len(data) // 2])

    monkeypatch.setattr("fathom.run.store.os.write", half)
    folder.start(manifest())
    with folder, pytest.raises(RunFolderError) as refused:
        folder.append(record(1))
    assert str(refused.value) == f"could not write a whole record to {folder.samples_path}: is the disk full?"
    assert folder.samples_path.read_bytes() == whole


def placed(base: Manifest, host: str, created: str, **transport: object) -> Manifest:
    """``base`` as started on ``host`` at ``created`` with the transport settings given."""
    environment = dataclasses.replace(base.environment, host=host, created=created, cpu={"model": host})
    return dataclasses.replace(
        base, environment=environment, backend=dataclasses.replace(base.backend, transport=transport)
    )


def test_a_resume_elsewhere_is_listed_with_the_records_before_it_and_one_here_is_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "run"
    here = placed(manifest(), "here", "2026-11-24T10:00:00+00:00", concurrency=4)

    def resume(by: Manifest, index: int) -> Manifest:
        folder = RunFolder(path)
        folder.start(by)
        with folder:
            folder.append(record(index))
        return folder.read_manifest()

    assert resume(here, 0).resumes == ()  # the first start: its place is the manifest's own
    later_here = placed(here, "here", "2026-11-25T10:00:00+00:00", concurrency=4)
    assert resume(later_here, 1) == here  # the same place a day later: nothing to say
    there = placed(here, "there", "2026-11-26T10:00:00+00:00", concurrency=4)
    assert not caplog.records  # nor a word
    after_there = resume(there, 2)
    assert [r.getMessage() for r in caplog.records] == [
        f"run folder '{path}' is resumed on another machine, build or setting than its last start "
        "(differs in: host, cpu): the manifest lists this start, after the run's first 2 records"
    ]
    assert [(r.records_before, r.environment) for r in after_there.resumes] == [(2, there.environment)]
    assert resume(placed(there, "there", "2026-11-27T10:00:00+00:00", concurrency=4), 3) == after_there
    slower = placed(here, "here", "2026-11-28T10:00:00+00:00", concurrency=1)  # back, one at a time
    listed = resume(slower, 4)
    assert (
        "(differs in: host, cpu, transport): the manifest lists this start, after the run's first 4 records"
        in (caplog.records[-1].getMessage())
    )
    assert [(r.records_before, r.environment.host, r.transport) for r in listed.resumes] == [
        (2, "there", {"concurrency": 4}), (4, "here", {"concurrency": 1})
    ]  # fmt: skip
    assert listed.environment == here.environment and listed.backend == here.backend  # the first start's
    assert [(s.records_before, s.environment.host) for s in listed.starts()] == [
        (0, "here"),
        (2, "there"),
        (4, "here"),
    ]
    assert [later.differences(earlier) for earlier, later in itertools.pairwise(listed.starts())] == [
        ["host", "cpu"], ["host", "cpu", "transport"]
    ]  # fmt: skip
    written = json.loads(RunFolder(path).manifest_path.read_text())
    assert written["schema"] == MANIFEST_SCHEMA and len(written["resumes"]) == 2
    assert Manifest.from_json(written) == listed


def test_a_start_on_a_folder_without_records_lists_no_resume(tmp_path: Path) -> None:
    path = tmp_path / "run"
    here = placed(manifest(), "here", "2026-11-24T10:00:00+00:00")
    for start in (here, placed(here, "there", "2026-11-25T10:00:00+00:00")):  # none made here yet
        folder = RunFolder(path)
        folder.start(start)
        folder.close()
    assert folder.read_manifest().resumes == ()
