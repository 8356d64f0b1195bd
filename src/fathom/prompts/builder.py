"""Exact prompts: the final, templated prompt is exactly the target length in the model's tokens.

The prompt is assembled from token ids: the template head, a slice of the tokenised corpus with
the needle's ids spliced in at a sentence boundary, and the template tail (question and answer
prefix included). The haystack gets whatever the rest leaves of the budget, so the length is exact
by construction; text backends get the decoded text, re-encoded once to verify.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fathom.errors import PromptError
from fathom.prompts.haystack.index import Ids, Positions, TokenizedCorpus
from fathom.prompts.templates import CONTEXT_MARKER, ChatTemplate
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Needle


def length_tolerance(target: int) -> int:
    """How far a prompt may miss its target before the sample is an error: 0.5% or 8 tokens."""
    return max(8, math.ceil(0.005 * target))


@dataclass(frozen=True)
class PromptText:
    """A task's words around the haystack; ``after`` may hold ``{question}``, replaced as is (a
    question may contain braces of its own)."""

    before: str
    after: str
    answer_prefix: str
    system: str | None = None


@dataclass(frozen=True)
class ChatPrompt:
    """The prompt as messages, for chat endpoints; ``prefill`` opens the assistant's answer where
    the backend supports it (the answer prefix)."""

    system: str | None
    user: str
    prefill: str
    # The conversation before the user's message, (role, content) in order: a multi-turn prompt's
    # earlier asks and answers (``tasks/mrcr.py``); () for a prompt of one message.
    turns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Insertion:
    """Where one needle (or chain statement, or gold document) landed in a prompt."""

    token_offset: int  # its first token, counted in the whole prompt
    tokens: int
    depth: float  # the share of the haystack before it, 0..1


@dataclass(frozen=True, eq=False)
class Prompt:
    """A built prompt and where its needles landed."""

    ids: Ids
    target_tokens: int
    head_tokens: int  # template and instruction before the context
    context_tokens: int  # the haystack with everything inserted into it
    needles: tuple[Insertion, ...]
    # False for a prompt sized below its target by design (RULER's fill, --fill ruler): its own
    # length, not the target, is what a backend must see.
    fills_target: bool = True

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.ids.tobytes()).hexdigest()


def frame(tokenizer: Tokenizer, template: ChatTemplate, text: PromptText, question: str) -> tuple[Ids, Ids]:
    """The ids before and after the context for this question: the template, the task's words and
    the answer prefix, which a chat template places as the opening of the assistant's turn."""
    user = text.before + CONTEXT_MARKER + text.after.replace("{question}", question)
    head, tail = template.wrap(tokenizer, text.system, user)
    encode = tokenizer.encode_with_specials
    head_ids = encode(head)
    bos = tokenizer.bos_id
    if bos is not None and head_ids[:1] != [bos]:
        head_ids.insert(0, bos)
    return _ids(head_ids), _ids(encode(tail + text.answer_prefix))


def assemble(head: Ids, parts: Sequence[tuple[Ids, bool]], tail: Ids, target: int) -> Prompt:
    """The prompt ``head + parts + tail``; a part flagged True is a needle, whose offset and depth
    (the share of the other parts' tokens before it) are recorded."""
    chunks, flagged = zip(*parts, strict=True) if parts else ((), ())
    return _join(head, chunks, flagged, tail, target)


def _join(head: Ids, chunks: Sequence[Ids], flagged: Sequence[bool], tail: Ids, target: int) -> Prompt:
    """``assemble`` of its parts' ids and flags apart, as ``PromptBuilder.place`` hands them."""
    # Counted as arrays, not part by part: a prompt of hundreds of needles (a long-output log of 256
    # records at 128k) spent more on this loop than on joining its ids.
    sizes = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    flags = np.array(flagged, dtype=bool)
    hay = np.where(flags, 0, sizes)
    haystack = int(hay.sum())
    offsets = len(head) + np.cumsum(sizes) - sizes
    before = (np.cumsum(hay) - hay)[flags]
    depths = before / haystack if haystack else np.zeros(len(before))
    return Prompt(
        ids=np.concatenate([head, *chunks, tail]),
        target_tokens=target,
        head_tokens=len(head),
        context_tokens=int(sizes.sum()),
        needles=tuple(map(Insertion, offsets[flags].tolist(), sizes[flags].tolist(), depths.tolist())),
    )


