"""The command line of ``fathom export`` and ``fathom export-check``: their options, and the spec
the export options make (cli.py parses, calls and prints; the options are long enough to live here)."""

from __future__ import annotations

import argparse
from pathlib import Path

from fathom.export.families import EXPORT_KINDS, EXPORTABLE
from fathom.spec import (
    RunSpec,
    add_latent_arguments,
    parse_depths,
    parse_items,
    parse_lengths,
    parse_ops,
    parse_repeats,
    prompt_options,
)

EXPORT_HELP = "write long-context training examples from evaluation's generators, sharing nothing with it"
EXPORT_DESCRIPTION = (
    "Write COUNT synthetic long-context training examples as chat-format JSONL, one per line: "
    '{"messages": [system?, user, assistant], "meta": {...}}. They come from the generators that '
    "build evaluation prompts (the same prompt words, haystacks, lengths, needle kinds, distractors, "
    "several and split needles), spread evenly over the lengths, depths and corpora given, and the same "
    "for the same seed. The guarantee: their keys, values, made-up names and low-overlap items are drawn "
    "from a training space that no evaluation draws from (other words, 8-digit numbers where evaluation "
    "draws 7, names beginning with C, J or Y, which no evaluation name begins with, the training part of "
    "the low-overlap items; UUIDs from random streams of their own, equal to an evaluation's with "
    "probability 2^-122), so no example shares a needle, key, value, name or item with any evaluation "
    "run. babi's stories (babi, or babi:qa1 ... alone) draw their people, places and objects from "
    "training pools no evaluation story draws from; state's programs act on other lists (cards and jars, "
    "not items and notes) with three-digit values where evaluation's have one or two. RULER's vt "
    "names six-letter variables with six-digit values (evaluation: five and five); cwe lists the prose "
    "corpus's words that are none of RULER's word lists; fwe codes its words in seven letters (evaluation: "
    "six); qa_1 and qa_2 ask the training fifth of SQuAD's articles and HotpotQA's questions, which no "
    "evaluation asks. listing's records name other users and actions, with six-digit ids. mrcr's "
    "conversations are about made-up places beginning with C, J or Y. fathom "
    "export-check verifies an export against run folders."
)
CHECK_HELP = "report what an export shares with evaluation run folders (exit 1 if anything)"
CHECK_DESCRIPTION = (
    "Collect what the run folders' records drew (answers and needle values, the keys their questions "
    "ask about, the made-up people they name, the low-overlap items' anchors) and look for each, as "
    "whole words, in every message of the export; what RULER's cwe, fwe and qa and listing drew "
    "(ordinary words, questions and their documents' openings, five-digit ids and user=/action= "
    "conditions) in the export's lines of the same task only. Exit 0 and say 'no overlap', or exit 1 "
    "and list each overlap with the export line and the run's sample it comes from."
)


def add_export_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export", help=EXPORT_HELP, description=EXPORT_DESCRIPTION)
    export.add_argument("task", help=f"the task whose prompts to imitate: {', '.join(EXPORTABLE)}")
    export.add_argument("--count", type=int, required=True, help="how many examples to write")
    export.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    export.add_argument("--force", action="store_true", help="replace --out if it exists")
    export.add_argument("--lengths", default="1k,2k,4k,8k", help="prompt lengths in the tokenizer's tokens")
    export.add_argument(
        "--depths", default=None, help="niah's: a count of even depths or fractions (0,0.5,1); default 11"
    )
    export.add_argument(
        "--ops", default=None, help="state's: counts of relevant list operations (default 4,16,64)"
    )
    export.add_argument(
        "--items", default=None, help="listing's: counts of matching records (default 8,32,128)"
    )
    export.add_argument(
        "--repeats",
        default=None,
        help="mrcr's: how many times the piece asked again is asked (default 2,4,8)",
    )
    export.add_argument(
        "--needle",
        default=None,
        help=f"niah's needle kind: {', '.join(EXPORT_KINDS)} (default number; not sf: it is fixed)",
    )
    export.add_argument(
        "--distractors",
        type=int,
        default=None,
        help="look-alike needles per example (default 0; 3 for latent)",
    )
    export.add_argument("--needles", type=int, default=1, help="facts asked for at once")
    export.add_argument(
        "--split-distance",
        default="0.25",
        help="share of the haystack between a split needle's parts, or random",
    )
    export.add_argument(
        "--corpus",
        action="append",
        help="the haystack: prose (default), essays, noise, code, legal, technical, german, dir:PATH, "
        "mix:NAME=WEIGHT,...; several (code,prose) share the examples out",
    )
    export.add_argument(
        "--haystack-offset",
        default=None,
        help="niah's: random (the default: each example reads its own stretch of the corpus, more varied "
        "training text) or start (every example the corpus's opening, as an evaluation run reads it unless "
        "told otherwise)",
    )
    export.add_argument(
        "--needle-style",
        default="native",
        help="native (number, words and uuid needles in the haystack's own form) or prose",
    )
    add_latent_arguments(export, "latent needles only")
    export.add_argument(
        "--tokenizer",
        default="cl100k_base",
        help="counts the lengths: char, cl100k_base, o200k_base, hf:PATH (the model to train, for exact "
        "lengths)",
    )
    export.add_argument(
        "--template",
        default="auto",
        help="the chat template whose tokens count in the length (the messages themselves hold none)",
    )
    export.add_argument("--system-prompt", default=None, help="a system message for every example")
    export.add_argument(
        "--seed", type=int, default=0, help="decides every draw: the same seed, the same file"
    )

    check = commands.add_parser("export-check", help=CHECK_HELP, description=CHECK_DESCRIPTION)
    check.add_argument("export", type=Path, help="the JSONL file fathom export wrote")
    check.add_argument("runs", type=Path, nargs="+", help="evaluation run folders to check it against")


def export_spec(args: argparse.Namespace) -> RunSpec:
    """The spec whose prompts the export imitates: a run's, whose backend is never made. niah's
    options default to the export's (11 depths, each example its own haystack stretch); a story
    task's to a run's, so that one given for niah alone is refused as a run refuses it."""
    niah = args.task == "niah"
    offset = args.haystack_offset or ("random" if niah else "start")
    return RunSpec(
        task=args.task,
        model="export",  # no model answers: the tokenizer alone counts the lengths
        tokenizer=args.tokenizer,
        lengths=parse_lengths(args.lengths),
        # niah's grid; a story task draws its depths per sample, and refuses --depths as a run does
        depths=parse_depths(args.depths or "11") if niah or args.depths else (),
        samples=1,  # each example is a sample of its own (fathom.export.examples)
        ops=parse_ops(args.ops),
        items=parse_items(args.items),
        repeats=parse_repeats(args.repeats),
        seed=args.seed,
        **{**prompt_options(args), "haystack_offset": offset},
    )
