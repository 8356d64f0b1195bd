#!/usr/bin/env python3
"""Real models on each task family beside plain NIAH: which family breaks first.

    python tools/family_evidence.py collect RUN_DIR... [--out docs/families-real.json]
    python tools/family_evidence.py table [docs/families-real.json] [--write]

``collect`` reads finished run folders (their summary.json and manifest.json; nothing is re-run)
and keeps, for each model, each row's score per length with its k and 95% interval: plain NIAH
pooled over its depths, and every other family's rows as its summary's task grid holds them
(``state:2``, ``babi:qa1``, ``listing:4``, ...), with each run's no-context control beside.
``table`` renders those numbers as the Markdown table that README.md and docs/families.md hold
between their ``families-real`` markers; ``--write`` puts it there, and
``tests/test_family_evidence.py`` checks that both hold what the committed numbers render.

The runs themselves take an hour or more of llama.cpp on two cores: the commands are in
docs/families.md and in the JSON, beside the machine they ran on.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fathom.report.plots import format_length

ROOT = Path(__file__).resolve().parent.parent
NUMBERS = ROOT / "docs" / "families-real.json"
# Where the table goes, and whether with its intervals (the README has room for the scores only).
PAGES = {ROOT / "README.md": False, ROOT / "docs" / "families.md": True}
BEGIN, END = (
    "<!-- families-real: begin (python tools/family_evidence.py table --write) -->",
    "<!-- families-real: end -->",
)
KEPT = ("task", "length", "mean", "n", "ci_low", "ci_high", "errors")
# What each family's score is, as its summary grades it.
SCORED = {"niah": "found", "state": "exact", "babi": "exact", "listing": "F1", "mrcr": "similarity"}


def collect(folders: Iterable[Path], machine: str, commands: Sequence[str]) -> dict[str, Any]:
    """Each run folder's rows, grouped by model in the order first met."""
    models: dict[str, dict[str, Any]] = {}
    for folder in folders:
        summary = json.loads((folder / "summary.json").read_text())
        run = summary["run"]
        family = run["task"]
        # NIAH's rows are its lengths pooled over depths; every other family's are its task grid.
        rows = (
            [{**row, "task": family} for row in summary["lengths"]] if family == "niah" else summary["grid"]
        )
        model = models.setdefault(run["model"], {"model": run["model"], "families": []})
        model["families"].append(
            {
                "family": family,
                "run": folder.name,
                "tokenizer": run["tokenizer"],
                "rows": [{key: row[key] for key in KEPT} for row in rows],
                "control": {key: summary["control"][key] for key in ("mean", "n", "ci_high")},
            }
        )
    return {
        "machine": machine,
        "commands": list(commands),
        "made_by": "python tools/family_evidence.py collect RUN_DIR...",
        "models": list(models.values()),
    }


def short_model(model: str) -> str:
    """``llamacpp:smollm2?threads=2`` as a column heads it: the model without its backend or options."""
    return model.split(":", 1)[-1].split("?", 1)[0]


def table(numbers: Mapping[str, Any], intervals: bool) -> str:
    """The Markdown table: a row per family row (with its score and k), a column per model and
    length; each cell the score in percent (and its 95% interval where ``intervals``), a dash where
    the row was not run at that length."""
    models = numbers["models"]
    lengths = sorted({row["length"] for model in models for f in model["families"] for row in f["rows"]})
    head = [f"{short_model(m['model'])} {format_length(n)}" for m in models for n in lengths]
    lines = ["| family: row (score, k) | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for family, task in _row_order(models):
        found = [
            {
                row["length"]: row
                for f in m["families"]
                if f["family"] == family
                for row in f["rows"]
                if row["task"] == task
            }
            for m in models
        ]
        ks = "/".join(sorted({str(row["n"]) for rows in found for row in rows.values()}, key=int))
        cells = [_cell(rows.get(length), intervals) for rows in found for length in lengths]
        lines.append(f"| {task} ({SCORED.get(family, 'score')}, k={ks}) | " + " | ".join(cells) + " |")
    controls = [
        f"{short_model(m['model'])} {f['family']} {_percent(f['control']['mean'])} of {f['control']['n']}"
        for m in models
        for f in m["families"]
    ]
    return (
        "\n".join(lines)
        + "\n\nNo-context control (each sample asked without its context): "
        + "; ".join(controls)
        + "."
    )


def _row_order(models: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for model in models:
        for f in model["families"]:
            for row in f["rows"]:
                seen[(f["family"], row["task"])] = None
    return list(seen)


def _percent(mean: float | None) -> str:
    return "—" if mean is None else f"{100 * mean:.0f}%"


def _cell(row: Mapping[str, Any] | None, intervals: bool) -> str:
    if row is None or row["mean"] is None:
        return "—"
    interval = f" [{100 * row['ci_low']:.0f}-{100 * row['ci_high']:.0f}]" if intervals else ""
    return _percent(row["mean"]) + interval


def replace_table(text: str, rendered: str, where: Path) -> str:
    """``text`` with what lies between the markers replaced by ``rendered``."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{where}: no '{BEGIN}' ... '{END}' markers to put the table between")
    return text[: start + len(BEGIN)] + "\n" + rendered + "\n" + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    gather = commands.add_parser("collect", help="read finished run folders into the numbers' JSON")
    gather.add_argument("runs", nargs="+", type=Path)
    gather.add_argument("--out", type=Path, default=NUMBERS)
    gather.add_argument("--machine", default=f"{platform.machine()}, {platform.processor() or 'CPU'}")
    gather.add_argument(
        "--ran", action="append", default=[], help="a command that made the runs (repeatable)"
    )
    render = commands.add_parser("table", help="the Markdown table of the numbers")
    render.add_argument("numbers", nargs="?", type=Path, default=NUMBERS)
    render.add_argument(
        "--write",
        action="store_true",
        help="put it between the markers of " + ", ".join(str(page.relative_to(ROOT)) for page in PAGES),
    )
    args = parser.parse_args(argv)
    if args.command == "collect":
        numbers = collect(args.runs, args.machine, args.ran)
        args.out.write_text(json.dumps(numbers, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.out}")
        return 0
    numbers = json.loads(args.numbers.read_text())
    if not args.write:
        print(table(numbers, intervals=True))
        return 0
    for page, intervals in PAGES.items():
        page.write_text(replace_table(page.read_text(), table(numbers, intervals), page))
        print(f"wrote the table into {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
