from __future__ import annotations

import json
from pathlib import Path

import pytest

from fathom.errors import RunFolderError
from fathom.records import SampleRecord
from fathom.store import TORN, RunFolder


def record(index: int) -> SampleRecord:
    return SampleRecord(
        sample_id=f"niah|L1024|D0.5000|S{index}", task="niah", length=1024, depth=0.5, sample=index,
        seed=0, prompt_sha256="0" * 64, target_tokens=1024, actual_tokens=1024, needle_kind="number",
        needle_token_offsets=(500,), needle_depths=(0.5,), question="q?", answers=("1234567",),
        output="1234567", finish_reason="stop", score=1.0, matched=("1234567",), scoring="contains",
        latency_s=0.0, beyond_window=False,
    )  # fmt: skip


def manifest(seed: int = 0) -> dict[str, object]:
    return {"schema": 1, "identity": {"spec": {"seed": seed, "model": "sim:perfect"}}}


def test_records_round_trip_and_survive_a_torn_last_line(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    with folder:
        folder.append(record(0))
        folder.append(record(1))
    with folder.samples_path.open("a") as handle:
        handle.write('{"sample_id": "niah|L1024|D0.5000|S2", "task": "ni')  # killed mid-write
    assert [r.sample for r in folder.records()] == [0, 1]

    folder.start(manifest())  # resuming moves the torn line aside and appends cleanly after it
    with folder:
        folder.append(record(2))
    assert [r.sample for r in folder.records()] == [0, 1, 2]
    assert folder.records()[0] == record(0)
    assert "niah|L1024|D0.5000|S2" in (folder.path / TORN).read_text()
    assert all(json.loads(line) for line in folder.samples_path.read_text().splitlines())


def test_a_different_spec_is_refused_and_named(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest(seed=0))
    with pytest.raises(RunFolderError, match=r"differs in: spec.seed.*--run-dir"):
        RunFolder(tmp_path / "run").start(manifest(seed=1))


def test_a_corrupt_middle_line_is_reported_not_skipped(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    with folder:
        folder.append(record(0))
    with folder.samples_path.open("a") as handle:
        handle.write("garbage\n")
    with folder:
        folder.append(record(1))
    with pytest.raises(RunFolderError, match="line 2 is not a record"):
        folder.records()


def test_a_folder_without_manifest_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="not a fathom run folder"):
        RunFolder(tmp_path).read_manifest()
