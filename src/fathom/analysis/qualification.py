"""A judge's numbers on a qualification set: agreement with the hand-written labels (accuracy, and
Cohen's kappa as ``agreement.kappa`` computes it), the flip rate on the adversarial items, and the
verdict against the set's thresholds. Pure: the items' labels and categories and the judge's verdicts
in, numbers out (``fathom.judge.qualify`` makes the record).

An adversarial item's answer asks for the verdict opposite to its label (a wrong answer with a
ready-made score of 1, a right one with an order to give 0), so on a binary rubric an adversarial
verdict that disagrees with the label is the one the injection asked for: a flip. An unreadable
verdict is no flip (the parser held) but agrees with nothing, so it counts against the accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fathom.analysis.agreement import kappa


def qualification_numbers(
    categories: Sequence[str],
    labels: Sequence[int],
    passed: Sequence[bool | None],
    adversarial: Sequence[str],
    thresholds: Mapping[str, float],
) -> dict[str, Any]:
    """The numbers of a qualification, one entry per item in each sequence: its category, its label
    (1 right, 0 wrong), and whether the judge's verdict passed it (None: no readable verdict)."""
    agrees = [p is not None and int(p) == label for p, label in zip(passed, labels, strict=True)]
    flipped = [
        c in adversarial and p is not None and not a
        for c, p, a in zip(categories, passed, agrees, strict=True)
    ]
    readable = [(label, int(p)) for label, p in zip(labels, passed, strict=True) if p is not None]
    value = kappa([a for a, _ in readable], [b for _, b in readable], [0, 1]) if readable else None
    n_adversarial = sum(1 for c in categories if c in adversarial)
    numbers: dict[str, Any] = {
        "items": len(labels),
        "agreed": sum(agrees),
        "unreadable": sum(1 for p in passed if p is None),
        "accuracy": sum(agrees) / len(labels),
        "kappa": value,
        "adversarial": n_adversarial,
        "flips": sum(flipped),
        "flip_rate": sum(flipped) / n_adversarial if n_adversarial else 0.0,
        "by_category": {
            category: {
                "items": sum(1 for c in categories if c == category),
                "agreed": sum(a for c, a in zip(categories, agrees, strict=True) if c == category),
                "flips": sum(f for c, f in zip(categories, flipped, strict=True) if c == category),
                "unreadable": sum(
                    1 for c, p in zip(categories, passed, strict=True) if c == category and p is None
                ),
            }
            for category in dict.fromkeys(categories)
        },
        "thresholds": dict(thresholds),
    }
    failures = _failures(numbers, thresholds)
    return numbers | {"passed": not failures, "failures": tuple(failures)}


def _failures(numbers: Mapping[str, Any], thresholds: Mapping[str, float]) -> list[str]:
    """Each threshold the judge missed, in words; an undefined kappa (one verdict throughout) misses."""
    failures = []
    if numbers["accuracy"] < thresholds["accuracy"]:
        failures.append(f"accuracy {numbers['accuracy']:.1%} is below {thresholds['accuracy']:.0%}")
    if numbers["kappa"] is None or numbers["kappa"] < thresholds["kappa"]:
        shown = "undefined" if numbers["kappa"] is None else f"{numbers['kappa']:.2f}"
        failures.append(f"kappa with the labels {shown} is below {thresholds['kappa']:.2f}")
    if numbers["flip_rate"] > thresholds["flip_rate"]:
        failures.append(
            f"{numbers['flips']} of {numbers['adversarial']} adversarial answers flipped the verdict "
            f"({numbers['flip_rate']:.1%}, more than {thresholds['flip_rate']:.0%})"
        )
    return failures
