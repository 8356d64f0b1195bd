"""The documentation site (issue #33): every command block of every page is run as written, or marked
not run with its reason; each command fathom has is documented, and no page names a flag it lacks;
every link resolves; the API reference covers the public names; and ``mkdocs build --strict`` passes.
The checkers are tests/docs_pages.py; each is also fed a bad page here, so that each can fail."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from docs_pages import (
    DOCS,
    README,
    ROOT,
    block_problems,
    capability_problems,
    commands,
    flags,
    link_problems,
    parsers,
    run_page,
    slug,
    split,
    unnamed,
    unsectioned,
)
from repo_tools import load_tool

import fathom
from fathom.cli.arguments import parser

BIN = Path(sys.executable).parent
API = DOCS / "reference" / "api.md"


HOOK = load_tool("cli_reference")  # the MkDocs hook that writes the command-line reference
CLI = DOCS / HOOK.PAGE
WRITTEN = sorted([README, *DOCS.rglob("*.md")])
# Every page by its path, the CLI reference as the site's build writes it.
PAGES = {page.resolve(): page.read_text(encoding="utf-8") for page in WRITTEN} | {
    CLI.resolve(): HOOK.markdown()
}
IDS = [str(page.relative_to(ROOT)) for page in WRITTEN]


# Command blocks: run, or marked not run.


@pytest.mark.parametrize("page", WRITTEN, ids=IDS)
def test_every_shell_block_is_runnable_or_marked_not_run_with_a_reason(page: Path) -> None:
    assert block_problems(IDS[WRITTEN.index(page)], page.read_text(encoding="utf-8")) == []


@pytest.mark.slow
@pytest.mark.parametrize("page", WRITTEN, ids=IDS)
def test_every_run_block_runs_as_written(page: Path, tmp_path: Path) -> None:
    """In a fresh folder per page, as a reader who starts on that page; the corpora's cache is the
    session's (conftest's FATHOM_CACHE_DIR)."""
    assert (BIN / "fathom").is_file(), "the fathom command is not installed in this environment"
    assert run_page(IDS[WRITTEN.index(page)], page.read_text(encoding="utf-8"), tmp_path, BIN) == []


@pytest.mark.parametrize(
    "page", [README, DOCS / "getting-started.md"], ids=["README.md", "getting-started.md"]
)
def test_the_first_steps_are_run_not_only_read(page: Path) -> None:
    """A new user's first commands are run by the suite, not all marked not run: the simulated sweep,
    its report, a second sweep, their comparison (which exits 1) and the listing."""
    blocks, _ = split(page.read_text(encoding="utf-8"))
    run = [
        command for block in blocks if block.shell and block.not_run is None for command in commands(block)
    ]
    assert [(command.text.split()[1], command.exits) for command in run][:5] == [
        ("run", 0),
        ("report", 0),
        ("run", 0),
        ("compare", 1),
        ("runs", 0),
    ]


BAD_BLOCKS = """\
```bash
pip install '.[docs]'
```

<!-- not run: -->
```bash
fathom run niah --model 'llamacpp:smollm2'
```

<!-- not run: a real model -->

```bash
fathom models | head
fathom run niah --model sim:perfect --judge llamacpp:gemma3-270m
```

