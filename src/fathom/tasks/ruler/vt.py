"""RULER's variable tracking (vt): a chain of assignments ("VAR BBBBB = VAR AAAAA") hidden in noise;
the model names every variable that ends up holding the chain's value. As in RULER, one solved
instance of the task, with three-letter names and a short haystack, comes before the real one."""

from __future__ import annotations

import itertools
import random
import string
from typing import Any

from fathom.errors import SpecError
from fathom.prompts import Prompt, PromptBuilder, PromptText
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.templates import ChatTemplate
from fathom.tasks.ruler.base import Draft, Setting, after_example, solved_example, task_text
from fathom.tasks.ruler.catalogue import Variant

# RULER builds its example at max_seq_length 500, of which 30 are the tokens to generate.
EXAMPLE_TOKENS = 500 - 30
# The example is plain text inside the real prompt's head: sized without any chat markup.
RAW = ChatTemplate("raw", "{{ messages[-1]['content'] }}")


def chain(rng: random.Random, hops: int, letters: int) -> tuple[list[str], str, list[str]]:
    """Distinct variable names, the value the first one is given, and the chain's statements in order."""
    names: list[str] = []
    while len(names) < hops + 1:
        name = "".join(rng.choices(string.ascii_uppercase, k=letters))
        # "VAR" as a three-letter name would read as the keyword itself.
        if name not in names and name != "VAR":
            names.append(name)
    # RULER draws np.random.randint(10000, 99999), whose upper end is exclusive.
    value = str(rng.randrange(10000, 99999))
    links = [f"VAR {new} = VAR {old}" for old, new in itertools.pairwise(names)]
    return names, value, [f"VAR {names[0]} = {value}", *links]


class VariableTracking:
    """vt: ``hops`` assignments after the first, one chain."""

    def __init__(self, variant: Variant, setting: Setting) -> None:
        if variant.params["chains"] != 1:
            raise SpecError(
                f"'{variant.name}' builds one chain, as RULER's suite does, not {variant.params['chains']}"
            )
        self.variant, self.setting = variant, setting
        self.hops: int = variant.params["hops"]
        self.corpus = load_corpus("noise")
        self.noise = tokenize_corpus(self.corpus, setting.tokenizer)

    def identity(self) -> dict[str, Any]:
        return {"corpus": self.corpus.name, "corpus_sha256": self.corpus.sha256}

    def draft(self, target: int, rng: random.Random) -> Draft:
        example = self._example(rng)
        names, value, statements = chain(rng, self.hops, letters=5)
        text = after_example(self._text(value, len(names)), example, "\n\n")
        prompt = self._place(target, text, self.setting.template, value, statements, rng)
        return Draft(prompt, text, value, tuple(names), "variables", tuple(names))

    def _text(self, value: str, count: int) -> PromptText:
        return task_text(self.variant, self.setting, {"num_v": str(count)}, value)

    def _example(self, rng: random.Random) -> str:
        """A complete small instance with its answer, as RULER's few-shot example."""
        names, value, statements = chain(rng, min(10, self.hops), letters=3)
        text, answer = self._text(value, len(names)), " ".join(names)
        # RULER counts the example's answer in its 500 tokens.
        length = EXAMPLE_TOKENS - len(self.setting.tokenizer.encode(" " + answer))
        prompt = self._place(length, text, RAW, value, statements, rng, shrink=True)
        context = prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens]
        return solved_example(text, self.setting.tokenizer.decode(context.tolist()), value, answer)

    def _place(
        self,
        length: int,
        text: PromptText,
        template: ChatTemplate,
        value: str,
        statements: list[str],
        rng: random.Random,
        shrink: bool = False,
    ) -> Prompt:
        """The statements, in chain order, at distinct sentence starts of the noise, drawn uniformly
        as RULER draws distinct positions among its noise lines. ``shrink`` lets a prompt that cannot
        hold them all in ``length`` grow to hold them without noise (the example, for tiny tokens)."""
        tokenizer = self.setting.tokenizer
        builder = PromptBuilder(tokenizer, template, text, self.noise)
        head, tail = builder.frame(value)
        texts = [" " + s for s in statements]
        budget = length - len(head) - len(tail) - sum(len(ids) for ids in tokenizer.encode_batch(texts))
        if shrink and budget < 0:
            length, budget = length - budget, 0
        depths = self._depths(budget, len(texts), rng)
        return builder.place(length, value, list(zip(depths, texts, strict=True)))

    def _depths(self, budget: int, count: int, rng: random.Random) -> list[float]:
        if budget <= 0:  # nothing to spread them over (or too short: place says so)
            return [0.0] * count
        _, starts = self.noise.window(budget)
        slots = [0, *starts.tolist()]
        picks = rng.sample(slots, count) if len(slots) >= count else rng.choices(slots, k=count)
        return [slot / budget for slot in sorted(picks)]
