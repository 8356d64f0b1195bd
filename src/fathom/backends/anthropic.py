"""Anthropic's Messages API through the official SDK (the ``anthropic`` extra): ``anthropic:MODEL``.

Claude's tokenizer is not public, so prompts are built with a stand-in (``--tokenizer``, cl100k_base
by default) and each final prompt is counted by the provider's ``count_tokens`` endpoint before it is
sent: that count is the record's ``actual_tokens`` (``base.Counting``), and the run's summary says how
close the provider's counts came to the target lengths (``fathom.analysis.provider_counts``). The
prompt goes as messages (the task's system prompt as ``system``, a multi-turn prompt's earlier turns
before the last user message); the Messages API takes no sampling settings (SDK 2.14.0 has no
temperature), so the model decodes as it does. Thinking is the model's default unless ``thinking=off``
(disabled) or ``thinking=N`` (the API's ``budget_tokens``, at least 1024, below max_tokens: max_tokens
is N plus the sample's answer budget); the answer is the reply's text blocks alone, never its thinking
blocks. ``anthropic_client`` says how the SDK's
calls travel: fathom's window, deadlines, retries and caps, the key from ``$api_key_env`` only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import httpx

from fathom.backends.anthropic_client import exchange, sdk_client
from fathom.backends.base import InputKind, Request, in_order, split_options
from fathom.backends.jsonhttp import Failed, JsonApi, Rejected, Transient
from fathom.backends.openai_replies import MOST_TOKENS
from fathom.backends.openai_target import read_target
from fathom.backends.reasoning import reasoned
from fathom.backends.replies import FINISH_CHARS
from fathom.backends.schedule import Intake
from fathom.backends.settings import (
    MOST_CONTEXT,
    MOST_IN_FLIGHT,
    MOST_RETRIES,
    MOST_SECONDS,
    Setting,
    count,
    number,
    parse_settings,
    refusal,
    text,
    whole,
)
from fathom.errors import FathomError, SpecError
from fathom.manifest import PROVIDER_COUNTED
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Completion, ErrorKind

API = "https://api.anthropic.com"
STAND_IN = "cl100k_base"
MESSAGES, COUNT = "/v1/messages", "/v1/messages/count_tokens"
# The API's least thinking budget (budget_tokens), and the rule that it be below max_tokens.
LEAST_THINKING = 1024
# The Messages API of SDK 2.14.0 takes no temperature, top_p or top_k: the model decodes as it does.
DECODING = "the model's own (the Messages API takes no sampling settings)"
# Anthropic's stop reasons as fathom's finish reasons; any other (refusal, pause_turn) is kept as given.
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def _thinking(given: str) -> int | str:
    if given in ("default", "off"):
        return given
    budget = int(whole(0, most=MOST_CONTEXT).read(given))
    if budget < LEAST_THINKING:
        raise ValueError(given)
    return budget


_SETTINGS = {
    # default: none asked for (what the model does then is its own); off: disabled; N: budget_tokens,
    # and each request's max_tokens is N plus the sample's answer budget.
    "thinking": Setting(
        f"default, off, or a whole number of tokens of at least {LEAST_THINKING} (the API's least "
        "budget_tokens)",
        _thinking,
        "default",
    ),
    # The most output tokens (thinking and answer) the model takes in one reply: Claude Opus 4's 32k,
    # the least of the current models'; raise it for a model that allows more.
    "max_output": count(32000, most=MOST_CONTEXT),
    # Fewer than openai's 32: an API account's rate limits, not a server's slots, bound what goes at once.
    "concurrency": whole(8, least=1, most=MOST_IN_FLIGHT, unit="requests at a time"),
    # A long prompt's answer with thinking takes minutes, not seconds.
    "timeout": number(600.0, least=0.0, most=MOST_SECONDS, above=True, unit="seconds"),
    "retries": whole(5, least=1, most=MOST_RETRIES),
    "max_wait": number(1800.0, least=0.0, most=MOST_SECONDS, above=True, unit="seconds"),
    "api_key_env": text("ANTHROPIC_API_KEY", r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable's name"),
    "window": count(None, most=MOST_CONTEXT),
    "max_prompt": count(None, most=MOST_CONTEXT),
}


class AnthropicBackend:
    """``anthropic:MODEL[@BASE_URL]?thinking=default&max_output=32k&concurrency=8&timeout=600&retries=5&
    max_wait=1800&api_key_env=ANTHROPIC_API_KEY&window=200k&max_prompt=200k``."""

    input: InputKind = "chat"
    exact_lengths = False  # the stand-in's counts built the prompts; the provider's are recorded
    provider_counts = True  # base.Counting: each completion's prompt_tokens is count_tokens' count
    requests_per_call = 4096
    pulls_requests = True

    def __init__(self, rest: str, tokenizer: str) -> None:
        target, given = split_options(rest)
        options = parse_settings("anthropic", _SETTINGS, given)
        key_env = options["api_key_env"]
        if "@" in target:
            self.model, self.base_url = read_target(target, "anthropic", key_env)
        else:
            self.model, self.base_url = target, API
        if not self.model:
            raise SpecError("name the model: anthropic:MODEL, e.g. anthropic:claude-sonnet-4-5")
        self.name = f"anthropic:{self.model}" + (f"@{self.base_url}" if self.base_url != API else "")
        self.thinking: int | str = options["thinking"]
        self.taken: int | None = None  # the run's --thinking-budget (``take_thinking``)
        self.max_output: int = options["max_output"]
        if isinstance(self.thinking, int) and self.thinking >= self.max_output:
            needs = f"below max_output ({self.max_output}), which must leave the answer room"
            raise refusal("anthropic", "thinking", given["thinking"], needs)
        stand_in = STAND_IN if tokenizer == "auto" else tokenizer
        self.tokenizer, self.stand_in = load_tokenizer(stand_in), stand_in
        self.concurrency: int = options["concurrency"]
        self.trained_window: int | None = options["window"]
        self.max_prompt_tokens: int | None = options["max_prompt"]
        self.api = JsonApi(
            self.base_url,
            self.model,
            key_env=key_env,
            timeout=options["timeout"],
            retries=options["retries"],
            max_wait=options["max_wait"],
            bearer=False,
        )
        if self.api.key is None:
            raise SpecError(
                f"the anthropic backend needs an API key in ${key_env}: set it there (it is read from "
                "there only, and written nowhere)"
            )
        self.sdk = sdk_client(self.api)
        self._probe()

    def settings(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "endpoint": "messages",
            "prefill": "none",
            "counted_by": f"{PROVIDER_COUNTED}count_tokens (prompts built with {self.stand_in})",
            "decoding": DECODING,
            "thinking": self.thinking,
            "max_tokens": "thinking + each sample's max_new_tokens"
            if isinstance(self.thinking, int)
            else "each sample's max_new_tokens",
            "max_output": self.max_output,
        }

    def transport_settings(self) -> dict[str, Any]:
        api = self.api
        return {
            "concurrency": self.concurrency,
            "timeout": api.timeout,
            "retries": api.retries,
            "max_wait": api.max_wait,
            "api_key_env": api.key_env,
        }

    def stream(self, requests: Iterable[Request]) -> Iterator[tuple[int, Completion]]:
        """Each completion as it is done, read and sent as ``OpenAIBackend.stream`` does (in order:
        no prefix cache to serve)."""
        yield from self.api.drain(self._answer, Intake(requests, self.concurrency))

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return in_order(self.stream(requests), len(requests))

    def _probe(self) -> None:
        """Fail before any work where nothing answers, the key is refused, the model is unknown or
        the server cannot count tokens: one count of a word, which costs nothing."""

        async def probe(client: httpx.AsyncClient, _: None) -> None:
            body: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": "ping"}]}
            try:
                deadline = min(self.api.timeout, 30.0)
                await exchange(self.api, client, COUNT, self.sdk.messages.count_tokens, body, deadline)
            except Transient as exc:
                if exc.unreachable:
                    raise FathomError(
                        f"no server answers at {self.base_url} ({exc.reason}): fix the URL"
                    ) from None
            except Rejected:
                pass

        list(self.api.each(probe, [None], 1))

    async def _answer(self, client: httpx.AsyncClient, request: Request) -> Completion:
        """The prompt counted by the provider, then answered; every text scrubbed of the key."""
        body = self._body(request)
        thinking, answer = self._split(request.max_new_tokens)
        budget = thinking + max(1, answer)
        if (over := self.output_refusal(request.max_new_tokens)) is not None:
            error = ErrorKind.REJECTED.error(over)
            return Completion("", len(request.ids), 0, "error", 0.0, error=error)
        try:
            messages = self.sdk.messages
            count = functools.partial(exchange, self.api, client, COUNT, messages.count_tokens, body)
            counted, _ = await self.api.retried(count, _counted)
            limit = self.max_prompt_tokens
            if limit is not None and counted + budget > limit:
                error = ErrorKind.TOO_LONG.error(
                    f"{counted} prompt tokens (the provider's count) + {budget} new exceed the backend's "
                    f"limit of {limit}"
                )
                return Completion("", counted, 0, "error", 0.0, error=error)
            asked = {**body, "max_tokens": budget, **_stops(request)}
            create = functools.partial(exchange, self.api, client, MESSAGES, messages.create, asked)
            (text, finish, produced, thought), latency = await self.api.retried(create, _answered)
        except Failed as failed:
            return Completion(
                "", len(request.ids), 0, "error", failed.seconds, error=self.api.scrub(failed.error)
            )
        completion = Completion(
            self.api.scrub(text), counted, produced, self.api.bounded(finish, FINISH_CHARS), latency
        )
        # The thinking blocks' text counted by the stand-in: the API counts them only within output_tokens.
        return reasoned(completion, thought, self.tokenizer, None, secret=self.api.key)

    def _body(self, request: Request) -> dict[str, Any]:
        """The model, messages and system prompt: what is counted and what is asked alike."""
        chat = request.chat
        if chat is None:
            raise ValueError(f"request {request.sample_id} has no chat messages for the Messages API")
        messages = [{"role": role, "content": content} for role, content in chat.turns]
        messages.append({"role": "user", "content": chat.user})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if chat.system:
            body["system"] = chat.system
        if thinking := self._budget():
            body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
        elif self.thinking == "off":
            body["thinking"] = {"type": "disabled"}
        return body

    def _budget(self) -> int:
        """The tokens of thinking asked for: the run's --thinking-budget, else the setting's (none
        unless one is given)."""
        return self.taken or (self.thinking if isinstance(self.thinking, int) else 0)

    def _split(self, new_tokens: int) -> tuple[int, int]:
        """A request's thinking and answer budgets: a run's --thinking-budget is in its max_new_tokens
        already, the setting's is not."""
        return self._budget(), new_tokens - (self.taken or 0)

    def output_refusal(self, new_tokens: int) -> str | None:
        """Why a request of ``new_tokens`` (``base.OutputCapped``) cannot be asked: its thinking and
        answer budgets together past max_output."""
        thinking, answer = self._split(new_tokens)
        if thinking + max(1, answer) <= self.max_output:
            return None
        return f"thinking {thinking} + answer {answer} tokens exceed max_output {self.max_output}"

    def take_thinking(self, budget: int) -> str | None:
        """The API's budget_tokens takes the run's budget, where the settings allow it; each request's
        max_new_tokens holds it then (``fathom.run.runner``)."""
        if self.thinking == "off":
            return "the anthropic setting thinking=off turns thinking off, so no thinking budget is honoured"
        if isinstance(self.thinking, int) and self.thinking != budget:
            return (
                f"the anthropic setting thinking={self.thinking} and a thinking budget of {budget} disagree"
            )
        if budget < LEAST_THINKING:
            return f"Anthropic's least thinking budget is {LEAST_THINKING} tokens, not {budget}"
        if budget >= self.max_output:
            return f"a thinking budget of {budget} leaves no answer room below max_output ({self.max_output})"
        self.taken = budget
        return None


