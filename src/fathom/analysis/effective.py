"""A run's effective length from its samples, NIAH's or RULER's: what ``fathom runs`` lists for a run
and ``fathom compare`` sets beside the other run's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fathom.analysis.niah import summarize
from fathom.analysis.ruler import ruler_summary
from fathom.analysis.select import is_literal_twin, is_ruler_run
from fathom.records import SampleRecord


@dataclass(frozen=True)
class EffectiveLength:
    """A run's effective length judged on the mean score and on its 95% lower bound."""

    mean: int | None
    lower_bound: int | None


def run_effective_length(samples: Sequence[SampleRecord]) -> EffectiveLength:
    """NIAH's effective length (threshold 0.85) or RULER's (its absolute threshold, 85.6), each on the
    mean and on the 95% lower bound; both None without samples."""
    if not samples:
        return EffectiveLength(None, None)
    samples = [r for r in samples if not is_literal_twin(r.task)]  # as the summary pools them
    if not samples:
        return EffectiveLength(None, None)
    if is_ruler_run(samples):
        aggregates = ruler_summary(samples)["aggregates"]
        return EffectiveLength(
            aggregates["mean"]["effective_length"], aggregates["lower_bound"]["effective_length"]
        )
    effective = summarize(samples)["effective_length"]
    return EffectiveLength(effective["mean"], effective["lower_bound"])
