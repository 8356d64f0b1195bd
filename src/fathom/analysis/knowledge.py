"""Knowledge apart from context: a low-overlap run's scores on the items the model knows, and its
effective length relative to each item's own base score.

A model that does not know an item (that Bulguksa is in Gyeongju) fails its needle at every length;
read as a context failure, that makes a model look worse at long context than it is. So the run's
closed-book probes (``fathom.tasks.probe``) say which items the model knows, and the score is given
on all items and on the known ones, with intervals.

The effective length follows NoLiMa (Modarressi et al., 2025, "NoLiMa: Long-Context Evaluation Beyond
Literal Matching", arXiv:2502.05167): a base score from the shortest contexts, and the longest length
whose score stays at or above 85% of it. NoLiMa takes one base per model (the best of its scores at
250, 500 and 1K tokens); here each item has its own base, the best of its mean scores at the run's two
shortest lengths, and the bases are pooled: at each length, the mean score of its samples whose items
have a base above 0, over the mean of their items' bases. An item failed even at the shortest lengths
(one the model does not know, or cannot use at all) so weighs in neither. Items are drawn per sample
and length, so only the samples whose items were also drawn at a short length count at a longer one
(``samples`` per length says how many): a run wants k well above a handful for these ratios.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from fathom.analysis.select import is_literal_twin
from fathom.analysis.stats import score_interval, wilson_interval
from fathom.records import SampleRecord

THRESHOLD = 0.85  # NoLiMa's: a length is effective while its score is at least this share of the base
BASE_LENGTHS = 2  # an item's base: the best of its mean scores at the run's this many shortest lengths
UNKNOWN_LISTED = 20  # the items the model did not know, listed in the summary


def known_items(probes: Sequence[SampleRecord]) -> dict[str, bool]:
    """Each probed item (that a probe graded, without an error): whether the model knows it."""
    return {r.probe: r.score > 0 for r in probes if r.probe is not None and r.error is None}


def _low_overlap(samples: Sequence[SampleRecord]) -> list[SampleRecord]:
    """The graded low-overlap samples asked (a literal twin is a contrast, not more data)."""
    return [r for r in samples if r.latent_items and r.error is None and not is_literal_twin(r.task)]


def _scores(records: Sequence[SampleRecord]) -> dict[str, Any]:
    mean, low, high = score_interval([r.score for r in records])
    return {"n": len(records), "mean": mean, "ci_low": low, "ci_high": high}


def _probes(probes: Sequence[SampleRecord], known: dict[str, bool]) -> dict[str, Any]:
    count = sum(known.values())
    low, high = wilson_interval(count, len(known))
    return {
        "items": len(probes),
        "graded": len(known),
        "known": count,
        "share": count / len(known) if known else None,
        "ci_low": low,
        "ci_high": high,
        "unknown": sorted(item for item, knows in known.items() if not knows)[:UNKNOWN_LISTED],
    }


def by_length(samples: Sequence[SampleRecord], known: dict[str, bool]) -> list[dict[str, Any]]:
    """Per length, the score on all items and on the samples whose every item the model knows."""
    groups: defaultdict[int, list[SampleRecord]] = defaultdict(list)
    for record in samples:
        groups[record.length].append(record)
    return [
        {
            "length": length,
            "all": _scores(group),
            "known": _scores([r for r in group if all(known.get(i, False) for i in r.latent_items)]),
        }
        for length, group in sorted(groups.items())
    ]


def relative(samples: Sequence[SampleRecord], threshold: float = THRESHOLD) -> dict[str, Any]:
    """Each item's base (the best of its mean scores at the two shortest lengths), pooled, and each
    length's score relative to it, over the items with a base above 0; the effective length is the
    longest length up to which every length keeps ``threshold`` of the base (None where even the
    shortest does not)."""
    per: defaultdict[tuple[str, int], list[float]] = defaultdict(list)
    for record in samples:
        for item in record.latent_items:  # a sample of several items counts for each
            per[item, record.length].append(record.score)
    means = {key: math.fsum(scores) / len(scores) for key, scores in per.items()}
    lengths = sorted({length for _, length in means})
    short = lengths[:BASE_LENGTHS]
    bases: dict[str, float] = {}
    for (item, length), mean in means.items():
        if length in short:
            bases[item] = max(bases.get(item, 0.0), mean)
    used = sorted(item for item, base in bases.items() if base > 0)
    rows, effective, holding = [], None, True
    for length in lengths:
        # The samples at this length whose items all have a base: their scores over their bases.
        scored = [r for r in samples if r.length == length and all(bases.get(i, 0.0) for i in r.latent_items)]
        base = math.fsum(bases[i] for r in scored for i in r.latent_items) / len(scored) if scored else 0.0
        ratio = math.fsum(r.score for r in scored) / len(scored) / base if base else None
        holding = holding and ratio is not None and ratio >= threshold
        effective = length if holding else effective
        rows.append({"length": length, "samples": len(scored), "ratio": ratio})
    return {
        "base_lengths": short,
        "items": len(bases),
        "zero_base": len(bases) - len(used),
        "base": math.fsum(bases[item] for item in used) / len(used) if used else None,
        "threshold": threshold,
        "lengths": rows,
        "effective_length": effective,
    }


def knowledge_summary(
    samples: Sequence[SampleRecord], probes: Sequence[SampleRecord], threshold: float = THRESHOLD
) -> dict[str, Any]:
    """A low-overlap run's knowledge section: its probes (where it asked them), its score per length on
    all items and on the known ones, and the effective length relative to the items' bases; empty for
    a run without low-overlap samples that name their items (other kinds, records before schema 9)."""
    asked = _low_overlap(samples)
    if not asked:
        return {}
    known = known_items(probes)
    section: dict[str, Any] = {"relative": relative(asked, threshold)}
    if known:
        section |= {"probes": _probes(probes, known), "lengths": by_length(asked, known)}
    return section