def chat_prompt(tokenizer: Tokenizer, text: PromptText, prompt: Prompt, question: str) -> ChatPrompt:
    """A built prompt as messages, for backends whose server applies the chat template."""
    context_ids = prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens]
    user = text.before + tokenizer.decode(context_ids.tolist()) + text.after.replace("{question}", question)
    return ChatPrompt(text.system, user, text.answer_prefix)


class TooShort(PromptError):
    """A length below what the prompt needs whatever the context: the numbers travel with the
    message, so that a caller that shrank the length (for tokens to generate) can restate it."""

    def __init__(self, length: int, overhead: int, what: str) -> None:
        super().__init__(
            f"length {length} is below this prompt's fixed overhead of {overhead} tokens "
            f"({what}); use lengths of at least {overhead}"
        )
        self.length, self.overhead, self.what = length, overhead, what


@dataclass(frozen=True)
class Apart:
    """Needles kept apart on the boundaries actually used: every needle not in ``anchors`` (the
    gold needles and parts, by index) at least ``gap`` of the haystack from each anchor."""

    gap: float
    anchors: frozenset[int]


class Crowded(PromptError):
    """No boundary of a haystack lies the gap from every anchor: the numbers travel with the
    message, so that a task can restate it for the length it was asked."""

    def __init__(self, candidates: np.ndarray, budget: int, gap: float) -> None:
        self.boundaries = len(candidates)  # the haystack's ends included
        self.fit = fitting(candidates, budget, gap)
        super().__init__(
            f"no boundary of a haystack of {budget} tokens ({self.boundaries}, its ends included) lies "
            f"{gap:g} of it from every needle; its boundaries hold {self.fit} needles that far apart"
        )


@dataclass(frozen=True, eq=False)
class Layout:
    """A prompt's pieces before they are joined: the ids around the haystack, each needle's ids,
    the haystack, and each needle's offset in it."""

    head: Ids
    tail: Ids
    needle_ids: list[Ids]
    haystack: Ids
    cuts: list[int]


def too_short(length: int, overhead: int, what: str) -> TooShort:
    return TooShort(length, overhead, what)


class Fitted(Protocol):
    """A needle whose text depends on the haystack around the boundary it lands at (a line of code
    takes its neighbours' indentation, ``needle_styles.Indented``): its text for the text before
    that boundary and after it; ``fit("", "")`` is its text with no neighbours."""

    def fit(self, before: str, after: str) -> str: ...


NeedleText = str | Fitted
# The haystack tokens read on each side of a fitted needle's boundary: a few lines of code.
NEIGHBOURS = 96
NEEDLES_REMEMBERED = 4096  # needle texts whose ids a builder keeps (``PromptBuilder._needle_ids``)
FRAMES_REMEMBERED = 256  # questions whose frame a builder keeps (``PromptBuilder.frame``)


