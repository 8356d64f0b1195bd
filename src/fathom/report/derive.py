"""Derived files of a run folder, re-made from its manifest and records at any time: summary.json, the
plots and report.html. The numbers are ``fathom.analysis``'s; this module only writes them."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from fathom.analysis.niah import CellStats
from fathom.analysis.perplexity import answer_likelihood, perplexity_table
from fathom.analysis.ruler import depth_profile, task_grid
from fathom.analysis.select import is_ruler_run, split_records
from fathom.analysis.summary import NiahGrid, Row, RunFacts, Summary, run_summary
from fathom.errors import RunFolderError, SpecError
from fathom.records import SampleRecord
from fathom.report.compare import compare_runs
from fathom.report.files import DEPTH, GRID, HEATMAP, PERPLEXITY, SUMMARY, TRAP, variant_heatmap
from fathom.report.html.run import write_report
from fathom.report.plots import plot_depth_profile, plot_heatmap, plot_task_grid
from fathom.report.trap_plot import plot_trap
from fathom.run.distributed import run_distributed
from fathom.run.judgements import read_judgements, read_qualifications
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.run.writer import RunResult
from fathom.spec import RunSpec


def run_spec(
    spec: RunSpec,
    run_dir: Path,
    show_progress: bool = True,
    order: str = "prefix",
    replicas: int | None = None,
    address: str | None = None,
    keep_too_long: bool = False,
    labels: Mapping[str, str] | None = None,
) -> RunResult:
    """Run (or resume) ``spec`` into ``run_dir`` (``fathom.run.runner.run``, or with ``replicas`` on a
    Ray cluster, ``fathom.run.distributed.run_distributed``), then derive its files: what ``fathom
    run`` does. ``labels`` (``fathom.run.labels``) say which checkpoint it is, outside the run's
    identity. The result's wall time includes the deriving."""
    started = time.perf_counter()
    if replicas is None:
        result = run(spec, run_dir, show_progress, order, keep_too_long, labels)
    else:
        result = run_distributed(
            spec, run_dir, replicas, address, show_progress, order, keep_too_long, labels
        )
    derive(RunFolder(run_dir))
    return dataclasses.replace(result, seconds=time.perf_counter() - started)


def derive(folder: RunFolder, threshold: float = 0.85) -> Summary:
    """Write summary.json, the plots and report.html from the records; return the summary.

    A NIAH run gets heatmap.png (the variants asked, pooled: not the literal twins), with ``threshold``
    for its effective length, and a run of several variants heatmap-<variant>.png for each (named by
    ``fathom.report.files.variant_heatmap``). A RULER run gets grid.png
    and (when some task has needles) depth.png; its effective lengths use RULER's own thresholds.
    Perplexity documents add a perplexity table: trap.png beside the retrieval accuracy of the same
    run, or perplexity.png for a run of perplexity alone.
    """
    _check_threshold(threshold)
    manifest = folder.read_manifest()
    records = folder.latest()
    samples, documents = split_records(records)
    if not samples and not documents:
        raise RunFolderError(f"run folder '{folder.path}' has no sample records yet: run it first")
    spec = manifest.spec
    title = f"{spec.model} · {spec.task} · {spec.tokenizer} · k={spec.samples}"
    if not manifest.backend.exact_lengths:
        title += " (approximate lengths)"
    judged = run_summary(
        records,
        threshold,
        read_judgements(folder.path),
        manifest.judges,
        read_qualifications(folder.path),
        manifest.provider_counted,
    )
    summary = dataclasses.replace(judged, run=RunFacts.of(manifest))
    _plot(folder, samples, summary, title, manifest.backend.trained_window)
    folder.write_derived(SUMMARY, json.dumps(summary.to_json(), indent=2, sort_keys=True) + "\n")
    write_report(folder, summary, records=records)
    return summary


def _plot(
    folder: RunFolder,
    samples: Sequence[SampleRecord],
    summary: Summary,
    title: str,
    window: int | None,
) -> None:
    if samples and is_ruler_run(samples):
        plot_task_grid(task_grid(samples), folder.path / GRID, title)
        profile = depth_profile(samples)
        if any(b.mean is not None for b in profile):
            plot_depth_profile(profile, folder.path / DEPTH, f"{title} · score by needle depth")
    elif isinstance(summary.sweep, NiahGrid):
        # Drawn from the summary's cells, so each PNG shows the numbers summary.json and report.html
        # show: the pooled grid holds the variants asked, never a literal twin (a contrast).
        plot_heatmap(_cells(summary.sweep.cells), folder.path / HEATMAP, title)
        for task, grid in summary.sweep.variants.items():
            plot_heatmap(_cells(grid["cells"]), folder.path / variant_heatmap(task), f"{title} · {task}")
    if summary.perplexity is not None:
        name = TRAP if samples else PERPLEXITY
        answer = summary.answer_likelihood or ()
        plot_trap(summary.perplexity.table, summary.lengths, answer, folder.path / name, title, window)


def _check_threshold(threshold: float) -> None:
    """Refuse, before anything is read or written, a threshold no score can be measured against: above 1
    no length is ever effective, at 0 or below every one is, and NaN is no number (nor valid JSON)."""
    if not 0 < threshold <= 1:
        raise SpecError(
            f"--threshold must be a score in (0, 1], the share of samples a length must get right "
            f"(default 0.85), not {threshold}"
        )


def _cells(rows: Sequence[Row]) -> list[CellStats]:
    return [CellStats(**row) for row in rows]


def report(path: Path, threshold: float = 0.85, baseline: Path | None = None) -> Summary:
    """Re-derive a run's files; with ``baseline``, its report.html also compares the run to that
    baseline run (fathom compare's paired tests)."""
    folder = RunFolder(path)
    summary = derive(folder, threshold)
    if baseline is not None:
        write_report(folder, summary, compare_runs(baseline, path).to_json())
    return summary


def trap(runs: Sequence[Path], out: Path) -> None:
    """The trap figure from one run holding both kinds of record, or from two runs (a perplexity
    run and a retrieval run, in either order) of the same model and tokenizer."""
    if not 1 <= len(runs) <= 2:
        raise RunFolderError(f"fathom trap takes one run or two, not {len(runs)}")
    folders = [RunFolder(path) for path in runs]
    identities = [folder.read_manifest().identity for folder in folders]
    keys = {(i.backend.name, i.tokenizer.sha256) for i in identities}
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
    retrieval = run_summary(samples).lengths
    manifest = folders[0].read_manifest()
    title = f"{manifest.spec.model} · perplexity trap · {manifest.spec.tokenizer}"
    window = manifest.backend.trained_window
    out.parent.mkdir(parents=True, exist_ok=True)
    plot_trap(perplexity_table(documents), retrieval, answer_likelihood(samples), out, title, window)
