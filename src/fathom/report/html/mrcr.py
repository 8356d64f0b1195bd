"""report.html's parts for a multi-round co-reference run (``fathom run mrcr``): each repeat count's
effective length in the headline, and the score by repeat count and length with its 95% interval,
beside each cell's share of answers opening with the prefix and reproduced exactly, its answers cut
at their output budget and its largest budget, and the score by which repeat was asked for.

Every number is the summary's (``fathom.analysis.mrcr``); this module only lays them out.
"""

from __future__ import annotations

from fathom.analysis.stats import SCORE_INTERVAL_RULE
from fathom.analysis.summary import Row
from fathom.report.html.listing import budget_boxes, budget_table
from fathom.report.html.page import (
    SCORE_COLUMNS,
    effective_table,
    score_rows,
    table,
)


def mrcr_boxes(mrcr: Row) -> list[str]:
    """Each repeat count's effective length on the mean, and the answers cut at their budget."""
    return budget_boxes(mrcr, "repeats", lambda repeats: f"with {repeats} repeats")


def mrcr_section(mrcr: Row) -> str:
    """The score per repeat count and length; prefixed, exact and cut answers per cell; the score by
    which repeat was asked for; and the effective lengths on the mean and on the 95% lower bound."""
    cells = mrcr["cells"]
    scores = table(("repeats", "length", *SCORE_COLUMNS), score_rows(cells, "repeats", "length"))
    positions = table(
        ("position", "length", *SCORE_COLUMNS), score_rows(mrcr["positions"], "position", "length")
    )
    return (
        '<section id="mrcr"><h2>Multi-round co-reference</h2><p>Each sample is a conversation in which '
        "the user asks for many pieces of writing, one of them several times (the repeats), and at the "
        "end asks for one of those again, word for word, after a random prefix. The score is MRCR's: 0 "
        "unless the answer opens with the prefix, else the similarity ratio of the rest to the piece "
        f"asked for. The 95% interval is {SCORE_INTERVAL_RULE}.</p>"
        f"<h3>Score by repeats</h3>{scores}<h3>Prefixed, exact and truncated answers</h3>"
        f"{budget_table(cells, 'repeats', ('prefixed', 'exact'))}"
        f"<h3>Score by which repeat was asked for</h3>{positions}"
        f"{effective_table(mrcr, 'repeats', 'repeats')}</section>"
    )
