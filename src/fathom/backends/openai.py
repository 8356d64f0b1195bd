"""OpenAI-compatible HTTP servers (vLLM, llama.cpp's server, hosted APIs): ``openai:MODEL@URL?...``.

The completions endpoint (the default) gets fathom's own templated prompt as text, so the model
reads what was counted; the count is exact when ``--tokenizer`` names the model's tokenizer, and
approximate (cl100k_base) otherwise. Pick the template with ``--template`` (chatml for SmolLM2 and
Qwen, say) since cl100k_base ships none. The chat endpoint gets messages that the server templates
itself, so its lengths are never exact. Scoring (log-probabilities of given text) always goes to
the completions endpoint, which echoes the prompt with each token's log-probability. ``jsonhttp``
speaks HTTP: every attempt has a deadline, every failure is classified (retried, refused for one
sample, or fatal), and the API key is scrubbed from every answer and error before any cut (each
text but the answer is cut to a stated limit; the answer is capped where it is recorded). Answers
are asked for at least one token (``min_tokens``), where the server takes it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import httpx
import numpy as np

from fathom.backends.base import (
    InputKind,
    Request,
    ScoreRequest,
    TokenScores,
    failed_scores,
    in_order,
    score_request,
    split_options,
    with_continuation,
)
from fathom.backends.jsonhttp import Failed, JsonApi, NotFound, Rejected, Transient
from fathom.backends.openai_replies import read_answer, reasoning_count, token_count
from fathom.backends.openai_target import read_target
from fathom.backends.reasoning import THINK_TAGS, reasoned, tags_setting
from fathom.backends.replies import FINISH_CHARS, finite_number
from fathom.backends.schedule import Intake, Plan, PrefixChunks, prefix_plan
from fathom.backends.settings import (
    MOST_CONTEXT,
    MOST_IN_FLIGHT,
    MOST_RETRIES,
    MOST_SECONDS,
    choice,
    count,
    number,
    parse_settings,
    refusal,
    text,
    whole,
)
from fathom.errors import FathomError
from fathom.prompts.haystack.index import Ids
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Completion, ErrorKind, FirstToken, error_kind

log = logging.getLogger(__name__)

APPROXIMATE = "cl100k_base"
# The most requests a caller that hands over lists (the judges, Ray's replicas) hands over at once (the
# runner hands over one iterator): a long run lets the schedule group the prompts that share a prefix
# and keep the window full up to the run's end.
RUN_REQUESTS = 4096
GREEDY = {"temperature": 0, "top_p": 1}
# At least one new token, so that an end of generation cannot come first (transformers' min_new_tokens,
# vLLM's min_tokens in process): vLLM's and llama.cpp's servers take min_tokens, OpenAI's own API
# refuses it. A server that refuses it is asked without it from then on, and says so (``_refused``).
MIN_TOKENS = "min_tokens"
FIRST_TOKEN = f"forced by {MIN_TOKENS}=1, unless the server refuses it (each record's first_token says)"
_SETTINGS = {
    "endpoint": choice("completions", "chat"),
    "prefill": choice("none", "continue"),
    # About twice the slots of a server serving long prompts (vLLM's KV cache holds a few 128k
    # sequences at once): requests beyond its slots wait in its queue, where what runs before them
    # can push the prefix they share out of its cache. Cheap to raise for a server with more slots.
    "concurrency": whole(32, least=1, most=MOST_IN_FLIGHT, unit="requests at a time"),
    "timeout": number(120.0, least=0.0, most=MOST_SECONDS, above=True, unit="seconds"),
    "retries": whole(5, least=1, most=MOST_RETRIES),
    "max_wait": number(600.0, least=0.0, most=MOST_SECONDS, above=True, unit="seconds"),
    "api_key_env": text("OPENAI_API_KEY", r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable's name"),
    "window": count(None, most=MOST_CONTEXT),
    "max_prompt": count(None, most=MOST_CONTEXT),
    "think_tags": THINK_TAGS,
}
Parsed = TypeVar("Parsed")
# Teacher forcing through the completions endpoint: the prompt echoed with each token's
# log-probability (OpenAI's legacy shape, which vLLM and llama.cpp's servers speak), then one new
# token, the fewest that all accept; min_tokens (theirs, not OpenAI's; sent until a server refuses
# it) keeps it from being EOS, which some echo leaves out, so the echo ends with an entry for it
# that marks the prompt's end.
ECHO = {"max_tokens": 1, "echo": True, "logprobs": 1, **GREEDY}
NO_PROMPT_LOGPROBS = (
    "the server returned no log-probabilities of the prompt's tokens (choices[0].logprobs with "
    "token_logprobs and text_offset, which echo asks for): score with a server that returns them, such "
    "as vLLM or llama-cpp-python's (python -m llama_cpp.server, with --logits_all true, its default), "
    "or with the llamacpp, hf or vllm backend"
)
# llama-cpp-python's server reads each echoed token's log-probability off the next position's row
# unless the prompt starts with BOS, and its echo then lacks the new token's entry; where the
# prompt's text itself starts with the BOS (SmolLM2's chat prompts), its offsets leave that text
# out. Either way its echo ends before the prompt does.
MISALIGNED_LOGPROBS = (
    "the server's echo of the prompt ends before the prompt does, so its log-probabilities cannot be "
    "matched to the prompt's tokens (llama-cpp-python's server does this for models that add no BOS): "
    "score this model with the llamacpp or hf backend"
)


class OpenAIBackend:
    """``openai:MODEL@BASE_URL?endpoint=completions|chat&prefill=none|continue&concurrency=32&
    timeout=120&retries=5&max_wait=600&api_key_env=OPENAI_API_KEY&window=8k&max_prompt=8k``.

    ``concurrency`` bounds the requests in flight; which go when is ``fathom.backends.schedule``'s:
    prompts that share a long prefix wait for one of them to be answered, so the server's prefix
    cache serves the rest."""

    requests_per_call = RUN_REQUESTS
    pulls_requests = True  # stream reads an iterator as its window has room (base.Pulling)

    def __init__(self, rest: str, tokenizer: str) -> None:
        target, given = split_options(rest)
        self.model, self.base_url = read_target(target)
        options = parse_settings("openai", _SETTINGS, given)
        if "prefill" in given and options["endpoint"] != "chat":
            raise refusal("openai", "prefill", given["prefill"], "left out unless endpoint=chat")
        self.name = f"openai:{self.model}@{self.base_url}"
        self.endpoint, self.prefill = options["endpoint"], options["prefill"]
        self.input: InputKind = "chat" if self.endpoint == "chat" else "text"
        if tokenizer == "auto":
            self.tokenizer, self.counted_by = load_tokenizer(APPROXIMATE), f"approximate: {APPROXIMATE}"
        else:
            self.tokenizer, self.counted_by = load_tokenizer(tokenizer), f"named: {tokenizer}"
        # Only fathom's own template over the named tokenizer is exact: a chat server re-templates.
        self.exact_lengths = tokenizer != "auto" and self.input == "text"
        self.concurrency: int = options["concurrency"]
        self.trained_window: int | None = options["window"]
        self.max_prompt_tokens: int | None = options["max_prompt"]
        self.api = JsonApi(
            self.base_url,
            self.model,
            key_env=options["api_key_env"],
            timeout=options["timeout"],
            retries=options["retries"],
            max_wait=options["max_wait"],
        )
        self.think_tags = options["think_tags"]
        self.min_tokens = True  # until the server refuses the field
        self._probe()

    def settings(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "endpoint": self.endpoint,
            # The completions prompt ends with the answer prefix itself; chat sends it or drops it.
            "prefill": self.prefill if self.input == "chat" else "in prompt",
            "counted_by": self.counted_by,
            "decoding": GREEDY,
            # Part of the identity, as it changes answers: a run from before it resumes only with
            # the fathom that began it.
            "first_token": FIRST_TOKEN,
            **tags_setting(self.think_tags),
        }

    def take_thinking(self, budget: int) -> str | None:
        """A budget is the larger max_tokens asked (thinking, then the answer's): servers take no
        budget of thinking apart, so the model spends the sum as it will."""
        return None

    def transport_settings(self) -> dict[str, Any]:
        """The transport settings (the registry entry's), as resolved: outside the identity."""
        api = self.api
        return {
            "concurrency": self.concurrency,
            "timeout": api.timeout,
            "retries": api.retries,
            "max_wait": api.max_wait,
            "api_key_env": api.key_env,
        }

    def stream(
        self, requests: Iterable[Request], plan: Plan | None = None
    ) -> Iterator[tuple[int, Completion]]:
        """Each completion, its continuation's log-probabilities read, as soon as it is done, with
        its index into ``requests`` (the order they are read in); a fatal error (bad key, wrong URL)
        stops the others and is raised. A sequence is sent as ``plan`` says: by default, grouped by
        the prefixes they share. Any other iterable is read lazily, as the window has room, and
        grouped a chunk at a time (``fathom.backends.schedule.Intake``)."""
        if isinstance(requests, Sequence):
            plan = plan or prefix_plan([request.ids for request in requests])
            return self.api.each(self._answer, requests, self.concurrency, plan)
        if plan is not None:
            raise ValueError("a plan is for a sequence of requests, whose indices it names")
        return self.api.drain(self._answer, Intake(requests, self.concurrency, PrefixChunks(_prompt_ids)))

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return in_order(self.stream(requests), len(requests))

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        return in_order(self.api.each(self._score, requests, self.concurrency), len(requests))

    def _probe(self) -> None:
        """Fail before any work when nothing answers at the URL or the key is refused; anything
        else is for the real requests to find out (some servers list no models)."""
        try:
            self.api.get("/models", min(self.api.timeout, 30.0))
        except Transient as exc:
            if exc.unreachable:
                raise FathomError(
                    f"no server answers at {self.base_url} ({exc.reason}): start it, or fix the URL"
                ) from None
        except (Rejected, NotFound):
            pass

    async def _answer(self, client: httpx.AsyncClient, request: Request) -> Completion:
        """The completion, with its continuation's log-probabilities where the request has one;
        the key scrubbed from every text a server could have put it in, then the finish reason cut
        (errors are cut as they are made, by ``jsonhttp``)."""
        completion = await self._complete(client, request)
        if request.continuation is not None and completion.error is None:
            ids = np.concatenate([request.ids, request.continuation])
            asked = score_request(self, request.sample_id, ids, len(request.ids))
            completion = with_continuation(completion, await self._score(client, asked))
        scrub = self.api.scrub
        return dataclasses.replace(
            completion,
            text=scrub(completion.text),
            finish_reason=self.api.bounded(completion.finish_reason, FINISH_CHARS),
            error=completion.error and scrub(completion.error),
            continuation_error=completion.continuation_error and scrub(completion.continuation_error),
        )

    async def _complete(self, client: httpx.AsyncClient, request: Request) -> Completion:
        chat = self.input == "chat"
        path = "/chat/completions" if chat else "/completions"
        body = self._body(request)
        try:
            read = functools.partial(read_answer, chat=chat)
            (text, finish, usage, timings, reasoning), latency, forced = await self._post(
                client, path, body, read
            )
        except Failed as failed:
            return Completion("", len(request.ids), 0, "error", failed.seconds, error=failed.error)
        prompt_tokens = token_count(usage, "prompt_tokens", len(request.ids))
        completion_tokens = token_count(usage, "completion_tokens", len(self.tokenizer.encode(text)))
        prefill, decode = timings
        # Nothing, stopped, in one token at most (servers differ in counting the end): the end came
        # first, whatever was asked (a server may take min_tokens and ignore it).
        ended = text == "" and finish == "stop" and completion_tokens <= 1
        completion = Completion(
            text,
            prompt_tokens,
            completion_tokens,
            finish,
            latency,
            prefill_s=prefill,
            decode_s=decode,
            first_token=FirstToken.of(forced, ended),
        )
        counted = reasoning_count(usage)
        return reasoned(completion, reasoning, self.tokenizer, self.think_tags, counted, self.api.key)

    async def _post(
        self, client: httpx.AsyncClient, path: str, body: dict[str, Any], read: Callable[[Any], Parsed]
    ) -> tuple[Parsed, float, bool]:
        """The server's parsed reply, its latency, and whether min_tokens was sent with it: a
        refusal of min_tokens drops the field for the rest of the run and asks again without it."""
        if self.min_tokens:
            body = {**body, MIN_TOKENS: 1}
        try:
            reply, latency = await self.api.post(client, path, body, read)
        except Failed as failed:
            if MIN_TOKENS not in body or not _refused(failed.error):
                raise
            self._drop_min_tokens(failed.error)
            return await self._post(client, path, {k: v for k, v in body.items() if k != MIN_TOKENS}, read)
        return reply, latency, MIN_TOKENS in body

    def _drop_min_tokens(self, error: str) -> None:
        """Ask without min_tokens from now on, and say so once (the requests in flight may each
        have been refused)."""
        if self.min_tokens:
            self.min_tokens = False
            log.warning(
                "the server at %s refused %s (%s): first tokens are not forced; a model that stops at "
                "once is counted as stopped before any token",
                self.base_url,
                MIN_TOKENS,
                error,
            )

    async def _score(self, client: httpx.AsyncClient, request: ScoreRequest) -> TokenScores:
        """The server's tokens from ``text_start`` on, from the prompt echoed with log-probabilities."""
        if request.text is None or request.text_start is None:
            raise ValueError(f"score request {request.sample_id} has no text for a text backend")
        if not 1 <= request.start < len(request.ids):
            raise ValueError(f"cannot score from token {request.start} of {len(request.ids)}")
        prompt = self._without_bos(request.text)
        text_start = request.text_start - (len(request.text) - len(prompt))
        body = {"model": self.model, "prompt": prompt, **ECHO}
        try:
            (offsets, values, finish), latency, _ = await self._post(client, "/completions", body, _echoed)
        except Failed as failed:
            return failed_scores(failed.error, failed.seconds)
        # A reply that ran to its one new token (not EOS: see ECHO) lists that token last, at the
        # prompt's end. Offsets are taken relative to that end, which drops the BOS text that
        # vLLM counts before the prompt.
        shift = offsets[-1] - len(prompt) if finish == "length" and offsets else 0
        if shift < 0:
            raise FathomError(MISALIGNED_LOGPROBS)
        kept = [i for i, at in enumerate(offsets) if text_start <= at - shift < len(prompt)]
        if not kept:
            error = ErrorKind.NO_LOGPROBS.error(f"the server listed no token from character {text_start} on")
            return failed_scores(error, latency)
        missing = [offsets[i] for i in kept if values[i] is None]
        if missing:
            error = ErrorKind.NO_LOGPROBS.error(
                f"the server gave no log-probability for its token at character {missing[0]}"
            )
            return failed_scores(error, latency)
        return TokenScores(np.asarray([values[i] for i in kept], dtype=np.float64), kept[0], latency)

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max(1, request.max_new_tokens), **GREEDY}
        if request.stop:
            body["stop"] = list(request.stop)
        if self.input == "text":
            text = request.text if request.text is not None else self.tokenizer.decode(request.ids.tolist())
            return {**body, "prompt": self._without_bos(text)}
        if request.chat is None:
            raise ValueError(f"request {request.sample_id} has no chat messages for the chat endpoint")
        chat = request.chat
        messages = [{"role": "system", "content": chat.system}] if chat.system else []
        messages += [{"role": role, "content": content} for role, content in chat.turns]
        messages.append({"role": "user", "content": chat.user})
        if self.prefill == "continue" and chat.prefill:
            # vLLM's extension: continue the assistant's open message rather than start a new turn.
            messages.append({"role": "assistant", "content": chat.prefill})
            body.update(continue_final_message=True, add_generation_prompt=False)
        return {**body, "messages": messages}

    def _without_bos(self, text: str) -> str:
        bos = self.tokenizer.bos_token
        # Servers put BOS before the text they tokenise, as the model's tokenizer says to: the
        # prompt's own copy would make two.
        if self.tokenizer.bos_id is not None and bos and text.startswith(bos):
            return text[len(bos) :]
        return text


def _echoed(reply: Any) -> tuple[list[int], list[float | None], str]:
    """Where each echoed token starts in the prompt, its log-probability (None where the server
    gave none, or no finite number), and the finish reason."""
    try:
        choice = reply["choices"][0]
        logprobs, finish = choice.get("logprobs"), choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise Transient("the reply has no choices[0]") from None
    logprobs = logprobs if isinstance(logprobs, dict) else {}
    offsets, values = logprobs.get("text_offset"), logprobs.get("token_logprobs")
    if not (
        isinstance(offsets, list)
        and isinstance(values, list)
        and len(offsets) == len(values)
        and all(isinstance(at, int) for at in offsets)
        and all(value is None or isinstance(value, int | float) for value in values)
    ):
        raise FathomError(NO_PROMPT_LOGPROBS)
    return offsets, [finite_number(value) for value in values], str(finish)


def _prompt_ids(request: Request) -> Ids:
    return request.ids


def _refused(error: str) -> bool:
    """Whether a request's error is the server refusing min_tokens (OpenAI: HTTP 400 "Unrecognized
    request argument supplied: min_tokens"; a strict server: 422, naming the field)."""
    return error_kind(error) == ErrorKind.REJECTED and MIN_TOKENS in error
