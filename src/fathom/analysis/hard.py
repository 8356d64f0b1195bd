"""Hard needles' numbers: how often an answer took a distractor's bait, which of several needles went
missing where, how a split needle fares with the distance between its parts, what a low-overlap
needle costs against its literal twin and what the odd-name shortcut scores on the same prompts.

Pure functions over ``SampleRecord`` (each placement's role and value are in the record), so the
summary, the report and ``fathom compare`` read one source.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fathom.analysis.failures import REJECTED, rejected_lure
from fathom.analysis.paired import sign_test
from fathom.analysis.select import LITERAL, is_literal_twin
from fathom.analysis.stats import score_interval, wilson_interval
from fathom.records import DISTRACTOR_ROLES, GOLD_ROLE, PART_ROLE, SampleRecord

HEDGED = "hedged"  # the gold and a distractor's value: not correct
LURED = "distractor"  # a distractor's value and not (all of) the gold
DISTANCE_BINS = 10


def lure_outcome(record: SampleRecord) -> str | None:
    """HEDGED, LURED, REJECTED (right, naming a distractor's value only to reject it), or None where
    the answer names no distractor's value."""
    if not record.lured:
        return REJECTED if rejected_lure(record) else None
    return HEDGED if set(record.matched) >= set(record.answers) else LURED


@dataclass(frozen=True)
class Share:
    """How many of ``n`` are counted, with the Wilson interval of the share."""

    n: int
    count: int
    share: float | None
    ci_low: float
    ci_high: float


def _share(count: int, n: int) -> Share:
    low, high = wilson_interval(count, n)
    return Share(n, count, count / n if n else None, low, high)


@dataclass(frozen=True)
class LureRow:
    """At one length, the graded samples that had distractors: how many answered one, how many hedged."""

    length: int
    lured: Share
    hedged: Share


def _graded(records: Iterable[SampleRecord]) -> list[SampleRecord]:
    return [r for r in records if r.error is None and not r.control]


def _with_lures(records: Iterable[SampleRecord]) -> list[tuple[int, list[SampleRecord]]]:
    """The graded samples that had distractors, by length."""
    by_length: defaultdict[int, list[SampleRecord]] = defaultdict(list)
    for record in _graded(records):
        if any(role in DISTRACTOR_ROLES for role in record.needle_roles):
            by_length[record.length].append(record)
    return sorted(by_length.items())


def lure_table(records: Iterable[SampleRecord]) -> list[LureRow]:
    rows = []
    for length, group in _with_lures(records):
        outcomes = [lure_outcome(r) for r in group]
        rows.append(
            LureRow(
                length, _share(outcomes.count(LURED), len(group)), _share(outcomes.count(HEDGED), len(group))
            )
        )
    return rows


@dataclass(frozen=True)
class RejectedRow:
    """At one length, of the graded samples that had distractors: those right that named a look-alike's
    value only to reject it (``fathom.analysis.failures.REJECTED``)."""

    length: int
    rejected: Share


def rejected_table(records: Iterable[SampleRecord]) -> list[RejectedRow]:
    """Each length's rejected look-alikes; none where no answer rejected one (a section of the summary
    apart from ``lures``, so that the summaries written before it read as they were)."""
    rows = [
        RejectedRow(length, _share([lure_outcome(r) for r in group].count(REJECTED), len(group)))
        for length, group in _with_lures(records)
    ]
    return rows if any(row.rejected.count for row in rows) else []


@dataclass(frozen=True)
class PositionRow:
    """Of the gold needles (of samples with several) whose depth fell in [low, high): the share found."""

    depth_low: float
    depth_high: float
    found: Share


def _golds(record: SampleRecord) -> list[tuple[float, str]]:
    if not record.needle_roles:  # RULER's records, and those from before roles (schema 5)
        return []
    return [
        (depth, value)
        for depth, value, role in zip(
            record.needle_depths, record.needle_values, record.needle_roles, strict=True
        )
        if role == GOLD_ROLE
    ]


def needle_positions(records: Iterable[SampleRecord], bins: int = DISTANCE_BINS) -> list[PositionRow]:
    """Each gold needle of a sample with several, found or missed, by the depth it landed at."""
    counts: defaultdict[int, list[bool]] = defaultdict(list)
    for record in _graded(records):
        golds = _golds(record)
        if len(golds) > 1:
            found = {m.lower() for m in record.matched}
            for depth, value in golds:
                counts[min(bins - 1, math.floor(depth * bins))].append(value.lower() in found)
    return [
        PositionRow(index / bins, (index + 1) / bins, _share(sum(hits), len(hits)))
        for index, hits in sorted(counts.items())
    ]


@dataclass(frozen=True)
class ScoreRow:
    """The mean score of the samples in one bin (a length, a distance between parts, a kind)."""

    label: str
    n: int
    mean: float | None
    ci_low: float
    ci_high: float


def _row(label: str, scores: Sequence[float]) -> ScoreRow:
    mean, low, high = score_interval(scores)
    return ScoreRow(label, len(scores), mean, low, high)


def all_or_nothing(records: Iterable[SampleRecord]) -> list[ScoreRow]:
    """Per length, the share of samples with several needles that found every one of them."""
    by_length: defaultdict[int, list[float]] = defaultdict(list)
    for record in _graded(records):
        if len(_golds(record)) > 1:
            by_length[record.length].append(float(set(record.matched) >= set(record.answers)))
    return [_row(str(length), scores) for length, scores in sorted(by_length.items())]


def part_distance(record: SampleRecord) -> float | None:
    """The share of the haystack between a split needle's two parts, as they landed."""
    if not record.needle_roles:
        return None
    parts = [
        d for d, role in zip(record.needle_depths, record.needle_roles, strict=True) if role == PART_ROLE
    ]
    return abs(parts[1] - parts[0]) if len(parts) == 2 else None


def distance_table(records: Iterable[SampleRecord], bins: int = DISTANCE_BINS) -> list[ScoreRow]:
    """Split needles' scores by the distance between their parts, in bins of 1/``bins``."""
    by_bin: defaultdict[int, list[float]] = defaultdict(list)
    for record in _graded(records):
        distance = part_distance(record)
        if distance is not None:
            by_bin[min(bins - 1, math.floor(distance * bins))].append(record.score)
    return [_row(f"{i / bins:.1f}-{(i + 1) / bins:.1f}", scores) for i, scores in sorted(by_bin.items())]


def overlap_table(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per needle kind with a recorded overlap: the mean overlap between needle and question
    (shared content words, ROUGE-1) beside the score."""
    by_kind: defaultdict[str, list[SampleRecord]] = defaultdict(list)
    for record in _graded(records):
        if record.overlap_rouge1 is not None:
            by_kind[record.needle_kind].append(record)
    rows = []
    for kind, group in sorted(by_kind.items()):
        score = _row(kind, [r.score for r in group])
        rows.append(
            {
                **dataclasses.asdict(score),
                "shared_words": math.fsum(r.overlap_words or 0 for r in group) / len(group),
                "rouge1": math.fsum(r.overlap_rouge1 or 0.0 for r in group) / len(group),
            }
        )
    return rows


def _asked_task(twin: str) -> str:
    """The task a literal twin is the twin of: ``niah:literal`` -> ``niah``."""
    return (
        twin.removesuffix("+" + LITERAL) if twin.endswith("+" + LITERAL) else twin.removesuffix(":" + LITERAL)
    )


def literal_cost(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per length, each low-overlap sample beside its literal twin (the same item, name, haystack
    and depth, asked in the needle's own words): both means, the paired difference (literal minus
    low-overlap: what removing the overlap costs) and the exact sign test on the pairs."""
    scores: defaultdict[tuple[str, int, float | None, int], dict[bool, float]] = defaultdict(dict)
    for record in _graded(records):
        twin = is_literal_twin(record.task)
        asked = _asked_task(record.task) if twin else record.task
        scores[asked, record.length, record.depth, record.sample][twin] = record.score
    by_length: defaultdict[int, list[tuple[float, float]]] = defaultdict(list)
    for (_, length, _, _), pair in scores.items():
        if len(pair) == 2:
            by_length[length].append((pair[False], pair[True]))
    rows = []
    for length, pairs in sorted(by_length.items()):
        low = math.fsum(p[0] for p in pairs) / len(pairs)
        literal = math.fsum(p[1] for p in pairs) / len(pairs)
        worse = sum(1 for lo, li in pairs if lo < li)
        better = sum(1 for lo, li in pairs if lo > li)
        rows.append(
            {
                "length": length,
                "pairs": len(pairs),
                "low_overlap": low,
                "literal": literal,
                "cost": literal - low,
                "literal_better": worse,
                "low_overlap_better": better,
                "p_value": sign_test(worse, better),
            }
        )
    return rows


def _mean(scores: Sequence[float]) -> dict[str, Any]:
    mean, low, high = score_interval(scores)
    return {"mean": mean, "ci_low": low, "ci_high": high}


def odd_name_table(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per low-overlap variant (the asked one and its literal twin, each domain), its score beside the
    odd-name reader's on the same prompts (``odd_name_score``): what spotting the one name the haystack
    holds once scores with no knowledge, the baseline the score must beat. None from records written
    before the reader was recorded (schema 9 and older)."""
    by_task: defaultdict[str, list[SampleRecord]] = defaultdict(list)
    for record in _graded(records):
        if record.odd_name_score is not None:
            by_task[record.task].append(record)
    return [
        {
            "variant": task,
            "n": len(group),
            "score": _mean([r.score for r in group]),
            "odd_name": _mean([r.odd_name_score for r in group if r.odd_name_score is not None]),
        }
        for task, group in sorted(by_task.items())
    ]


# A form's parts, as ``latent_forms.Form.label`` joins them: relation/order/template.
FORM_AXES = ("relation", "order", "template")


def form_table(records: Iterable[SampleRecord]) -> list[dict[str, Any]]:
    """Per relation, needle order and question template of which a run drew more than one, the score
    of the low-overlap samples (the asked variant, not its literal twins) whose gold needles took it;
    a sample with several needles counts once under each value its needles took."""
    asked = [r for r in _graded(records) if r.needle_forms and not is_literal_twin(r.task)]
    rows = []
    for index, axis in enumerate(FORM_AXES):
        by_value: defaultdict[str, list[float]] = defaultdict(list)
        for record in asked:
            for value in dict.fromkeys(form.split("/")[index] for form in record.needle_forms):
                by_value[value].append(record.score)
        if len(by_value) > 1:
            rows += [{"axis": axis, **dataclasses.asdict(_row(v, s))} for v, s in sorted(by_value.items())]
    return rows


def neighbour_table(records: Iterable[SampleRecord]) -> list[ScoreRow]:
    """The low-overlap samples whose window names a near neighbour of their places (an accidental
    literal distractor: "Washington" beside Washington, D.C.) beside those whose window names none;
    empty where no sample met one."""
    latent = [r for r in _graded(records) if r.latent_items and not is_literal_twin(r.task)]
    met = [r.score for r in latent if r.literal_neighbours]
    if not met:
        return []
    return [_row("near neighbour", met), _row("none", [r.score for r in latent if not r.literal_neighbours])]


def hard_summary(records: Sequence[SampleRecord]) -> dict[str, Any]:
    """The hard-needle sections of a NIAH summary, each present only where the run has such samples."""
    redrawn = [r for r in _graded(records) if r.redraws]
    sections = {
        "literal_cost": literal_cost(records),
        "odd_name": odd_name_table(records),
        "redraws": {"samples": len(redrawn), "first": list(redrawn[0].redraws)} if redrawn else {},
        "lures": [dataclasses.asdict(r) for r in lure_table(records)],
        "rejected_lures": [dataclasses.asdict(r) for r in rejected_table(records)],
        "needle_positions": [dataclasses.asdict(r) for r in needle_positions(records)],
        "all_or_nothing": [dataclasses.asdict(r) for r in all_or_nothing(records)],
        "part_distance": [dataclasses.asdict(r) for r in distance_table(records)],
        "overlap": overlap_table(records),
        "forms": form_table(records),
        "neighbours": [dataclasses.asdict(r) for r in neighbour_table(records)],
    }
    return {name: rows for name, rows in sections.items() if rows}
