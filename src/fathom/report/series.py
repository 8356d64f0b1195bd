"""``fathom series``'s files: run folders read into ``fathom.analysis.series``'s series, and the series
written as series.json and series.html, outside every run folder (a series reads runs, never writes
into one).

Reading is one function (``read_series``), so a series can come from elsewhere (an index of run
folders) and be written the same way (``write_series``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from fathom.analysis.pairing import RunRecords
from fathom.analysis.select import control_records, split_records
from fathom.analysis.series import Series, make_series
from fathom.errors import SpecError
from fathom.index import read_runs
from fathom.report.compare import read_run
from fathom.report.files import GRID, HEATMAP, REPORT, SERIES_HTML, SERIES_JSON, read_plot
from fathom.report.html.series import SeriesFiles, series_page
from fathom.report.series_plots import effective_length_figure, length_figure
from fathom.report.series_text import checkpoint_name
from fathom.safe_files import write_file

FOLDER = "series"  # the default --out, beside the first run's folder


def read_series(
    runs: Sequence[Path],
    by: str | None = None,
    baseline: Path | None = None,
    alpha: float = 0.05,
    index: Path | None = None,
) -> Series:
    """The series of the run folders ``runs`` (``fathom.analysis.series.make_series``); ``baseline``
    may be one of them or another run of the same spec. A folder named twice (by two spellings too)
    is refused before any is read. With ``index`` (``fathom index``'s file) the runs are read from it,
    not from their folders: ``runs`` may then name folders that hold run folders, or nothing (every
    run the index holds)."""
    if not 0.0 < alpha < 1.0:
        raise SpecError(f"alpha must lie strictly between 0 and 1, got {alpha}: pass e.g. --alpha 0.05")
    where = [path.resolve() for path in runs]
    for i, path in enumerate(where):
        if path in where[:i]:
            first = runs[where.index(path)]
            spelt = "" if first == runs[i] else f" (as '{first}' and as '{runs[i]}')"
            raise SpecError(f"run folder '{first}' is named twice{spelt}: name each checkpoint's run once")
    if index is not None:
        records = _indexed(index, runs or None)
        where = [run.path.resolve() for run in records]
    elif not runs:
        raise SpecError("name the checkpoints' run folders (or give --index FILE to read them from an index)")
    else:
        records = [read_run(path) for path in runs]
    reference = None
    if baseline is not None:
        inside = baseline.resolve() in where
        if inside:
            reference = records[where.index(baseline.resolve())]
        else:
            reference = _indexed(index, [baseline])[0] if index is not None else read_run(baseline)
    return make_series(records, by, reference, alpha)


def _indexed(index: Path, folders: Sequence[Path] | None) -> list[RunRecords]:
    """Runs read from an index, as ``read_run`` reads them from their folders."""
    runs = []
    for run in read_runs(index, folders):
        latest = run.latest()
        runs.append(RunRecords(run.path, run.manifest, split_records(latest)[0], control_records(latest)))
    return runs


def default_out(first: Path) -> Path:
    """A ``series`` folder beside the first run's folder (relative to here where it can be)."""
    return Path(os.path.relpath(first.absolute().parent / FOLDER))


def check_out(out: Path, series: Series) -> None:
    """Refuse an ``out`` inside one of the series' run folders (or one of them), or one that is a file."""
    target = out.resolve()
    for numbers in (series.baseline, *(step.numbers for step in series.steps)):
        run = numbers.path.resolve()
        if target == run or run in target.parents:
            raise SpecError(
                f"--out '{out}' is inside run folder '{numbers.path}': a series writes nothing into a run "
                "folder; give --out a folder outside every run (by default: series/ beside the first run)"
            )
    if out.exists() and not out.is_dir():
        raise SpecError(f"--out '{out}' is a file: give it a folder, for series.json and series.html")


def write_series(series: Series, out: Path) -> tuple[Path, Path]:
    """series.json and series.html in ``out`` (created), once everything they hold is made: a series
    that cannot be drawn writes nothing. Their paths."""
    check_out(out, series)
    names = [checkpoint_name(step.numbers, series.by) for step in series.steps]
    files = SeriesFiles(
        reports=tuple(_report_link(step.numbers.path, out) for step in series.steps),
        heatmaps=tuple(_heatmap(step.numbers.path) for step in series.steps),
        effective_length=effective_length_figure(series, names),
        lengths=length_figure(series, names),
    )
    text = series_page(series, files)
    data = json.dumps(series.to_json(), indent=2) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / SERIES_JSON, out / SERIES_HTML
    return write_file(json_path, data), write_file(html_path, text)


def _report_link(run: Path, out: Path) -> str | None:
    """The run's report.html as an address relative to ``out``; None where it has none."""
    report = run / REPORT
    if not report.is_file():
        return None
    return quote(Path(os.path.relpath(report.absolute(), out.absolute())).as_posix())


def _heatmap(run: Path) -> bytes | None:
    """The run's heatmap: NIAH's heatmap.png, or RULER's and a suite's grid.png; None where it has neither."""
    for name in (HEATMAP, GRID):
        if (run / name).is_file():
            return read_plot(run / name)
    return None
