"""The openai backend's target, ``openai:MODEL@BASE_URL``, read and checked before any request."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx

from fathom.errors import SpecError

_TARGET = re.compile(r"^(?P<model>.+?)@(?P<url>https?://.+)$")


def read_target(target: str, backend: str = "openai", key_env: str = "OPENAI_API_KEY") -> tuple[str, str]:
    """The model and base URL of ``openai:MODEL@BASE_URL`` (``target`` is what follows ``openai:``; the
    anthropic backend's ``anthropic:MODEL@BASE_URL`` alike); a URL that cannot be read, with a port past
    65535 or with credentials in it is refused."""
    match = _TARGET.match(target)
    if not match:
        raise SpecError(
            f"cannot read '{backend}:{target}': write {backend}:MODEL@BASE_URL, e.g. "
            f"{backend}:smollm2@http://127.0.0.1:8000/v1"
        )
    url = match["url"].rstrip("/")
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise SpecError(
            f"cannot read the URL in '{backend}:{target}' ({exc}): write http(s)://HOST[:PORT]/v1"
        ) from None
    try:
        port = urlsplit(url).port  # httpx takes any number; the socket refuses one past 65535 mid-run
    except ValueError:
        port = 0
    if port is not None and not 1 <= port <= 65535:
        raise SpecError(
            f"the port in '{backend}:{target}' is not one of 1..65535: write http(s)://HOST[:PORT]/v1"
        )
    if "@" in urlsplit(url).netloc:
        # The URL goes into the manifest; the key must not.
        raise SpecError(f"put no credentials in the URL: give the key in ${key_env} (see api_key_env)")
    return match["model"], url
