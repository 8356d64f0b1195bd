"""Reading the suites' official files from the user's data folder, each item checked as it is read.

Layouts (nothing is downloaded; docs/suites.md lists them):

- LongBench, LongBench-E: ``{task}.jsonl`` and ``{task}_e.jsonl`` (the release's ``data.zip``), one
  item a line: ``input``, ``context``, ``answers`` (a list), ``length``, ``all_classes`` (a list or
  null), ``_id``; ``dataset`` and ``language`` are read when present.
- LongBench v2: ``data.json``, a list of items: ``_id``, ``domain``, ``sub_domain``, ``difficulty``,
  ``length``, ``question``, ``choice_A`` ... ``choice_D``, ``answer`` (a letter), ``context``.
- InfiniteBench: ``{task}.jsonl``, one item a line: ``id``, ``context``, ``input``, ``answer`` (a
  string, a number or a list), ``options`` (a list; four for the choice tasks).

A missing file or a malformed item is a one-line error naming the file, the line (or item) and the
fix, raised before any prompt is built.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.tasks.suites.catalogue import (
    INFINITEBENCH,
    LONGBENCH_E,
    LONGBENCH_V2,
    SuiteTask,
    longbench_e_bucket,
)
from fathom.tasks.suites.reading import DataError, json_list, jsonl_lines


@dataclass(frozen=True, eq=False)
class Item:
    """One item of a suite, ready to fill its task's template: ``fields`` holds every template field
    but ``context``; ``groups`` are the splits it belongs to ("length:0-4k", "difficulty:hard")."""

    id: str
    context: str
    fields: dict[str, str]
    question: str
    answers: tuple[str, ...]
    classes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class TaskData:
    """A task's first items, and the hash of its whole file (a changed file is another run)."""

    task: SuiteTask
    items: tuple[Item, ...]
    sha256: str


def read_task(folder: Path, suite: str, task: SuiteTask, limit: int) -> TaskData:
    """The first ``limit`` items of ``task``'s file in ``folder``."""
    path = folder / task.file
    if not path.is_file():
        raise DataError(
            f"{suite} task '{task.name}' needs {path}, which is missing: place the suite's official "
            f"{task.file} in {folder} (see docs/suites.md)"
        )
    if suite == LONGBENCH_V2:
        items = _v2_items(path, limit)
    else:
        read = _infinite_item if suite == INFINITEBENCH else _longbench_item
        items = [read(task, record, suite) for record in _checked(_jsonl(path, limit))]
    if not items:
        raise DataError(f"{path} holds no items: use the suite's official file")
    return TaskData(task, tuple(items), _sha256(path))


class _Where:
    """Where a record came from, for messages: a file's line or a list's item."""

    def __init__(self, path: Path, unit: str, number: int) -> None:
        self.path, self.text = path, f"{path} {unit} {number}"


def _jsonl(path: Path, limit: int) -> Iterator[tuple[_Where, Any]]:
    count = 0
    for number, raw in jsonl_lines(path):
        if count == limit:
            return
        if not raw.strip():
            continue  # the suites' readers skip blank lines too
        where = _Where(path, "line", number)
        try:
            yield where, json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"{where.text} is not JSON ({exc}): use the suite's official file") from None
        count += 1


def _checked(records: Iterator[tuple[_Where, Any]]) -> Iterator[tuple[_Where, dict[str, Any]]]:
    for where, record in records:
        if not isinstance(record, dict):
            raise DataError(f"{where.text} is a JSON {type(record).__name__}, not an item (an object)")
        yield where, record


