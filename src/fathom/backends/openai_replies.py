"""An OpenAI-compatible server's answer read: its text, finish reason, token counts and the
server's own timings, each checked for what it must be (a reply without text is worth another try;
a count or a time that is no plausible number is absent)."""

from __future__ import annotations

from typing import Any

from fathom.backends.jsonhttp import Transient
from fathom.backends.replies import finite_number

Timings = tuple[float | None, float | None]
# More tokens than any model's window: a count above it is a broken server's, not a model's.
MOST_TOKENS = 2**31


# Where servers put a thinking model's reasoning beside the content, in the order looked for:
# ``reasoning`` (vLLM since late 2025: its 0.11.2 docs name it, later releases drop the other; Ollama,
# OpenRouter), ``reasoning_content`` (vLLM before, llama.cpp's server, DeepSeek's API, SGLang). The first
# that holds text: vLLM's docs warn that a reply may hold the other field empty.
REASONING_FIELDS = ("reasoning", "reasoning_content")


def read_answer(reply: Any, chat: bool) -> tuple[str, str, dict[str, Any], Timings, str | None]:
    """Text, finish reason, usage, the server's prefill and decode seconds, and the reasoning it gave
    apart from the text (None where it gave none, or none that is text) of a reply; a reply without
    the first two is worth another try. The finish reason is whole: the backend scrubs it of the
    key, then bounds it."""
    try:
        choice = reply["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
    except (KeyError, IndexError, TypeError):
        raise Transient("the reply has no choices[0] text") from None
    if chat and text is None:
        text = ""  # a chat model may answer with no content at all: that is its answer
    if not isinstance(text, str):
        raise Transient("the reply's text is not a string")
    usage = reply.get("usage")
    finish = str(choice.get("finish_reason") or "unknown")
    place = choice.get("message") if chat else choice
    given = [place.get(key) for key in REASONING_FIELDS] if isinstance(place, dict) else []
    reasoning = next((value for value in given if isinstance(value, str) and value), None)
    return text, finish, usage if isinstance(usage, dict) else {}, timings(reply), reasoning


def reasoning_count(usage: dict[str, Any]) -> int | None:
    """The reasoning tokens a server counted (OpenAI's ``usage.completion_tokens_details.
    reasoning_tokens``), where it gives a plausible count; None otherwise."""
    details = usage.get("completion_tokens_details")
    counted = token_count(details, "reasoning_tokens", -1) if isinstance(details, dict) else -1
    return None if counted < 0 else counted


def timings(reply: dict[str, Any]) -> Timings:
    """The server's own prefill and decode time, where it reports them: llama.cpp's server adds
    ``timings`` (``prompt_ms``, ``predicted_ms``) to its replies; others say nothing (None), and a
    time that is no finite number of milliseconds, 0 or more, is none."""
    given = reply.get("timings")
    if not isinstance(given, dict):
        return None, None
    milliseconds = [finite_number(given.get(key)) for key in ("prompt_ms", "predicted_ms")]
    prefill, decode = (None if ms is None or ms < 0 else ms / 1000 for ms in milliseconds)
    return prefill, decode


def token_count(usage: dict[str, Any], key: str, fallback: int) -> int:
    """The count of tokens ``usage`` gives under ``key``; ``fallback`` where it gives none that a
    model could have (a whole number, 0 or more, below MOST_TOKENS)."""
    value = usage.get(key)
    return value if type(value) is int and 0 <= value < MOST_TOKENS else fallback