class PromptBuilder:
    """Builds prompts for one tokenizer, template, task text and corpus: needles spliced into a
    window of the tokenised corpus at its sentence boundaries."""

    def __init__(
        self, tokenizer: Tokenizer, template: ChatTemplate, text: PromptText, corpus: TokenizedCorpus
    ) -> None:
        self.tokenizer = tokenizer
        self.template = template
        self.text = text
        self.corpus = corpus
        # A needle's ids, remembered: short texts recur from prompt to prompt of a sweep (a state
        # stream's lines, ``tasks/state.py``), and each encoding costs as much as a window's slicing.
        self._needle_ids = functools.lru_cache(maxsize=NEEDLES_REMEMBERED)(self._encode)
        # A question's frame, remembered: a family's questions recur (listing's 48 conditions, state's
        # three kinds), and each frame costs a template's rendering and two encodings, 0.05 ms.
        self._frames = functools.lru_cache(maxsize=FRAMES_REMEMBERED)(self._frame)

    def _encode(self, text: str) -> Ids:
        ids = _ids(self.tokenizer.encode(text))
        ids.flags.writeable = False  # shared by every prompt that holds the text
        return ids

    def frame(self, question: str) -> tuple[Ids, Ids]:
        return self._frames(question)

    def _frame(self, question: str) -> tuple[Ids, Ids]:
        head, tail = frame(self.tokenizer, self.template, self.text, question)
        head.flags.writeable = tail.flags.writeable = False  # shared by every prompt that asks it
        return head, tail

    def overhead(self, needle: Needle) -> int:
        """Tokens of the prompt that are not haystack: template, instruction, question, needle."""
        head, tail = self.frame(needle.question)
        return len(head) + len(tail) + len(self.tokenizer.encode(needle.text))

    def build(self, length: int, depth: float, needle: Needle) -> Prompt:
        """A prompt of exactly ``length`` tokens with the needle at the sentence boundary nearest
        ``depth`` of the haystack."""
        return self.place(length, needle.question, [(depth, needle.text)])

    def layout(
        self,
        length: int,
        question: str,
        needles: Sequence[tuple[float, NeedleText]],
        start: int = 0,
        apart: Apart | None = None,
    ) -> Layout:
        """Where ``place`` puts each needle, without assembling the prompt: a check of a sweep's
        cells before any is built costs a window and the needles' tokens.

        A fitted needle is laid out as ``fit("", "")``, then fitted to the haystack around its
        boundary; the haystack then ends where the fitted needles' tokens leave it, so every
        boundary (and the gap between needles, in tokens) stays where it was snapped."""
        head, tail = self.frame(question)
        texts = [text if isinstance(text, str) else text.fit("", "") for _, text in needles]
        needle_ids, haystack, starts, budget = self._haystack(length, head, tail, texts, start)
        cuts = snap(starts, budget, [depth for depth, _ in needles], apart)
        if any(not isinstance(text, str) for _, text in needles):
            texts = [
                text if isinstance(text, str) else text.fit(*self._neighbours(haystack, cut))
                for (_, text), cut in zip(needles, cuts, strict=True)
            ]
            needle_ids, haystack, _, budget = self._haystack(length, head, tail, texts, start)
            cuts = [min(cut, budget) for cut in cuts]
        return Layout(head, tail, needle_ids, haystack, cuts)

    def _haystack(
        self, length: int, head: Ids, tail: Ids, texts: list[str], start: int
    ) -> tuple[list[Ids], Ids, Positions, int]:
        """The needles' ids, and the haystack their tokens and the frame leave of ``length``: its
        ids, its unit boundaries and its size."""
        needle_ids = [self._needle_ids(text) for text in texts]
        budget = length - len(head) - len(tail) - sum(len(ids) for ids in needle_ids)
        if budget < 0:
            raise too_short(length, length - budget, "template, instruction, question and needles")
        return needle_ids, *self.corpus.window(budget, start), budget

    def _neighbours(self, haystack: Ids, cut: int) -> tuple[str, str]:
        """The haystack's text just before and just after a boundary."""
        decode = self.tokenizer.decode
        return decode(haystack[max(0, cut - NEIGHBOURS) : cut].tolist()), decode(
            haystack[cut : cut + NEIGHBOURS].tolist()
        )

    def place(
        self,
        length: int,
        question: str,
        needles: Sequence[tuple[float, NeedleText]],
        start: int = 0,
        apart: Apart | None = None,
    ) -> Prompt:
        """A prompt of exactly ``length`` tokens with each needle text at the sentence boundary
        nearest its depth (``snap``, which keeps the needles ``apart`` asks to on the boundaries
        used); needles at the same boundary keep their order. The prompt's ``needles`` are in the
        order given (whatever their depths). The haystack is the corpus from the unit boundary at
        or after token ``start`` (``TokenizedCorpus.window``)."""
        laid = self.layout(length, question, needles, start, apart)
        haystack, cuts, needle_ids = laid.haystack, laid.cuts, laid.needle_ids
        count = len(needles)
        # A stream of lines comes in order of depth (``line_stream.place_lines``): its cuts ascend
        # already, and its hundreds of needles need no sorting and no putting back.
        ascending = all(a <= b for a, b in itertools.pairwise(cuts))
        order = range(count) if ascending else sorted(range(count), key=cuts.__getitem__)  # stable
        bounds = [0, *(cuts[i] for i in order), len(haystack)]
        chunks: list[Ids] = [haystack] * (2 * count + 1)
        chunks[0::2] = [haystack[start:end] for start, end in itertools.pairwise(bounds)]
        chunks[1::2] = [needle_ids[i] for i in order]
        prompt = _join(laid.head, chunks, [False, True] * count + [False], laid.tail, length)
        if ascending:
            return prompt
        placed = dict(zip(order, prompt.needles, strict=True))
        return dataclasses.replace(prompt, needles=tuple(placed[i] for i in range(count)))


