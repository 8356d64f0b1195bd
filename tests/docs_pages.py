"""What tests/test_docs.py checks in the documentation (README.md and docs/**/*.md): each checker
reads a page's text and returns its problems, one line each naming the page and the line, so that a
failing test lists them all.

The convention for command blocks: every fenced shell block (```bash, or sh, shell, console) is run
by the suite, each page's blocks in order in a fresh folder, unless the line right above its fence is
``<!-- not run: REASON -->``. A run block holds only ``fathom`` commands, one a line (``\\`` joins
lines); a trailing ``# exits N`` says the exit status the command is shown with (else 0)."""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import subprocess
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

SHELLS = frozenset({"bash", "sh", "shell", "console", "zsh"})
# A block without a language whose first word is one of these is a command hidden from the run test.
COMMAND_WORDS = frozenset({"fathom", "pip", "python", "python3"})
# Blocks whose lines are no command line of fathom's (their `--` is SQL's comment, and so on).
NOT_CLI = frozenset({"python", "sql", "toml", "json", "yaml", "html", "jinja", "text-python"})
# What the tests' machine has and a reader's may not: a browser to open (`report --open` prints instead).
DESKTOP = ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<language>[^\s`{]*)")
_NOT_RUN = re.compile(r"^\s*<!--\s*not run:(?P<reason>.*?)-->\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s|$)", re.M)
_HTML_LINK = re.compile(r"\b(?:href|src)\s*=\s*[\"'](?P<target>[^\"']+)[\"']")
_SCHEME = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<text>.+?)[ \t#]*$")
_ID = re.compile(r"\{[^}]*#(?P<id>[\w-]+)[^}]*\}\s*$|\bid=[\"'](?P<html>[^\"']+)[\"']")
_FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")
_EXITS = re.compile(r"\bexits (?P<status>\d+)\b")
# The options that name a model to run: the suite runs simulated ones only.
_ANSWERING = frozenset({"--model", "--judge", "--judge2"})
_OPERATORS = frozenset({"|", "||", "&", "&&", ";", ";;", "<", ">", ">>", "(", ")", "<<", ">&", "<&"})


@dataclass(frozen=True)
class Block:
    """A fenced block: its opening fence's line (1-based), language, lines and, where the line above
    the fence marks it, why it is not run."""

    line: int
    language: str
    lines: tuple[str, ...]
    not_run: str | None

    @property
    def shell(self) -> bool:
        return self.language in SHELLS


@dataclass(frozen=True)
class Command:
    """One command of a run block as it is run (its comment stripped), and the status it must exit with."""

    line: int
    text: str
    exits: int


def split(text: str) -> tuple[list[Block], str]:
    """The page's fenced blocks, and its prose: the text with each block's lines blanked, so that
    line numbers still count."""
    lines = text.splitlines()
    blocks, prose = [], list(lines)
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        end = index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        above = _NOT_RUN.match(lines[index - 1]) if index else None
        body = tuple(
            line[indent:] if line[:indent].isspace() else line.lstrip() for line in lines[index + 1 : end]
        )
        blocks.append(
            Block(index + 1, opening["language"].lower(), body, above["reason"].strip() if above else None)
        )
        for blank in range(index, min(end + 1, len(lines))):
            prose[blank] = ""
        index = end + 1
    return blocks, "\n".join(prose)


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence) and set(stripped) == {fence[0]}


def code_spans(text: str) -> Iterator[tuple[int, str]]:
    """Each inline code span outside the fenced blocks, with its line."""
    _, prose = split(text)
    for span in _CODE_SPAN.finditer(prose):
        yield prose.count("\n", 0, span.start()) + 1, span[2].strip()


def _uncoded(prose: str) -> str:
    """Prose with each inline code span blanked, newlines kept: links and tables read from the rest."""
    return _CODE_SPAN.sub(lambda span: re.sub(r"[^\n]", " ", span[0]), prose)


def commands(block: Block) -> list[Command]:
    """A block's commands: ``\\``-continued lines joined, comment lines and trailing comments gone."""
    found: list[Command] = []
    pending, start = "", 0
    for number, line in enumerate(block.lines, block.line + 1):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command, comment = _uncomment(pending + line)
        pending = ""
        if command:
            exits = _EXITS.search(comment)
            found.append(Command(start, command, int(exits["status"]) if exits else 0))
    return found


def _uncomment(line: str) -> tuple[str, str]:
    """A shell line and its comment: the first ``#`` that starts a word outside quotes."""
    for at, char in enumerate(line):
        if char == "#" and (at == 0 or line[at - 1].isspace()):
            try:
                shlex.split(line[:at])
            except ValueError:  # inside quotes: not a comment
                continue
            return line[:at].strip(), line[at + 1 :]
    return line.strip(), ""


def block_problems(name: str, text: str) -> list[str]:
    """Each shell block neither marked nor made of fathom commands alone, each not-run mark without a
    reason or without a block below it, and each command hidden in a block with no language."""
    blocks, _ = split(text)
    problems = []
    marked = {block.line - 1 for block in blocks if block.not_run is not None}
    for number, line in enumerate(text.splitlines(), 1):
        if _NOT_RUN.match(line) and number not in marked:
            problems.append(f"{name}:{number}: a not-run mark must be the line right above a block's fence")
    for block in blocks:
        where = f"{name}:{block.line}"
        if block.not_run is not None and not block.shell:
            problems.append(f"{where}: a not-run mark above a block that is not a shell block")
        if block.not_run == "":
            problems.append(f"{where}: <!-- not run: --> says no reason")
        if block.shell and block.not_run is None:
            problems += [f"{where}: {problem}" for problem in map(_run_problem, commands(block)) if problem]
        first = next((line.split()[0] for line in block.lines if line.strip()), "")
        if not block.language and first in COMMAND_WORDS:
            problems.append(f"{where}: a command in a block with no language: open it with ```bash")
    return problems


def _run_problem(command: Command) -> str:
    """Why a command cannot be run as a fathom command, or ''."""
    try:
        lexer = shlex.shlex(command.text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError as error:
        return f"`{command.text}`: {error}"
    if words[0] != "fathom":
        return f"`{command.text}` is not a fathom command: mark the block <!-- not run: REASON -->"
    if operators := [word for word in words if word in _OPERATORS]:
        return f"`{command.text}` is not one fathom command ({' '.join(operators)}): mark the block not run"
    spelt = [part for word in words for part in (word.split("=", 1) if word.startswith("--") else [word])]
    models = [value for flag, value in itertools.pairwise(spelt) if flag in _ANSWERING]
    if words[1:2] in (["run"], ["judge"]) and not all(model.startswith("sim") for model in models):
        return f"`{command.text}` runs a real model (minutes): mark the block not run"
    return ""


def run_page(name: str, text: str, cwd: Path, bin_dir: Path) -> list[str]:
    """Run the page's run blocks in order in ``cwd``, with ``fathom`` from ``bin_dir`` and no desktop:
    each command that exits otherwise than it says, or prints a traceback. A page that fails the block
    check runs nothing (an unmarked ``pip install`` is never run)."""
    if problems := block_problems(name, text):
        return problems
    env = {key: value for key, value in os.environ.items() if key not in DESKTOP}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    blocks, _ = split(text)
    for block in blocks:
        if not block.shell or block.not_run is not None:
            continue
        for command in commands(block):
            done = subprocess.run(
                ["bash", "-c", command.text], cwd=cwd, env=env, capture_output=True, text=True
            )
            if done.returncode != command.exits or "Traceback" in done.stderr:
                problems.append(
                    f"{name}:{command.line}: `{command.text}` exited {done.returncode}, not {command.exits} "
                    f"(say `# exits N` where that is meant), stderr:\n{done.stderr[-2000:]}"
                )
    return problems


def parsers(
    root: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each command's name as typed (``fathom suites make-demo``) and its parser, ``fathom`` first."""
    yield " ".join(("fathom", *words)), root
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, sub in action.choices.items():
                yield from parsers(sub, (*words, word))


def unsectioned(root: argparse.ArgumentParser, page: str) -> list[str]:
    """Each command under ``root`` without its ``## fathom ...`` section in ``page``."""
    headings = set(re.findall(r"^## (.+)$", page, flags=re.M))
    return [name for name, _ in parsers(root) if name != "fathom" and name not in headings]


def unnamed(root: argparse.ArgumentParser, text: str) -> list[str]:
    """Each command under ``root`` that ``text`` never names (``fathom export-check`` does not name
    ``fathom export``)."""
    return [
        name
        for name, _ in parsers(root)
        if name != "fathom" and not re.search(rf"{re.escape(name)}(?![\w-])", text)
    ]


def flags(text: str) -> Iterator[tuple[int, str]]:
    """Each ``--flag`` a page writes where a reader would type it to fathom: in inline code and in
    the lines of shell and plain blocks, where the code or line starts with ``fathom`` or a flag (so
    ``pip install --no-deps`` and ``pytest --lf`` are not fathom's)."""
    blocks, _ = split(text)
    lines = list(code_spans(text))
    for block in blocks:
        if block.language not in NOT_CLI:
            lines += [(number, line) for number, line in enumerate(block.lines, block.line + 1)]
    for number, line in lines:
        first = (line.split() or [""])[0]
        if first in ("fathom", "fathom:") or first.startswith("--"):
            yield from ((number, flag) for flag in _FLAG.findall(line))


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and the site (mkdocs.yml's pymdownx slugs) make it: markup gone,
    lower case, punctuation dropped, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text.replace("`", "")).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page has: its headings' slugs (a repeated one also with GitHub's and the site's
    suffixes), and the ids it sets itself."""
    _, prose = split(text)
    found: set[str] = set()
    seen: Counter[str] = Counter()
    for line in prose.splitlines():
        if heading := _HEADING.match(line):
            base = slug(re.sub(r"\{[^}]*\}\s*$", "", heading["text"]))
            found |= {f"{base}-{seen[base]}", f"{base}_{seen[base]}"} if seen[base] else {base}
            seen[base] += 1
        found |= {match["id"] or match["html"] for match in _ID.finditer(line)}
    return found


def links(text: str, html: bool = False) -> Iterator[tuple[int, str]]:
    """Each link target of a page's prose (markdown links, images, references and HTML attributes),
    with its line; of an HTML file with ``html``."""
    prose = text if html else _uncoded(split(text)[1])
    patterns = (_HTML_LINK,) if html else (_LINK, _REFERENCE, _HTML_LINK)
    for pattern in patterns:
        for match in pattern.finditer(prose):
            yield prose.count("\n", 0, match.start()) + 1, match["target"]


def link_problems(page: Path, text: str, pages: Mapping[Path, str], html: bool = False) -> list[str]:
    """Each relative link of ``page`` that names no file, a heading its target page lacks, or, from
    a page of the site, a file outside docs/ (which the site cannot serve). ``pages`` holds the text
    of every page by its path, the generated ones too."""
    name = page.relative_to(ROOT)
    problems = []
    for number, target in links(text, html):
        if _SCHEME.match(target):  # the web, mail, data: not this repository's to check
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / unquote(path)).resolve() if path else page
        where = f"{name}:{number}: {target}"
        if path and not resolved.exists() and not (resolved in pages and page.is_relative_to(DOCS)):
            made = " (the site makes it at build time; GitHub has no such file)" if resolved in pages else ""
            problems.append(f"{where}: no such file{made}")
        elif page.is_relative_to(DOCS) and not resolved.is_relative_to(DOCS):
            problems.append(
                f"{where}: outside docs/, so the site cannot serve it; link a page of docs/ instead"
            )
        elif (
            anchor and resolved.suffix == ".md" and anchor not in anchors(_text(resolved, page, text, pages))
        ):
            problems.append(f"{where}: {resolved.relative_to(ROOT)} has no heading with that anchor")
    return problems


def _text(target: Path, page: Path, text: str, pages: Mapping[Path, str]) -> str:
    """A link target's text: the linking page's own, a known page's, or the file's."""
    if target == page:
        return text
    return pages.get(target) or target.read_text(encoding="utf-8")


def tables(text: str) -> Iterator[list[tuple[int, list[str]]]]:
    """Each table of the page's prose: its body rows (after the header and its rule), each with its
    line and its cells' text."""
    prose = _uncoded(split(text)[1])
    rows: list[tuple[int, str]] = []
    for number, line in enumerate([*prose.splitlines(), ""], 1):
        if line.lstrip().startswith("|"):
            rows.append((number, line))
            continue
        if len(rows) > 2 and set(rows[1][1].replace(" ", "")) <= set("|:-"):
            yield [(at, [cell.strip() for cell in row.strip().strip("|").split("|")]) for at, row in rows[2:]]
        rows = []


def capability_problems(text: str, pages: Mapping[Path, str]) -> list[str]:
    """The README's capability table (any table whose rows link into docs/): each row must link to a
    page of docs/ that exists."""
    problems = []
    for table in tables(text):
        if not any("(docs/" in cell for _, row in table for cell in row):
            continue
        for number, row in table:
            found = [target.partition("#")[0] for _, target in links(" | ".join(row))]
            linked = [target for target in found if target.startswith("docs/") and target.endswith(".md")]
            if not linked:
                problems.append(f"README.md:{number}: a capability row with no docs/ page: {' | '.join(row)}")
            problems += [
                f"README.md:{number}: {target} does not exist"
                for target in linked
                if (ROOT / target).resolve() not in pages
            ]
    return problems
