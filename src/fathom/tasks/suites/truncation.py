"""The suites' length protocol: a prompt longer than the model's maximum length loses its middle.

LongBench's pred.py tokenises the filled prompt and, when it has more than ``max_length`` tokens, keeps
its first ``int(max_length / 2)`` and its last as many (the instructions and the question sit at the
two ends); InfiniteBench's open-model scripts keep ``max_length // 2`` at each end too; LongBench v2's
keeps ``max_len // 2`` at the start and ``-max_len // 2`` from the end, which is one more for an odd
length. The chat template is added after the cut, as the suites add it.

fathom applies the rule to the filled prompt's tokens (its parts encoded in turn, without special
tokens), and records it: the tokens before the cut, and that there was one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fathom.prompts.haystack.index import Ids
from fathom.tasks.suites.catalogue import LONGBENCH_V2


@dataclass(frozen=True)
class Kept:
    """A prompt's parts (text before the document, the document, text after it) after the cut."""

    before: Ids
    context: Ids
    after: Ids

    @property
    def tokens(self) -> int:
        return len(self.before) + len(self.context) + len(self.after)


def kept_ends(tokens: int, limit: int, suite: str) -> tuple[int, int]:
    """How many tokens the suite keeps from the start and from the end of a prompt of ``tokens``
    tokens cut to ``limit`` (the whole prompt, (tokens, 0), when it fits)."""
    if tokens <= limit:
        return tokens, 0
    head = limit // 2
    return head, (limit - head if suite == LONGBENCH_V2 else head)


def cut_middle(before: Ids, context: Ids, after: Ids, limit: int, suite: str) -> Kept:
    """The three parts of a prompt whose middle the suite cuts to ``limit`` tokens. The cut usually
    falls inside the document; where ``limit`` is shorter than an end's text, it eats into that too."""
    parts = (before, context, after)
    sizes = [len(part) for part in parts]
    total = sum(sizes)
    head, tail = kept_ends(total, limit, suite)
    if tail == 0 and head == total:
        return Kept(before, context, after)
    kept = []
    start = 0
    for part, size in zip(parts, sizes, strict=True):
        # The part's positions start..start+size-1 survive where they are < head or >= total - tail.
        front = part[: max(0, min(size, head - start))]
        back = part[max(0, total - tail - start) :]  # empty for a part wholly before the tail
        kept.append(np.concatenate([front, back]) if len(back) else front)
        start += size
    return Kept(kept[0], kept[1], kept[2])
