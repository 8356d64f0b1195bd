"""RULER's own sizing of a haystack (``--fill ruler``): whole steps of a family's units (noise or
needle lines, essay words, list words, coded words, documents), the most that fit; the prompts land
below the length, as RULER's do.

RULER's generators (``generate_samples`` and kin in ``scripts/data/synthetic/``) search a count of
units: starting at one step (fwe: at a sixth of the length), they build a prompt at each count, add
its tokens, the answer as they append it and the tokens to generate, and step back from the first
count that overflows the length. Each sample then starts at that count and drops one step while its
prompt (without the answer) and the tokens to generate overflow. Each family says its steps
(``Family.steps``) and its appended answer (``Family.appended``); this module runs the rule:

- The count is searched on the cell's first sample (sample 0 of that task and length), its draws
  replayed at every count, so each (task, length) has one count however a run is split or resumed.
  RULER draws afresh at each probe; the rule is the same.
- The prompt measured is the final one, template and all: fathom counts lengths on what the model
  reads. The appended answer counts as the tokens it adds after the answer prefix.
- RULER tries the counts one step at a time. A probe's tokens grow with its count (the draws are
  replayed, so a larger count holds a smaller one's units and more), so doubling and then halving
  finds the same count with a logarithmic number of probes: a 128k essay is some 200 steps.
- Where even the smallest count overflows, RULER's loops never end; here that is an error.
- A sample keeps its draws while it drops steps (RULER draws a new sample at each).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping

from fathom.errors import PromptError
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell
from fathom.tasks.ruler.base import Draft, Family, Steps

# A sample's generator, by its index in the cell (replayed: each call starts it afresh).
Generators = Callable[[int], random.Random]


class RulerFill:
    """The counts RULER's rule gives each (task, length) of a run, searched once and kept."""

    def __init__(self, families: Mapping[str, Family], tokenizer: Tokenizer) -> None:
        self.families, self.tokenizer = families, tokenizer
        self._counts: dict[tuple[str, int], int] = {}

    def draft(self, cell: Cell, new_tokens: int, generators: Generators) -> Draft:
        """The cell's sample at the cell's count, one step fewer while it overflows the length; its
        prompt's target stays the length less the tokens to generate, which it falls short of."""
        family, steps = self.families[cell.task], self.steps(cell)
        target = cell.length - new_tokens
        count = self.count(cell, new_tokens, generators)
        while True:
            draft = family.draft(target, generators(cell.sample), count)
            if len(draft.prompt.ids) <= target:
                prompt = dataclasses.replace(draft.prompt, target_tokens=target, fills_target=False)
                return dataclasses.replace(draft, prompt=prompt)
            count -= steps.step
            if count < steps.least:
                raise PromptError(
                    f"sample {cell.sample} of '{cell.task}' overflows length {cell.length} (with its "
                    f"{new_tokens} tokens to generate) even at {steps.least} {steps.unit}, the fewest "
                    "RULER's fill takes; use a longer length, or --fill exact"
                )

    def count(self, cell: Cell, new_tokens: int, generators: Generators) -> int:
        """The count RULER's search keeps for the cell's task and length, from its first sample."""
        key = (cell.task, cell.length)
        if key not in self._counts:
            self._counts[key] = self._search(cell, new_tokens, generators)
        return self._counts[key]

    def steps(self, cell: Cell) -> Steps:
        steps = self.families[cell.task].steps(cell.length)
        if steps.step < 1 or steps.first < 1:
            raise PromptError(
                f"length {cell.length} is too short for RULER's fill of '{cell.task}': it counts its "
                f"{steps.unit} in shares of the length, which round to none here"
            )
        return steps

    def measure(self, cell: Cell, new_tokens: int, generators: Generators, count: int) -> int:
        """What RULER's search compares with the length: the first sample's prompt at ``count``,
        the answer it appends and the tokens to generate."""
        family = self.families[cell.task]
        draft = family.draft(cell.length - new_tokens, generators(0), count)
        return len(draft.prompt.ids) + self._answer_tokens(draft, family.appended(draft)) + new_tokens

    def _search(self, cell: Cell, new_tokens: int, generators: Generators) -> int:
        steps = self.steps(cell)

        def counted(k: int) -> int:
            count = steps.first + k * steps.step
            return count if steps.most is None else min(count, steps.most)

        def fits(k: int) -> bool:
            return self.measure(cell, new_tokens, generators, counted(k)) <= cell.length

        if not fits(0):  # fwe's search may step back below its start; the others' start is one step
            k = -1
            while counted(k) >= steps.least:
                if fits(k):
                    return counted(k)
                k -= 1
            least = self.measure(cell, new_tokens, generators, steps.least)
            raise PromptError(
                f"length {cell.length} is too short for RULER's fill of '{cell.task}': its first sample "
                f"with {steps.least} {steps.unit}, the fewest RULER's search takes, needs {least} tokens "
                f"(its answer and {new_tokens} tokens to generate included); use a longer length, or "
                "--fill exact"
            )
        low, high = 0, 1  # fits(low); doubled until high does not fit, or the units run out
        while fits(high):
            if counted(high) == counted(low):  # capped at ``most``: every unit there is
                return counted(low)
            low, high = high, 2 * high
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        return counted(low)

    def _answer_tokens(self, draft: Draft, appended: str) -> int:
        """The tokens ``appended`` adds after the answer prefix, which ends every prompt."""
        if not appended:
            return 0
        prefix = draft.text.answer_prefix
        encode = self.tokenizer.encode
        return len(encode(prefix + appended)) - len(encode(prefix))
