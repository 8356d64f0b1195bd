"""The bAbI-style stories of ``fathom run babi``: fathom's own generator, no copied data.

Each story has a fixed number of sentences per task (``SIZES``), so a length's room for it is known
before any sample. A story is the asked thread (the people and objects the question is about) merged,
each in its order, with distractors: other people moving, taking, dropping and giving other objects
(for ``qa4``, other places lying beside each other). Every line has a role: ``support`` (the facts
the answer rests on, as bAbI's supporting facts), ``story`` (the asked thread's other lines, such as
earlier moves, which a later one overrides) and ``distractor`` (lines on nothing asked: without them
the replay gives the same answer, and a test holds the generator to it).

People are the evaluation part of fathom's real-looking given names (``prompts/names.py``), places
are made-up words of fathom's evaluation space (``PLACES``), and objects are nouns of that space:
no model has seen these stories, and none can answer from what it knows of bAbI. ``fathom export``
draws its stories from ``TRAIN_POOLS`` instead: the training part of the names, places of the
training space (their first letter is one no evaluation place begins with) and training nouns, so
no exported story shares a person, place or object with an evaluation story.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from fathom.prompts import babi_story as lang
from fathom.prompts.spaces import EVAL, TRAIN

TASKS = ("qa1", "qa2", "qa3", "qa4", "qa5")
SIZES = {"qa1": 12, "qa2": 16, "qa3": 18, "qa4": 8, "qa5": 14}  # sentences a story has, all roles
PEOPLE = EVAL.names.given
# Made-up places drawn once from a fixed stream, so every run has the same list.
_PLACE_RNG = random.Random("fathom babi places")
PLACES = tuple(dict.fromkeys(EVAL.place(_PLACE_RNG) for _ in range(48)))
OBJECTS = (
    "apple", "badge", "basket", "bell", "blanket", "bottle", "bucket", "button", "candle", "clock",
    "compass", "crown", "drum", "feather", "hammer", "helmet", "jacket", "kettle", "ladder", "lantern",
    "lemon", "mirror", "needle", "paddle", "pebble", "pencil", "pillow", "puzzle", "ribbon", "saddle",
)  # fmt: skip
# Training objects: training nouns one can carry, so none of them an evaluation noun (spaces.py).
TRAIN_OBJECTS = (
    "acorn", "anvil", "banner", "biscuit", "bonnet", "bracelet", "broom", "buckle", "chisel", "collar",
    "cookie", "crystal", "dagger", "fiddle", "flute", "fossil", "glove", "goblet", "harp", "jar", "kite",
    "locket", "magnet", "mallet", "mitten", "muffin", "oar", "parcel", "quill", "quilt", "scarf", "scroll",
    "vase",
)  # fmt: skip
SUPPORT, STORY, DISTRACTOR = "support", "story", "distractor"
_OTHERS = 3  # distractor people per story


@dataclass(frozen=True)
class Pools:
    """What stories draw their people, places and objects from, and the words mixed into each
    sample's random stream beside the seed and the cell (none for evaluation's, whose streams are
    what they always were; ``spaces.Space.stream``)."""

    people: tuple[str, ...]
    places: tuple[str, ...]
    objects: tuple[str, ...]
    stream: tuple[str, ...] = ()


EVAL_POOLS = Pools(PEOPLE, PLACES, OBJECTS)
_TRAIN_PLACE_RNG = random.Random("fathom babi train places")
TRAIN_POOLS = Pools(
    TRAIN.names.given,
    tuple(dict.fromkeys(TRAIN.place(_TRAIN_PLACE_RNG) for _ in range(48))),
    TRAIN_OBJECTS,
    TRAIN.stream,
)


@dataclass(frozen=True)
class Story:
    """One sample's sentences in order, each one's role, the question's words and its answer."""

    task: str
    lines: tuple[str, ...]
    roles: tuple[str, ...]
    args: tuple[str, ...]
    answer: str
    people: tuple[str, ...]
    places: tuple[str, ...]

    @property
    def question(self) -> str:
        return lang.question(self.task, self.args)

    @property
    def support(self) -> tuple[int, ...]:
        return tuple(i for i, role in enumerate(self.roles) if role == SUPPORT)

    @property
    def labels(self) -> tuple[str, ...]:
        """What the answer is one of (the story's places, or its people): BABILong's task labels."""
        return self.people if lang.ANSWER_KINDS[self.task] == "person" else self.places


Line = tuple[str, str]  # (sentence, role)


def _move(rng: random.Random, person: str, place: str) -> str:
    return f"{person} {rng.choice(lang.MOVES)} {place}."


def _route(rng: random.Random, places: list[str], count: int, start: str | None = None) -> list[str]:
    """``count`` places in turn, none the one before it."""
    route: list[str] = []
    for _ in range(count):
        route.append(rng.choice([p for p in places if p != (route[-1] if route else start)]))
    return route


def _bystanders(
    rng: random.Random, people: list[str], places: list[str], things: list[str], count: int
) -> list[Line]:
    """``count`` lines of other people: moves, and (where ``things`` are given) taking, dropping and
    giving those things among themselves, each possible when drawn."""
    where: dict[str, str] = {}
    held: dict[str, str] = {}  # thing -> person
    lines: list[Line] = []
    while len(lines) < count:
        person = rng.choice(people)
        mine = [t for t, h in held.items() if h == person]
        free = [t for t in things if t not in held]
        choice = rng.random()
        if person not in where or not things or choice < 0.5:
            where[person] = _route(rng, places, 1, where.get(person))[0]
            lines.append((_move(rng, person, where[person]), DISTRACTOR))
        elif free and (choice < 0.75 or not mine):
            thing = rng.choice(free)
            held[thing] = person
            lines.append((f"{person} {rng.choice(lang.TAKES)} the {thing}.", DISTRACTOR))
        elif mine and choice < 0.9:
            del held[thing := rng.choice(mine)]
            lines.append((f"{person} {rng.choice(lang.DROPS)} the {thing}.", DISTRACTOR))
        elif mine:
            held[thing := rng.choice(mine)] = other = rng.choice([p for p in people if p != person])
            lines.append((f"{person} {rng.choice(lang.GIVES)} the {thing} to {other}.", DISTRACTOR))
    return lines


