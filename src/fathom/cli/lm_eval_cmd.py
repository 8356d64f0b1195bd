"""``fathom export-lm-eval``: its parser and its handler, which ``fathom.cli`` registers with a line each."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from fathom.cli.specs import sweep_spec
from fathom.errors import SpecError
from fathom.integrations.lm_eval_export import DEFAULT_NAME, export_lm_eval
from fathom.spec import RunSpec

DESCRIPTION = (
    "Write TASK's samples, as fathom run builds them for the same options and tokenizer, as a task folder "
    "for lm-evaluation-harness: per task and length, a JSONL of the prompts (each rendered whole, chat "
    "template included, at its exact length in the tokenizer's tokens) with fathom's facts of each sample, "
    "and a YAML naming the lm-eval task fathom_TASK_LENGTH; a group YAML fathom_TASK of them all; a utils.py "
    "that grades with fathom's graders inside lm-eval (metrics: score, and lured: the answers taken in by "
    "a look-alike). Run it with lm_eval --include_path DIR --tasks fathom_TASK --model ..., without "
    "--apply_chat_template, in an environment where fathom is installed. Nothing is written until every "
    "option, the tokenizer and a prompt of the shortest length have been made; an --out that holds other "
    "files than an export of the same spec is refused (docs/lm-eval.md)."
)


def add_lm_eval_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    add_prompt_options: Callable[[argparse.ArgumentParser], None],
) -> None:
    """The command, with ``fathom run``'s options that decide the prompts (``add_prompt_options``)."""
    command = commands.add_parser(
        "export-lm-eval",
        help="write a run's prompts and fathom's graders as a task folder for lm-evaluation-harness",
        description=DESCRIPTION,
    )
    command.add_argument(
        "task", help="the task whose samples to write (fathom run's tasks but perplexity and the suites)"
    )
    add_prompt_options(command)
    command.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the folder to write (new, empty, or an earlier export of this spec)",
    )
    command.add_argument(
        "--name",
        default=DEFAULT_NAME,
        help="what the tasks' and the group's names open with (fathom_niah, fathom_niah_1024): give each "
        "export of one task its own where one lm_eval --include_path reads several",
    )


def lm_eval_spec(args: argparse.Namespace) -> RunSpec:
    """The spec whose samples the folder holds: a run's, whose backend is never made, without controls
    (a question asked without its context is a run's check, not a task to hand lm-eval)."""
    if args.tokenizer == "auto":
        raise SpecError(
            "export-lm-eval has no model whose own tokenizer 'auto' could be: name the tokenizer that counts "
            "the lengths, --tokenizer hf:PATH (the model lm-eval will run, for exact lengths), or "
            "cl100k_base, o200k_base, ..."
        )
    return sweep_spec(args, model="lm-eval", control=False)  # no model answers here: lm-eval's does, later


def lm_eval_command(args: argparse.Namespace) -> None:
    done = export_lm_eval(lm_eval_spec(args), args.out, args.name)
    for task in done.tasks:
        print(f"{task.name}: {task.docs} samples of {task.task} at {task.length} tokens")
    print(f"wrote {len(done.tasks)} lm-eval tasks and their group {done.group} in {done.folder}")
    print(
        f"run: lm_eval --include_path {done.folder} --tasks {done.group} --model ... "
        "(without --apply_chat_template: each prompt is final)"
    )
