"""Needles in their haystack's own form (``--needle-style native``, the default).

A prose sentence inside Python source is found by spotting the one line that is not code: that
measures outlier detection, not retrieval. A native needle is written as its haystack writes:

- code (Python): style ``code``, ``SPECIAL_MAGIC_NUMBER_MELLOW_BLANKET = 7234567``, a line at its
  neighbours' indentation;
- technical (reStructuredText): style ``markup``, ``:Special magic number for mellow-blanket:
  7234567``, a field list of its own (blank lines around it), at its neighbours' indentation;
- legal (licence texts): style ``legal``, "For the purposes of this License, the special magic number
  for mellow-blanket is 7234567.", asked as prose asks;
- german (quotations): style ``german``, "Eine der besonderen magischen Zahlen für mellow-blanket
  lautet: 7234567.", asked in German;
- any other corpus (prose, essays, noise, repeat, ``dir:``, ``mix:``): style ``prose``, "One of the
  special magic numbers for mellow-blanket is: 7234567."

Only the keyed needles (number, words, uuid) and their look-alikes take a style; every other kind
keeps its prose. Key and value are drawn as for prose, so every domain of a cell hides the same
facts and its question names the same key (a code question names the key as written, mellow-blanket,
and the needle names it as a constant, MELLOW_BLANKET: the question still does not quote the line).

A folder (``dir:``) is of no known domain, and a mixture's needle stays prose: a needle's wording
that changed with the component under its depth would confound depth with style.

Indentation (``Indented``): a code or markup needle is a line of its own at a line boundary, indented
as the next non-blank line after it, or as the line before it where the next one continues a
statement (``else``, ``elif``, ``except``, ``finally``, a closing bracket) or the haystack ends. The
boundary is the one the depth snaps to: one inside a docstring or a bracketed expression is not
avoided (telling would cost a parse of every window), so the line is valid code wherever the line
before it ends a statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fathom.prompts.needles import KEYED_NEEDLES, KeyedNeedle

PROSE_STYLE = "prose"


@dataclass(frozen=True)
class Style:
    """How one domain writes the keyed needles: each kind's template and question, the question
    for several at once, the wording look-alikes share, and how its lines are laid out."""

    name: str
    keyed: dict[str, KeyedNeedle]
    plural: dict[str, str]  # the question for several keyed needles, {keys} joined with ``conjunction``
    patterns: dict[str, str]  # the wording a kind's gold and its look-alikes share
    conjunction: str = "and"
    indented: bool = False  # a line at its neighbours' indentation (code and markup)
    apart: bool = False  # set apart by blank lines (a reStructuredText field list is its own paragraph)


PROSE = Style(
    PROSE_STYLE,
    KEYED_NEEDLES,
    {
        "number": "Which numbers were given as the special magic numbers for {keys}?",
        "words": "What two-word passphrases were chosen for {keys}?",
        "uuid": "Which UUIDs are recorded as the special magic identifiers for {keys}?",
        "fact": "In which towns did {keys} each finally make a home?",
    },
    {"number": "special magic", "words": "passphrase chosen for", "uuid": "special magic"},
)


def _styled(texts: dict[str, tuple[str, str]]) -> dict[str, KeyedNeedle]:
    """Each keyed kind with its own text and question, and the class of value prose gives it."""
    return {
        kind: KeyedNeedle(text, question, KEYED_NEEDLES[kind].value)
        for kind, (text, question) in texts.items()
    }


CODE = Style(
    "code",
    _styled(
        {
            "number": (
                "SPECIAL_MAGIC_NUMBER_{name} = {value}",
                "Which number does the code assign as the special magic number for {key}?",
            ),
            "words": (
                'SECRET_PASSPHRASE_{name} = "{value}"',
                "Which two words does the code assign as the secret passphrase for {key}?",
            ),
            "uuid": (
                'SPECIAL_MAGIC_IDENTIFIER_{name} = "{value}"',
                "Which UUID does the code assign as the special magic identifier for {key}?",
            ),
        }
    ),
    {
        "number": "Which numbers does the code assign as the special magic numbers for {keys}?",
        "words": "Which two-word passphrases does the code assign as the secret passphrases for {keys}?",
        "uuid": "Which UUIDs does the code assign as the special magic identifiers for {keys}?",
    },
    {"number": "SPECIAL_MAGIC_", "words": "SECRET_PASSPHRASE_", "uuid": "SPECIAL_MAGIC_"},
    indented=True,
)
MARKUP = Style(
    "markup",
    _styled(
        {
            "number": (
                ":Special magic number for {key}: {value}",
                "Which number does the documentation give in the special magic number field for {key}?",
            ),
            "words": (
                ":Secret passphrase for {key}: {value}",
                "Which two words does the documentation give in the secret passphrase field for {key}?",
            ),
            "uuid": (
                ":Special magic identifier for {key}: {value}",
                "Which UUID does the documentation give in the special magic identifier field for {key}?",
            ),
        }
    ),
    {
        "number": "Which numbers does the documentation give in the special magic number fields for {keys}?",
        "words": "Which two-word passphrases does the documentation give in the fields for {keys}?",
        "uuid": "Which UUIDs does the documentation give in the special magic identifier fields for {keys}?",
    },
    {"number": ":Special magic", "words": ":Secret passphrase for", "uuid": ":Special magic"},
    indented=True,
    apart=True,
)
# Licence texts define their terms in sentences like this one; the questions are prose's.
LEGAL = Style(
    "legal",
    _styled(
        {
            kind: (f" For the purposes of this License, the {what} for {{key}} is {{value}}.", keyed.question)
            for (kind, keyed), what in zip(
                KEYED_NEEDLES.items(),
                ("special magic number", "secret passphrase chosen", "special magic identifier"),
                strict=True,
            )
        }
    ),
    PROSE.plural,
    PROSE.patterns,
)
GERMAN = Style(
    "german",
    _styled(
        {
            "number": (
                " Eine der besonderen magischen Zahlen für {key} lautet: {value}.",
                "Welche Zahl wurde als besondere magische Zahl für {key} genannt?",
            ),
            "words": (
                " Das geheime Kennwort, das für {key} gewählt wurde, lautet {value}.",
                "Aus welchen zwei Wörtern besteht das Kennwort für {key}?",
            ),
            "uuid": (
                " Eine der besonderen magischen Kennungen für {key} lautet: {value}.",
                "Welche UUID ist als besondere magische Kennung für {key} verzeichnet?",
            ),
        }
    ),
    {
        "number": "Welche Zahlen wurden als besondere magische Zahlen für {keys} genannt?",
        "words": "Aus welchen zwei Wörtern bestehen die Kennwörter für {keys}?",
        "uuid": "Welche UUIDs sind als besondere magische Kennungen für {keys} verzeichnet?",
    },
    {"number": "besonderen magischen", "words": "Kennwort, das für", "uuid": "besonderen magischen"},
    conjunction="und",
)
# The named corpora that have a native style; every other corpus reads prose needles.
NATIVE = {"code": CODE, "technical": MARKUP, "legal": LEGAL, "german": GERMAN}
STYLES = {style.name: style for style in (PROSE, *NATIVE.values())}


def style_for(requested: str, corpus: str) -> Style:
    """The style of the needles hidden in ``corpus`` under ``--needle-style requested``."""
    return PROSE if requested == PROSE_STYLE else NATIVE.get(corpus, PROSE)


# A line that continues the statement before it: a needle before it takes the indentation above.
_CONTINUES = re.compile(r"(?:else|elif|except|finally)\b|[)\]}]")


def indentation(before: str, after: str) -> str:
    """The indentation of a line inserted between ``before`` (text ending at a line boundary) and
    ``after``: the next non-blank line's, or the line's above it where the next continues a
    statement or there is none. The first line of ``before`` may be cut short, so it is not read."""
    following = next((line for line in after.split("\n") if line.strip()), None)
    previous = next((line for line in reversed(before.split("\n")[1:]) if line.strip()), None)
    if following is not None and (previous is None or not _CONTINUES.match(following.lstrip())):
        return _indent(following)
    return _indent(previous or "")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


@dataclass(frozen=True)
class Indented:
    """A needle line whose indentation is its neighbours' (``builder.Fitted``): ``text`` without
    indentation or newline, set apart by blank lines where ``apart``, after a line break of its own
    where the haystack before it ends inside a line (it is cut there at its end)."""

    text: str
    apart: bool = False

    def fit(self, before: str, after: str) -> str:
        line = f"{indentation(before, after)}{self.text}\n"
        if self.apart:
            line = f"\n{line}\n"
        # At the haystack's end, cut inside a line, the needle still starts a line of its own.
        return line if not before or before.endswith("\n") else "\n" + line
