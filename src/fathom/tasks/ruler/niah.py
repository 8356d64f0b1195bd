"""RULER's eight needle tasks: one generator, parameterised by haystack, key and value types and the
numbers of keys, values and queries (the catalogue's ``niah`` variants).

The haystacks are laid out as RULER writes them: the noise paragraph alone on each line, and each
needle on a line of its own between two of them (niah_single_1); needle lines, every one a
distractor but the asked one's (niah_multikey_2/3); an essay, needles between its sentences. A
haystack opens right after the instruction's newline, with no space; in a haystack of lines a
needle never follows the last line, and the question follows that line after one newline.

Where fathom differs from RULER (docs/ruler.md has them all):

- The length: where whole lines leave tokens of the budget, they open the context as a line's tail
  (``line_tail``); RULER takes fewer lines (or essay words) and lands below the length. The essay
  ends at a token, RULER's at a word. ``--fill ruler`` takes RULER's count instead (``steps``:
  lines by 25, or 5 below 4096; essay words by 500, counted by ``EssayWords``; ``sizing.py``).
- An essay needle's depth is the sentence boundary nearest that share of the haystack's tokens;
  RULER's is the sentence at that share of NLTK's sentences. At depth 100 RULER leaves a space
  after the needle; here the question's newline follows it.
"""

from __future__ import annotations

import functools
import random
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from fathom.errors import PromptError
from fathom.prompts import Prompt, PromptBuilder, PromptText, assemble, frame, too_short
from fathom.prompts.haystack import TokenizedCorpus, load_corpus, tokenize_corpus
from fathom.prompts.haystack.index import Ids, Positions
from fathom.prompts.tokenizers import Tokenizer
from fathom.tasks.ruler.base import (
    Draft,
    Lines,
    Setting,
    Steps,
    chunks,
    encode_units,
    fill,
    line_slots,
    line_tail,
    lines_close_the_context,
    task_text,
    word_list,
)
from fathom.tasks.ruler.catalogue import Variant

NEEDLE = "One of the special magic {kind} for {key} is: {value}."
# RULER's sizing steps (--fill ruler): essay words by 500; noise and needle lines by 25, or by 5 below
# 4096 tokens.
ESSAY_STEP, LINE_STEP, SHORT_LINE_STEP, SHORT = 500, 25, 5, 4096
# RULER draws each needle's depth from 40 evenly spaced percentages of the essay.
DEPTHS = tuple(int(d) for d in np.round(np.linspace(0, 100, num=40, endpoint=True)))


def line(element: str, first: bool, last: bool) -> str:
    """A noise paragraph or needle as RULER's ``"\\n".join`` writes it: ending its own line (the
    last line's newline is the one before the question)."""
    return element + "\n"


