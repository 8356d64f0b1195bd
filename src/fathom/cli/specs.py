"""The sweep that the options deciding a run's prompts describe: one reading for ``fathom run``,
``fathom plan`` and ``fathom export-lm-eval``, each adding the fields that are its own."""

from __future__ import annotations

import argparse
from typing import Any

from fathom import registry
from fathom.spec import (
    RunSpec,
    parse_depths,
    parse_items,
    parse_lengths,
    parse_ops,
    parse_repeats,
    prompt_options,
)


def sweep_spec(args: argparse.Namespace, **own: Any) -> RunSpec:
    """``args``' task, tokenizer, lengths, depths (a swept task's 11 by default), samples, seed, prompt
    options, scoring, answer budget, fill and family axes, with ``own``'s fields (the model, at least)."""
    depths = args.depths or ("11" if registry.TASK.entry(args.task).depths == "swept" else "")
    return RunSpec(
        task=args.task,
        tokenizer=args.tokenizer,
        lengths=parse_lengths(args.lengths),
        depths=parse_depths(depths) if depths else (),
        samples=args.samples,
        seed=args.seed,
        **prompt_options(args),
        scoring=args.scoring,
        max_new_tokens=args.max_new_tokens,
        fill=args.fill,
        ops=parse_ops(args.ops),
        items=parse_items(args.items),
        repeats=parse_repeats(args.repeats),
        **own,
    )
