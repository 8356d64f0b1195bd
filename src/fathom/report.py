"""Derived files of a run folder, re-made from its manifest and records at any time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fathom.analysis import cell_table, summarize
from fathom.errors import RunFolderError
from fathom.store import RunFolder

SUMMARY = "summary.json"
HEATMAP = "heatmap.png"


def derive(folder: RunFolder, threshold: float = 0.85) -> dict[str, Any]:
    """Write summary.json and heatmap.png from the records; return the summary."""
    manifest = folder.read_manifest()
    records = folder.latest()
    if not records:
        raise RunFolderError(f"run folder '{folder.path}' has no sample records yet: run it first")
    summary = summarize(records, threshold=threshold)
    spec = manifest["identity"]["spec"]
    summary["run"] = {key: spec[key] for key in ("task", "model", "tokenizer", "samples", "seed")}
    summary["trained_window"] = manifest.get("backend", {}).get("trained_window")
    folder.write_derived(SUMMARY, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    from fathom.plots import plot_heatmap

    title = f"{spec['model']} · {spec['task']} · {spec['tokenizer']} · k={spec['samples']}"
    if manifest.get("backend", {}).get("exact_lengths") is False:
        title += " (approximate lengths)"
    plot_heatmap(cell_table(records), folder.path / HEATMAP, title)
    return summary


def report(path: Path, threshold: float = 0.85) -> dict[str, Any]:
    return derive(RunFolder(path), threshold)
