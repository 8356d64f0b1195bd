"""Hard needles: what one NIAH sample hides in its haystack and asks, beyond one plain sentence.

A plain needle is passed by a model that matches "the special magic number for X is" without
reading. A *needle set* makes that fail:

- **distractors**: near-miss sentences in the same haystack, at least ``gap`` of it away from every
  gold needle, asked for here and held where they land (``builder.snap``, ``Apart``). A *key*
  distractor is the gold's template with a near-miss key (one of its words kept); a *class*
  distractor keeps the gold's key but states a value of another class (an identifier beside a
  number; a childhood village beside the town someone settled in).
- **several needles**: ``needles`` facts at spread depths (the cell's depth first), one question
  asking for all of them.
- **split needles** (kinds ``split`` and ``chain``): one fact in two parts at two depths
  ``distance`` apart, which must be combined: two halves of a code, or a two-hop chain (X keeps the
  ledger in the chest; the chest was sent to town T: where is X's ledger?).

Every placement records its role and the value it states, so the grader can tell an answer that
took a distractor's value from one that missed, and analysis can say which positions were missed.

Every draw comes from a ``Space`` (``prompts/spaces.py``): evaluation's by default, or the training
space whose keys, values, names and items no evaluation draws.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fathom.errors import SpecError
from fathom.prompts.latent import (
    HOPS,
    LatentItem,
    content_overlap,
    draw_latent,
    items_in,
    latent_kind,
    rouge1,
)
from fathom.prompts.latent_forms import DEFAULT_FORMS, Form, Forms
from fathom.prompts.needle_styles import PROSE, Style
from fathom.prompts.needles import KEYED_NEEDLES, make_needle
from fathom.prompts.spaces import ATTEMPTS, EVAL, Space
from fathom.prompts.split_needles import draw_parts, fresh, part_lookalike, split_depths
from fathom.records import DISTRACTOR_ROLES, GOLD_ROLE, LITERAL_ROLE, PART_ROLE, Needle

GOLD, PART = GOLD_ROLE, PART_ROLE
KEY_DISTRACTOR, CLASS_DISTRACTOR = DISTRACTOR_ROLES
# A sentence that names a low-overlap question's place and nothing else of the needle: no character,
# so no lure (an answer restating the place is no wrong answer), only the literal match NoLiMa found
# most damaging, placed on purpose (--literal-distractor) and recorded with this role.
LITERAL_DISTRACTOR = LITERAL_ROLE
_LITERAL_SENTENCES = (
    " A faded postcard of {place} hung crooked above the kitchen sink.",
    " The radio played a long documentary about {place} late that evening.",
    " Someone had left a guidebook to {place} on the seat of the night train.",
)
SPLIT_KINDS = ("split", "chain")


@dataclass(frozen=True)
class Placement:
    """One sentence to hide: its text (with its leading space), the depth asked for it (0..1 of
    the haystack), its role and the value it states."""

    text: str
    depth: float
    role: str  # GOLD, PART, KEY_DISTRACTOR or CLASS_DISTRACTOR
    value: str


@dataclass(frozen=True)
class Hardness:
    """How hard a sample's needles are; the defaults give today's one plain needle."""

    distractors: int = 0
    needles: int = 1
    # The share of the haystack between a split needle's parts; None draws it per sample.
    split_distance: float | None = 0.25
    # The least share of the haystack between a distractor and any gold needle or part.
    gap: float = 0.05
    # Low-overlap needles: one sentence per gold naming its question's place, unrelated to it.
    literal_distractor: bool = False
    # Low-overlap needles: the relations, orders and question templates drawn from (latent_forms.py).
    forms: Forms = DEFAULT_FORMS

    @property
    def plain(self) -> bool:
        return self.distractors == 0 and self.needles == 1


@dataclass(frozen=True)
class NeedleSet:
    """A sample's needles: the question, the references, every placement, and the phrases a
    simulated reader looks for (``keys``: the gold evidence; ``patterns``: the wording gold and
    look-alikes share, which a pattern-matcher takes for evidence)."""

    kind: str
    question: str
    answers: tuple[str, ...]
    placements: tuple[Placement, ...]
    keys: tuple[str, ...]
    patterns: tuple[str, ...]
    # What the needles are about (keys, people, the chest a chain goes through): a haystack that
    # already names one would answer or muddle the question.
    subjects: tuple[str, ...]
    # Low-overlap needles: each gold's form (``latent_forms.Form.label``), in the order of ``answers``.
    forms: tuple[str, ...] = ()

    @property
    def overlap(self) -> tuple[int, float]:
        """How much of the gold needles' wording the question repeats: the content words they share
        and ROUGE-1 between them (answers and names never occur in the question, so they only
        lengthen the needle side)."""
        golds = " ".join(p.text for p in self.placements if p.role in (GOLD, PART))
        return content_overlap(golds, self.question)[0], rouge1(golds, self.question)

    @property
    def lures(self) -> tuple[str, ...]:
        """The distractors' values: an answer holding one took the bait."""
        return tuple(p.value for p in self.placements if p.role in DISTRACTOR_ROLES)


