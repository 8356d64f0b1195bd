"""Token counts as people write them: 4k = 4096 and 1M = 1048576, as in RULER's lengths."""

from __future__ import annotations

import math
import re

from fathom.errors import SpecError

_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")
_SCALE = {"": 1, "k": 1024, "m": 1024 * 1024}


def parse_count(text: str) -> int:
    """``"8k"`` -> 8192, ``"1M"`` -> 1048576, ``"1500"`` -> 1500."""
    match = _COUNT.match(text)
    if not match:
        raise SpecError(f"cannot read '{text}' as a token count: write e.g. 4096, 4k or 1M")
    # Hundreds of digits read as infinity (float() of a string never overflows): no count of tokens.
    value = float(match.group(1)) * _SCALE[match.group(2).lower()]
    if math.isinf(value):
        raise SpecError(f"token count '{text[:24]}...' is far too large: write e.g. 4096, 4k or 1M")
    if value != int(value):
        raise SpecError(f"token count '{text}' is not a whole number of tokens")
    return int(value)


def format_count(n: int) -> str:
    """The inverse of ``parse_count`` where it is exact: 131072 -> "128k", 1500 -> "1500"."""
    for suffix, scale in (("M", 1024 * 1024), ("k", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


def length_or_none(length: int | None) -> str:
    """A length as ``format_count`` writes it, or "none" (no effective length)."""
    return "none" if length is None else format_count(length)


def length_span(low: int | None, high: int | None) -> str:
    """An interval of lengths ("4k to 16k"), or the one length where both ends are it."""
    return length_or_none(low) if low == high else f"{length_or_none(low)} to {length_or_none(high)}"
