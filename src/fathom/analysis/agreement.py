"""LLM judges' numbers: each judge's scores, the agreement between two judges and between each judge
and the task's own metric, and the samples where they disagree.

Agreement is chance-corrected: Cohen's kappa for a binary rubric, and for an ordinal one the same
kappa weighted by the squared distance between scores (quadratic weights: 4 against 5 is a small
disagreement, 1 against 5 a large one). Each judge against the metric is kappa on pass/fail: the
rubric's passing score against a metric score of at least ``METRIC_PASS``. Intervals are 95%
percentile bootstraps over the samples (``stats.BOOTSTRAP_RESAMPLES``, fixed seed). Hand-written
rather than taken from scikit-learn or statsmodels: the formula is a few lines of numpy, and either
library would bring scipy (and pandas) to every install for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from fathom.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, bootstrap_interval
from fathom.judgement import JudgementRecord, QualificationRecord, answer_sha256
from fathom.manifest import JudgeIdentity
from fathom.records import SampleRecord

METRIC_PASS = 0.5  # a deterministic score (F1, ROUGE, contains) at or above this is a pass
DISAGREEMENTS_SHOWN = 50  # the most disagreements a summary lists, largest first


class Scored(NamedTuple):
    score: int
    reason: str


def kappa(
    a: Sequence[int], b: Sequence[int], categories: Sequence[int], weighted: bool = False
) -> float | None:
    """Cohen's kappa of two raters' labels over the same items (quadratic-weighted with
    ``weighted``); None where chance agreement is total (both raters gave one label throughout)."""
    observed = _table(
        np.asarray([categories.index(x) for x in a]),
        np.asarray([categories.index(x) for x in b]),
        len(categories),
    )
    return _kappa(observed, _weights(len(categories), weighted))


def _table(a: NDArray[np.int64], b: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    table = np.zeros((k, k))
    np.add.at(table, (a, b), 1.0)
    return table / max(len(a), 1)


def _weights(k: int, weighted: bool) -> NDArray[np.float64]:
    i, j = np.indices((k, k))
    return ((i - j) ** 2 / (k - 1) ** 2) if weighted else (i != j).astype(float)


def _kappa(observed: NDArray[np.float64], weights: NDArray[np.float64]) -> float | None:
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    chance = float((weights * expected).sum())
    if chance <= 1e-12:
        return None
    return 1.0 - float((weights * observed).sum()) / chance


def kappa_interval(
    a: Sequence[int], b: Sequence[int], categories: Sequence[int], weighted: bool = False
) -> tuple[float | None, float | None]:
    """The 95% percentile-bootstrap interval of ``kappa``, over resamples of the items; a resample
    whose kappa is undefined is left out (None, None where all are)."""
    k = len(categories)
    first = np.asarray([categories.index(x) for x in a])
    second = np.asarray([categories.index(x) for x in b])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(first), size=(BOOTSTRAP_RESAMPLES, len(first)))
    tables = np.zeros((BOOTSTRAP_RESAMPLES, k, k))
    np.add.at(tables, (np.arange(BOOTSTRAP_RESAMPLES)[:, None], first[picks], second[picks]), 1.0)
    tables /= len(first)
    weights = _weights(k, weighted)
    expected = tables.sum(axis=2)[:, :, None] * tables.sum(axis=1)[:, None, :]
    chance = (weights * expected).sum(axis=(1, 2))
    defined = chance > 1e-12
    if not defined.any():
        return None, None
    values = 1.0 - (weights * tables).sum(axis=(1, 2))[defined] / chance[defined]
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _agreement(
    a: Sequence[int], b: Sequence[int], categories: Sequence[int], weighted: bool
) -> dict[str, Any]:
    low, high = kappa_interval(a, b, categories, weighted) if a else (None, None)
    return {
        "statistic": "quadratic-weighted kappa" if weighted else "Cohen's kappa",
        "n": len(a),
        "value": kappa(a, b, categories, weighted) if a else None,
        "ci_low": low,
        "ci_high": high,
        "observed": float(np.mean([x == y for x, y in zip(a, b, strict=True)])) if a else None,
    }


def judge_sections(
    samples: Sequence[SampleRecord],
    judgements: Sequence[JudgementRecord],
    judges: Sequence[JudgeIdentity],
    qualifications: Sequence[QualificationRecord] = (),
) -> list[dict[str, Any]]:
    """summary.json's ``judges``: one section per rubric the run was judged under. A verdict counts
    only for the answer it judged (a sample answered again after it was judged is not judged yet);
    a qualification only for the judge of its identity and rubric (the latest, where there are several)."""
    qualified = {record.key: _qualification(record) for record in qualifications}
    answered = {r.sample_id: r for r in samples if not r.control and r.error is None}
    # What each sample's current answer is judged under, hashed once for every judge and rubric.
    current = {i: (r.prompt_sha256, answer_sha256(r.output)) for i, r in answered.items()}
    by_rubric: defaultdict[str, list[JudgeIdentity]] = defaultdict(list)
    for judge in judges:
        by_rubric[judge.rubric_sha256].append(judge)
    return [
        _section(answered, current, judgements, sorted(group, key=lambda j: j.role), qualified)
        for group in by_rubric.values()
    ]


def _qualification(record: QualificationRecord) -> dict[str, Any]:
    """What a judge's row shows of its qualification."""
    keep = (
        "set",
        "set_sha256",
        "passed",
        "failures",
        "accuracy",
        "kappa",
        "flips",
        "adversarial",
        "flip_rate",
    )
    row = {name: getattr(record, name) for name in keep}
    return row | {"failures": list(record.failures)}


