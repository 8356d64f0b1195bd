"""An LLM judge's verdict as a record: one line of judgements.jsonl (``fathom judge``), beside the
run's sample records, with a versioned JSON form of its own; and a judge's result on a qualification
set (``fathom judge --qualify``), one line of qualifications.jsonl."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

from fathom.schemas import JUDGEMENT_SCHEMA, QUALIFICATION_SCHEMA, Versions, read


def answer_sha256(answer: str) -> str:
    """An answer's hash, by which a judgement names the answer it judged."""
    return hashlib.sha256(answer.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class JudgementRecord:
    """One line of judgements.jsonl: an LLM judge's verdict on one sample's answer under a rubric.

    It is found again by ``key``: the sample's prompt and answer, the judge and the rubric, so a run
    judged twice pays once, and a new answer (a resumed sample) or an edited rubric is judged anew.
    ``score`` is on the rubric's scale; None with ``error`` when no attempt gave a readable verdict
    (the judgement is tried again on the next ``fathom judge``, never counted as a score).
    """

    sample_id: str
    prompt_sha256: str
    answer_sha256: str
    role: str  # "judge" or "judge2": which of the run's judges gave it
    judge: str  # as named, e.g. llamacpp:gemma3-270m
    judge_identity: str  # a hash of the judge's backend and settings
    rubric: str  # name@version
    rubric_sha256: str
    score: int | None
    reason: str
    reply: str  # the judge's last reply, as it came (capped at ANSWER_BYTES)
    attempts: int
    latency_s: float
    error: str | None = None
    record: str = "judgement"
    schema: int = JUDGEMENT_SCHEMA

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.prompt_sha256, self.answer_sha256, self.judge_identity, self.rubric_sha256)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JudgementRecord:
        return read(cls, JUDGEMENTS.upgrade(data))


JUDGEMENTS = Versions("judgement", JUDGEMENT_SCHEMA, ())


@dataclass(frozen=True)
class QualificationRecord:
    """A judge's result on a qualification set (``fathom.judge.qualify``): its agreement with the
    hand-written labels, how often an answer's injection flipped its verdict, and whether it passed
    the set's thresholds. Found again by the judge's identity (its backend, settings and prompt
    version) and the rubric, as its judgements are; ``verdicts`` keeps each item's score (None where
    no attempt gave a readable verdict)."""

    judge: str
    judge_identity: str
    rubric: str  # name@version
    rubric_sha256: str
    set: str  # name@version
    set_sha256: str
    items: int
    agreed: int  # verdicts that pass or fail as the label says
    unreadable: int
    accuracy: float  # agreed / items: an unreadable verdict agrees with nothing
    kappa: float | None  # Cohen's kappa with the labels, over the readable verdicts
    adversarial: int
    flips: int  # adversarial items whose verdict is the one the injection asked for
    flip_rate: float
    by_category: dict[str, dict[str, int]]  # category -> items, agreed, flips, unreadable
    thresholds: dict[str, float]  # accuracy and kappa at least, flip_rate at most
    passed: bool
    failures: tuple[str, ...]  # each threshold missed, in words
    verdicts: dict[str, int | None]  # item id -> score
    record: str = "qualification"
    schema: int = QUALIFICATION_SCHEMA

    @property
    def key(self) -> tuple[str, str]:
        return (self.judge_identity, self.rubric_sha256)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QualificationRecord:
        return read(cls, QUALIFICATIONS.upgrade(data))


QUALIFICATIONS = Versions("qualification", QUALIFICATION_SCHEMA, ())
