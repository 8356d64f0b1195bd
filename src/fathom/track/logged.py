"""What ``fathom run``, ``compare`` and ``series`` log, under which names (docs/tracking.md lists
them). Everything is read from files already complete (the run folder, the comparison's folder) and
computed by ``fathom.analysis``; nothing here writes a file.

A run's numbers are the series' (``fathom.analysis.series.run_numbers``), so one checkpoint logged
by ``fathom run --log`` and by ``fathom series --log`` carries the same values under the same names.
Names use '/' to group (W&B's sections, MLflow's metric tree) and fathom's own way of writing a
length: ``score/len_8k``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fathom.analysis.checkpoint import Numbers, run_numbers
from fathom.analysis.control import answered_share
from fathom.analysis.gate import LEVELS
from fathom.analysis.paired import Comparison
from fathom.analysis.series import Series, Step, regressed
from fathom.manifest import Manifest
from fathom.report.compare import read_run
from fathom.report.files import COMPARISON_PNG, read_plot, read_summary
from fathom.report.series_plots import effective_length_figure, length_figure
from fathom.report.series_text import checkpoint_name
from fathom.run.store import RunFolder
from fathom.tasks.niah import NiahTask
from fathom.track.base import Param, Tracker
from fathom.track.trackers import Logged, log_to_each
from fathom.units import format_count

STEP = "step"  # the label a run's step is read from (``fathom run --label step=1200``)
_WHOLE = re.compile(r"[0-9]+")
# A task's name in a metric's: NIAH variants hold ':', '=' and ',' (niah:mix:prose=1,code=1), which
# neither tracker's names allow everywhere.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def log_run(trackers: Sequence[Tracker], folder: Path) -> list[str]:
    """Log a finished run folder (``run_logged``). Where each tracker logged it, for the CLI to print."""
    return log_to_each(trackers, lambda: run_logged(folder))


def log_comparison(trackers: Sequence[Tracker], comparison: Comparison, out: Path) -> list[str]:
    return log_to_each(trackers, lambda: comparison_logged(comparison, out))


def log_series(trackers: Sequence[Tracker], series: Series, out: Path) -> list[str]:
    return log_to_each(trackers, lambda: series_logged(series, out))


def run_logged(folder: Path) -> Logged:
    """A run: its spec and labels as parameters, its numbers at its step, its plots (every PNG of
    the folder), and a copy of the folder, named as the folder."""
    run = read_run(folder)
    metrics = run_metrics(run_numbers(run))
    images = {image.name: read_plot(image) for image in sorted(folder.glob("*.png"))}
    params = run_params(run.manifest, folder)
    step = label_step(run.manifest.labels)
    return Logged(folder.name, "run", params, [(step, metrics)], images, {folder.name: folder})


def comparison_logged(comparison: Comparison, out: Path) -> Logged:
    """``fathom compare``'s verdict, what fired in its gate, the changes overall, per length and per
    task, the effective lengths, compare.png and a copy of the comparison's folder, at the new run's
    step; both runs' labels as parameters."""
    base, new = comparison.base.path, comparison.new.path
    base_labels, new_labels = (RunFolder(path).read_manifest().labels for path in (base, new))
    params: dict[str, Param] = {
        "base": str(base.absolute()),
        "new": str(new.absolute()),
        "base_model": comparison.base.model,
        "new_model": comparison.new.model,
        "alpha": comparison.alpha,
        "fired": "; ".join(comparison.gate.fired()),
        **label_params(new_labels),
        **label_params(base_labels, "base_label"),
    }
    figure = out / COMPARISON_PNG
    images = {figure.name: read_plot(figure)} if figure.is_file() else {}
    steps = [(label_step(new_labels), comparison_metrics(comparison))]
    folders = {f"compare-{new.name}-vs-{base.name}": out}
    return Logged(f"{new.name} vs {base.name}", "compare", params, steps, images, folders)


def series_logged(series: Series, out: Path) -> Logged:
    """``fathom series``: each checkpoint's numbers (``run_metrics``' names) and whether it regressed
    (``regressed``, ``regressed/baseline``, ``regressed/best``) at its step (``series_steps``), the
    baseline's spec as parameters, the series' plots, and a copy of its folder. Nothing is read but
    the baseline's manifest and each checkpoint's summary (its control), where their folders exist."""
    # A series read from an index (fathom series --index) may have no folders here: no spec then.
    baseline = RunFolder(series.baseline.path)
    params = spec_params(baseline.read_manifest()) if baseline.manifest_path.is_file() else {}
    params.pop("model", None)  # each checkpoint has its own
    params |= {
        "by": series.by or "",
        "alpha": series.alpha,
        "baseline": str(series.baseline.path.absolute()),
        "baseline_model": series.baseline.model,
        "checkpoints": len(series.steps),
    }
    steps = [
        (step, checkpoint_metrics(checkpoint))
        for step, checkpoint in zip(series_steps(series), series.steps, strict=True)
    ]
    names = [checkpoint_name(step.numbers, series.by) for step in series.steps]
    figures = {
        "series_lengths.png": length_figure(series, names),
        "series_effective_length.png": effective_length_figure(series, names),
    }
    images = {name: png for name, png in figures.items() if png is not None}
    span = f"{series.steps[0].numbers.path.name} to {series.steps[-1].numbers.path.name}"
    folders = {f"series-{span.replace(' ', '-')}": out}
    return Logged(f"series {span}", "series", params, steps, images, folders)