class NeedleFamily:
    """niah_single_*, niah_multikey_*, niah_multivalue, niah_multiquery."""

    def __init__(self, variant: Variant, setting: Setting) -> None:
        self.variant, self.setting = variant, setting
        params = variant.params
        self.haystack = params["haystack"]
        self.key_type, self.value_type = params["key"], params["value"]
        self.keys = max(params["keys"], params["queries"])  # RULER asks only about keys it placed
        self.values, self.queries = params["values"], params["queries"]
        self.corpus = None
        if self.haystack == "essay":
            self.corpus = load_corpus(setting.corpus or "essays")
            self.tokenized = tokenize_corpus(self.corpus, setting.tokenizer)
            self.opening = Opening.of(self.tokenized, setting.tokenizer)
        elif self.haystack == "noise":
            self.corpus = load_corpus("noise")
            self.lines = Lines(setting.tokenizer, self.corpus.text, line)

    @functools.cached_property
    def words(self) -> EssayWords:
        """The essay counted in words, for RULER's fill alone (it reads every distinct token)."""
        return EssayWords(self.tokenized, self.setting.tokenizer)

    def identity(self) -> dict[str, Any]:
        if self.corpus is None:
            return {}
        return {"corpus": self.corpus.name, "corpus_sha256": self.corpus.sha256}

    def _random(self, kind: str, rng: random.Random) -> str:
        if kind == "numbers":
            return str(rng.randint(1_000_000, 9_999_999))
        if kind == "uuids":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        return f"{rng.choice(word_list('adjectivelist'))}-{rng.choice(word_list('nounlist'))}"

    def steps(self, length: int) -> Steps:
        """RULER's: essay words in steps of 500, every word of the essays at most; lines in steps of
        25, or of 5 below 4096."""
        if self.haystack == "essay":
            return Steps(ESSAY_STEP, ESSAY_STEP, "essay words", self.words.count)
        step = LINE_STEP if length >= SHORT else SHORT_LINE_STEP
        return Steps(step, step, f"{self.haystack} lines")

    def appended(self, draft: Draft) -> str:
        return " ".join(draft.answers)  # RULER's ``input_text + ' '.join(answer)``: no space before it

    def draft(self, target: int, rng: random.Random, count: int | None = None) -> Draft:
        keys = [self._random(self.key_type, rng) for _ in range(self.keys)]
        values = [[self._random(self.value_type, rng) for _ in range(self.values)] for _ in keys]
        needles = [
            NEEDLE.format(kind=self.value_type, key=k, value=v)
            for k, vs in zip(keys, values, strict=True)
            for v in vs
        ]
        rng.shuffle(needles)
        asked = rng.sample(range(len(keys)), self.queries)
        queries = [keys[i] for i in asked]
        query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]
        answers = tuple(v for i in asked for v in values[i])
        # Other keys' values, which an answer that lists them too is flagged for (Sample.look_alikes).
        others = [v for i, vs in enumerate(values) if i not in asked for v in vs]
        text = self._text(query)
        if self.haystack == "needle":
            text = lines_close_the_context(text)
            prompt, placed = self._among_needles(target, text, query, needles, set(keys), rng, count)
            others += placed
        elif self.haystack == "noise":
            text = lines_close_the_context(text)
            prompt = self._among_noise(target, text, query, needles, rng, count)
        else:
            depths = [d / 100 for d in sorted(rng.sample(DEPTHS, len(needles)))]
            # A needle at depth 0 opens the context with its space, as RULER's " ".join writes it,
            # and the essay after it keeps its own; else the essay opens the context without one.
            corpus = self.tokenized if 0.0 in depths else self.opening
            builder = PromptBuilder(self.setting.tokenizer, self.setting.template, text, corpus)
            spaced = [(d, " " + n) for d, n in zip(depths, needles, strict=True)]
            if count is not None:  # the length that holds ``count`` essay words
                target = self._essay_length(builder, query, [n for _, n in spaced], count)
            prompt = builder.place(target, query, spaced)
        look_alikes = tuple(v for v in others if v not in answers)  # a rare twin of the answer is none
        return Draft(prompt, text, query, answers, self.value_type, tuple(queries), look_alikes)

    def _essay_length(self, builder: PromptBuilder, query: str, needles: list[str], count: int) -> int:
        """The prompt's tokens with ``count`` words of the essay: what to ask ``builder.place`` for."""
        head, tail = builder.frame(query)
        essay = self.words.tokens(count)
        if builder.corpus is self.opening:  # the essay's first sentence without its space
            essay += self.opening.shift()
        marks = sum(len(ids) for ids in encode_units(self.setting.tokenizer, needles))
        return len(head) + len(tail) + marks + essay

    def _text(self, query: str) -> PromptText:
        kind = self.value_type
        text = task_text(self.variant, self.setting, {"type_needle_v": kind}, query)
        if self.queries * self.values > 1:
            return text

        # RULER's singular wording when one value is asked for (and "uuids" -> "uuid").
        def singular(words: str) -> str:
            words = words.replace("Some", "A").replace("are all", "is").replace("are", "is")
            return words.replace("answers", "answer").replace(kind, kind[:-1])

        return type(text)(
            singular(text.before), singular(text.after), singular(text.answer_prefix), text.system
        )

    def _among_needles(
        self,
        target: int,
        text: PromptText,
        query: str,
        needles: list[str],
        keys: set[str],
        rng: random.Random,
        count: int | None = None,
    ) -> tuple[Prompt, list[str]]:
        """The haystack of niah_multikey_2/3: every line a needle of another key; and their values."""
        tokenizer = self.setting.tokenizer
        head, tail = frame(tokenizer, self.setting.template, text, query)
        needle_ids = [
            np.asarray(ids, dtype=np.int32) for ids in tokenizer.encode_batch([n + "\n" for n in needles])
        ]
        budget = target - len(head) - len(tail) - sum(len(ids) for ids in needle_ids)
        if budget < 0 and count is None:
            raise too_short(target, target - budget, "template, question and needles")

        drawn: list[str] = []  # every distractor's value, in the order of the lines

        def distractors(count: int) -> list[str]:
            lines: list[str] = []
            while len(lines) < count:
                key = self._random(self.key_type, rng)
                if key not in keys:  # a distractor must never answer the question
                    drawn.append(self._random(self.value_type, rng))
                    lines.append(NEEDLE.format(kind=self.value_type, key=key, value=drawn[-1]) + "\n")
            return lines

        if count is None:
            lines, used, opened = fill(chunks(distractors, tokenizer), budget, line_tail(tokenizer))
        else:  # RULER's: ``count`` distractor lines
            lines, used, opened = encode_units(tokenizer, distractors(count)), list(range(count)), False
        # Needles go before whole lines, as RULER inserts them, never before a line's tail.
        slots = [slot + opened for slot in line_slots(len(lines) - opened, len(needle_ids), rng)]
        parts: list[tuple[Ids, bool]] = [(ids, False) for ids in lines]
        # From the last slot back, so each insertion leaves the earlier slots' lines where they were.
        for slot, ids in sorted(zip(slots, needle_ids, strict=True), key=lambda pair: -pair[0]):
            parts.insert(slot, (ids, True))
        return assemble(head, parts, tail, target), [drawn[i] for i in used]

    def _among_noise(
        self,
        target: int,
        text: PromptText,
        query: str,
        needles: list[str],
        rng: random.Random,
        count: int | None = None,
    ) -> Prompt:
        """The haystack of niah_single_1: RULER's noise paragraph on every line, each needle on a
        line of its own before a line drawn uniformly; as many lines as fill the budget (or
        ``count``)."""
        head, tail = frame(self.setting.tokenizer, self.setting.template, text, query)
        lead = 0
        if count is None:
            count, lead = self.lines.fit(target - len(head) - len(tail), needles)
            if lead < 0:
                raise too_short(target, target - lead, "template, question and needles")
        slots = line_slots(count, len(needles), rng)
        return assemble(head, self.lines.parts(count, needles, slots, lead), tail, target)


