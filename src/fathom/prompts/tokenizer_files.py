"""Tokenizer files (a .tiktoken rank file, a tokenizer.json, its tokenizer_config.json) read with a
bound, before any of their bytes are parsed.

A file is read only if it is a regular file (not a device such as /dev/zero, a FIFO or a folder) of
at most ``MOST_BYTES``, and it is read with that bound rather than whole and checked after, so a
file that grows while it is read cannot take more; a gzipped rank file is unpacked with the same
bound. The largest real tokenizer files are tens of MB (Gemma 3's tokenizer.json is about 33 MB,
o200k_base's rank file 3.6 MB): the limit is several times that.
"""

from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path

from fathom.errors import TokenizerError

MOST_BYTES = 256 << 20
_GZIP = 16 + zlib.MAX_WBITS  # zlib's window bits for a gzip header and trailer


def read_file(path: Path, what: str) -> bytes:
    """The bytes of ``path``, a ``what`` (".tiktoken rank file", "tokenizer.json"), or a one-line
    TokenizerError: missing, a folder, not a regular file, unreadable or over ``MOST_BYTES``."""
    try:
        # Stat before opening: opening a FIFO would wait for a writer. O_NONBLOCK keeps it from
        # waiting if one is swapped in between, and the opened file is checked again by fstat.
        _check(os.stat(path), path, what)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise TokenizerError(f"no {what} at '{path}': the path does not exist") from None
    except OSError as exc:
        raise TokenizerError(f"cannot read '{path}' ({exc.strerror}); check its permissions") from None
    with os.fdopen(fd, "rb") as handle:
        _check(os.fstat(handle.fileno()), path, what)
        try:
            data = handle.read(MOST_BYTES + 1)
        except OSError as exc:
            raise TokenizerError(f"cannot read '{path}' ({exc.strerror}); check its permissions") from None
    if len(data) > MOST_BYTES:
        raise _too_large(path, what)
    return data


def gunzip(raw: bytes, path: Path) -> bytes:
    """A gzipped rank file's contents (every member, as ``gzip.decompress`` reads them), unpacked no
    further than ``MOST_BYTES``: a small archive cannot unpack into memory without bound."""
    contents = bytearray()
    rest = raw
    while rest:
        unpacker = zlib.decompressobj(_GZIP)
        try:
            contents += unpacker.decompress(rest, MOST_BYTES + 1 - len(contents))
        except zlib.error:
            raise _not_gzip(path) from None
        if len(contents) > MOST_BYTES:
            raise TokenizerError(
                f"'{path}' unpacks to more than the {MOST_BYTES >> 20} MiB a .tiktoken rank file may be; "
                "is it the right file?"
            )
        if not unpacker.eof:  # cut short
            raise _not_gzip(path)
        rest = unpacker.unused_data
    return bytes(contents)


def _check(status: os.stat_result, path: Path, what: str) -> None:
    if stat.S_ISDIR(status.st_mode):
        raise TokenizerError(f"'{path}' is a folder, not a {what}; give the file itself")
    if not stat.S_ISREG(status.st_mode):
        raise TokenizerError(f"'{path}' is not a regular file (a device or a pipe); give a {what}")
    if status.st_size > MOST_BYTES:
        raise _too_large(path, what)


def _not_gzip(path: Path) -> TokenizerError:
    return TokenizerError(f"cannot unpack '{path}': it is not valid gzip; give a .tiktoken file")


def _too_large(path: Path, what: str) -> TokenizerError:
    return TokenizerError(
        f"'{path}' is larger than the {MOST_BYTES >> 20} MiB a {what} may be; is it the right file?"
    )
