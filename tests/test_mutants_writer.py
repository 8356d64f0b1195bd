"""A run's writer (``fathom.run.writer``) on its own: what it counts as the records come, and the
result it gives, each number set by hand (the runner's tests reach it only through whole runs)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import cast

from test_store import manifest, record

from fathom.records import AnyRecord, ErrorKind
from fathom.run.progress import RunProgress
from fathom.run.store import RunFolder
from fathom.run.writer import RecordWriter, RunResult


class Progress:
    """Stands in for the progress bars: the records it was told of, in order."""

    def __init__(self) -> None:
        self.done: list[AnyRecord] = []

    def record_done(self, record: AnyRecord) -> None:
        self.done.append(record)


def failed(index: int, kind: ErrorKind) -> AnyRecord:
    return dataclasses.replace(record(index), error=kind.error("made up"), score=0.0, output="")


def test_the_writer_counts_records_and_errors_and_splits_the_latest_failures(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    progress = Progress()
    writer = RecordWriter(folder, cast(RunProgress, progress))
    # Sample 0 graded; 1 failed on the server (a resume retries it); 2 too long and 4 refused (each
    # would fail again); 3 failed on the server, then graded: six records written, four of them
    # errors, but only the latest of each sample counts as failed: 1 retryable (1), 2 not (2 and 4).
    written = [
        record(0), failed(1, ErrorKind.BACKEND_ERROR), failed(2, ErrorKind.TOO_LONG),
        failed(3, ErrorKind.BACKEND_ERROR), record(3), failed(4, ErrorKind.REJECTED),
    ]  # fmt: skip
    for each in written:
        writer(each)
    folder.close()
    assert progress.done == written
    assert writer.result(skipped=7, seconds=4.0, backend_seconds=1.0) == RunResult(
        folder=tmp_path / "run", written=6, skipped=7, errors=4, seconds=4.0, backend_seconds=1.0,
        retryable=1, unretryable=2,
    )  # fmt: skip


def test_the_harness_share_is_the_time_outside_the_backend_and_none_of_no_time() -> None:
    def result(seconds: float, backend_seconds: float) -> RunResult:
        return RunResult(Path("run"), 0, 0, 0, seconds, backend_seconds)

    assert result(4.0, 1.0).harness_share == 0.75  # 1 - 1/4
    assert result(4.0, 4.0).harness_share == 0.0
    assert result(0.0, 0.0).harness_share == 0.0  # a run of no time: no share, and no division by 0
    assert result(0.0, 0.0).retryable == result(0.0, 0.0).unretryable == 0  # the defaults
