"""The terminal's lines for a judge's qualification (``fathom judge --qualify``), and the line the
report gives a judge's qualification (or its lack) beside its verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fathom.judgement import QualificationRecord


def qualification_text(record: QualificationRecord) -> list[str]:
    """The judge's numbers against the set's thresholds, by category, and PASSED or FAILED."""
    limits = record.thresholds
    kappa = "undefined (one verdict throughout)" if record.kappa is None else f"{record.kappa:.2f}"
    lines = [
        f"qualification of {record.judge} on {record.set} ({record.items} items, rubric {record.rubric}):",
        f"  accuracy {record.accuracy:.1%} ({record.agreed} of {record.items} agree with the labels, "
        f"{record.unreadable} unreadable; at least {limits['accuracy']:.0%} to pass)",
        f"  Cohen's kappa with the labels {kappa} (at least {limits['kappa']:.2f})",
        f"  flips {record.flips} of {record.adversarial} adversarial answers ({record.flip_rate:.1%}; "
        f"at most {limits['flip_rate']:.0%})",
        "  by category: "
        + ", ".join(
            f"{name} {row['agreed']}/{row['items']}" + (f" ({row['flips']} flipped)" if row["flips"] else "")
            for name, row in record.by_category.items()
        ),
    ]
    if record.passed:
        return [*lines, "  PASSED"]
    return [*lines, f"  FAILED: {'; '.join(record.failures)}"]


def qualification_line(row: Mapping[str, Any] | None) -> str:
    """A judge row's qualification (``analysis.agreement``'s ``qualification``), in words."""
    if row is None:
        return "never qualified: run 'fathom judge RUN --qualify' with this judge"
    numbers = f"accuracy {row['accuracy']:.0%}, flips {row['flips']} of {row['adversarial']} on {row['set']}"
    return f"passed ({numbers})" if row["passed"] else f"FAILED ({numbers}: {'; '.join(row['failures'])})"
