"""RULER's variable tracking (vt): a chain of assignments ("VAR BBBBB = VAR AAAAA") hidden in noise;
the model names every variable that ends up holding the chain's value. As in RULER, one solved
instance of the task, with three-letter names and a short haystack, comes before the real one.

Laid out as RULER writes it (``" ".join`` of its list of noise lines and statements): the noise
paragraph on each line, every line after the first opening with the joining space; each statement
at the start of a line, before the noise, a hop with its trailing space ("VAR B = VAR A  The grass
is green."); a blank line before the question. The example opens the prompt after a space, holds
as many noise lines as RULER's rule gives it (five at a time while it fits 500 tokens less 30 to
generate: about ten), ends with its answer after two spaces, and four newlines part it from the
real task.

Where fathom differs from RULER (docs/ruler.md has them all):

- The length: where whole lines leave tokens of the budget, they open the context as a noise
  line's tail (``Lines.lead``); RULER takes fewer lines and lands below the length, as
  ``--fill ruler`` does (ten lines at a time: ``sizing.py``).
- The example: each sample draws its own; RULER draws one per run and re-letters its names per
  sample. Under a chat template RULER also collapses the example's instruction to single spaces;
  here it reads as under ``base`` whatever the template.
- A three-letter name that spells ``VAR`` is drawn again.
"""

from __future__ import annotations

import itertools
import random
import string
from typing import Any

import numpy as np

from fathom.errors import SpecError
from fathom.prompts import PromptText, assemble, frame, too_short
from fathom.prompts.haystack import load_corpus
from fathom.prompts.templates import ChatTemplate
from fathom.tasks.ruler.base import (
    Draft,
    Lines,
    Setting,
    Steps,
    after_example,
    line_slots,
    lines_close_the_context,
    solved_example,
    task_text,
)
from fathom.tasks.ruler.catalogue import Variant
from fathom.tasks.ruler.splits import CHAINS

# RULER builds its example at max_seq_length 500, of which 30 are the tokens to generate, growing
# its noise five lines at a time.
EXAMPLE_LENGTH, EXAMPLE_NEW_TOKENS, EXAMPLE_STEP = 500, 30, 5
# And sizes the task's own noise ten lines at a time (--fill ruler).
STEP = 10
# The example is plain text inside the real prompt's head: sized without any chat markup.
RAW = ChatTemplate("raw", "{{ messages[-1]['content'] }}")
# What RULER writes around the example: a space before it, and its own "\n\n" and two more after.
EXAMPLE_OPENING, EXAMPLE_CLOSING = " ", "\n\n\n\n"


def chain(
    rng: random.Random, hops: int, letters: int, values: tuple[int, int] = CHAINS["eval"].values
) -> tuple[list[str], str, list[str]]:
    """Distinct variable names of ``letters`` letters, the value the first one is given (drawn from
    ``values``, the upper end excluded), and the chain's statements in order."""
    names: list[str] = []
    while len(names) < hops + 1:
        name = "".join(rng.choices(string.ascii_uppercase, k=letters))
        # "VAR" as a three-letter name would read as the keyword itself.
        if name not in names and name != "VAR":
            names.append(name)
    # RULER draws np.random.randint(10000, 99999), whose upper end is exclusive.
    value = str(rng.randrange(*values))
    links = [f"VAR {new} = VAR {old}" for old, new in itertools.pairwise(names)]
    return names, value, [f"VAR {names[0]} = {value}", *links]


def written(statements: list[str]) -> list[str]:
    """The statements as RULER writes them: every hop with a trailing space."""
    return [statements[0], *(statement + " " for statement in statements[1:])]


def unit(element: str, first: bool, last: bool) -> str:
    """An element of RULER's noise list as it stands in the context: after the joining space unless
    it opens the context; the last closed by the newline before the question."""
    return ("" if first else " ") + element + ("\n" if last else "")


class VariableTracking:
    """vt: ``hops`` assignments after the first, one chain."""

    def __init__(self, variant: Variant, setting: Setting) -> None:
        if variant.params["chains"] != 1:
            raise SpecError(
                f"'{variant.name}' builds one chain, as RULER's suite does, not {variant.params['chains']}"
            )
        self.variant, self.setting = variant, setting
        self.hops: int = variant.params["hops"]
        self.space = CHAINS[setting.split]  # evaluation's names and values, or training's
        self.corpus = load_corpus("noise")
        # RULER's vt noise is the paragraph with its newline: a line of its own.
        self.lines = Lines(setting.tokenizer, self.corpus.text + "\n", unit)

    def identity(self) -> dict[str, Any]:
        return {"corpus": self.corpus.name, "corpus_sha256": self.corpus.sha256}

    def steps(self, length: int) -> Steps:
        return Steps(STEP, STEP, "noise lines")

    def appended(self, draft: Draft) -> str:
        # RULER's ``input_text + f' {answer}'``: the list as Python writes it.
        return f" {list(draft.answers)}"

    def draft(self, target: int, rng: random.Random, count: int | None = None) -> Draft:
        example = self._example(rng)
        names, value, statements = chain(rng, self.hops, self.space.letters, self.space.values)
        text = after_example(self._text(value, len(names)), EXAMPLE_OPENING + example, EXAMPLE_CLOSING)
        head, tail = frame(self.setting.tokenizer, self.setting.template, text, value)
        texts = written(statements)
        lead = 0
        if count is None:
            count, lead = self.lines.fit(target - len(head) - len(tail), texts)
            if lead < 0:
                raise too_short(target, target - lead, "template, example and chain")
        parts = self.lines.parts(count, texts, line_slots(count, len(texts), rng), lead)
        prompt = assemble(head, parts, tail, target)
        return Draft(prompt, text, value, tuple(names), "variables", tuple(names))

    def _text(self, value: str, count: int) -> PromptText:
        text = task_text(self.variant, self.setting, {"num_v": str(count)}, value)
        return lines_close_the_context(text)

    def _example(self, rng: random.Random) -> str:
        """A complete small instance with its answer, as RULER's few-shot example."""
        hops, letters = min(10, self.hops), self.space.example_letters
        names, value, statements = chain(rng, hops, letters, self.space.values)
        text, texts = self._text(value, len(names)), written(statements)
        count = self._example_lines(text, value, texts, names)
        parts = self.lines.parts(count, texts, line_slots(count, len(texts), rng))
        context = self.setting.tokenizer.decode(np.concatenate([ids for ids, _ in parts]).tolist())
        # RULER writes the answer after a space of its own: two follow the prefix's "they are:".
        return solved_example(text, context, value, " " + " ".join(names))

    def _example_lines(self, text: PromptText, value: str, statements: list[str], names: list[str]) -> int:
        """RULER's noise lines for its example: five at a time, the most with which the example and
        its answer (written as Python writes a list, as RULER counts it) leave the tokens to
        generate free of 500; none where even five do not (the chain alone then)."""
        head, tail = frame(self.setting.tokenizer, RAW, text, value)
        fixed = len(head) + len(tail) + len(self.setting.tokenizer.encode(f" {names}"))
        room = EXAMPLE_LENGTH - EXAMPLE_NEW_TOKENS - fixed
        count = 0
        while self.lines.size(count + EXAMPLE_STEP, statements) <= room:
            count += EXAMPLE_STEP
        return count
