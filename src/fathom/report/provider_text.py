"""The provider's counts of a run's prompts as the terminal and report.html say them: one line over the
run and its lengths (summary.json's ``provider_counts``, ``fathom.analysis.provider_counts``)."""

from __future__ import annotations

from fathom.analysis.summary import Row
from fathom.manifest import PROVIDER_COUNTED
from fathom.units import format_count


def _span(row: Row) -> str:
    """The least and largest ratio of a row, as percentages of the target length."""
    return f"{row['ratio_min']:.1%}..{row['ratio_max']:.1%}"


def provider_counts_line(section: Row) -> str:
    """What the run's lengths are, and how close the provider's counts came to each target length."""
    said = f"lengths are the provider's counts, by {section['counted_by'].removeprefix(PROVIDER_COUNTED)}"
    if not section["prompts"]:
        return f"{said}: no prompt was answered, so none was counted"
    lengths = ", ".join(f"{format_count(row['length'])} {_span(row)}" for row in section["lengths"])
    return (
        f"{said}: {section['prompts']} prompts came to {_span(section)} of their target length (mean "
        f"{section['ratio_mean']:.1%}; by length: {lengths})"
    )
