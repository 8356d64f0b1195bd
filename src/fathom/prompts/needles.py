"""Needles a model cannot have memorised: generated per sample from the run's seed.

Every needle is a sentence holding a *key* (the thing asked about) and a *value* (the answer). The
question names the key in other words than the sentence does, so a model must find the sentence,
not just match the question's wording. k samples of a cell get k different needles.

Each generator draws from a ``Space`` (``prompts/spaces.py``): evaluation's by default, or the
training space that ``fathom export`` uses, whose keys, values and names no evaluation can draw.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from fathom.errors import SpecError

# The evaluation space's words and syllables live in prompts/spaces.py now; re-exported (X as X)
# for the code that has always imported them from here.
from fathom.prompts.spaces import ADJECTIVES as ADJECTIVES
from fathom.prompts.spaces import CODAS as CODAS
from fathom.prompts.spaces import EVAL, Space
from fathom.prompts.spaces import NOUNS as NOUNS
from fathom.prompts.spaces import ONSETS as ONSETS
from fathom.prompts.spaces import PLACE_ENDINGS as PLACE_ENDINGS
from fathom.prompts.spaces import VOWELS as VOWELS
from fathom.records import Needle

SAN_FRANCISCO = Needle(
    kind="sf",
    text=(" The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."),
    question="What is the best thing to do in San Francisco?",
    answers=("sandwich", "Dolores Park"),
    key="San Francisco",
)


def needle_rng(seed: int, *parts: object) -> random.Random:
    """A generator seeded by the run seed and the sample's coordinates, stable across processes."""
    material = "|".join(str(p) for p in (seed, *parts)).encode()
    return random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))


def made_up_name(rng: random.Random, syllables: int, space: Space = EVAL) -> str:
    return space.word(rng, syllables)


@dataclass(frozen=True)
class KeyedNeedle:
    """A needle keyed by a random adjective-noun pair; ``text`` and ``question`` name {key} and
    ``text`` names {value}."""

    text: str
    question: str
    value: Callable[[Space, random.Random], str]  # a Space method: the value's class

    def draw(self, kind: str, rng: random.Random, space: Space = EVAL) -> Needle:
        key = space.key(rng)  # drawn before the value: the order fixes every seeded needle
        value = self.value(space, rng)
        return Needle(kind, self.render(key, value), self.question.format(key=key), (value,), key)

    def render(self, key: str, value: str) -> str:
        """The needle's text for ``key`` and ``value``; a template may also name the key as a
        constant's name (``{name}``: mellow-blanket is MELLOW_BLANKET)."""
        return self.text.format(key=key, value=value, name=constant_name(key))


def constant_name(key: str) -> str:
    """A key as a valid identifier's part, in capitals: every run of other characters an underscore."""
    return re.sub(r"[^0-9A-Za-z]+", "_", key).strip("_").upper()


KEYED_NEEDLES = {
    "number": KeyedNeedle(
        " One of the special magic numbers for {key} is: {value}.",
        "Which number was given as the special magic number for {key}?",
        Space.number,
    ),
    "words": KeyedNeedle(
        " The secret passphrase chosen for {key} is {value}.",
        "What two words make up the passphrase for {key}?",
        Space.passphrase,
    ),
    "uuid": KeyedNeedle(
        " The special magic identifier for {key} is: {value}.",
        "Which UUID is recorded as the special magic identifier for {key}?",
        Space.identifier,
    ),
}


def _fact(rng: random.Random, space: Space) -> Needle:
    person = space.person(rng)
    place = space.place(rng)
    return Needle(
        kind="fact",
        text=f" After many years abroad, {person} settled in the town of {place}.",
        question=f"In which town did {person} finally make a home?",
        answers=(place,),
        key=person,
    )


def _sf(_rng: random.Random, space: Space) -> Needle:
    if space.split != "eval":  # one published sentence, asked in every evaluation: no other part
        raise SpecError(
            "the sf needle is one fixed sentence, the same in every evaluation: it has no training part"
        )
    return SAN_FRANCISCO


NEEDLE_KINDS: dict[str, Callable[[random.Random, Space], Needle]] = {
    **{kind: functools.partial(keyed.draw, kind) for kind, keyed in KEYED_NEEDLES.items()},
    "fact": _fact,
    "sf": _sf,
}


def make_needle(kind: str, rng: random.Random, space: Space = EVAL) -> Needle:
    """A needle of the named kind, drawn from ``rng`` out of ``space`` (evaluation's by default)."""
    try:
        factory = NEEDLE_KINDS[kind]
    except KeyError:
        known = ", ".join(NEEDLE_KINDS)
        raise SpecError(f"unknown needle kind '{kind}': use one of {known}") from None
    return factory(rng, space)
