"""Needles a model cannot have memorised: generated per sample from the run's seed.

Every needle is a sentence holding a *key* (the thing asked about) and a *value* (the answer). The
question names the key in other words than the sentence does, so a model must find the sentence,
not just match the question's wording. k samples of a cell get k different needles.
"""

from __future__ import annotations

import functools
import hashlib
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from fathom.errors import SpecError
from fathom.records import Needle

# fmt: off
# Short, common words: keys read naturally and tokenise into few tokens with any vocabulary.
ADJECTIVES = (
    "amber", "ancient", "bitter", "blue", "brave", "brief", "bright", "calm", "clever", "cold",
    "copper", "crimson", "curious", "dark", "distant", "dusty", "eager", "early", "empty", "fading",
    "fierce", "flat", "frozen", "gentle", "giant", "golden", "grand", "green", "hidden", "hollow",
    "humble", "icy", "idle", "iron", "jolly", "kind", "late", "lazy", "little", "lonely", "loud",
    "lucky", "marble", "mellow", "misty", "modern", "narrow", "noble", "odd", "old", "pale",
    "patient", "plain", "proud", "quick", "quiet", "rapid", "rare", "restless", "rough", "round",
    "royal", "rusty", "sacred", "scarlet", "secret", "sharp", "shiny", "silent", "silver", "simple",
    "sleepy", "slow", "small", "smooth", "soft", "solid", "sour", "spare", "steady", "stone",
    "strange", "sudden", "sunny", "swift", "tall", "tender", "thin", "tidy", "tiny", "vast",
    "velvet", "violet", "warm", "wary", "wild", "wise", "wooden", "young", "zealous",
)
NOUNS = (
    "anchor", "apple", "arrow", "badge", "barrel", "basket", "beacon", "bell", "blanket", "bottle",
    "bridge", "bucket", "button", "cabin", "candle", "canyon", "castle", "cellar", "chair", "chimney",
    "clock", "cloud", "comet", "compass", "cottage", "crown", "curtain", "desert", "dragon", "drum",
    "engine", "falcon", "feather", "fence", "ferry", "forest", "fountain", "garden", "glacier",
    "hammer", "harbor", "helmet", "island", "jacket", "kettle", "ladder", "lantern", "lemon",
    "library", "meadow", "mirror", "mountain", "needle", "ocean", "orchard", "otter", "oyster",
    "paddle", "palace", "parrot", "pebble", "pencil", "pepper", "piano", "pillow", "planet", "pocket",
    "pond", "puzzle", "quarry", "rabbit", "ribbon", "river", "rocket", "saddle", "shadow", "shell",
    "signal", "spoon", "statue", "stream", "summit", "teapot", "temple", "thimble", "thunder",
    "tower", "tunnel", "turtle", "umbrella", "valley", "violin", "wagon", "walnut", "whistle",
    "window", "wizard", "yacht",
)
# Syllables for fictional people and places: pronounceable, absent from any training corpus.
ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kl", "l", "m", "n", "p", "qu", "r", "s",
          "st", "t", "th", "v", "w", "z")
VOWELS = ("a", "e", "i", "o", "u", "ae", "ei", "ou")
CODAS = ("", "l", "n", "r", "s", "th", "nd", "rk", "sk", "m", "x")
PLACE_ENDINGS = ("ford", "haven", "moor", "wick", "dale", "port", "stead", "mere", "holt", "bury")
# fmt: on

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


def _word_key(rng: random.Random) -> str:
    return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"


def made_up_name(rng: random.Random, syllables: int) -> str:
    parts = [rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables)]
    return "".join(parts).capitalize()


@dataclass(frozen=True)
class KeyedNeedle:
    """A needle keyed by a random adjective-noun pair; ``text`` and ``question`` name {key} and
    ``text`` names {value}."""

    text: str
    question: str
    value: Callable[[random.Random], str]

    def draw(self, kind: str, rng: random.Random) -> Needle:
        key = _word_key(rng)  # drawn before the value: the order fixes every seeded needle
        value = self.value(rng)
        text = self.text.format(key=key, value=value)
        return Needle(kind, text, self.question.format(key=key), (value,), key)


KEYED_NEEDLES = {
    "number": KeyedNeedle(
        " One of the special magic numbers for {key} is: {value}.",
        "Which number was given as the special magic number for {key}?",
        lambda rng: str(rng.randint(1_000_000, 9_999_999)),
    ),
    "words": KeyedNeedle(
        " The secret passphrase chosen for {key} is {value}.",
        "What two words make up the passphrase for {key}?",
        lambda rng: f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}",
    ),
    "uuid": KeyedNeedle(
        " The special magic identifier for {key} is: {value}.",
        "Which UUID is recorded as the special magic identifier for {key}?",
        lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    ),
}


def _fact(rng: random.Random) -> Needle:
    person = f"{made_up_name(rng, 2)} {made_up_name(rng, 2)}"
    place = made_up_name(rng, 1) + rng.choice(PLACE_ENDINGS)
    return Needle(
        kind="fact",
        text=f" After many years abroad, {person} settled in the town of {place}.",
        question=f"In which town did {person} finally make a home?",
        answers=(place,),
        key=person,
    )


NEEDLE_KINDS: dict[str, Callable[[random.Random], Needle]] = {
    **{kind: functools.partial(keyed.draw, kind) for kind, keyed in KEYED_NEEDLES.items()},
    "fact": _fact,
    "sf": lambda _rng: SAN_FRANCISCO,
}


def make_needle(kind: str, rng: random.Random) -> Needle:
    """A needle of the named kind, drawn from ``rng``."""
    try:
        factory = NEEDLE_KINDS[kind]
    except KeyError:
        known = ", ".join(NEEDLE_KINDS)
        raise SpecError(f"unknown needle kind '{kind}': use one of {known}") from None
    return factory(rng)
