"""Derived files of a run folder, re-made from its manifest and records at any time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fathom.analysis.niah import cell_table, summarize
from fathom.analysis.perplexity import answer_likelihood, perplexity_table
from fathom.analysis.ruler import depth_profile, ruler_summary, task_grid
from fathom.errors import RunFolderError
from fathom.records import AnyRecord, PerplexityRecord, SampleRecord
from fathom.run.store import RunFolder
from fathom.tasks.control import control_summary
from fathom.units import format_count

SUMMARY = "summary.json"
HEATMAP = "heatmap.png"
GRID = "grid.png"
DEPTH = "depth.png"
TRAP = "trap.png"
PERPLEXITY = "perplexity.png"


def is_ruler_run(records: Sequence[SampleRecord]) -> bool:
    """RULER-style records draw their needle depths per sample, so their cells have no depth."""
    return any(r.depth is None for r in records)


def split_records(records: Sequence[AnyRecord]) -> tuple[list[SampleRecord], list[PerplexityRecord]]:
    """A run's graded samples (its grid; no-context controls are not in it) and its perplexity
    documents."""
    samples = [r for r in records if isinstance(r, SampleRecord) and not r.control]
    return samples, [r for r in records if isinstance(r, PerplexityRecord)]


def control_records(records: Sequence[AnyRecord]) -> list[SampleRecord]:
    """A run's no-context controls."""
    return [r for r in records if isinstance(r, SampleRecord) and r.control]


def derive(folder: RunFolder, threshold: float = 0.85) -> dict[str, Any]:
    """Write summary.json, the plots and report.html from the records; return the summary.

    A NIAH run gets heatmap.png, with ``threshold`` for its effective length. A RULER run gets grid.png
    and (when some task has needles) depth.png; its effective lengths use RULER's own thresholds.
    Perplexity documents add a perplexity table: trap.png beside the retrieval accuracy of the same
    run, or perplexity.png for a run of perplexity alone.
    """
    manifest = folder.read_manifest()
    records = folder.latest()
    samples, documents = split_records(records)
    if not samples and not documents:
        raise RunFolderError(f"run folder '{folder.path}' has no sample records yet: run it first")
    spec = manifest["identity"]["spec"]
    title = f"{spec['model']} · {spec['task']} · {spec['tokenizer']} · k={spec['samples']}"
    if manifest.get("backend", {}).get("exact_lengths") is False:
        title += " (approximate lengths)"
    window = manifest.get("backend", {}).get("trained_window")
    summary: dict[str, Any] = {"kind": "perplexity", "samples": 0, "errors": 0}
    if samples and is_ruler_run(samples):
        summary = ruler_summary(samples)
        _plot_ruler(folder, samples, title)
    elif samples:
        from fathom.report.plots import plot_heatmap

        summary = summarize(samples, threshold=threshold)
        plot_heatmap(cell_table(samples), folder.path / HEATMAP, title)
        likelihood = answer_likelihood(samples)
        if likelihood:
            summary["answer_likelihood"] = likelihood
    controls = control_records(records)
    if controls:
        summary["control"] = control_summary(controls, samples)
    if documents:
        summary["perplexity"] = perplexity_table(documents)
        summary["documents"] = len(documents)
        summary["document_errors"] = sum(1 for r in documents if r.error is not None)
        from fathom.report.trap_plot import plot_trap

        retrieval = summary.get("lengths", []) if samples else []
        name = TRAP if samples else PERPLEXITY
        answer = summary.get("answer_likelihood", [])
        plot_trap(summary["perplexity"], retrieval, answer, folder.path / name, title, window)
    summary["run"] = {key: spec[key] for key in ("task", "model", "tokenizer", "samples", "seed")}
    summary["trained_window"] = window
    folder.write_derived(SUMMARY, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    from fathom.report.html.run import write_report  # it reads this module's names

    write_report(folder, summary)
    return summary


def _plot_ruler(folder: RunFolder, records: Sequence[SampleRecord], title: str) -> None:
    from fathom.report.plots import plot_depth_profile, plot_task_grid

    plot_task_grid(task_grid(records), folder.path / GRID, title)
    profile = depth_profile(records)
    if any(b.mean is not None for b in profile):
        plot_depth_profile(profile, folder.path / DEPTH, f"{title} · score by needle depth")


def report(path: Path, threshold: float = 0.85, baseline: Path | None = None) -> dict[str, Any]:
    """Re-derive a run's files; with ``baseline``, its report.html also compares the run to that
    baseline run (fathom compare's paired tests)."""
    folder = RunFolder(path)
    summary = derive(folder, threshold)
    if baseline is not None:
        from fathom.analysis.paired import compare_runs
        from fathom.report.html.run import write_report

        write_report(folder, summary, compare_runs(baseline, path).to_json())
    return summary


def trap(runs: Sequence[Path], out: Path) -> None:
    """The trap figure from one run holding both kinds of record, or from two runs (a perplexity
    run and a retrieval run, in either order) of the same model and tokenizer."""
    if not 1 <= len(runs) <= 2:
        raise RunFolderError(f"fathom trap takes one run or two, not {len(runs)}")
    folders = [RunFolder(path) for path in runs]
    identities = [folder.read_manifest()["identity"] for folder in folders]
    keys = {(i["backend"]["name"], i["tokenizer"]["sha256"]) for i in identities}
    if len(keys) > 1:
        raise RunFolderError(
            "the two runs are of different models or tokenizers: the trap compares one model's "
            "perplexity and retrieval, so give two runs of the same model"
        )
    samples, documents = split_records([r for folder in folders for r in folder.latest()])
    if not documents:
        raise RunFolderError(
            "no perplexity records in these runs: add a run of 'fathom run perplexity' "
            "(or run niah with --perplexity)"
        )
    if samples and is_ruler_run(samples):
        retrieval = ruler_summary(samples)["lengths"]
    else:
        retrieval = summarize(samples)["lengths"] if samples else []
    manifest = folders[0].read_manifest()
    spec = manifest["identity"]["spec"]
    title = f"{spec['model']} · perplexity trap · {spec['tokenizer']}"
    window = manifest.get("backend", {}).get("trained_window")
    from fathom.report.trap_plot import plot_trap

    out.parent.mkdir(parents=True, exist_ok=True)
    plot_trap(perplexity_table(documents), retrieval, answer_likelihood(samples), out, title, window)


def perplexity_text(summary: dict[str, Any]) -> list[str]:
    """The perplexity table as lines: per length, the perplexity with its interval, and that of
    the last position bucket (the far end of the context)."""
    table = summary["perplexity"]
    last = {b["length"]: b for b in table["buckets"]}
    lines = ["perplexity by length (95% interval over documents; last bucket = the farthest tokens):"]
    for row in table["lengths"]:
        name = format_count(row["length"])
        if row["perplexity"] is None:
            lines.append(f"  {name:>6}: n/a  (documents={row['documents']}, errors={row['errors']})")
            continue
        far = last[row["length"]]  # a length with a perplexity has scored buckets
        tail = f"; last bucket {format_count(far['lo'])}-{format_count(far['hi'])}: {far['perplexity']:.2f}"
        flag = "  beyond the trained window" if row["beyond_window"] else ""
        lines.append(
            f"  {name:>6}: {row['perplexity']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]{tail}"
            f"  (documents={row['documents']}, errors={row['errors']}){flag}"
        )
    return lines


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
