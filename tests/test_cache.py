"""The tokenised-corpus cache only saves time: a damaged entry is rebuilt and an unwritable cache
is skipped with one warning, never a traceback."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fathom.prompts.haystack import index
from fathom.prompts.haystack.corpora import Corpus
from fathom.prompts.haystack.index import TokenizedCorpus, tokenize_corpus
from fathom.prompts.tokenizers import load_tokenizer

TOKENIZER = load_tokenizer("char")
CORPUS = Corpus("cache-test", " ".join(f"Sentence number {i} is here." for i in range(200)), "tests")
OTHER = Corpus("cache-test-2", "Another corpus. It is short.", "tests")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder, with nothing in memory and no folder warned about yet."""
    monkeypatch.setenv("FATHOM_CACHE_DIR", str(tmp_path / "cache"))
    forget(monkeypatch)
    monkeypatch.setattr(index, "_UNWRITABLE", set())
    return tmp_path / "cache" / "corpora"


def forget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop what this process remembers, so that the next call reads the disk."""
    monkeypatch.setattr(index, "_MEMORY", {})


def same(a: TokenizedCorpus, b: TokenizedCorpus) -> bool:
    return np.array_equal(a.ids, b.ids) and np.array_equal(a.boundaries, b.boundaries)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == index.__name__ and r.levelno == logging.WARNING
    ]


def _truncate(path: Path) -> None:
    os.truncate(path, 1000)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def _npy(path: Path) -> None:
    """A valid .npy array where an .npz archive belongs: np.load returns an array, not an archive."""
    with path.open("wb") as handle:
        np.save(handle, np.arange(10))


def _missing_member(path: Path) -> None:
    with path.open("wb") as handle:
        np.savez(handle, ids=np.arange(10, dtype=np.int32))


@pytest.mark.parametrize("damage", [_truncate, _empty, _garbage, _npy, _missing_member])
def test_a_damaged_entry_is_rebuilt_and_written_over(
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    damage: Callable[[Path], None],
) -> None:
    built = tokenize_corpus(CORPUS, TOKENIZER)
    [path] = cache.glob("*.npz")
    assert path.stat().st_size > 1000  # so that truncating it damages it
    damage(path)
    forget(monkeypatch)
    assert same(tokenize_corpus(CORPUS, TOKENIZER), built)
    [warning] = warnings(caplog)  # the damage said, once (test_cache_entries.py: each reason)
    assert warning.startswith(f"the corpus cache entry {path} ") and "tokenised again" in warning
    # Written over: the next process reads it rather than building it again.
    forget(monkeypatch)
    monkeypatch.setattr(index, "_build", lambda *_: pytest.fail("the rewritten entry should have been read"))
    assert same(tokenize_corpus(CORPUS, TOKENIZER), built)
    assert list(cache.iterdir()) == [path]  # no temporary file left behind


def test_a_folder_where_the_entry_belongs_is_rebuilt_around_with_one_warning(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    built = tokenize_corpus(CORPUS, TOKENIZER)
    [path] = cache.glob("*.npz")
    path.unlink()
    path.mkdir()
    forget(monkeypatch)
    assert same(tokenize_corpus(CORPUS, TOKENIZER), built)
    [warning] = warnings(caplog)
    assert f"cannot write the corpus cache {path} (" in warning and "FATHOM_CACHE_DIR" in warning
    assert path.is_dir() and list(cache.iterdir()) == [path]


def test_a_cache_folder_that_cannot_be_made_is_skipped_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache path under a regular file: mkdir fails there even for root, whom a read-only
    folder does not stop."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FATHOM_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(index, "_MEMORY", {})
    monkeypatch.setattr(index, "_UNWRITABLE", set())
    built = tokenize_corpus(CORPUS, TOKENIZER)
    assert same(built, index._build(CORPUS, TOKENIZER))
    tokenize_corpus(OTHER, TOKENIZER)  # a second corpus, the same folder: no second warning
    [warning] = warnings(caplog)
    assert warning.startswith(f"cannot write the corpus cache {blocker / 'cache' / 'corpora'}/")
    assert "(Not a directory)" in warning
    assert warning.endswith("set FATHOM_CACHE_DIR to a writable folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_cache_folder_is_skipped_with_one_warning(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache.mkdir(parents=True)
    cache.chmod(0o500)
    try:
        built = tokenize_corpus(CORPUS, TOKENIZER)
    finally:
        cache.chmod(0o700)
    assert same(built, index._build(CORPUS, TOKENIZER))
    [warning] = warnings(caplog)
    assert "(Permission denied)" in warning
    assert list(cache.iterdir()) == []


def test_a_failed_write_leaves_no_temporary_file(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def full_disk(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    built = tokenize_corpus(CORPUS, TOKENIZER)
    assert same(built, index._build(CORPUS, TOKENIZER))
    [warning] = warnings(caplog)
    assert "(No space left on device)" in warning
    assert list(cache.iterdir()) == []