# The question for several keyed needles at once: the same wording with every key named (prose's;
# each style has its own, needle_styles.py).
PLURAL_QUESTIONS = PROSE.plural
# The wording of each kind's template that look-alikes share (a pattern-matcher's cue); the keyed
# kinds' is their style's.
_PATTERNS = {
    **PROSE.patterns,
    "fact": "settled in the town of",
    "split": "vault code for",
    "chain": "was sent to the town of",
}
# A class distractor of a keyed needle: the gold's key in another kind's template.
_OTHER_CLASS = {"number": "uuid", "words": "number", "uuid": "number"}


def _join(items: list[str], conjunction: str) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {conjunction} " + items[-1]


def _keyed_distractor(
    kind: str, gold: Needle, role: str, rng: random.Random, taken: set[str], space: Space, style: Style
) -> Placement:
    """A look-alike written in the gold's style: its template with a near-miss key, or another
    kind's template with the gold's key."""
    if role == CLASS_DISTRACTOR:
        other = style.keyed[_OTHER_CLASS[kind]]
        value = fresh(lambda r: other.value(space, r), rng, taken)
        return Placement(other.render(gold.key, value), 0.0, role, value)
    keyed = style.keyed[kind]
    key = space.near_key(gold.key, rng, taken)
    value = fresh(lambda r: keyed.value(space, r), rng, taken)
    return Placement(keyed.render(key, value), 0.0, role, value)


def _fact_distractor(
    gold: Needle, style: str, rng: random.Random, taken: set[str], space: Space
) -> Placement:
    place = fresh(space.place, rng, taken)
    if style == CLASS_DISTRACTOR:  # the same person, another place and another relation to it
        text = f" As a child, {gold.key} spent one summer in the village of {place}."
        return Placement(text, 0.0, style, place)
    surname = gold.key.split(" ", 1)[1]
    person = fresh(lambda r: f"{space.word(r, 2)} {surname}", rng, taken)
    return Placement(f" After many years abroad, {person} settled in the town of {place}.", 0.0, style, place)


def _spread(depth: float, count: int) -> list[float]:
    """``count`` depths evenly spread around the haystack, the first at ``depth``."""
    return [round((depth + i / count) % 1.0, 6) if i else depth for i in range(count)]


def _distractor_depth(rng: random.Random, golds: list[float], gap: float) -> float:
    for _ in range(ATTEMPTS):
        depth = rng.random()
        if all(abs(depth - g) >= gap for g in golds):
            return depth
    raise SpecError(f"no room for a distractor {gap:g} of the haystack away from needles at {golds}")


def evidence(needle: Needle) -> str:
    """The phrase that marks a needle's sentence and no look-alike's: its words before the answer
    (a distractor differs there, in its key or its class), or the key where the answer comes first."""
    before = needle.text[: needle.text.find(needle.answers[0])].strip()
    return before or needle.key


# The low-overlap needles (prompts/latent.py) by kind: (hops, literal question).
LATENT_KINDS = {latent_kind(hops, literal): (hops, literal) for hops in HOPS for literal in (False, True)}


def _latent_set(kind: str, hardness: Hardness, depth: float, rng: random.Random, space: Space) -> NeedleSet:
    """Low-overlap needles: golds of distinct groups (one country's items could answer each other's
    questions), and as distractors other characters at other anchors, none in a gold's group (so
    the gold's character is not the only one: the odd-name shortcut). Every character has a given
    and a family name of its own from the space's pool."""
    hops, literal = LATENT_KINDS[kind]
    items = {item.key: item for item in items_in(space.split)}
    golds: list[tuple[Needle, LatentItem, Form]] = []
    groups: set[str] = set()
    taken: set[str] = set()  # the given and family names of the characters drawn: one character each

    def draw() -> tuple[Needle, Form]:
        names, withheld = space.names, space.withheld
        return draw_latent(rng, hops, literal, space.split, withheld, names, frozenset(taken), hardness.forms)

    while len(golds) < hardness.needles:
        needle, form = draw()
        item = items[needle.key]
        if item.group not in groups:
            golds.append((needle, item, form))
            groups.add(item.group)
            taken.update(needle.answers[0].split(" "))
    depths = _spread(depth, len(golds))
    placements = [
        Placement(n.text, d, GOLD, n.answers[0]) for (n, _, _), d in zip(golds, depths, strict=True)
    ]
    while len(placements) < len(golds) + hardness.distractors:
        needle, _ = draw()
        if items[needle.key].group not in groups:
            taken.update(needle.answers[0].split(" "))
            at = _distractor_depth(rng, depths, hardness.gap)
            placements.append(Placement(needle.text, at, KEY_DISTRACTOR, needle.answers[0]))
    if hardness.literal_distractor:  # drawn after all else: runs without it draw what they always did
        for _, item, _ in golds:
            text = rng.choice(_LITERAL_SENTENCES).format(place=item.chain[-1])
            at = _distractor_depth(rng, depths, hardness.gap)
            placements.append(Placement(text, at, LITERAL_DISTRACTOR, item.chain[-1]))
    return NeedleSet(
        kind=kind,
        # Several are asked one after another, in the same words as alone: the literal and the
        # low-overlap runs then differ only in the questions' wording.
        question=" ".join(n.question for n, _, _ in golds),
        answers=tuple(n.answers[0] for n, _, _ in golds),
        placements=tuple(placements),
        keys=tuple(n.key for n, _, _ in golds),
        patterns=(),
        subjects=tuple(place for _, item, _ in golds for place in item.chain),
        forms=tuple(form.label for _, _, form in golds),
    )


