"""A corpus cache entry proves itself: what made it (format, corpus, tokenizer) and a hash of its
content are checked when it is read, and so is its shape. A well-formed but wrong entry, a malformed
one or a damaged file is a warning and a rebuild, never a traceback and never other prompts."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fathom.prompts.haystack import entry, index, load_corpus
from fathom.prompts.haystack.corpora import Corpus
from fathom.prompts.haystack.index import tokenize_corpus
from fathom.prompts.tokenizers import CharTokenizer, load_tokenizer, vocabulary_size
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.niah import NiahTask

CHAR = load_tokenizer("char")
CORPUS = Corpus("entry-test", " ".join(f"Sentence number {i} is here." for i in range(300)), "tests")

Arrays = dict[str, Any]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FATHOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(index, "_MEMORY", {})
    monkeypatch.setattr(index, "_UNWRITABLE", set())
    return tmp_path / "cache" / "corpora"


def forget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "_MEMORY", {})


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == index.__name__ and r.levelno >= logging.WARNING
    ]


def stored(path: Path) -> Arrays:
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def signed(arrays: Arrays) -> Arrays:
    """``arrays`` with a record of what made them whose content hash is theirs: only the damage
    itself can give such an entry away."""
    made = json.loads(str(arrays["made"][()]))
    ids, boundaries = arrays["ids"], arrays["boundaries"]
    made["content_sha256"] = entry.content_sha256(ids, boundaries)
    return arrays | {"made": np.array(json.dumps(made))}


def _shuffled(a: Arrays) -> Arrays:
    """Well-formed, every id the corpus has, the record it was written with: only the hash tells."""
    return a | {"ids": np.random.default_rng(0).permutation(a["ids"])}


def _empty(a: Arrays) -> Arrays:
    return signed(a | {"ids": np.zeros(0, np.int32)})


def _float(a: Arrays) -> Arrays:
    return signed(a | {"ids": a["ids"].astype(np.float64)})


def _two_dimensional(a: Arrays) -> Arrays:
    return signed(a | {"ids": a["ids"][: len(a["ids"]) // 2 * 2].reshape(2, -1)})


def _out_of_vocabulary(a: Arrays) -> Arrays:
    ids = a["ids"].copy()
    ids[7] = vocabulary_size(CHAR)
    return signed(a | {"ids": ids})


def _negative(a: Arrays) -> Arrays:
    ids = a["ids"].copy()
    ids[7] = -1
    return signed(a | {"ids": ids})


def _unsorted_boundaries(a: Arrays) -> Arrays:
    return signed(a | {"boundaries": a["boundaries"][::-1].copy()})


def _other_tokenizer(a: Arrays) -> Arrays:
    made = json.loads(str(a["made"][()])) | {"tokenizer": "0" * 64}
    return a | {"made": np.array(json.dumps(made))}


def _older_format(a: Arrays) -> Arrays:
    """What fathom wrote before entries proved themselves: no record at all."""
    return {"ids": a["ids"], "boundaries": a["boundaries"]}


def _object_record(a: Arrays) -> Arrays:
    return a | {"made": np.array(["not", "a", "record"])}


BAD_ARRAYS: dict[Callable[[Arrays], Arrays], str] = {
    _shuffled: "does not match the hash of its content",
    _empty: "holds no ids",
    _float: "holds ids of dtype float64, not int32",
    _two_dimensional: "holds ids of 2 dimensions, not 1",
    _out_of_vocabulary: "holds ids from 32 to 1114112, outside the vocabulary's 0 to 1114111",
    _negative: "holds ids from -1 to",
    _unsorted_boundaries: "holds boundaries that are not increasing token positions from 0",
    _other_tokenizer: "was made from another corpus, tokenizer or fathom format",
    _older_format: "does not hold the arrays ids, boundaries, made",
    _object_record: "has no record of what made it",
}


def _truncated(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _not_an_npz(path: Path) -> None:
    path.write_bytes(b"ids 1 2 3\n")


def _npy(path: Path) -> None:
    ids = stored(path)["ids"]
    with path.open("wb") as handle:
        np.save(handle, ids)


BAD_FILES: dict[Callable[[Path], None], str] = {
    _truncated: "cannot be read as an npz archive (BadZipFile)",
    _not_an_npz: "cannot be read as an npz archive (ValueError)",
    _npy: "cannot be read as an npz archive (TypeError)",
}


def plant_arrays(damage: Callable[[Arrays], Arrays]) -> Callable[[Path], None]:
    def plant(path: Path) -> None:
        arrays = damage(stored(path))
        with path.open("wb") as handle:
            np.savez(handle, **arrays)

    return plant


PLANTS = [pytest.param(plant_arrays(d), why, id=d.__name__) for d, why in BAD_ARRAYS.items()] + [
    pytest.param(d, why, id=d.__name__) for d, why in BAD_FILES.items()
]


@pytest.mark.parametrize(("plant", "reason"), PLANTS)
def test_a_bad_entry_is_a_warning_and_a_rebuild(
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    plant: Callable[[Path], None],
    reason: str,
) -> None:
    clean = tokenize_corpus(CORPUS, CHAR)
    [path] = cache.glob("*.npz")
    plant(path)
    forget(monkeypatch)
    rebuilt = tokenize_corpus(CORPUS, CHAR)
    assert np.array_equal(rebuilt.ids, clean.ids) and np.array_equal(rebuilt.boundaries, clean.boundaries)
    [warning] = warnings(caplog)
    assert warning.startswith(f"the corpus cache entry {path} {reason}"), warning
    assert warning.endswith(": it is tokenised again and the entry written over")
    # Written over with a good entry: the next process reads it, with no warning and no build.
    caplog.clear()
    forget(monkeypatch)
    monkeypatch.setattr(index, "_build", lambda *_: pytest.fail("the rewritten entry should have been read"))
    assert np.array_equal(tokenize_corpus(CORPUS, CHAR).ids, clean.ids)
    assert warnings(caplog) == []


def test_an_entry_larger_than_its_corpus_could_make_is_refused_unread(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tokenize_corpus(CORPUS, CHAR)
    [path] = cache.glob("*.npz")
    arrays = stored(path)
    plant_arrays(lambda a: signed(a | {"ids": np.tile(a["ids"], 8)}))(path)
    forget(monkeypatch)
    monkeypatch.setattr(entry, "_array", lambda *_: pytest.fail("the oversized member was read"))
    monkeypatch.setattr(index, "_save", lambda *_: None)
    assert np.array_equal(tokenize_corpus(CORPUS, CHAR).ids, arrays["ids"])
    [warning] = warnings(caplog)
    assert "bytes of ids, more than its corpus could make" in warning


def test_a_good_entry_is_read_without_a_warning_or_a_build(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    built = tokenize_corpus(CORPUS, CHAR)
    forget(monkeypatch)
    monkeypatch.setattr(index, "_build", lambda *_: pytest.fail("a good entry should have been read"))
    read = tokenize_corpus(CORPUS, CHAR)
    assert np.array_equal(read.ids, built.ids) and warnings(caplog) == []


def test_another_corpus_under_the_same_name_is_rebuilt(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry of another corpus copied to this corpus's file name: its record names the other."""
    other = dataclasses.replace(CORPUS, text=CORPUS.text.replace("here", "there"))
    tokenize_corpus(other, CHAR)
    [other_path] = cache.glob("*.npz")
    forget(monkeypatch)
    clean = tokenize_corpus(CORPUS, CHAR)
    [path] = [p for p in cache.glob("*.npz") if p != other_path]
    other_path.replace(path)
    forget(monkeypatch)
    assert np.array_equal(tokenize_corpus(CORPUS, CHAR).ids, clean.ids)
    [warning] = warnings(caplog)
    assert "was made from another corpus, tokenizer or fathom format" in warning