def _ids(values: list[int]) -> Ids:
    return np.asarray(values, dtype=np.int32)


def _nearest(candidates: np.ndarray, budget: int, depths: Sequence[float]) -> list[int]:
    """The candidate boundary (``candidates`` ascending) closest to each depth of the haystack, the
    lower of two as close; found by bisection, so that a prompt of many needles (a state-tracking
    stream of 128 lines at 128k) costs no scan of every boundary per needle."""
    targets = np.asarray(depths, dtype=np.float64) * budget
    above = np.searchsorted(candidates, targets).clip(0, len(candidates) - 1)
    below = (above - 1).clip(0, len(candidates) - 1)
    low, high = candidates[below], candidates[above]
    nearest: list[int] = np.where(targets - low <= np.abs(high - targets), low, high).tolist()
    return nearest


def snap(starts: np.ndarray, budget: int, depths: Sequence[float], apart: Apart | None = None) -> list[int]:
    """Each depth's token offset in the haystack: the sentence boundary (or either end) nearest it.

    With ``apart``, its anchors snap so and every other needle snaps to the nearest boundary that
    lies at least ``apart.gap`` of the haystack from every anchor's boundary: the gap holds on the
    positions used, which snapping alone can shrink to nothing (two adjacent sentences, or one)."""
    candidates = np.concatenate([[0], starts, [budget]])
    if apart is None:
        return _nearest(candidates, budget, depths)
    anchors = sorted(apart.anchors)
    cuts = dict(zip(anchors, _nearest(candidates, budget, [depths[i] for i in anchors]), strict=True))
    if len(cuts) < len(depths):
        held = np.fromiter(cuts.values(), dtype=np.int64)
        distances = np.abs(candidates[:, None] - held[None, :]).min(axis=1, initial=budget)
        far = candidates[distances >= apart.gap * budget]
        if not far.size:
            raise Crowded(candidates, budget, apart.gap)
        rest = [i for i in range(len(depths)) if i not in cuts]
        cuts |= dict(zip(rest, _nearest(far, budget, [depths[i] for i in rest]), strict=True))
    return [cuts[i] for i in range(len(depths))]


def fitting(candidates: np.ndarray, budget: int, gap: float) -> int:
    """How many needles the boundaries hold with ``gap`` of the haystack between any two: the most
    candidates, taken from the start on, each that far past the one before."""
    count, last = 0, -np.inf
    for at in candidates:
        if at - last >= gap * budget:
            count, last = count + 1, at
    return count
