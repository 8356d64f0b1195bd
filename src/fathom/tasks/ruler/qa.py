"""RULER's question answering (qa_1: SQuAD, qa_2: HotpotQA, and qa_synth): a question and its gold
documents among distractor documents, each written ``Document {i}:\\n{text}`` and joined by blank
lines, as RULER writes them.

Where fathom differs from RULER, and why:

- The item: RULER takes the dataset's items in order (sample i asks item i); a family here has only
  the sample's random generator, so it draws ``rng.randrange(len(items))``. An item whose gold
  documents alone overflow the budget is drawn again (RULER would loop for ever on it).
- The length: RULER steps the document count by ten and keeps what falls short of the length;
  here documents are added whole while they fit (gold, then related in random order, then random
  others), any of the next candidates that still fit close the gap, and a gap still above half the
  length tolerance is filled by the opening tokens of one more distractor, placed last.
  ``--fill ruler`` takes RULER's count instead: the first documents offered, ten at a time
  (``sizing.py``).
- The order: RULER shuffles all documents, and so does this family (with the sample's generator).

Each document is tokenised once per tokenizer, each header once per position; a prompt is those
ids joined. The blank line between two documents goes with whichever side the tokenizer merges it
into when it reads the whole text: the document before (``text + "\\n\\n"``: cl100k and Llama 3
merge a full stop with the newlines after it) or the header after (``"\\n\\nDocument 2:\\n"``:
GPT-2's pre-tokenizer, SmolLM2's, splits the newlines from the full stop). Either way the ids are
those of the whole text, so a text backend that re-tokenises it counts what was built. A document's
header number is its final position, but the headers of positions 1..n add up the same whichever
document takes which, so the count is exact.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from fathom.errors import PromptError
from fathom.prompts import PromptText, assemble, frame, length_tolerance, too_short
from fathom.prompts.haystack.index import Ids
from fathom.prompts.tokenizers import Tokenizer
from fathom.tasks.ruler.base import Draft, Setting, Steps, encode_units, task_text
from fathom.tasks.ruler.catalogue import Variant
from fathom.tasks.ruler.qa_data import QAItem, configured_path, load_dataset
from fathom.tasks.ruler.splits import QA_SPLIT_VERSION, SPLIT_DATASETS, qa_part

HEADER = "Document {i}:\n"
SEPARATOR = "\n\n"
LOOKAHEAD = 256  # candidates tried after the first that did not fit, and tokenised at a time
ATTEMPTS = 32  # items drawn before a length is declared too short for this dataset's gold documents
STEP = 10  # RULER's sizing step (--fill ruler): documents by ten


class QuestionAnswering:
    """qa_1, qa_2 and qa_synth: the catalogue's ``dataset`` parameter picks the data."""

    def __init__(self, variant: Variant, setting: Setting) -> None:
        self.variant, self.setting = variant, setting
        name = variant.params["dataset"]
        self.data = load_dataset(name, configured_path(name))
        self.split = setting.split
        # The items this part asks, and its distractors' documents (None: all; ``splits.py``).
        self.part = qa_part(self.data, setting.split)
        if not self.part.items:
            raise PromptError(
                f"{self.data.name}'s file holds no item of the {setting.split} part: each item lies in one "
                "part by a hash of its documents, a fifth in the part held out for fathom export"
            )
        self.documents = self.part.documents or range(len(self.data.documents))
        self._bodies: dict[int, Ids] = {}  # document index -> ids of its text (and separator)
        self._headers: list[Ids] = []  # position - 1 -> ids of its header (and separator)
        # The blank line between documents: opening the header after it, or closing the text before.
        self._lead, self._trail = (SEPARATOR, "") if separator_leads(setting.tokenizer) else ("", SEPARATOR)

    def identity(self) -> dict[str, Any]:
        split = {"split": QA_SPLIT_VERSION} if self.data.name in SPLIT_DATASETS else {}
        return {"dataset": self.data.name, "dataset_sha256": self.data.sha256, **split}

    def steps(self, length: int) -> Steps:
        return Steps(STEP, STEP, "documents", len(self.documents))

    def appended(self, draft: Draft) -> str:
        # RULER's ``input_text + f' {answer}'``: the list as Python writes it.
        return f" {list(draft.answers)}"

    def draft(self, target: int, rng: random.Random, count: int | None = None) -> Draft:
        item, text, head, tail = self._pick(target, rng)
        budget = target - len(head) - len(tail)
        gold = set(item.gold)
        if count is None:
            chosen, skipped = self._pack(self._candidates(item, rng), budget)
            rng.shuffle(chosen)
            parts = self._parts(chosen, gold, skipped, budget, length_tolerance(target))
        else:  # RULER's: the first ``count`` documents offered (the gold ones among them), shuffled
            offered = itertools.islice(self._candidates(item, rng), max(count, len(item.gold)))
            chosen = [index for index, _ in offered]
            rng.shuffle(chosen)
            parts = self._joined(chosen, [*(self._bodies[i] for i in chosen[:-1]), self._plain(chosen[-1])])
        prompt = assemble(head, [(ids, index in gold) for index, ids in parts], tail, target)
        return Draft(prompt, text, item.question, item.answers, "answer", item.answers)

    def _pick(self, target: int, rng: random.Random) -> tuple[QAItem, PromptText, Ids, Ids]:
        """An item whose gold documents fit, and the prompt's ids before and after the context."""
        items, least, attempts = self.data.items, None, 0
        while attempts < ATTEMPTS:
            index = rng.randrange(len(items))
            if index not in self.part.items:  # the other part's: drawn again, not counted
                continue
            attempts += 1
            item = items[index]
            text = task_text(self.variant, self.setting, {}, item.question)
            head, tail = frame(self.setting.tokenizer, self.setting.template, text, item.question)
            overhead = len(head) + len(tail) + self._size(self._bodies_of(item.gold))
            if overhead <= target:
                return item, text, head, tail
            least = overhead if least is None else min(least, overhead)
        raise too_short(target, least or 0, f"template, question and {self.data.name}'s gold documents")

    def _candidates(self, item: QAItem, rng: random.Random) -> Iterator[tuple[int, Ids]]:
        """Documents in the order they are offered: gold, related (shuffled: RULER samples them when
        not all fit), then the rest in random order; tokenised a batch at a time."""
        related = [i for i in item.related if i not in item.gold]
        rng.shuffle(related)
        order = itertools.chain(item.gold, related, _others(self.documents, {*item.gold, *related}, rng))
        while batch := list(itertools.islice(order, LOOKAHEAD)):
            yield from zip(batch, self._bodies_of(batch), strict=True)

    def _pack(self, candidates: Iterator[tuple[int, Ids]], budget: int) -> tuple[list[int], list[int]]:
        """Whole documents while they fit, then any of the next ``LOOKAHEAD`` that still fit (the
        greedy fill of base.fill, which cannot be reused: the n-th document taken also brings the
        n-th header). Returns the documents taken and those passed over."""
        chosen: list[int] = []
        skipped: list[int] = []
        left = budget
        for index, ids in candidates:
            cost = len(self._header(len(chosen) + 1)) + len(ids)
            if cost <= left:
                chosen.append(index)
                left -= cost
            else:
                skipped.append(index)
            if left == 0 or len(skipped) > LOOKAHEAD:
                break
        return chosen, skipped

    def _parts(
        self, order: list[int], gold: set[int], skipped: list[int], budget: int, tolerance: int
    ) -> list[tuple[int, Ids]]:
        """The context's documents in order, headers joined to them. The last one drops its
        separator; a gap beyond half the tolerance gets the opening of a passed-over document
        instead."""
        bodies = [self._bodies[i] for i in order]
        plain = self._plain(order[-1])
        # Half the tolerance: the rest is for text backends, whose re-tokenisation may merge the
        # context's last token with the template's blank line after it.
        if budget - self._size(bodies) + len(bodies[-1]) - len(plain) <= tolerance // 2:
            return self._joined(order, [*bodies[:-1], plain])
        if not skipped:
            # An export's training part (a fifth of the data) has no qa_synth to turn to.
            other = "" if self.data.name == "synthetic" or self.split == "train" else ", or qa_synth"
            part = " training" if self.split == "train" else ""
            raise PromptError(
                f"{self.data.name}'s {len(self.documents)}{part} documents fill only {self._size(bodies)} of "
                f"the {budget} tokens this length leaves them; use shorter lengths{other}"
            )
        if self._room(bodies, budget) < 1:
            distractors = [i for i in order if i not in gold]
            if not distractors:  # the gold documents alone, with no room for a header: a few tokens short
                return self._joined(order, [*bodies[:-1], plain])
            # The shortest distractor makes room for the filler.
            drop = order.index(min(distractors, key=lambda i: len(self._bodies[i])))
            order, bodies = order[:drop] + order[drop + 1 :], bodies[:drop] + bodies[drop + 1 :]
        filler = max(skipped, key=lambda i: len(self._bodies[i]))
        return self._joined([*order, filler], [*bodies, self._plain(filler)[: self._room(bodies, budget)]])

    def _size(self, bodies: list[Ids]) -> int:
        """Tokens of these documents with the headers of positions 1..n."""
        return sum(len(self._header(k)) + len(ids) for k, ids in enumerate(bodies, 1))

    def _room(self, bodies: list[Ids], budget: int) -> int:
        """Tokens a document after these could have, header not counted."""
        return budget - self._size(bodies) - len(self._header(len(bodies) + 1))

    def _joined(self, order: list[int], bodies: list[Ids]) -> list[tuple[int, Ids]]:
        return [
            (i, np.concatenate([self._header(k), ids]))
            for k, (i, ids) in enumerate(zip(order, bodies, strict=True), 1)
        ]

    def _header(self, position: int) -> Ids:
        while len(self._headers) < position:
            first = len(self._headers) + 1
            headers = [(self._lead if i > 1 else "") + HEADER.format(i=i) for i in range(first, first + 512)]
            self._headers += encode_units(self.setting.tokenizer, headers)
        return self._headers[position - 1]

    def _bodies_of(self, indexes: list[int] | tuple[int, ...]) -> list[Ids]:
        missing = [i for i in dict.fromkeys(indexes) if i not in self._bodies]
        documents = self.data.documents
        encoded = encode_units(self.setting.tokenizer, [documents[i] + self._trail for i in missing])
        self._bodies.update(zip(missing, encoded, strict=True))
        return [self._bodies[i] for i in indexes]

    def _plain(self, index: int) -> Ids:
        """A document without a separator after it: the context's last."""
        if not self._trail:
            return self._bodies_of([index])[0]
        return encode_units(self.setting.tokenizer, [self.data.documents[index]])[0]


def separator_leads(tokenizer: Tokenizer) -> bool:
    """Whether the tokenizer reads the blank line between two documents with the header after it
    rather than with the text before it: which of the two ways of cutting the ids reproduces how
    it reads the text whole. Where neither or both do, the text keeps it (cl100k's way)."""
    end, header = "the end of a document.", HEADER.format(i=2)
    whole = tokenizer.encode(end + SEPARATOR + header)
    trailing = tokenizer.encode(end + SEPARATOR) + tokenizer.encode(header)
    leading = tokenizer.encode(end) + tokenizer.encode(SEPARATOR + header)
    return leading == whole != trailing


def _others(documents: Sequence[int], taken: set[int], rng: random.Random) -> Iterator[int]:
    """The ``documents`` not in ``taken``, in random order, drawn lazily: a prompt uses a few hundred
    of HotpotQA's 66,635 documents."""
    seen = set(taken)
    left = len(documents) - len(taken)  # ``taken`` (an item's documents) lies in its part's ``documents``
    while left:
        index = documents[rng.randrange(len(documents))]
        if index not in seen:
            seen.add(index)
            left -= 1
            yield index
