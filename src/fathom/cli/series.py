"""``fathom series``: its parser and its handler, which ``fathom.cli`` registers with a line each."""

from __future__ import annotations

import argparse
from pathlib import Path

from fathom.report.series import default_out, read_series, write_series
from fathom.report.series_text import series_text
from fathom.track.logged import log_series
from fathom.track.trackers import open_trackers

DESCRIPTION = (
    "Follow a training run's checkpoints: many runs of one spec (only --model differs), each labelled at "
    "run time (fathom run ... --label step=1200), in order by a label (--by step) or as given. Per "
    "checkpoint: the overall score, the score per length (and per task) with 95% intervals and the "
    "effective length; each checkpoint compared as fathom compare does with the baseline (the first run, "
    "or --baseline RUN) and with the best checkpoint before it (the highest overall mean score); the "
    "first checkpoint where each length, task or the effective length regressed against each. Writes "
    "series.json and series.html (never into a run folder). Exit status: 0 the last checkpoint did not "
    "regress; 1 it regressed against the baseline or the best before it; 2 bad input, nothing written."
)


def add_series_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    series = commands.add_parser(
        "series",
        help="a training run's checkpoints: scores, effective length and regressions over the checkpoints; "
        "exit 1 if the last one regressed",
        description=DESCRIPTION,
    )
    series.add_argument(
        "runs",
        type=Path,
        nargs="*",
        metavar="RUN",
        help="each checkpoint's run folder; with --index, also a folder holding them, or none for every run "
        "the index holds",
    )
    series.add_argument(
        "--index",
        type=Path,
        default=None,
        metavar="FILE",
        help="read the runs from this index (fathom index) instead of their folders",
    )
    series.add_argument(
        "--by",
        default=None,
        metavar="LABEL",
        help="order by this label (numbers as numbers); default: as given",
    )
    series.add_argument(
        "--baseline", type=Path, default=None, help="the run to compare with (default: the first in order)"
    )
    series.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="each comparison's gate, as fathom compare's",
    )
    series.add_argument(
        "--out",
        type=Path,
        default=None,
        help="for series.json and series.html (default: a series folder beside the first run's folder)",
    )


def series_command(args: argparse.Namespace) -> int:
    trackers = open_trackers(args.log or ())  # a tracker not installed is refused before any work
    series = read_series(args.runs, args.by, args.baseline, args.alpha, args.index)
    first = args.runs[0] if args.runs else series.steps[0].numbers.path
    data, page = write_series(series, args.out or default_out(first))
    print("\n".join(series_text(series)))
    print(f"wrote {data} and {page}")
    for line in log_series(trackers, series, data.parent):
        print(f"logged to {line}")
    # 1 when the last checkpoint regressed, so a training job can gate on its newest checkpoint.
    return 1 if series.regressed else 0
