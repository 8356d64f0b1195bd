"""``fathom compare``'s files: two run folders read into ``fathom.analysis.paired``'s comparison, and
the comparison written as compare.json, the difference heatmap compare.png and the page compare.html."""

from __future__ import annotations

import json
from pathlib import Path

from fathom.analysis.family_pairs import compare_families
from fathom.analysis.paired import Comparison
from fathom.analysis.pairing import RunRecords
from fathom.analysis.select import control_records, split_records
from fathom.analysis.suite_pairs import compare_suites
from fathom.analysis.suites import is_suite_run
from fathom.report.files import COMPARISON_HTML, COMPARISON_JSON, COMPARISON_PNG, read_summary
from fathom.report.html.compare import write_comparison_html
from fathom.report.plots import plot_difference_heatmap
from fathom.run.store import RunFolder
from fathom.safe_files import write_file


def compare_runs(base: Path, new: Path, alpha: float = 0.05) -> Comparison:
    """Compare two run folders of one spec that differ only in the model; refuse runs whose prompts
    differ. Two runs of a real suite are compared task by task as well (``SuiteComparison``), two of a
    family along its axis (``FamilyComparison``: state, babi, listing), and the runs' no-context
    controls beside (``Comparison.controls``)."""
    base_run, new_run = read_run(base), read_run(new)
    compare = compare_suites if is_suite_run(base_run.samples) else compare_families
    return compare(base_run, new_run, alpha)


def read_run(path: Path) -> RunRecords:
    """A run folder as a comparison reads it: its manifest, its graded samples and its controls."""
    folder = RunFolder(path)
    manifest = folder.read_manifest()  # first: a folder that is no run is refused for that
    records = folder.latest()
    return RunRecords(path, manifest, split_records(records)[0], control_records(records))


def write_comparison(comparison: Comparison, out_dir: Path) -> tuple[Path, Path]:
    """Write compare.json, the difference heatmap compare.png and the page compare.html (with both
    runs' heatmaps when their summary.json exist) into ``out_dir``; return the first two paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data, figure = out_dir / COMPARISON_JSON, out_dir / COMPARISON_PNG
    as_json = comparison.to_json()
    write_file(data, json.dumps(as_json, indent=2) + "\n")
    title = f"{comparison.new.model} (new) vs {comparison.base.model} (base)"
    plot_difference_heatmap(comparison.cells, figure, title, comparison.alpha)
    base_summary, new_summary = (read_summary(run.path) for run in (comparison.base, comparison.new))
    write_comparison_html(as_json, out_dir / COMPARISON_HTML, base_summary, new_summary)
    return data, figure
