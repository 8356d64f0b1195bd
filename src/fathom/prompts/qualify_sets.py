"""Qualification sets for LLM judges (``fathom judge --qualify``): answers labelled right or wrong by
hand, some of them adversarial, with the thresholds a judge must meet.

A set is a JSON file (``prompts/qualify/``, or the user's own): its name and version, the rubric its
labels are for, the categories that are adversarial (answers that try to choose their own verdict:
ready-made verdicts, authority claims, fake ends of the block), the thresholds, and the items, each
a question, its references, an answer and its label (1 right, 0 wrong). Its sha256 (of the file's
bytes) goes into every qualification, so a result on an edited set is never taken for one on this.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.errors import SpecError
from fathom.prompts.judging import file_errors, read_shipped, shipped_names

QUALIFY_SETS = Path(__file__).parent / "qualify"
THRESHOLDS = ("accuracy", "kappa", "flip_rate")


@dataclass(frozen=True)
class QualifyItem:
    """One labelled answer; named as a run's sample is, so that a judge is shown it the same way."""

    sample_id: str
    category: str
    question: str
    answers: tuple[str, ...]  # the references
    output: str  # the answer to grade
    label: int  # 1: right, 0: wrong

    @property
    def prompt_sha256(self) -> str:
        return hashlib.sha256(json.dumps([self.question, self.answers]).encode()).hexdigest()


@dataclass(frozen=True)
class QualifySet:
    name: str
    version: int
    rubric: str
    adversarial: tuple[str, ...]
    thresholds: dict[str, float]
    items: tuple[QualifyItem, ...]
    sha256: str

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"


def set_names() -> list[str]:
    return shipped_names(QUALIFY_SETS, ".json")


def load_set(name: str) -> QualifySet:
    """A shipped set by name, or a set file by path; SpecError naming what is wrong."""
    path, raw = read_shipped(QUALIFY_SETS, ".json", name, "qualification set")
    example = "prompts/qualify/qa-judge.json"
    with file_errors("qualification set", path, "JSON", example, json.JSONDecodeError):
        data = json.loads(raw)
        qualify_set = QualifySet(
            name=str(data["name"]),
            version=int(data["version"]),
            rubric=str(data["rubric"]),
            adversarial=tuple(str(c) for c in data["adversarial"]),
            thresholds={key: float(data["thresholds"][key]) for key in THRESHOLDS},
            items=tuple(_item(item) for item in data["items"]),
            sha256=hashlib.sha256(raw).hexdigest(),
        )
    _check(qualify_set, path)
    return qualify_set


def _item(data: dict[str, Any]) -> QualifyItem:
    if not isinstance(data["answer"], str) or not all(isinstance(r, str) for r in data["references"]):
        raise TypeError("an item's answer and references are text")
    return QualifyItem(
        sample_id=str(data["id"]),
        category=str(data["category"]),
        question=str(data["question"]),
        answers=tuple(data["references"]),
        output=data["answer"],
        label=int(data["label"]),
    )


def _check(qualify_set: QualifySet, path: Path) -> None:
    problems = []
    ids = [item.sample_id for item in qualify_set.items]
    if not ids:
        problems.append("it has no items")
    if len(set(ids)) != len(ids):
        problems.append("its item ids repeat")
    if any(item.label not in (0, 1) for item in qualify_set.items):
        problems.append("a label is neither 1 (right) nor 0 (wrong)")
    if not {item.category for item in qualify_set.items} >= set(qualify_set.adversarial):
        problems.append("an adversarial category has no item")
    if problems:
        raise SpecError(f"qualification set {path}: {'; '.join(problems)}")
