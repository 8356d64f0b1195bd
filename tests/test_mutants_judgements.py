"""The judges' files' readers (``fathom.run.judgements``) at each bound they check, visited from both
sides, with each refusal's message read whole. The other tests reach them through whole runs, or
check one value outside each bound."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from test_record_values import qualification

from fathom.judgement import JudgementRecord, QualificationRecord
from fathom.manifest import JudgeIdentity
from fathom.run.judgements import judgement_reader, read_qualification, read_qualifications

JUDGE = JudgeIdentity(
    role="judge", name="sim-judge:reference", settings={}, identity="2" * 16, family=None,
    tested_family=None, rubric="mine@1", rubric_sha256="3" * 64, rubric_kind="ordinal", scale=(1, 2, 3),
    passing=2,
)  # fmt: skip
VERDICT = JudgementRecord(
    sample_id="niah|L1024|D0.0000|S0", prompt_sha256="0" * 64, answer_sha256="1" * 64, role="judge",
    judge="sim-judge:reference", judge_identity="2" * 16, rubric="mine@1", rubric_sha256="3" * 64,
    score=3, reason="", reply="", attempts=1, latency_s=0.0,
)  # fmt: skip

REASON = "not JSON"  # what a line that does not parse is, in every reader's warning


def judged(**change: Any) -> dict[str, Any]:
    return dataclasses.replace(VERDICT, **change).to_json()


def test_a_judgement_is_read_on_its_judges_scale_at_each_bound() -> None:
    read = judgement_reader([JUDGE])
    # At the bounds: the scale's ends, one attempt, no time; an error with no score.
    for change in ({}, {"score": 1}, {"latency_s": 2.5}, {"attempts": 3}, {"score": None, "error": "e"}):
        assert read(judged(**change)) == dataclasses.replace(VERDICT, **change)
    refused = [
        ({"score": 4}, "score 4 is not on its judge's scale [1, 2, 3]"),
        ({"score": 0}, "score 0 is not on its judge's scale [1, 2, 3]"),
        ({"score": None}, "a judgement has a score or an error, one of the two"),
        ({"error": "e"}, "a judgement has a score or an error, one of the two"),
        ({"attempts": 0}, "field 'attempts' is 0, not 1 or more"),
        ({"latency_s": -0.5}, "field 'latency_s' holds -0.5, not a finite number in [0.0, inf]"),
        ({"latency_s": math.inf}, "field 'latency_s' holds inf, not a finite number in [0.0, inf]"),
    ]
    for change, reason in refused:
        with pytest.raises(ValueError) as error:
            read(judged(**change))
        assert str(error.value) == reason
    # A judge the manifest does not list, or another rubric of a listed judge: no scale to check.
    assert read(judged(score=9, rubric_sha256="4" * 64)).score == 9
    assert judgement_reader([])(judged(score=9)).score == 9


@pytest.mark.parametrize(
    "change",
    [
        # The fixture: 10 items, 4 adversarial. Each count at its bound, both ends.
        {"agreed": 10}, {"agreed": 0}, {"unreadable": 10}, {"adversarial": 10, "flips": 10}, {"flips": 0},
        {"adversarial": 0, "flips": 0}, {"accuracy": 0.0}, {"accuracy": 1.0}, {"flip_rate": 1.0},
        {"flip_rate": 0.0}, {"kappa": -1.0}, {"kappa": 1.0}, {"kappa": None}, {"items": 0, "agreed": 0,
        "unreadable": 0, "adversarial": 0, "flips": 0}, {"thresholds": {"accuracy": -5.0}},
        {"by_category": {"plain": {"items": 0}}},
    ],
)  # fmt: skip
def test_a_qualification_at_each_bound_is_read(change: dict[str, Any]) -> None:
    assert read_qualification(qualification(**change)) == QualificationRecord.from_json(
        qualification(**change)
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"unreadable": 11}, "field 'unreadable' holds 11, not a finite number in [0, 10]"),
        ({"unreadable": -1}, "field 'unreadable' holds -1, not a finite number in [0, 10]"),
        ({"adversarial": 11}, "field 'adversarial' holds 11, not a finite number in [0, 10]"),
        ({"adversarial": 0}, "field 'flips' holds 1, not a finite number in [0, 0]"),
        ({"flips": -1}, "field 'flips' holds -1, not a finite number in [0, 4]"),
        ({"agreed": -1}, "field 'agreed' holds -1, not a finite number in [0, 10]"),
        ({"accuracy": -0.1}, "field 'accuracy' holds -0.1, not a finite number in [0.0, 1.0]"),
        ({"flip_rate": 1.5}, "field 'flip_rate' holds 1.5, not a finite number in [0.0, 1.0]"),
        ({"flip_rate": -0.5}, "field 'flip_rate' holds -0.5, not a finite number in [0.0, 1.0]"),
        ({"kappa": 1.5}, "field 'kappa' holds 1.5, not a finite number in [-1.0, 1.0]"),
        ({"items": -1}, "field 'items' holds -1, not a finite number in [0, inf]"),
        (
            {"thresholds": {"kappa": -math.inf}},
            "field 'thresholds' holds -inf, not a finite number in [-inf, inf]",
        ),
    ],
)  # fmt: skip
def test_a_qualification_past_a_bound_is_refused_naming_it(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError) as refused:
        read_qualification(qualification(**change))
    assert str(refused.value) == reason


def test_a_damaged_qualification_line_is_left_out_with_one_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = qualification()
    (tmp_path / "qualifications.jsonl").write_text(
        json.dumps(good) + "\n{not json\n" + json.dumps(good) + "\n"
    )
    with caplog.at_level(logging.WARNING, logger="fathom.run.judgements"):
        assert read_qualifications(tmp_path) == [QualificationRecord.from_json(good)] * 2
    assert caplog.messages == [
        f"left out 1 damaged line(s) of {tmp_path / 'qualifications.jsonl'} (line 2: {REASON}); "
        "'fathom judge' moves them aside"
    ]
