"""One server's JSON API over HTTP (httpx, on an event loop of its own): every failure is classified
as retried (with backoff), refused for one request, or fatal for the run; every attempt has a
wall-clock deadline and every request a bound on all its attempts together; and an API key never
leaves the request headers (messages that quote the server or the client have it scrubbed, then are
cut: ``fathom.backends.replies``). Replies are read with non-finite numbers as absent.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import os
import queue
import random
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

import httpx

from fathom.backends.replies import KEY_REMOVED as KEY_REMOVED
from fathom.backends.replies import MESSAGE_CHARS, TRANSPORT_CHARS, bounded, finite_json, scrub
from fathom.backends.schedule import Intake, Plan, in_order
from fathom.errors import FathomError
from fathom.records import ErrorKind

# The wait before retry n is uniform in [0, min(CAP, BASE * 2**n)] ("full jitter"), so workers that
# failed together on one overloaded server do not all come back together. Tests shrink BASE.
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
_jitter = random.Random()

# No answer to a request capped by max_tokens comes near this; a server that sends more is broken or
# hostile, and reading on would only fill memory.
MAX_REPLY_BYTES = 8 * 2**20

# httpcore's pool scans every connection it holds for every request, at every event: a window of
# hundreds through one pool would cost milliseconds a request. So each request in flight holds a
# seat, and seat s goes through client s // LANE: no pool holds more than LANE connections.
LANE = 16

# Every 5xx too: the statuses the official OpenAI client retries, since the next attempt may pass.
_RETRIED_STATUS = {408, 409, 429}
Item = TypeVar("Item")
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
        self,
        base_url: str,
        model: str,
        key_env: str,
        timeout: float,
        retries: int,
        max_wait: float,
        bearer: bool = True,
    ) -> None:
        self.base_url, self.model, self.key_env = base_url, model, key_env
        self.timeout, self.retries, self.max_wait = timeout, retries, max_wait
        self._key = os.environ.get(key_env) or None  # never stored anywhere but here
        # False: the caller's client puts the key where its API wants it (Anthropic's x-api-key).
        self.bearer = bearer

    @property
    def key(self) -> str | None:
        """The key, for a client that sends it itself (``bearer=False``): read, never kept."""
        return self._key

    def each(
        self,
        work: Callable[[httpx.AsyncClient, Item], Awaitable[Result]],
        items: Sequence[Item],
        concurrency: int,
        plan: Plan | None = None,
    ) -> Iterator[tuple[int, Result]]:
        """``(index, work(client, item))`` for every item as it finishes, at most ``concurrency`` in
        flight, sent as ``plan`` says (by default in their order, none waiting): ``drain`` of them."""
        if not items:
            return iter(())
        return self.drain(work, Intake.planned(items, plan or in_order(len(items)), concurrency))

    def drain(
        self, work: Callable[[httpx.AsyncClient, Item], Awaitable[Result]], intake: Intake[Item]
    ) -> Iterator[tuple[int, Result]]:
        """``(index, work(client, item))`` for every item of ``intake`` as it finishes, sent as its
        window has room (its items read as it says). The first exception stops the others and is
        raised; closing the iterator (Ctrl-C included) cancels the requests in flight.

        The event loop runs in a thread of its own, so deadlines keep counting and replies keep
        arriving while the caller handles a result, and a caller inside an event loop of its own
        (a notebook) can call it too."""
        outbox: queue.Queue[tuple[int, Result] | BaseException | None] = queue.Queue()
        loop = asyncio.new_event_loop()
        task = loop.create_task(self._all(work, intake, outbox.put))
        thread = threading.Thread(target=_drive, args=(loop, task, outbox), name="fathom-http", daemon=True)
        thread.start()
        try:
            while (got := outbox.get()) is not None:
                if isinstance(got, BaseException):
                    raise got
                yield got
        finally:
            loop.call_soon_threadsafe(task.cancel)  # a no-op once the task is done
            thread.join()
            loop.close()

    async def _all(
        self,
        work: Callable[[httpx.AsyncClient, Item], Awaitable[Result]],
        intake: Intake[Item],
        put: Callable[[tuple[int, Result]], None],
    ) -> None:
        # A request is in flight for all its attempts and backoffs: max_wait counts from the first
        # attempt, not from the moment a request joined the queue. A task exists only while its
        # request is in flight, so a long run costs no more than its window.
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        running: set[asyncio.Task[None]] = set()
        loop, window = asyncio.get_running_loop(), intake.window
        seats = list(reversed(range(window.size)))  # free ones: the lowest (and its connection) first

        async def one(client: httpx.AsyncClient, index: int) -> None:
            put((index, await work(client, intake.item(index))))
            intake.answered(index)  # its followers may go: the server holds its prompt's prefix

        def ended(seat: int, task: asyncio.Task[None]) -> None:
            running.discard(task)
            seats.append(seat)
            if finished.done() or task.cancelled():
                return
            if (exc := task.exception()) is not None:
                finished.set_exception(exc)
            else:
                send()

        def send() -> None:
            if finished.done():
                return
            for index in intake.take(len(running)):
                seat = seats.pop()
                task = asyncio.create_task(one(clients[seat // LANE], index))
                running.add(task)
                task.add_done_callback(functools.partial(ended, seat))
            if intake.failure is not None:
                finished.set_exception(intake.failure)
            elif not running and intake.finished:
                finished.set_result(None)
            elif not running and intake.stuck:  # none in flight, none free to go: it never would
                finished.set_exception(ValueError(f"the plan holds back {window.left} requests for good"))

        def post(arrived: Callable[[], None]) -> None:
            """Runs ``arrived`` (the intake's, from its reader's thread) on the loop, then sends."""

            def run() -> None:
                arrived()
                send()

            with contextlib.suppress(RuntimeError):  # the loop is closed: the stream is over
                loop.call_soon_threadsafe(run)

        async with contextlib.AsyncExitStack() as stack:
            # One TLS context for all: each costs tens of milliseconds to make (it reads the CA bundle).
            tls, lane = httpx.create_ssl_context(), min(LANE, window.size)
            lanes = range(0, window.size, LANE)
            clients = [await stack.enter_async_context(self._client(lane, tls)) for _ in lanes]
            intake.start(post)
            send()
            try:
                await finished
            finally:
                intake.close()
                # A fatal error, or a caller gone: the other requests must not sit out their retries.
                for task in running:
                    task.cancel()
                await asyncio.gather(*running, return_exceptions=True)

    def _client(self, concurrency: int, tls: ssl.SSLContext) -> httpx.AsyncClient:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key and self.bearer:
            headers["Authorization"] = f"Bearer {self._key}"
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        # No httpx timeouts: theirs bound each read, which a reply dripped a byte at a time never
        # trips. Each attempt's deadline (in call) bounds the whole exchange instead.
        return httpx.AsyncClient(headers=headers, timeout=None, limits=limits, verify=tls)

    def get(self, path: str, timeout: float) -> Any:
        """One GET, not retried: its JSON, or what ``call`` raises."""

        async def once(client: httpx.AsyncClient, _: None) -> Any:
            return await self.call(client, "GET", path, None, timeout)

        ((_, reply),) = self.each(once, [None], 1)
        return reply

    async def post(
        self, client: httpx.AsyncClient, path: str, body: dict[str, Any], read: Callable[[Any], Result]
    ) -> tuple[Result, float]:
        """``read`` of the reply and the answering attempt's latency (the model's time, not our
        backoff's), retried with backoff until it succeeds or its attempts or ``max_wait`` run out;
        Failed then, and for a refusal. No attempt runs past ``max_wait``."""

        async def once(deadline: float) -> Any:
            return await self.call(client, "POST", path, body, deadline)

        return await self.retried(once, read)

    async def retried(
        self, once: Callable[[float], Awaitable[Any]], read: Callable[[Any], Result]
    ) -> tuple[Result, float]:
        """``post``'s attempts, each ``once(deadline)`` (one exchange within ``deadline`` seconds,
        raising Transient, Rejected or a fatal FathomError as ``call`` does), for any client."""
        started = time.monotonic()
        give_up = started + self.max_wait
        reason, attempts = "max_wait ran out before the first attempt", 0
        while attempts < self.retries and (left := give_up - time.monotonic()) > 0:
            sent, attempts = time.monotonic(), attempts + 1
            try:
                reply = await once(min(self.timeout, left))
                return read(reply), time.monotonic() - sent
            except Transient as exc:
                reason = exc.reason
                delay = _backoff(attempts - 1, exc.retry_after)
                if attempts == self.retries or time.monotonic() + delay >= give_up:
                    break
                await asyncio.sleep(delay)
            except Rejected as exc:
                raise Failed(ErrorKind.REJECTED.error(str(exc)), time.monotonic() - started) from None
        tried = f"{attempts} attempt{'s' * (attempts != 1)}"
        raise Failed(ErrorKind.BACKEND_ERROR.error(f"{reason} ({tried})"), time.monotonic() - started)

    async def call(
        self, client: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None, deadline: float
    ) -> Any:
        """One HTTP exchange, all of it (connect, send, the whole reply) within ``deadline``
        seconds, and its JSON; or Transient, Rejected or a fatal FathomError."""
        content = None if body is None else json.dumps(body).encode()
        try:
            async with asyncio.timeout(deadline):
                async with client.stream(method, self.base_url + path, content=content) as response:
                    refused = self.refusal(response.status_code, response.headers.get("Retry-After"), path)
                    if refused is not None:
                        raise refused
                    raw = await read_capped(response)
        except TimeoutError:
            raise Transient(f"timeout: no complete reply within {deadline:.3g} s") from None
        except httpx.RequestError as exc:  # the connection, the protocol, or a body that does not decode
            described = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise Transient(
                self.bounded(described, TRANSPORT_CHARS), unreachable=isinstance(exc, httpx.ConnectError)
            ) from None
        if not response.is_success:
            message = self.bounded(server_message(raw), MESSAGE_CHARS)
            raise Rejected(f"HTTP {response.status_code}: {message}")
        try:
            return finite_json(raw)
        except (ValueError, RecursionError):  # RecursionError: JSON nested past the parser's stack
            raise Transient(f"malformed JSON in a reply of {len(raw)} bytes") from None

    def refusal(self, status: int, retry_after: str | None, path: str) -> Exception | None:
        """What a status says before the body is read; None where the body is wanted (an answer,
        or a refusal's own words). ``retry_after``: the reply's Retry-After header."""
        if status in (401, 403):
            doing = f"refused the API key in ${self.key_env}" if self._key else "wants an API key"
            return KeyRefused(f"the server {doing} (HTTP {status}): set ${self.key_env} to a key it accepts")
        if status == 404:
            return NotFound(
                f"no such endpoint or model at {self.base_url}{path} (HTTP 404): check that the URL "
                f"ends in /v1 and that the server serves the model '{self.model}'"
            )
        if status in _RETRIED_STATUS or status >= 500:
            return Transient(f"HTTP {status}", _retry_after(retry_after))
        return None

    def scrub(self, text: str) -> str:
        """Replies and errors quote the server; a server that echoes the key must not put it in a
        record, nor in a message."""
        return scrub(text, self._key)

    def bounded(self, text: str, limit: int) -> str:
        """``text`` scrubbed of the key, then cut to ``limit`` characters: never cut first, which
        could leave the key's start at the cut."""
        return bounded(text, limit, self._key)


def _drive(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None], outbox: queue.Queue[Any]) -> None:
    """Runs ``task`` on ``loop`` (in this thread), then hands its end, or its exception, to the
    caller's side."""
    try:
        loop.run_until_complete(task)
        outbox.put(None)
    except BaseException as exc:  # the caller raises it, whatever it is
        outbox.put(exc)
    finally:
        # Not shutdown_default_executor, as asyncio.run does: it would wait out a name lookup that
        # hangs, and Ctrl-C with it. loop.close, on the caller's side, leaves that lookup behind.
        loop.run_until_complete(loop.shutdown_asyncgens())


async def read_capped(response: httpx.Response) -> bytes:
    """The body, decoded, up to MAX_REPLY_BYTES."""
    raw = bytearray()
    async for chunk in response.aiter_bytes():
        raw += chunk
        if len(raw) > MAX_REPLY_BYTES:
            # Rejected, not retried: greedy decoding would send the same reply again, and every
            # attempt would read another MAX_REPLY_BYTES for nothing.
            raise Rejected(
                f"the reply is over {MAX_REPLY_BYTES >> 20} MiB, far more than an answer of max_tokens "
                "tokens: check what the server sends"
            )
    return bytes(raw)


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


def server_message(raw: bytes) -> str:
    """The server's own words for a refusal, e.g. vLLM's 'maximum context length is ...', whole:
    the caller scrubs, then cuts."""
    try:
        data = finite_json(raw)
        error = data.get("error", data.get("detail", data)) if isinstance(data, dict) else data
        message = error.get("message", error) if isinstance(error, dict) else error
    except (ValueError, RecursionError):
        message = raw.decode("utf-8", "replace")
    return " ".join(str(message).split()) or "no message"
