"""Files written so that no link is followed: a run folder travels (a colleague's, a CI artifact), and
whoever made it may have planted ``heatmap.png -> ~/.bashrc`` in it, or ``compare-x -> /etc``.

Three ways to write, one rule: fathom never opens an existing name for writing through a link.

- ``replacing`` (and ``write_file``, ``write_through``): a whole file, written under a new random
  name in the target's folder, created with O_EXCL|O_NOFOLLOW (so nothing planted is opened), made
  durable, then renamed over the target. A rename replaces a link at the target, it never follows
  it: the link gives way to a regular file and what it pointed at is untouched.
- ``open_append`` (samples.jsonl, judgements.jsonl, run.lock): opened with O_NOFOLLOW and checked
  with fstat to be a regular file, or refused.
- ``refuse_links``: a folder whose own files (those fathom reads or appends to), or subfolders, are
  links or other non-regular entries is refused before anything is read, with one line naming them.

And one way to read a whole file from such a folder (a manifest, a summary, a plot to embed or to log):
``read_bounded``, never through a link (``heatmap.png -> ~/.ssh/id_rsa`` would carry the key into a
report or a tracker) and never more bytes than fathom writes there.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from fathom.errors import FathomError


class LinkedFileError(FathomError):
    """A file or folder fathom would read or write through is a link or no regular file."""


class OversizedFileError(FathomError):
    """A file fathom reads whole holds more bytes than fathom ever writes in it."""


_NEVER_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NEVER_FOLLOW
_PIECE = 1 << 16  # what a bounded read reads at a time


@contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on a new file beside ``path``; once the block ends, the file is on disk and
    renamed over ``path``. A block that raises leaves ``path`` as it was and no file behind."""
    folder = _folder_of(path)
    partial = folder / f".{path.name[:100]}.{secrets.token_hex(8)}.partial"
    handle: BinaryIO = os.fdopen(os.open(partial, _NEW, 0o644), "wb")
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
        sync_folder(folder)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_file(path: Path, content: bytes | str) -> Path:
    """``content`` (text is written as UTF-8) as the whole of ``path``, through ``replacing``."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    with replacing(path) as handle:
        handle.write(data)
    return path


def write_through(path: Path, make: Callable[[Path], None]) -> Path:
    """``path`` made by ``make``, a library that writes to a path of its own choosing (DuckDB's COPY):
    ``make`` writes into a new private folder beside ``path`` (random name, mode 0700), and what it
    wrote is renamed over ``path`` only if it is a regular file."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{path.name[:100]}.", suffix=".partial", dir=_folder_of(path)))
    try:
        made = scratch / path.name
        make(made)
        if not stat.S_ISREG(made.lstat().st_mode):
            raise LinkedFileError(f"'{made}' is not a regular file: refusing to move it to '{path}'")
        os.replace(made, path)
        sync_folder(path.parent)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return path


def open_append(path: Path, mode: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A descriptor on ``path`` (created if missing) for appending, or with ``mode``: O_RDWR for a
    lock file. A link or any other non-regular file there is refused (LinkedFileError)."""
    created = not os.path.lexists(path)
    try:
        # O_NONBLOCK: a FIFO planted there fails (or opens) at once rather than waiting for a reader
        fd = os.open(path, mode | _NEVER_FOLLOW | os.O_CREAT | os.O_NONBLOCK, 0o644)
    except OSError:
        if path.is_symlink() or (path.exists() and not path.is_file()):  # O_NOFOLLOW's ELOOP, a FIFO's ENXIO
            raise _refusal([path]) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _refusal([path])
    if created:
        sync_folder(path.parent)
    return fd


def sync_folder(folder: Path) -> None:
    """The folder's entries on disk: after a rename or a new file, a power cut on a file system that
    journals names apart from data (ext4's default among them) may otherwise lose the new name, and
    with it a record already fsynced."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_bounded(path: Path, most: int, what: str, *, user_file: bool = False) -> bytes:
    """The bytes of the file at ``path``, never more than ``most`` of them: OversizedFileError, naming
    ``what`` the file should be, for more. A file of a folder that may be someone else's must be a
    regular file, opened without following a link (LinkedFileError otherwise; a FIFO is opened without
    waiting for a writer). A file the user names (``user_file``: a data file, a template) may be a
    link or a pipe of theirs: only the bound holds. OSError, other than a link refused, is raised as is."""
    if user_file:  # OSError is the caller's to word, as for any file it names
        with path.open("rb") as handle:
            data = _read_past(handle, most)
        fix = "name the right file"
    else:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NEVER_FOLLOW)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW's answer to a link
                raise _refusal([path]) from None
            raise
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise _refusal([path])
            data = _read_past(handle, most)
        fix = "it is not fathom's own; move it aside"
    if len(data) > most:
        raise OversizedFileError(
            f"'{path}' holds more than {most:,} bytes, more than {what} ever holds: {fix}"
        )
    return data


def _read_past(handle: BinaryIO, most: int) -> bytes:
    """The handle's bytes up to one past ``most``, read a piece at a time: ``read(most + 1)`` would
    set aside the whole bound (16 MiB for a manifest of a few KB) before reading a byte."""
    pieces: list[bytes] = []
    held = 0
    while held <= most and (piece := handle.read(min(_PIECE, most + 1 - held))):
        pieces.append(piece)
        held += len(piece)
    return b"".join(pieces)


def refuse_links(folder: Path, owns: Callable[[str], bool]) -> None:
    """Refuse ``folder`` (LinkedFileError, one line) if any of its entries that ``owns`` (the files
    fathom reads or appends to) is a link or no regular file, or if any other entry is a link to
    anything but a regular file (a folder: ``compare-x -> /etc``; a link to nothing)."""
    found = []
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing in it to follow; whoever needs the folder says it is missing
    for entry in sorted(entries, key=lambda e: e.name):
        if owns(entry.name):
            refused = not entry.is_file(follow_symlinks=False)  # a link, a folder, a FIFO, a device
        else:  # a link to a regular file is replaced by a regular file when written; any other is refused
            refused = entry.is_symlink() and not entry.is_file(follow_symlinks=True)
        if refused:
            found.append(Path(entry.path))
    if found:
        raise _refusal(found)


def _folder_of(path: Path) -> Path:
    """The folder ``path`` is written in, created if missing."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _refusal(paths: list[Path]) -> LinkedFileError:
    more = f" (and {len(paths) - 5} more)" if len(paths) > 5 else ""
    shown = ", ".join(f"'{p}'" for p in paths[:5]) + more
    what, them = (
        ("is a link or no regular file", "it")
        if len(paths) == 1
        else ("are links or no regular files", "them")
    )
    return LinkedFileError(
        f"{shown} {what} where fathom keeps its own files, and fathom follows none (a folder received "
        f"from elsewhere could make it write outside itself): remove {them}, and run again"
    )
