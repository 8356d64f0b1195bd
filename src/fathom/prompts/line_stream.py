"""Lines through a haystack: the placement that state tracking and the bAbI-style stories share.

A task that hides a stream of short lines (lines of code, story sentences) puts each on a line of its
own, in order, at depths drawn uniformly and sorted, each snapped to the nearest unit boundary of the
haystack by the prompt builder (``PromptBuilder.place``), which makes the prompt exactly its length
in the model's tokens and records where every line landed. A reader (``sim``) finds them again line
by line (``lines_in``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence

from fathom.prompts.builder import Prompt, PromptBuilder
from fathom.prompts.haystack import Corpus

# A line as it stands in the haystack, on a line of its own. Between sentences it opens with a space
# and a newline: re-encoded as text, ". \n" splits where the ids do (".\n" would be one token in a
# BPE of cl100k's kind, and each line would cost one token less as text than as ids). In a haystack
# of lines it starts at a line's start, and ends its own.
BETWEEN_SENTENCES, BETWEEN_LINES = " \n{}\n", "{}\n"
_LINE = re.compile(r"[^\n]+")


def line_form(corpus: Corpus) -> str:
    """How a line stands in this corpus's haystack: between its sentences, or among its lines."""
    return BETWEEN_SENTENCES if corpus.units == "sentence" else BETWEEN_LINES


def place_lines(
    builder: PromptBuilder, rng: random.Random, length: int, question: str, lines: Sequence[str], form: str
) -> Prompt:
    """A prompt of exactly ``length`` tokens with ``lines``, in order, at depths drawn from ``rng``
    (uniform, sorted); its ``needles`` are the lines' placements, in the order given."""
    depths = [rng.random() for _ in lines]
    depths.sort()
    return builder.place(length, question, list(zip(depths, map(form.format, lines), strict=True)))


def lines_in(context: str) -> Iterator[tuple[str, float]]:
    """Each line of ``context``, stripped, with the share of the context before it."""
    size = max(len(context), 1)
    return ((line.group().strip(), line.start() / size) for line in _LINE.finditer(context))
