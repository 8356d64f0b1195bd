"""The files the report stage writes, by name: a run folder's derived files (re-made from its
manifest and records at any time) and a comparison's; and the run's summary.json read back."""

from __future__ import annotations

import json
from pathlib import Path

from fathom.analysis.summary import Summary
from fathom.errors import NewerSchemaError, RunFolderError

SUMMARY = "summary.json"
REPORT = "report.html"
HEATMAP = "heatmap.png"
GRID = "grid.png"
DEPTH = "depth.png"
TRAP = "trap.png"
PERPLEXITY = "perplexity.png"

COMPARISON_JSON = "compare.json"
COMPARISON_PNG = "compare.png"
COMPARISON_HTML = "compare.html"


def read_summary(run: Path) -> Summary | None:
    """A run's summary.json, or None where it has none yet ('fathom run' and 'fathom report' write
    it); one that does not read, or a newer fathom's, is a one-line error."""
    path = run / SUMMARY
    if not path.is_file():
        return None
    try:
        return Summary.from_json(json.loads(path.read_bytes().decode("utf-8")))
    except NewerSchemaError as exc:
        raise exc.at(str(path)) from None
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        raise RunFolderError(
            f"{path} is damaged or unreadable: 'fathom report {run}' makes it anew"
        ) from None
