"""Low-lexical-overlap needles: finding the needle takes one or two latent associations.

A needle places a made-up character at an anchor ("{name} climbed the Story Bridge."); its question
names only a place the anchor implies ("Which character has been to Brisbane?") and shares no content
word with it, so a model must know that the Story Bridge is in Brisbane, not match words (in the
spirit of NoLiMa; the items in ``data/latent_items.json`` were written for fathom). Each item's
literal question reuses the needle's words, so the cost of removing the overlap is a paired
difference per model. The answer is always the character's name, drawn per sample: no model can
have memorised it and a no-context control cannot guess it. Names come from a pool of ordinary
given and family names (``prompts/names.py``), not made up: a made-up name alone in a haystack of
real ones is found by its oddness, without the association.

Item ids split deterministically into a training and an evaluation part; needles are drawn from the
evaluation part unless told otherwise, so exported training data never holds an evaluated item.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from fathom.errors import FathomError, SpecError
from fathom.prompts.latent_forms import DEFAULT_FORMS, PLAIN, RELATIONS, Form, Forms
from fathom.prompts.names import NamePool
from fathom.prompts.spaces import ATTEMPTS, SPACES
from fathom.prompts.spaces import Split as Split
from fathom.records import Needle
from fathom.safe_files import read_bounded

LATENT_VERSION = 2  # the data file's "version": bump both, here and there, when items change
ITEMS_MOST = 64 << 20  # bytes read of a file of items, at most (the shipped one holds under 1 MB)
SPLIT_BUCKETS = 5  # an item's id hashes into one of these; bucket 0 is the training part
HOPS = (1, 2)
# The elements an association chain is made of; "association" names one per element of "chain".
ELEMENTS = frozenset(
    "landmark museum venue street park campus library worship event artwork object city country".split()
)
_FIELDS = {
    "id": str,
    "hops": int,
    "association": str,
    "chain": list,
    "group": str,
    "needle": str,
    "question": str,
    "literal_question": str,
    "probe": str,
    "probe_answers": list,
}
_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# Every item's own question: its place as the question writes it ("Naples, Italy") is what the other
# forms' questions ask about (latent_forms.py).
_OWN_QUESTION = re.compile(r"Which character has been to (.+)\?")


class LatentItemsError(FathomError):
    """A latent-needle data file that is missing, not JSON, or holds a malformed item."""


@dataclass(frozen=True)
class LatentItem:
    """One curated needle: its template, both questions, and the associations that link them."""

    id: str
    hops: int  # how many associations lead from the needle's anchor to the question's place
    association: str  # what each element of ``chain`` is, e.g. "landmark>city>country"
    chain: tuple[str, ...]  # the anchor as the needle names it, then each place it implies
    # Items of one group must never share a prompt: the group is the country the needle places its
    # character in, and every question asks for that country or a place in it.
    group: str
    needle: str  # holds "{name}" exactly once
    question: str  # shares no content word with the needle
    literal_question: str  # the needle's own words, asked
    # The closed-book probe (``fathom.tasks.probe``): the fact the question needs, the anchor's place at
    # the end of the chain, asked alone ("In which city is the Story Bridge?"), and the answers that
    # count (the place first, then its other names: "New York" for "New York City").
    probe: str
    probe_answers: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.chain[0]

    @property
    def element(self) -> str:
        """What the anchor is: a landmark, an artwork, a street, ... (``association``'s first element)."""
        return self.association.split(">")[0]

    @property
    def anchor(self) -> str:
        """The anchor as the needle names it, its article kept as written: "the Eiffel Tower", "The
        Night Watch", "Big Ben"."""
        at = self.needle.find(self.key)
        article = self.needle[max(0, at - 4) : at]
        return article + self.key if article.lower() == "the " else self.key

    @property
    def place(self) -> str:
        """The question's place as the item's own question writes it ("Naples, Italy", "the Netherlands")."""
        found = _OWN_QUESTION.fullmatch(self.question)
        assert found is not None  # _item checks every item's question
        return found.group(1)

    def ask(self, literal: bool, form: Form = PLAIN) -> str:
        """The question in ``form``: its template with the item's place, or the needle's own words."""
        relation = RELATIONS[form.relation]
        if literal:
            own = relation.literals[form.order]
            return self.literal_question if own is None else own.format(anchor=self.anchor)
        return relation.questions[form.template - 1].format(place=self.place)

    def sentence(self, name: str, form: Form = PLAIN) -> str:
        """The needle in ``form`` with the character ``name``, without its leading space."""
        own = RELATIONS[form.relation].needles[form.order]
        return (self.needle if own is None else own.replace("{anchor}", self.anchor)).replace("{name}", name)


@dataclass(frozen=True)
class Overlap:
    """How much of a needle's wording its question repeats."""

    shared: int  # distinct content words in both
    jaccard: float  # shared / distinct content words in either; 0.0 when neither has one
    rouge1: float  # ROUGE-1 F1 over all word tokens


@functools.cache
def _load(path: Path | None) -> tuple[str, tuple[LatentItem, ...]]:
    """The file's sha256 and its items; ``path`` None reads the file fathom ships."""
    source: Traversable = resources.files("fathom.prompts") / "data" / "latent_items.json"
    if path is not None:
        source = path
    try:
        raw = (
            source.read_bytes()
            if path is None
            else read_bounded(path, ITEMS_MOST, "a file of items", user_file=True)
        )
    except OSError as exc:
        raise LatentItemsError(f"cannot read latent needle items '{source}' ({exc})") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise LatentItemsError(f"latent needle items '{source}' are not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise LatentItemsError(f"latent needle items '{source}' hold no 'items' list")
    if data.get("version") != LATENT_VERSION:
        raise LatentItemsError(
            f"latent needle items '{source}' are version {data.get('version')!r}; "
            f"this fathom reads version {LATENT_VERSION}"
        )
    items = tuple(_item(source, index, entry) for index, entry in enumerate(data["items"]))
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise LatentItemsError(f"latent needle items '{source}': id '{item.id}' appears twice")
        seen.add(item.id)
    return hashlib.sha256(raw).hexdigest(), items


def _item(source: object, index: int, entry: Any) -> LatentItem:
    name = entry.get("id") if isinstance(entry, dict) else None
    where = f"latent needle items '{source}', item {index}"
    if isinstance(name, str):
        where += f" ('{name}')"
    if not isinstance(entry, dict):
        raise LatentItemsError(f"{where}: not an object")
    for field, kind in _FIELDS.items():
        value = entry.get(field)
        # bool is an int to isinstance, and JSON's true is no number of hops
        if not isinstance(value, kind) or isinstance(value, bool):
            raise LatentItemsError(f"{where}: '{field}' must be a {kind.__name__}, not {value!r:.40}")
    if unknown := set(entry) - set(_FIELDS):
        raise LatentItemsError(f"{where}: unknown fields {sorted(unknown)}")
    chain, association = entry["chain"], entry["association"].split(">")
    problems = [
        (not _ID.fullmatch(entry["id"]), "'id' must be lower-case words joined by '-'"),
        (entry["hops"] not in HOPS, f"'hops' must be one of {HOPS}"),
        (entry["needle"].count("{name}") != 1, "'needle' must hold '{name}' exactly once"),
        (len(chain) != entry["hops"] + 1, "'chain' must name the anchor and one place per hop"),
        (not all(isinstance(c, str) and c for c in chain), "'chain' must hold non-empty strings"),
        (len(association) != len(chain), "'association' must name one element per chain element"),
        (not set(association) <= ELEMENTS, f"'association' elements must be among {sorted(ELEMENTS)}"),
        (not entry["group"], "'group' must not be empty"),
        (not entry["probe"].endswith("?"), "'probe' must be a question"),
        (
            not _OWN_QUESTION.fullmatch(entry["question"]),
            "'question' must be 'Which character has been to PLACE?'",
        ),
        (chain[0] not in entry["needle"], "'needle' must name the chain's anchor as written"),
        (entry["probe_answers"][:1] != chain[-1:], "'probe_answers' must open with the chain's last place"),
        (not all(isinstance(a, str) and a for a in entry["probe_answers"]), "'probe_answers' must be names"),
    ]
    for failed, problem in problems:
        if failed:
            raise LatentItemsError(f"{where}: {problem}")
    return LatentItem(**{**entry, "chain": tuple(chain), "probe_answers": tuple(entry["probe_answers"])})


def load_items(path: Path | None = None) -> tuple[LatentItem, ...]:
    """Every item of the data file (fathom's own by default), checked; read once per path."""
    return _load(path)[1]


def latent_sha256(path: Path | None = None) -> str:
    """The data file's hash: with LATENT_VERSION, the items' part of a run's identity."""
    return _load(path)[0]


def split_of(item_id: str) -> Split:
    """The part an item belongs to: a hash of its id alone, so adding or editing other items never
    moves it, and an exporter and an evaluation agree on it without sharing any state."""
    bucket = int.from_bytes(hashlib.sha256(item_id.encode()).digest()[:8], "big") % SPLIT_BUCKETS
    return "train" if bucket == 0 else "eval"


@functools.cache
def items_in(split: Split, hops: int | None = None, path: Path | None = None) -> tuple[LatentItem, ...]:
    """The items of one part of the split, of one number of hops or all (cached: every needle
    drawn asks)."""
    return tuple(
        item
        for item in load_items(path)
        if split_of(item.id) == split and (hops is None or item.hops == hops)
    )


def latent_kind(hops: int, literal: bool) -> str:
    """The needle kind: latent-1, latent-2, or the same with -literal."""
    return f"latent-{hops}" + ("-literal" if literal else "")


def draw_latent(
    rng: random.Random,
    hops: int,
    literal: bool,
    split: Split = "eval",
    withheld: frozenset[str] = frozenset(),
    names: NamePool | None = None,
    taken: frozenset[str] = frozenset(),
    forms: Forms = DEFAULT_FORMS,
) -> tuple[Needle, Form]:
    """A needle of one item of ``split`` (none of ``withheld``; one whose anchor takes a relation of
    ``forms``) with a character's name from ``names`` (the same part's shipped pool by default,
    ``prompts/names.py``), sharing no given or family name with ``taken``, in a form drawn from
    ``forms``; ``literal`` asks the question that reuses the needle's words."""
    if hops not in HOPS:
        raise SpecError(f"a latent needle takes 1 or 2 hops, not {hops}")
    items = items_in(split, hops)
    if withheld or not forms.plain:
        items = tuple(item for item in items if item.id not in withheld and forms.fits(item.element))
    # The item is drawn first, then its form, then the name: the order fixes every needle, and a run
    # of the default form (which draws nothing) draws what runs drew before forms existed.
    item = rng.choice(items)
    names = SPACES[split].names if names is None else names
    form = forms.draw(rng, item.element)
    name = _name(rng, item, names, taken, form)
    needle = Needle(
        kind=latent_kind(hops, literal),
        text=" " + item.sentence(name, form),
        question=item.ask(literal, form),
        answers=(name,),
        key=item.key,
    )
    return needle, form


def _name(
    rng: random.Random, item: LatentItem, names: NamePool, taken: frozenset[str], form: Form = PLAIN
) -> str:
    """A given and a family name from ``names``, none of ``taken``, sharing no content word with the
    item: a name that were a word of the needle or question would hand the answer to their words."""
    texts = (item.sentence("", form), item.ask(False, form), item.ask(True, form), *item.chain)
    words = content_words(" ".join(texts))
    for _ in range(ATTEMPTS):
        name = names.draw(rng, set(taken))
        if not content_words(name) & words:
            return name
    raise SpecError(f"no name of the pool shares no word with the latent item '{item.id}'")


# fmt: off
# Function words: NLTK's English stop words less its contractions and their pieces (don't, don, s,
# t, ...), plus could and would. Content words are the rest.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves
""".split())
# fmt: on
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")  # letters and digits, with inner apostrophes (Xi'an)
_TOKEN = re.compile(r"[^\W_]+")


def _fold(text: str) -> str:
    """Lower-cased, accents dropped (Zürich reads as zurich), curly apostrophes made straight."""
    if text.isascii():  # nothing to drop or straighten: the common case, and a corpus is megabytes
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.replace("\u2019", "'"))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def _singular(word: str) -> str:
    """A light plural stripper, applied alike to both sides of a comparison so that museums meets
    museum and cities meets city: -ies to -y, -(s|sh|ch|x|z)es loses -es, and any other final -s
    goes unless the word ends in -ss, -us or -is (glass, campus, Paris). Words under four letters
    are left alone (bus, gas, has)."""
    if len(word) < 4 or not word.isalpha():
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def content_words(text: str) -> frozenset[str]:
    """The distinct content words of ``text``: word tokens, folded (lower-case, no accents), a
    possessive 's dropped (Mark's is mark), stop words left out, plurals made singular."""
    return frozenset(_content(w) for w in _WORD.findall(_fold(text))) - {""}


@functools.lru_cache(maxsize=1 << 16)
def _content(word: str) -> str:
    """A folded word as a content word ("" for a stop word); cached, since a corpus repeats its words."""
    word = word[:-2] if word.endswith("'s") else word
    return "" if word in STOP_WORDS else _singular(word)


def content_overlap(a: str, b: str) -> tuple[int, float]:
    """The distinct content words ``a`` and ``b`` share, and their Jaccard index (0.0 when neither
    has a content word)."""
    first, second = content_words(a), content_words(b)
    union = first | second
    shared = len(first & second)
    return shared, (shared / len(union) if union else 0.0)


def rouge1(a: str, b: str) -> float:
    """ROUGE-1 F1 of ``a`` and ``b``: unigram counts clipped to the smaller, over folded tokens.

    Written here rather than taken from rouge-score: a unigram F1 is a few lines, and that package
    brings nltk, absl and six to do it. On text that folds to ASCII it gives rouge-score's number
    (its default tokenizer: lower-case runs of [a-z0-9], no stemming); on other text it keeps the
    letters that rouge-score's tokenizer drops.
    """
    first, second = Counter(_TOKEN.findall(_fold(a))), Counter(_TOKEN.findall(_fold(b)))
    hits = sum((first & second).values())
    if not hits:
        return 0.0
    precision, recall = hits / sum(first.values()), hits / sum(second.values())
    return 2 * precision * recall / (precision + recall)


def item_overlap(item: LatentItem, literal: bool) -> Overlap:
    """The overlap of an item's needle with its question (or its literal question). The name is
    left out of the needle: it is drawn per sample and shares no word with either question."""
    needle, question = item.needle.replace("{name}", ""), item.ask(literal)
    shared, jaccard = content_overlap(needle, question)
    return Overlap(shared, jaccard, rouge1(needle, question))
