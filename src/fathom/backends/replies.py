"""What fathom keeps of a server's or an engine's reply: every text scrubbed of the API key, then
cut to a stated limit, and every number finite.

The order matters. A text cut first and scrubbed after keeps whatever part of the key the cut left
at its end (a 400 message cut at 200 characters with the key at 162 kept all of it but its last
character), so ``bounded`` scrubs the whole text, then cuts. Scrubbing removes each form the key
can take in a reply (as sent, URL-encoded, JSON-escaped), and any run of ``FRAGMENT`` or more
characters that opens or closes one: a server that cuts its own echo of the request leaves the key's
start at the end of its text, or its end at the start. A shorter run reveals too little of a key to
matter (``FRAGMENT`` of a key's 40 or more random characters leave the rest unguessable).

JSON replies are read with every non-finite number (``NaN``, ``Infinity``, ``1e999``) as absent
(None): such a number means nothing as a time or a log-probability, and fathom writes no JSON that
holds one.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote, quote_plus

KEY_REMOVED = "[API key removed]"
# The fewest characters of a key that are scrubbed where they open or close a run of the key's own.
FRAGMENT = 8
CUT = "…"  # marks the end of a cut text

# The most characters a record keeps of each text a reply sets, scrubbed first.
FINISH_CHARS = 64  # a finish reason: "stop", "length", "content_filter"
MESSAGE_CHARS = 200  # a server's own words for a refusal
TRANSPORT_CHARS = 160  # the HTTP client's words for an exchange that broke
ENGINE_CHARS = 300  # an in-process engine's exception (vLLM, llama.cpp, transformers)


def scrub(text: str, secret: str | None) -> str:
    """``text`` with every form of ``secret``, and every run of FRAGMENT or more characters that
    opens or closes one, replaced by KEY_REMOVED. Each form's runs are found in the text as given,
    then removed together: a form removed first could leave another's end behind."""
    if not secret:
        return text
    spans = [span for form in _forms(secret) for span in _runs(text, form)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:  # overlapping or touching: one run of the key
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    kept, position = [], 0
    for start, end in merged:
        kept += [text[position:start], KEY_REMOVED]
        position = end
    return "".join(kept) + text[position:]


def bounded(text: str, limit: int, secret: str | None = None) -> str:
    """``text`` scrubbed of ``secret``, then cut to at most ``limit`` characters (a cut ends in
    CUT)."""
    text = scrub(text, secret)
    return text if len(text) <= limit else text[: limit - len(CUT)] + CUT


def engine_error(exc: BaseException) -> str:
    """An in-process engine's exception as a record's error detail: its type and first line,
    bounded."""
    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return bounded(detail, ENGINE_CHARS)


def finite_json(raw: bytes | str) -> Any:
    """JSON as ``json.loads`` reads it, but a number that is not finite (NaN, Infinity, or one too
    large for a float) read as None."""
    return json.loads(raw, parse_constant=lambda _: None, parse_float=_finite)


def finite_number(value: Any) -> float | None:
    """A number of a JSON reply as a finite float; None for anything else (a bool, a string, or an
    integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _finite(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _forms(secret: str) -> list[str]:
    """The forms ``secret`` may take in a reply: as sent, URL-encoded (a server quoting a URL),
    JSON-escaped (one quoting raw JSON)."""
    escaped = json.dumps(secret)[1:-1]
    return sorted({secret, quote(secret, safe=""), quote_plus(secret), escaped, escaped.replace("/", "\\/")})


def _runs(text: str, form: str) -> list[tuple[int, int]]:
    """Where ``text`` holds ``form``, or a run of FRAGMENT or more characters that opens or closes it."""
    if len(form) > FRAGMENT:
        return [*_openings(text, form), *_closings(text, form)]
    spans, at = [], text.find(form)
    while at >= 0:
        spans.append((at, at + len(form)))
        at = text.find(form, at + len(form))
    return spans


def _openings(text: str, form: str) -> list[tuple[int, int]]:
    """Where ``text`` holds ``form``'s first FRAGMENT characters, each span as far as it goes on
    matching ``form``."""
    spans, at = [], text.find(form[:FRAGMENT])
    while at >= 0:
        end = at + FRAGMENT
        while end < len(text) and end - at < len(form) and text[end] == form[end - at]:
            end += 1
        spans.append((at, end))
        at = text.find(form[:FRAGMENT], end)
    return spans


def _closings(text: str, form: str) -> list[tuple[int, int]]:
    """Where ``text`` holds ``form``'s last FRAGMENT characters, each span as far back as it goes on
    matching ``form``."""
    spans, at, tail = [], text.find(form[-FRAGMENT:]), len(form) - FRAGMENT
    while at >= 0:
        start, matched = at, tail
        while start > 0 and matched > 0 and text[start - 1] == form[matched - 1]:
            start, matched = start - 1, matched - 1
        spans.append((start, at + FRAGMENT))
        at = text.find(form[-FRAGMENT:], at + 1)
    return spans
