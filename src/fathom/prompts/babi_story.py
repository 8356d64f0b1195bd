"""The bAbI-style task's language: short story sentences, the questions on them, and their replay.

A story is people moving between places, taking, dropping and giving objects, and places that lie
north, south, east or west of others. Each sentence has one fixed form per verb, so that ``parse``
reads it back exactly and ``replay`` runs a story as a small world: where each person is, who holds
each object, the places each object has been, who gave what to whom, and how places lie. The task
(which writes the story) and a simulated reader (which finds the sentences in a prompt) share this
replay, as they share ``list_ops``' for state tracking. Kept in ``prompts`` so that both import it.

The five questions are bAbI's first five tasks (Weston et al., 2015), in fathom's words:

- ``qa1`` "Where is Ida?": her last move (one supporting fact);
- ``qa2`` "Where is the lantern?": who took it, and where that person went last (two);
- ``qa3`` "Where was the lantern before Brenmoor?": it was taken, carried to a place, then on to
  Brenmoor (three);
- ``qa4`` "What is north of Brenmoor?": a place that lies north of it (a two-argument relation);
- ``qa5`` "Who gave the lantern to Ida?": the giver (a three-argument relation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MOVES = ("went to", "moved to", "journeyed to", "travelled to")
TAKES = ("picked up", "took", "got")
DROPS = ("dropped", "put down")
GIVES = ("gave", "handed")
DIRECTIONS = {"north": "south", "south": "north", "east": "west", "west": "east"}
_WORD = r"([^\W\d_][\w'-]*)"
_FORMS = (
    ("move", re.compile(rf"^{_WORD} (?:{'|'.join(MOVES)}) {_WORD}\.$")),
    ("take", re.compile(rf"^{_WORD} (?:{'|'.join(TAKES)}) the {_WORD}\.$")),
    ("drop", re.compile(rf"^{_WORD} (?:{'|'.join(DROPS)}) the {_WORD}\.$")),
    ("give", re.compile(rf"^{_WORD} (?:{'|'.join(GIVES)}) the {_WORD} to {_WORD}\.$")),
    ("lies", re.compile(rf"^{_WORD} is ({'|'.join(DIRECTIONS)}) of {_WORD}\.$")),
)
QUESTIONS = {
    "qa1": ("Where is {0}?", re.compile(rf"^Where is {_WORD}\?$")),
    "qa2": ("Where is the {0}?", re.compile(rf"^Where is the {_WORD}\?$")),
    "qa3": ("Where was the {0} before {1}?", re.compile(rf"^Where was the {_WORD} before {_WORD}\?$")),
    "qa4": ("What is {0} of {1}?", re.compile(rf"^What is ({'|'.join(DIRECTIONS)}) of {_WORD}\?$")),
    "qa5": ("Who gave the {0} to {1}?", re.compile(rf"^Who gave the {_WORD} to {_WORD}\?$")),
}
# What each question's answer is: a place (qa1-qa4) or a person (qa5).
ANSWER_KINDS = {"qa1": "place", "qa2": "place", "qa3": "place", "qa4": "place", "qa5": "person"}


@dataclass(frozen=True)
class Event:
    """One sentence: its verb kind and its words in order (subject first)."""

    kind: str
    words: tuple[str, ...]


def parse(line: str) -> Event | None:
    """The sentence as an event, or None where it is none this language writes."""
    text = line.strip()
    for kind, form in _FORMS:
        if (match := form.match(text)) is not None:
            return Event(kind, match.groups())
    return None


@dataclass
class World:
    """What a story has said so far (a replay's working state, not a value)."""

    where: dict[str, str] = field(default_factory=dict)  # person -> place
    holder: dict[str, str] = field(default_factory=dict)  # object -> person holding it
    lying: dict[str, str] = field(default_factory=dict)  # object -> place it was dropped in
    trail: dict[str, list[str]] = field(default_factory=dict)  # object -> places it has been, in turn
    gifts: list[tuple[str, str, str]] = field(default_factory=list)  # (giver, object, receiver)
    lies: dict[tuple[str, str], str] = field(default_factory=dict)  # (direction, place) -> place

    def _visit(self, thing: str, place: str | None) -> None:
        trail = self.trail.setdefault(thing, [])
        if place is not None and (not trail or trail[-1] != place):
            trail.append(place)

    def apply(self, event: Event) -> None:
        words = event.words
        if event.kind == "move":
            person, place = words
            self.where[person] = place
            for thing, holder in self.holder.items():
                if holder == person:
                    self._visit(thing, place)
        elif event.kind == "take":
            person, thing = words
            self.holder[thing] = person
            self.lying.pop(thing, None)
            self._visit(thing, self.where.get(person))
        elif event.kind == "drop":
            person, thing = words
            if self.holder.pop(thing, None) is not None and person in self.where:
                self.lying[thing] = self.where[person]
        elif event.kind == "give":
            giver, thing, receiver = words
            self.holder[thing] = receiver
            self.gifts.append((giver, thing, receiver))
            self._visit(thing, self.where.get(receiver))
        else:
            place, direction, other = words
            self.lies[direction, other] = place
            self.lies[DIRECTIONS[direction], place] = other

    def answer(self, task: str, args: tuple[str, ...]) -> str | None:
        """The answer to ``task``'s question on ``args``, or None where the story does not say."""
        if task == "qa1":
            return self.where.get(args[0])
        if task == "qa2":
            holder = self.holder.get(args[0])
            return self.where.get(holder) if holder is not None else self.lying.get(args[0])
        if task == "qa3":
            trail = self.trail.get(args[0], [])
            before = [trail[i - 1] for i in range(1, len(trail)) if trail[i] == args[1]]
            return before[-1] if before else None
        if task == "qa4":
            return self.lies.get((args[0], args[1]))
        givers = [giver for giver, thing, receiver in self.gifts if (thing, receiver) == args]
        return givers[-1] if givers else None


def replay(lines: Iterable[str]) -> World:
    """The world after the sentences that parse, in order; any other line is skipped."""
    world = World()
    for line in lines:
        if (event := parse(line)) is not None:
            world.apply(event)
    return world


def question(task: str, args: tuple[str, ...]) -> str:
    return QUESTIONS[task][0].format(*args)


def asked(text: str) -> tuple[str, tuple[str, ...]] | None:
    """The task and words of a question this module wrote, or None for any other question."""
    for task, (_, form) in QUESTIONS.items():
        if (match := form.match(text)) is not None:
            return task, match.groups()
    return None