def needle_set(
    kind: str,
    hardness: Hardness,
    depth: float,
    rng: random.Random,
    space: Space = EVAL,
    style: Style = PROSE,
) -> NeedleSet:
    """The needles of one sample at the cell's ``depth``, drawn from ``rng`` out of ``space``; the
    keyed kinds (and their look-alikes) written in ``style`` (``needle_styles.py``), the same keys
    and values in every style.

    With the default hardness and style this is ``make_needle``'s one needle at ``depth``, drawn
    identically, so plain runs build the prompts they always did."""
    if kind in SPLIT_KINDS:
        return _split_set(kind, hardness, depth, rng, space)
    if kind in LATENT_KINDS:
        return _latent_set(kind, hardness, depth, rng, space)
    if kind not in KEYED_NEEDLES:
        style = PROSE  # a fact or the sf needle has prose only
    golds = [_gold(kind, rng, space, style) for _ in range(hardness.needles)]
    _unique_golds(kind, golds, rng, space, style)
    depths = _spread(depth, len(golds))
    placements = [Placement(n.text, d, GOLD, n.answers[0]) for n, d in zip(golds, depths, strict=True)]
    taken = {g.key for g in golds} | {a for g in golds for a in g.answers}
    for index in range(hardness.distractors):
        role = CLASS_DISTRACTOR if index % 2 else KEY_DISTRACTOR
        gold = golds[index % len(golds)]
        if kind == "fact":
            made = _fact_distractor(gold, role, rng, taken, space)
        else:
            made = _keyed_distractor(kind, gold, role, rng, taken, space, style)
        taken.add(made.value)
        at = _distractor_depth(rng, depths, hardness.gap)
        placements.append(Placement(made.text, at, made.role, made.value))
    if len(golds) == 1:
        question = golds[0].question
    else:
        question = style.plural[kind].format(keys=_join([g.key for g in golds], style.conjunction))
    return NeedleSet(
        kind=kind,
        question=question,
        answers=tuple(a for g in golds for a in g.answers),
        placements=tuple(placements),
        keys=tuple(evidence(g) for g in golds),
        patterns=(style.patterns.get(kind) or _PATTERNS.get(kind, golds[0].key),),
        subjects=tuple(g.key for g in golds),
    )


def _gold(kind: str, rng: random.Random, space: Space, style: Style) -> Needle:
    """One gold needle: a keyed kind in its style (drawn as ``make_needle`` draws it), else prose."""
    return style.keyed[kind].draw(kind, rng, space) if kind in style.keyed else make_needle(kind, rng, space)


def _unique_golds(kind: str, golds: list[Needle], rng: random.Random, space: Space, style: Style) -> None:
    """Redraw any gold needle whose key or value repeats an earlier one's: each fact must be its own."""
    seen: set[str] = set()
    for index, gold in enumerate(golds):
        while gold.key in seen or any(a in seen for a in gold.answers):
            gold = _gold(kind, rng, space, style)
        golds[index] = gold
        seen |= {gold.key, *gold.answers}


def _split_set(kind: str, hardness: Hardness, depth: float, rng: random.Random, space: Space) -> NeedleSet:
    parts = draw_parts(kind, rng, space)
    distance = hardness.split_distance
    if distance is None:  # drawn per sample, so the distance is a variable to analyse
        distance = rng.uniform(0.05, max(depth, 1.0 - depth))
    depths = split_depths(depth, distance)
    placements = [
        Placement(text, at, PART, value)
        for text, at, value in zip(parts.texts, depths, parts.values, strict=True)
    ]
    taken = {parts.subject, parts.link, *parts.values}
    for index in range(hardness.distractors):
        style = CLASS_DISTRACTOR if index % 2 else KEY_DISTRACTOR
        text, value = part_lookalike(kind, parts, style, rng, taken, space)
        taken.add(value)
        placements.append(Placement(text, _distractor_depth(rng, list(depths), hardness.gap), style, value))
    subjects = (parts.subject, parts.link) if kind == "chain" else (parts.subject,)
    return NeedleSet(
        kind, parts.question, parts.answers, tuple(placements), parts.keys, (_PATTERNS[kind],), subjects
    )
