"""Samples far slower than their task and length explain: the signature of a KV cache paged out to host
memory, a server swapping, or a replica in trouble (tens of times slower per token, not percent).

A prompt's time is mostly its prefill, which grows with its tokens, so samples are set beside the
others of their task and length: each one's seconds per prompt token (its prefill time where the
backend reported one, else its whole latency) against the median of its task at its length (the
no-context controls apart from the samples: their prompts are short, their time mostly overhead).
One at least ``SLOW_FACTOR`` times the median is listed. Not the median of its length alone: tasks
differ in cost per token (a long answer's decode counted in the latency, a prefix cached across one
task's prompts), and where a cheap task sets a length's median, an expensive task's every sample
looks slow beside it. Samples under ``LEAST_SECONDS`` are never listed: a median of
milliseconds (a cache hit, a simulated model) makes noise look like a factor.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from fathom.records import SampleRecord

SLOW_FACTOR = 10.0
LEAST_SECONDS = 1.0
SHOWN = 50  # the most a summary lists, slowest (by factor) first


def _seconds(record: SampleRecord) -> float:
    return record.prefill_s if record.prefill_s is not None else record.latency_s


def slow_samples(records: Sequence[SampleRecord]) -> dict[str, Any]:
    """summary.json's ``slow`` section: the rule, and the samples it flags (empty for none)."""
    groups: defaultdict[tuple[str, bool, int], list[SampleRecord]] = defaultdict(list)
    for record in records:
        if record.error is None and record.actual_tokens > 0:
            groups[record.task, record.control, record.length].append(record)
    flagged: list[dict[str, Any]] = []
    for (_, _, length), group in sorted(groups.items()):
        median = statistics.median(_seconds(r) / r.actual_tokens for r in group)
        for record in group:
            per_token = _seconds(record) / record.actual_tokens
            if _seconds(record) >= LEAST_SECONDS and median > 0 and per_token >= SLOW_FACTOR * median:
                flagged.append(
                    {
                        "sample_id": record.sample_id,
                        "length": length,
                        "seconds": round(_seconds(record), 3),
                        "ms_per_token": round(1000 * per_token, 4),
                        "median_ms_per_token": round(1000 * median, 4),
                        "factor": round(per_token / median, 1),
                        "timed": "prefill" if record.prefill_s is not None else "latency",
                    }
                )
    flagged.sort(key=lambda row: -float(row["factor"]))
    return {
        "factor": SLOW_FACTOR,
        "least_seconds": LEAST_SECONDS,
        "samples": flagged[:SHOWN],
        "count": len(flagged),
    }
