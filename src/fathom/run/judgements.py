"""judgements.jsonl: an LLM judge's verdicts on a run's answers, beside samples.jsonl; and
qualifications.jsonl: how the run's judges did on a qualification set (``fathom judge RUN --qualify``).

The same promises as samples.jsonl: append-only, one line a record, each on disk before the next,
written only under the run folder's lock (``RunFolder.hold``); damaged lines moved aside (to
``judgements.quarantine``, ``qualifications.quarantine``) by the writer, and left out with a warning
by readers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from fathom.errors import RunFolderError
from fathom.judgement import JudgementRecord, QualificationRecord
from fathom.run.lines import Parsed, parse_lines
from fathom.run.store import append_line, quarantine

JUDGEMENTS = "judgements.jsonl"
JUDGEMENTS_QUARANTINE = "judgements.quarantine"
QUALIFICATIONS = "qualifications.jsonl"
QUALIFICATIONS_QUARANTINE = "qualifications.quarantine"

R = TypeVar("R", JudgementRecord, QualificationRecord)

log = logging.getLogger(__name__)


def _parse(folder: Path, name: str, reader: Callable[[dict[str, Any]], R]) -> Parsed[R]:
    path = folder / name
    try:
        data = path.read_bytes() if path.exists() else b""
    except OSError as exc:
        raise RunFolderError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_lines(data, str(path), reader)


def _read(folder: Path, name: str, reader: Callable[[dict[str, Any]], R]) -> list[R]:
    parsed = _parse(folder, name, reader)
    if parsed.damaged:
        first = parsed.damaged[0]
        log.warning(
            "left out %d damaged line(s) of %s (line %d: %s); 'fathom judge' moves them aside",
            len(parsed.damaged),
            folder / name,
            first.line,
            first.reason,
        )
    return parsed.records


def read_judgements(folder: Path) -> list[JudgementRecord]:
    """The run's judgements, in the order written; damaged lines are left out, with a warning."""
    return _read(folder, JUDGEMENTS, JudgementRecord.from_json)


def read_qualifications(folder: Path) -> list[QualificationRecord]:
    """The run's judges' qualifications, in the order written; damaged lines left out, with a warning."""
    return _read(folder, QUALIFICATIONS, QualificationRecord.from_json)


class _Writer(Generic[R]):
    """Appends to one of the judges' files of a run folder whose lock the caller holds."""

    def __init__(self, folder: Path, name: str, aside: str, reader: Callable[[dict[str, Any]], R]) -> None:
        self.path = folder / name
        parsed = _parse(folder, name, reader)
        quarantine(parsed, self.path, folder / aside)
        self.existing: list[R] = parsed.records
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: R) -> None:
        append_line(self._fd, record.to_json(), self.path)

    def close(self) -> None:
        os.close(self._fd)


class JudgementWriter(_Writer[JudgementRecord]):
    def __init__(self, folder: Path) -> None:
        super().__init__(folder, JUDGEMENTS, JUDGEMENTS_QUARANTINE, JudgementRecord.from_json)


class QualificationWriter(_Writer[QualificationRecord]):
    def __init__(self, folder: Path) -> None:
        super().__init__(folder, QUALIFICATIONS, QUALIFICATIONS_QUARANTINE, QualificationRecord.from_json)