def prompts(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """Every prompt of a small run on the bundled prose corpus, read through the cache afresh."""
    forget(monkeypatch)
    task = NiahTask(RunSpec("niah", "sim:perfect", "char", (2048,), (0.0, 0.5, 1.0), 2), CHAR)
    samples = [task.prepare(Cell("niah", 2048, depth, i)) for depth in (0.0, 0.5, 1.0) for i in range(2)]
    assert all(isinstance(s, Sample) for s in samples)
    return [list(s.prompt.ids) for s in samples if isinstance(s, Sample)]


@pytest.mark.parametrize(
    "damage", [_shuffled, _out_of_vocabulary, _two_dimensional], ids=lambda d: d.__name__
)
def test_a_run_over_a_bad_entry_has_the_prompts_of_a_clean_cache(
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    damage: Callable[[Arrays], Arrays],
) -> None:
    clean = prompts(monkeypatch)
    # The tokenised corpus's entry (v2-...), not the word index beside it (words-v1-...).
    [path] = [p for p in cache.glob("v*.npz") if load_corpus("prose").sha256[:16] in p.name]
    plant_arrays(damage)(path)
    assert prompts(monkeypatch) == clean
    [warning] = warnings(caplog)
    assert warning.startswith(f"the corpus cache entry {path} ")


def test_each_tokenizer_says_how_many_ids_it_has(tmp_path: Path) -> None:
    """The bound the ids are checked against: the highest id is one below it, for each kind."""
    from test_tokenizers import _train_hf

    _train_hf(tmp_path / "tokenizer.json")
    for name in ("char", "cl100k_base", "o200k_base", f"hf:{tmp_path / 'tokenizer.json'}"):
        tokenizer = load_tokenizer(name)
        size = vocabulary_size(tokenizer)
        assert size is not None and size > 255, name
        tokenizer.decode([size - 1])  # the highest id is one of its own
    with pytest.raises(KeyError):
        load_tokenizer("cl100k_base").decode([vocabulary_size(load_tokenizer("cl100k_base")) or 0])


def test_a_tokenizer_that_does_not_say_is_checked_for_negative_ids_only(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class Quiet(CharTokenizer):
        """The char tokenizer without a vocab_size, as a plugin's may be."""

        def __getattribute__(self, name: str) -> Any:
            if name == "vocab_size":
                raise AttributeError(name)
            return super().__getattribute__(name)

    quiet = Quiet()
    assert vocabulary_size(quiet) is None
    clean = tokenize_corpus(CORPUS, quiet)
    [path] = cache.glob("*.npz")
    plant_arrays(_negative)(path)
    forget(monkeypatch)
    assert np.array_equal(tokenize_corpus(CORPUS, quiet).ids, clean.ids)
    [warning] = warnings(caplog)
    assert "holds ids from -1 to" in warning and "outside the vocabulary's 0 up" in warning
