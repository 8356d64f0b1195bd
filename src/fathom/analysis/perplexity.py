"""Perplexity from perplexity records: per length, per position bucket, beside retrieval.

Perplexity is exp of the mean negative log-likelihood per scored token, pooled over a length's
documents (every token weighs the same). Its 95% interval resamples documents, not tokens: tokens
of one document are not independent draws. Position buckets double in width (0-1k, 1k-2k, 2k-4k,
...), so the far end of a long context, where a model's use of it shows, gets its own number.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fathom.analysis.stats import bootstrap_interval
from fathom.records import PerplexityRecord, SampleRecord

FIRST_BUCKET = 1024  # tokens; each later bucket is twice as wide as the one before


def position_buckets(length: int) -> list[tuple[int, int]]:
    """Half-open position ranges [lo, hi) that cover 0..length-1 exactly once."""
    edges = [0]
    while edges[-1] < length:
        edges.append(FIRST_BUCKET if edges[-1] == 0 else 2 * edges[-1])
    edges[-1] = length
    return list(itertools.pairwise(edges))


def bucket_sums(record: PerplexityRecord) -> list[tuple[int, int, float, int]]:
    """(lo, hi, summed negative log-likelihood, scored tokens) for each bucket of the record's
    positions; buckets without a scored token are left out."""
    nll = -np.asarray(record.logprobs, dtype=np.float64)
    positions = record.first_position + np.arange(len(nll))
    length = max(record.actual_tokens, int(positions[-1]) + 1 if len(positions) else 0)
    sums = []
    for lo, hi in position_buckets(length):
        inside = (positions >= lo) & (positions < hi)
        if inside.any():
            sums.append((lo, hi, float(nll[inside].sum()), int(inside.sum())))
    return sums


def _perplexity(nll_sum: float, tokens: int) -> float:
    return math.exp(nll_sum / tokens)


def _interval(per_document: Sequence[tuple[float, int]]) -> tuple[float, float]:
    """Perplexity interval from documents' (nll sum, tokens); one document has no spread."""
    if len(per_document) < 2:
        pooled = _perplexity(sum(s for s, _ in per_document), sum(n for _, n in per_document))
        return pooled, pooled
    means = [s / n for s, n in per_document]
    low, high = bootstrap_interval(means, [n for _, n in per_document])
    return math.exp(low), math.exp(high)


def perplexity_table(records: Iterable[PerplexityRecord]) -> dict[str, Any]:
    """Perplexity per length (with its interval) and per (length, position bucket)."""
    by_length: dict[int, list[PerplexityRecord]] = defaultdict(list)
    for record in records:
        by_length[record.length].append(record)
    lengths, buckets = [], []
    for length in sorted(by_length):
        group = by_length[length]
        scored = [r for r in group if r.error is None and r.logprobs]
        per_document = [(-math.fsum(r.logprobs), len(r.logprobs)) for r in scored]
        row: dict[str, Any] = {
            "length": length,
            "documents": len(scored),
            "errors": len(group) - len(scored),
            "tokens": sum(n for _, n in per_document),
            "perplexity": None,
            "ci_low": None,
            "ci_high": None,
            "beyond_window": any(r.beyond_window for r in group),
        }
        if scored:
            total, tokens = math.fsum(s for s, _ in per_document), row["tokens"]
            row["perplexity"] = _perplexity(total, tokens)
            row["ci_low"], row["ci_high"] = _interval(per_document)
        lengths.append(row)
        nll_sums: dict[tuple[int, int], float] = defaultdict(float)
        counts: dict[tuple[int, int], int] = defaultdict(int)
        for record in scored:
            for lo, hi, nll, count in bucket_sums(record):
                nll_sums[(lo, hi)] += nll
                counts[(lo, hi)] += count
        for (lo, hi), count in sorted(counts.items()):
            buckets.append(
                {
                    "length": length,
                    "lo": lo,
                    "hi": hi,
                    "tokens": count,
                    "perplexity": _perplexity(nll_sums[(lo, hi)], count),
                }
            )
    return {"lengths": lengths, "buckets": buckets}


def answer_likelihood(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per length: the mean probability the model gives the whole gold answer, teacher-forced
    (exp of its log-probability), over the samples where it was read."""
    by_length: dict[int, list[float]] = defaultdict(list)
    for record in records:
        logprob = record.answer_logprob
        if record.error is None and logprob is not None:
            by_length[record.length].append(math.exp(logprob))
    return [
        {"length": length, "n": len(values), "mean_probability": math.fsum(values) / len(values)}
        for length, values in sorted(by_length.items())
    ]