def _merge(rng: random.Random, thread: list[Line], others: list[Line]) -> list[Line]:
    """The two sequences interleaved at random, each keeping its order."""
    total = len(thread) + len(others)
    mine = set(rng.sample(range(total), len(thread)))
    threads, rest = iter(thread), iter(others)
    return [next(threads) if i in mine else next(rest) for i in range(total)]


Thread = tuple[list[Line], tuple[str, ...], str]  # the asked thread's lines, the question's words, the answer
Drawer = Callable[[random.Random, list[str], list[str], list[str]], Thread]


def _qa1(rng: random.Random, people: list[str], places: list[str], things: list[str]) -> Thread:
    person = people[0]
    route = _route(rng, places, 3)
    lines = [(_move(rng, person, p), STORY) for p in route[:-1]] + [(_move(rng, person, route[-1]), SUPPORT)]
    return lines, (person,), route[-1]


def _qa2(rng: random.Random, people: list[str], places: list[str], things: list[str]) -> Thread:
    person, thing = people[0], things[0]
    route = _route(rng, places, 3)
    lines: list[Line] = [(_move(rng, person, p), STORY) for p in route]
    lines[-1] = (lines[-1][0], SUPPORT)
    lines.insert(rng.randint(0, 3), (f"{person} {rng.choice(lang.TAKES)} the {thing}.", SUPPORT))
    return lines, (thing,), route[-1]


def _qa3(rng: random.Random, people: list[str], places: list[str], things: list[str]) -> Thread:
    person, thing = people[0], things[0]
    start, before, target, after = _route(rng, places, 4)
    while after == target or start in (target, before):  # the target once on the object's trail
        start, before, target, after = _route(rng, places, 4)
    take = f"{person} {rng.choice(lang.TAKES)} the {thing}."
    lines = [(_move(rng, person, start), STORY), (take, SUPPORT), (_move(rng, person, before), SUPPORT),
             (_move(rng, person, target), SUPPORT), (_move(rng, person, after), STORY)]  # fmt: skip
    return lines, (thing, target), before


def _qa4(rng: random.Random, people: list[str], places: list[str], things: list[str]) -> Thread:
    answer, anchor, beside = places[:3]
    direction = rng.choice(list(lang.DIRECTIONS))
    other = rng.choice([d for d in lang.DIRECTIONS if d != direction])
    # bAbI says a relation either way round: "A is north of B" or "B is south of A".
    fact = (
        f"{answer} is {direction} of {anchor}."
        if rng.random() < 0.5
        else f"{anchor} is {lang.DIRECTIONS[direction]} of {answer}."
    )
    lines = [(fact, SUPPORT), (f"{beside} is {other} of {anchor}.", STORY)]
    rng.shuffle(lines)
    return lines, (direction, anchor), answer


def _qa5(rng: random.Random, people: list[str], places: list[str], things: list[str]) -> Thread:
    giver, receiver, last = people[:3]
    thing = things[0]
    lines = [
        (f"{giver} {rng.choice(lang.TAKES)} the {thing}.", STORY),
        (f"{giver} {rng.choice(lang.GIVES)} the {thing} to {receiver}.", SUPPORT),
        (f"{receiver} {rng.choice(lang.GIVES)} the {thing} to {last}.", STORY),
    ]
    return lines, (thing, receiver), giver


def _relations(rng: random.Random, places: list[str], count: int) -> list[Line]:
    """Other places lying beside each other."""
    lines = []
    for _ in range(count):
        one, two = rng.sample(places, 2)
        lines.append((f"{one} is {rng.choice(list(lang.DIRECTIONS))} of {two}.", DISTRACTOR))
    return lines


_DRAWERS: dict[str, Drawer] = {"qa1": _qa1, "qa2": _qa2, "qa3": _qa3, "qa4": _qa4, "qa5": _qa5}
_ASKED_PEOPLE = {"qa1": 1, "qa2": 1, "qa3": 1, "qa4": 0, "qa5": 3}


def draw_story(rng: random.Random, task: str, distractors: bool = True, pools: Pools = EVAL_POOLS) -> Story:
    """A story for ``task`` from ``rng``: ``SIZES[task]`` sentences, or only the asked thread's
    without ``distractors`` (the same draws, so the same thread), of ``pools``' words."""
    people = rng.sample(pools.people, _ASKED_PEOPLE[task] + _OTHERS)
    places = rng.sample(pools.places, 8)
    things = rng.sample(pools.objects, 4)
    asked = _ASKED_PEOPLE[task]
    thread, args, answer = _DRAWERS[task](rng, people[:asked], places, things[:1])
    count = SIZES[task] - len(thread)
    if task == "qa4":  # relations among the places the question does not name
        others = _relations(rng, places[3:], count)
    else:
        others = _bystanders(rng, people[asked:], places, things[1:] if task != "qa1" else [], count)
    lines = _merge(rng, thread, others) if distractors else thread
    used_people = people if task != "qa4" else []
    return Story(
        task,
        tuple(line for line, _ in lines),
        tuple(role for _, role in lines),
        args,
        answer,
        tuple(used_people),
        tuple(places),
    )
