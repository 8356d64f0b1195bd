"""report.html's thinking section: a thinking model's reasoning tokens per cell and its samples
still thinking when their reply ended (summary.json's ``thinking``; ``fathom.analysis.thinking``)."""

from __future__ import annotations

from fathom.analysis.summary import Row
from fathom.report.html.page import esc, table
from fathom.report.plots import format_length
from fathom.report.thinking_text import thinking_line


def thinking_section(thinking: Row | None) -> str:
    """The run's line, then a row per (task, length, depth) cell; nothing for a run without reasoning."""
    if thinking is None:
        return ""
    rows = [
        (
            c["task"],
            format_length(c["length"]),
            "drawn" if c["depth"] is None else c["depth"],
            c["samples"],
            c["reasoned"],
            "" if c["tokens_mean"] is None else c["tokens_mean"],
            "" if c["tokens_max"] is None else c["tokens_max"],
            c["still_thinking"],
        )
        for c in thinking["cells"]
    ]
    head = ("task", "length", "depth", "samples", "reasoned", "mean tokens", "most", "still thinking")
    return (
        f'<section id="thinking"><h2>Thinking</h2><p>{esc(thinking_line(thinking))}. The reasoning is '
        "kept apart from the answer: only the answer is graded, and a reply that ended inside its "
        "reasoning has none.</p>"
        f"{table(head, rows)}</section>"
    )