def _verdicts(
    current: dict[str, tuple[str, str]], judgements: Sequence[JudgementRecord], judge: JudgeIdentity
) -> tuple[dict[str, Scored], int]:
    """The judge's latest verdict per sample, on the sample's current answer; and how many of its
    current judgements are errors."""
    latest: dict[str, JudgementRecord] = {}
    for record in judgements:
        judged = (record.prompt_sha256, record.answer_sha256) == current.get(record.sample_id)
        if judged and (record.judge_identity, record.rubric_sha256) == (judge.identity, judge.rubric_sha256):
            latest[record.sample_id] = record
    errors = sum(1 for r in latest.values() if r.error is not None)
    return {k: Scored(r.score, r.reason) for k, r in latest.items() if r.score is not None}, errors


def _section(
    answered: dict[str, SampleRecord],
    current: dict[str, tuple[str, str]],
    judgements: Sequence[JudgementRecord],
    judges: Sequence[JudgeIdentity],
    qualified: dict[tuple[str, str], dict[str, Any]],
) -> dict[str, Any]:
    first = judges[0]
    scale, passing, weighted = list(first.scale), first.passing, first.rubric_kind == "ordinal"
    verdicts = [_verdicts(current, judgements, judge) for judge in judges]
    rows = []
    for judge, (mine, errors) in zip(judges, verdicts, strict=True):
        ids = sorted(mine)
        scores = [mine[i].score for i in ids]
        passed = [int(score >= passing) for score in scores]
        metric = [int(answered[i].score >= METRIC_PASS) for i in ids]
        low, high = bootstrap_interval([float(s) for s in scores]) if scores else (None, None)
        rows.append(
            {
                "role": judge.role,
                "name": judge.name,
                "family": judge.family,
                "tested_family": judge.tested_family,
                "judged": len(ids),
                "errors": errors,
                "unjudged": len(answered) - len(ids) - errors,
                "mean": float(np.mean(scores)) if scores else None,
                "ci_low": low,
                "ci_high": high,
                "pass_rate": float(np.mean(passed)) if passed else None,
                "metric_agreement": _agreement(passed, metric, [0, 1], weighted=False),
                # ``fathom judge --qualify``'s result for this judge and rubric; None: never qualified.
                "qualification": qualified.get((judge.identity, judge.rubric_sha256)),
            }
        )
    section: dict[str, Any] = {
        "rubric": first.rubric,
        "rubric_sha256": first.rubric_sha256,
        "kind": first.rubric_kind,
        "scale": scale,
        "passing": passing,
        "metric_pass": METRIC_PASS,
        "judges": rows,
        "by_task": _by_task(answered, [mine for mine, _ in verdicts], judges),
    }
    if len(judges) == 2:
        one, two = verdicts[0][0], verdicts[1][0]
        both = sorted(set(one) & set(two))
        a = [one[i].score for i in both]
        b = [two[i].score for i in both]
        section["agreement"] = _agreement(a, b, scale, weighted)
        section["disagreements"] = _disagreements(answered, one, two, both, scale)
    return section


def _by_task(
    answered: dict[str, SampleRecord],
    verdicts: Sequence[dict[str, Scored]],
    judges: Sequence[JudgeIdentity],
) -> list[dict[str, Any]]:
    """Per task: the metric's mean and each judge's, over the samples each judged."""
    tasks = sorted({r.task for r in answered.values()})
    rows = []
    for task in tasks:
        ids = [i for i, r in answered.items() if r.task == task]
        row: dict[str, Any] = {
            "task": task,
            "samples": len(ids),
            "metric": float(np.mean([answered[i].score for i in ids])),
        }
        for judge, mine in zip(judges, verdicts, strict=True):
            scores = [mine[i].score for i in ids if i in mine]
            row[judge.role] = float(np.mean(scores)) if scores else None
            row[f"{judge.role}_n"] = len(scores)
        rows.append(row)
    return rows


def _disagreements(
    answered: dict[str, SampleRecord],
    one: dict[str, Scored],
    two: dict[str, Scored],
    both: Sequence[str],
    scale: Sequence[int],
) -> list[dict[str, Any]]:
    """The samples the judges scored apart, the widest gaps first: what to read to see who is right."""
    apart = [i for i in both if one[i].score != two[i].score]
    apart.sort(key=lambda i: (-abs(scale.index(one[i].score) - scale.index(two[i].score)), i))
    return [
        {
            "sample_id": i,
            "task": answered[i].task,
            "question": answered[i].question,
            "answers": list(answered[i].answers),
            "output": answered[i].output,
            "metric": answered[i].score,
            "judge": one[i].score,
            "judge_reason": one[i].reason,
            "judge2": two[i].score,
            "judge2_reason": two[i].reason,
        }
        for i in apart[:DISAGREEMENTS_SHOWN]
    ]