def series_steps(series: Series) -> list[int]:
    """Each checkpoint's step: its label ``--by`` (without one, ``step``) where every checkpoint's is
    a whole number and they rise in the series' order; else its place, 0, 1, ..."""
    values = [step.numbers.labels.get(series.by or STEP, "") for step in series.steps]
    if all(_WHOLE.fullmatch(value) for value in values):
        numbers = [int(value) for value in values]
        if all(a < b for a, b in itertools.pairwise(numbers)):
            return numbers
    return list(range(len(values)))


def checkpoint_metrics(checkpoint: Step) -> dict[str, float]:
    return run_metrics(checkpoint.numbers) | {
        "regressed": float(checkpoint.regressed),
        "regressed/baseline": float(regressed(checkpoint.baseline)),
        "regressed/best": float(regressed(checkpoint.best)),
    }


# --- names and values ----------------------------------------------------------------------------


def label_step(labels: Mapping[str, str]) -> int | None:
    """The run's step: its label ``step`` where that is a whole number (``1200``), else None."""
    value = labels.get(STEP, "")
    return int(value) if _WHOLE.fullmatch(value) else None


def label_params(labels: Mapping[str, str], prefix: str = "label") -> dict[str, Param]:
    return {f"{prefix}/{key}": value for key, value in labels.items()}


def spec_params(manifest: Manifest) -> dict[str, Param]:
    """The spec as the manifest wrote it: lists comma-joined, unset options left out."""
    spec: dict[str, Any] = manifest.identity.written["spec"]
    return {key: _param(value) for key, value in spec.items() if value not in (None, [])}


def run_params(manifest: Manifest, folder: Path) -> dict[str, Param]:
    """The spec, the labels, the folder, the run's identity and the fathom that made it."""
    params = spec_params(manifest) | label_params(manifest.labels)
    params |= {"run_folder": str(folder.absolute()), "identity": manifest.identity.fingerprint}
    if manifest.environment.fathom_version is not None:
        params["fathom_version"] = manifest.environment.fathom_version
    return params


def _param(value: Any) -> Param:
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return value if isinstance(value, str | int | float | bool) else str(value)


def length_name(length: int) -> str:
    return f"len_{format_count(length)}"


def task_name(task: str) -> str:
    return _UNSAFE.sub("_", task)


def run_metrics(numbers: Numbers) -> dict[str, float]:
    """A run's numbers: ``score`` (overall), ``score/len_<L>``, ``task/<task>`` and
    ``task/<task>/len_<L>``, ``effective_length/mean``, ``/lower_bound`` and NIAH's ``/worst_depth``
    (in tokens, 0 where no length passes), ``control/answered`` (the share of questions answered
    without their context), ``samples/graded`` and ``samples/errors``. A score with no value (nothing
    graded) is left out."""
    metrics: dict[str, float] = {"samples/graded": numbers.samples, "samples/errors": numbers.errors}
    if numbers.overall.mean is not None:
        metrics["score"] = numbers.overall.mean
    for at in numbers.lengths:
        if at.score.mean is not None:
            metrics[f"score/{length_name(at.length)}"] = at.score.mean
    for task in numbers.tasks:
        if task.score.mean is not None:
            metrics[f"task/{task_name(task.task)}"] = task.score.mean
        for at in task.lengths:
            if at.score.mean is not None:
                metrics[f"task/{task_name(task.task)}/{length_name(at.length)}"] = at.score.mean
    effective = numbers.effective_length
    if effective is not None:
        metrics["effective_length/mean"] = effective.mean or 0
        metrics["effective_length/lower_bound"] = effective.lower_bound or 0
        if numbers.task == NiahTask.name:  # only NIAH sets its depths; the other tasks draw them per sample
            metrics["effective_length/worst_depth"] = effective.worst_depth or 0
    summary = read_summary(numbers.path)
    answered = None if summary is None or summary.control is None else answered_share(summary.control)
    if answered is not None:
        metrics["control/answered"] = answered
    return metrics


def comparison_metrics(comparison: Comparison) -> dict[str, float]:
    """``regressed`` (1 where ``fathom compare`` exits 1), ``gate/<level>`` (the tests that found a drop
    at each level: overall, length, task, cell; ``gate/effective_length`` 1 where its drop did),
    ``overall/base``, ``/new`` and ``/difference``, ``difference/len_<L>`` and ``difference/task/<task>``
    (new minus base), and the effective lengths (``effective_length/base``, ``/new``, and the new
    run's 95% interval ``/new_low``, ``/new_high``; 0 where no length passes)."""
    overall = comparison.overall
    metrics: dict[str, float] = {
        "regressed": float(comparison.verdict == "regressed"),
        "pairs": overall.pairs,
        "overall/base": overall.base_mean,
        "overall/new": overall.new_mean,
        "overall/difference": overall.difference,
    }
    gate = comparison.gate
    for level in LEVELS:
        metrics[f"gate/{level}"] = sum(1 for test in gate.at(level) if test.verdict == "regressed")
    for test in gate.at("length"):
        if test.length is not None:
            metrics[f"difference/{length_name(test.length)}"] = test.new_mean - test.base_mean
    for test in gate.at("task"):
        if test.task is not None:
            metrics[f"difference/task/{task_name(test.task)}"] = test.new_mean - test.base_mean
    change = gate.effective_length
    if change is not None:
        metrics["gate/effective_length"] = float(change.regressed)
        lengths = {"base": change.base, "new": change.new, "new_low": change.low, "new_high": change.high}
        metrics |= {f"effective_length/{key}": length or 0 for key, length in lengths.items()}
    return metrics
