"""report.html's parts for a long-output run (``fathom run listing``): each item count's effective
length in the headline, and the F1 by item count and length with its 95% interval, beside
each cell's mean precision and recall, its answers cut at their output budget and its largest budget.

Every number is the summary's (``fathom.analysis.listing``); this module only lays them out.
``budget_boxes`` and ``budget_table`` lay out any family whose answers each have a budget (mrcr's
too), as ``analysis.listing.budget_cells`` makes their cells.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fathom.analysis.stats import SCORE_INTERVAL_RULE
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
    return budget_boxes(listing, "items", lambda items: f"with {items} items", score="F1")


def listing_section(listing: Row) -> str:
    """F1 per item count and length; precision, recall and truncation per cell; and the effective
    lengths on the mean and on the 95% lower bound."""
    scores = score_rows(listing["cells"], "items", "length")
    return (
        '<section id="listing"><h2>Long outputs</h2><p>Each sample asks for the id of every log record '
        "that matches a user and an action, one a line; as many look-alike records match one of the two. "
        "The score is the item-level F1 of the ids listed; an answer cut at its output budget (finish "
        "reason <code>length</code>) is graded as it stands. The 95% interval is "
        f"{SCORE_INTERVAL_RULE}.</p>"
        f"<h3>F1 by items</h3>{table(('items', 'length', *SCORE_COLUMNS), scores)}"
        "<h3>Precision, recall and truncation</h3>"
        f"{budget_table(listing['cells'], 'items', ('precision', 'recall'))}"
        f"{effective_table(listing, 'items', 'items', score='F1')}</section>"
    )


def budget_boxes(family: Row, axis: str, what: Callable[[Any], str], score: str = "score") -> list[str]:
    """The headline's boxes of a family whose answers each have a budget (``analysis.listing.
    budget_cells``'s): each ``axis`` value's effective length on the mean, and the answers cut."""
    boxes = effective_boxes(family, axis, what, score=score)
    return [*boxes, number_box(str(family["truncated"]), "answers cut at their output budget")]


def budget_table(cells: Sequence[Mapping[str, Any]], axis: str, shares: tuple[str, ...]) -> str:
    """Per cell (``axis`` and length): the family's ``shares`` in percent, the answers cut at their
    budget and the largest budget."""
    rows = [
        (c[axis], as_shown("length", c["length"]), *(percent(c[s]) for s in shares), c["truncated"],
         c["max_new_tokens"])
        for c in cells
    ]  # fmt: skip
    return table((axis, "length", *shares, "truncated", "max new tokens"), rows)
