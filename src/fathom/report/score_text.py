"""Score tables as terminal text: a percent, and a table of any two axes of a summary's rows (state
tracking's question x length, the bAbI-style task x distance), and a family's effective lengths."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fathom.units import format_count, length_or_none


def pct(value: float | None, width: int = 6) -> str:
    return f"{'n/a' if value is None else f'{100 * value:.1f}':>{width}}"


def axis_table(
    rows: Sequence[Mapping[str, Any]], row: str, column: str, label: Callable[[Any], str] = format_count
) -> list[str]:
    """The mean score (percent) of ``rows`` with ``row``'s values down and ``column``'s across, each
    in its first order down and sorted across; "n/a" where a pair has no row."""
    columns = sorted({r[column] for r in rows})
    by_pos = {(str(r[row]), r[column]): r["mean"] for r in rows}
    keys = list(dict.fromkeys(str(r[row]) for r in rows))
    width = max(len(row), *(len(k) for k in keys))
    lines = [f"  {row:<{width}}" + "".join(f"{label(c):>8}" for c in columns)]
    return lines + [f"  {k:<{width}}" + "".join(pct(by_pos.get((k, c)), 8) for c in columns) for k in keys]


def effective_lines(
    section: Mapping[str, Any], key: str, what: Callable[[Any], str], score: str = "score"
) -> list[str]:
    """A family's effective lengths (``analysis.stats.effective_by``'s rows, each named by its value
    under ``key``, through ``what``), on the mean and on the 95% lower bound, a line each."""
    return [
        f"effective length {what(row[key])} ({score} >= {section['threshold']:g}): "
        f"{length_or_none(row['mean'])}; on the 95% lower bound: {length_or_none(row['lower_bound'])}"
        for row in section["effective_length"]
    ]
