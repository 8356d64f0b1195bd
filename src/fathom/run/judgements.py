"""judgements.jsonl: an LLM judge's verdicts on a run's answers, beside samples.jsonl.

The same promises as samples.jsonl: append-only, one line a verdict, each on disk before the next,
written only under the run folder's lock (``RunFolder.hold``); damaged lines moved aside to
``judgements.quarantine`` by the writer, and left out with a warning by readers.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from fathom.errors import RunFolderError
from fathom.judgement import JudgementRecord
from fathom.run.lines import Parsed, parse_lines
from fathom.run.store import append_line, quarantine

JUDGEMENTS = "judgements.jsonl"
JUDGEMENTS_QUARANTINE = "judgements.quarantine"

log = logging.getLogger(__name__)


def _parse(folder: Path) -> Parsed[JudgementRecord]:
    path = folder / JUDGEMENTS
    try:
        data = path.read_bytes() if path.exists() else b""
    except OSError as exc:
        raise RunFolderError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_lines(data, str(path), JudgementRecord.from_json)


def read_judgements(folder: Path) -> list[JudgementRecord]:
    """The run's judgements, in the order written; damaged lines are left out, with a warning."""
    parsed = _parse(folder)
    if parsed.damaged:
        first = parsed.damaged[0]
        log.warning(
            "left out %d damaged line(s) of %s (line %d: %s); 'fathom judge' moves them aside",
            len(parsed.damaged),
            folder / JUDGEMENTS,
            first.line,
            first.reason,
        )
    return parsed.records


class JudgementWriter:
    """Appends to judgements.jsonl of a run folder whose lock the caller holds."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / JUDGEMENTS
        parsed = _parse(folder)
        quarantine(parsed, self.path, folder / JUDGEMENTS_QUARANTINE)
        self.existing = parsed.records
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: JudgementRecord) -> None:
        append_line(self._fd, record.to_json(), self.path)

    def close(self) -> None:
        os.close(self._fd)
