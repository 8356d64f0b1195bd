"""The word index that checks needles against a corpus (``prompts/haystack/words.py``) is built once
per corpus text and read back in later processes: what is read equals what was built, a second task
reads it rather than building it, and a bad or foreign entry is a warning and a rebuild."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from test_cache_entries import Arrays, _truncated, plant_arrays

from fathom.prompts import hygiene
from fathom.prompts.haystack import entry, index, words
from fathom.prompts.haystack.words import WordIndex, word_index
from fathom.prompts.hygiene import HaystackCheck
from fathom.prompts.latent import content_words
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.niah import NiahTask

TEXT = " ".join(
    f"The mill by the river {i} kept ledger number {i * 7}. Nobody asked why." for i in range(300)
)
NEEDLES = ["The mill by the river burned.", "Quoxdale keeps a ledger.", "number 21 kept ledger"]
PHRASES = ["mill", "the river 12", "river 12 kept", "ledger number 7", "Quoxdale", "asked why", "why the"]
MEMBERS = ("words", "pairs", "content", "offsets", "units", "sizes")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FATHOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(index, "_UNWRITABLE", set())
    return tmp_path / "cache" / "corpora"


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == index.__name__ and r.levelno >= logging.WARNING
    ]


def same(a: WordIndex, b: WordIndex) -> bool:
    return (a.words, a.content) == (b.words, b.content) and all(
        np.array_equal(getattr(a, name), getattr(b, name)) for name in ("pairs", "offsets", "units", "sizes")
    )


def answers(check: HaystackCheck) -> tuple[list[float], tuple[str, ...]]:
    return [check.similarity(text) for text in NEEDLES], check.mentions(PHRASES)


def no_build(text: str) -> WordIndex:
    pytest.fail("the cached index should have been read")


def test_the_index_read_back_equals_the_one_built(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = word_index(TEXT)
    assert [p.name for p in cache.iterdir()] == [
        f"words-v{words.FORMAT}-{hashlib.sha256(TEXT.encode()).hexdigest()[:16]}.npz"
    ]
    assert same(built, words.build(TEXT))
    monkeypatch.setattr(words, "build", no_build)
    assert same(word_index(TEXT), built)
    # And it answers as the index built in memory does.
    read, made = HaystackCheck(TEXT), HaystackCheck(TEXT)
    made.__dict__["_index"] = built
    assert (
        answers(read)
        == answers(made)
        == (
            # The best sentences: river 0's (the first two needles share 2 and 1 of 7 and 8 words), river 3's.
            [2 / 7, 1 / 8, 4 / 7],
            ("mill", "the river 12", "river 12 kept", "ledger number 7", "asked why"),
        )
    )


def test_a_second_task_reads_the_index_rather_than_building_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes in one: the second starts with nothing in memory, as a new run does."""
    built: list[str] = []
    build = words.build

    def spy(text: str) -> WordIndex:
        built.append(text)
        return build(text)

    monkeypatch.setattr(words, "build", spy)
    char = load_tokenizer("char")

    def first_sample() -> Sample:
        monkeypatch.setattr(index, "_MEMORY", {})
        hygiene.haystack_check.cache_clear()
        task = NiahTask(RunSpec("niah", "sim:perfect", "char", (2048,), (0.5,), 1), char)
        made = task.prepare(Cell("niah", 2048, 0.5, 0))
        assert isinstance(made, Sample)
        return made

    first = first_sample()
    assert len(built) == 1
    second = first_sample()
    assert len(built) == 1, "the second task built the word index again"
    assert second.similarity == first.similarity and list(second.prompt.ids) == list(first.prompt.ids)
    hygiene.haystack_check.cache_clear()  # no later test meets this test's cache folder's checks


def signed(arrays: Arrays) -> Arrays:
    """``arrays`` with a record whose content hash is theirs: only the damage itself tells."""
    made = json.loads(str(arrays["made"][()]))
    made["content_sha256"] = entry.content_sha256(*(arrays[name] for name in MEMBERS))
    return arrays | {"made": np.array(json.dumps(made))}


def _shuffled_units(a: Arrays) -> Arrays:
    return a | {"units": np.random.default_rng(0).permutation(a["units"])}


def _short_offsets(a: Arrays) -> Arrays:
    return signed(a | {"offsets": a["offsets"][:-1]})


