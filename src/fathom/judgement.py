"""An LLM judge's verdict as a record: one line of judgements.jsonl (``fathom judge``), beside the
run's sample records, with a versioned JSON form of its own."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

from fathom.schemas import JUDGEMENT_SCHEMA, Versions, read


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
