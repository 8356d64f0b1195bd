"""How long ``fathom series`` takes over a training run's checkpoints, from their folders and from an
index (issue #28: 20 runs of a 6 x 3 x 10 grid in under 5 s with the index).

It makes 20 simulated checkpoint runs once (a cliff whose window grows, then shrinks, so the series
has regressions to find), indexes them, then times the command as a user runs it, end to end in one
process (reading, 38 comparisons, the figures and the page): from the folders, and with --index.
A benchmark, not a test: it reports, and asserts nothing.

    python benchmarks/bench_series.py [--folder /tmp/fathom-series] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import statistics
import time
from pathlib import Path

from fathom.cli import main

RESULTS = Path(__file__).parent / "results" / "series.json"
GRID = ["--tokenizer", "cl100k_base", "--lengths", "1k,2k,4k,8k,16k,32k", "--depths", "3", "--samples", "10",
        "--no-progress"]  # fmt: skip
WINDOWS = ["2k", "4k", "8k", "16k", "32k"] * 4  # 20 checkpoints; every fifth falls back to a 2k window


def _quiet(*args: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(list(args))


def make_runs(folder: Path) -> list[Path]:
    runs = []
    for step, window in enumerate(WINDOWS, start=1):
        run = folder / f"ckpt{step:02d}"
        if not (run / "summary.json").exists():
            model = f"sim:cliff?window={window}&seed={step}"
            _quiet(
                "run", "niah", "--model", model, *GRID, "--run-dir", str(run), "--label", f"step={step * 100}"
            )
        runs.append(run)
    return runs


def timed(args: list[str], repeats: int) -> list[float]:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        status = _quiet(*args)
        seconds.append(time.perf_counter() - started)
        assert status in (0, 1), f"fathom {' '.join(args)} exited {status}"
    return seconds


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path("/tmp/fathom-series"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = make_runs(args.folder / "runs")
    index = args.folder / "results.duckdb"
    indexing = timed(["index", str(args.folder / "runs"), "--out", str(index)], 1)
    out = str(args.folder / "series")
    # The weakest checkpoint as the baseline: the best before each checkpoint is then another run, so
    # every checkpoint is compared twice (38 comparisons), the most a series of 20 asks.
    baseline = ["--baseline", str(runs[0]), "--by", "step", "--out", out]
    folders = timed(["series", *map(str, runs), *baseline], args.repeats)
    indexed = timed(["series", "--index", str(index), *baseline], args.repeats)
    results = {
        "runs": len(runs),
        "grid": "6 lengths x 3 depths x 10 samples, cl100k_base, sim:cliff checkpoints",
        "index_seconds": round(indexing[0], 2),
        "series_from_folders_seconds": [round(s, 2) for s in folders],
        "series_from_index_seconds": [round(s, 2) for s in indexed],
        "machine": f"{platform.processor() or platform.machine()}, {platform.platform()}",
    }
    print(
        f"fathom series over {len(runs)} runs: from the folders {statistics.median(folders):.2f} s, "
        f"with --index {statistics.median(indexed):.2f} s (median of {args.repeats}); indexing them "
        f"{indexing[0]:.2f} s"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main_bench()
