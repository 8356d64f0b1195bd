"""One entry of the corpus cache: a tokenised corpus and the record of what made it, checked when read.

An entry is an npz archive of three arrays: ``ids`` (int32, the corpus's tokens), ``boundaries``
(int64, its unit starts) and ``made``, a JSON text naming the entry's format, the corpus's sha256,
the tokenizer's identity and the sha256 of the two arrays. An entry read back is used only if all of
these match what the run asks for and its arrays are what ``index`` builds (1-D, of their dtype, not
empty, ids inside the vocabulary, boundaries sorted token positions from 0); anything else is an
``UnusableEntry`` whose message says why, and ``index`` builds the corpus again. The content hash is
what turns a well-formed but wrong entry (shuffled ids) into a rebuild rather than a run whose
prompts are not those its manifest's corpus hash names.

The check runs at every run start: reading and checking the bundled prose corpus's entry (580,000
cl100k_base ids) took 3 ms on a loaded 2-core machine, its hash 1.3 ms of that.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
from numpy.typing import NDArray

# Raised whenever what an entry holds or how it is checked changes: an entry of another format is
# rebuilt (its file name carries the format too, so old entries are simply never read).
FORMAT = 2
_MEMBERS = ("ids", "boundaries", "made")
# An .npy header is small; a member larger than its array could be is refused before it is read.
_NPY_HEADER = 4096


class UnusableEntry(Exception):
    """An entry that must not be used; its message completes "the corpus cache entry PATH ..."."""


@dataclass(frozen=True)
class Maker:
    """What an entry must have been made from: the corpus (its sha256, and a bound on the tokens its
    text can give), the tokenizer (its identity and, where it says, its number of ids)."""

    corpus_sha256: str
    most_tokens: int
    tokenizer_identity: str
    vocabulary: int | None

    def made_by(self) -> dict[str, Any]:
        return {"format": FORMAT, "corpus_sha256": self.corpus_sha256, "tokenizer": self.tokenizer_identity}


def content_sha256(ids: NDArray[np.int32], boundaries: NDArray[np.int64]) -> str:
    """sha256 over the two arrays' lengths and bytes (length-prefixed, so no bytes can move between them)."""
    digest = hashlib.sha256()
    for array in (ids, boundaries):
        data = np.ascontiguousarray(array).tobytes()
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def write(handle: BinaryIO, maker: Maker, ids: NDArray[np.int32], boundaries: NDArray[np.int64]) -> None:
    """The entry, as an npz archive, into ``handle`` (an open file that ``index`` puts in place)."""
    made = json.dumps(maker.made_by() | {"content_sha256": content_sha256(ids, boundaries)}, sort_keys=True)
    np.savez(handle, ids=ids, boundaries=boundaries, made=np.array(made))


def read(archive: Any, maker: Maker) -> tuple[NDArray[np.int32], NDArray[np.int64]]:
    """The ids and boundaries of an open npz archive (``np.load``'s), once every check holds."""
    if not isinstance(archive, Mapping) or sorted(archive) != sorted(_MEMBERS):
        raise UnusableEntry(f"does not hold the arrays {', '.join(_MEMBERS)}")
    _check_sizes(archive, maker)
    made = _made(archive["made"])
    if any(made.get(key) != value for key, value in maker.made_by().items()):
        raise UnusableEntry("was made from another corpus, tokenizer or fathom format")
    ids = _array(archive["ids"], "ids", np.int32)
    boundaries = _array(archive["boundaries"], "boundaries", np.int64)
    if content_sha256(ids, boundaries) != made.get("content_sha256"):
        raise UnusableEntry("does not match the hash of its content")
    _check_values(ids, boundaries, maker.vocabulary)
    return ids, boundaries


def _check_sizes(archive: Any, maker: Maker) -> None:
    """Refuse members larger than the corpus could make, from the archive's directory, before
    reading them: a planted entry cannot make a run allocate what it names."""
    most = {"ids": maker.most_tokens * 4, "boundaries": maker.most_tokens * 8, "made": 4096}
    zipped = getattr(archive, "zip", None)
    for name, limit in most.items():
        size = zipped.getinfo(f"{name}.npy").file_size if zipped is not None else 0
        if size > limit + _NPY_HEADER:
            raise UnusableEntry(f"holds {size} bytes of {name}, more than its corpus could make")


def _made(value: NDArray[Any]) -> dict[str, Any]:
    if value.dtype.kind != "U" or value.ndim != 0:
        raise UnusableEntry("has no record of what made it")
    try:
        made = json.loads(str(value[()]))
    except ValueError:
        made = None
    if not isinstance(made, dict):
        raise UnusableEntry("has a record of what made it that is not a JSON object")
    return made


def _array(value: NDArray[Any], name: str, dtype: type[np.generic]) -> Any:
    if value.dtype != np.dtype(dtype):
        raise UnusableEntry(f"holds {name} of dtype {value.dtype}, not {np.dtype(dtype)}")
    if value.ndim != 1:
        raise UnusableEntry(f"holds {name} of {value.ndim} dimensions, not 1")
    if value.size == 0:
        raise UnusableEntry(f"holds no {name}")
    return value


def _check_values(ids: NDArray[np.int32], boundaries: NDArray[np.int64], vocabulary: int | None) -> None:
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or (vocabulary is not None and high >= vocabulary):
        inside = f"0 to {vocabulary - 1}" if vocabulary is not None else "0 up"
        raise UnusableEntry(f"holds ids from {low} to {high}, outside the vocabulary's {inside}")
    if boundaries[0] != 0 or boundaries[-1] >= len(ids) or np.any(np.diff(boundaries) <= 0):
        raise UnusableEntry("holds boundaries that are not increasing token positions from 0")
