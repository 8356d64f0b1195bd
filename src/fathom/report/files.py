"""The files the report stage writes, by name: a run folder's derived files (re-made from its
manifest and records at any time) and a comparison's; and the run's summary.json read back."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from fathom.analysis.summary import Summary
from fathom.errors import NewerSchemaError, RunFolderError
from fathom.safe_files import OversizedFileError, read_bounded

SUMMARY = "summary.json"
REPORT = "report.html"
HEATMAP = "heatmap.png"
GRID = "grid.png"
DEPTH = "depth.png"
TRAP = "trap.png"
PERPLEXITY = "perplexity.png"
VARIANT_HEATMAP = "heatmap-{}.png"  # one per variant of a NIAH run of several: variant_heatmap(task)
# The most a summary or a plot of fathom's holds, with room to spare (a 1M-token sweep's summary is a few
# MB, a plot under one): read whole from a folder that may be someone else's, never more.
SUMMARY_MOST = 256 << 20
PLOT_MOST = 64 << 20

COMPARISON_JSON = "compare.json"
COMPARISON_PNG = "compare.png"
COMPARISON_HTML = "compare.html"

SERIES_JSON = "series.json"  # fathom series: written outside every run folder
SERIES_HTML = "series.html"

# A variant's name holds whatever --corpus was given (a dir: path, a mix: of weights): outside these
# characters it could climb out of the run folder or fail to name a file on some file system.
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_NAME_LIMIT = 60


def variant_heatmap(task: str) -> str:
    """The heatmap file of one variant (task ``niah:<variant>``): ``heatmap-<variant>.png`` with each
    run of other characters than letters, digits, '.', '_', '+' and '-' made one '-', cut to 60.
    Where that changed the name, 8 hex digits of its hash follow, so two variants that differ only
    in those characters keep two files."""
    name = task.partition(":")[2] or task
    safe = _UNSAFE.sub("-", name).strip(".-")[:_NAME_LIMIT]
    if safe != name:
        safe = f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}".lstrip("-")
    return VARIANT_HEATMAP.format(safe)


def read_summary(run: Path) -> Summary | None:
    """A run's summary.json, or None where it has none yet ('fathom run' and 'fathom report' write
    it); one that does not read, or a newer fathom's, is a one-line error."""
    path = run / SUMMARY
    if not path.is_file():
        return None
    try:
        return Summary.from_json(json.loads(read_bounded(path, SUMMARY_MOST, "a summary").decode("utf-8")))
    except NewerSchemaError as exc:
        raise exc.at(str(path)) from None
    except (OSError, ValueError, TypeError, KeyError, RecursionError, OversizedFileError):
        raise RunFolderError(
            f"{path} is damaged or unreadable: 'fathom report {run}' makes it anew"
        ) from None


def read_plot(path: Path) -> bytes:
    """A plot's PNG bytes, to embed in a page or log to a tracker: never through a link (a run folder
    may be someone else's, and ``heatmap.png -> ~/.ssh/id_rsa`` would carry the key along), and no
    more than ``PLOT_MOST``."""
    return read_bounded(path, PLOT_MOST, "a plot")
