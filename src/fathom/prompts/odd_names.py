"""The odd-name reader: a knowledge-free shortcut through low-overlap needles (issue 29).

"Which character has been to Kyoto?" needs the association of the needle's anchor with Kyoto, unless
the character is the only one the haystack has never named: then spotting the odd name answers it
with no knowledge at all. This reader does just that, as a baseline a low-overlap score must beat:

- a *name* is a sentence (or line) that opens with exactly two capitalised words, the next word (if
  any) not capitalised: the shape every low-overlap needle has ("Nora Keller watched ...");
- it is *odd* when neither of its words occurs anywhere else in the context, in any case: a haystack's
  own people recur, a needle's character is named once;
- the reader answers one odd name, drawn by a hash of the context and a salt (the same answer for the
  same prompt), or nothing when there is none.

With one character in the haystack (``--distractors 0``) it answers the gold nearly always; with
distractors, each another character named once, it draws among them: chance, 1 / characters.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

_UNIT = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\w+")
_CAPITALISED = re.compile(r"[^\W\d_][^\W\d_'\u2019-]*")


def odd_names(context: str) -> list[str]:
    """The odd names of ``context``, in order: two capitalised words opening a sentence, neither of
    them found anywhere else in it."""
    counts = Counter(_WORD.findall(context.lower()))
    found: list[str] = []
    for unit in _UNIT.split(context):
        words = unit.strip().strip("\"'\u201c\u2018(").split(maxsplit=3)[:3]
        if len(words) < 2:
            continue
        first, second = words[0], words[1].rstrip(",;:.!?")
        if not all(_is_capitalised(w) for w in (first, second)):
            continue
        if len(words) == 3 and words[2][:1].isupper():  # three capitalised words: no two-word name
            continue
        if all(counts[w.lower()] == 1 for w in _WORD.findall(f"{first} {second}")):
            found.append(f"{first} {second}")
    return found


def _is_capitalised(word: str) -> bool:
    return _CAPITALISED.fullmatch(word) is not None and word[0].isupper() and not word.isupper()


def odd_name_answer(context: str, salt: str = "") -> str | None:
    """The reader's answer: one odd name of ``context``, drawn by a hash of the context and ``salt``."""
    names = odd_names(context)
    if not names:
        return None
    digest = hashlib.sha256(f"{salt}|{context}".encode()).digest()
    return names[int.from_bytes(digest[:8], "big") % len(names)]
