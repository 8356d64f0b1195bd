"""The figures of a series of checkpoints, as PNG bytes for series.html to carry inline: the
effective length over the checkpoints with its band, and the score per length over the checkpoints as
small multiples. Checkpoints that regressed are marked in red.

matplotlib is imported inside the functions, as in ``fathom.report.plots``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fathom.analysis.series import EFFECTIVE, Series, fired
from fathom.report.plots import DPI, format_length, pyplot_agg

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

REGRESSED = "#b2182b"
LINE = "#2166ac"
COLUMNS = 3  # small multiples per row


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _plain(name: str) -> str:
    """A label as matplotlib should print it: a '$' in it would start mathtext."""
    return name.replace("$", r"\$")


def _checkpoint_axis(ax: Axes, names: Sequence[str]) -> None:
    ax.set_xticks(range(len(names)), [_plain(n) for n in names], rotation=45, ha="right", fontsize=7)
    ax.set_xlim(-0.5, len(names) - 0.5)


def _regressed_at(series: Series, level: str, name: str) -> list[int]:
    """The checkpoints where the gate's test (level, name) regressed, against the baseline or the best."""
    return [
        i
        for i, step in enumerate(series.steps)
        if any((level, name) in fired(step.against(which)) for which in ("baseline", "best"))
    ]


def effective_length_figure(series: Series, names: Sequence[str]) -> bytes | None:
    """The effective length on the mean (line) and on the lower bound (dashed) at each checkpoint, with
    the paired bootstrap's 95% interval as a band; None for a suite's runs, which have none. The
    lengths are the sweep's, evenly spaced, with "none" below the shortest."""
    pyplot_agg()
    import matplotlib.pyplot as plt

    steps = series.steps
    if any(step.numbers.effective_length is None for step in steps):
        return None
    lengths = sorted({at.length for step in steps for at in step.numbers.lengths})

    def y(length: int | None) -> float:
        return 0.0 if length is None or length not in lengths else float(lengths.index(length) + 1)

    x = list(range(len(steps)))
    effective = [step.numbers.effective_length for step in steps]
    mean = [y(e.mean) for e in effective if e is not None]
    lower = [y(e.lower_bound) for e in effective if e is not None]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(steps) + 3), 3.8))
    try:
        bands = [(i, step.effective_interval) for i, step in enumerate(steps) if step.effective_interval]
        if bands:
            ax.fill_between(
                [i for i, _ in bands],
                [y(band[0]) for _, band in bands if band],
                [y(band[1]) for _, band in bands if band],
                color=LINE,
                alpha=0.18,
                label="95% interval (paired bootstrap)",
            )
        ax.plot(x, mean, marker="o", color=LINE, label="on the mean")
        ax.plot(x, lower, linestyle="--", color=LINE, alpha=0.7, label="on the 95% lower bound")
        bad = _regressed_at(series, EFFECTIVE, EFFECTIVE)
        ax.scatter(bad, [mean[i] for i in bad], s=90, facecolors="none", edgecolors=REGRESSED, linewidths=2,
                   label="regressed", zorder=3)  # fmt: skip
        ax.set_yticks(range(len(lengths) + 1), ["none", *(format_length(n) for n in lengths)])
        ax.set_ylim(-0.3, len(lengths) + 0.3)
        ax.set_ylabel("effective length")
        _checkpoint_axis(ax, names)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        ax.set_title("effective length over the checkpoints", fontsize=10)
        return _png(fig)
    finally:
        plt.close(fig)


def length_figure(series: Series, names: Sequence[str]) -> bytes:
    """One panel per length: the score at each checkpoint with its 95% interval as a band, the
    checkpoints where that length regressed (the gate's length test) ringed in red."""
    pyplot_agg()
    import matplotlib.pyplot as plt

    steps = series.steps
    lengths = sorted({at.length for step in steps for at in step.numbers.lengths})
    rows = max(1, math.ceil(len(lengths) / COLUMNS))
    columns = min(COLUMNS, max(1, len(lengths)))
    width = max(3.2, 0.3 * len(steps) + 1.6)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, 2.9 * rows), squeeze=False, sharey=True)
    try:
        for index, ax in enumerate(axes.flat):
            if index >= len(lengths):
                ax.set_visible(False)
                continue
            length = lengths[index]
            _length_panel(ax, series, length, names)
        fig.suptitle("score per length over the checkpoints (95% interval shaded)", fontsize=10)
        return _png(fig)
    finally:
        plt.close(fig)


def _length_panel(ax: Axes, series: Series, length: int, names: Sequence[str]) -> None:
    points = []
    for i, step in enumerate(series.steps):
        at = next((a.score for a in step.numbers.lengths if a.length == length), None)
        if at is not None and at.mean is not None:
            points.append((i, at.mean, at.ci_low or 0.0, 1.0 if at.ci_high is None else at.ci_high))
    if points:
        x = [p[0] for p in points]
        ax.fill_between(x, [p[2] for p in points], [p[3] for p in points], color=LINE, alpha=0.18)
        ax.plot(x, [p[1] for p in points], marker="o", markersize=3, color=LINE)
    mean = {p[0]: p[1] for p in points}
    bad = [i for i in _regressed_at(series, "length", format_length(length)) if i in mean]
    ax.scatter(
        bad, [mean[i] for i in bad], s=60, facecolors="none", edgecolors=REGRESSED, linewidths=2, zorder=3
    )
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(format_length(length), fontsize=9)
    _checkpoint_axis(ax, names)
    ax.grid(axis="y", alpha=0.3)
