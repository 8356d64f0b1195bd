"""Multi-round co-reference's numbers (``fathom.tasks.mrcr``): the score (MRCR's similarity ratio)
per repeat count and length with its 95% interval, beside each cell's share of answers that open
with the prefix, its share reproduced exactly, its answers cut at their output budget and its
largest budget; the score by which of the repeats was asked for (first, middle, last, only) and
length; and each repeat count's effective length on the mean and on the lower bound.

Its records are RULER-style (depths drawn per sample), so an mrcr run's summary is RULER's grid (a
task per repeat count, ``mrcr:R``) with this section beside it, as long outputs' is. The prefix is
read again from each record's reference (its first ``MRCR_PREFIX_CHARS`` characters).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fathom.analysis.listing import budget_cells
from fathom.analysis.select import family_run
from fathom.analysis.stats import effective_by, rows_by
from fathom.records import SampleRecord
from fathom.scoring import MRCR_PREFIX_CHARS
from fathom.tasks.mrcr import TASK

PREFIX = TASK + ":"


is_mrcr_run = family_run(PREFIX)


def mrcr_summary(records: Iterable[SampleRecord], threshold: float = 0.85) -> dict[str, Any]:
    """The mrcr section of summary.json: ``cells`` (repeats x length: the score's statistics, the
    share of scored answers that open with the prefix (``prefixed``) and that reproduce the target
    exactly (``exact``), the ``truncated`` answers and the largest ``max_new_tokens``), ``positions``
    (which repeat was asked for x length), ``truncated`` (over the run) and ``effective_length``
    (per repeat count, on the mean and on the 95% lower bound)."""
    rows = [r for r in records if r.task.startswith(PREFIX)]
    cells = budget_cells(rows, "repeats", _extras)
    return {
        "threshold": threshold,
        "cells": cells,
        "positions": rows_by(rows, lambda r: (r.needle_kind, r.length), ("position", "length")),
        "truncated": sum(cell["truncated"] for cell in cells),
        "effective_length": effective_by(cells, "repeats", threshold),
    }


def _extras(scored: list[SampleRecord]) -> dict[str, Any]:
    share = (lambda count: count / len(scored)) if scored else (lambda _count: None)
    return {
        "prefixed": share(sum(r.output.startswith(r.answers[0][:MRCR_PREFIX_CHARS]) for r in scored)),
        "exact": share(sum(r.score == 1.0 for r in scored)),
    }
