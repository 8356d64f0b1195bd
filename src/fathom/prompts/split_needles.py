"""Needles in two parts (kinds ``split`` and ``chain``): the parts, their look-alikes, and where the
parts go. ``needle_sets`` places them with the other needles of a sample."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from fathom.errors import SpecError
from fathom.prompts.spaces import ATTEMPTS, Space
from fathom.records import DISTRACTOR_ROLES

CLASS_DISTRACTOR = DISTRACTOR_ROLES[1]


def fresh(draw: Callable[[random.Random], str], rng: random.Random, taken: set[str]) -> str:
    """A value from ``draw`` that is none of ``taken``: each needle and look-alike states its own."""
    for _ in range(ATTEMPTS):
        value = draw(rng)
        if value not in taken:
            return value
    raise RuntimeError("no fresh value")


@dataclass(frozen=True)
class Parts:
    """A fact in two parts: each part's text, evidence phrase and stated value; the question and
    its answers; ``subject`` (the code's key, or the person) and ``link`` (what joins the parts)."""

    texts: tuple[str, str]
    keys: tuple[str, str]
    values: tuple[str, str]
    question: str
    answers: tuple[str, ...]
    subject: str
    link: str


def _split(rng: random.Random, space: Space) -> Parts:
    """Two halves of a code; the answer is both halves."""
    key = space.key(rng)
    first, second = space.code_half(rng), space.code_half(rng)
    return Parts(
        texts=(
            f" The first half of the vault code for {key} is {first}.",
            f" The second half of the vault code for {key} is {second}.",
        ),
        keys=(f"first half of the vault code for {key}", f"second half of the vault code for {key}"),
        values=(first, second),
        question=f"What is the whole vault code for {key}? Give the first half, then the second.",
        answers=(first, second),
        subject=key,
        link=key,
    )


def _chain(rng: random.Random, space: Space) -> Parts:
    """A two-hop chain: who keeps the ledger in which chest, and where that chest went."""
    person = space.word(rng, 2)
    chest = f"{space.passphrase(rng)} chest"
    place = space.place(rng)
    return Parts(
        texts=(
            f" {person} keeps the family ledger locked in the {chest}.",
            f" The {chest} was sent to the town of {place} last spring.",
        ),
        keys=(f"{person} keeps the family ledger", f"The {chest} was sent"),
        values=(chest, place),
        question=f"In which town is the family ledger of {person} now?",
        answers=(place,),
        subject=person,
        link=chest,
    )


def draw_parts(kind: str, rng: random.Random, space: Space) -> Parts:
    """The two parts of a ``split`` or ``chain`` needle."""
    return _split(rng, space) if kind == "split" else _chain(rng, space)


def part_lookalike(
    kind: str, parts: Parts, style: str, rng: random.Random, taken: set[str], space: Space
) -> tuple[str, str]:
    if kind == "split":  # another code of the same key, or a near-miss key's first half
        value = fresh(space.code_half, rng, taken)
        if style == CLASS_DISTRACTOR:
            text = f" The first half of the door code for {parts.subject} is {value}."
            return text, value
        key = space.near_key(parts.subject, rng, taken)
        return f" The first half of the vault code for {key} is {value}.", value
    place = fresh(space.place, rng, taken)
    if style == CLASS_DISTRACTOR:  # the same person in another town
        return f" {parts.subject} once kept a diary in the town of {place}.", place
    # A look-alike chest, the gold chest's noun kept: only its adjective tells them apart.
    noun = parts.link.split(" ")[1]
    chest = fresh(lambda r: f"{r.choice(space.adjectives)} {noun} chest", rng, taken | {parts.link})
    return f" The {chest} was sent to the town of {place} last spring.", place


def split_depths(depth: float, distance: float) -> tuple[float, float]:
    """The parts' depths: the first at ``depth``, the second ``distance`` after it, or before it
    where after would leave the haystack."""
    if depth + distance <= 1.0:
        return depth, depth + distance
    if depth - distance >= 0.0:
        return depth, depth - distance
    raise SpecError(
        f"a split needle at depth {depth:g} cannot have its parts {distance:g} of the haystack apart: "
        f"use --split-distance {max(depth, 1.0 - depth):g} or less (0.5 or less fits every depth)"
    )
