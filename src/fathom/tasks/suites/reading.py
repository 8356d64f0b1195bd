"""A suite's data file read item by item, with a bound on each item, never whole.

The longest real items are a few MB: LongBench's and InfiniteBench's longest documents (InfiniteBench's
novels, of about 2M characters), and LongBench v2's "long" items, which reach 2M words (about 12 MB).
``MOST_ITEM`` is several times the largest of them: a JSONL line longer than that, or a LongBench v2
item, is refused with its file and line (or item) named, read no further than the limit; a 191 MB
item once kept a run busy for minutes before failing. LongBench v2's ``data.json`` is one JSON list,
decoded one item at a time, so a run that asks for its first items reads only those.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from fathom.errors import SpecError

MOST_ITEM = 64 << 20  # bytes of a JSONL line; characters of a LongBench v2 item
_CHUNK = 1 << 20
_NOT_SPACE = re.compile(r"[^ \t\n\r]")  # JSON's whitespace is these four


class DataError(SpecError):
    """A suite's data file that is missing or is not in the suite's official format."""


def jsonl_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Each line of ``path`` and its number, each read no further than ``MOST_ITEM`` bytes."""
    with path.open("rb") as lines:
        number = 0
        while line := lines.readline(MOST_ITEM + 1):
            number += 1
            if len(line) > MOST_ITEM and not line.endswith(b"\n"):
                raise _too_long(f"{path} line {number}")
            yield number, line


def json_list(path: Path, suite: str, limit: int) -> Iterator[tuple[int, Any]]:
    """The first ``limit`` items of the JSON list in ``path`` and their indexes, decoded one at a
    time, each from no more than ``MOST_ITEM`` characters; the rest of the file is not read."""
    try:
        with path.open(encoding="utf-8") as text:
            yield from _ListReader(text, path, suite).items(limit)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 ({exc.reason}): use {suite}'s official file") from None


class _ListReader:
    """A cursor over a JSON list's text, read a chunk at a time as the items need it."""

    def __init__(self, text: TextIO, path: Path, suite: str) -> None:
        self.text, self.path, self.suite = text, path, suite
        self.buffer, self.at = text.read(_CHUNK), 0
        self.decoder = json.JSONDecoder()

    def items(self, limit: int) -> Iterator[tuple[int, Any]]:
        if self._next() != "[":
            raise DataError(f"{self.path} is not a JSON list: use {self.suite}'s official file")
        self.at += 1
        number = 0
        while number < limit and (mark := self._next()) != "]":
            if number:
                if mark != ",":
                    raise self._not_json(number, "expected ',' or ']' after an item")
                self.at += 1
            yield number, self._item(number)
            number += 1

    def _item(self, number: int) -> Any:
        self._next()
        while True:
            try:
                value, self.at = self.decoder.raw_decode(self.buffer, self.at)
                return value
            except json.JSONDecodeError as exc:
                # Incomplete or malformed: only more text tells which, up to the bound.
                if len(self.buffer) - self.at > MOST_ITEM:
                    raise _too_long(f"{self.path} item {number}") from None
                if not self._more(max(_CHUNK, len(self.buffer) - self.at)):
                    raise self._not_json(number, exc.msg) from None

    def _next(self) -> str:
        """The next character that is not JSON whitespace ("" at the end), the cursor on it."""
        while True:
            found = _NOT_SPACE.search(self.buffer, self.at)
            self.at = found.start() if found else len(self.buffer)
            if found or not self._more(_CHUNK):
                return self.buffer[self.at : self.at + 1]

    def _more(self, size: int) -> bool:
        """Read ``size`` more characters; False at the end of the file."""
        more = self.text.read(size)
        self.buffer, self.at = self.buffer[self.at :] + more, 0
        return bool(more)

    def _not_json(self, number: int, why: str) -> DataError:
        return DataError(f"{self.path} item {number} is not JSON ({why}): use {self.suite}'s official file")


def _too_long(where: str) -> DataError:
    return DataError(
        f"{where} is longer than the {MOST_ITEM >> 20} MiB a suite item may be (the longest real ones "
        "are a few MB): is it the suite's official file?"
    )
