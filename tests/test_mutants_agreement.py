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


# A run of four graded samples (two tasks) and two that count for no judge: a control and an error.
# Sample 1 scores exactly METRIC_PASS (a pass for the metric); sample 3 is task "vt".
GRADED = [sample(0, 1.0), sample(1, 0.5), sample(2, 0.0), dataclasses.replace(sample(3), task="vt")]
LEFT_OUT = [
    dataclasses.replace(sample(4), control=True),
    dataclasses.replace(sample(5), error="backend_error: x"),
]
# judge: 4 (the passing score, exactly) on samples 0 to 2, nothing on 3. judge2: 5 on sample 0, an
# unreadable verdict on 1, 4 on 3, nothing on 2. Both scored sample 0 alone.
VERDICTS = [verdict(GRADED[i], ONE, 4) for i in range(3)] + [
    verdict(GRADED[0], TWO, 5),
    verdict(GRADED[1], TWO, None),
    verdict(GRADED[3], TWO, 4),
]


def test_a_section_by_hand_its_judges_rows_tasks_and_agreement() -> None:
    made = section(GRADED + LEFT_OUT, VERDICTS)
    assert {k: v for k, v in made.items() if k not in ("judges", "by_task", "disagreements")} == {
        "rubric": "graded@1",
        "rubric_sha256": "r" * 64,
        "kind": "ordinal",
        "scale": [1, 2, 3, 4, 5],
        "passing": 4,
        "metric_pass": 0.5,
        # Sample 0 alone, 4 against 5: observed and chance weighted disagreement both 1/16, kappa 0,
        # and every resample is that one item again.
        "agreement": {
            "statistic": "quadratic-weighted kappa",
            "n": 1,
            "value": 0.0,
            "ci_low": 0.0,
            "ci_high": 0.0,
            "observed": 0.0,
        },
    }
    assert [row["sample_id"] for row in made["disagreements"]] == [GRADED[0].sample_id]
    first, second = made["judges"]
    # judge: three 4s (mean 4, every resample's mean 4), all passing; the metric passes samples 0
    # and 1 (1.0, and 0.5 exactly) and fails 2: observed 2/3; judge's labels are all 1, so chance
    # disagreement is the metric's share of 0, 1/3, as is the observed: kappa 1 - (1/3)/(1/3) = 0.
    passed_low, passed_high = kappa_interval([1, 1, 1], [1, 1, 0], [0, 1])
    assert first == {
        "role": "judge", "name": "sim:judge", "family": None, "tested_family": None,
        "judged": 3, "errors": 0, "unjudged": 1, "mean": 4.0, "ci_low": 4.0, "ci_high": 4.0,
        "pass_rate": 1.0,
        "metric_agreement": {
            "statistic": "Cohen's kappa", "n": 3, "value": 0.0, "ci_low": passed_low,
            "ci_high": passed_high, "observed": pytest.approx(2 / 3, abs=1e-12),
        },
        "qualification": None,
    }  # fmt: skip
    # judge2: 5 and 4 (mean 4.5; a quarter of the resamples are two 4s, a quarter two 5s, so the
    # 2.5th and 97.5th percentiles are 4 and 5), one error, sample 2 unjudged. Both pass, as does the
    # metric on samples 0 and 3: one label throughout, kappa undefined in every resample.
    assert second == {
        "role": "judge2", "name": "sim:judge2", "family": None, "tested_family": None,
        "judged": 2, "errors": 1, "unjudged": 1, "mean": 4.5, "ci_low": 4.0, "ci_high": 5.0,
        "pass_rate": 1.0,
        "metric_agreement": {
            "statistic": "Cohen's kappa", "n": 2, "value": None, "ci_low": None, "ci_high": None,
            "observed": 1.0,
        },
        "qualification": None,
    }  # fmt: skip
    # The control and the errored sample count in no task: niah holds samples 0 to 2 (metric mean
    # (1 + 0.5 + 0) / 3), vt sample 3, which judge left unjudged.
    assert made["by_task"] == [
        {"task": "niah", "samples": 3, "metric": 0.5, "judge": 4.0, "judge_n": 3, "judge2": 5.0,
         "judge2_n": 1},
        {"task": "vt", "samples": 1, "metric": 1.0, "judge": None, "judge_n": 0, "judge2": 4.0,
         "judge2_n": 1},
    ]  # fmt: skip


def test_a_judge_that_scored_nothing_has_no_numbers_and_one_judge_no_agreement() -> None:
    mine = [v for v in VERDICTS if v.role == "judge"]
    made = section(GRADED, mine)
    empty = {
        "statistic": "Cohen's kappa", "n": 0, "value": None, "ci_low": None, "ci_high": None,
        "observed": None,
    }  # fmt: skip
    assert made["judges"][1] == {
        "role": "judge2", "name": "sim:judge2", "family": None, "tested_family": None,
        "judged": 0, "errors": 0, "unjudged": 4, "mean": None, "ci_low": None, "ci_high": None,
        "pass_rate": None, "metric_agreement": empty, "qualification": None,
    }  # fmt: skip
    assert made["agreement"] == empty | {"statistic": "quadratic-weighted kappa"}
    assert made["disagreements"] == []
    assert [row["judge2"] for row in made["by_task"]] == [None, None]
    (alone,) = judge_sections(GRADED, mine, [ONE])
    assert [row["role"] for row in alone["judges"]] == ["judge"]
    assert (alone["rubric"], alone["scale"], alone["passing"]) == ("graded@1", [1, 2, 3, 4, 5], 4)
    assert "agreement" not in alone and "disagreements" not in alone
