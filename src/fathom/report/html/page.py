"""The pieces every fathom page is made of: the self-contained page shell and the heatmap component.

The pages need no network: style and script are inline, images are data: URIs, and a
Content-Security-Policy forbids every external load.

Model output, questions, answers and corpus text are untrusted. Markup written here escapes every
value with ``html.escape``; a page's samples travel once, as JSON in a
``<script type="application/json">`` block with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped (so no
text can close the block), and the page's script builds their DOM with ``createElement`` and
``textContent`` only. The policy also pins the page's own script by its hash, so even markup that
slipped through could run no script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.analysis.ruler import task_order
from fathom.analysis.summary import NiahGrid, RulerGrid, Summary
from fathom.report.files import read_plot
from fathom.report.html.assets import SCRIPT, STYLE
from fathom.report.plots import WIDE_INTERVAL, format_length, text_colour
from fathom.units import length_or_none

if TYPE_CHECKING:
    from matplotlib.colors import Colormap

DATA_ID = "fathom-data"
# What each of ``fathom.analysis.failures.FAILURE_KINDS`` means, as a run's failures section and a
# comparison's failure counts say it.
FAILURE_LABELS = {
    "error": "error: never graded (the backend failed, or the prompt missed its length or limit)",
    "still_thinking": "still thinking: the reply ended inside its reasoning, with no answer",
    "beyond_window": "wrong, on a prompt beyond the model's trained window",
    "stopped": "stopped before any token: its first token was the end (none was forced)",
    "empty": "answered empty: a blank output",
    "hedged": "hedged: the answer, and a distractor's value too",
    "distractor": "answered a distractor: a look-alike's value, not the answer",
    "partial": "partly right: some of the expected answers, not all",
    "refusal": "refused, or said it found no answer",
    "wrong_answer": "wrong answer",
    # Beside the failures, though none: right, and naming a look-alike's value only to reject it.
    "rejected": "right, naming a distractor's value only to reject it (not a failure)",
}

_JSON_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` block: nothing in it can close the block or start a
    comment, and JavaScript reads U+2028/U+2029 the same as JSON does."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).translate(
        _JSON_ESCAPES
    )


def page(title: str, body: str, data: Mapping[str, Any]) -> str:
    """A whole page: the body (already escaped markup), the data block and the shared script."""
    return "".join(page_parts(title, body, data))


def page_parts(title: str, body: str, data: Mapping[str, Any]) -> Iterator[str]:
    """``page`` a part at a time, for a writer that writes each as it comes: a run's data block holds
    every sample, and is never held whole, nor the page. Each item of a list or iterator in ``data`` is
    encoded alone (a run's samples are made as they are written: ``fathom.report.html.run.page_data``);
    the text is ``script_json(data)``'s, whose escapes are each of one character."""
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    policy = (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    yield (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style></head>\n<body>\n{body}\n"
        f'<script type="application/json" id="{DATA_ID}">{{'
    )
    for index, (key, value) in enumerate(data.items()):
        yield f"{',' if index else ''}{script_json(key)}:"
        if isinstance(value, list | Iterator):
            yield "["
            yield from (f"{',' if n else ''}{script_json(item)}" for n, item in enumerate(value))
            yield "]"
        else:
            yield script_json(value)
    yield f"}}</script>\n<script>{SCRIPT}</script>\n</body></html>\n"


# The heatmap component: NIAH's length x depth, RULER's task x length and a comparison's differences.


@dataclass(frozen=True)
class Square:
    """One cell of a heatmap. ``value`` places it on the colour scale (0..1, None: nothing scored,
    grey); ``marks`` are its classes (wide, beyond, regressed, ...); ``data`` its data-* attributes;
    ``key`` names the cell (data-key); with ``samples`` a click shows its samples, which the page's
    data lists under "cell KEY"."""

    row: str
    column: str
    value: float | None
    label: str
    title: str
    marks: tuple[str, ...] = ()
    data: tuple[tuple[str, str], ...] = ()
    key: str | None = None
    samples: bool = False


@cache
def _colormap() -> Colormap:
    import matplotlib

    return matplotlib.colormaps["RdYlGn"]  # the PNG plots' scale, and their label colours below


def _fill(value: float) -> str:
    from matplotlib.colors import to_hex

    cmap = _colormap()
    ink = text_colour(cmap, value)
    # Hatching in the label's colour, faint, so a hatched label stays legible at either end of the scale.
    hatch = "rgba(255,255,255,.4)" if ink == "white" else "rgba(0,0,0,.28)"
    return f"background-color:{to_hex(cmap(value))};color:{ink};--hatch:{hatch}"


_HEADING = '<div class="head col">{}</div>'
_BEYOND_HEADING = '<div class="head col beyond" title="beyond the trained window">{}</div>'


def heatmap(squares: Sequence[Square], rows: Sequence[str], columns: Sequence[str], **options: str) -> str:
    """A CSS grid of squares, rows top to bottom, with row and column headings. A column holding a
    square beyond the trained window gets a marked heading. ``options``: ``corner`` (the heading of
    the row labels), ``size`` ("compact" for the gallery) and ``report`` (a page that a click on a
    square opens at that square)."""
    at = {(s.row, s.column): s for s in squares}
    beyond = {s.column for s in squares if "beyond" in s.marks}
    parts = [f'<div class="head corner">{esc(options.get("corner", ""))}</div>']
    for column in columns:
        heading = _BEYOND_HEADING if column in beyond else _HEADING
        parts.append(heading.format(esc(column)))
    for row in rows:
        parts.append(f'<div class="head row">{esc(row)}</div>')
        parts += [
            _square(at[row, column]) if (row, column) in at else '<div class="gap"></div>'
            for column in columns
        ]
    report = options.get("report")
    link = f' data-report="{esc(report)}"' if report else ""
    return (
        f'<div class="heatmap {esc(options.get("size", ""))}"{link} '
        f'style="grid-template-columns:auto repeat({len(columns)},auto)">{"".join(parts)}</div>'
    )


def _square(square: Square) -> str:
    marks = " ".join(("cell", *square.marks))
    attributes = "".join(f' data-{name}="{esc(value)}"' for name, value in square.data)
    if square.key is not None:
        attributes += f' data-key="{esc(square.key)}"'
    if square.samples:
        attributes += f' data-samples="cell {esc(square.key)}" tabindex="0" role="button"'
    style = "" if square.value is None else f' style="{_fill(square.value)}"'
    return (
        f'<div class="{esc(marks)}"{attributes} title="{esc(square.title)}"{style}>{esc(square.label)}</div>'
    )


def stats_title(where: str, cell: Mapping[str, Any], what: str) -> str:
    """Hover text of a grid cell: its mean with the 95% interval, k (scored samples) and errors."""
    if cell["mean"] is None:
        text = f"{where}: nothing scored"
    else:
        interval = f"{cell['ci_low']:.1%} to {cell['ci_high']:.1%}"
        text = f"{where}: {what} {cell['mean']:.1%}, 95% interval {interval}"
    text += f", k={cell['n']}"
    if cell["errors"]:
        text += f", {cell['errors']} not scored (errors)"
    return text + ("; beyond the trained window" if cell["beyond_window"] else "")


def stats_marks(cell: Mapping[str, Any]) -> tuple[str, ...]:
    marks = []
    if cell["mean"] is None:
        marks.append("na")
    elif cell["ci_high"] - cell["ci_low"] > WIDE_INTERVAL:
        marks.append("wide")
    if cell["beyond_window"]:
        marks.append("beyond")
    return tuple(marks)


def depth_label(depth: float) -> str:
    return f"{100 * depth:.3g}%"


def cell_key(length: int, where: float | str, variant: str | None = None) -> str:
    """A grid cell's name: its length and its depth (NIAH's cells) or task (RULER's); a cell of one
    variant's grid (a NIAH run of several) has the variant's task name in front, so that it names
    that variant's samples and not the pooled cell's."""
    if not isinstance(where, float):
        return f"{where}|{length}"
    return f"{length}|{where!r}" if variant is None else f"{variant}|{length}|{where!r}"


def variant_grid(row: Mapping[str, Any]) -> NiahGrid:
    """One variant's grid (a row of ``NiahGrid.variants``) as a NiahGrid, to draw as the pooled one is."""
    return NiahGrid(
        cells=tuple(row["cells"]),
        lengths=tuple(row["lengths"]),
        effective_length=row["effective_length"],
        lost_in_the_middle_index=row["lost_in_the_middle_index"],
    )


def _niah_title(cell: Mapping[str, Any], variant: str | None) -> str:
    where = f"{format_length(cell['length'])} tokens, depth {cell['depth']:.0%}"
    title = stats_title(where if variant is None else f"{variant}, {where}", cell, "accuracy")
    if cell.get("similarity") is not None:  # records from before haystack hygiene have none
        title += f"; needle/haystack likeness up to {cell['similarity']:.2f} (content-word Jaccard)"
    return title


def niah_heatmap(
    grid: NiahGrid, with_samples: bool = True, variant: str | None = None, **options: str
) -> str:
    """NIAH's depth x length heatmap; ``variant`` (a task name) for one variant's grid of a run of several."""
    cells = grid.cells
    named = () if variant is None else (("variant", variant),)
    squares = [
        Square(
            row=depth_label(c["depth"]),
            column=format_length(c["length"]),
            value=c["mean"],
            label="n/a" if c["mean"] is None else f"{c['mean']:.0%}",
            title=_niah_title(c, variant),
            marks=stats_marks(c),
            data=(("length", str(c["length"])), ("depth", repr(c["depth"])), *named),
            key=cell_key(c["length"], c["depth"], variant),
            samples=with_samples,
        )
        for c in cells
    ]
    rows = [depth_label(d) for d in sorted({c["depth"] for c in cells})]
    columns = [format_length(n) for n in sorted({c["length"] for c in cells})]
    return heatmap(squares, rows, columns, corner="depth \\ length", **options)


AVERAGE = "average"


def ruler_grid(sweep: RulerGrid, with_samples: bool = True, **options: str) -> str:
    """RULER's task x length grid in percent, with the per-length average over tasks as the last row."""
    grid = sweep.grid
    squares = [
        Square(
            row=c["task"],
            column=format_length(c["length"]),
            value=c["mean"],
            label="n/a" if c["mean"] is None else f"{100 * c['mean']:.0f}",
            title=stats_title(f"{c['task']} at {format_length(c['length'])} tokens", c, "score"),
            marks=stats_marks(c),
            data=(("task", c["task"]), ("length", str(c["length"]))),
            key=cell_key(c["length"], c["task"]),
            samples=with_samples,
        )
        for c in grid
    ]
    for row in sweep.lengths:
        mean = row["mean"]
        where = f"average over tasks at {format_length(row['length'])} tokens"
        squares.append(
            Square(
                row=AVERAGE,
                column=format_length(row["length"]),
                value=mean,
                label="n/a" if mean is None else f"{100 * mean:.1f}",
                title=f"{where}: {'n/a (a task has nothing scored)' if mean is None else f'{mean:.1%}'}",
                marks=("average", "na") if mean is None else ("average",),
            )
        )
    rows = [*task_order(c["task"] for c in grid), AVERAGE]
    columns = [format_length(n) for n in sorted({c["length"] for c in grid})]
    return heatmap(squares, rows, columns, corner="task \\ length", **options)


def summary_heatmap(summary: Summary, with_samples: bool = True, **options: str) -> str:
    """The run's grid, whichever kind of run it is; empty for a run of perplexity alone."""
    if isinstance(summary.sweep, RulerGrid):
        return ruler_grid(summary.sweep, with_samples, **options)
    return "" if summary.sweep is None else niah_heatmap(summary.sweep, with_samples, **options)


def legend(what: str) -> str:
    stops = "".join(f'<span class="swatch" style="{_fill(v)}">{v:.0%}</span>' for v in (0.0, 0.5, 1.0))
    return (
        f'<p class="legend">colour: {esc(what)} {stops} · <span class="swatch wide"></span> hatched: 95% '
        f"interval wider than {WIDE_INTERVAL:g} · "
        '<span class="swatch beyond"></span> dark bar: beyond the trained window · '
        '<span class="swatch na"></span> grey: nothing scored · hover a cell for its numbers</p>'
    )


def number_box(value: str, what: str) -> str:
    return f'<div class="number"><b>{esc(value)}</b><span>{esc(what)}</span></div>'


def table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    top = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{top}</tr></thead><tbody>{body}</tbody></table>"


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def interval(row: Mapping[str, Any]) -> str:
    """A row's 95% interval (``ci_low``, ``ci_high``) in percent."""
    return f"{percent(row['ci_low'])} to {percent(row['ci_high'])}"


# The columns after a score table's own (``score_rows``): what group_stats gives each row.
SCORE_COLUMNS = ("n", "score", "95% interval", "errors", "beyond window")


def as_shown(key: str, value: Any) -> object:
    """A score table's value: a length as people write it (8k), any other as it is."""
    return format_length(value) if key == "length" else value


def score_rows(
    rows: Iterable[Mapping[str, Any]], *keys: str, label: Callable[[str, Any], object] = as_shown
) -> list[tuple[object, ...]]:
    """Rows of a score table along any axis (``analysis.stats.rows_by``'s): the values under ``keys``
    (each through ``label``, with its key), then ``SCORE_COLUMNS``."""
    return [
        (*(label(k, r[k]) for k in keys), r["n"], percent(r["mean"]), interval(r), r["errors"],
         "yes" if r["beyond_window"] else "")
        for r in rows
    ]  # fmt: skip


def effective_boxes(
    section: Mapping[str, Any], key: str, what: Callable[[Any], str], score: str = "score"
) -> list[str]:
    """The headline's boxes of a family's effective lengths (``analysis.stats.effective_by``'s rows,
    each named by its value under ``key``, through ``what``): each row's length on the mean."""
    threshold = f"{score} ≥ {section['threshold']:g}"
    return [
        number_box(length_or_none(row["mean"]), f"effective length {what(row[key])} ({threshold})")
        for row in section["effective_length"]
    ]


def effective_table(section: Mapping[str, Any], key: str, label: str, score: str = "score") -> str:
    """A family's effective lengths by ``key`` (headed ``label``), on the mean and on the 95% lower
    bound, under their heading."""
    rows = [
        (row[key], length_or_none(row["mean"]), length_or_none(row["lower_bound"]))
        for row in section["effective_length"]
    ]
    threshold = f"{section['threshold']:g}"
    return (
        f"<h3>Effective length ({score} ≥ {esc(threshold)} at that length and every shorter one)</h3>"
        f"{table((label, 'on the mean', 'on the 95% lower bound'), rows)}"
    )


def image(path: Path, alt: str) -> str:
    if not path.is_file():
        return ""
    data = base64.b64encode(read_plot(path)).decode()
    return f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}"></figure>'
