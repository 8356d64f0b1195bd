"""``fathom judge [RUN] --qualify``: its handler, which ``fathom.cli``'s judge command calls."""

from __future__ import annotations

import argparse

from fathom.judge.arguments import judges_named
from fathom.judge.qualify import check_qualification, qualify, record_qualifications
from fathom.prompts.judging import load_rubric
from fathom.prompts.qualify_sets import load_set
from fathom.report.derive import report
from fathom.report.qualification_text import qualification_text
from fathom.run.store import RunFolder

FAILED = 1  # a judge missed a threshold of the set


def qualify_command(args: argparse.Namespace) -> int:
    """Each judge named on the set; recorded in RUN where one is named (and its report made again, if
    the run has answers). Exit 0 when every judge passed, 1 when one failed."""
    judges = judges_named(args)
    check_qualification(judges, args.rubric, args.qualify_set, args.run_dir)
    rubric, qualify_set = load_rubric(args.rubric), load_set(args.qualify_set)
    records = [
        qualify(spec, rubric, qualify_set, args.judge_retries, show_progress=not args.no_progress)
        for spec in judges
    ]
    for record in records:
        print("\n".join(qualification_text(record)))
    if args.run_dir is not None:
        record_qualifications(args.run_dir, records)
        if RunFolder(args.run_dir).latest():
            report(args.run_dir)
        print(f"recorded in {args.run_dir}: its report shows it beside the judges' verdicts")
    return 0 if all(record.passed for record in records) else FAILED
