"""judgements.jsonl: an LLM judge's verdicts on a run's answers, beside samples.jsonl; and
qualifications.jsonl: how the run's judges did on a qualification set (``fathom judge RUN --qualify``).

The same promises as samples.jsonl: append-only, one line a record, each on disk before the next,
written only under the run folder's lock (``RunFolder.hold``); read line by line; damaged lines
(impossible values too: a score off its judge's scale, a count below 0, a rate outside [0, 1]) moved
aside (to ``judgements.quarantine``, ``qualifications.quarantine``) by the writer, and left out with
a warning by readers.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from fathom.judgement import JudgementRecord, QualificationRecord
from fathom.manifest import JudgeIdentity
from fathom.record_bounds import within
from fathom.run.appends import append_line, append_to, quarantine
from fathom.run.lines import read_file
from fathom.run.store import RunFolder

JUDGEMENTS = "judgements.jsonl"
JUDGEMENTS_QUARANTINE = "judgements.quarantine"
QUALIFICATIONS = "qualifications.jsonl"
QUALIFICATIONS_QUARANTINE = "qualifications.quarantine"

R = TypeVar("R", JudgementRecord, QualificationRecord)

log = logging.getLogger(__name__)


def judgement_reader(judges: Sequence[JudgeIdentity]) -> Callable[[dict[str, Any]], JudgementRecord]:
    """How a line's object becomes a judgement, its values checked: a score on the scale of its judge
    where ``judges`` (the manifest's) lists it, and None exactly where an error says why; at least one
    attempt; finite seconds, at least 0."""
    scales = {(judge.identity, judge.rubric_sha256): judge.scale for judge in judges}

    def read(data: dict[str, Any]) -> JudgementRecord:
        record = JudgementRecord.from_json(data)
        scale = scales.get((record.judge_identity, record.rubric_sha256))
        if (record.score is None) != (record.error is not None):
            raise ValueError("a judgement has a score or an error, one of the two")
        if record.score is not None and scale is not None and record.score not in scale:
            raise ValueError(f"score {record.score} is not on its judge's scale {list(scale)}")
        if record.attempts < 1:
            raise ValueError(f"field 'attempts' is {record.attempts}, not 1 or more")
        _check_in("latency_s", [record.latency_s], 0.0)
        return record

    return read


def read_qualification(data: dict[str, Any]) -> QualificationRecord:
    """A line's object as a qualification, its values checked: counts at least 0 and within what they
    count among, rates in [0, 1], kappa in [-1, 1] or None, finite thresholds."""
    record = QualificationRecord.from_json(data)
    by_category = [count for row in record.by_category.values() for count in row.values()]
    _check_in("items", [record.items, *by_category], 0)
    _check_in("agreed", [record.agreed], 0, record.items)
    _check_in("unreadable", [record.unreadable], 0, record.items)
    _check_in("adversarial", [record.adversarial], 0, record.items)
    _check_in("flips", [record.flips], 0, record.adversarial)
    _check_in("accuracy", [record.accuracy], 0.0, 1.0)
    _check_in("flip_rate", [record.flip_rate], 0.0, 1.0)
    _check_in("kappa", [] if record.kappa is None else [record.kappa], -1.0, 1.0)
    _check_in("thresholds", record.thresholds.values(), -math.inf)
    return record


def _check_in(name: str, values: Iterable[float], low: float, high: float = math.inf) -> None:
    """ValueError where one of ``values`` (of the field ``name``) is not a finite number in [low, high]."""
    for value in values:
        if not within((value,), low, high):  # an integer too large for a float included
            raise ValueError(f"field '{name}' holds {value}, not a finite number in [{low}, {high}]")


def _read(folder: Path, name: str, reader: Callable[[dict[str, Any]], R]) -> list[R]:
    parsed = read_file(folder / name, reader)
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


def _judges(folder: Path) -> Sequence[JudgeIdentity]:
    """The judges the run folder's manifest lists, whose scales its judgements are read on."""
    return RunFolder(folder).read_manifest().judges


def read_judgements(folder: Path) -> list[JudgementRecord]:
    """The run's judgements, in the order written; damaged lines are left out, with a warning."""
    return _read(folder, JUDGEMENTS, judgement_reader(_judges(folder)))


def read_qualifications(folder: Path) -> list[QualificationRecord]:
    """The run's judges' qualifications, in the order written; damaged lines left out, with a warning."""
    return _read(folder, QUALIFICATIONS, read_qualification)


class _Writer(Generic[R]):
    """Appends to one of the judges' files of a run folder whose lock the caller holds."""

    def __init__(self, folder: Path, name: str, aside: str, reader: Callable[[dict[str, Any]], R]) -> None:
        self.path = folder / name
        parsed = read_file(self.path, reader)  # quarantine reads damage again
        quarantine(parsed, self.path, folder / aside)
        self.existing: list[R] = parsed.records
        self._fd = append_to(self.path)

    def append(self, record: R) -> None:
        append_line(self._fd, record.to_json(), self.path)

    def close(self) -> None:
        os.close(self._fd)


class JudgementWriter(_Writer[JudgementRecord]):
    def __init__(self, folder: Path) -> None:
        super().__init__(folder, JUDGEMENTS, JUDGEMENTS_QUARANTINE, judgement_reader(_judges(folder)))


class QualificationWriter(_Writer[QualificationRecord]):
    def __init__(self, folder: Path) -> None:
        super().__init__(folder, QUALIFICATIONS, QUALIFICATIONS_QUARANTINE, read_qualification)
