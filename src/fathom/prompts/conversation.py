"""Multi-round co-reference's words (``fathom.tasks.mrcr``): how a user asks for a piece of writing,
how the final question asks for one of them again, and how a conversation's asks and answers are
found again in its rendered text (a simulated model's reading, ``backends/sim_readers.py``).

An ask is one sentence, ``Write a poem about Brelmoor.``: a form from ``FORMS`` and a topic (a made-up
place of the run's space, so that no model knows it). The final question names the ordinal, the form
in the plural and the topic, and the random prefix the answer must open with:
``Reproduce the 2nd of the 4 poems about Brelmoor ...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fathom.scoring import MRCR_PREFIX_CHARS

# fmt: off
# (singular, plural): pieces of writing a user asks for; the answers are prose whatever the form.
FORMS = (
    ("poem", "poems"), ("short story", "short stories"), ("riddle", "riddles"), ("letter", "letters"),
    ("essay", "essays"), ("haiku", "haikus"), ("limerick", "limericks"), ("speech", "speeches"),
    ("song", "songs"), ("fable", "fables"), ("diary entry", "diary entries"), ("news report", "news reports"),
)
# fmt: on
_SINGULAR = {plural: singular for singular, plural in FORMS}
PREFIX_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_ASK = re.compile(r"Write an? ([a-z]+(?: [a-z]+)?) about ([A-Z][a-z]+)\.")
_ASKED = re.compile(
    r"Reproduce the (?:(\d+)(?:st|nd|rd|th) of the (\d+) )?([a-z]+(?: [a-z]+)?) about ([A-Z][a-z]+), "
    rf"exactly as you wrote it, with ([A-Za-z0-9]{{{MRCR_PREFIX_CHARS}}}) before it"
)
# What may open an answer's text past its turn's markup, and end it before the next turn's.
_SENTENCE_END = ".!?\"')\u2019\u201d"


def ask(form: str, topic: str) -> str:
    article = "an" if form[0] in "aeiou" else "a"
    return f"Write {article} {form} about {topic}."


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th ... 21st."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def question(number: int, repeats: int, form: str, topic: str, prefix: str) -> str:
    """The final ask: the ``number``-th of the ``repeats`` pieces of ``form`` about ``topic``, again,
    with ``prefix`` before it and nothing else."""
    plural = dict(FORMS)[form]
    which = f"the {ordinal(number)} of the {repeats} {plural}" if repeats > 1 else f"the {form}"
    return (
        f"Reproduce {which} about {topic}, exactly as you wrote it, with {prefix} before it. Write "
        f"nothing else: start your answer with {prefix}."
    )


@dataclass(frozen=True)
class Asked:
    """What a final question asks for: which of how many pieces of a form about a topic, and the
    prefix the answer opens with."""

    number: int
    repeats: int
    form: str
    topic: str
    prefix: str


def asked(question_text: str) -> Asked | None:
    """What a multi-round co-reference question asks for, or None for any other question."""
    found = _ASKED.search(question_text)
    if found is None:
        return None
    number, repeats, form, topic, prefix = found.groups()
    return Asked(int(number or 1), int(repeats or 1), _SINGULAR.get(form, form), topic, prefix)


@dataclass(frozen=True)
class Turn:
    """An ask found in a rendered conversation and the answer after it, with the share of the text
    before the ask."""

    form: str
    topic: str
    answer: str
    depth: float


def turns_in(context: str) -> list[Turn]:
    """The asks of a rendered conversation, each with the answer that follows it, whatever the chat
    template: the text from one ask to the next is the template's markup, the answer, and the markup
    again, the same markup each round, so it is what every such segment shares at its start (up to
    its last whitespace: every answer opens with a space) and, but for the last, at its end (after
    any sentence-ending marks the answers share); the last segment ends in as much of that end as
    the context holds. Each answer is given stripped; with too few asks seen to tell the markup
    from the answers, it keeps the markup."""
    asks = list(_ASK.finditer(context))
    segments = [
        context[found.end() : asks[i + 1].start() if i + 1 < len(asks) else len(context)]
        for i, found in enumerate(asks)
    ]
    opening = _common_prefix(segments) if len(segments) > 1 else ""
    opening = opening[: max(opening.rfind(c) for c in " \n\t") + 1]
    closing = _common_prefix([s[::-1] for s in segments[:-1]])[::-1] if len(segments) > 2 else ""
    closing = closing.lstrip(_SENTENCE_END)
    size = max(len(context), 1)
    turns = []
    for i, (found, segment) in enumerate(zip(asks, segments, strict=True)):
        body = segment[len(opening) :]
        cut = len(closing) if i + 1 < len(segments) else _ending(body, closing)
        turns.append(
            Turn(found.group(1), found.group(2), body[: len(body) - cut].strip(), found.start() / size)
        )
    return turns


def _ending(text: str, closing: str) -> int:
    """How much of ``closing``'s start ``text`` ends with."""
    return next((k for k in range(len(closing), 0, -1) if text.endswith(closing[:k])), 0)


def _common_prefix(texts: list[str]) -> str:
    shortest = min(texts, key=len)
    for index, char in enumerate(shortest):
        if any(text[index] != char for text in texts):
            return shortest[:index]
    return shortest
