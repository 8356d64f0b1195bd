"""Log-probabilities as a record read from a file holds them: 8-byte doubles in one array.

A perplexity record holds one log-probability per scored token of its document, and a document may be a
million tokens long: as a tuple, each is a pointer and a Python float (32 bytes, against about 9 in the
JSON line it was read from), so a run folder's records took 3.5 times its file. ``Floats`` is a
read-only sequence of the same numbers at 8 bytes each; it equals (and hashes as) the tuple of them, so a
record read back equals the record that was written, and numpy reads it without a copy.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


class Floats(Sequence[float]):
    """A read-only sequence of floats, held as doubles."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[float] = ()) -> None:
        self._values = array("d", values)

    @classmethod
    def from_json(cls, value: object) -> Floats:
        """A JSON list of floats; TypeError for anything else, an integer among them too: held as a
        double it would be written back as a float (``1.0`` for ``1``), and the record's JSON form must
        not change (``fathom.schemas`` reads such a list as a tuple)."""
        if not isinstance(value, list) or not all(type(item) is float for item in value):
            raise TypeError(f"{value!r:.40} is not a list of floats")
        return cls(value)

    def to_json(self) -> list[float]:
        return self._values.tolist()

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Floats: ...

    def __getitem__(self, index: int | slice) -> float | Floats:
        if isinstance(index, slice):
            return Floats(self._values[index])
        return self._values[index]

    def __iter__(self) -> Iterator[float]:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Floats):
            return self._values == other._values
        if isinstance(other, tuple):
            return tuple(self._values) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._values))  # as the equal tuple hashes: -0.0 and 0.0 alike

    def __repr__(self) -> str:
        return f"Floats({self._values.tolist()!r})"

    def __reduce__(self) -> tuple[type[Floats], tuple[array[float]]]:
        return Floats, (self._values,)  # pickled as its array (Ray sends records between processes)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[np.float64]:
        """numpy's view of the doubles, read-only: ``np.asarray(record.logprobs)`` copies nothing."""
        import numpy as np

        if copy:
            return np.array(self._values, dtype=dtype or np.float64)
        view = np.frombuffer(self._values, dtype=np.float64)
        view.flags.writeable = False
        return view if dtype is None else view.astype(dtype, copy=False)
