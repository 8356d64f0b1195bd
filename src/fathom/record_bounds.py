"""Where a record's numbers may lie: each numeric field's range, read off its record type's hints, and
the test of values against one (``fathom.records.check_values`` applies them to each record read or
written).
"""

from __future__ import annotations

import dataclasses
import math
import typing

# Fields that are fractions, in [0, 1]: depths, grades (a scoring method's grade, a plugin's too, lies
# there: ``Score``) and similarities. Every other number is at least 0 (counts, offsets, indices,
# seconds), but for the seed, the schema (checked by its reader) and log-probabilities (finite only).
_FRACTIONS = frozenset(
    {"depth", "needle_depths", "score", "odd_name_score", "haystack_similarity", "overlap_rouge1"}
)
_SIGNED = frozenset({"seed", "schema", "answer_logprobs", "logprobs"})


# Where a numeric field of a record (a number, or a tuple of them: ``many``) may lie: its name, ``many``,
# and the least and most it may be.
Bounds = tuple[str, bool, float, float]


def field_bounds(cls: type) -> tuple[Bounds, ...]:
    """The bounds of each field of a record type that holds numbers, bools apart."""
    hints = typing.get_type_hints(cls)
    found = []
    for f in dataclasses.fields(cls):
        inner = typing.get_args(hints[f.name])
        types = (hints[f.name], *inner, *(a for arg in inner for a in typing.get_args(arg)))
        if any(t in (int, float) for t in types):
            many = any(typing.get_origin(t) is tuple for t in (hints[f.name], *inner))
            low = -math.inf if f.name in _SIGNED else 0.0
            found.append((f.name, many, low, 1.0 if f.name in _FRACTIONS else math.inf))
    return tuple(found)


def within(values: tuple[float, ...], low: float, high: float) -> bool:
    """Whether every one of ``values`` is a finite number in [low, high]; in C, in a few passes (a
    perplexity document holds thousands of log-probabilities). An integer too large for a float
    (JSON's have no bound) is in no range."""
    try:
        return all(map(math.isfinite, values)) and low <= min(values) <= max(values) <= high
    except OverflowError:
        return False
