"""The training parts of RULER's variable tracking, aggregation and QA families: what ``fathom export``
draws (``Setting.split == "train"``) that no evaluation sample can draw, whatever its seed.

- vt: evaluation's names are five capital letters (three in the solved example) and its values
  five digits (RULER's ``randint(10000, 99999)``); training's are six letters (four in the
  example) and six digits, so no name or value is one evaluation could draw.
- cwe: evaluation draws every word of wonderwords' noun, adjective and verb lists (RULER's);
  training draws the bundled prose corpus's words of 3 to 12 lower-case letters that are none of
  wonderwords' words (profanity list included), so no listed word is one evaluation could list.
- fwe: evaluation's coded words are random strings of six lower-case letters; training's of seven.
- qa_1, qa_2: each item of SQuAD and HotpotQA lies in one part by a hash of the texts of the
  documents it asks about (its gold and related ones: a SQuAD article's paragraphs, a HotpotQA
  question's ten), a fifth in training's. Evaluation redraws an item of training's part (so its
  other samples ask what they always asked); training also leaves out an item that shares a
  document with an evaluation item (HotpotQA's questions share Wikipedia paragraphs), and draws its
  distractors from the documents of no evaluation item. qa_synth, generated offline, is not split.

Evaluation's draws are the ones fathom always made, from the same random calls, but for qa_1 and
qa_2's samples that drew a training item: those ask another (``QA_SPLIT_VERSION``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass

from fathom.prompts.haystack import load_corpus
from fathom.prompts.names import Split
from fathom.tasks.ruler.base import word_list
from fathom.tasks.ruler.qa_data import QADataset

# Part of each qa_1 and qa_2 sample's identity: bump when the split below changes which items a part holds.
QA_SPLIT_VERSION = 1
SPLIT_DATASETS = ("squad", "hotpotqa")
TRAIN_SHARE = 5  # one item in five (by its hash) is training's
TRAIN_FWE_LETTERS = 7
_WORD = re.compile(r"\b[a-z]{3,12}\b")


@dataclass(frozen=True)
class ChainSpace:
    """vt's names (letters of the task's chain, and of the solved example's) and values (both ends
    as ``randrange`` takes them: the upper one excluded)."""

    letters: int
    example_letters: int
    values: tuple[int, int]


CHAINS: dict[Split, ChainSpace] = {
    "eval": ChainSpace(5, 3, (10_000, 99_999)),
    "train": ChainSpace(6, 4, (100_000, 999_999)),
}


@functools.cache
def cwe_words(split: Split) -> tuple[str, ...]:
    """The words cwe lists, sorted: wonderwords' three lists for evaluation, as RULER draws them;
    the prose corpus's other words for training."""
    ruler = {*word_list("nounlist"), *word_list("adjectivelist"), *word_list("verblist")}
    if split == "eval":
        return tuple(sorted(ruler))
    withheld = ruler | set(word_list("profanitylist"))
    return tuple(sorted(set(_WORD.findall(load_corpus("prose").whole_text)) - withheld))


def fwe_letters(split: Split, letters: int) -> int:
    """The letters of fwe's coded words: the variant's for evaluation, seven for training."""
    return letters if split == "eval" else TRAIN_FWE_LETTERS


def item_split(data: QADataset, index: int) -> Split:
    """The part an item of a split dataset lies in: a hash of its documents' texts, in order."""
    item = data.items[index]
    digest = hashlib.sha256()
    for document in sorted({*item.gold, *item.related}):
        digest.update(data.documents[document].encode() + b"\0")
    return "train" if int.from_bytes(digest.digest()[:8], "big") % TRAIN_SHARE == 0 else "eval"


@dataclass(frozen=True)
class QAPart:
    """The items one part draws (indexes into the dataset's), and the documents it may draw
    distractors from (None: all of them)."""

    items: frozenset[int]
    documents: tuple[int, ...] | None


@functools.cache
def qa_part(data: QADataset, split: Split) -> QAPart:
    """The items and distractor documents of ``split``; every item and document where the dataset
    is not split (qa_synth)."""
    if data.name not in SPLIT_DATASETS:
        return QAPart(frozenset(range(len(data.items))), None)
    parts = [item_split(data, index) for index in range(len(data.items))]
    evaluated = {
        document
        for index, item in enumerate(data.items)
        if parts[index] == "eval"
        for document in (*item.gold, *item.related)
    }
    if split == "eval":
        return QAPart(frozenset(i for i, part in enumerate(parts) if part == "eval"), None)
    items = frozenset(
        index
        for index, item in enumerate(data.items)
        if parts[index] == "train" and not evaluated.intersection((*item.gold, *item.related))
    )
    return QAPart(items, tuple(i for i in range(len(data.documents)) if i not in evaluated))
