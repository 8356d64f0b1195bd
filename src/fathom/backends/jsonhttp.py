"""One server's JSON API over HTTP, with only the standard library: every failure is classified as
retried (with backoff), refused for one request, or fatal for the run, and an API key never leaves
the request headers (errors that quote the server have it scrubbed).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from fathom.errors import FathomError

# The wait before retry n is uniform in [0, min(CAP, BASE * 2**n)] ("full jitter"), so workers that
# failed together on one overloaded server do not all come back together. Tests shrink BASE.
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
_jitter = random.Random()

# Every 5xx too: the statuses the official OpenAI client retries, since the next attempt may pass.
_RETRIED_STATUS = {408, 409, 429}
Result = TypeVar("Result")


class Transient(Exception):
    """A failure the next attempt may not repeat. ``retry_after`` is the wait the server asked
    for; ``unreachable`` means no connection was made at all."""

    def __init__(self, reason: str, retry_after: float | None = None, unreachable: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.retry_after, self.unreachable = reason, retry_after, unreachable


class Rejected(Exception):
    """The server refused this one request (a 400 for a prompt too long, say): it would again."""


class Failed(Exception):
    """A request that this run will not get through: its error for the record, and the time spent."""

    def __init__(self, error: str, seconds: float) -> None:
        super().__init__(error)
        self.error, self.seconds = error, seconds


class KeyRefused(FathomError):
    """HTTP 401 or 403: no request of the run can pass."""


class NotFound(FathomError):
    """HTTP 404: the URL or the model name is wrong, for every request of the run."""


class JsonApi:
    """Calls to ``base_url`` as the API key in ``$key_env`` (if set) allows, serving ``model``."""

    def __init__(
        self, base_url: str, model: str, key_env: str, timeout: float, retries: int, max_wait: float
    ) -> None:
        self.base_url, self.model, self.key_env = base_url, model, key_env
        self.timeout, self.retries, self.max_wait = timeout, retries, max_wait
        self._key = os.environ.get(key_env) or None  # never stored anywhere but here

    def post(
        self, path: str, body: dict[str, Any], stop: threading.Event, read: Callable[[Any], Result]
    ) -> tuple[Result, float]:
        """``read`` of the reply and the answering attempt's latency (the model's time, not our
        backoff's), retried with backoff until it succeeds, its attempts or time run out, or
        another request hit a fatal error; Failed then, and for a refusal."""
        started = time.monotonic()
        reason, attempts = "stopped before the first attempt", 0
        while attempts < self.retries and not stop.is_set():
            sent, attempts = time.monotonic(), attempts + 1
            try:
                return read(self.call("POST", path, body, self.timeout)), time.monotonic() - sent
            except Transient as exc:
                reason = exc.reason
                delay = _backoff(attempts - 1, exc.retry_after)
                out_of_time = time.monotonic() + delay > started + self.max_wait
                if attempts == self.retries or out_of_time or stop.wait(delay):
                    break
            except Rejected as exc:
                raise Failed(f"rejected: {self.scrub(str(exc))}", time.monotonic() - started) from None
        tried = f"{attempts} attempt{'s' * (attempts != 1)}"
        raise Failed(f"backend_error: {self.scrub(reason)} ({tried})", time.monotonic() - started)

    def call(self, method: str, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
        """One HTTP exchange and its JSON, or Transient, Rejected or a fatal FathomError."""
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
            raise Transient(_describe(exc, timeout), unreachable=unreachable) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise Transient(f"malformed JSON in a reply of {len(raw)} bytes") from None

    def _http_error(self, exc: urllib.error.HTTPError, path: str) -> Exception:
        status = exc.code
        if status in (401, 403):
            doing = f"refused the API key in ${self.key_env}" if self._key else "wants an API key"
            return KeyRefused(f"the server {doing} (HTTP {status}): set ${self.key_env} to a key it accepts")
        if status == 404:
            return NotFound(
                f"no such endpoint or model at {self.base_url}{path} (HTTP 404): check that the URL "
                f"ends in /v1 and that the server serves the model '{self.model}'"
            )
        if status in _RETRIED_STATUS or status >= 500:
            return Transient(f"HTTP {status}", _retry_after(exc.headers.get("Retry-After")))
        return Rejected(f"HTTP {status}: {_server_message(exc)}")

    def scrub(self, text: str) -> str:
        """Errors quote the server; a server that echoes the key must not put it in a record."""
        return text.replace(self._key, "[API key]") if self._key else text


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
