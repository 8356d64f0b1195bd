"""The official Anthropic SDK as the anthropic backend calls it: its client builds each request
(headers, API version, body) and reads each reply into its types, and ``jsonhttp`` carries them.

The SDK's own retries are off (``max_retries=0``) and its own HTTP client is given a transport that
hands each request to the httpx client of ``JsonApi``'s window (``_Bridge``): so the Messages API is
asked under the policy every HTTP backend of fathom has, not a second one beside it. Each attempt
runs within its deadline, a reply is read up to ``jsonhttp.MAX_REPLY_BYTES``, and a failure is
classified as ``JsonApi.call`` classifies its own (retried: a dropped connection, a timeout, 408,
409, 429, 529 overloaded and every other 5xx, with their Retry-After; refused for one request:
another 4xx; fatal: 401, 403, 404), its text scrubbed of the key and bounded.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from fathom.backends.jsonhttp import JsonApi, NotFound, Rejected, Transient, read_capped, server_message
from fathom.backends.replies import MESSAGE_CHARS, TRANSPORT_CHARS
from fathom.errors import MissingExtraError

if TYPE_CHECKING:
    import anthropic
    import httpx2

Reply = TypeVar("Reply")
# The window's client that the request now running goes through: each request is a task of its
# own, with a copy of the context, so the one SDK client serves every seat of the window.
_SEAT: contextvars.ContextVar[httpx.AsyncClient] = contextvars.ContextVar("fathom_anthropic_seat")
# Headers of a reply whose body httpx has already decoded (and whose length it checked).
_DECODED = {"content-encoding", "content-length", "transfer-encoding"}


def sdk_client(api: JsonApi) -> anthropic.AsyncAnthropic:
    """The SDK's client for ``api``'s base URL and key, its requests carried by the window's
    clients; its retries off, no proxy or credential file read from the environment."""
    try:
        import anthropic
        import httpx2
    except ImportError:
        raise MissingExtraError("the anthropic SDK", "anthropic") from None

    class _Bridge(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            client = _SEAT.get()
            content = await request.aread()
            async with client.stream(
                request.method, str(request.url), headers=request.headers.raw, content=content
            ) as response:
                raw = await read_capped(response)
            headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _DECODED]
            return httpx2.Response(response.status_code, headers=headers, content=raw, request=request)

    carrier = httpx2.AsyncClient(transport=_Bridge(), trust_env=False, timeout=None)
    # An explicit key: the SDK then reads no other credential (its profiles, its environment).
    return anthropic.AsyncAnthropic(
        api_key=api.key, base_url=api.base_url, max_retries=0, http_client=carrier, open_telemetry=False
    )


async def exchange(
    api: JsonApi,
    client: httpx.AsyncClient,
    path: str,
    method: Callable[..., Awaitable[Reply]],
    body: dict[str, Any],
    deadline: float,
) -> Reply:
    """``method(**body)`` (one SDK call, to ``path``) through ``client``, all of it within ``deadline``
    seconds; its failures as ``JsonApi.call`` raises them: Transient, Rejected, or a fatal FathomError."""
    import anthropic

    _SEAT.set(client)  # this task's own context: other requests are unaffected
    try:
        async with asyncio.timeout(deadline):
            return await method(**body, timeout=deadline)
    except TimeoutError:
        raise Transient(f"timeout: no complete reply within {deadline:.3g} s") from None
    except anthropic.APIStatusError as exc:
        raise _status(api, path, exc) from None
    except anthropic.APIConnectionError as exc:
        cause = exc.__cause__
        if isinstance(cause, Rejected):  # the reply was past the cap
            raise cause from None
        described = (
            f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else type(cause).__name__
        )
        unreachable = isinstance(cause, httpx.ConnectError)
        raise Transient(api.bounded(described, TRANSPORT_CHARS), unreachable=unreachable) from None
    except (ValueError, RecursionError):  # the SDK's json.loads of a reply that is no JSON
        raise Transient("malformed JSON in a reply") from None


def _status(api: JsonApi, path: str, exc: anthropic.APIStatusError) -> Exception:
    status = exc.status_code
    if status == 404:
        return NotFound(
            f"no such endpoint or model at {api.base_url}{path} (HTTP 404): check that the URL is the "
            f"API's root (the SDK adds /v1/messages) and that it serves the model '{api.model}'"
        )
    refused = api.refusal(status, exc.response.headers.get("retry-after"), path)
    if refused is not None:
        return refused
    message = api.bounded(server_message(exc.response.content), MESSAGE_CHARS)
    return Rejected(f"HTTP {status}: {message}")