def _field(where: _Where, record: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in record:
        raise DataError(f"{where.text} has no field '{name}': is {where.path.name} the official file?")
    value = record[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        wanted = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataError(f"{where.text}: field '{name}' is {value!r:.40}, not a {wanted}")
    return value


def _strings(where: _Where, name: str, values: list[Any]) -> tuple[str, ...]:
    if not all(isinstance(v, str) for v in values):
        raise DataError(f"{where.text}: field '{name}' holds something other than strings")
    return tuple(values)


def _longbench_item(task: SuiteTask, located: tuple[_Where, dict[str, Any]], suite: str) -> Item:
    where, record = located
    answers = _strings(where, "answers", _field(where, record, "answers", list))
    if not answers:
        raise DataError(f"{where.text}: field 'answers' is empty; an item needs a reference answer")
    classes: tuple[str, ...] = ()
    if task.metric == "classification":
        listed = record.get("all_classes")
        if not isinstance(listed, list) or not listed:
            raise DataError(f"{where.text}: a classification item needs its 'all_classes' list")
        classes = _strings(where, "all_classes", listed)
    length = _field(where, record, "length", int)
    groups = (f"length:{longbench_e_bucket(length)}",) if suite == LONGBENCH_E else ()
    question = _field(where, record, "input", str)
    return Item(
        id=str(_field(where, record, "_id", (str, int))),
        context=_field(where, record, "context", str),
        fields={"input": question},
        question=question,
        answers=answers,
        classes=classes,
        groups=groups,
    )


def _v2_items(path: Path, limit: int) -> list[Item]:
    items: list[Item] = []
    for number, record in json_list(path, "LongBench v2", limit):
        where = _Where(path, "item", number)
        if not isinstance(record, dict):
            raise DataError(f"{where.text} is a JSON {type(record).__name__}, not an item (an object)")
        fields = {"question": _field(where, record, "question", str).strip()}
        for letter in "ABCD":
            fields[f"choice_{letter}"] = _field(where, record, f"choice_{letter}", str).strip()
        answer = _field(where, record, "answer", str)
        if answer not in ("A", "B", "C", "D"):
            raise DataError(f"{where.text}: field 'answer' is {answer!r:.20}, not a letter A-D")
        difficulty, length = (_field(where, record, name, str) for name in ("difficulty", "length"))
        domain = _field(where, record, "domain", str)
        items.append(
            Item(
                id=str(_field(where, record, "_id", (str, int))),
                # pred.py strips the document and the question's parts before filling the template.
                context=_field(where, record, "context", str).strip(),
                fields=fields,
                question=fields["question"],
                answers=(answer,),
                groups=(f"difficulty:{difficulty}", f"length:{length}", f"domain:{domain}"),
            )
        )
    return items


def _infinite_item(task: SuiteTask, located: tuple[_Where, dict[str, Any]], suite: str) -> Item:
    where, record = located
    question = _field(where, record, "input", str)
    answer = _field(where, record, "answer", (str, int, float, list))
    answers = _answers(where, answer)
    fields = {"input": question}
    if task.name in ("longbook_choice_eng", "code_debug"):
        options = _strings(where, "options", _field(where, record, "options", list))
        if len(options) < 4:
            raise DataError(f"{where.text}: a choice item needs four 'options', has {len(options)}")
        fields |= {f"OPTION_{letter}": option for letter, option in zip("ABCD", options, strict=False)}
        answers = _choice_label(where, answers, options)
    elif task.name == "math_find":
        found = re.findall(r"The \w+ number", question)
        if not found:
            raise DataError(f"{where.text}: a Math.Find input names 'The ... number' it asks for; none found")
        fields["prefix"] = f"What is {found[0].lower()} in the following list?"
    elif task.name == "code_run":
        calls = re.findall(r"func_[0-9]+\(\-?[0-9]+\)", question)
        if not calls:
            raise DataError(f"{where.text}: a Code.Run input names a call like func_1(3); none found")
        fields |= {"func_call": calls[0], "func": calls[0].split("(")[0]}
    return Item(
        id=str(_field(where, record, "id", (str, int))),
        context=_field(where, record, "context", str),
        fields=fields,
        question=question,
        answers=answers,
    )


def _answers(where: _Where, answer: Any) -> tuple[str, ...]:
    """InfiniteBench's label as strings: numbers as JSON writes them; a Math.Calc list of lists is its
    first list, as InfiniteBench reads it."""
    values = answer if isinstance(answer, list) else [answer]
    if values and isinstance(values[0], list):
        values = values[0]
    if not values or not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in values):
        raise DataError(f"{where.text}: field 'answer' is {answer!r:.40}, not a label")
    return tuple(v if isinstance(v, str) else json.dumps(v) for v in values)


def _choice_label(where: _Where, answers: tuple[str, ...], options: tuple[str, ...]) -> tuple[str, ...]:
    """InfiniteBench's get_answer for the choice tasks: (option text, its letter)."""
    if len(answers) == 2 and answers[1] in ("A", "B", "C", "D"):
        return answers
    if len(answers) == 1 and answers[0] in options[:4]:
        return answers[0], "ABCD"[options.index(answers[0])]
    raise DataError(f"{where.text}: field 'answer' names no one of the four options")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
