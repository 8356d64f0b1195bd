"""How close a provider's counts of the prompts came to their target lengths (summary.json's
``provider_counts``): where the model's tokenizer is not public (``anthropic``), prompts are built
exactly at their length by a stand-in tokenizer, and each record's ``actual_tokens`` is the provider's
count of the prompt as sent. Made from the records, so a resumed run and ``fathom report`` say it too."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from fathom.records import SampleRecord


def provider_counts(records: Sequence[SampleRecord], counted_by: str) -> dict[str, Any]:
    """Over the graded samples answered (controls and errors apart: a failed request keeps the
    stand-in's count), and per length, the prompts counted and the least, largest and mean ratio of
    the provider's count to the target length; ``counted_by`` is the backend's own account of it."""
    counted = [r for r in records if not r.control and r.error is None]
    by_length: defaultdict[int, list[SampleRecord]] = defaultdict(list)
    for record in counted:
        by_length[record.length].append(record)
    lengths = [{"length": length, **_ratios(by_length[length])} for length in sorted(by_length)]
    return {"counted_by": counted_by, **_ratios(counted), "lengths": lengths}


def _ratios(group: Sequence[SampleRecord]) -> dict[str, Any]:
    ratios = [r.actual_tokens / r.target_tokens for r in group]
    if not ratios:
        return {"prompts": 0, "ratio_min": None, "ratio_max": None, "ratio_mean": None}
    return {
        "prompts": len(ratios),
        "ratio_min": round(min(ratios), 4),
        "ratio_max": round(max(ratios), 4),
        "ratio_mean": round(sum(ratios) / len(ratios), 4),
    }
