"""RULER's four categories as terminal lines: each one's mean over its tasks per length, with its 95%
interval (``fathom.analysis.ruler.category_scores``); kept apart from ``text.py``, which prints the
rest of a RULER run."""

from __future__ import annotations

from collections.abc import Sequence

from fathom.analysis.summary import Row
from fathom.units import format_count


def _score(row: Row) -> str:
    if row["mean"] is None:
        return f"{format_count(row['length'])} n/a"
    low, high = 100 * row["ci_low"], 100 * row["ci_high"]
    return f"{format_count(row['length'])} {100 * row['mean']:.1f} [{low:.1f}, {high:.1f}]"


def categories_text(categories: Sequence[Row]) -> list[str]:
    """One line per category: its name, how many of its tasks the run has, each length's score."""
    if not categories:
        return []
    lines = ["by RULER's category (percent, mean over its tasks [95% interval]):"]
    width = max(len(row["category"]) for row in categories)
    for row in categories:
        tasks = f"({len(row['tasks'])} task{'s' if len(row['tasks']) > 1 else ''})"
        lines.append(
            f"  {row['category']:<{width}} {tasks:<10} " + ", ".join(_score(r) for r in row["lengths"])
        )
    return lines
