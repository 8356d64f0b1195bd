"""A thinking model's reasoning counted: its tokens per cell and the samples still thinking when
their reply ended (summary.json's ``thinking`` section), and two runs' compared (``fathom compare``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.records import THINKING, SampleRecord

Where = tuple[str, int, float | None]  # a cell: its task, length and depth


def thinking_summary(records: Sequence[SampleRecord]) -> dict[str, Any] | None:
    """The reasoning of the graded samples answered (controls and errors apart): over the run and per
    (task, length, depth) cell, the samples whose reasoning was read (``reasoned``), their mean (to a
    tenth) and largest reasoning tokens, and those whose reply ended inside its reasoning
    (``still_thinking``); None where no record holds reasoning (a model that does not think, or
    records before schema 13)."""
    answered = _answered(records)
    if answered is None:
        return None
    rows = [
        {"task": task, "length": length, "depth": depth, **_counts(group)}
        for (task, length, depth), group in _cells(answered)
    ]
    return {**_counts(answered), "cells": rows}


def _answered(records: Sequence[SampleRecord]) -> list[SampleRecord] | None:
    """The graded samples answered, or None where none of them holds reasoning."""
    answered = [r for r in records if not r.control and r.error is None]
    return answered if any(r.reasoning_tokens is not None for r in answered) else None


def _cells(answered: Sequence[SampleRecord]) -> list[tuple[Where, list[SampleRecord]]]:
    cells: defaultdict[Where, list[SampleRecord]] = defaultdict(list)
    for record in answered:
        cells[record.task, record.length, record.depth].append(record)
    return sorted(cells.items(), key=lambda item: _order(item[0]))


def _tokens(group: Sequence[SampleRecord]) -> list[int]:
    """The reasoning tokens of the samples whose reasoning was read."""
    return [r.reasoning_tokens for r in group if r.reasoning_tokens is not None]


def _mean(tokens: Sequence[int]) -> float | None:
    return sum(tokens) / len(tokens) if tokens else None


def _still_thinking(group: Sequence[SampleRecord]) -> int:
    return sum(1 for r in group if r.finish_reason == THINKING)


def _tenth(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _counts(group: Sequence[SampleRecord]) -> dict[str, Any]:
    tokens = _tokens(group)
    return {
        "samples": len(group),
        "reasoned": len(tokens),
        "tokens_mean": _tenth(_mean(tokens)),
        "tokens_max": max(tokens, default=None),
        "still_thinking": _still_thinking(group),
    }


def _order(cell: Where) -> tuple[str, int, float]:
    task, length, depth = cell
    return task, length, -1.0 if depth is None else depth


@dataclass(frozen=True)
class ThinkingChange:
    """One cell's reasoning in two runs, or the run's (``task`` None): each run's mean reasoning tokens,
    unrounded (None where none was read), and its samples still thinking."""

    task: str | None
    length: int | None
    depth: float | None
    base_tokens: float | None
    new_tokens: float | None
    base_still: int
    new_still: int

    @property
    def change(self) -> float | None:
        """New minus base, in tokens a sample, to a tenth (of the unrounded means: the difference of
        the rounded ones can be a tenth off); None where either run read no reasoning."""
        if self.base_tokens is None or self.new_tokens is None:
            return None
        return _tenth(self.new_tokens - self.base_tokens)

    @property
    def means(self) -> tuple[float | None, float | None]:
        """Each run's mean reasoning tokens a sample, to a tenth, as summary.json gives them."""
        return _tenth(self.base_tokens), _tenth(self.new_tokens)

    def to_json(self) -> dict[str, Any]:
        base, new = self.means
        return {
            "task": self.task,
            "length": self.length,
            "depth": self.depth,
            "base_tokens_mean": base,
            "new_tokens_mean": new,
            "tokens_change": self.change,
            "base_still_thinking": self.base_still,
            "new_still_thinking": self.new_still,
        }


@dataclass(frozen=True)
class ThinkingComparison:
    """Two runs' reasoning over the samples both hold (``thinking_summary`` of each): over them all
    (``overall``) and cell by cell, every cell that either run read reasoning in."""

    overall: ThinkingChange
    cells: tuple[ThinkingChange, ...]

    def to_json(self) -> dict[str, Any]:
        overall = self.overall.to_json()
        del overall["task"], overall["length"], overall["depth"]
        return {**overall, "cells": [cell.to_json() for cell in self.cells]}


def compare_thinking(base: Sequence[SampleRecord], new: Sequence[SampleRecord]) -> ThinkingComparison | None:
    """``base`` and ``new`` (the samples both runs hold) compared by their reasoning; None where
    neither run read any (models that do not think: their comparison says nothing of it)."""
    before, after = _answered(base), _answered(new)
    if before is None and after is None:
        return None
    base_cells, new_cells = (dict(_cells(answered or ())) for answered in (before, after))
    cells = tuple(
        _change(cell, base_cells.get(cell), new_cells.get(cell))
        for cell in sorted(base_cells.keys() | new_cells.keys(), key=_order)
    )
    return ThinkingComparison(_change((None, None, None), before, after), cells)


def _change(
    cell: tuple[str | None, int | None, float | None],
    base: Sequence[SampleRecord] | None,
    new: Sequence[SampleRecord] | None,
) -> ThinkingChange:
    def counts(group: Sequence[SampleRecord] | None) -> tuple[float | None, int]:
        return (None, 0) if group is None else (_mean(_tokens(group)), _still_thinking(group))

    (base_tokens, base_still), (new_tokens, new_still) = counts(base), counts(new)
    return ThinkingChange(*cell, base_tokens, new_tokens, base_still, new_still)
