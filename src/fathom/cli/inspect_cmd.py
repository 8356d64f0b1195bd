"""``fathom import-inspect``: its parser and its handler, which ``fathom.cli`` registers with a line each."""

from __future__ import annotations

import argparse
from pathlib import Path

from fathom.integrations.inspect_log import FATHOM_TASKS, import_log
from fathom.report.derive import derive
from fathom.report.text import summary_text
from fathom.run.store import RunFolder

DESCRIPTION = (
    "Make an inspect_ai log of a fathom task (inspect eval "
    + ", ".join(FATHOM_TASKS)
    + ") a fathom run folder: the run's spec from the log's task metadata, each logged answer recorded and "
    "graded as fathom run records it, its prompt built again and checked against the one inspect sent "
    "(by sha256); then summary.json, the heatmap and report.html, so that fathom report and fathom "
    "compare read it as any run. The manifest names the model inspect:MODEL. Needs the inspect extra. "
    "Exit status: 0 imported; 3 imported, and some samples were errors in inspect; 2 bad input (no "
    "such log, another task's log, a run folder that is not empty), nothing written."
)


def add_import_inspect_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "import-inspect",
        help="make an inspect_ai log of a fathom task (fathom/niah, ...) a fathom run folder",
        description=DESCRIPTION,
    )
    command.add_argument("log", type=Path, help="the inspect log (.eval or .json) of a fathom task")
    command.add_argument(
        "--run-dir", type=Path, required=True, help="the run folder to write: new, or an empty folder"
    )


def import_inspect_command(args: argparse.Namespace) -> int:
    imported = import_log(args.log, args.run_dir)
    summary = derive(RunFolder(imported.folder))
    print(f"run folder: {imported.folder}")
    print(
        f"samples imported: {imported.written} of {imported.planned} planned, errors: {imported.errors} "
        f"(answered by {imported.model})"
    )
    for line in summary_text(summary):
        print(line)
    return 3 if imported.errors else 0  # fathom run's status for a run with errors (cli.SAMPLE_ERRORS)
