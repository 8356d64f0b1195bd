"""The long-output run's terminal lines: mean precision and recall by item count and length
(percent; the grid above them is the F1), the answers cut at their output budget, and each item
count's effective length."""

from __future__ import annotations

from typing import Any

from fathom.report.score_text import axis_table, effective_lines


def listing_text(listing: dict[str, Any]) -> list[str]:
    cells = listing["cells"]
    lines = []
    for measure in ("precision", "recall"):
        lines.append(f"{measure} (percent):")
        lines += axis_table([cell | {"mean": cell[measure]} for cell in cells], "items", "length")
    answers = sum(cell["n"] for cell in cells)
    budget = max(cell["max_new_tokens"] for cell in cells)
    lines.append(
        f"truncated answers (cut at their output budget): {listing['truncated']} of {answers}; "
        f"budgets up to {budget} new tokens"
    )
    return lines + effective_lines(listing, "items", lambda items: f"with {items} items", score="F1")
