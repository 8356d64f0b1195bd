"""Durability, observed rather than assumed: ``os.fsync``, ``os.write`` and ``os.replace`` are spied
on, each call logged with the file its descriptor names, so that each promise of docs/run-folder.md's
Guarantees is checked as an order of calls: every record's line (samples.jsonl, judgements.jsonl,
qualifications.jsonl) written and then fsynced before its append returns, and every whole-file write
made as a new file, flushed, fsynced and only then renamed over its target.

A spy, not a crash: what a power cut would lose cannot be observed in a test, but the calls that
prevent the loss can be, and a dropped or moved ``fsync`` changes them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_store import manifest, record

from fathom.judgement import JudgementRecord, QualificationRecord
from fathom.run.judgements import (
    JUDGEMENTS,
    QUALIFICATIONS,
    JudgementWriter,
    QualificationWriter,
    read_qualifications,
)
from fathom.run.store import QUARANTINE, SAMPLES, RunFolder
from fathom.safe_files import open_append, write_file


@dataclass(frozen=True)
class Call:
    name: str  # "write", "fsync" or "replace"
    path: str  # the file written or fsynced (what its descriptor names), or the file renamed
    size: int  # the file's size on disk when fsync was called (-1 for the others)
    target: str = ""  # where a replace renames to


def _path_of(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


class Spy:
    """The durability calls made, in order, with the files they touched."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[Call] = []
        real_fsync, real_write, real_replace = os.fsync, os.write, os.replace

        def fsync(fd: int) -> None:
            self.calls.append(Call("fsync", _path_of(fd), os.fstat(fd).st_size))
            real_fsync(fd)

        def write(fd: int, data: Any) -> int:
            self.calls.append(Call("write", _path_of(fd), -1))
            return real_write(fd, data)

        def replace(src: Any, dst: Any, **kwargs: Any) -> None:
            self.calls.append(Call("replace", str(Path(src).resolve()), -1, str(Path(dst).resolve())))
            real_replace(src, dst, **kwargs)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "replace", replace)

    def during(self, action: Callable[[], object]) -> list[Call]:
        """The calls ``action`` made before it returned."""
        start = len(self.calls)
        action()
        return self.calls[start:]


def _appended_and_synced(calls: list[Call], path: Path) -> None:
    """``calls`` end with the line's write to ``path`` and then an fsync of ``path`` holding it."""
    on_file = [c for c in calls if c.path == str(path.resolve())]
    assert [c.name for c in on_file][-2:] == ["write", "fsync"], calls
    assert on_file[-1].size == path.stat().st_size  # the fsync came after the whole line was written


def test_each_sample_record_is_fsynced_before_its_append_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    spy = Spy(monkeypatch)
    with folder:
        for index in range(3):
            calls = spy.during(lambda index=index: folder.append(record(index)))
            _appended_and_synced(calls, folder.samples_path)
            # one line, and it is on disk: as many lines as appends so far
            assert len(folder.samples_path.read_bytes().splitlines()) == index + 1


def judgement(index: int) -> JudgementRecord:
    return JudgementRecord(
        sample_id=f"niah|L1024|D0.5000|S{index}", prompt_sha256="0" * 64, answer_sha256="1" * 64,
        role="judge", judge="sim-judge:reference", judge_identity="2" * 16, rubric="mine@1",
        rubric_sha256="3" * 64, score=1, reason="", reply="", attempts=1, latency_s=0.1,
    )  # fmt: skip


def qualification(agreed: int) -> QualificationRecord:
    return QualificationRecord(
        judge="sim-judge:reference", judge_identity="1" * 16, rubric="qa-correctness@1",
        rubric_sha256="2" * 64, set="qa-judge@1", set_sha256="3" * 64, items=10, agreed=agreed,
        unreadable=0, accuracy=agreed / 10, kappa=0.8, adversarial=4, flips=1, flip_rate=0.25,
        by_category={"plain": {"items": 6, "agreed": 6, "flips": 0, "unreadable": 0}},
        thresholds={"accuracy": 0.8, "kappa": 0.6, "flip_rate": 0.1}, passed=False,
        failures=("flip rate 0.25 above 0.1",), verdicts={"a": 1, "b": None},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("writer", "name", "made"),
    [
        (JudgementWriter, JUDGEMENTS, judgement),
        (QualificationWriter, QUALIFICATIONS, qualification),
    ],
)
def test_each_judges_record_is_fsynced_before_its_append_returns(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    writer: Callable[[Path], JudgementWriter | QualificationWriter],
    name: str,
    made: Callable[[int], Any],
) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    folder.close()
    opened = writer(folder.path)
    spy = Spy(monkeypatch)
    try:
        for index in range(3):
            calls = spy.during(lambda index=index: opened.append(made(index)))
            _appended_and_synced(calls, folder.path / name)
    finally:
        opened.close()
    lines = (folder.path / name).read_text().splitlines()
    assert [json.loads(line)["record"] for line in lines] == [made(0).record] * 3


