"""A judge's reply read strictly: one JSON object, the prompt's score key and ``reason``.

What counts as a verdict: the reply, after its leading space and a Markdown code fence (which chat
models add unasked), read on from the verdict's opening that the prompt gave, is one JSON object
with exactly the keys ``score_<nonce>`` (the nonce of this prompt's blocks; its value an integer on
the rubric's scale: ``1.0`` is not ``1``) and ``reason`` (a string). A verdict under any other key is
refused, above all a plain ``score`` or another prompt's nonce: that is what a verdict written inside
the judged answer looks like, and a judge that copies it gives none. Whatever follows the object is
ignored: a judge that keeps talking after its verdict has still given one. Anything else is
malformed, and why (one of ``Unreadable``'s problems, in fathom's words: never the reply's own)
goes back to the judge on its next attempt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fathom.prompts.judging import Rubric, Unreadable, score_key, verdict_opening


@dataclass(frozen=True)
class Verdict:
    score: int
    reason: str


class Malformed(ValueError):
    """A reply that is no verdict; ``problem`` says what is wrong, for the judge's next attempt."""

    def __init__(self, problem: Unreadable) -> None:
        super().__init__(problem.value)
        self.problem = problem


def parse_verdict(reply: str, rubric: Rubric, marker: str) -> Verdict:
    """The verdict in ``reply`` to the prompt whose blocks carry ``marker``: a whole object, or the
    rest of one after ``verdict_opening(marker)``, with which the judge's prompt opened its reply (a
    chat server may drop that opening, and a judge may start its object over)."""
    text = reply.strip()
    if not text.startswith(("{", "```")):
        text = verdict_opening(marker) + reply
    if text.startswith("```"):
        text = text.removeprefix("```json").removeprefix("```").strip()
    if not text.startswith("{"):
        raise Malformed(Unreadable.NOT_AN_OBJECT)
    try:
        # The text opens with "{": what decodes is an object.
        data, _ = json.JSONDecoder().raw_decode(text)
    except (json.JSONDecodeError, RecursionError):  # RecursionError: nested past the parser's stack
        raise Malformed(Unreadable.NOT_AN_OBJECT) from None
    key = score_key(marker)
    if set(data) != {key, "reason"}:
        raise Malformed(Unreadable.WRONG_KEYS)
    score, reason = data[key], data["reason"]
    if type(score) is not int or score not in rubric.scale:
        raise Malformed(Unreadable.OFF_SCALE)
    if not isinstance(reason, str):
        raise Malformed(Unreadable.REASON_NOT_TEXT)
    return Verdict(score, reason.strip())