def _unit_past_the_sizes(a: Arrays) -> Arrays:
    units = a["units"].copy()
    units[3] = len(a["sizes"])
    return signed(a | {"units": units})


def _pair_past_the_words(a: Arrays) -> Arrays:
    pairs = a["pairs"].copy()
    pairs[-1] = 10**12
    return signed(a | {"pairs": pairs})


def _repeated_word(a: Arrays) -> Arrays:
    text = a["words"].tobytes().decode()
    first = text.split("\n")[0]
    return signed(a | {"words": np.frombuffer(f"{first}\n{text}".encode(), np.uint8)})


def _not_utf8(a: Arrays) -> Arrays:
    return signed(a | {"content": np.concatenate([a["content"], np.array([0xFF], np.uint8)])})


def _int32_units(a: Arrays) -> Arrays:
    return signed(a | {"units": a["units"].astype(np.int32)})


def _foreign(a: Arrays) -> Arrays:
    """Another text's index under this text's name."""
    made = json.loads(str(a["made"][()])) | {"text_sha256": "0" * 64}
    return a | {"made": np.array(json.dumps(made))}


def _oversized(a: Arrays) -> Arrays:
    return signed(a | {"units": np.tile(a["units"], 64)})


BAD_ARRAYS: dict[Callable[[Arrays], Arrays], str] = {
    _shuffled_units: "does not match the hash of its content",
    _short_offsets: "holds offsets that do not span its units",
    _unit_past_the_sizes: "holds units that are not those of its sizes",
    _pair_past_the_words: "holds word pairs that are not sorted codes of its words",
    _repeated_word: "holds words that are not distinct",
    _not_utf8: "holds content words that are not UTF-8",
    _int32_units: "holds units of dtype int32, not int64",
    _foreign: "was made from another corpus text or fathom format",
    _oversized: "bytes of units, more than its corpus could make",
}


def _garbage(path: Path) -> None:
    path.write_bytes(b"words 1 2 3\n")


PLANTS = [pytest.param(plant_arrays(d), why, id=d.__name__) for d, why in BAD_ARRAYS.items()] + [
    pytest.param(_truncated, "cannot be read as an npz archive (BadZipFile)", id="truncated"),
    pytest.param(_garbage, "cannot be read as an npz archive (ValueError)", id="garbage"),
]


@pytest.mark.parametrize(("plant", "reason"), PLANTS)
def test_a_bad_index_is_a_warning_and_a_rebuild(
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    plant: Callable[[Path], None],
    reason: str,
) -> None:
    clean = word_index(TEXT)
    [path] = cache.glob("words-v*.npz")
    plant(path)
    rebuilt = word_index(TEXT)
    assert same(rebuilt, clean)
    [warning] = warnings(caplog)
    assert warning.startswith(f"the corpus cache entry {path} "), warning
    assert reason in warning
    assert warning.endswith(": it is indexed again and the entry written over")
    # Written over with a good entry: the next process reads it, with no warning and no build.
    caplog.clear()
    monkeypatch.setattr(words, "build", no_build)
    assert same(word_index(TEXT), clean) and warnings(caplog) == []


@pytest.mark.parametrize("text", ["", "...", "one"])
def test_a_text_of_no_words_or_one_is_indexed_and_read_back(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    built = word_index(text)
    monkeypatch.setattr(words, "build", no_build)
    assert same(word_index(text), built) and warnings(caplog) == []
    check = HaystackCheck(text)
    assert check.mentions(["one", "one two"]) == (("one",) if text == "one" else ())
    assert check.similarity("one") == (1.0 if text == "one" else 0.0)


def test_content_words_are_what_the_cached_indexes_were_made_with() -> None:
    """Cached indexes hold content words: a change to what content_words makes of a text must raise
    words.FORMAT, so that indexes made with the old rules are never read. Then update this test."""
    probe = "The harbour-master's boats, and Mark's old mills: Zürich's cafés were the Rivers' keys; 4821 is"
    expected = {"4821", "boat", "cafe", "harbour", "key", "mark", "master", "mill", "old", "river", "zurich"}
    assert content_words(probe) == expected, "content_words changed: raise words.FORMAT"
    assert words.FORMAT == 1
