"""OpenAI-compatible HTTP servers (vLLM, llama.cpp's server, hosted APIs): ``openai:MODEL@URL?...``.

The completions endpoint (the default) gets fathom's own templated prompt as text, so the model
reads what was counted; the count is exact when ``--tokenizer`` names the model's tokenizer, and
approximate (cl100k_base) otherwise. Pick the template with ``--template`` (chatml for SmolLM2 and
Qwen, say) since cl100k_base ships none. The chat endpoint gets messages that the server templates
itself, so its lengths are never exact. Scoring (log-probabilities of given text) always goes to
the completions endpoint, which echoes the prompt with each token's log-probability. Only the
standard library speaks HTTP: no client dependency, and every failure is classified here:
retried, refused for one sample, or fatal.
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import json
import os
import random
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np

from fathom.backends.base import (
    InputKind,
    Request,
    ScoreRequest,
    TokenScores,
    attach_continuations,
    failed_scores,
    split_options,
)
from fathom.errors import FathomError, SpecError
from fathom.records import Completion
from fathom.tokenizers import load_tokenizer
from fathom.units import parse_count

# The wait before retry n is uniform in [0, min(CAP, BASE * 2**n)] ("full jitter"), so workers that
# failed together on one overloaded server do not all come back together. Tests shrink BASE.
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
_jitter = random.Random()

APPROXIMATE = "cl100k_base"
GREEDY = {"temperature": 0, "top_p": 1}
_TARGET = re.compile(r"^(?P<model>.+?)@(?P<url>https?://.+)$")
_DEFAULTS = {
    "endpoint": "completions",
    "prefill": "none",
    "concurrency": "4",
    "timeout": "120",
    "retries": "5",
    "max_wait": "600",
    "api_key_env": "OPENAI_API_KEY",
    "window": "",
    "max_prompt": "",
}
_CHOICES = {"endpoint": ("completions", "chat"), "prefill": ("none", "continue")}
# Every 5xx too: the statuses the official OpenAI client retries, since the next attempt may pass.
_RETRIED_STATUS = {408, 409, 429}
T = TypeVar("T", int, float)
Item = TypeVar("Item")
Result = TypeVar("Result")
# Teacher forcing through the completions endpoint: the prompt echoed with each token's
# log-probability (OpenAI's legacy shape, which vLLM and llama.cpp's servers speak), then one new
# token, the fewest that all accept; min_tokens (theirs, not OpenAI's) keeps it from being EOS,
# which some echo leaves out, so the echo ends with an entry for it that marks the prompt's end.
ECHO = {"max_tokens": 1, "min_tokens": 1, "echo": True, "logprobs": 1, **GREEDY}
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


class _Transient(Exception):
    """A failure the next attempt may not repeat. ``retry_after`` is the wait the server asked
    for; ``unreachable`` means no connection was made at all."""

    def __init__(self, reason: str, retry_after: float | None = None, unreachable: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.retry_after, self.unreachable = reason, retry_after, unreachable


class _Rejected(Exception):
    """The server refused this one request (a 400 for a prompt too long, say): it would again."""


class _Failed(Exception):
    """A request that this run will not get through: its error for the record, and the time spent."""

    def __init__(self, error: str, seconds: float) -> None:
        super().__init__(error)
        self.error, self.seconds = error, seconds


class _KeyRefused(FathomError):
    """HTTP 401 or 403: no request of the run can pass."""


class _NotFound(FathomError):
    """HTTP 404: the URL or the model name is wrong, for every request of the run."""


class OpenAIBackend:
    """``openai:MODEL@BASE_URL?endpoint=completions|chat&prefill=none|continue&concurrency=4&
    timeout=120&retries=5&max_wait=600&api_key_env=OPENAI_API_KEY&window=8k&max_prompt=8k``."""

    def __init__(self, rest: str, tokenizer: str) -> None:
        target, given = split_options(rest)
        self.model, self.base_url = _target(target)
        options = _options(given)
        self.name = f"openai:{self.model}@{self.base_url}"
        self.endpoint, self.prefill = options["endpoint"], options["prefill"]
        self.input: InputKind = "chat" if self.endpoint == "chat" else "text"
        if tokenizer == "auto":
            self.tokenizer, self.counted_by = load_tokenizer(APPROXIMATE), f"approximate: {APPROXIMATE}"
        else:
            self.tokenizer, self.counted_by = load_tokenizer(tokenizer), f"named: {tokenizer}"
        # Only fathom's own template over the named tokenizer is exact: a chat server re-templates.
        self.exact_lengths = tokenizer != "auto" and self.input == "text"
        self.concurrency = _number(options, "concurrency", int)
        self.timeout = _number(options, "timeout", float)
        self.retries = _number(options, "retries", int)
        self.max_wait = _number(options, "max_wait", float)
        self.trained_window = parse_count(options["window"]) if options["window"] else None
        self.max_prompt_tokens = parse_count(options["max_prompt"]) if options["max_prompt"] else None
        self.key_env = options["api_key_env"]
        self._key = os.environ.get(self.key_env) or None  # never stored anywhere but here
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
            "concurrency": self.concurrency,
            "timeout_s": self.timeout,
            "retries": self.retries,
            "max_wait_s": self.max_wait,
        }

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return attach_continuations(self, requests, self._map(self._complete, requests))

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        return self._map(self._score, requests)

    def _map(self, work: Callable[[Item, threading.Event], Result], items: Sequence[Item]) -> list[Result]:
        """``work`` on every item, ``concurrency`` at a time, results in order; a fatal error in
        any (bad key, wrong URL) stops the others and is raised."""
        stop = threading.Event()
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="fathom-openai")
        try:
            futures = [pool.submit(work, item, stop) for item in items]
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future.done() and future.exception() is not None:
                    future.result()
            return [future.result() for future in futures]
        finally:
            # After a fatal error or Ctrl-C, the other workers must not sit out their retries.
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def _probe(self) -> None:
        """Fail before any work when nothing answers at the URL or the key is refused; anything
        else is for the real requests to find out (some servers list no models)."""
        try:
            self._call("GET", "/models", None, min(self.timeout, 30.0))
        except _Transient as exc:
            if exc.unreachable:
                raise FathomError(
                    f"no server answers at {self.base_url} ({exc.reason}): start it, or fix the URL"
                ) from None
        except (_Rejected, _NotFound):
            pass

    def _complete(self, request: Request, stop: threading.Event) -> Completion:
        chat = self.input == "chat"
        path = "/chat/completions" if chat else "/completions"
        try:
            read = functools.partial(_parse, chat=chat)
            (text, finish, usage), latency = self._post(path, self._body(request), stop, read)
        except _Failed as failed:
            return Completion("", len(request.ids), 0, "error", failed.seconds, error=failed.error)
        prompt_tokens = _count(usage, "prompt_tokens", len(request.ids))
        completion_tokens = _count(usage, "completion_tokens", len(self.tokenizer.encode(text)))
        return Completion(text, prompt_tokens, completion_tokens, finish, latency)

    def _score(self, request: ScoreRequest, stop: threading.Event) -> TokenScores:
        """The server's tokens from ``text_start`` on, from the prompt echoed with log-probabilities."""
        if request.text is None or request.text_start is None:
            raise ValueError(f"score request {request.sample_id} has no text for a text backend")
        if not 1 <= request.start < len(request.ids):
            raise ValueError(f"cannot score from token {request.start} of {len(request.ids)}")
        prompt = self._without_bos(request.text)
        text_start = request.text_start - (len(request.text) - len(prompt))
        body = {"model": self.model, "prompt": prompt, **ECHO}
        try:
            (offsets, values, finish), latency = self._post("/completions", body, stop, _echoed)
        except _Failed as failed:
            return failed_scores(failed.error, failed.seconds)
        # A reply that ran to its one new token (not EOS: see ECHO) lists that token last, at the
        # prompt's end. Offsets are taken relative to that end, which drops the BOS text that
        # vLLM counts before the prompt.
        shift = offsets[-1] - len(prompt) if finish == "length" and offsets else 0
        if shift < 0:
            raise FathomError(MISALIGNED_LOGPROBS)
        kept = [i for i, at in enumerate(offsets) if text_start <= at - shift < len(prompt)]
        if not kept:
            error = f"no_logprobs: the server listed no token from character {text_start} on"
            return failed_scores(error, latency)
        missing = [offsets[i] for i in kept if values[i] is None]
        if missing:
            error = f"no_logprobs: the server gave no log-probability for its token at character {missing[0]}"
            return failed_scores(error, latency)
        return TokenScores(np.asarray([values[i] for i in kept], dtype=np.float64), kept[0], latency)

    def _post(
        self, path: str, body: dict[str, Any], stop: threading.Event, read: Callable[[Any], Result]
    ) -> tuple[Result, float]:
        """``read`` of the reply and the answering attempt's latency (the model's time, not our
        backoff's), retried with backoff until it succeeds, its attempts or time run out, or
        another request hit a fatal error; _Failed then, and for a refusal."""
        started = time.monotonic()
        reason, attempts = "stopped before the first attempt", 0
        while attempts < self.retries and not stop.is_set():
            sent, attempts = time.monotonic(), attempts + 1
            try:
                return read(self._call("POST", path, body, self.timeout)), time.monotonic() - sent
            except _Transient as exc:
                reason = exc.reason
                delay = _backoff(attempts - 1, exc.retry_after)
                out_of_time = time.monotonic() + delay > started + self.max_wait
                if attempts == self.retries or out_of_time or stop.wait(delay):
                    break
            except _Rejected as exc:
                raise _Failed(f"rejected: {self._scrub(str(exc))}", time.monotonic() - started) from None
        tried = f"{attempts} attempt{'s' * (attempts != 1)}"
        raise _Failed(f"backend_error: {self._scrub(reason)} ({tried})", time.monotonic() - started)

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

    def _call(self, method: str, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
        """One HTTP exchange and its JSON, or _Transient, _Rejected or a fatal FathomError."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc, path) from None
        except (OSError, http.client.HTTPException) as exc:
            # urllib wraps only failures to connect and send in URLError.
            unreachable = isinstance(exc, urllib.error.URLError)
            raise _Transient(_describe(exc, timeout), unreachable=unreachable) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise _Transient(f"malformed JSON in a reply of {len(raw)} bytes") from None

    def _http_error(self, exc: urllib.error.HTTPError, path: str) -> Exception:
        status = exc.code
        if status in (401, 403):
            doing = f"refused the API key in ${self.key_env}" if self._key else "wants an API key"
            return _KeyRefused(f"the server {doing} (HTTP {status}): set ${self.key_env} to a key it accepts")
        if status == 404:
            return _NotFound(
                f"no such endpoint or model at {self.base_url}{path} (HTTP 404): check that the URL "
                f"ends in /v1 and that the server serves the model '{self.model}'"
            )
        if status in _RETRIED_STATUS or status >= 500:
            return _Transient(f"HTTP {status}", _retry_after(exc.headers.get("Retry-After")))
        return _Rejected(f"HTTP {status}: {_server_message(exc)}")

    def _scrub(self, text: str) -> str:
        """Errors quote the server; a server that echoes the key must not put it in a record."""
        return text.replace(self._key, "[API key]") if self._key else text


def _target(target: str) -> tuple[str, str]:
    match = _TARGET.match(target)
    if not match:
        raise SpecError(
            f"cannot read 'openai:{target}': write openai:MODEL@BASE_URL, e.g. "
            "openai:smollm2@http://127.0.0.1:8000/v1"
        )
    url = match["url"].rstrip("/")
    if "@" in urlsplit(url).netloc:
        # The URL goes into the manifest; the key must not.
        raise SpecError("put no credentials in the URL: give the key in $OPENAI_API_KEY (see api_key_env)")
    return match["model"], url


def _options(given: dict[str, str]) -> dict[str, str]:
    unknown = sorted(set(given) - set(_DEFAULTS))
    if unknown:
        raise SpecError(f"openai: has no setting '{unknown[0]}': its settings are {', '.join(_DEFAULTS)}")
    options = {**_DEFAULTS, **given}
    for key, allowed in _CHOICES.items():
        if options[key] not in allowed:
            raise SpecError(f"openai: setting {key}={options[key]} must be one of {', '.join(allowed)}")
    if "prefill" in given and options["endpoint"] != "chat":
        raise SpecError("openai: prefill applies to endpoint=chat; completions prompts end with the prefix")
    return options


def _number(options: dict[str, str], key: str, kind: type[T]) -> T:
    try:
        value = kind(options[key])
    except ValueError:
        value = kind(0)
    if value <= 0:
        raise SpecError(f"openai: setting {key} needs a positive {kind.__name__}, not '{options[key]}'")
    return value


def _parse(reply: Any, chat: bool) -> tuple[str, str, dict[str, Any]]:
    """Text, finish reason and usage of a reply; a reply without them is worth another try."""
    try:
        choice = reply["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
    except (KeyError, IndexError, TypeError):
        raise _Transient("the reply has no choices[0] text") from None
    if chat and text is None:
        text = ""  # a chat model may answer with no content at all: that is its answer
    if not isinstance(text, str):
        raise _Transient("the reply's text is not a string")
    usage = reply.get("usage")
    return text, str(choice.get("finish_reason") or "unknown"), usage if isinstance(usage, dict) else {}


def _echoed(reply: Any) -> tuple[list[int], list[float | None], str]:
    """Where each echoed token starts in the prompt, its log-probability, and the finish reason."""
    try:
        choice = reply["choices"][0]
        logprobs, finish = choice.get("logprobs"), choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise _Transient("the reply has no choices[0]") from None
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
    return offsets, values, str(finish)


def _count(usage: dict[str, Any], key: str, fallback: int) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) else fallback


def _backoff(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return retry_after
    return _jitter.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds, from a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _describe(exc: BaseException, timeout: float) -> str:
    # urllib wraps a failure to connect in URLError; its reason says which.
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    cause = reason if isinstance(reason, BaseException) else exc
    if isinstance(cause, TimeoutError):
        return f"no reply within {timeout:g} s"
    return f"{type(cause).__name__}: {cause}"[:160]


def _server_message(exc: urllib.error.HTTPError) -> str:
    """The server's own words for a refusal, e.g. vLLM's 'maximum context length is ...'."""
    try:
        raw = exc.read()
    except (OSError, http.client.HTTPException):
        return "no message"
    try:
        data = json.loads(raw)
        error = data.get("error", data.get("detail", data)) if isinstance(data, dict) else data
        message = error.get("message", error) if isinstance(error, dict) else error
    except ValueError:
        message = raw.decode("utf-8", "replace")
    return " ".join(str(message).split())[:200]
