"""What a simulated model reads in its prompt (``fathom.backends.sim``): the readers that find the
facts an answer is made of, each a way a model reads or shortcuts, and what it says from them.

A reader takes the haystack as text, the request (its keys, look-alike patterns and question) and
its archetype's reading settings, and gives the facts it found: each a sentence or line, its
relative depth and the index of the key it answers. ``spoken`` turns the facts kept into the
answer; ``held`` keeps what a reader of a few slots of memory holds.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fathom.backends.base import Request
from fathom.backends.reasoning import DEFAULT_TAGS
from fathom.prompts import babi_story, conversation, list_ops, log_records
from fathom.prompts.latent import content_words
from fathom.prompts.line_stream import lines_in
from fathom.prompts.odd_names import odd_name_answer
from fathom.prompts.tokenizers import Tokenizer

NOT_FOUND = "I could not find the answer in the document."
SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")


Facts = list[tuple[str, float, int]]  # (sentence, relative depth, index of the key it answers)
Reader = Callable[[str, Request, dict[str, Any]], Facts]


def read_keys(context: str, request: Request, _settings: dict[str, Any]) -> Facts:
    """A reader that reads: every sentence holding the evidence of a key the question asks about."""
    return find_facts(context, tuple(key for key in request.query_keys if key))


def match_pattern(context: str, request: Request, settings: dict[str, Any]) -> Facts:
    """A pattern-matcher: the first or the last sentence holding the wording that look-alikes
    share with the evidence (``patterns``), taken for the answer whatever its key. Where a sample
    has no look-alikes (no patterns) it reads the keys, so a plain sweep cannot tell it apart."""
    cues = tuple(p for p in request.patterns if p) or tuple(k for k in request.query_keys if k)
    matches = sorted(find_facts(context, cues), key=lambda fact: fact[1])
    if not matches:
        return []
    sentence, depth, _ = matches[-1] if settings["pick"] == "last" else matches[0]
    return [(sentence, depth, 0)]


def match_words(context: str, request: Request, settings: dict[str, Any]) -> Facts:
    """A literal reader: the sentence that shares the most content words with the question, if
    it shares at least ``least``. It finds any needle whose question repeats its words, and none
    whose question asks for what the needle implies without saying it (low-overlap needles)."""
    asked = content_words(request.question)
    best: tuple[int, str, float] | None = None
    for sentence, depth in sentences(context):
        shared = len(asked & sentence_words(sentence))
        if shared >= settings["least"] and (best is None or shared > best[0]):
            best = (shared, sentence, depth)
    return [] if best is None else [(best[1], best[2], 0)]


def read_lines(context: str, request: Request, _settings: dict[str, Any]) -> Facts:
    """A state or story question's reader: every line of code on the list asked about
    (``prompts/list_ops.py``), or every story sentence (``prompts/babi_story.py``), in order and
    each one (an ``items.pop()`` twice is two lines), as one key's evidence."""
    if list_ops.asked(request.question) is None:
        return [(line, depth, 0) for line, depth in lines_in(context) if babi_story.parse(line) is not None]
    return [
        (line, depth, 0)
        for line, depth in lines_in(context)
        if (op := list_ops.parse(line)) is not None and op.target == list_ops.TRACKED
    ]


def read_turns(context: str, request: Request, _settings: dict[str, Any]) -> Facts:
    """A multi-round co-reference question's reader: the answer of every round that asks for the
    piece the question names (``prompts/conversation.py``), in order, as one key's evidence."""
    asked = conversation.asked(request.question)
    if asked is None:
        return []
    return [
        (turn.answer, turn.depth, 0)
        for turn in conversation.turns_in(context)
        if (turn.form, turn.topic) == (asked.form, asked.topic)
    ]


