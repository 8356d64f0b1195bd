"""report.html's parts for a long-output run (``fathom run listing``): each item count's effective
length in the headline, and the F1 by item count and length with Wilson's 95% intervals, beside
each cell's mean precision and recall, its answers cut at their output budget and its largest budget.

Every number is the summary's (``fathom.analysis.listing``); this module only lays them out.
"""

from __future__ import annotations

from fathom.analysis.summary import Row
from fathom.report.html.page import (
    SCORE_COLUMNS,
    as_shown,
    effective_boxes,
    effective_table,
    number_box,
    percent,
    score_rows,
    table,
)


def listing_boxes(listing: Row) -> list[str]:
    """Each item count's effective length on the mean, and the answers cut at their budget."""
    boxes = effective_boxes(listing, "items", lambda items: f"with {items} items", score="F1")
    return [*boxes, number_box(str(listing["truncated"]), "answers cut at their output budget")]


def listing_section(listing: Row) -> str:
    """F1 per item count and length; precision, recall and truncation per cell; and the effective
    lengths on the mean and on the 95% lower bound."""
    cells = listing["cells"]
    scores = score_rows(cells, "items", "length")
    parts = [
        (
            c["items"],
            as_shown("length", c["length"]),
            percent(c["precision"]),
            percent(c["recall"]),
            c["truncated"],
            c["max_new_tokens"],
        )
        for c in cells
    ]
    return (
        '<section id="listing"><h2>Long outputs</h2><p>Each sample asks for the id of every log record '
        "that matches a user and an action, one a line; as many look-alike records match one of the two. "
        "The score is the item-level F1 of the ids listed; an answer cut at its output budget (finish "
        "reason <code>length</code>) is graded as it stands. The 95% interval is Wilson's.</p>"
        f"<h3>F1 by items</h3>{table(('items', 'length', *SCORE_COLUMNS), scores)}"
        "<h3>Precision, recall and truncation</h3>"
        f"{table(('items', 'length', 'precision', 'recall', 'truncated', 'max new tokens'), parts)}"
        f"{effective_table(listing, 'items', 'items', score='F1')}</section>"
    )