@dataclass(frozen=True, eq=False)
class Opening(TokenizedCorpus):
    """A sentence corpus as RULER's essay haystack opens, right after the instruction's newline:
    each window's first sentence without the space that every sentence is tokenised with (it is
    re-encoded without it, and the window shifted to keep its length)."""

    tokenizer: Tokenizer | None = None

    @classmethod
    def of(cls, corpus: TokenizedCorpus, tokenizer: Tokenizer) -> Opening:
        fields = (corpus.ids, corpus.boundaries, corpus.corpus_sha256, corpus.tokenizer_identity)
        return cls(*fields, corpus.domains, corpus.domain_of, tokenizer)

    def window(self, n: int, start: int = 0) -> tuple[Ids, Positions]:
        unit, opening = self._first_unit(start)
        if opening is None:
            return super().window(n, start)
        shift = len(opening) - len(unit)
        ids, starts = super().window(n - shift, start)
        if len(ids) < len(unit):  # the window ends inside its first sentence
            return opening[:n], starts[:0]
        return np.concatenate([opening, ids[len(unit) :]]), starts + shift

    def shift(self, start: int = 0) -> int:
        """The tokens a window from ``start`` gains (or loses) by opening without the space: the
        same text as the corpus's takes this many more tokens here."""
        unit, opening = self._first_unit(start)
        return 0 if opening is None else len(opening) - len(unit)

    def _first_unit(self, start: int) -> tuple[Ids, Ids | None]:
        """The corpus's ids of the unit at or after ``start``, and its ids without its opening
        space (None where it opens with none)."""
        first = self.unit_start(start)
        after = int(np.searchsorted(self.boundaries, first, side="right"))
        end = int(self.boundaries[after]) if after < len(self.boundaries) else len(self.ids)
        unit = self.ids[first:end]
        text = self.tokenizer.decode(unit.tolist()) if self.tokenizer else ""
        if not text.startswith(" ") or self.tokenizer is None:
            return unit, None
        return unit, np.asarray(self.tokenizer.encode(text[1:]), dtype=np.int32)


class EssayWords:
    """An essay corpus counted in words, RULER's unit for it (``re.sub(r"\\s+", " ", essay).split(" ")``):
    a word opens at each token that opens with whitespace, read after a reference token (a tokenizer
    may drop the space that opens a text's first token)."""

    def __init__(self, corpus: TokenizedCorpus, tokenizer: Tokenizer) -> None:
        unique = np.unique(corpus.ids)
        reference = tokenizer.encode("a")
        skip = len(tokenizer.decode(reference))
        texts = [tokenizer.decode([*reference, int(token)])[skip:] for token in unique]
        opens = np.array([text[:1].isspace() for text in texts], dtype=bool)
        self.starts = np.flatnonzero(opens[np.searchsorted(unique, corpus.ids)])
        self.size = len(corpus.ids)
        if len(self.starts) < 2:
            raise PromptError(
                f"RULER's fill counts essay words, and no token of {tokenizer.name} opens with a space "
                "to tell where one starts: use --fill exact with this tokenizer"
            )

    @property
    def count(self) -> int:
        return len(self.starts)

    def tokens(self, words: int) -> int:
        """The corpus's tokens before its word ``words`` (all of them past its last)."""
        return int(self.starts[words]) if words < len(self.starts) else self.size
