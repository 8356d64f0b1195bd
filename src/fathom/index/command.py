"""``fathom index DIR... --out FILE``: its parser and its handler, kept here so that the CLI's
modules only register them."""

from __future__ import annotations

import argparse
from pathlib import Path

from fathom.index.build import DROPPED, INDEXED, UNCHANGED, UNREADABLE, Outcome, index_runs, write_parquet


def add_index_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    index = commands.add_parser(
        "index",
        help="load run folders' manifests, samples and judgements into a DuckDB file for SQL; "
        "unchanged folders are skipped",
    )
    index.add_argument(
        "folders", type=Path, nargs="+", metavar="DIR", help="a run folder, or a folder of run folders"
    )
    index.add_argument(
        "--out", type=Path, required=True, help="the index, a DuckDB file: made if absent, else updated"
    )
    index.add_argument(
        "--parquet",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the index's tables to DIR as runs.parquet, samples.parquet and judgements.parquet",
    )


def index_command(args: argparse.Namespace) -> None:
    outcomes = index_runs(args.folders, args.out)
    for outcome in outcomes:
        if outcome.state in (INDEXED, DROPPED):
            print(_line(outcome))
    states = (INDEXED, UNCHANGED, DROPPED, UNREADABLE)
    count = {state: sum(o.state == state for o in outcomes) for state in states}
    damaged = sum(o.damaged + o.judgements_damaged for o in outcomes)
    totals = ", ".join(f"{n} {state}" for state, n in count.items() if n or state in (INDEXED, UNCHANGED))
    print(f"{args.out}: {totals}; {damaged} damaged lines left out")
    if args.parquet is not None:
        written = write_parquet(args.out, args.parquet)
        print(f"wrote {', '.join(str(path) for path in written)}")


def _line(outcome: Outcome) -> str:
    if outcome.state == DROPPED:
        return f"dropped  {outcome.path} (no longer a run folder there)"
    line = f"indexed  {outcome.path}: {outcome.records} records, {outcome.judgements} judgements"
    damaged = outcome.damaged + outcome.judgements_damaged
    if damaged:
        # The writers move damaged lines aside, each in its own file: a repair, or the next judge.
        fixes = [f"'fathom repair {outcome.path}' moves those of samples.jsonl aside"] * bool(outcome.damaged)
        fixes += ["'fathom judge' those of judgements.jsonl"] * bool(outcome.judgements_damaged)
        line += f"; {damaged} damaged lines left out ({outcome.first_damage}): {', '.join(fixes)}"
    return line
