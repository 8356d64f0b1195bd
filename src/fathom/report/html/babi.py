"""report.html's parts for a bAbI-style run (``fathom run babi``): each task's effective length in
the headline, and the score by task and length and by the distance between the first and the last
supporting fact, with Wilson's 95% intervals.

Every number is the summary's (``fathom.analysis.babi``); this module only lays them out.
"""

from __future__ import annotations

from typing import Any

from fathom.analysis.summary import Row
from fathom.report.babi_text import distance_label
from fathom.report.html.page import (
    SCORE_COLUMNS,
    as_shown,
    effective_boxes,
    effective_table,
    score_rows,
    table,
)


def babi_boxes(babi: Row) -> list[str]:
    """Each task's effective length on the mean."""
    return effective_boxes(babi, "task", lambda task: f"of {task}")


def babi_section(babi: Row) -> str:
    """Score per task and length, per task and distance between supporting facts, and each task's
    effective length on the mean and on the 95% lower bound."""
    edges = babi["distance_edges"]

    def label(key: str, value: Any) -> object:
        return distance_label(value, edges) if key == "distance" else as_shown(key, value)

    cells = score_rows(babi["cells"], "task", "length")
    distances = score_rows(babi["distances"], "task", "distance", label=label)
    return (
        '<section id="babi"><h2>Reasoning in a haystack (bAbI-style)</h2><p>Each sample hides a short '
        "story's sentences through the haystack and asks a question that needs one (qa1, qa4, qa5), two "
        "(qa2) or three (qa3) of them, graded as BABILong grades: the answer's first sentence must name "
        "the reference and no other of the story's places or people. The 95% interval is Wilson's.</p>"
        f"<h3>By task</h3>{table(('task', 'length', *SCORE_COLUMNS), cells)}"
        "<h3>By tokens between the first and last supporting fact (every length)</h3>"
        f"{table(('task', 'distance', *SCORE_COLUMNS), distances)}"
        f"{effective_table(babi, 'task', 'task')}</section>"
    )
