"""A run's numbers from all its records: what summary.json holds, but for the run's names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fathom.analysis.control import control_summary
from fathom.analysis.niah import summarize
from fathom.analysis.perplexity import answer_likelihood, perplexity_table
from fathom.analysis.ruler import ruler_summary
from fathom.analysis.select import control_records, is_ruler_run, split_records
from fathom.records import AnyRecord


def run_summary(records: Sequence[AnyRecord], threshold: float = 0.85) -> dict[str, Any]:
    """NIAH's grid with ``threshold`` for its effective length (and the gold answer's likelihood, where
    read), or RULER's grid with RULER's own thresholds; the no-context control; the perplexity table.
    Plain JSON-ready values; a run of perplexity alone is of kind "perplexity"."""
    samples, documents = split_records(records)
    summary: dict[str, Any] = {"kind": "perplexity", "samples": 0, "errors": 0}
    if samples and is_ruler_run(samples):
        summary = ruler_summary(samples)
    elif samples:
        summary = summarize(samples, threshold=threshold)
        likelihood = answer_likelihood(samples)
        if likelihood:
            summary["answer_likelihood"] = likelihood
    controls = control_records(records)
    if controls:
        summary["control"] = control_summary(controls, samples)
    if documents:
        summary["perplexity"] = perplexity_table(documents)
        summary["documents"] = len(documents)
        summary["document_errors"] = sum(1 for r in documents if r.error is not None)
    return summary
