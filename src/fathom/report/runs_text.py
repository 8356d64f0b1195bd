"""The run listing (``fathom runs``) as lines of text for a terminal: a line per run folder, in
aligned columns."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from fathom.report.runs import RunEntry
from fathom.report.text import interval_text
from fathom.run.labels import labels_text
from fathom.units import format_count

NONE = "—"  # an empty column of the run listing


def _lengths(lengths: tuple[int, ...]) -> str:
    if not lengths:
        return NONE
    low, high = format_count(lengths[0]), format_count(lengths[-1])
    return low if low == high else f"{low}-{high}"


def _created(created: str | None) -> str:
    # "2026-11-23T14:00:00+00:00" -> "2026-11-23 14:00": the minute is enough to tell runs apart.
    return NONE if created is None else created[:16].replace("T", " ")


def _columns(entry: RunEntry, labelled: bool) -> list[str]:
    if entry.problem is not None:
        return [_created(entry.created), entry.folder.name, entry.status]
    return [
        _created(entry.created),
        entry.folder.name,
        *([labels_text(entry.labels)] if labelled else []),
        entry.model or NONE,
        entry.task or NONE,
        _lengths(entry.lengths),
        NONE if entry.samples is None else f"k={entry.samples}",
        entry.status,
        _controls(entry),
        _found(entry),
    ]


def _controls(entry: RunEntry) -> str:
    """Its no-context controls answered without the context, of those graded: "ctl 2/24"."""
    count = entry.controls
    return "ctl " + (NONE if count is None else f"{count.answered}/{count.graded}")


def _found(entry: RunEntry) -> str:
    """What the run found: a suite's mean over tasks, or the effective length."""
    if entry.task_mean is not None:
        mean = entry.task_mean
        return f"mean {interval_text(mean.mean, mean.ci_low, mean.ci_high)} over {mean.tasks} tasks"
    return "effective " + (NONE if entry.effective_length is None else format_count(entry.effective_length))


def runs_text(entries: Sequence[RunEntry]) -> list[str]:
    """One line per run: created, folder, its labels (where any run has some), model, task, lengths, k,
    status, the no-context controls answered and effective length (a suite's mean over tasks), in
    aligned columns; an unreadable folder's line gives the reason instead."""
    labelled = any(entry.labels for entry in entries)
    rows = [_columns(entry, labelled) for entry in entries]
    # The last column is never padded, so a long reason does not widen the columns of the others.
    widths: defaultdict[int, int] = defaultdict(int)
    for row in rows:
        for index, cell in enumerate(row[:-1]):
            widths[index] = max(widths[index], len(cell))
    return ["  ".join([*(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])), row[-1]]) for row in rows]
