"""A run's records written as they come, and what the run did: shared by the local runner and the
Ray executor (``fathom.run.distributed``), which both hold the run folder's lock and append."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fathom.records import AnyRecord
from fathom.run.progress import RunProgress
from fathom.run.store import RunFolder, is_final


@dataclass(frozen=True)
class RunResult:
    """What a run did: the samples it wrote, those it found done, its errors, and where its time went."""

    folder: Path
    written: int
    skipped: int
    errors: int  # records this run wrote with an error
    seconds: float  # wall time of the run
    backend_seconds: float  # of which the model's own work: loading it, and inside generate
    # Samples whose latest record is an error, after this run: those a resume retries (the server
    # failed), and those it cannot help (a prompt too long for the backend, say).
    retryable: int = 0
    unretryable: int = 0

    @property
    def harness_share(self) -> float:
        """The part of the run that was fathom's, not the model's."""
        return 1.0 - self.backend_seconds / self.seconds if self.seconds > 0 else 0.0


class RecordWriter:
    """Appends a run's records to its folder as they come and moves the progress on, counting them
    rather than keeping them (a long run's records would fill the memory); then the run's result."""

    def __init__(self, folder: RunFolder, progress: RunProgress) -> None:
        self.folder, self.progress, self.counts = folder, progress, Counter[str]()

    def __call__(self, record: AnyRecord) -> None:
        self.folder.append(record)
        self.counts.update(records=1, errors=int(record.error is not None))
        self.progress.record_done(record)

    def result(self, skipped: int, seconds: float, backend_seconds: float) -> RunResult:
        """The run's result, its errors split by whether a resume retries them."""
        failed = [r for r in self.folder.latest() if r.error is not None]
        retryable = sum(not is_final(r) for r in failed)
        counts = self.counts
        return RunResult(
            self.folder.path, counts["records"], skipped, counts["errors"], seconds, backend_seconds,
            retryable, len(failed) - retryable,
        )  # fmt: skip
