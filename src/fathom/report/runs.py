"""The run folders under a folder, one summary each: what ran, how far it got, what it found.

A listing must survive the folders it finds: one with a broken manifest or an unreadable file is
listed with the reason, never allowed to stop the others from being listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fathom.analysis.control import ControlCount, control_count
from fathom.analysis.effective import run_effective_length
from fathom.analysis.select import control_records, split_records
from fathom.analysis.suites import TaskMean, is_suite_run, mean_over_tasks
from fathom.errors import FathomError, RunFolderError
from fathom.manifest import Manifest
from fathom.records import AnyRecord
from fathom.run.store import MANIFEST, RunFolder, is_final


@dataclass(frozen=True)
class RunEntry:
    """One run folder. ``problem`` says why it could not be read; the other fields are then empty."""

    folder: Path
    created: str | None = None  # the manifest's ISO time
    model: str | None = None
    task: str | None = None
    lengths: tuple[int, ...] = ()
    samples: int | None = None  # k, per cell
    planned: int | None = None  # None in manifests written before fathom recorded it
    done: int = 0  # samples with a final record (a retried error is not final)
    errors: int = 0
    effective_length: int | None = None  # on the mean; None for perplexity-only runs and suites'
    task_mean: TaskMean | None = None  # a real suite's run: its mean score over tasks, in its stead
    controls: ControlCount | None = None  # its no-context controls; None for a run without any
    labels: dict[str, str] = field(default_factory=dict)  # fathom run --label, e.g. {"step": "1200"}
    problem: str | None = None

    @property
    def status(self) -> str:
        if self.problem is not None:
            return f"unreadable: {self.problem}"
        if self.done == 0 and self.errors == 0:
            state = "empty"
        elif self.planned is None:
            state = f"partial? {self.done}/?"  # no plan recorded: complete or not cannot be told
        elif self.done >= self.planned:
            state = "complete"
        else:
            state = f"partial {self.done}/{self.planned}"
        return state + (f", {self.errors} errors" if self.errors else "")


def list_runs(folder: Path) -> list[RunEntry]:
    """The run folders directly under ``folder`` (or ``folder`` itself, if it is one), oldest first
    by the manifest's creation time; unreadable ones last."""
    return by_creation([_entry(path) for path in run_folders(folder)])


def by_creation(entries: list[RunEntry]) -> list[RunEntry]:
    """Oldest first by the manifest's creation time; unreadable ones last."""
    return sorted(entries, key=lambda e: (e.created is None, e.created or "", e.folder.name))


def run_folders(folder: Path) -> list[Path]:
    """``folder`` itself if it is a run folder, else the run folders directly under it, by name."""
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise RunFolderError(
            f"'{folder}' {problem}: name the folder that holds your run folders "
            "('fathom run' writes them to runs/ unless --out names another)"
        )
    if (folder / MANIFEST).is_file():
        candidates = [folder]
    else:
        try:
            candidates = sorted(
                child for child in folder.iterdir() if child.is_dir() and _is_run_folder(child)
            )
        except OSError as exc:
            raise RunFolderError(f"cannot list '{folder}': {exc.strerror or exc}") from None
    return candidates


def _is_run_folder(path: Path) -> bool:
    try:
        return (path / MANIFEST).exists()
    except OSError:
        return True  # a folder that cannot be looked into is listed with the reason, not hidden


def _entry(path: Path) -> RunEntry:
    folder = RunFolder(path)
    try:
        manifest = folder.read_manifest()
        records = folder.latest()
    except (FathomError, OSError, ValueError) as exc:
        return RunEntry(path, problem=str(exc))
    return run_entry(path, manifest, records)


def run_entry(path: Path, manifest: Manifest, records: list[AnyRecord]) -> RunEntry:
    """A run's entry from its manifest and latest records, read from its folder or from an index."""
    samples, _ = split_records(records)
    spec = manifest.spec
    # A suite's lengths are limits its items were cut to, so RULER's effective length means nothing.
    suite = is_suite_run(samples)
    return RunEntry(
        folder=path,
        created=manifest.environment.created,
        model=spec.model,
        task=spec.task,
        lengths=tuple(sorted(spec.lengths)),
        samples=spec.samples,
        planned=manifest.planned,
        done=sum(1 for r in records if is_final(r)),
        errors=sum(1 for r in records if r.error is not None),
        effective_length=None if suite else run_effective_length(samples).mean,
        task_mean=mean_over_tasks(samples) if suite else None,
        controls=control_count(control_records(records)),
        labels=manifest.labels,
    )
