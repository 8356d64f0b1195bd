"""Real-looking names for the characters of low-overlap needles, split into evaluation and training.

A low-overlap needle's answer is a character's name. A made-up name ("Draelmor Quisk") alone among a
haystack's real names is found by its oddness, without reading the needle: the odd-name shortcut of
issue 29. So the characters of a latent sample, the gold's and its distractors', draw a given and a
family name from one pool of ordinary names, written for fathom from common given and family names
of many countries (none a place, a month or a common English word, so none repeats a latent item's
anchor or question). A run drops the names its haystack's corpus already holds (``NamePool.without``:
a haystack that names an "Anne" would muddle a question answered "Anne Keller"), and refuses a pool
left smaller than a sample needs (``check_pool``).

Each name falls in one part by a hash of its spelling alone, as a latent item does by its id (a fifth
for training, the rest for evaluation), so ``TRAIN``'s characters never share a given or family name
with ``EVAL``'s, whatever the seeds.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from fathom.errors import SpecError

Split = Literal["train", "eval"]
_BUCKETS = 5  # a name hashes into one of these; bucket 0 is the training part, as latent items' is

# fmt: off
GIVEN_NAMES = (
    "Aaron", "Adrian", "Agnes", "Aisha", "Alba", "Aleksander", "Alicia", "Amara", "Amir", "Anders",
    "Andrea", "Anika", "Antoine", "Ari", "Astrid", "Beatriz", "Benedikt", "Bianca", "Björn", "Bruno",
    "Camila", "Carmen", "Cecilia", "Chiara", "Claudia", "Cyrus", "Dalia", "Damian", "Daniela", "Dario",
    "Delia", "Dmitri", "Dorota", "Elena", "Elif", "Elin", "Emil", "Enzo", "Erik", "Esther", "Fabian",
    "Farah", "Felix", "Fiona", "Freya", "Gabriel", "Greta", "Hannah", "Hamid", "Hugo", "Ida", "Igor",
    "Ines", "Ingrid", "Isaac", "Ivana", "Jakob", "Jana", "Jonas", "Julia", "Kamal", "Karin", "Kasia",
    "Kenji", "Klara", "Lars", "Laura", "Leila", "Lena", "Leon", "Lidia", "Linnea", "Lorenzo", "Luca",
    "Lucia", "Magnus", "Maja", "Malik", "Marco", "Marta", "Mateo", "Matilda", "Maya", "Mikael",
    "Milan", "Mira", "Nadia", "Naomi", "Nikolai", "Nina", "Noah", "Nora", "Oskar", "Paula", "Pavel",
    "Petra", "Rafael", "Rania", "Renata", "Rosa", "Ruben", "Sabine", "Samir", "Sanna", "Selma",
    "Simone", "Sofia", "Stefan", "Tamara", "Tariq", "Teresa", "Tobias", "Ursula", "Valentina", "Vera",
    "Viktor", "Wanda", "Yara", "Yusuf", "Zainab", "Zofia", "Ayumi", "Daichi", "Hana", "Haruto",
    "Mei", "Wen", "Jia", "Arjun", "Priya", "Rohan", "Sunita", "Kwame", "Amina", "Chidi", "Tendai",
)
FAMILY_NAMES = (
    "Abbasi", "Acosta", "Andersson", "Aydin", "Bakker", "Baranski", "Becker", "Bergstrom", "Bianchi",
    "Borisov", "Brandt", "Castillo", "Cerny", "Costa", "Dahl", "Demir", "Dimitrov", "Dvorak",
    "Eriksen", "Esposito", "Falk", "Ferreira", "Fischer", "Fontaine", "Gallo", "Garcia", "Gruber",
    "Haas", "Hansen", "Hartmann", "Herrera", "Holm", "Horvat", "Ibrahim", "Ivanova", "Jansen",
    "Jensen", "Kaya", "Keller", "Kovacs", "Kowalski", "Krause", "Lambert", "Larsen", "Laurent",
    "Lehmann", "Lindqvist", "Lopez", "Lund", "Marchetti", "Mendes", "Meyer", "Moreau", "Moretti",
    "Nagy", "Navarro", "Nielsen", "Novak", "Nowak", "Okafor", "Olsen", "Ortega", "Ozturk", "Pavlov",
    "Peeters", "Petrova", "Pereira", "Popescu", "Quintero", "Ramos", "Reyes", "Ricci", "Romero",
    "Rossi", "Sahin", "Santos", "Schmidt", "Schneider", "Sorensen", "Suarez", "Szabo", "Tanaka",
    "Toth", "Vargas", "Vasquez", "Vogel", "Wagner", "Weber", "Wojcik", "Yilmaz", "Zielinski",
    "Zimmermann", "Nakamura", "Sato", "Kobayashi", "Watanabe", "Chen", "Huang", "Zhou", "Nguyen",
    "Tran", "Pham", "Kim", "Choi", "Sharma", "Patel", "Iyer", "Mensah", "Okonkwo", "Adeyemi", "Banda",
    "Mwangi", "Haddad", "Khoury", "Nasser", "Farouk", "Aguilar", "Salazar", "Medina", "Fuentes",
)
# fmt: on


def split_of_name(name: str) -> Split:
    """The part a name belongs to: a hash of its spelling alone, so no two parts ever share one."""
    bucket = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % _BUCKETS
    return "train" if bucket == 0 else "eval"


@dataclass(frozen=True)
class NamePool:
    """The given and family names one part draws its characters from."""

    given: tuple[str, ...]
    family: tuple[str, ...]

    def without(self, held: Callable[[str], bool]) -> NamePool:
        """The pool less the names ``held`` (a corpus already holds them)."""
        return NamePool(
            tuple(n for n in self.given if not held(n)), tuple(n for n in self.family if not held(n))
        )

    @property
    def size(self) -> int:
        """How many characters one sample can hold: each takes a given and a family name of its own."""
        return min(len(self.given), len(self.family))

    def draw(self, rng: random.Random, taken: set[str]) -> str:
        """A full name whose given and family names are none of ``taken`` (each character's own)."""
        given = rng.choice([n for n in self.given if n not in taken])
        family = rng.choice([n for n in self.family if n not in taken])
        return f"{given} {family}"


def pool_of(split: Split) -> NamePool:
    """One part's names, as shipped."""
    return NamePool(
        tuple(n for n in GIVEN_NAMES if split_of_name(n) == split),
        tuple(n for n in FAMILY_NAMES if split_of_name(n) == split),
    )


class NamePoolError(SpecError):
    """A sample needs more characters than the names pool holds."""


def check_pool(pool: NamePool, needles: int, distractors: int, split: Split) -> None:
    """Refuse, before any work, a sample with more characters than the pool has names for."""
    if needles + distractors > pool.size:
        raise NamePoolError(
            f"--distractors {distractors}: a low-overlap sample names {needles + distractors} characters, "
            f"but the {split} names pool, less the names the haystack holds, has {len(pool.given)} given "
            f"and {len(pool.family)} family names (one of each a character): use --distractors "
            f"{max(pool.size - needles, 0)} or fewer"
        )