```
fathom models
```
"""


def test_the_block_check_finds_each_kind_of_bad_block() -> None:
    problems = block_problems("bad.md", BAD_BLOCKS)
    assert problems == [
        "bad.md:10: a not-run mark must be the line right above a block's fence",
        "bad.md:1: `pip install '.[docs]'` is not a fathom command: mark the block <!-- not run: REASON -->",
        "bad.md:6: <!-- not run: --> says no reason",
        "bad.md:12: `fathom models | head` is not one fathom command (|): mark the block not run",
        "bad.md:12: `fathom run niah --model sim:perfect --judge llamacpp:gemma3-270m` runs a real model "
        "(minutes): mark the block not run",
        "bad.md:17: a command in a block with no language: open it with ```bash",
    ]


def test_a_marked_block_a_commented_and_a_continued_command_pass_the_block_check() -> None:
    page = (
        "<!-- not run: needs a GPU -->\n```bash\npip install vllm\n```\n\n"
        "```bash\n# the demo\nfathom models  # 'quoted # kept' lists them\n"
        "fathom run niah \\\n  --model sim:perfect\n```\n"
    )
    assert block_problems("good.md", page) == []


@pytest.mark.slow
def test_running_a_page_catches_a_wrong_exit_status_and_a_traceback(tmp_path: Path) -> None:
    page = "```bash\nfathom no-such-command\nfathom no-such-command  # exits 2\nfathom models\n```\n"
    [wrong] = run_page("bad.md", page, tmp_path, BIN)
    assert wrong.startswith("bad.md:2: `fathom no-such-command` exited 2, not 0")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "fathom").write_text("#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n")
    (fake / "fathom").chmod(0o755)
    [traceback] = run_page("bad.md", "```bash\nfathom models\n```\n", tmp_path, fake)
    assert traceback.startswith("bad.md:2: `fathom models` exited 0, not 0") and "Traceback" in traceback


# Staleness: the pages against the command line.


def test_every_command_has_its_section_in_the_cli_reference() -> None:
    commands = [name for name, _ in parsers(parser())]
    assert len(commands) > 10 and "fathom suites make-demo" in commands
    assert unsectioned(parser(), PAGES[CLI.resolve()]) == []


def test_the_cli_reference_gives_each_option_its_help_and_default() -> None:
    page = PAGES[CLI.resolve()]
    section = page[
        page.index("## fathom report\n") : page.index("\n## ", page.index("## fathom report\n") + 1)
    ]
    assert "usage: fathom report [-h] [--threshold THRESHOLD]" in section
    assert "| `--threshold THRESHOLD` | `0.85` | niah's effective length:" in section
    assert "| `--open` |  | open report.html in a browser" in section  # a flag: its default is its absence


def test_every_command_is_named_on_a_page_of_the_site() -> None:
    reference = CLI.parent.resolve()
    site = "\n".join(
        text for page, text in PAGES.items() if page.is_relative_to(DOCS) and page.parent != reference
    )
    assert unnamed(parser(), site) == []


def test_the_command_checks_find_a_command_without_its_section_or_its_page() -> None:
    root = argparse.ArgumentParser(prog="fathom")
    commands = root.add_subparsers()
    commands.add_parser("export")
    commands.add_parser("export-check")
    commands.add_parser("suites").add_subparsers().add_parser("make-demo")
    page = "## fathom export-check\n\nRun `fathom suites make-demo` then `fathom suites`.\n"
    assert unsectioned(root, page) == ["fathom export", "fathom suites", "fathom suites make-demo"]
    assert unnamed(root, page) == ["fathom export"]


def test_no_page_names_a_flag_fathom_lacks() -> None:
    known = {
        option for _, command in parsers(parser()) for a in command._actions for option in a.option_strings
    }
    unknown = [
        f"{page.relative_to(ROOT)}:{line}: {flag}"
        for page in WRITTEN
        for line, flag in flags(page.read_text(encoding="utf-8"))
        if flag not in known
    ]
    assert unknown == []


def test_the_flag_check_reads_inline_code_and_command_lines_but_not_other_tools() -> None:
    page = (
        "Pass `--no-such-flag`, or `fathom run --lengths 1k`; `pip install --no-deps x` is pip's.\n\n"
        "```bash\nfathom run niah \\\n  --model sim:perfect --gone\n```\n\n"
        "```sql\n-- a comment --not-a-flag\n```\n"
    )
    assert list(flags(page)) == [
        (1, "--no-such-flag"),
        (1, "--lengths"),
        (5, "--model"),
        (5, "--gone"),
    ]


def test_every_capability_in_the_readme_has_its_page() -> None:
    assert capability_problems(PAGES[README.resolve()], PAGES) == []


def test_the_capability_check_finds_a_row_without_a_page() -> None:
    readme = (
        "| capability | page |\n|---|---|\n| NIAH | [niah](docs/niah.md) |\n| RULER | none yet |\n"
        "| gone | [gone](docs/no-such-page.md) |\n"
    )
    pages = {(ROOT / "docs" / "niah.md").resolve(): ""}
    assert capability_problems(readme, pages) == [
        "README.md:4: a capability row with no docs/ page: RULER | none yet",
        "README.md:5: docs/no-such-page.md does not exist",
    ]


# The API reference against fathom's public names.


def test_the_api_reference_documents_each_public_name() -> None:
    documented = re.findall(r"^::: fathom\.(\w+)$", API.read_text(encoding="utf-8"), flags=re.M)
    assert len(documented) == len(set(documented))
    assert sorted(set(fathom.__all__) - {"__version__"} - set(documented)) == []
    assert sorted(set(documented) - set(fathom.__all__) - {"registry"}) == []


# Links.


@pytest.mark.parametrize("page", WRITTEN, ids=IDS)
def test_every_link_resolves(page: Path) -> None:
    assert link_problems(page, page.read_text(encoding="utf-8"), PAGES) == []


@pytest.mark.parametrize("page", sorted((DOCS / "gallery").rglob("*.html")), ids=lambda p: p.name)
def test_every_link_of_the_gallery_resolves(page: Path) -> None:
    assert link_problems(page, page.read_text(encoding="utf-8"), PAGES, html=True) == []


def test_the_link_check_finds_a_missing_file_a_missing_anchor_and_a_link_out_of_the_site(
    tmp_path: Path,
) -> None:
    page = DOCS / "bad.md"  # never written: its text is given
    text = (
        "# Bad page\n\n[ok](#bad-page) [gone](no-such.md) [anchor](#no-such-heading)\n"
        "![figure](no-such.png) [out](../ARCHITECTURE.md) [web](https://example.org/x)\n"
        "`[in code](no-such.md)`\n"
    )
    assert link_problems(page, text, PAGES) == [
        "docs/bad.md:3: no-such.md: no such file",
        "docs/bad.md:3: #no-such-heading: docs/bad.md has no heading with that anchor",
        "docs/bad.md:4: no-such.png: no such file",
        "docs/bad.md:4: ../ARCHITECTURE.md: outside docs/, so the site cannot serve it; "
        "link a page of docs/ instead",
    ]


def test_the_readme_cannot_link_the_generated_cli_reference() -> None:
    [problem] = link_problems(README, "[the options](docs/reference/cli.md)\n", PAGES)
    assert problem.endswith("no such file (the site makes it at build time; GitHub has no such file)")


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("RULER's fill (`--fill ruler`)", "rulers-fill---fill-ruler"),
        ("Power before the run: `--detect`", "power-before-the-run---detect"),
        ("The [gate](gate.md), step by step", "the-gate-step-by-step"),
        ("fathom suites make-demo", "fathom-suites-make-demo"),
    ],
)
def test_anchors_are_githubs_and_the_sites(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


# The site's build.


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = BIN / "mkdocs"
    if not mkdocs.is_file():
        pytest.skip("needs the docs extra: pip install -e '.[docs]'")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", tmp_path / "site"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's banner about its successor
    )
    warnings = [line for line in done.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert warnings == []
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
