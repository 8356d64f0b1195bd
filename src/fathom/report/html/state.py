"""report.html's parts for a state-tracking run (``fathom run state``): its effective length per
operation count in the headline, and the score by operation count and by question kind, at each
length, with Wilson's 95% intervals.

Every number is the summary's (``fathom.analysis.state``); this module only lays them out.
"""

from __future__ import annotations

from fathom.analysis.summary import Row
from fathom.report.html.page import SCORE_COLUMNS, esc, number_box, score_rows, table
from fathom.units import length_or_none


def state_boxes(state: Row) -> list[str]:
    """Each operation count's effective length on the mean."""
    threshold = f"score ≥ {state['threshold']:g}"
    return [
        number_box(
            length_or_none(row["mean"]), f"effective length with {row['ops']} operations ({threshold})"
        )
        for row in state["effective_length"]
    ]


def state_section(state: Row) -> str:
    """Score per operation count and length, per question kind and length, and the effective
    lengths on the mean and on the 95% lower bound."""
    tail = ("length", *SCORE_COLUMNS)
    cells = score_rows(state["cells"], "ops", "length")
    questions = score_rows(state["questions"], "question", "length")
    effective = [
        (r["ops"], length_or_none(r["mean"]), length_or_none(r["lower_bound"]))
        for r in state["effective_length"]
    ]
    threshold = f"{state['threshold']:g}"
    return (
        '<section id="state"><h2>State tracking</h2><p>Each sample asks for the list <code>items</code> '
        "after every line of code, its length or its sum, graded exactly. Operations: the lines that "
        "change it (as many decoys beside them change nothing asked). The 95% interval is Wilson's.</p>"
        f"<h3>By operations</h3>{table(('operations', *tail), cells)}"
        f"<h3>By question</h3>{table(('question', *tail), questions)}"
        f"<h3>Effective length (score ≥ {esc(threshold)} at that length and every shorter one)</h3>"
        f"{table(('operations', 'on the mean', 'on the 95% lower bound'), effective)}</section>"
    )
