"""Exact prompts: the final, templated prompt is exactly the target length in the model's tokens.

The prompt is assembled from token ids: the template head, a slice of the tokenised corpus with
the needle's ids spliced in at a sentence boundary, and the template tail (question and answer
prefix included). The haystack gets whatever the rest leaves of the budget, so the length is exact
by construction; text backends get the decoded text, re-encoded once to verify.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from fathom.backends.base import ChatPrompt
from fathom.errors import PromptError
from fathom.haystack.index import Ids, TokenizedCorpus
from fathom.records import Needle
from fathom.templates import CONTEXT_MARKER, ChatTemplate
from fathom.tokenizers import Tokenizer


def length_tolerance(target: int) -> int:
    """How far a prompt may miss its target before the sample is an error: 0.5% or 8 tokens."""
    return max(8, math.ceil(0.005 * target))


@dataclass(frozen=True)
class PromptText:
    """A task's words around the haystack; ``after`` may name ``{question}``."""

    before: str
    after: str
    answer_prefix: str
    system: str | None = None


@dataclass(frozen=True, eq=False)
class Prompt:
    """A built prompt and where its needle landed."""

    ids: Ids
    target_tokens: int
    head_tokens: int  # template and instruction before the haystack
    haystack_tokens: int  # corpus tokens around the needle
    needle_token_offset: int  # first needle token, counted in the whole prompt
    needle_tokens: int
    needle_depth: float  # needle position inside the haystack, 0..1

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.ids.tobytes()).hexdigest()


class PromptBuilder:
    """Builds prompts for one tokenizer, template, task text and corpus."""

    def __init__(
        self, tokenizer: Tokenizer, template: ChatTemplate, text: PromptText, corpus: TokenizedCorpus
    ) -> None:
        self.tokenizer = tokenizer
        self.template = template
        self.text = text
        self.corpus = corpus

    def frame(self, question: str) -> tuple[Ids, Ids]:
        """The ids before and after the haystack for this question."""
        user = self.text.before + CONTEXT_MARKER + self.text.after.format(question=question)
        head, tail = self.template.wrap(self.tokenizer, self.text.system, user)
        encode = self.tokenizer.encode_with_specials
        head_ids = encode(head)
        bos = self.tokenizer.bos_id
        if bos is not None and head_ids[:1] != [bos]:
            head_ids.insert(0, bos)
        return _ids(head_ids), _ids(encode(tail + self.text.answer_prefix))

    def overhead(self, needle: Needle) -> int:
        """Tokens of the prompt that are not haystack: template, instruction, question, needle."""
        head, tail = self.frame(needle.question)
        return len(head) + len(tail) + len(self.tokenizer.encode(needle.text))

    def build(self, length: int, depth: float, needle: Needle) -> Prompt:
        """A prompt of exactly ``length`` tokens with the needle at the sentence boundary nearest
        ``depth`` of the haystack."""
        head, tail = self.frame(needle.question)
        needle_ids = _ids(self.tokenizer.encode(needle.text))
        budget = length - len(head) - len(tail) - len(needle_ids)
        if budget < 0:
            overhead = length - budget
            raise PromptError(
                f"length {length} is below this prompt's fixed overhead of {overhead} tokens "
                f"(template, instruction, question and needle); use lengths of at least {overhead}"
            )
        haystack, starts = self.corpus.window(budget)
        cut = _nearest_boundary(starts, budget, depth)
        ids = np.concatenate([head, haystack[:cut], needle_ids, haystack[cut:], tail])
        return Prompt(
            ids=ids,
            target_tokens=length,
            head_tokens=len(head),
            haystack_tokens=budget,
            needle_token_offset=len(head) + cut,
            needle_tokens=len(needle_ids),
            needle_depth=cut / budget if budget else 0.0,
        )

    def chat(self, prompt: Prompt, needle: Needle) -> ChatPrompt:
        """The same prompt as messages, for backends whose server applies the chat template."""
        end = prompt.head_tokens + prompt.haystack_tokens + prompt.needle_tokens
        context = self.tokenizer.decode(prompt.ids[prompt.head_tokens : end].tolist())
        user = self.text.before + context + self.text.after.format(question=needle.question)
        return ChatPrompt(self.text.system, user, self.text.answer_prefix)


def _ids(values: list[int]) -> Ids:
    return np.asarray(values, dtype=np.int32)


def _nearest_boundary(starts: np.ndarray, budget: int, depth: float) -> int:
    """The sentence boundary (or either end of the haystack) closest to ``depth`` of it."""
    candidates = np.concatenate([[0], starts, [budget]])
    return int(candidates[np.argmin(np.abs(candidates - depth * budget))])
