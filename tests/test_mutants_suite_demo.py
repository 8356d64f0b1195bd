"""The offline demo set (``fathom.tasks.suites.demo``) on stand-in datasets of ten-word documents, so
that each context's documents, words and passages are counted by hand."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from fathom.errors import SpecError
from fathom.tasks.ruler.qa_data import QADataset, QAItem
from fathom.tasks.suites import demo

# Document i: ten words, the first naming it.
DOCUMENTS = tuple(f"doc{i} " + "word " * 8 + "end." for i in range(6))
ITEMS = (
    QAItem("Which is doc0?", ("doc0",), (0,)),
    QAItem("Which is doc1?", ("doc1", "one"), (1,), related=(1, 2)),  # doc1 twice: once in the context
    QAItem("Which is doc3?", ("doc3",), (3,)),
)


@pytest.fixture
def datasets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Both sources are the stand-in; the sources loaded are logged."""
    loaded: list[str] = []

    def load(source: str) -> QADataset:
        loaded.append(source)
        return QADataset(source, DOCUMENTS, ITEMS, "0" * 64)

    monkeypatch.setattr(demo, "load_dataset", load)
    return loaded


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _documents(task: str, context: str) -> list[str]:
    if task == "hotpotqa":
        parts = context.split("\n")
        assert parts[0::2] == [f"Passage {i}:" for i in range(1, len(parts) // 2 + 1)]
        return parts[1::2]
    return context.split("\n\n")


def test_the_set_is_four_files_of_the_items_drawn_by_the_seed(tmp_path: Path, datasets: list[str]) -> None:
    folder = tmp_path / "a" / "demo"  # made, with its parents
    written = demo.make_demo(folder, items=2, seed=5)
    assert written == [
        folder / name
        for name in ("hotpotqa.jsonl", "hotpotqa_e.jsonl", "multifieldqa_en.jsonl", "multifieldqa_en_e.jsonl")
    ]
    assert datasets == ["hotpotqa", "squad"]
    for source, task in (("hotpotqa", "hotpotqa"), ("squad", "multifieldqa_en")):
        lines = _lines(folder / f"{task}.jsonl")
        assert (folder / f"{task}_e.jsonl").read_text() == (folder / f"{task}.jsonl").read_text()
        # The items drawn: Python's random.sample over the item indexes, seeded "5|source".
        chosen = random.Random(f"5|{source}").sample(range(3), 2)
        assert [line["input"] for line in lines] == [ITEMS[i].question for i in chosen]
        for line, index in zip(lines, chosen, strict=True):
            item = ITEMS[index]
            documents = _documents(task, line["context"])
            # MOST_WORDS is far above the 60 words there are: every document, each once.
            assert sorted(documents) == sorted(DOCUMENTS)
            digest = hashlib.sha256(f"{task}|{item.question}|{line['context']}".encode()).hexdigest()[:48]
            assert line == {
                "input": item.question,
                "context": line["context"],
                "answers": list(item.answers),
                # 3 words of question, 60 of documents (and "Passage i:" 2 words each for hotpotqa)
                "length": 3 + 60 + (12 if task == "hotpotqa" else 0) + len(item.answers),
                "dataset": task,
                "language": "en",
                "all_classes": None,
                "_id": digest,
            }


@pytest.mark.parametrize(
    ("most", "items", "counts"),
    [
        # 30 words over 3 items: 10, 20 and 30, i.e. 1, 2 and 3 ten-word documents.
        (30, 3, [1, 2, 3]),
        # 21 over 2: 10 (int(10.5): the own document is enough), then 21: 3 documents.
        (21, 2, [1, 3]),
        # 30 over 1: all 30 words for the one item.
        (30, 1, [3]),
    ],
)
def test_each_context_grows_a_step_longer_up_to_the_most_words(
    tmp_path: Path,
    datasets: list[str],
    monkeypatch: pytest.MonkeyPatch,
    most: int,
    items: int,
    counts: list[int],
) -> None:
    monkeypatch.setattr(demo, "MOST_WORDS", most)
    demo.make_demo(tmp_path, items=items, seed=1)
    lines = _lines(tmp_path / "multifieldqa_en.jsonl")
    chosen = random.Random("1|squad").sample(range(3), items)
    # The item's own documents first: doc1's item brings doc1 and doc2 (its related one), once each.
    own = {0: ["doc0"], 1: ["doc1", "doc2"], 2: ["doc3"]}
    for count, line, index in zip(counts, lines, chosen, strict=True):
        names = [text.split()[0] for text in _documents("multifieldqa_en", line["context"])]
        assert len(names) == max(count, len(own[index]))
        assert set(own[index]) <= set(names) and len(set(names)) == len(names)


def test_the_defaults_are_20_items_and_seed_0_written_as_utf8_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = tuple(QAItem(f"Où est doc{i % 6}, item {i}?", ("café",), (i % 6,)) for i in range(25))
    monkeypatch.setattr(demo, "load_dataset", lambda source: QADataset(source, DOCUMENTS, many, "0" * 64))
    demo.make_demo(tmp_path)
    lines = _lines(tmp_path / "hotpotqa.jsonl")
    chosen = random.Random("0|hotpotqa").sample(range(25), 20)
    assert [line["input"] for line in lines] == [many[i].question for i in chosen]
    assert '"Où est' in (tmp_path / "hotpotqa.jsonl").read_text(encoding="utf-8")  # not "\\u00f9"


@pytest.mark.parametrize("items", [0, 1001])
def test_items_take_1_to_1000(tmp_path: Path, items: int) -> None:
    with pytest.raises(SpecError) as refused:
        demo.make_demo(tmp_path, items=items)
    assert str(refused.value) == f"--items takes 1..1000 items per task, not {items}"


def test_1000_items_asks_for_more_than_there_are_and_takes_them_all(
    tmp_path: Path, datasets: list[str]
) -> None:
    demo.make_demo(tmp_path, items=1000)
    assert len(_lines(tmp_path / "hotpotqa.jsonl")) == 3


def test_files_already_there_are_refused_before_anything_is_written_unless_forced(
    tmp_path: Path, datasets: list[str]
) -> None:
    (tmp_path / "multifieldqa_en.jsonl").write_text("mine\n")
    (tmp_path / "hotpotqa_e.jsonl").symlink_to(tmp_path / "nowhere")  # a dangling link is there too
    with pytest.raises(SpecError) as refused:
        demo.make_demo(tmp_path, items=1)
    assert str(refused.value) == (
        f"{tmp_path} already holds hotpotqa_e.jsonl, multifieldqa_en.jsonl: pass --force to overwrite "
        "them, or name another folder"
    )
    assert datasets == [] and not (tmp_path / "hotpotqa.jsonl").exists()
    demo.make_demo(tmp_path, items=1, force=True)
    assert len(_lines(tmp_path / "multifieldqa_en.jsonl")) == 1