def _stops(request: Request) -> dict[str, Any]:
    stops = [stop for stop in request.stop if stop.strip()]  # the API refuses blank ones
    return {"stop_sequences": stops} if stops else {}


def _counted(reply: Any) -> int:
    value = getattr(reply, "input_tokens", None)
    if type(value) is not int or not 0 < value < MOST_TOKENS:
        raise Transient("the token count's reply has no input_tokens")
    return value


def _answered(reply: Any) -> tuple[str, str, int, str | None]:
    """The answer (the text blocks, joined; thinking blocks left out), the finish reason, the output
    tokens (thinking's included, as the API counts them) and the thinking blocks' text, joined (None
    where there is none: redacted thinking holds no text to keep)."""
    blocks = getattr(reply, "content", None)
    if not isinstance(blocks, list):
        raise Transient("the reply has no content blocks")
    texts = [getattr(block, "text", None) for block in blocks if getattr(block, "type", None) == "text"]
    answer = [text for text in texts if isinstance(text, str)]
    if len(answer) < len(texts):
        raise Transient("a text block of the reply has no text")
    stop = getattr(reply, "stop_reason", None)
    finish = FINISH.get(stop, stop) if isinstance(stop, str) else "unknown"
    produced = getattr(getattr(reply, "usage", None), "output_tokens", None)
    counted = produced if type(produced) is int and 0 <= produced < MOST_TOKENS else 0
    thought = [
        getattr(block, "thinking", None) for block in blocks if getattr(block, "type", None) == "thinking"
    ]
    reasoning = "\n".join(text for text in thought if isinstance(text, str)) or None
    return "".join(answer), finish, counted, reasoning
