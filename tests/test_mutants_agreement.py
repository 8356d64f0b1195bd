"""The judges' section of summary.json (``fathom.analysis.agreement.judge_sections``) on records made
by hand, where the end-to-end tests of ``fathom judge`` leave it open: the order of the
disagreements, what a qualification row keeps, and which verdicts and qualifications count. Each
expected value is worked out in the comment beside it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_store import record

from fathom.analysis.agreement import judge_sections, kappa, kappa_interval
from fathom.judgement import JudgementRecord, QualificationRecord, answer_sha256
from fathom.manifest import JudgeIdentity
from fathom.records import SampleRecord

SCALE = (1, 2, 3, 4, 5)


def judge(role: str, identity: str) -> JudgeIdentity:
    return JudgeIdentity(
        role=role, name=f"sim:{role}", settings={}, identity=identity, family=None, tested_family=None,
        rubric="graded@1", rubric_sha256="r" * 64, rubric_kind="ordinal", scale=SCALE, passing=4,
    )  # fmt: skip


ONE, TWO = judge("judge", "a" * 64), judge("judge2", "b" * 64)


def sample(index: int, score: float = 1.0) -> SampleRecord:
    return dataclasses.replace(record(index), score=score)


def verdict(of: SampleRecord, by: JudgeIdentity, score: int | None, reason: str = "") -> JudgementRecord:
    return JudgementRecord(
        sample_id=of.sample_id, prompt_sha256=of.prompt_sha256, answer_sha256=answer_sha256(of.output),
        role=by.role, judge=by.name, judge_identity=by.identity, rubric=by.rubric,
        rubric_sha256=by.rubric_sha256, score=score, reason=reason or f"{by.role} {score}", reply="",
        attempts=1, latency_s=0.0, error=None if score is not None else "unreadable",
    )  # fmt: skip


def section(samples: list[SampleRecord], judgements: list[JudgementRecord], **more: Any) -> dict[str, Any]:
    sections = judge_sections(samples, judgements, [TWO, ONE], **more)
    assert len(sections) == 1
    return sections[0]


def test_disagreements_are_listed_widest_gap_first_then_by_sample_id() -> None:
    samples = [sample(i) for i in range(6)]
    # (judge, judge2) per sample: gaps 0, 1, 4, 2, 1, 4. Sorted by -gap, then id: 2 and 5 (4), 3 (2),
    # 1 and 4 (1); sample 0 agrees. A sum of the scale's indices (2+2, 1+5, ...) would order them
    # otherwise, as would the smallest gap first or the ids alone.
    pairs = [(3, 3), (2, 3), (1, 5), (4, 2), (5, 4), (5, 1)]
    judgements = [verdict(s, ONE, a) for s, (a, _) in zip(samples, pairs, strict=True)] + [
        verdict(s, TWO, b) for s, (_, b) in zip(samples, pairs, strict=True)
    ]
    listed = section(samples, judgements)["disagreements"]
    assert [(row["sample_id"][-2:], row["judge"], row["judge2"]) for row in listed] == [
        ("S2", 1, 5),
        ("S5", 5, 1),
        ("S3", 4, 2),
        ("S1", 2, 3),
        ("S4", 5, 4),
    ]
    assert listed[0] | {"answers": tuple(listed[0]["answers"])} == {
        "sample_id": samples[2].sample_id,
        "task": "niah",
        "question": "q?",
        "answers": ("1234567",),
        "output": "1234567",
        "metric": 1.0,
        "judge": 1,
        "judge_reason": "judge 1",
        "judge2": 5,
        "judge2_reason": "judge2 5",
    }


def qualification(by: JudgeIdentity, passed: bool, failures: tuple[str, ...]) -> QualificationRecord:
    return QualificationRecord(
        judge=by.name, judge_identity=by.identity, rubric=by.rubric, rubric_sha256=by.rubric_sha256,
        set="qualify@1", set_sha256="q" * 64, items=20, agreed=17, unreadable=1, accuracy=0.85,
        kappa=0.7, adversarial=8, flips=1, flip_rate=0.125, by_category={"plain": {"items": 12}},
        thresholds={"accuracy": 0.8}, passed=passed, failures=failures, verdicts={"q1": 4},
    )  # fmt: skip


def test_a_judges_row_shows_its_latest_qualification_and_none_for_a_judge_never_qualified() -> None:
    samples = [sample(0)]
    judgements = [verdict(samples[0], ONE, 4), verdict(samples[0], TWO, 4)]
    older = qualification(ONE, False, ("accuracy 0.5 < 0.8",))
    latest = qualification(ONE, True, ())
    elsewhere = dataclasses.replace(latest, rubric_sha256="s" * 64)  # another rubric's: not this row's
    rows = section(samples, judgements, qualifications=[older, latest, elsewhere])["judges"]
    assert [row["role"] for row in rows] == ["judge", "judge2"]
    assert rows[0]["qualification"] == {
        "set": "qualify@1",
        "set_sha256": "q" * 64,
        "passed": True,
        "failures": [],
        "accuracy": 0.85,
        "kappa": 0.7,
        "flips": 1,
        "adversarial": 8,
        "flip_rate": 0.125,
    }
    assert rows[1]["qualification"] is None
    failed = section(samples, judgements, qualifications=[latest, older])["judges"][0]["qualification"]
    assert (failed["passed"], failed["failures"]) == (False, ["accuracy 0.5 < 0.8"])


def test_the_kappa_of_one_item_is_over_that_one_item() -> None:
    # One item, the raters apart: observed agreement 0, chance agreement 0 (each gave one label, a
    # different one), so kappa = (0 - 0) / (1 - 0) = 0. The table divided by 2, not by the one
    # item, gives 1 - 0.5 / 0.25 = -1.
    assert kappa([1], [2], [1, 2]) == 0.0
    assert kappa([1], [3], [1, 2, 3], weighted=True) == 0.0
    # The same item agreed on: chance agreement total, kappa undefined.
    assert kappa([2], [2], [1, 2]) is None


def test_the_kappa_interval_is_unweighted_unless_asked() -> None:
    # Three categories, where quadratic weights differ from 0/1 ones (1 against 3 weighs 1, against 2 a
    # quarter): the intervals differ, and the default is the unweighted one.
    a = [1, 2, 3, 1, 2, 3, 1, 2, 3, 3]
    b = [1, 3, 3, 2, 2, 1, 1, 2, 2, 3]
    unweighted, weighted = kappa_interval(a, b, SCALE[:3]), kappa_interval(a, b, SCALE[:3], weighted=True)
    assert unweighted == kappa_interval(a, b, SCALE[:3], weighted=False)
    assert unweighted != weighted


def test_a_weighted_kappa_of_two_categories_is_cohens() -> None:
    # Two categories: the one distance is 1 and weighs 1 (1 / (2 - 1)^2), as Cohen's 0/1 weights do.
    # 2x2 table of 8 items: agree on 0 three times, on 1 three times, apart twice (once each way):
    # p_o = 6/8, margins 4/8 each, p_e = 1/2, kappa = (3/4 - 1/2) / (1/2) = 1/2.
    a = [0, 0, 0, 1, 1, 1, 0, 1]
    b = [0, 0, 0, 1, 1, 1, 1, 0]
    assert kappa(a, b, [0, 1], weighted=True) == kappa(a, b, [0, 1]) == 0.5


def test_the_agreement_between_judges_and_with_the_metric_by_hand() -> None:
    # Judge against judge2 on a five-point scale: (1, 1), (1, 1), (5, 5), (5, 3), three times over (so
    # that the bootstrap intervals, weighted and not, differ). Quadratic weights
    # (i - j)^2 / 16: observed weighted disagreement (0 + 0 + 0 + 4/16) / 4 = 1/16; expected from the
    # margins (judge: 1 and 5 half each; judge2: 1 half, 3 and 5 a quarter each) 0.125 + 0.03125 +
    # 0.25 + 0.03125 = 7/16; kappa 1 - (1/16) / (7/16) = 6/7. Unweighted it would be 0.6.
    samples = [sample(i, score) for i, score in enumerate((0.0, 1.0, 1.0, 1.0) * 3)]
    one, two = (1, 1, 5, 5) * 3, (1, 1, 5, 3) * 3
    judgements = [verdict(s, ONE, a) for s, a in zip(samples, one, strict=True)] + [
        verdict(s, TWO, b) for s, b in zip(samples, two, strict=True)
    ]
    made = section(samples, judgements)
    interval = kappa_interval(list(one), list(two), SCALE, weighted=True)
    assert interval != kappa_interval(list(one), list(two), SCALE)  # the weights tell them apart
    assert made["agreement"] == {
        "statistic": "quadratic-weighted kappa",
        "n": 12,
        "value": pytest.approx(6 / 7, abs=1e-12),
        "ci_low": interval[0],
        "ci_high": interval[1],
        "observed": 0.75,
    }
    # The judge against the metric, pass/fail: passed (score >= 4) 0, 0, 1, 1; the metric (>= 0.5)
    # 0, 1, 1, 1. p_o = 3/4, p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2: Cohen's kappa (3/4 - 1/2) / (1/2) = 1/2.
    passed, metric = [0, 0, 1, 1] * 3, [0, 1, 1, 1] * 3
    low, high = kappa_interval(passed, metric, [0, 1])
    assert made["judges"][0]["metric_agreement"] == {
        "statistic": "Cohen's kappa",
        "n": 12,
        "value": pytest.approx(0.5, abs=1e-12),
        "ci_low": low,
        "ci_high": high,
        "observed": 0.75,
    }
    assert low is not None and high is not None
