"""``fathom export``'s and ``fathom export-check``'s command lines (``fathom.export.arguments``): each
option's name, default, type, action and help read whole, as the CLI reference prints them, and the
spec ``export_spec`` makes of them, compared with one written out field by field."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fathom.cli.arguments import parser
from fathom.export.arguments import CHECK_DESCRIPTION, EXPORT_DESCRIPTION, export_spec
from fathom.spec import RunSpec

# Every task export takes, its families in their order: niah, babi and its five tasks alone, state,
# RULER's five, listing, mrcr.
TASKS = (
    "niah, babi, babi:qa1, babi:qa2, babi:qa3, babi:qa4, babi:qa5, state, vt, cwe, fwe, qa_1, qa_2, listing, "
    "mrcr"
)
# Every needle kind but sf: the keyed ones, fact, the split kinds, the low-overlap ones by hops.
KINDS = "number, words, uuid, fact, split, chain, latent-1, latent-1-literal, latent-2, latent-2-literal"
LATENT = "latent needles only"


def _commands() -> argparse._SubParsersAction[argparse.ArgumentParser]:
    (commands,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return commands


def _options(command: argparse.ArgumentParser) -> list[tuple[Any, ...]]:
    return [
        (a.option_strings, a.dest, a.default, a.type, type(a).__name__, a.required, a.nargs, a.help)
        for a in command._actions
        if a.dest != "help"
    ]


def test_export_and_export_check_are_commands_with_their_help() -> None:
    commands = _commands()
    helps = {a.dest: a.help for a in commands._choices_actions}
    assert helps["export"] == (
        "write long-context training examples from evaluation's generators, sharing nothing with it"
    )
    assert helps["export-check"] == (
        "report what an export shares with evaluation run folders (exit 1 if anything)"
    )
    export, check = commands.choices["export"], commands.choices["export-check"]
    assert export.description is EXPORT_DESCRIPTION
    assert check.description is CHECK_DESCRIPTION
    # The CLI's own formatter (the other commands'), not argparse's default, which rewraps the text.
    run = commands.choices["run"]
    assert export.formatter_class is run.formatter_class is check.formatter_class
    assert export.formatter_class is not argparse.HelpFormatter


def test_export_check_takes_an_export_and_run_folders() -> None:
    check = _commands().choices["export-check"]
    assert _options(check) == [
        ([], "export", None, Path, "_StoreAction", True, None, "the JSONL file fathom export wrote"),
        ([], "runs", None, Path, "_StoreAction", True, "+", "evaluation run folders to check it against"),
    ]
    args = parser().parse_args(["export-check", "e.jsonl", "a", "b"])
    assert (args.export, args.runs) == (Path("e.jsonl"), [Path("a"), Path("b")])


def test_each_export_option_read_whole() -> None:
    export = _commands().choices["export"]
    store = "_StoreAction"
    assert _options(export) == [
        ([], "task", None, None, store, True, None, f"the task whose prompts to imitate: {TASKS}"),
        (["--count"], "count", None, int, store, True, None, "how many examples to write"),
        (["--out"], "out", None, Path, store, True, None, "the JSONL file to write"),
        (["--force"], "force", False, None, "_StoreTrueAction", False, 0, "replace --out if it exists"),
        (
            ["--lengths"],
            "lengths",
            "1k,2k,4k,8k",
            None,
            store,
            False,
            None,
            "prompt lengths in the tokenizer's tokens",
        ),
        (
            ["--depths"],
            "depths",
            None,
            None,
            store,
            False,
            None,
            "niah's: a count of even depths or fractions (0,0.5,1); default 11",
        ),
        (
            ["--ops"],
            "ops",
            None,
            None,
            store,
            False,
            None,
            "state's: counts of relevant list operations (default 4,16,64)",
        ),
        (
            ["--items"],
            "items",
            None,
            None,
            store,
            False,
            None,
            "listing's: counts of matching records (default 8,32,128)",
        ),
        (
            ["--repeats"],
            "repeats",
            None,
            None,
            store,
            False,
            None,
            "mrcr's: how many times the piece asked again is asked (default 2,4,8)",
        ),
        (
            ["--needle"],
            "needle",
            None,
            None,
            store,
            False,
            None,
            f"niah's needle kind: {KINDS} (default number; not sf: it is fixed)",
        ),
        (
            ["--distractors"],
            "distractors",
            None,
            int,
            store,
            False,
            None,
            "look-alike needles per example (default 0; 3 for latent)",
        ),
        (["--needles"], "needles", 1, int, store, False, None, "facts asked for at once"),
        (
            ["--split-distance"],
            "split_distance",
            "0.25",
            None,
            store,
            False,
            None,
            "share of the haystack between a split needle's parts, or random",
        ),
        (
            ["--corpus"],
            "corpus",
            None,
            None,
            "_AppendAction",
            False,
            None,
            "the haystack: prose (default), essays, noise, code, legal, technical, german, dir:PATH, "
            "mix:NAME=WEIGHT,...; several (code,prose) share the examples out",
        ),
        (
            ["--haystack-offset"],
            "haystack_offset",
            None,
            None,
            store,
            False,
            None,
            "niah's: random (the default: each example reads its own stretch of the corpus, more varied "
            "training text) or start (every example the corpus's opening, as an evaluation run reads it "
            "unless told otherwise)",
        ),
        (
            ["--needle-style"],
            "needle_style",
            "native",
            None,
            store,
            False,
            None,
            "native (number, words and uuid needles in the haystack's own form) or prose",
        ),
        (
            ["--literal-distractor"],
            "literal_distractor",
            False,
            None,
            "_StoreTrueAction",
            False,
            0,
            f"{LATENT}: with latent needles, a sentence naming each question's place, unrelated to it, "
            "in the haystack (a literal-match distractor)",
        ),
        (
            ["--relations"],
            "relations",
            "visit",
            None,
            store,
            False,
            None,
            f"{LATENT}: what a latent needle says its character did at the anchor: visit (each item's "
            "own needle), home, work; a comma list or all draws one per needle",
        ),
        (
            ["--needle-orders"],
            "needle_orders",
            "name-first",
            None,
            store,
            False,
            None,
            f"{LATENT}: name-first or place-first (the anchor before the character: an inverted "
            "needle); a comma list or all draws one per needle",
        ),
        (
            ["--question-templates"],
            "question_templates",
            "1",
            None,
            store,
            False,
            None,
            f"{LATENT}: which of each relation's three question wordings to ask (1, 2, 3; a comma list "
            "or all draws one per needle)",
        ),
        (
            ["--tokenizer"],
            "tokenizer",
            "cl100k_base",
            None,
            store,
            False,
            None,
            "counts the lengths: char, cl100k_base, o200k_base, hf:PATH (the model to train, for exact "
            "lengths)",
        ),
        (
            ["--template"],
            "template",
            "auto",
            None,
            store,
            False,
            None,
            "the chat template whose tokens count in the length (the messages themselves hold none)",
        ),
        (
            ["--system-prompt"],
            "system_prompt",
            None,
            None,
            store,
            False,
            None,
            "a system message for every example",
        ),
        (
            ["--seed"],
            "seed",
            0,
            int,
            store,
            False,
            None,
            "decides every draw: the same seed, the same file",
        ),
    ]


def _spec(*options: str) -> RunSpec:
    return export_spec(parser().parse_args(["export", *options, "--count", "3", "--out", "o.jsonl"]))


ELEVEN = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
KBS = (1024, 2048, 4096, 8192)


def test_a_niah_exports_spec_takes_eleven_depths_and_random_haystack_stretches() -> None:
    assert _spec("niah") == RunSpec(
        task="niah",
        model="export",
        tokenizer="cl100k_base",
        lengths=KBS,
        depths=ELEVEN,
        samples=1,
        haystack_offset="random",
    )


def test_a_story_exports_spec_has_no_depths_and_reads_the_corpus_from_its_start() -> None:
    assert _spec("babi") == RunSpec(
        task="babi", model="export", tokenizer="cl100k_base", lengths=KBS, depths=(), samples=1
    )
    # --depths given to a story task reaches the spec, where the run's own check refuses it.
    assert _spec("babi", "--depths", "3").depths == (0.0, 0.5, 1.0)


def test_every_option_given_reaches_the_spec() -> None:
    given = _spec(
        "niah",
        "--lengths",
        "2k,1k",
        "--depths",
        "0,0.25",
        "--ops",
        "8,2",
        "--items",
        "5",
        "--repeats",
        "3,2",
        "--needle",
        "fact",
        "--distractors",
        "2",
        "--needles",
        "2",
        "--split-distance",
        "0.5",
        "--corpus",
        "code",
        "--haystack-offset",
        "start",
        "--needle-style",
        "prose",
        "--tokenizer",
        "char",
        "--template",
        "chatml",
        "--system-prompt",
        "Be brief.",
        "--seed",
        "7",
    )
    assert given == RunSpec(
        task="niah",
        model="export",
        tokenizer="char",
        lengths=(1024, 2048),
        depths=(0.0, 0.25),
        samples=1,
        seed=7,
        corpus="code",
        needle="fact",
        template="chatml",
        system_prompt="Be brief.",
        distractors=2,
        needles=2,
        split_distance=0.5,
        haystack_offset="start",
        needle_style="prose",
        ops=(2, 8),
        items=(5,),
        repeats=(2, 3),
    )
    assert _spec("mrcr", "--haystack-offset", "random").haystack_offset == "random"
