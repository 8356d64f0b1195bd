"""A series of checkpoints as one self-contained page (series.html): the checkpoints' table, the first
regressions, the effective length and the score per length over the checkpoints, and each checkpoint's
heatmap in a strip, a click on which opens that run's report.

As every fathom page: every value escaped (labels are the user's text), images inline as data: URIs,
the shared style and script (``page``).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from fathom.analysis.checkpoint import AtLength
from fathom.analysis.series import Series
from fathom.report.html.page import esc, number_box, page
from fathom.report.plots import format_length
from fathom.report.series_text import (
    AGAINST_WORDS,
    change,
    checkpoint_name,
    effective_text,
    first_regression_name,
    long_score,
    status,
)

SCROLLING_STRIP = "display:flex;gap:1rem;overflow-x:auto;padding-bottom:.5rem"
STRIP_WIDTH = "width:17rem"


@dataclass(frozen=True)
class SeriesFiles:
    """What the page shows beside the numbers: per checkpoint, its report's address relative to the
    page (None where it has none) and its heatmap's PNG (None where it has none); the figures' PNGs
    (the effective length's None for a suite)."""

    reports: tuple[str | None, ...]
    heatmaps: tuple[bytes | None, ...]
    effective_length: bytes | None
    lengths: bytes


def _png(data: bytes, alt: str, style: str = "") -> str:
    encoded = base64.b64encode(data).decode()
    return f'<img src="data:image/png;base64,{encoded}" alt="{esc(alt)}" style="{esc(style)}">'


def _linked(text: str, address: str | None) -> str:
    return esc(text) if address is None else f'<a href="{esc(address)}">{esc(text)}</a>'


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table of cells already escaped (some are links)."""
    top = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{top}</tr></thead><tbody>{body}</tbody></table>"


def _at(lengths: Sequence[AtLength], length: int) -> str:
    return esc(next((long_score(at.score) for at in lengths if at.length == length), "n/a"))


def _checkpoints(series: Series, names: Sequence[str], files: SeriesFiles) -> str:
    lengths = sorted({at.length for step in series.steps for at in step.numbers.lengths})
    head = ["checkpoint", "model", "overall", *(format_length(n) for n in lengths),
            "effective length: mean / lower bound [95% interval]", "regressed"]  # fmt: skip
    rows = [
        [
            _linked(name, files.reports[i]),
            esc(step.numbers.model),
            esc(long_score(step.numbers.overall)),
            *(_at(step.numbers.lengths, n) for n in lengths),
            esc(effective_text(step)),
            esc(status(series, i)),
        ]
        for i, (name, step) in enumerate(zip(names, series.steps, strict=True))
    ]
    return (
        '<section id="checkpoints"><h2>Checkpoints</h2><p>Scores with their 95% intervals; the effective '
        "length on the mean, on the 95% lower bound and, in brackets, its 95% interval from the paired "
        "bootstrap of the comparison with the baseline. A checkpoint's name opens its report.</p>"
        f"{_table(head, rows)}{_tasks(series, names)}</section>"
    )


def _tasks(series: Series, names: Sequence[str]) -> str:
    tasks = list(dict.fromkeys(t.task for step in series.steps for t in step.numbers.tasks))
    if not tasks:
        return ""
    rows = []
    for name, step in zip(names, series.steps, strict=True):
        scores = {t.task: long_score(t.score) for t in step.numbers.tasks}
        rows.append([esc(name), *(esc(scores.get(task, "n/a")) for task in tasks)])
    return f"<h3>By task, over all lengths</h3>{_table(['checkpoint', *tasks], rows)}"


def _regressions(series: Series, names: Sequence[str]) -> str:
    rows = [
        [esc(AGAINST_WORDS[first.against]), esc(first_regression_name(first)), esc(names[first.step]),
         esc(change(series, first))]
        for first in series.first_regressions
    ]  # fmt: skip
    found = _table(["against", "test", "first regressed at", "change"], rows) if rows else "<p>none</p>"
    return (
        '<section id="regressions"><h2>First regressions</h2><p>For each of the gate\'s tests (overall, '
        "each length, each task, the effective length), the first checkpoint where it regressed against "
        "the baseline and against the best checkpoint before it (the one with the highest overall mean "
        f"score), each comparison made as <code>fathom compare</code> makes it.</p>{found}</section>"
    )


def _figures(files: SeriesFiles) -> str:
    effective = (
        ""
        if files.effective_length is None
        else '<section id="effective-length"><h2>Effective length</h2>'
        f"<figure>{_png(files.effective_length, 'effective length over the checkpoints')}</figure></section>"
    )
    return (
        f'{effective}<section id="lengths"><h2>Score per length</h2>'
        f"<figure>{_png(files.lengths, 'score per length over the checkpoints')}</figure></section>"
    )


def _strip(names: Sequence[str], files: SeriesFiles) -> str:
    figures = []
    for name, report, heatmap in zip(names, files.reports, files.heatmaps, strict=True):
        shown = (
            '<p class="muted">no heatmap (fathom report RUN draws it)</p>'
            if heatmap is None
            else _png(heatmap, f"heatmap of {name}", STRIP_WIDTH)
        )
        linked = shown if report is None else f'<a href="{esc(report)}">{shown}</a>'
        figures.append(
            f'<figure style="margin:0"><figcaption>{_linked(name, report)}</figcaption>{linked}</figure>'
        )
    return (
        '<section id="heatmaps"><h2>Each checkpoint\'s heatmap</h2><p class="muted">in order; a click opens '
        f'the checkpoint\'s report</p><div class="strip" style="{SCROLLING_STRIP}">{"".join(figures)}</div>'
        "</section>"
    )


def series_page(series: Series, files: SeriesFiles) -> str:
    """series.html's text."""
    names = [checkpoint_name(step.numbers, series.by) for step in series.steps]
    last = series.steps[-1]
    baseline = checkpoint_name(series.baseline, series.by)
    order = f"ordered by {series.by}" if series.by else "in the order given"
    boxes = [
        number_box(str(len(series.steps)), f"checkpoints, {order}"),
        number_box(baseline, "baseline"),
        number_box("regressed" if series.regressed else "no regression", f"last checkpoint, {names[-1]}"),
        number_box(long_score(last.numbers.overall), "its overall score"),
        number_box(effective_text(last), "its effective length"),
    ]
    title = f"{last.numbers.task} · {len(series.steps)} checkpoints"
    body = (
        f"<header><h1>fathom series: {esc(title)}</h1><p>Baseline: {esc(baseline)} "
        f"({esc(series.baseline.path)}); gate at alpha {esc(series.alpha)}.</p></header>"
        f'<div class="headline">{"".join(boxes)}</div>'
        + _checkpoints(series, names, files)
        + _regressions(series, names)
        + _figures(files)
        + _strip(names, files)
    )
    return page(f"fathom series · {title}", body, {})
