"""What needles are drawn from: an evaluation space and a training space, disjoint by construction.

Every generated needle draws its keys, values and names from a ``Space``. Evaluation draws from
``EVAL`` (the words, syllables and ranges fathom has always used; its prompts are unchanged by this
module); ``fathom export`` draws training examples from ``TRAIN``. No draw from one can equal a draw
from the other, whatever the seeds:

- keys and passphrases: TRAIN's adjectives and nouns share no word with EVAL's, and its adjectives
  are none of wonderwords' (RULER's keys are wonderwords adjective-noun pairs), so no train key is
  an evaluation key of niah or of RULER;
- magic numbers: EVAL (and RULER) draw 7 digits, TRAIN 8, so none is equal (a model still learns to
  copy a long number); a split needle's code halves: 4 digits in EVAL, 5 in TRAIN;
- made-up names and places: every one of TRAIN's words begins with C, J or Y, which no EVAL onset
  begins with (every EVAL word, RULER's made-up names included, begins with an EVAL onset). Letters
  alone would not do: EVAL's place endings hold c (wick) and y (bury);
- low-overlap needles' characters: real-looking given and family names (``prompts/names.py``), each
  name in one part by a hash of its spelling, so no TRAIN character shares a name with an EVAL one;
- low-overlap items: TRAIN draws only ``latent.items_in("train")``, EVAL only ``"eval"`` (the
  split is by a hash of each item's id; no train item's needle or questions names an eval anchor);
- UUIDs are random in both, and apart only by chance: TRAIN's samples draw from random streams
  seeded apart from EVAL's (``stream``), so two given UUIDs are equal with probability 2^-122.
  ``fathom export-check`` looks for every one all the same.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from fathom.prompts.names import NamePool, pool_of
from fathom.prompts.names import Split as Split

# Attempts at drawing something that differs from what is already there: each succeeds with
# overwhelming chance, so running out means a bug.
ATTEMPTS = 1000

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

# The training space's words: as short and common, none of them EVAL's, and no adjective among
# wonderwords' (tests/test_export.py checks all three).
TRAIN_ADJECTIVES = (
    "agile", "airy", "alpine", "arctic", "ashen", "azure", "balmy", "barren", "bold", "bony",
    "brisk", "bronze", "brown", "candid", "chalky", "civil", "coastal", "cosy", "crisp", "cubic",
    "dainty", "dense", "dewy", "dim", "dreamy", "dusky", "earnest", "eastern", "feral", "firm",
    "fleet", "flinty", "foggy", "frank", "frosty", "fussy", "glassy", "grassy", "gray", "grim",
    "gritty", "gruff", "handy", "hardy", "hasty", "hazy", "hearty", "hilly", "honest", "inky",
    "keen", "lanky", "leafy", "lofty", "loyal", "lunar", "mild", "milky", "minty", "moody",
    "mossy", "neat", "nimble", "northern", "oaken", "pastel", "pearly", "pebbly", "perky", "plump",
    "polar", "portly", "prim", "reedy", "regal", "rocky", "rosy", "rugged", "sandy", "shady",
    "sheer", "sleek", "slender", "slim", "sly", "snowy", "sober", "solar", "sooty", "sparse",
    "spry", "stark", "stern", "stiff", "stony", "stout", "sturdy", "sugary", "sullen", "supple",
)
TRAIN_NOUNS = (
    "acorn", "anvil", "attic", "bakery", "balcony", "banner", "barn", "beetle", "bench", "biscuit",
    "blossom", "bonnet", "boulder", "bracelet", "branch", "brook", "broom", "buckle", "cactus",
    "camel", "canoe", "cargo", "carpet", "carriage", "cart", "cedar", "chapel", "cherry", "chisel",
    "cliff", "clover", "collar", "cookie", "cradle", "crater", "cricket", "crystal", "cupboard",
    "dagger", "daisy", "dolphin", "donkey", "doorway", "eagle", "easel", "fiddle", "flute",
    "fossil", "gazebo", "glove", "goblet", "gondola", "grotto", "hammock", "harp", "hedge",
    "heron", "hive", "igloo", "jar", "kayak", "kennel", "kite", "lagoon", "lark", "lever", "lily",
    "locket", "loom", "magnet", "mallet", "maple", "marsh", "meteor", "mill", "mitten", "moth",
    "muffin", "nest", "oar", "orchid", "owl", "parcel", "pelican", "pier", "pigeon", "plank",
    "plum", "quill", "quilt", "raft", "raven", "robin", "scarf", "scroll", "sled", "swan", "tulip",
    "vase", "wheel",
)
# Every training word's first sound: c, j or y, which begin no EVAL onset.
TRAIN_FIRST_ONSETS = ("c", "ch", "cl", "cr", "j", "y")
TRAIN_PLACE_ENDINGS = ("field", "ton", "ley", "worth", "combe", "ham", "ridge", "gate", "brook", "shaw")
# fmt: on


@dataclass(frozen=True)
class Space:
    """The words, syllables and ranges one part of the split draws needles from, and how each is
    drawn. EVAL's draws are exactly the ones fathom has always made, from the same random calls in
    the same order, so evaluation prompts stay byte-identical."""

    split: Split  # also which part of the low-overlap items (latent.items_in)
    adjectives: tuple[str, ...]
    nouns: tuple[str, ...]
    first_onsets: tuple[str, ...]  # a made-up word's first sound
    onsets: tuple[str, ...]  # its later syllables' first sounds
    vowels: tuple[str, ...]
    codas: tuple[str, ...]
    place_endings: tuple[str, ...]
    numbers: tuple[int, int]  # the magic numbers' range, both ends included
    code_halves: tuple[int, int]  # a split needle's code halves
    # Mixed into each sample's random stream beside the seed and the cell; () for EVAL, whose
    # streams are what they always were.
    stream: tuple[str, ...]
    # The low-overlap needles' characters' names; a run drops those its haystack holds.
    names: NamePool
    # Ids of low-overlap items never to draw: those a haystack already names. An export sets it, as
    # the training part is small (a fifth of the items) and redrawing whole needle sets until none
    # is named would fail on a corpus that names many places; EVAL withholds none and redraws.
    withheld: frozenset[str] = frozenset()

    def key(self, rng: random.Random) -> str:
        return f"{rng.choice(self.adjectives)}-{rng.choice(self.nouns)}"

    def passphrase(self, rng: random.Random) -> str:
        return f"{rng.choice(self.adjectives)} {rng.choice(self.nouns)}"

    def number(self, rng: random.Random) -> str:
        return str(rng.randint(*self.numbers))

    def code_half(self, rng: random.Random) -> str:
        return str(rng.randint(*self.code_halves))

    def identifier(self, rng: random.Random) -> str:
        """A random UUID: apart from the other space's only by the stream (2^-122 a pair)."""
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    def word(self, rng: random.Random, syllables: int) -> str:
        """A made-up word of ``syllables`` syllables, capitalised."""
        parts = []
        for index in range(syllables):
            onset = rng.choice(self.onsets if index else self.first_onsets)
            parts.append(onset + rng.choice(self.vowels) + rng.choice(self.codas))
        return "".join(parts).capitalize()

    def person(self, rng: random.Random) -> str:
        return f"{self.word(rng, 2)} {self.word(rng, 2)}"

    def place(self, rng: random.Random) -> str:
        return self.word(rng, 1) + rng.choice(self.place_endings)

    def near_key(self, key: str, rng: random.Random, taken: set[str]) -> str:
        """An adjective-noun key that keeps one word of ``key`` and is none of ``taken``."""
        adjective, noun = key.split("-", 1)
        for _ in range(ATTEMPTS):
            near = (
                f"{adjective}-{rng.choice(self.nouns)}"
                if rng.random() < 0.5
                else f"{rng.choice(self.adjectives)}-{noun}"
            )
            if near not in taken:
                return near
        raise RuntimeError(f"no near-miss key for {key}")


EVAL = Space(
    split="eval",
    adjectives=ADJECTIVES,
    nouns=NOUNS,
    first_onsets=ONSETS,
    onsets=ONSETS,
    vowels=VOWELS,
    codas=CODAS,
    place_endings=PLACE_ENDINGS,
    numbers=(1_000_000, 9_999_999),
    code_halves=(1000, 9999),
    stream=(),
    names=pool_of("eval"),
)
TRAIN = Space(
    split="train",
    adjectives=TRAIN_ADJECTIVES,
    nouns=TRAIN_NOUNS,
    first_onsets=TRAIN_FIRST_ONSETS,
    # Later syllables may sound like EVAL's: the first letter already keeps the words apart.
    onsets=ONSETS + TRAIN_FIRST_ONSETS,
    vowels=VOWELS,
    codas=CODAS,
    place_endings=TRAIN_PLACE_ENDINGS,
    numbers=(10_000_000, 99_999_999),
    code_halves=(10_000, 99_999),
    stream=("train",),
    names=pool_of("train"),
)
SPACES: dict[Split, Space] = {"eval": EVAL, "train": TRAIN}
