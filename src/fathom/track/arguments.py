"""The ``--log`` option that ``fathom run``, ``compare`` and ``series`` share."""

from __future__ import annotations

import argparse

from fathom.packages import install_help
from fathom.track.trackers import TRACKERS


def add_log_option(parser: argparse.ArgumentParser) -> None:
    values = "; ".join(f"{name}={entry.value}" for name, entry in TRACKERS.items())
    parser.add_argument(
        "--log",
        action="append",
        metavar="TRACKER[=WHERE]",
        help=f"also log the results to {' or '.join(TRACKERS)} (repeatable), once they are written: "
        f"{values}; without '=', where the tracker's own environment says (MLFLOW_TRACKING_URI, "
        f"WANDB_PROJECT, WANDB_MODE=offline, ...). {install_help('mlflow')} or "
        f"{install_help('wandb')}; docs/tracking.md",
    )
