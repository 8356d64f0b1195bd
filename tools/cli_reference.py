#!/usr/bin/env python3
"""The command-line reference, made from fathom's own parsers: every command and subcommand (``fathom
suites make-demo`` too) with its usage, and each argument with its help and its default.

An MkDocs hook (``hooks:`` in mkdocs.yml): the site's ``reference/cli.md`` is written at each build,
never committed. Made at build time rather than committed and checked by a test, the page cannot go
stale, and a new flag needs nothing done to the docs beyond its help. ``tests/test_docs.py`` reads
``markdown()`` as the site shows it.

Usage: ``python tools/cli_reference.py`` prints the page.
"""

from __future__ import annotations

import argparse
import html
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fathom.cli.arguments import parser
from fathom.packages import install_command

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

PAGE = "reference/cli.md"
# A usage as a terminal of 100 columns shows it (a code block does not wrap); help text and
# descriptions unwrapped, for the browser to wrap.
USAGE_WIDTH = 100
UNWRAPPED = 10_000


@dataclass(frozen=True)
class Command:
    """A command as typed after ``fathom`` (``("suites", "make-demo")``), its parser, and the help
    its parent lists it with."""

    words: tuple[str, ...]
    parser: argparse.ArgumentParser
    summary: str

    @property
    def name(self) -> str:
        return " ".join(("fathom", *self.words))


def commands(root: argparse.ArgumentParser | None = None, words: tuple[str, ...] = ()) -> Iterator[Command]:
    """Every command and subcommand under ``root`` (fathom's parser by default), parents first."""
    for action in (root or parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                command = Command((*words, name), sub, summaries.get(name, ""))
                yield command
                yield from commands(sub, command.words)


def markdown() -> str:
    """The page: a table of the commands, then each command's section."""
    everything = list(commands())
    lines = [
        "# Command line",
        "",
        "Every command of `fathom`, made from its own parsers when the site is built: `fathom COMMAND "
        "--help` prints the same. `fathom --version` prints the version.",
        "",
        "| command | what it does |",
        "|---|---|",
        *(f"| [{c.name}](#{_slug(c.name)}) | {_cell(c.summary)} |" for c in everything),
    ]
    for command in everything:
        lines += ["", *_section(command)]
    return _portable("\n".join(lines) + "\n")


def _section(command: Command) -> list[str]:
    prog, actions = command.parser.prog, command.parser._actions
    usage = argparse.HelpFormatter(prog, width=USAGE_WIDTH)
    usage.add_usage(command.parser.usage, actions, command.parser._mutually_exclusive_groups)
    text = argparse.HelpFormatter(prog, width=UNWRAPPED)
    lines = [f"## {command.name}", "", _cell(command.summary)]
    description = command.parser.description
    if description and description != command.summary:
        lines += ["", _cell(text._format_text(description))]
    lines += ["", "```text", usage.format_help().strip(), "```"]
    arguments = [action for action in actions if not _hidden(action)]
    if arguments:
        lines += ["", "| argument | default | what it is |", "|---|---|---|"]
        for action in arguments:
            invocation, help_text = text._format_action_invocation(action), text._expand_help(action)
            lines.append(f"| `{invocation}` | {_default(action)} | {_cell(help_text)} |")
    return lines


def _hidden(action: argparse.Action) -> bool:
    """``--help`` (every command has it), the subcommands (each has its own section), and what is
    suppressed from the help."""
    return (
        isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        or action.help == argparse.SUPPRESS
    )


def _default(action: argparse.Action) -> str:
    """The default where the command line would otherwise have to say it: not a flag's absence, not
    an option left out."""
    if action.nargs == 0 or action.default in (None, False, argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _cell(text: str) -> str:
    """Help text as one table cell, shown as written: no HTML, no column break, no emphasis."""
    text = html.escape(" ".join(text.split()), quote=False)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def _portable(page: str) -> str:
    """The install hints as a reader of the site types them in a fresh clone (README, Getting
    started), not as they name the folder fathom was installed from on the machine that built it."""
    here = install_command("EXTRA").partition("EXTRA")[0]
    return page.replace(here, "pip install '.[")


def _slug(heading: str) -> str:
    """The anchor of a heading that holds only words, spaces and hyphens (mkdocs.yml's slugs)."""
    return heading.lower().replace(" ", "-")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """The MkDocs hook: the page joins the site's files before the navigation is built."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=markdown()))
    return files


if __name__ == "__main__":
    print(markdown(), end="")
