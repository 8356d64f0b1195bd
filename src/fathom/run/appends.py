"""A run folder's JSONL files of records written: appended one whole line at a time, each on disk
before the next; their damaged lines and torn tails moved aside (samples.jsonl by ``RunFolder``,
judgements.jsonl by ``fathom.run.judgements``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from fathom.errors import RunFolderError
from fathom.run.lines import Overlong, Parsed, bounded_lines
from fathom.safe_files import open_append, replacing

log = logging.getLogger(__name__)


def append_to(path: Path) -> int:
    """A descriptor appending to ``path`` (a run folder's JSONL of records), created if missing; a
    link there, or no regular file, is refused (``fathom.safe_files.open_append``)."""
    try:
        return open_append(path)
    except OSError as exc:
        raise RunFolderError(f"cannot write {path}: {exc.strerror or exc}") from None


def append_line(fd: int, data: dict[str, Any], path: Path) -> None:
    """One JSON object as one line of the file open for appending at ``fd``, on disk before this
    returns. One ``write`` of the whole line: a reader sees the line whole or not yet. A record
    holding NaN or Infinity is refused, not written: no JSON reader but Python's reads them."""
    try:
        line = (json.dumps(data, sort_keys=True, allow_nan=False) + "\n").encode()
    except ValueError:
        raise RunFolderError(f"refusing to write NaN or Infinity into {path}: JSON has neither") from None
    written = os.write(fd, line)
    if written != len(line):  # only a full disk does this; leave no half line behind
        os.ftruncate(fd, os.lseek(fd, 0, os.SEEK_END) - written)
        raise RunFolderError(f"could not write a whole record to {path}: is the disk full?")
    os.fsync(fd)


def quarantine(parsed: Parsed[Any], path: Path, aside: Path) -> None:
    """Move the damaged lines and torn tail of ``path`` (where ``parsed``, a read of it under the
    folder's lock, found them) to ``aside``, and rewrite ``path`` with the records alone. A second
    pass, line by line, holds no line but the one it copies: the good lines go to a new file that is
    renamed over ``path`` only once the lines moved are on disk, so a kill at any point loses nothing.
    A file with no damage is left alone, unread."""
    if not parsed.damaged and not parsed.torn:
        return
    damaged = {d.line for d in parsed.damaged}
    try:
        with path.open("rb") as lines, os.fdopen(append_to(aside), "ab") as moved, replacing(path) as kept:
            for number, line in enumerate(bounded_lines(lines, spill=moved), start=1):
                if isinstance(line, Overlong):
                    continue  # damage, copied aside as it was read
                if not line.endswith(b"\n"):
                    moved.write(line + b"\n")  # the torn tail, made a line of its own
                else:
                    (moved if number in damaged else kept).write(line)
            moved.flush()
            os.fsync(moved.fileno())
    except OSError as exc:
        raise RunFolderError(f"cannot move the damage of {path} aside: {exc.strerror or exc}") from None
    if parsed.damaged:
        first = parsed.damaged[0]
        log.warning(
            "moved %d damaged line(s) of %s aside to %s (line %d: %s)",
            len(parsed.damaged),
            path,
            aside,
            first.line,
            first.reason,
        )
