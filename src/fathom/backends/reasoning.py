"""A thinking model's reasoning kept apart from its answer, whatever the backend.

Text backends (llama.cpp, transformers, vLLM in process, a server's completions or a chat reply that
leaves the reasoning in its content) get the model's words whole: ``split_reasoning`` takes a think
block off its start. By default the block is ``<think>...</think>``, as Qwen3, QwQ and DeepSeek-R1
write it, detected only where the output opens with it (after whitespace), or where it holds the
closing tag alone: their chat templates end the prompt with ``<think>\\n``, so the model writes the
reasoning and its close. An output that opens no block is the answer, whole: a model that does not
think is read as before. ``think_tags=OPEN,CLOSE`` names other tags, ``think_tags=off`` splits
nothing (the ``THINK_TAGS`` setting). A block opened and never closed is a reply that ran out while
still thinking: no answer (``records.THINKING``).

Servers that split the reasoning themselves give it in the message beside the content
(``reasoning_content``: vLLM's reasoning parsers, llama.cpp's server, DeepSeek's API; ``reasoning``:
vLLM since late 2025, Ollama, OpenRouter): ``openai_replies.read_answer`` reads it, and the answer is the
content alone. Anthropic's thinking blocks are apart already (``anthropic``).

The reasoning's tokens are the backend tokenizer's count of its text (tags left out): the model's own
count for in-process backends, the run's tokenizer's for a server that reports none.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fathom.backends.replies import bounded
from fathom.backends.settings import Setting
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import ANSWER_BYTES, THINKING, Completion

DEFAULT_TAGS = ("<think>", "</think>")
# The most characters of reasoning a completion keeps: at most an answer's bytes (4 a character in UTF-8).
REASONING_CHARS = ANSWER_BYTES // 4
Tags = tuple[str, str] | None  # None: no block is looked for


def _tags(given: str) -> Tags:
    if given == "off":
        return None
    opening, sep, closing = given.partition(",")
    if not sep or not opening.strip() or not closing.strip() or "," in closing or opening == closing:
        raise ValueError(given)
    return opening.strip(), closing.strip()


# A backend setting: the tags of a think block, or off.
THINK_TAGS = Setting(
    "off, or the opening and closing tags of a think block, two different texts with a comma between "
    "(e.g. <think>,</think>)",
    _tags,
    DEFAULT_TAGS,
)


def tags_setting(tags: Tags) -> dict[str, object]:
    """The setting as a backend's ``settings()`` names it: left out at the default, so that runs made
    before it keep their identity (their outputs opened with no think block, or they would have been
    graded on their reasoning)."""
    if tags == DEFAULT_TAGS:
        return {}
    return {"think_tags": "off" if tags is None else list(tags)}


def tags_refusal(backend: str, tags: Tags) -> str | None:
    """Why a backend that reads its model's reasoning off the text cannot honour a thinking budget:
    it cannot where it looks for no think block (``think_tags=off``), and would grade the reasoning."""
    if tags is not None:
        return None
    return f"{backend} has think_tags=off, so it would grade the reasoning as the answer"


@dataclass(frozen=True)
class Split:
    """An output read as reasoning and answer: ``reasoning`` None where it held no think block, and
    ``unclosed`` where the block never closed (the answer then is empty)."""

    answer: str
    reasoning: str | None
    unclosed: bool = False


def split_reasoning(text: str, tags: Tags = DEFAULT_TAGS) -> Split:
    """``text`` as reasoning and answer: a think block at its start (or its closing tag with no opening
    tag, the template having opened the block) is the reasoning, stripped; what follows it, stripped
    of the space before it, is the answer."""
    if tags is None:
        return Split(text, None)
    opening, closing = tags
    body = text.lstrip()
    if body.startswith(opening):
        body = body[len(opening) :]
    elif closing not in body or opening in body:  # a block opened later than the start is the answer's
        return Split(text, None)
    thought, closed, answer = body.partition(closing)
    if not closed:
        return Split("", thought.strip(), unclosed=True)
    return Split(answer.lstrip(), thought.strip())


def with_reasoning(
    completion: Completion, reasoning: str, tokens: int, unclosed: bool = False, secret: str | None = None
) -> Completion:
    """``completion`` with its reasoning beside it, scrubbed of ``secret`` and bounded to as many
    characters as would fill an answer's bytes in the narrowest script; one that ended inside its
    reasoning finishes THINKING (its answer is empty, whatever the backend said of its end)."""
    return dataclasses.replace(
        completion,
        reasoning=bounded(reasoning, REASONING_CHARS, secret),
        reasoning_tokens=tokens,
        finish_reason=THINKING if unclosed else completion.finish_reason,
    )


def split_completion(
    completion: Completion, tokenizer: Tokenizer, tags: Tags = DEFAULT_TAGS, secret: str | None = None
) -> Completion:
    """A text backend's completion with its think block taken off the answer and counted with
    ``tokenizer``; unchanged where it holds none, or failed."""
    if completion.error is not None:
        return completion
    split = split_reasoning(completion.text, tags)
    if split.reasoning is None:
        return completion
    answered = dataclasses.replace(completion, text=split.answer)
    tokens = len(tokenizer.encode(split.reasoning))
    return with_reasoning(answered, split.reasoning, tokens, split.unclosed, secret)


def reasoned(
    completion: Completion,
    given: str | None,
    tokenizer: Tokenizer,
    tags: Tags = DEFAULT_TAGS,
    counted: int | None = None,
    secret: str | None = None,
) -> Completion:
    """A server's completion with its reasoning apart: the reasoning it gave beside the answer
    (``given``; its ``counted`` tokens where it reports them, else ``tokenizer``'s count), a reply cut
    with no answer being still thinking; else a think block taken off its text (``split_completion``)."""
    if not given:
        return split_completion(completion, tokenizer, tags, secret)
    unclosed = completion.finish_reason == "length" and not completion.text.strip()
    tokens = len(tokenizer.encode(given)) if counted is None else counted
    return with_reasoning(completion, given, tokens, unclosed, secret)
