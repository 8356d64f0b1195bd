"""RULER's eight needle tasks: one generator, parameterised by haystack, key and value types and the
numbers of keys, values and queries (the catalogue's ``niah`` variants)."""

from __future__ import annotations

import random
import uuid
from typing import Any

import numpy as np

from fathom.prompts import Prompt, PromptBuilder, PromptText, assemble, frame, too_short
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.haystack.index import Ids
from fathom.tasks.ruler.base import Draft, Setting, chunks, fill, task_text, word_list
from fathom.tasks.ruler.catalogue import Variant

NEEDLE = "One of the special magic {kind} for {key} is: {value}."
# RULER draws each needle's depth from 40 evenly spaced percentages of the essay.
DEPTHS = tuple(int(d) for d in np.round(np.linspace(0, 100, num=40, endpoint=True)))


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
        if self.haystack in ("essay", "noise"):
            name = (setting.corpus or "essays") if self.haystack == "essay" else "noise"
            self.corpus = load_corpus(name)
            self.tokenized = tokenize_corpus(self.corpus, setting.tokenizer)

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

    def draft(self, target: int, rng: random.Random) -> Draft:
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
        text = self._text(query)
        if self.haystack == "needle":
            prompt = self._among_needles(target, text, query, needles, set(keys), rng)
        else:
            if self.haystack == "essay":
                depths = [d / 100 for d in sorted(rng.sample(DEPTHS, len(needles)))]
            else:  # RULER puts needles between noise lines drawn uniformly
                depths = sorted(rng.random() for _ in needles)
            builder = PromptBuilder(self.setting.tokenizer, self.setting.template, text, self.tokenized)
            prompt = builder.place(
                target, query, [(d, " " + n) for d, n in zip(depths, needles, strict=True)]
            )
        return Draft(prompt, text, query, answers, self.value_type, tuple(queries))

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
    ) -> Prompt:
        """The haystack of niah_multikey_2/3: every line a needle of another key."""
        tokenizer = self.setting.tokenizer
        head, tail = frame(tokenizer, self.setting.template, text, query)
        needle_ids = [
            np.asarray(ids, dtype=np.int32) for ids in tokenizer.encode_batch([n + "\n" for n in needles])
        ]
        budget = target - len(head) - len(tail) - sum(len(ids) for ids in needle_ids)
        if budget < 0:
            raise too_short(target, target - budget, "template, question and needles")

        def distractors(count: int) -> list[str]:
            lines: list[str] = []
            while len(lines) < count:
                key = self._random(self.key_type, rng)
                if key not in keys:  # a distractor must never answer the question
                    lines.append(
                        NEEDLE.format(kind=self.value_type, key=key, value=self._random(self.value_type, rng))
                        + "\n"
                    )
            return lines

        lines, _ = fill(chunks(distractors, tokenizer), budget)
        slots = sorted(rng.sample(range(len(lines) + 1), len(needle_ids)), reverse=True)
        parts: list[tuple[Ids, bool]] = [(ids, False) for ids in lines]
        for slot, ids in zip(slots, needle_ids, strict=True):
            parts.insert(slot, (ids, True))
        return assemble(head, parts, tail, target)
