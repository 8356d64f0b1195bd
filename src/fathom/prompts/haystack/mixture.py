"""Mixtures of corpora: ``mix:code=0.3,prose=0.7``, interleaved in each tokenizer's own tokens.

A mixture is made of passages: a passage is the next stretch of one component of at least
PASSAGE_TOKENS tokens, ending at that component's first unit boundary past them (a sentence for
prose, a line for code), or at the component's end. Each component is read in its own order, so a
file or paragraph that one passage leaves unfinished goes on in that component's next passage.
Passages are scheduled as weighted fair queueing schedules packets: next comes the component whose
tokens, this passage included, would be smallest against its weight. Every component's share of
the tokens in any window then stays within about two passages of its weight, in tokens rather
than characters (code has fewer characters per token than prose). The mixture ends when one
component runs out, so no component repeats inside it; the whole wraps like any corpus.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from fathom.errors import CorpusError
from fathom.prompts.haystack.files import Units
from fathom.prompts.tokenizers import Tokenizer

# Bump when the passages or their order change: the same weights then make another haystack.
MIXTURE_VERSION = 1
PASSAGE_TOKENS = 128
PREFIX = "mix:"
_USAGE = "write it as mix:NAME=WEIGHT,NAME=WEIGHT (e.g. mix:code=0.3,prose=0.7)"

Stream = tuple[NDArray[np.int32], NDArray[np.int64], Units]  # a component's ids, unit starts, units


def parse(spec: str, known: Iterable[str]) -> list[tuple[str, float]]:
    """The (corpus, weight) pairs of ``mix:...``, every one checked before any corpus is read."""
    names = list(known)
    pairs: list[tuple[str, float]] = []
    for item in spec.removeprefix(PREFIX).split(","):
        name, sign, number = item.strip().rpartition("=")
        name = name.strip()
        if not sign or not name:
            raise CorpusError(f"mixture '{spec}': '{item.strip()}' is not NAME=WEIGHT; {_USAGE}")
        try:
            weight = float(number)
        except ValueError:
            raise CorpusError(
                f"mixture '{spec}': the weight '{number}' of {name} is not a number; {_USAGE}"
            ) from None
        if not math.isfinite(weight) or weight <= 0:
            raise CorpusError(
                f"mixture '{spec}': the weight of {name} is {number}; every weight must be above 0"
            )
        if name not in names and not name.startswith("dir:"):
            raise CorpusError(
                f"mixture '{spec}': unknown corpus '{name}': use {', '.join(names)} or dir:PATH"
            )
        if name in (other for other, _ in pairs):
            raise CorpusError(f"mixture '{spec}' names {name} twice: give each corpus one weight")
        pairs.append((name, weight))
    if len(pairs) < 2:
        only = pairs[0][0]
        raise CorpusError(
            f"mixture '{spec}' names one corpus: a mixture needs two or more (or use --corpus {only})"
        )
    return pairs


def canonical_name(pairs: Sequence[tuple[str, float]]) -> str:
    return PREFIX + ",".join(f"{name}={weight:g}" for name, weight in pairs)


def shares(weights: Sequence[float]) -> list[float]:
    """Weights as shares of 1, rounded so that weights that are multiples of each other (7 and 3,
    0.7 and 0.3) give the very same shares, and so the same interleaving and identity."""
    total = sum(weights)
    return [round(weight / total, 12) for weight in weights]


def sha256(components: Sequence[tuple[str, str, float]]) -> str:
    """The mixture's identity: its version and passage length, and each component's name, content
    hash and share."""
    share = shares([weight for _, _, weight in components])
    parts = [[name, digest, s] for (name, digest, _), s in zip(components, share, strict=True)]
    data = {"mixture": MIXTURE_VERSION, "passage_tokens": PASSAGE_TOKENS, "components": parts}
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def line_break(tokenizer: Tokenizer) -> NDArray[np.int32]:
    """What goes between a passage of sentences and a passage of lines, so that the lines start on
    a line of their own: the first of " \\n" and "\\n" that the tokenizer keeps apart from a full
    stop before it and a word after it, so a text backend re-encodes the prompt to the same ids
    (a BPE of cl100k's kind reads ".\\n" as one token, one of GPT-2's reads " \\n" as two)."""
    encode = tokenizer.encode

    def apart(candidate: str) -> bool:
        return all(
            encode(f".{candidate}{word}") == encode(".") + encode(candidate) + encode(word)
            for word in ("def", "#")
        )

    return np.asarray(encode(next((c for c in (" \n", "\n") if apart(c)), " \n")), dtype=np.int32)


def interleave(
    streams: Sequence[Stream], weights: Sequence[float], separator: NDArray[np.int32]
) -> tuple[NDArray[np.int32], NDArray[np.int64], NDArray[np.uint8]]:
    """The mixture's ids, its unit starts, and each token's component (an index into streams)."""
    order = _schedule([_cuts(ids, starts) for ids, starts, _ in streams], shares(weights))
    pieces, starts, labels, offset = [], [], [], 0
    for k, (which, begin, end) in enumerate(order):
        ids, inner, units = streams[which]
        pieces.append(ids[begin:end])
        size = end - begin
        # Boundaries never lie inside the separator: it belongs to the sentences before it.
        if units == "sentence" and streams[order[(k + 1) % len(order)][0]][2] == "line":
            pieces.append(separator)
            size += len(separator)
        lo, hi = np.searchsorted(inner, [begin, end])
        starts.append(inner[lo:hi] - begin + offset)
        labels.append(np.full(size, which, dtype=np.uint8))
        offset += size
    return np.concatenate(pieces), np.concatenate(starts), np.concatenate(labels)


def _cuts(ids: NDArray[np.int32], starts: NDArray[np.int64]) -> list[int]:
    """Where a component's passages start, and its end last."""
    cuts = [0]
    while cuts[-1] < len(ids):
        i = int(np.searchsorted(starts, cuts[-1] + PASSAGE_TOKENS))
        cuts.append(int(starts[i]) if i < len(starts) else len(ids))
    return cuts


def _schedule(cuts: Sequence[list[int]], weights: Sequence[float]) -> list[tuple[int, int, int]]:
    """(component, begin, end) of each passage in mixture order, until a component runs out."""
    taken = [0] * len(cuts)
    nexts = [1] * len(cuts)
    # Each component waits in the queue with the finish time of its next passage.
    queue = [(c[1] / weight, which) for which, (c, weight) in enumerate(zip(cuts, weights, strict=True))]
    heapq.heapify(queue)
    order: list[tuple[int, int, int]] = []
    while True:
        _, which = heapq.heappop(queue)
        mine, k = cuts[which], nexts[which]
        if k >= len(mine):
            return order
        order.append((which, mine[k - 1], mine[k]))
        taken[which] += mine[k] - mine[k - 1]
        nexts[which] = k + 1
        # A component that has run out waits as if for one more passage: the mixture ends when
        # that passage would be due, not while the others go on alone and skew the shares.
        upcoming = mine[k + 1] - mine[k] if k + 1 < len(mine) else PASSAGE_TOKENS
        heapq.heappush(queue, ((taken[which] + upcoming) / weights[which], which))