def spoken(question: str, kept: Sequence[str]) -> str:
    """The answer: the sentences found, or, to a state question, the list they leave (its length,
    its sum), or, to a story's, the world they leave, replayed from the lines found, or, to a
    listing question, the ids of the records found, one a line, or, to a multi-round co-reference
    question, the prefix and the answer it counts to (the last it holds, where it holds fewer);
    NOT_FOUND where none was, or where the story found does not say."""
    if not kept:
        return NOT_FOUND
    if (kind := list_ops.asked(question)) is not None:
        return list_ops.answer(kind, list_ops.replay(kept).get(list_ops.TRACKED, []))
    if (story := babi_story.asked(question)) is not None:
        return babi_story.replay(kept).answer(*story) or NOT_FOUND
    if (piece := conversation.asked(question)) is not None:
        return piece.prefix + kept[min(piece.number, len(kept)) - 1]
    if log_records.asked(question) is not None:
        return log_records.listed([ident for line in kept for ident in log_records.ids_in(line)[:1]])
    return " ".join(kept)


def held(facts: Facts, keys: Sequence[str], slots: int) -> Facts:
    """What a reader with ``slots`` slots of memory holds at the end of the context: the facts that
    name the most of the question's keys, the last of them in reading order (a fact read replaces a
    held one that names no more keys). One slot answers a question of one fact (where someone went
    last) and misses any that takes two: a list's earlier operations, where the person holding a
    thing went, a second value or key asked at once."""

    def rank(fact: tuple[str, float, int]) -> tuple[int, float]:
        return sum(1 for key in keys if key and key in fact[0]), fact[1]

    return sorted(facts, key=rank)[-slots:]


def odd_name(context: str, _request: Request, _settings: dict[str, Any]) -> Facts:
    """The odd-name reader (``prompts/odd_names.py``): a name the context holds once, whatever the
    question asks; on low-overlap needles, the knowledge-free baseline their scores must beat."""
    name = odd_name_answer(context)
    return [] if name is None else [(name, context.find(name) / max(len(context), 1), 0)]


# A haystack's sentences recur from prompt to prompt of a sweep: each one's words are found once.
sentence_words = functools.lru_cache(maxsize=1 << 16)(content_words)


def sentences(context: str) -> Iterator[tuple[str, float]]:
    """The context's sentences with their relative depths."""
    start = 0
    for match in SENTENCE_END.finditer(context):
        yield context[start : match.end()].strip(), start / max(len(context), 1)
        start = match.end()
    if context[start:].strip():
        yield context[start:].strip(), start / max(len(context), 1)


def find_facts(context: str, keys: Sequence[str]) -> Facts:
    """Every distinct sentence (or line, where it ends first) of the context that holds a key, with
    its relative depth and the index of the first key it holds."""
    facts: dict[str, tuple[float, int]] = {}
    for index, key in enumerate(keys):
        at = context.find(key)
        while at >= 0:
            begin = max(context.rfind(". ", 0, at) + 2, context.rfind("\n", 0, at) + 1)
            end = context.find(".", at + len(key))
            end = len(context) if end < 0 else end + 1
            # A full stop inside a number or identifier does not end the sentence.
            while end < len(context) and not context[end].isspace():
                next_stop = context.find(".", end)
                end = len(context) if next_stop < 0 else next_stop + 1
            # Nor does a line end past its own: a line of code or a field holds no full stop.
            line_end = context.find("\n", at + len(key))
            end = end if line_end < 0 else min(end, line_end)
            facts.setdefault(context[begin:end].strip(), (at / max(len(context), 1), index))
            at = context.find(key, at + len(key))
    return [(sentence, depth, index) for sentence, (depth, index) in facts.items()]


# What sim:thinker says to itself before its answer, over and over until it has thought its fill.
MUSING = " Let me check the document once more before I answer."


def thought(question: str, kept: Sequence[str], tokens: int, tokenizer: Tokenizer) -> str:
    """A think block of ``tokens`` tokens (its tags apart): the question, what was found (so that a
    grader that read the reasoning would credit it), then musing; the block's text is cut to its
    tokens, and closed."""
    opening = f"The question is: {question.strip()} I found: {' '.join(kept) or 'nothing'}."
    unit = len(tokenizer.encode(MUSING)) or 1
    filler = opening + MUSING * (tokens // unit + 1)
    opened, closed = DEFAULT_TAGS
    return f"{opened}{tokenizer.decode(tokenizer.encode(filler)[:tokens])}{closed}"
