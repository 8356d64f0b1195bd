"""Text files into one corpus text: prose normalised to sentences, code and markup kept line for line.

Prose is normalised, whitespace collapsed to single spaces (RULER does the same for its essays):
every sentence boundary then looks alike (". Next"), which is what lets prompts be spliced at
sentence boundaries with stable tokenisation. Code keeps its newlines and indentation, so its
unit is the line: a unit starts wherever a newline ends the token before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from fathom.errors import CorpusError
from fathom.safe_files import read_bounded

Units = Literal["sentence", "line"]

TEXT_SUFFIXES = frozenset({".txt", ".md"})
FILE_MOST = 256 << 20  # bytes read of one corpus file, at most: 1M tokens of text are a few MB
# What `dir:PATH` reads besides prose, each file line for line: source code, configuration, markup.
CODE_SUFFIXES = frozenset(
    ".py .pyi .js .jsx .mjs .ts .tsx .c .h .cc .cpp .cxx .hpp .hh .rs .go .java .kt .scala .cs .swift "
    ".rb .php .pl .lua .r .jl .sh .bash .zsh .sql .toml .yaml .yml .json .ini .cfg .xml .html .htm .css "
    ".scss .rst .tex .cmake .proto".split()
)
_GLOB = re.compile(r"[*?\[]")


def normalise(text: str) -> str:
    """Runs of whitespace made one space, none at either end. str.split splits at exactly the
    characters that a regular expression's \\s matches (every code point checked), in half the time."""
    return " ".join(text.split())


def keep_lines(text: str) -> str:
    """A file's text with its line ends made ``\\n`` and one newline at its end ("" if blank)."""
    body = text.replace("\r\n", "\n").replace("\r", "\n").rstrip()
    return body + "\n" if body else ""


def join(texts: Sequence[str], units: Units) -> str:
    """Documents as one text: sentences joined by a space; files of lines by a blank line."""
    if units == "sentence":
        return " ".join(t for t in map(normalise, texts) if t)
    return "\n".join(t for t in map(keep_lines, texts) if t)


def units_of(files: Sequence[Path]) -> Units:
    """Sentences for a folder of prose (.txt, .md) alone; lines as soon as any other file is in
    it, prose included: a repository's README is read as the lines it is, beside its code."""
    return "sentence" if all(p.suffix in TEXT_SUFFIXES for p in files) else "line"


def split_glob(path: str) -> tuple[Path, str | None]:
    """``src/**/*.py`` as the folder ``src`` and the pattern ``**/*.py``: the pattern starts at the
    first part of the path that holds a glob character (* ? [)."""
    parts = Path(path).parts
    for i, part in enumerate(parts):
        if _GLOB.search(part):
            return Path(*parts[:i]) if i else Path("."), "/".join(parts[i:])
    return Path(path), None


def folder_files(folder: Path, pattern: str | None) -> list[Path]:
    """The folder's files, sorted: those the pattern matches, or by default every prose and code
    file below it."""
    if not folder.is_dir():
        raise CorpusError(f"corpus folder '{folder}' does not exist: name a folder of text or code files")
    if pattern is not None:
        return sorted(p for p in folder.glob(pattern) if p.is_file())
    readable = TEXT_SUFFIXES | CODE_SUFFIXES
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in readable)


def read_files(files: Sequence[Path], units: Units) -> str:
    texts = []
    for path in files:
        try:
            texts.append(read_bounded(path, FILE_MOST, "a corpus file", user_file=True).decode("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise CorpusError(f"cannot read corpus file '{path}' as UTF-8 text ({exc})") from None
    return join(texts, units)


def nothing_read(folder: Path, pattern: str | None) -> CorpusError:
    if pattern is not None:
        return CorpusError(
            f"corpus folder '{folder}': the glob '{pattern}' matches no non-empty file; "
            f"check it (dir:{folder}/**/*.py reads every .py file below the folder)"
        )
    return CorpusError(
        f"corpus folder '{folder}' holds no non-empty .txt or .md file, nor any code file "
        "(.py, .js, .c, .rs, .go, ...): name another folder, or its files with a glob (dir:PATH/**/*.ext)"
    )
