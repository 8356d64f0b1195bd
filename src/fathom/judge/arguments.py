"""The command line's options for LLM judges, kept here so that cli.py stays a list of commands:
``fathom judge RUN``, ``fathom judge [RUN] --qualify`` and the same options on ``fathom run``
(judging once the run is done)."""

from __future__ import annotations

import argparse
from pathlib import Path

from fathom.errors import SpecError
from fathom.judge.runner import MOST_RETRIES, check_retries
from fathom.prompts.judging import rubric_names
from fathom.prompts.qualify_sets import set_names


def add_judge_options(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument(
        "--judge",
        required=required,
        default=None,
        help="an LLM judge of the answers, backend:model as --model takes it (not the model under test; "
        "best of another family), e.g. llamacpp:gemma3-270m or sim-judge:reference",
    )
    parser.add_argument(
        "--judge2", default=None, help="a second judge, of another model: their agreement is reported"
    )
    parser.add_argument(
        "--rubric",
        default="qa-correctness",
        help=f"the judges' rubric: {', '.join(rubric_names())}, or the path of a rubric file",
    )
    parser.add_argument(
        "--judge-retries",
        type=_retries,
        default=2,
        help="times a reply that is no verdict is asked for again, with the reason, before it is an error "
        f"(0 to {MOST_RETRIES})",
    )


def _retries(text: str) -> int:
    """--judge-retries, refused as it is parsed: before a run that would judge once it is done."""
    try:
        retries = int(text)
        check_retries(retries)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of retries") from None
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return retries


def judges_named(args: argparse.Namespace) -> list[str]:
    """The judges the options name, in role order; --judge2 alone is refused."""
    if args.judge2 and not args.judge:
        raise SpecError("--judge2 needs --judge: name the first judge too")
    return [name for name in (args.judge, args.judge2) if name]


def add_judge_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    judge = commands.add_parser(
        "judge",
        help="have one or two LLM judges grade a run's answers under a rubric (resumes; pays nothing twice)",
    )
    judge.add_argument("run_dir", type=Path, nargs="?", help="the run folder (optional with --qualify)")
    add_judge_options(judge, required=True)
    judge.add_argument(
        "--qualify",
        action="store_true",
        help="grade a qualification set of hand-labelled and adversarial answers instead of a run's, and "
        "report agreement, flips and pass/fail (exit 0 pass, 1 fail); with RUN, record it there for the "
        "report",
    )
    judge.add_argument(
        "--qualify-set",
        default="qa-judge",
        help=f"the qualification set: {', '.join(set_names())}, or the path of a set file",
    )
    judge.add_argument("--no-progress", action="store_true", help="write no progress bar to stderr")
