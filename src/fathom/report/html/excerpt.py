"""The prompt around a needle as report.html shows it: the record's excerpt (``needle_context``, a
window of tokens, which begins and ends wherever a token does, often inside a word) trimmed to whole
words. The record keeps what the model read; only the page trims it.
"""

from __future__ import annotations

import re

ELLIPSIS = "\u2026"
# A run of characters the excerpt may have cut at its start or its end: the first word when the excerpt
# does not open on a space, the last when it ends neither on a space nor on punctuation that ends a word.
_FIRST_WORD = re.compile(r"\S+(?=\s)")
_LAST_WORD = re.compile(r"(?<=\s)\S*[^\s.,;:!?)\]}\"'\u201d\u2019]$")


def word_bounded(excerpt: str) -> str:
    """``excerpt`` without the partial word a token window may begin or end with, an ellipsis in its
    place; an excerpt of one word, or with no space to cut at, is shown whole."""
    start = 0 if excerpt[:1].isspace() else _end(_FIRST_WORD.match(excerpt))
    last = _LAST_WORD.search(excerpt)
    end = len(excerpt) if last is None else last.start()
    if start >= end or not excerpt[start:end].strip():
        return excerpt
    body = excerpt[start:end]
    head = ELLIPSIS + body.lstrip() if start else body
    return head.rstrip() + ELLIPSIS if end < len(excerpt) else head


def _end(match: re.Match[str] | None) -> int:
    return 0 if match is None else match.end()
