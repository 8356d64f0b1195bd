"""A thinking model's reasoning counted: its tokens per cell and the samples still thinking when
their reply ended (summary.json's ``thinking`` section)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from fathom.records import THINKING, SampleRecord


def thinking_summary(records: Sequence[SampleRecord]) -> dict[str, Any] | None:
    """The reasoning of the graded samples answered (controls and errors apart): over the run and per
    (task, length, depth) cell, the samples whose reasoning was read (``reasoned``), their mean and
    largest reasoning tokens, and those whose reply ended inside its reasoning (``still_thinking``);
    None where no record holds reasoning (a model that does not think, or records before schema 13)."""
    answered = [r for r in records if not r.control and r.error is None]
    if not any(r.reasoning_tokens is not None for r in answered):
        return None
    cells: defaultdict[tuple[str, int, float | None], list[SampleRecord]] = defaultdict(list)
    for record in answered:
        cells[record.task, record.length, record.depth].append(record)
    rows = [
        {"task": task, "length": length, "depth": depth, **_counts(group)}
        for (task, length, depth), group in sorted(cells.items(), key=lambda item: _order(item[0]))
    ]
    return {**_counts(answered), "cells": rows}


def _counts(group: Sequence[SampleRecord]) -> dict[str, Any]:
    tokens = [r.reasoning_tokens for r in group if r.reasoning_tokens is not None]
    return {
        "samples": len(group),
        "reasoned": len(tokens),
        "tokens_mean": round(sum(tokens) / len(tokens), 1) if tokens else None,
        "tokens_max": max(tokens, default=None),
        "still_thinking": sum(1 for r in group if r.finish_reason == THINKING),
    }


def _order(cell: tuple[str, int, float | None]) -> tuple[str, int, float]:
    task, length, depth = cell
    return task, length, -1.0 if depth is None else depth
