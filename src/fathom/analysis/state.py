"""State tracking's numbers (``fathom.tasks.state``): the score per operation count and length, and
per question kind and length, each with its 95% Wilson interval, and each operation count's
effective length on the mean and on the lower bound.

Its records are RULER-style (depths drawn per sample), so a state run's summary is RULER's grid
(a task per operation count, ``state:N``) with this section beside it, as a real suite's is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fathom.analysis.select import family_run
from fathom.analysis.stats import effective_by, rows_by
from fathom.records import SampleRecord
from fathom.tasks.counted_lines import cell_count
from fathom.tasks.state import TASK

PREFIX = TASK + ":"


is_state_run = family_run(PREFIX)


def state_summary(records: Iterable[SampleRecord], threshold: float = 0.85) -> dict[str, Any]:
    """The state section of summary.json: ``cells`` (ops x length), ``questions`` (question kind x
    length) and ``effective_length`` (per operation count: the longest length whose score, and every
    shorter one's, is at least ``threshold``, on the mean and on the 95% lower bound)."""
    rows = [r for r in records if r.task.startswith(PREFIX)]
    cells = rows_by(rows, lambda r: (cell_count(r.task), r.length), ("ops", "length"))
    return {
        "threshold": threshold,
        "cells": cells,
        "questions": rows_by(rows, lambda r: (r.needle_kind, r.length), ("question", "length")),
        "effective_length": effective_by(cells, "ops", threshold),
    }
