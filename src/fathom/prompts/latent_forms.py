"""The forms a low-overlap needle takes: its relation, the order of its sentence, its question's wording.

An item (``latent.py``) fixes an anchor and the place it implies; a *form* says what the needle
claims of its character there and how it is asked. Varying the form while the item stays the same
holds the knowledge fixed (the item's closed-book probe asks the same fact) and varies only what a
model must read, so a score that moves with the form is about reading, not knowing:

- **relation**: what the character did at the anchor. ``visit`` is each item's own hand-written
  needle ("{name} rented a tiny attic flat with a view of the Eiffel Tower." -> "Which character has
  been to Paris?"); ``home`` (where the character lives) and ``work`` (where the character works)
  are written here, for the anchors one can live or work beside (a landmark, a museum, a park, ...;
  not an artwork, an object, an event or a street).
- **order**: ``name-first`` puts the character before the anchor, as every item's own needle does;
  ``place-first`` puts the anchor first ("Beside the Eiffel Tower, {name} posed for a photograph."),
  as NoLiMa's inverted needles do: a reader that keys on a name followed by a place loses its cue.
- **template**: one of each relation's three question wordings (1 is the item's own for ``visit``).

No template shares a content word with any needle it asks about, and no needle with its question's
place (``tests/test_latent_forms.py`` checks every item in every form). The defaults (``visit``,
``name-first``, template 1) are the needles every run drew before forms existed, drawn identically.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TypeVar

from fathom.spec import check_forms

# Bump when a relation's needles or questions change: a run of any form but the default names it.
FORMS_VERSION = 1
# The anchors one can live or work beside (an association chain's first element, latent.ELEMENTS).
_DWELLINGS = frozenset("landmark museum venue park campus library worship".split())


@dataclass(frozen=True)
class Relation:
    """What a needle says its character did at its anchor, in both orders, and how it is asked."""

    name: str
    # The anchors' elements it fits; None: every one.
    elements: frozenset[str] | None
    # The needle by order, with {name} and {anchor}; None: the item's own (visit, name-first).
    needles: dict[str, str | None]
    # The literal question by order: the needle's own words, asked; None: the item's own.
    literals: dict[str, str | None]
    questions: tuple[str, str, str]  # with {place}: the question's place as the item writes it


RELATIONS: dict[str, Relation] = {
    relation.name: relation
    for relation in (
        Relation(
            "visit",
            None,
            {"name-first": None, "place-first": "Beside {anchor}, {name} posed for a photograph."},
            {"name-first": None, "place-first": "Which character posed for a photograph beside {anchor}?"},
            (
                "Which character has been to {place}?",
                "Which character has travelled to {place}?",
                "Which of the characters has visited {place}?",
            ),
        ),
        Relation(
            "home",
            _DWELLINGS,
            {
                "name-first": "{name}'s flat looks straight out onto {anchor}.",
                "place-first": "Across the road from {anchor} is the flat that {name} rents.",
            },
            {
                "name-first": "Which character's flat looks straight out onto {anchor}?",
                "place-first": "Which character rents the flat across the road from {anchor}?",
            },
            (
                "Which character lives in {place}?",
                "Which character has a home in {place}?",
                "Which of the characters resides in {place}?",
            ),
        ),
        Relation(
            "work",
            _DWELLINGS,
            {
                "name-first": "{name} sells coffee from a cart right by {anchor}.",
                "place-first": "Right by {anchor} stands the coffee cart that {name} runs.",
            },
            {
                "name-first": "Which character sells coffee from a cart right by {anchor}?",
                "place-first": "Which character runs the coffee cart that stands right by {anchor}?",
            },
            (
                "Which character works in {place}?",
                "Which character has a job in {place}?",
                "Which of the characters earns a living in {place}?",
            ),
        ),
    )
}


@dataclass(frozen=True)
class Form:
    """One needle's form: its relation, its sentence's order and its question's template."""

    relation: str
    order: str
    template: int

    @property
    def label(self) -> str:
        """As records and reports name it: ``home/place-first/2``."""
        return f"{self.relation}/{self.order}/{self.template}"


# The one form every needle took before forms existed: each item's own needle and question.
PLAIN = Form("visit", "name-first", 1)


def fits(relation: str, element: str) -> bool:
    """Whether an anchor of ``element`` (a landmark, an artwork, ...) can take ``relation``."""
    elements = RELATIONS[relation].elements
    return elements is None or element in elements


@dataclass(frozen=True)
class Forms:
    """The forms a run draws from, one per needle: each relation, order and template given (one of
    each by default, which draws nothing)."""

    relations: tuple[str, ...] = ("visit",)
    orders: tuple[str, ...] = ("name-first",)
    templates: tuple[int, ...] = (1,)

    def __post_init__(self) -> None:
        check_forms(self.relations, self.orders, self.templates)

    @property
    def plain(self) -> bool:
        """Only the form every run drew before forms existed."""
        return self == DEFAULT_FORMS

    def fits(self, element: str) -> bool:
        """Whether some relation of these fits an anchor of ``element``."""
        return any(fits(relation, element) for relation in self.relations)

    def draw(self, rng: random.Random, element: str) -> Form:
        """A form for an anchor of ``element``: a relation that fits it, an order and a template, each
        drawn only where there is a choice (the defaults draw nothing, so their needles are unchanged)."""
        fitting = tuple(r for r in self.relations if fits(r, element))
        return Form(_pick(rng, fitting), _pick(rng, self.orders), _pick(rng, self.templates))


T = TypeVar("T")


def _pick(rng: random.Random, options: tuple[T, ...]) -> T:
    return options[0] if len(options) == 1 else rng.choice(options)


# What a run draws from unless told: the plain form alone.
DEFAULT_FORMS = Forms()
