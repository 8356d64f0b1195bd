"""Derived files of a run folder, re-made from its manifest and records at any time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fathom.analysis import cell_table, summarize
from fathom.errors import RunFolderError
from fathom.records import SampleRecord
from fathom.ruler_analysis import depth_profile, ruler_summary, task_grid
from fathom.store import RunFolder
from fathom.units import format_count

SUMMARY = "summary.json"
HEATMAP = "heatmap.png"
GRID = "grid.png"
DEPTH = "depth.png"


def is_ruler_run(records: Sequence[SampleRecord]) -> bool:
    """RULER-style records draw their needle depths per sample, so their cells have no depth."""
    return any(r.depth is None for r in records)


def derive(folder: RunFolder, threshold: float = 0.85) -> dict[str, Any]:
    """Write summary.json and the plots from the records; return the summary.

    A NIAH run gets heatmap.png, with ``threshold`` for its effective length. A RULER run gets grid.png
    and (when some task has needles) depth.png; its effective lengths use RULER's own thresholds.
    """
    manifest = folder.read_manifest()
    records = folder.latest()
    if not records:
        raise RunFolderError(f"run folder '{folder.path}' has no sample records yet: run it first")
    ruler = is_ruler_run(records)
    summary = ruler_summary(records) if ruler else summarize(records, threshold=threshold)
    spec = manifest["identity"]["spec"]
    summary["run"] = {key: spec[key] for key in ("task", "model", "tokenizer", "samples", "seed")}
    summary["trained_window"] = manifest.get("backend", {}).get("trained_window")
    folder.write_derived(SUMMARY, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    title = f"{spec['model']} · {spec['task']} · {spec['tokenizer']} · k={spec['samples']}"
    if manifest.get("backend", {}).get("exact_lengths") is False:
        title += " (approximate lengths)"
    if ruler:
        _plot_ruler(folder, records, title)
    else:
        from fathom.plots import plot_heatmap

        plot_heatmap(cell_table(records), folder.path / HEATMAP, title)
    return summary


def _plot_ruler(folder: RunFolder, records: Sequence[SampleRecord], title: str) -> None:
    from fathom.plots import plot_depth_profile, plot_task_grid

    plot_task_grid(task_grid(records), folder.path / GRID, title)
    profile = depth_profile(records)
    if any(b.mean is not None for b in profile):
        plot_depth_profile(profile, folder.path / DEPTH, f"{title} · score by needle depth")


def report(path: Path, threshold: float = 0.85) -> dict[str, Any]:
    return derive(RunFolder(path), threshold)


def _pct(value: float | None, width: int = 6) -> str:
    return f"{'n/a' if value is None else f'{100 * value:.1f}':>{width}}"


def _length_name(length: int | None) -> str:
    return "none" if length is None else format_count(length)


def ruler_text(summary: dict[str, Any]) -> list[str]:
    """A RULER summary as lines of text: the task x length table in percent, the per-length average
    over tasks, RULER's averages and the effective lengths on the mean and on the lower bound."""
    lengths = [row["length"] for row in summary["lengths"]]
    tasks = list(dict.fromkeys(cell["task"] for cell in summary["grid"]))
    width = max(len("average"), *(len(t) for t in tasks))
    by_pos = {(c["task"], c["length"]): c["mean"] for c in summary["grid"]}
    lines = ["  " + " " * width + "".join(f"{format_count(n):>8}" for n in lengths)]
    for task in tasks:
        cells = "".join(_pct(by_pos.get((task, n)), 8) for n in lengths)
        lines.append(f"  {task:<{width}}{cells}")
    lines.append(f"  {'average':<{width}}" + "".join(_pct(row["mean"], 8) for row in summary["lengths"]))
    mean, low = summary["aggregates"]["mean"], summary["aggregates"]["lower_bound"]
    scores = ", ".join(
        f"{name} {'n/a' if mean[key] is None else f'{mean[key]:.1f}'}"
        for name, key in (("average", "average"), ("wAvg inc", "wavg_inc"), ("wAvg dec", "wavg_dec"))
    )
    lines.append(f"RULER score (percent): {scores}")
    lines.append(
        f"effective length (score > {mean['threshold']:g}): {_length_name(mean['effective_length'])}; "
        f"on the 95% lower bound: {_length_name(low['effective_length'])}"
    )
    cutoff = "n/a" if mean["relative_cutoff"] is None else f"{mean['relative_cutoff']:.1f}"
    lines.append(
        f"effective length (score > {mean['relative_threshold']:g} x the shortest length's, {cutoff}): "
        f"{_length_name(mean['effective_length_relative'])}; "
        f"on the 95% lower bound: {_length_name(low['effective_length_relative'])}"
    )
    lines.append(f"samples: {summary['samples']}, errors: {summary['errors']}")
    return lines
