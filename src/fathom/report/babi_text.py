"""The bAbI-style run's terminal lines: the score by task and by the distance between the first and
the last supporting fact (percent), and each task's effective length."""

from __future__ import annotations

from typing import Any

from fathom.report.score_text import axis_table, effective_lines
from fathom.units import format_count


def distance_label(edge: int, edges: list[int]) -> str:
    """A distance bin's name from its lower edge: "1 fact" (one supporting fact), "<1k", "1k-4k", ...,
    ">=64k"."""
    if edge == 0:
        return "1 fact"
    later = [e for e in edges if e > edge]
    if not later:
        return f">={format_count(edge)}"
    return f"<{format_count(later[0])}" if edge == 1 else f"{format_count(edge)}-{format_count(later[0])}"


def babi_text(babi: dict[str, Any]) -> list[str]:
    edges = babi["distance_edges"]
    lines = ["score by tokens between the first and last supporting fact (all lengths):"]
    lines += axis_table(babi["distances"], "task", "distance", lambda edge: distance_label(edge, edges))
    return lines + effective_lines(babi, "task", lambda task: f"of {task}")
