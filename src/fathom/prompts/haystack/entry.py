"""One entry of the corpus cache: arrays and the record of what made them, checked when read.

An entry is an npz archive of its arrays and ``made``, a JSON text naming the entry's format, what
made it and the sha256 of its arrays. Two kinds share the cache folder: a tokenised corpus (``ids``,
int32, the corpus's tokens, and ``boundaries``, int64, its unit starts; made from the corpus's sha256
and the tokenizer's identity; ``index.py``) and a corpus's word index (made from its text's sha256;
``words.py``). An entry read back is used only if what made it is what the run asks for, its arrays are
those its kind holds (1-D, of their dtype, no larger than its corpus could make) and their hash is
the one recorded, and their values pass its kind's own check (a tokenised corpus's: not empty, ids
inside the vocabulary, boundaries sorted token positions from 0); anything else is an
``UnusableEntry`` whose message says why, and the entry is built again. The content hash is what
turns a well-formed but wrong entry (shuffled ids) into a rebuild rather than a run whose prompts
are not those its manifest's corpus hash names.

The check runs at every run start: reading and checking the bundled prose corpus's entry (580,000
cl100k_base ids) took 3 ms on a loaded 2-core machine, its hash 1.3 ms of that.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np
from numpy.typing import NDArray

# Raised whenever what a tokenised corpus's entry holds or how it is checked changes: an entry of
# another format is rebuilt (its file name carries the format too, so old entries are simply never read).
FORMAT = 2
_CORPUS_MADE_FROM = "corpus, tokenizer or fathom format"
# An .npy header is small; a member larger than its array could be is refused before it is read.
_NPY_HEADER = 4096
_RECORD_BYTES = 4096
T = TypeVar("T")


class UnusableEntry(Exception):
    """An entry that must not be used; its message completes "the corpus cache entry PATH ..."."""


@dataclass(frozen=True)
class Member:
    """One array of an entry: its dtype, and the most bytes that what made it could give it (a
    larger member is refused before it is read)."""

    dtype: type[np.generic]
    most_bytes: int


@dataclass(frozen=True)
class Maker:
    """What a tokenised corpus's entry must have been made from: the corpus (its sha256, and a bound
    on the tokens its text can give), the tokenizer (its identity and, where it says, its number of ids)."""

    corpus_sha256: str
    most_tokens: int
    tokenizer_identity: str
    vocabulary: int | None

    def made_by(self) -> dict[str, Any]:
        return {"format": FORMAT, "corpus_sha256": self.corpus_sha256, "tokenizer": self.tokenizer_identity}

    def members(self) -> dict[str, Member]:
        return {
            "ids": Member(np.int32, self.most_tokens * 4),
            "boundaries": Member(np.int64, self.most_tokens * 8),
        }


def content_sha256(*arrays: NDArray[Any]) -> str:
    """sha256 over the arrays' lengths and bytes (length-prefixed, so no bytes can move between them)."""
    digest = hashlib.sha256()
    for array in arrays:
        data = np.ascontiguousarray(array).tobytes()
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def write_arrays(handle: BinaryIO, made_by: Mapping[str, Any], arrays: Mapping[str, NDArray[Any]]) -> None:
    """An entry of ``arrays`` and the record of what made them, as an npz archive, into ``handle``
    (an open file that ``index.save`` puts in place)."""
    made = json.dumps(dict(made_by) | {"content_sha256": content_sha256(*arrays.values())}, sort_keys=True)
    members: dict[str, Any] = {**arrays, "made": np.array(made)}
    np.savez(handle, **members)


def read_arrays(
    archive: Any, made_by: Mapping[str, Any], members: Mapping[str, Member], made_from: str
) -> dict[str, NDArray[Any]]:
    """The arrays of an open npz archive (``np.load``'s), once its record names ``made_by`` and they
    are ``members``, of the hash recorded; ``made_from`` names what ``made_by`` records, for the
    message of an entry made from something else."""
    names = (*members, "made")
    if not isinstance(archive, Mapping) or sorted(archive) != sorted(names):
        raise UnusableEntry(f"does not hold the arrays {', '.join(names)}")
    _check_sizes(archive, {name: member.most_bytes for name, member in members.items()})
    made = _made(archive["made"])
    if any(made.get(key) != value for key, value in made_by.items()):
        raise UnusableEntry(f"was made from another {made_from}")
    arrays = {name: _array(archive[name], name, member.dtype) for name, member in members.items()}
    if content_sha256(*arrays.values()) != made.get("content_sha256"):
        raise UnusableEntry("does not match the hash of its content")
    return arrays


def load(path: Path, read: Callable[[Any], T]) -> T:
    """``read`` of the npz archive at ``path``: an ``UnusableEntry`` for whatever is wrong with it."""
    try:
        # The file opened here, not by np.load, which leaves it open when the archive is damaged.
        with path.open("rb") as handle, np.load(handle) as data:
            return read(data)
    except UnusableEntry:
        raise
    # Whatever else is wrong with an entry (np.load raises OSError, EOFError, ValueError,
    # BadZipFile and more, by the damage; an .npy is no context manager), rebuilding it is the
    # cure: the cache only saves time.
    except Exception as exc:
        raise UnusableEntry(f"cannot be read as an npz archive ({type(exc).__name__})") from None


def write(handle: BinaryIO, maker: Maker, ids: NDArray[np.int32], boundaries: NDArray[np.int64]) -> None:
    """A tokenised corpus's entry, into ``handle``."""
    write_arrays(handle, maker.made_by(), {"ids": ids, "boundaries": boundaries})


def read(archive: Any, maker: Maker) -> tuple[NDArray[np.int32], NDArray[np.int64]]:
    """The ids and boundaries of a tokenised corpus's open npz archive, once every check holds."""
    arrays = read_arrays(archive, maker.made_by(), maker.members(), _CORPUS_MADE_FROM)
    ids, boundaries = arrays["ids"], arrays["boundaries"]
    _check_values(ids, boundaries, maker.vocabulary)
    return ids, boundaries


def _check_sizes(archive: Any, most: Mapping[str, int]) -> None:
    """Refuse members larger than the corpus could make, from the archive's directory, before
    reading them: a planted entry cannot make a run allocate what it names."""
    zipped = getattr(archive, "zip", None)
    for name, limit in {**most, "made": _RECORD_BYTES}.items():
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
    return value


def _check_values(ids: NDArray[np.int32], boundaries: NDArray[np.int64], vocabulary: int | None) -> None:
    for name, array in (("ids", ids), ("boundaries", boundaries)):
        if array.size == 0:
            raise UnusableEntry(f"holds no {name}")
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or (vocabulary is not None and high >= vocabulary):
        inside = f"0 to {vocabulary - 1}" if vocabulary is not None else "0 up"
        raise UnusableEntry(f"holds ids from {low} to {high}, outside the vocabulary's {inside}")
    if boundaries[0] != 0 or boundaries[-1] >= len(ids) or np.any(np.diff(boundaries) <= 0):
        raise UnusableEntry("holds boundaries that are not increasing token positions from 0")
