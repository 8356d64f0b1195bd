"""Simulated models: long-context archetypes and readers, for runs without a model.

A simulated model really reads its prompt. It looks in the haystack for every sentence that holds
one of the question's keys, and answers with those sentences as it finds them there. Whether it
finds them is drawn from the archetype's profile p(length, depth), once per key, seeded by the
prompt. A prompt builder that drops or mangles the needle therefore fails even on ``sim:perfect``.
How each archetype reads (the facts it finds, holds and answers with) is ``sim_readers``'.

Its log-probabilities are a known profile, for checking the perplexity arithmetic end to end: every
token costs ``nll`` nats, plus one nat per doubling of its position past the window for archetypes
that have one (their extrapolation fails); the others keep a flat perplexity however their
retrieval fares, which is the perplexity trap in its purest form. A gold answer's teacher-forced
probability is the profile's p(length, depth) of its needle.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fathom.backends.base import InputKind, Request, ScoreRequest, TokenScores, split_options
from fathom.backends.reasoning import split_completion
from fathom.backends.settings import Setting, choice, count, number, parse_settings, whole
from fathom.backends.sim_readers import (
    Reader,
    held,
    match_pattern,
    match_words,
    odd_name,
    read_keys,
    read_lines,
    read_turns,
    spoken,
    thought,
)
from fathom.errors import SpecError
from fathom.prompts import babi_story, conversation, list_ops
from fathom.prompts.latent import LatentItem, load_items
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Completion

DEFAULT_NLL = 2.5  # nats per token: a perplexity of about 12, like a small model on prose
_LEAST_PROBABILITY = 1e-6  # of an answer the model cannot find: a log-probability must be finite
Profile = Callable[[int, float, dict[str, float]], float]


def _ramp(length: int, window: float) -> float:
    """0 at 1k tokens rising to 1 at the window, on a log scale."""
    return min(1.0, max(0.0, math.log2(length / 1024) / math.log2(window / 1024)))


def _cliff(length: int, depth: float, p: dict[str, float]) -> float:
    return p["accuracy"] if length <= p["window"] else p["floor"]


def _lost_in_the_middle(length: int, depth: float, p: dict[str, float]) -> float:
    # U-shape over depth that deepens with length: edges stay sharp, the middle fades.
    return 1.0 - p["dip"] * 4 * depth * (1 - depth) * _ramp(length, p["window"])


def _pi_decay(length: int, depth: float, p: dict[str, float]) -> float:
    # Past e^700 the chance is below 1e-304, and the power itself would overflow a float.
    if p["slope"] * math.log(length / p["half"]) > 700:
        return 0.0
    return float(1.0 / (1.0 + (length / p["half"]) ** p["slope"]))


def _noisy(length: int, depth: float, p: dict[str, float]) -> float:
    return max(0.0, p["accuracy"] - (p["drop"] if length == p["at"] else 0.0))


def _yarn(length: int, depth: float, p: dict[str, float]) -> float:
    if length <= p["window"]:
        return p["accuracy"]
    return max(0.0, p["accuracy"] - p["slope"] * math.log2(length / p["window"]))


@dataclass(frozen=True)
class Archetype:
    profile: Profile
    settings: dict[str, Setting]  # the profile's parameters, with their defaults
    has_window: bool
    reader: Reader = read_keys
    # How it reads, beside the profile's parameters: these change which sentence it answers with.
    reading: dict[str, Setting] = field(default_factory=dict)
    # The most located facts its answer combines (None: all it finds): ``held``'s slots.
    combines: int | None = None
    # Whether it reads only the prompt's last ``window`` tokens (a reading setting), as a sliding-window
    # or state-space model keeps only what is recent.
    recent: bool = False
    # Whether it thinks before answering (a ``think`` reading setting: the most tokens it thinks).
    thinks: bool = False


def _chance(default: float) -> Setting:
    return number(default, least=0.0, most=1.0)


ARCHETYPES = {
    "perfect": Archetype(lambda _l, _d, _p: 1.0, {}, has_window=False),
    "cliff": Archetype(
        _cliff, {"window": count(8192), "accuracy": _chance(0.98), "floor": _chance(0.02)}, has_window=True
    ),
    # Its ramp rises from 1k tokens to the window, so the window must end past 1k.
    "lost-in-the-middle": Archetype(
        _lost_in_the_middle, {"window": count(131072, least=1025), "dip": _chance(0.7)}, has_window=True
    ),
    # A slope past 64 is a cliff at ``half`` already; a slope of 0 is a coin toss at every length.
    "pi-decay": Archetype(
        _pi_decay, {"half": count(32768), "slope": number(2.0, least=0.0, most=64.0, above=True)}, False
    ),
    # slope: the chance lost per doubling past the window; 1 already loses it all at once.
    "yarn": Archetype(
        _yarn, {"window": count(65536), "accuracy": _chance(0.97), "slope": _chance(0.15)}, has_window=True
    ),
    # A coin per answer: right with chance ``accuracy`` at every length and depth, less ``drop`` at the
    # length ``at`` (0: none). Two seeds of it are one model asked twice, for calibrating the gate;
    # ``drop`` plants a regression of a known size at one length, for measuring its power.
    "noisy": Archetype(
        _noisy,
        {"accuracy": _chance(0.95), "drop": _chance(0.0), "at": count(0, least=0)},
        has_window=False,
    ),
    # Finds every sentence it looks for, at any length; what it looks for is the template's wording,
    # so it answers with a distractor whenever one lies nearer the end (or the start) than the gold.
    "pattern-matcher": Archetype(
        lambda _l, _d, _p: 1.0, {}, False, match_pattern, {"pick": choice("last", "first")}
    ),
    # Answers a name the context holds once (two capitalised words opening a sentence), with no reading
    # of the question: the odd-name shortcut through low-overlap needles.
    "odd-name": Archetype(lambda _l, _d, _p: 1.0, {}, False, odd_name),
    # Finds every sentence that repeats the question's words, at any length, and nothing else.
    "literal": Archetype(lambda _l, _d, _p: 1.0, {}, False, match_words, {"least": whole(2, least=1)}),
    # Finds any fact it looks for, at any length, but holds one alone, the last it read: perfect on
    # one needle, partial where the answer needs several (RULER's multi-value and multi-query needles,
    # --needles K) and wrong where it combines them (state tracking, bAbI's two and three facts).
    "one-fact": Archetype(lambda _l, _d, _p: 1.0, {}, False, combines=1),
    # Reads perfectly, but only the prompt's last ``window`` tokens: a needle near the end is found at
    # any length, one earlier only while the prompt fits the window; perplexity stays flat.
    "recent": Archetype(lambda _l, _d, _p: 1.0, {}, False, reading={"window": count(4096)}, recent=True),
    # Reads perfectly, but thinks first: a think block of a length drawn per sample (between a quarter
    # of ``think`` tokens and all of them) before its answer, all within the request's max_new_tokens
    # (the thinking budget and the answer's): a block the budget cuts leaves it still thinking.
    "thinker": Archetype(lambda _l, _d, _p: 1.0, {}, False, reading={"think": count(256)}, thinks=True),
}
_COMMON = {
    "seed": whole(0),
    # Seconds per request; an hour is past any model's latency (and time.sleep overflows past 9e9).
    "delay": number(0.0, least=0.0, most=3600.0, unit="seconds"),
    "nll": number(DEFAULT_NLL, least=0.0, unit="nats"),
    "input": choice("ids", "text", "chat"),
    # The share of the low-overlap items it knows, each drawn by its anchor and the seed: one it does
    # not know it finds in no context unless the question names its anchor, nor answers closed-book.
    "knows": _chance(1.0),
    # Whether it stops at the request's max_new_tokens, as a real model does ("obey": its answer cut
    # there, finish reason "length"), or says its whole answer whatever the budget (as it always has).
    "budget": choice("ignore", "obey"),
}
DONT_KNOW = "I do not know."


class SimulatedBackend:
    """``sim:ARCHETYPE?param=value&...``; ``seed`` varies the draws, ``input=text`` takes text and
    ``delay`` (seconds per request) stands in for a model's latency."""

    max_prompt_tokens: int | None = None

    def __init__(self, spec: str, tokenizer: Tokenizer) -> None:
        archetype_name, options = split_options(spec)
        if archetype_name not in ARCHETYPES:
            known = ", ".join(f"sim:{name}" for name in ARCHETYPES)
            raise SpecError(f"unknown simulated model 'sim:{archetype_name}': use one of {known}")
        self.archetype = ARCHETYPES[archetype_name]
        self.name = f"sim:{archetype_name}"
        self.tokenizer = tokenizer
        archetype = self.archetype
        values = parse_settings(self.name, {**archetype.settings, **archetype.reading, **_COMMON}, options)
        self.params: dict[str, float] = {key: values[key] for key in archetype.settings}
        self.reading: dict[str, Any] = {key: values[key] for key in archetype.reading}
        self.seed: int = values["seed"]
        self.delay: float = values["delay"]
        self.nll: float = values["nll"]
        self.input: InputKind = values["input"]
        self.knows: float = values["knows"]
        self.budget: str = values["budget"]
        self.exact_lengths = True
        has_window = self.archetype.has_window
        self.trained_window = int(self.params["window"]) if has_window else None

    def settings(self) -> dict[str, Any]:
        # delay changes no answer, so it stays out of the run's identity.
        reading = {"reading": self.reading} if self.reading else {}
        # knows is left out at 1 (every item), as every simulated model knew them before it existed.
        knowing = {"knows": self.knows} if self.knows < 1 else {}
        # budget is left out where it is ignored, as every simulated model ignored it before it existed.
        obeying = {"budget": self.budget} if self.budget == "obey" else {}
        return {
            "params": self.params,
            "seed": self.seed,
            "input": self.input,
            "nll": self.nll,
            **reading,
            **knowing,
            **obeying,
        }

    def take_thinking(self, budget: int) -> str | None:
        """Only sim:thinker thinks: a budget given any other would be recorded and mean nothing."""
        if self.archetype.thinks:
            return None
        return f"{self.name} does not think (sim:thinker does), so a thinking budget means nothing to it"

    def knows_item(self, anchor: str) -> bool:
        """Whether it knows the low-overlap item with this anchor: a draw by the anchor and the seed."""
        if self.knows >= 1:
            return True
        digest = hashlib.sha256(f"{self.seed}|knows|{anchor}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.knows

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [self._answer(request) for request in requests]

    def stream(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]:
        """Each answer as it is made (a Streamer): the runner writes it before the next is asked, so
        a kill loses no answer already given, whatever the batch. Through ``generate``, one request
        at a time, so a model made by overriding ``generate`` streams too."""
        for index, request in enumerate(requests):
            yield index, self.generate([request])[0]

    def _answer(self, request: Request) -> Completion:
        start = time.perf_counter()
        time.sleep(self.delay)
        context = _context(request, self.tokenizer)
        probed = None if context.strip() else _probes().get(request.question)
        if probed is not None:  # a low-overlap item's fact asked alone: recalled, or not
            return self._recall(request, probed, start)
        lines = list_ops.asked(request.question) is not None or babi_story.asked(request.question) is not None
        # A reader that reads follows a state or story question's lines, or a conversation's rounds; a
        # shortcut (a pattern-matcher, the odd-name or literal reader) takes what it takes, and the list
        # or story is replayed from that, or the piece asked for said from it.
        rounds = conversation.asked(request.question) is not None
        reads = (lines or rounds) and self.archetype.reader is read_keys
        reader = (read_turns if rounds else read_lines) if reads else self.archetype.reader
        seen = _context(request, self.tokenizer, self.reading["window"]) if self.archetype.recent else context
        found = reader(seen, request, self.reading)
        facts = [fact for fact in found if self._knows(request, fact)]
        if self.archetype.combines is not None:
            facts = held(facts, request.query_keys, self.archetype.combines)
        # One draw per key, against each of its sentences' own chance: a sample asking about four
        # keys can be partly right, and a key repeated all through the context (cwe, fwe) is one
        # piece of evidence to gather, not thirty chances to get lucky beyond the window.
        draws = {key: self._draw(request, key) for _, _, key in facts}
        kept = [
            sentence
            for sentence, depth, key in facts
            if draws[key] < self.archetype.profile(len(request.ids), depth, self.params)
        ]
        output = spoken(request.question, kept)
        if self.archetype.thinks:
            tokens = self._thinking(request)
            output = thought(request.question, kept, tokens, self.tokenizer) + output
        return dataclasses.replace(
            self._completion(request, output, start),
            continuation_logprobs=self._answer_logprobs(request, facts),
            # The stand-in latency is all prefill, as a long prompt's nearly is (none without one).
            prefill_s=self.delay or None,
            decode_s=0.0 if self.delay else None,
        )

    def _thinking(self, request: Request) -> int:
        """How long it thinks on this prompt: a draw by the seed and the prompt, from a quarter of
        ``think`` tokens to all of them."""
        most: int = self.reading["think"]
        digest = hashlib.sha256(f"{self.seed}|think|".encode() + request.ids.tobytes()).digest()
        return most // 4 + int.from_bytes(digest[:8], "big") % (most - most // 4 + 1)

    def _completion(self, request: Request, output: str, start: float) -> Completion:
        tokens = self.tokenizer.encode(output)
        # A thinker's budget is the one it runs out of: it always stops there.
        cut = (self.budget == "obey" or self.archetype.thinks) and len(tokens) > request.max_new_tokens
        if cut:
            tokens = tokens[: request.max_new_tokens]
        return split_completion(
            Completion(
                text=self.tokenizer.decode(tokens) if cut else output,
                prompt_tokens=len(request.ids),
                completion_tokens=len(tokens),
                finish_reason="length" if cut else "stop",
                latency_s=time.perf_counter() - start,
            ),
            self.tokenizer,
        )

    def _knows(self, request: Request, fact: tuple[str, float, int]) -> bool:
        """Whether it can take a found sentence for the answer: always, unless the sentence is the
        evidence of a low-overlap item the question does not name (only knowing the item links the
        two) and it does not know that item."""
        index = fact[2]
        key = request.query_keys[index] if index < len(request.query_keys) else ""
        if not key or key in request.question or key not in _anchors():
            return True
        return self.knows_item(key)

    def _recall(self, request: Request, item: LatentItem, start: float) -> Completion:
        """The closed-book answer to an item's probe: its place where it knows the item."""
        output = f"{item.probe_answers[0]}." if self.knows_item(item.key) else DONT_KNOW
        return self._completion(request, output, start)

    def _answer_logprobs(
        self, request: Request, facts: Sequence[tuple[str, float, int]]
    ) -> tuple[float, ...] | None:
        """The gold answer's log-probability, log p(length, depth) of the first key's needle,
        spread evenly over its tokens."""
        if request.continuation is None or not len(request.continuation):
            return None
        length = len(request.ids)
        chances = [self.archetype.profile(length, depth, self.params) for _, depth, k in facts if k == 0]
        total = math.log(max(max(chances, default=0.0), _LEAST_PROBABILITY))
        return (total / len(request.continuation),) * len(request.continuation)

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        return [self._score(request) for request in requests]

    def _score(self, request: ScoreRequest) -> TokenScores:
        if not 1 <= request.start < len(request.ids):
            raise ValueError(f"cannot score from token {request.start} of {len(request.ids)}")
        positions = np.arange(request.start, len(request.ids), dtype=np.float64)
        nll = np.full(len(positions), self.nll)
        if self.trained_window is not None:
            nll += np.log2(np.maximum(positions / self.trained_window, 1.0))
        return TokenScores(-nll, request.start, 0.0)

    def _draw(self, request: Request, index: int) -> float:
        salt = f"{self.seed}|" if index == 0 else f"{self.seed}|{index}|"
        digest = hashlib.sha256(salt.encode() + request.ids.tobytes()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64


@functools.cache
def _probes() -> dict[str, LatentItem]:
    """The low-overlap items by their closed-book probe's question."""
    return {item.probe: item for item in load_items()}


@functools.cache
def _anchors() -> frozenset[str]:
    """The low-overlap items' anchors: the keys whose link to the question takes knowing the item."""
    return frozenset(item.key for item in load_items())


def visible_text(request: Request, tokenizer: Tokenizer) -> str:
    """What the model reads: the chat messages, the text, or the decoded ids."""
    if request.chat is not None:
        chat = request.chat
        messages = [content for _, content in chat.turns]
        return "\n".join([chat.system or "", *messages, chat.user, chat.prefill])
    if request.text is not None:
        return request.text
    return tokenizer.decode(request.ids.tolist())


def _context(request: Request, tokenizer: Tokenizer, last: int | None = None) -> str:
    """The haystack the model reads; with ``last``, only its part among the prompt's last ``last``
    tokens.

    Without a context span, the last mention of a key is taken as the question and the text before
    it as the haystack.
    """
    first = 0 if last is None else max(0, len(request.ids) - last)
    if request.context is not None:
        begin, end = request.context
        return tokenizer.decode(request.ids[max(begin, first) : end].tolist())
    text = tokenizer.decode(request.ids[first:].tolist()) if last else visible_text(request, tokenizer)
    return text[: max((text.rfind(key) for key in request.query_keys if key), default=0)]
