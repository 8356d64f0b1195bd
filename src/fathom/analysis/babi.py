"""The bAbI-style task's numbers (``fathom.tasks.babi``): the score per task and length with its 95%
Wilson interval, each task's effective length, and the score by the distance, in tokens, between the
first and the last supporting fact.

Its records are RULER-style (depths drawn per sample), so a babi run's summary is RULER's grid (a
task per bAbI task, ``babi:qaN``) with this section beside it, as state tracking's is. A record keeps
where every sentence landed (``needle_token_offsets``) but not which ones supported the answer: the
story is drawn again from the record's seed and cell (``story_of``), as the prompt drew it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fathom.analysis.select import family_run
from fathom.analysis.stats import effective_by, rows_by
from fathom.records import SampleRecord
from fathom.tasks.babi import TASK, story_of

PREFIX = TASK + ":"
# The distance bins' lower edges, in tokens; a task of one supporting fact is at distance 0 alone.
DISTANCE_EDGES = (0, 1, 1024, 4096, 16384, 65536)


is_babi_run = family_run(PREFIX)


def support_distance(record: SampleRecord) -> int:
    """Tokens from the first supporting fact's start to the last's in the record's prompt."""
    support = story_of(record.seed, record.task, record.length, record.sample).support
    offsets = [record.needle_token_offsets[i] for i in support]
    return max(offsets) - min(offsets)


def distance_bin(distance: int) -> int:
    """The lower edge of the bin ``distance`` falls in."""
    return max(edge for edge in DISTANCE_EDGES if edge <= distance)


def babi_summary(records: Iterable[SampleRecord], threshold: float = 0.85) -> dict[str, Any]:
    """The babi section of summary.json: ``cells`` (task x length), ``distances`` (task x the bin of
    the distance between the first and last supporting fact, over every length; ``distance`` is the
    bin's lower edge in tokens, ``DISTANCE_EDGES`` the edges) and ``effective_length`` (per task: the
    longest length whose score, and every shorter one's, is at least ``threshold``, on the mean and on
    the 95% lower bound)."""
    rows = [r for r in records if r.task.startswith(PREFIX)]
    cells = rows_by(rows, lambda r: (r.task, r.length), ("task", "length"))
    # Records without placements (an error before the prompt was built) have no distance.
    placed = [r for r in rows if r.needle_token_offsets]
    return {
        "threshold": threshold,
        "distance_edges": list(DISTANCE_EDGES),
        "cells": cells,
        "distances": rows_by(
            placed, lambda r: (r.task, distance_bin(support_distance(r))), ("task", "distance")
        ),
        "effective_length": effective_by(cells, "task", threshold),
    }
