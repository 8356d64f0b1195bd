"""report.html's failures section: each kind of failure counted (``fathom.analysis.failures``), and
each kind's samples in a collapsed list that the page's script fills when it is opened."""

from __future__ import annotations

from collections.abc import Sequence

from fathom.analysis.failures import (
    FAILURE_KINDS,
    REJECTED,
    error_kinds,
    failure_counts,
    hedged_right,
    rejected_lure,
)
from fathom.records import SampleRecord
from fathom.report.html.page import FAILURE_LABELS, esc, table

# The list of samples right by their task's metric that named a look-alike's value too (page_data).
HEDGED_RIGHT = "flag hedged"
# The list of samples right that named a look-alike's value only to reject it (page_data).
REJECTED_RIGHT = "flag rejected"


def _samples(summary: str, kind: str, names: str) -> str:
    """A collapsed list of the samples that ``names`` names in the page's data."""
    return (
        f'<details class="failure" data-kind="{kind}" data-samples="{names}"><summary>{summary}</summary>'
        '<div class="samples"></div></details>'
    )


def failures_section(records: Sequence[SampleRecord]) -> str:
    """Counts of each kind of failure, and each kind's samples in a collapsed list; errors in
    sub-lists by their kind; the hedged answers that the task's metric counts right, apart."""
    kinds = failure_counts(records)
    rows = [(kind, FAILURE_LABELS[kind], kinds[kind]) for kind in FAILURE_KINDS]
    lists = []
    for kind in FAILURE_KINDS:
        if not kinds[kind]:
            continue
        summary = f"{esc(FAILURE_LABELS[kind])}: {kinds[kind]}"
        if kind == "error":
            inner = "".join(
                f'<details data-samples="error {esc(name)}"><summary>{esc(name)}: {count}</summary>'
                '<div class="samples"></div></details>'
                for name, count in error_kinds(records).items()
            )
            head = f'<details class="failure" data-kind="error"><summary>{summary}</summary>'
            lists.append(f"{head}{inner}</details>")
        else:
            lists.append(_samples(summary, kind, f"failure {kind}"))
    hedged = sum(hedged_right(r) for r in records)
    if hedged:
        what = (
            f"right by the task's metric, but also naming another key's value (hedged): {hedged}; RULER "
            "scores by containment and counts them right, as fathom does, to stay comparable"
        )
        lists.append(_samples(esc(what), "hedged-right", HEDGED_RIGHT))
    rejected = sum(rejected_lure(r) for r in records)
    if rejected:
        lists.append(_samples(f"{esc(FAILURE_LABELS[REJECTED])}: {rejected}", REJECTED, REJECTED_RIGHT))
    return (
        f'<section id="failures"><h2>Failures</h2><p>{kinds[None]} of {len(records)} samples fully right. '
        "Each failed sample is counted once, under the first kind that applies, in this order.</p>"
        f"{table(('kind', 'what it means', 'samples'), rows)}{''.join(lists)}</section>"
    )
