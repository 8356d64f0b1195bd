"""A judge's reply read strictly: one JSON object, the prompt's score key and ``reason``.

What counts as a verdict: the reply, after its leading space and a Markdown code fence (which chat
models add unasked), read on from the verdict's opening that the prompt gave, is one JSON object
with exactly the keys ``score_<nonce>`` (the nonce of this prompt's blocks; its value an integer on
the rubric's scale: ``1.0`` is not ``1``) and ``reason`` (a string). A verdict under any other key is
refused, above all a plain ``score`` or another prompt's nonce: that is what a verdict written inside
the judged answer looks like, and a judge that copies it gives none. Whatever follows the object is
ignored: a judge that keeps talking after its verdict has still given one. Anything else is
malformed, and why goes back to the judge on its next attempt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fathom.prompts.judging import Rubric, score_key, verdict_opening


@dataclass(frozen=True)
class Verdict:
    score: int
    reason: str


class Malformed(ValueError):
    """A reply that is no verdict; the message says what is wrong, for the judge's next attempt."""


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
        raise Malformed("it does not open with a JSON object")
    try:
        data, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        raise Malformed(f"its JSON does not parse: {exc.msg}") from None
    key = score_key(marker)
    if not isinstance(data, dict) or set(data) != {key, "reason"}:
        keys = ", ".join(sorted(data)) if isinstance(data, dict) else type(data).__name__
        raise Malformed(f'it must hold exactly "{key}" and "reason", not {keys}')
    score, reason = data[key], data["reason"]
    if type(score) is not int or score not in rubric.scale:
        raise Malformed(f"its score {json.dumps(score)} is not one of {', '.join(map(str, rubric.scale))}")
    if not isinstance(reason, str):
        raise Malformed('its "reason" is not a string')
    return Verdict(score, reason.strip())
