"""The RULER suite as a fathom task: one or more variants x lengths x samples.

RULER draws needle depths per sample, so its cells carry no depth; where each needle, chain
statement or gold document landed is recorded per sample, and every task can be binned by depth
but cwe and fwe, whose evidence is every occurrence of the answers, all through the context.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from collections.abc import Iterator
from typing import Any

from fathom.errors import SpecError
from fathom.prompts import TooShort, too_short
from fathom.prompts.needles import needle_rng
from fathom.prompts.spaces import SPACES, Split
from fathom.prompts.templates import resolve_template
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.ruler.base import Family, FamilyFactory, Setting
from fathom.tasks.ruler.catalogue import ALL_VARIANTS, FAMILIES, RULER_VERSION, SUITE, Variant
from fathom.tasks.ruler.sizing import RulerFill


def _families() -> dict[str, FamilyFactory]:
    from fathom.tasks.ruler.niah import NeedleFamily
    from fathom.tasks.ruler.qa import QuestionAnswering
    from fathom.tasks.ruler.vt import VariableTracking
    from fathom.tasks.ruler.words import CommonWords, FrequentWords

    return {
        "niah": NeedleFamily,
        "vt": VariableTracking,
        "cwe": CommonWords,
        "fwe": FrequentWords,
        "qa": QuestionAnswering,
    }


def variants_for(task: str) -> list[Variant]:
    """``ruler`` is the thirteen; a variant's name is that task alone."""
    if task == "ruler":
        return [ALL_VARIANTS[name] for name in SUITE]
    return [ALL_VARIANTS[task]]


class RulerTask:
    def __init__(self, spec: RunSpec, tokenizer: Tokenizer, split: Split = "eval") -> None:
        _check(spec)
        self.spec = spec
        # Training's samples (``fathom export``) also draw from random streams of their own.
        self.stream = SPACES[split].stream
        self.name = spec.task
        self.variants = {v.name: v for v in variants_for(spec.task)}
        setting = Setting(
            tokenizer, resolve_template(spec.template, tokenizer), spec.system_prompt, spec.corpus, split
        )
        self.template = setting.template
        factories = _families()
        self.families: dict[str, Family] = {}
        for variant in self.variants.values():
            if variant.family not in factories:
                raise SpecError(f"RULER task '{variant.name}' is not available yet")
            self.families[variant.name] = factories[variant.family](variant, setting)
        self.ruler_fill = RulerFill(self.families, tokenizer) if spec.fill == "ruler" else None

    def cells(self) -> Iterator[Cell]:
        # Length-major: a backend loads each length's KV budget once, and every task runs at each length.
        return (
            Cell(name, length, None, index)
            for length in self.spec.lengths
            for name in self.variants
            for index in range(self.spec.samples)
        )

    def prepare(self, cell: Cell) -> Sample:
        variant = self.variants[cell.task]
        family = variant.text
        new_tokens = self.spec.max_new_tokens or family.tokens_to_generate
        # RULER's length counts the tokens to generate: the prompt gets the rest.
        try:
            if self.ruler_fill is not None:
                draft = self.ruler_fill.draft(cell, new_tokens, functools.partial(self._rng, cell))
            else:
                draft = self.families[cell.task].draft(cell.length - new_tokens, self._rng(cell, cell.sample))
        except TooShort as short:  # said in the user's terms: the length they asked for
            what = f"{short.what}, and {new_tokens} tokens to generate"
            raise too_short(cell.length, short.overhead + new_tokens, what) from None
        return Sample(
            cell,
            draft.prompt,
            draft.text,
            draft.question,
            draft.answers,
            draft.kind,
            draft.query_keys,
            self.spec.scoring or family.metric,
            new_tokens,
            look_alikes=draft.look_alikes,
        )

    def _rng(self, cell: Cell, sample: int) -> random.Random:
        """The generator of the cell's task and length's sample ``sample``, started afresh."""
        return needle_rng(self.spec.seed, *self.stream, cell.task, cell.length, sample)

    def identity(self) -> dict[str, Any]:
        texts = json.dumps(
            {name: repr(FAMILIES[v.family]) for name, v in self.variants.items()}, sort_keys=True
        )
        return {
            "task": self.name,
            "version": RULER_VERSION,
            "variants": {name: v.params for name, v in self.variants.items()},
            "data": {name: family.identity() for name, family in self.families.items()},
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "prompt_text_sha256": hashlib.sha256(texts.encode()).hexdigest(),
            # Only where it is RULER's: exact fill's identity is what it was before --fill existed.
            **({"fill": self.spec.fill} if self.spec.fill != "exact" else {}),
        }


def _check(spec: RunSpec) -> None:
    # The options a RULER task takes are its registry entry's, checked there (no --depths, --needle).
    if spec.task != "ruler" and spec.task not in ALL_VARIANTS:
        raise SpecError(f"unknown RULER task '{spec.task}'")
