"""report.html's parts for a state-tracking run (``fathom run state``): its effective length per
operation count in the headline, and the score by operation count and by question kind, at each
length, with Wilson's 95% intervals.

Every number is the summary's (``fathom.analysis.state``); this module only lays them out.
"""

from __future__ import annotations

from fathom.analysis.summary import Row
from fathom.report.html.page import SCORE_COLUMNS, effective_boxes, effective_table, score_rows, table


def state_boxes(state: Row) -> list[str]:
    """Each operation count's effective length on the mean."""
    return effective_boxes(state, "ops", lambda ops: f"with {ops} operations")


def state_section(state: Row) -> str:
    """Score per operation count and length, per question kind and length, and the effective
    lengths on the mean and on the 95% lower bound."""
    tail = ("length", *SCORE_COLUMNS)
    cells = score_rows(state["cells"], "ops", "length")
    questions = score_rows(state["questions"], "question", "length")
    return (
        '<section id="state"><h2>State tracking</h2><p>Each sample asks for the list <code>items</code> '
        "after every line of code, its length or its sum, graded exactly. Operations: the lines that "
        "change it (as many decoys beside them change nothing asked). The 95% interval is Wilson's.</p>"
        f"<h3>By operations</h3>{table(('operations', *tail), cells)}"
        f"<h3>By question</h3>{table(('question', *tail), questions)}"
        f"{effective_table(state, 'ops', 'operations')}</section>"
    )