def test_a_qualification_run_syncs_every_record_it_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fathom.judge.qualify import record_qualifications

    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    folder.close()
    spy = Spy(monkeypatch)
    record_qualifications(folder.path, [qualification(7), qualification(8)])
    path = str((folder.path / QUALIFICATIONS).resolve())
    on_file = [(c.name, c.size) for c in spy.calls if c.path == path]
    sizes = [len(line) + 1 for line in (folder.path / QUALIFICATIONS).read_bytes().splitlines()]
    assert on_file == [("write", -1), ("fsync", sizes[0]), ("write", -1), ("fsync", sizes[0] + sizes[1])]
    assert [r.agreed for r in read_qualifications(folder.path)] == [7, 8]


def _replaced_after_sync(calls: list[Call], target: Path, content: bytes) -> None:
    """A new file holding all of ``content`` was fsynced, then renamed over ``target``, and nothing
    else was renamed there."""
    renames = [c for c in calls if c.name == "replace" and c.target == str(target.resolve())]
    assert len(renames) == 1, calls
    partial = renames[0].path
    assert partial != str(target.resolve())  # written under another name, never in place
    syncs = [i for i, c in enumerate(calls) if c.name == "fsync" and c.path == partial]
    assert syncs, f"{partial} renamed over {target} without an fsync"
    assert syncs[-1] < calls.index(renames[0])
    assert calls[syncs[-1]].size == len(content)  # flushed before the fsync: all of it synced
    # and the new name itself on disk: the folder synced after the rename
    folder = str(target.parent.resolve())
    assert [c for c in calls[calls.index(renames[0]) :] if c.name == "fsync" and c.path == folder], calls
    assert target.read_bytes() == content


@pytest.mark.parametrize("content", [b"", b"{}\n", b"x" * 100_000])
def test_a_whole_file_is_written_aside_fsynced_and_only_then_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    target = tmp_path / "summary.json"
    target.write_bytes(b"the old summary")
    spy = Spy(monkeypatch)
    _replaced_after_sync(spy.during(lambda: write_file(target, content)), target, content)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no partial left behind


def test_the_manifest_is_written_aside_fsynced_and_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = RunFolder(tmp_path / "run")
    spy = Spy(monkeypatch)
    spy.during(lambda: folder.start(manifest()))
    folder.close()
    _replaced_after_sync(spy.calls, folder.manifest_path, folder.manifest_path.read_bytes())


def test_quarantined_lines_are_on_disk_before_the_records_file_is_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    with folder:
        folder.append(record(0))
    with folder.samples_path.open("ab") as handle:
        handle.write(b"not json\n")
    spy = Spy(monkeypatch)
    spy.during(lambda: folder.start(manifest()))  # the writer's resume moves the damage aside
    folder.close()
    aside = str((folder.path / QUARANTINE).resolve())
    aside_synced = [i for i, c in enumerate(spy.calls) if c.name == "fsync" and c.path == aside]
    rewrite = next(
        i
        for i, c in enumerate(spy.calls)
        if c.name == "replace" and c.target == str(folder.samples_path.resolve())
    )
    assert aside_synced and aside_synced[0] < rewrite
    assert spy.calls[aside_synced[0]].size == len(b"not json\n")
    assert (folder.path / QUARANTINE).read_bytes() == b"not json\n"
    _replaced_after_sync(spy.calls, folder.samples_path, folder.samples_path.read_bytes())
    assert folder.samples_path.name == SAMPLES


def test_a_new_records_file_has_its_name_synced_and_an_old_one_costs_no_folder_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / SAMPLES
    spy = Spy(monkeypatch)
    os.close(open_append(path))
    assert [(c.name, c.path) for c in spy.calls] == [("fsync", str(tmp_path.resolve()))]
    os.close(open_append(path))  # it exists now: nothing new to name
    assert len(spy.calls) == 1
