"""A low-overlap item's places as a haystack may name them without naming them exactly.

A question asking "Which character has been to Paris?" is answered by association only if the
haystack never says Paris; hygiene (``niah.py``) redraws a sample whose haystack holds a place of
its chain as written. A haystack that holds a *near neighbour* of the place is subtler: "Washington"
beside a question about "Washington, D.C.", "New York" beside "New York City", "Parisian" beside
"Paris". Such a mention is an accidental literal distractor (the kind NoLiMa found most damaging),
yet dropping every item that meets one would leave only obscure places; so a neighbour is recorded
with the sample (``literal_neighbours``), never redrawn, and a reader can set those samples apart.

A place's neighbours are: its other names (the item's ``probe_answers`` after the first: München,
Bombay, Den Haag), the parts of a city's or country's name that are themselves names ("York" and
"New York" within "New York City", "Mexico" within "Mexico City", "Washington" within "Washington,
D.C."), and its demonyms from ``DEMONYMS``, a table of the places the shipped items ask about.
"""

from __future__ import annotations

import functools
import re

from fathom.prompts.latent import STOP_WORDS, LatentItem

# fmt: off
# The demonyms and adjectives of the places the shipped items' chains name (cities and countries);
# a place missing here has none in common English use, or none distinct from its name.
DEMONYMS: dict[str, tuple[str, ...]] = {
    "Amsterdam": ("Amsterdammer",), "Argentina": ("Argentine", "Argentinian"), "Athens": ("Athenian",),
    "Australia": ("Australian",), "Austria": ("Austrian",), "Barcelona": ("Barcelonan",),
    "Beijing": ("Pekingese",), "Belgium": ("Belgian",), "Berlin": ("Berliner",), "Boston": ("Bostonian",),
    "Brazil": ("Brazilian",), "Canada": ("Canadian",), "Chicago": ("Chicagoan",), "China": ("Chinese",),
    "Croatia": ("Croatian", "Croat"), "Czech Republic": ("Czech",), "Denmark": ("Danish", "Dane"),
    "Dublin": ("Dubliner",), "Edinburgh": ("Edinburgher",), "Egypt": ("Egyptian",),
    "Finland": ("Finnish", "Finn"), "Florence": ("Florentine",), "Germany": ("German",),
    "Glasgow": ("Glaswegian",), "Greece": ("Greek",), "Hamburg": ("Hamburger",),
    "Hungary": ("Hungarian",), "Iceland": ("Icelandic", "Icelander"), "India": ("Indian",),
    "Iran": ("Iranian", "Persian"), "Ireland": ("Irish",), "Italy": ("Italian",),
    "Japan": ("Japanese",), "Lisbon": ("Lisboan",), "Liverpool": ("Liverpudlian", "Scouse"),
    "London": ("Londoner",), "Los Angeles": ("Angeleno",), "Madrid": ("Madrileño", "Madrilenian"),
    "Malaysia": ("Malaysian",), "Manchester": ("Mancunian",), "Mexico": ("Mexican",),
    "Milan": ("Milanese",), "Montreal": ("Montrealer",), "Morocco": ("Moroccan",),
    "Moscow": ("Muscovite",), "Munich": ("Münchner",), "Myanmar": ("Burmese",), "Naples": ("Neapolitan",),
    "Nepal": ("Nepali", "Nepalese"), "Netherlands": ("Dutch",), "New York City": ("New Yorker",),
    "New Zealand": ("New Zealander",), "Norway": ("Norwegian",), "Pakistan": ("Pakistani",),
    "Paris": ("Parisian",), "Philadelphia": ("Philadelphian",), "Poland": ("Polish", "Pole"),
    "Portugal": ("Portuguese",), "Prague": ("Praguer",), "Rio de Janeiro": ("Carioca",),
    "Rome": ("Roman",), "Russia": ("Russian",), "Scotland": ("Scottish", "Scot", "Scots"),
    "Seville": ("Sevillian",), "Singapore": ("Singaporean",), "South Africa": ("South African",),
    "South Korea": ("Korean", "South Korean"), "Spain": ("Spanish", "Spaniard"),
    "Sri Lanka": ("Sri Lankan",), "Sweden": ("Swedish", "Swede"), "Switzerland": ("Swiss",),
    "Sydney": ("Sydneysider",), "São Paulo": ("Paulistano",), "Thailand": ("Thai",),
    "Tokyo": ("Tokyoite",), "Turkey": ("Turkish", "Turk"), "United Arab Emirates": ("Emirati",),
    "United States": ("American",), "Venice": ("Venetian",), "Vienna": ("Viennese",),
    "Vietnam": ("Vietnamese",), "Warsaw": ("Varsovian",),
}
# Words that name no place alone: a part of a name made only of these ("New", "City", "South") is no
# neighbour of it.
_GENERIC = frozenset("""
new city south north east west united republic states state saint st san santa the de del la le
""".split())
# fmt: on
# Elements whose names hold other names as parts: "New York" in "New York City", never "Museum" in a
# museum's.
_NAMED_PARTS = frozenset({"city", "country"})
_PART = re.compile(r"[^\s,]+")


def neighbours(item: LatentItem) -> tuple[str, ...]:
    """The near neighbours of the places an item's chain implies (every element after its anchor),
    each once, none of them a place of the chain itself."""
    return _neighbours(item)


@functools.cache
def _neighbours(item: LatentItem) -> tuple[str, ...]:
    elements = item.association.split(">")
    found: dict[str, None] = {}
    for element, place in zip(elements[1:], item.chain[1:], strict=True):
        if element in _NAMED_PARTS:
            found |= dict.fromkeys(name_parts(place))
        found |= dict.fromkeys(DEMONYMS.get(place, ()))
    found |= dict.fromkeys(item.probe_answers[1:])
    return tuple(name for name in found if name not in item.chain)


def name_parts(place: str) -> tuple[str, ...]:
    """The runs of a place's words shorter than it that are names themselves: each begins and ends
    with a capitalised word and is not made of generic words alone ("New York City" gives "New York",
    "York City" and "York"; "Rio de Janeiro" gives "Rio" and "Janeiro")."""
    words = [word.strip(".") if word.count(".") == 1 else word for word in _PART.findall(place)]
    parts: dict[str, None] = {}
    for size in range(len(words) - 1, 0, -1):
        for first in range(len(words) - size + 1):
            run = words[first : first + size]
            if not (run[0][:1].isupper() and run[-1][:1].isupper()):
                continue
            if all(word.lower() in _GENERIC or word.lower() in STOP_WORDS for word in run):
                continue
            parts[" ".join(run)] = None
    return tuple(parts)
