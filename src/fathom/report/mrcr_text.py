"""The multi-round co-reference run's terminal lines: by repeat count and length, the share of answers
that open with the prefix and that reproduce the target exactly (percent; the grid above them is the
similarity score), the score by which repeat was asked for, the answers cut at their output budget,
and each repeat count's effective length."""

from __future__ import annotations

from typing import Any

from fathom.report.score_text import axis_table, effective_lines


def mrcr_text(mrcr: dict[str, Any]) -> list[str]:
    cells = mrcr["cells"]
    lines = []
    for measure, about in (("prefixed", "answers opening with the prefix"), ("exact", "reproduced exactly")):
        lines.append(f"{about} (percent):")
        lines += axis_table([cell | {"mean": cell[measure]} for cell in cells], "repeats", "length")
    lines.append("score by which repeat was asked for (percent):")
    lines += axis_table(mrcr["positions"], "position", "length")
    answers = sum(cell["n"] for cell in cells)
    budget = max(cell["max_new_tokens"] for cell in cells)
    lines.append(
        f"truncated answers (cut at their output budget): {mrcr['truncated']} of {answers}; "
        f"budgets up to {budget} new tokens"
    )
    return lines + effective_lines(mrcr, "repeats", lambda repeats: f"with {repeats} repeats")
