"""Reading the suites' files where their other tests leave it open (``fathom.tasks.suites.data``):
each item of each layout read whole, and each refusal's message read whole, with the file written
here in the suite's layout."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from fathom.tasks.suites import reading
from fathom.tasks.suites.catalogue import INFINITEBENCH, LONGBENCH, LONGBENCH_E, LONGBENCH_V2, SUITES
from fathom.tasks.suites.data import Item, read_task
from fathom.tasks.suites.reading import DataError, json_list


def _lines(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _longbench(number: int, **fields: Any) -> dict[str, Any]:
    return {
        "input": f"Who built mill {number}?",
        "context": f"Mill {number} was built by Ada.",
        "answers": ["Ada"],
        "length": 3999,
        "all_classes": None,
        "_id": f"id{number}",
    } | fields


def _items(items: tuple[Item, ...]) -> list[tuple[Any, ...]]:
    return [(i.id, i.context, i.fields, i.question, i.answers, i.classes, i.groups) for i in items]


def test_longbench_items_are_read_whole_blank_lines_skipped_and_only_the_first_ones(tmp_path: Path) -> None:
    task = SUITES[LONGBENCH]["hotpotqa"]
    path = tmp_path / "hotpotqa.jsonl"
    lines = [json.dumps(_longbench(0)), "", "  ", json.dumps(_longbench(1, _id=7)), json.dumps(_longbench(2))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = read_task(tmp_path, LONGBENCH, task, 2)
    assert data.task is task
    assert _items(data.items) == [
        (
            "id0",
            "Mill 0 was built by Ada.",
            {"input": "Who built mill 0?"},
            "Who built mill 0?",
            ("Ada",),
            (),
            (),
        ),
        (
            "7",
            "Mill 1 was built by Ada.",
            {"input": "Who built mill 1?"},
            "Who built mill 1?",
            ("Ada",),
            (),
            (),
        ),
    ]
    assert data.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_longbench_e_groups_each_item_by_its_length_bucket(tmp_path: Path) -> None:
    task = SUITES[LONGBENCH_E]["hotpotqa"]
    # LongBench's scorer_e: below 4000, below 8000, else 8k+.
    lengths = (3999, 4000, 7999, 8000)
    _lines(tmp_path / "hotpotqa_e.jsonl", [_longbench(i, length=n) for i, n in enumerate(lengths)])
    data = read_task(tmp_path, LONGBENCH_E, task, 10)
    assert [item.groups for item in data.items] == [
        ("length:0-4k",),
        ("length:4-8k",),
        ("length:4-8k",),
        ("length:8k+",),
    ]


def test_a_classification_item_carries_its_classes(tmp_path: Path) -> None:
    task = SUITES[LONGBENCH]["trec"]
    _lines(tmp_path / "trec.jsonl", [_longbench(0, answers=["Animal"], all_classes=["Animal", "City"])])
    (item,) = read_task(tmp_path, LONGBENCH, task, 1).items
    assert (item.answers, item.classes) == (("Animal",), ("Animal", "City"))


def _refusal(folder: Path, suite: str, task: str, records: list[Any] | str) -> str:
    name = SUITES[suite][task].file
    if isinstance(records, str):
        (folder / name).write_text(records, encoding="utf-8")
    else:
        _lines(folder / name, records)
    with pytest.raises(DataError) as refused:
        read_task(folder, suite, SUITES[suite][task], 10)
    return str(refused.value)


@pytest.mark.parametrize(
    ("task", "records", "message"),
    [
        ("hotpotqa", "", "{path} holds no items: use the suite's official file"),
        ("hotpotqa", "\n\n", "{path} holds no items: use the suite's official file"),
        ("hotpotqa", [[1, 2]], "{path} line 1 is a JSON list, not an item (an object)"),
        (
            "hotpotqa",
            [_longbench(0), {k: v for k, v in _longbench(1).items() if k != "length"}],
            "{path} line 2 has no field 'length': is hotpotqa.jsonl the official file?",
        ),
        ("hotpotqa", [_longbench(0, answers="Ada")], "{path} line 1: field 'answers' is 'Ada', not a list"),
        ("hotpotqa", [_longbench(0, length=True)], "{path} line 1: field 'length' is True, not a int"),
        ("hotpotqa", [_longbench(0, input=None)], "{path} line 1: field 'input' is None, not a str"),
        (
            "hotpotqa",
            [_longbench(0, _id=1.5)],
            "{path} line 1: field '_id' is 1.5, not a str or int",
        ),
        (
            "hotpotqa",
            [_longbench(0, context=["x" * 50])],
            "{path} line 1: field 'context' is ['" + "x" * 38 + ", not a str",
        ),
        (
            "hotpotqa",
            [_longbench(0, answers=["Ada", 3])],
            "{path} line 1: field 'answers' holds something other than strings",
        ),
        (
            "hotpotqa",
            [_longbench(0, answers=[])],
            "{path} line 1: field 'answers' is empty; an item needs a reference answer",
        ),
        ("trec", [_longbench(0)], "{path} line 1: a classification item needs its 'all_classes' list"),
        (
            "trec",
            [_longbench(0, all_classes=[])],
            "{path} line 1: a classification item needs its 'all_classes' list",
        ),
        (
            "trec",
            [_longbench(0, all_classes="Animal")],
            "{path} line 1: a classification item needs its 'all_classes' list",
        ),
        (
            "trec",
            [_longbench(0, all_classes=["Animal", None])],
            "{path} line 1: field 'all_classes' holds something other than strings",
        ),
    ],
)
def test_a_longbench_file_is_refused_naming_its_line_and_what_is_wrong(
    tmp_path: Path, task: str, records: list[Any] | str, message: str
) -> None:
    path = tmp_path / SUITES[LONGBENCH][task].file
    assert _refusal(tmp_path, LONGBENCH, task, records) == message.format(path=path)


def test_a_missing_file_is_named_with_the_folder_to_place_it_in(tmp_path: Path) -> None:
    with pytest.raises(DataError) as refused:
        read_task(tmp_path, LONGBENCH, SUITES[LONGBENCH]["qasper"], 1)
    assert str(refused.value) == (
        f"longbench task 'qasper' needs {tmp_path / 'qasper.jsonl'}, which is missing: place the suite's "
        f"official qasper.jsonl in {tmp_path} (see docs/suites.md)"
    )


def test_a_line_that_is_not_json_is_named_with_the_decoders_reason(tmp_path: Path) -> None:
    path = tmp_path / "hotpotqa.jsonl"
    path.write_text(json.dumps(_longbench(0)) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(DataError) as refused:
        read_task(tmp_path, LONGBENCH, SUITES[LONGBENCH]["hotpotqa"], 10)
    assert str(refused.value) == (
        f"{path} line 2 is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1)): use the suite's official file"
    )
    # Read no further than the items asked for, the bad line is never reached.
    assert len(read_task(tmp_path, LONGBENCH, SUITES[LONGBENCH]["hotpotqa"], 1).items) == 1


def _v2(**fields: Any) -> dict[str, Any]:
    return {
        "_id": "v2a",
        "domain": "Single-Document QA",
        "sub_domain": "Novel",
        "difficulty": "hard",
        "length": "short",
        "question": "  Who built the mill?\n",
        "choice_A": " Ada ",
        "choice_B": "Bob\n",
        "choice_C": "\tCy",
        "choice_D": "Di",
        "answer": "C",
        "context": "\n The mill. \n",
    } | fields


def test_a_longbench_v2_item_is_read_stripped_and_grouped(tmp_path: Path) -> None:
    (tmp_path / "data.json").write_text(json.dumps([_v2(), _v2(_id=5, answer="D"), _v2()]))
    data = read_task(tmp_path, LONGBENCH_V2, SUITES[LONGBENCH_V2][LONGBENCH_V2], 2)
    choices = {"choice_A": "Ada", "choice_B": "Bob", "choice_C": "Cy", "choice_D": "Di"}
    groups = ("difficulty:hard", "length:short", "domain:Single-Document QA")
    fields = {"question": "Who built the mill?"} | choices
    assert _items(data.items) == [
        ("v2a", "The mill.", fields, "Who built the mill?", ("C",), (), groups),
        ("5", "The mill.", fields, "Who built the mill?", ("D",), (), groups),
    ]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([_v2(), "text"], "{path} item 1 is a JSON str, not an item (an object)"),
        ([_v2(answer="E")], "{path} item 0: field 'answer' is 'E', not a letter A-D"),
        ([_v2(answer="a")], "{path} item 0: field 'answer' is 'a', not a letter A-D"),
        ([_v2(answer="A" * 30)], "{path} item 0: field 'answer' is '" + "A" * 19 + ", not a letter A-D"),
        ([_v2(choice_D=4)], "{path} item 0: field 'choice_D' is 4, not a str"),
        ([_v2(answer=1)], "{path} item 0: field 'answer' is 1, not a str"),
        ([_v2(_id=1.5)], "{path} item 0: field '_id' is 1.5, not a str or int"),
        ([_v2(context=None)], "{path} item 0: field 'context' is None, not a str"),
        ([_v2(length=None)], "{path} item 0: field 'length' is None, not a str"),
        (
            [{k: v for k, v in _v2().items() if k != "domain"}],
            "{path} item 0 has no field 'domain': is data.json the official file?",
        ),
        ([], "{path} holds no items: use the suite's official file"),
        ({"items": []}, "{path} is not a JSON list: use LongBench v2's official file"),
        (
            [{k: v for k, v in _v2().items() if k != "question"}],
            "{path} item 0 has no field 'question': is data.json the official file?",
        ),
    ],
)
def test_a_longbench_v2_file_is_refused_naming_its_item(tmp_path: Path, items: Any, message: str) -> None:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(items))
    with pytest.raises(DataError) as refused:
        read_task(tmp_path, LONGBENCH_V2, SUITES[LONGBENCH_V2][LONGBENCH_V2], 10)
    assert str(refused.value) == message.format(path=path)


def _infinite(**fields: Any) -> dict[str, Any]:
    return {"id": 0, "context": "The text.", "input": "What is it?", "answer": ["42"], "options": []} | fields


def _read_infinite(folder: Path, task: str, records: list[Any]) -> list[tuple[Any, ...]]:
    _lines(folder / f"{task}.jsonl", records)
    return _items(read_task(folder, INFINITEBENCH, SUITES[INFINITEBENCH][task], 10).items)


def test_infinitebench_labels_are_strings_as_json_writes_numbers(tmp_path: Path) -> None:
    answers = [["42"], 42, 3.5, "x", [[1, 2.5], [3]], [7, "8"]]
    read = _read_infinite(tmp_path, "passkey", [_infinite(id=n, answer=a) for n, a in enumerate(answers)])
    assert [row[4] for row in read] == [("42",), ("42",), ("3.5",), ("x",), ("1", "2.5"), ("7", "8")]
    assert read[1][:4] == ("1", "The text.", {"input": "What is it?"}, "What is it?")


@pytest.mark.parametrize("answer", [[], [True], True, None, {"a": 1}, [[]], [None]])
def test_an_infinitebench_label_that_is_not_one_is_refused(tmp_path: Path, answer: Any) -> None:
    path = _lines(tmp_path / "passkey.jsonl", [_infinite(answer=answer)])
    with pytest.raises(DataError) as refused:
        read_task(tmp_path, INFINITEBENCH, SUITES[INFINITEBENCH]["passkey"], 10)
    if answer is None or isinstance(answer, dict | bool):
        wanted = "str or int or float or list"
        assert str(refused.value) == f"{path} line 1: field 'answer' is {answer!r}, not a {wanted}"
    else:
        assert str(refused.value) == f"{path} line 1: field 'answer' is {answer!r}, not a label"


OPTIONS = ["Ada", "Bob", "Cy", "Di"]


@pytest.mark.parametrize("task", ["longbook_choice_eng", "code_debug"])
def test_a_choice_items_label_is_its_option_and_letter(tmp_path: Path, task: str) -> None:
    records = [
        _infinite(answer=["Cy"], options=OPTIONS),
        _infinite(answer=["Di", "D"], options=OPTIONS),
        _infinite(answer="Ada", options=[*OPTIONS, "Ed"]),
        _infinite(answer=["Bob"], options=["Bob", "Bob", "Cy", "Di"]),  # the first of equal options
    ]
    read = _read_infinite(tmp_path, task, records)
    assert [row[4] for row in read] == [("Cy", "C"), ("Di", "D"), ("Ada", "A"), ("Bob", "A")]
    letters = {f"OPTION_{letter}": option for letter, option in zip("ABCD", OPTIONS, strict=True)}
    assert read[0][2] == {"input": "What is it?"} | letters


@pytest.mark.parametrize(
    ("answer", "options", "message"),
    [
        (["Ed"], [*OPTIONS, "Ed"], "{path} line 1: field 'answer' names no one of the four options"),
        (["Cy", "c"], OPTIONS, "{path} line 1: field 'answer' names no one of the four options"),
        (["Cy", "E"], OPTIONS, "{path} line 1: field 'answer' names no one of the four options"),
        (["Cy", "Di", "D"], OPTIONS, "{path} line 1: field 'answer' names no one of the four options"),
        (["Cy"], OPTIONS[:3], "{path} line 1: a choice item needs four 'options', has 3"),
        (["Cy"], [*OPTIONS[:3], 4], "{path} line 1: field 'options' holds something other than strings"),
        (["Cy"], "ABCD", "{path} line 1: field 'options' is 'ABCD', not a list"),
    ],
)
def test_a_choice_item_whose_label_names_no_option_is_refused(
    tmp_path: Path, answer: list[str], options: Any, message: str
) -> None:
    path = _lines(tmp_path / "code_debug.jsonl", [_infinite(answer=answer, options=options)])
    with pytest.raises(DataError) as refused:
        read_task(tmp_path, INFINITEBENCH, SUITES[INFINITEBENCH]["code_debug"], 10)
    assert str(refused.value) == message.format(path=path)


@pytest.mark.parametrize("letter", "ABCD")
def test_each_letter_of_a_two_part_label_is_taken_as_it_is(tmp_path: Path, letter: str) -> None:
    (row,) = _read_infinite(tmp_path, "code_debug", [_infinite(answer=["Cy", letter], options=OPTIONS)])
    assert row[4] == ("Cy", letter)


def test_math_find_and_code_run_read_what_their_templates_need_from_the_input(tmp_path: Path) -> None:
    question = "Find it. The largest number is asked, not The smallest number."
    (found,) = _read_infinite(tmp_path, "math_find", [_infinite(input=question)])
    assert found[2] == {"input": question, "prefix": "What is the largest number in the following list?"}
    question = "Compute func_12(-3), then func_2(4)."
    (run,) = _read_infinite(tmp_path, "code_run", [_infinite(input=question)])
    assert run[2] == {"input": question, "func_call": "func_12(-3)", "func": "func_12"}


@pytest.mark.parametrize(
    ("task", "question", "message"),
    [
        ("math_find", "Find the number.", "a Math.Find input names 'The ... number' it asks for; none found"),
        ("code_run", "Compute func(3).", "a Code.Run input names a call like func_1(3); none found"),
    ],
)
def test_an_input_without_what_its_template_needs_is_refused(
    tmp_path: Path, task: str, question: str, message: str
) -> None:
    path = _lines(tmp_path / f"{task}.jsonl", [_infinite(input=question)])
    with pytest.raises(DataError) as refused:
        read_task(tmp_path, INFINITEBENCH, SUITES[INFINITEBENCH][task], 10)
    assert str(refused.value) == f"{path} line 1: {message}"


def test_an_infinitebench_input_that_is_no_text_is_refused(tmp_path: Path) -> None:
    path = _lines(tmp_path / "passkey.jsonl", [_infinite(input=5)])
    with pytest.raises(DataError) as refused:
        read_task(tmp_path, INFINITEBENCH, SUITES[INFINITEBENCH]["passkey"], 10)
    assert str(refused.value) == f"{path} line 1: field 'input' is 5, not a str"


@pytest.mark.parametrize(("field", "value", "wanted"), [("id", 1.5, "str or int"), ("context", None, "str")])
def test_an_infinitebench_id_or_document_of_the_wrong_type_is_refused(
    tmp_path: Path, field: str, value: Any, wanted: str
) -> None:
    path = _lines(tmp_path / "passkey.jsonl", [_infinite(**{field: value})])
    with pytest.raises(DataError) as refused:
        read_task(tmp_path, INFINITEBENCH, SUITES[INFINITEBENCH]["passkey"], 10)
    assert str(refused.value) == f"{path} line 1: field '{field}' is {value!r}, not a {wanted}"


def test_a_list_item_is_bounded_by_its_own_text_not_by_where_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 64 characters an item, read 60 at a time: the second item starts at character 53 of the first
    # chunk and is incomplete there (7 of its 12 characters), far below the bound on its own.
    monkeypatch.setattr(reading, "MOST_ITEM", 64)
    monkeypatch.setattr(reading, "_CHUNK", 60)
    path = tmp_path / "data.json"
    path.write_text(json.dumps(["x" * 48, "a" * 10]))
    assert [item for _, item in json_list(path, "LongBench v2", 10)] == ["x" * 48, "a" * 10]


@pytest.mark.parametrize(
    ("size", "why"),
    [(64, "is not JSON (Unterminated string starting at): use LongBench v2's official file"),
     (65, "is longer than the 0 MiB a suite item may be (the longest real ones are a few MB): is it the "
      "suite's official file?")],
)  # fmt: skip
def test_an_unfinished_last_item_of_exactly_the_bound_is_malformed_and_one_more_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, why: str
) -> None:
    # The item's text runs to the end of the file: '"' and 63 or 64 characters, no closing quote.
    monkeypatch.setattr(reading, "MOST_ITEM", 64)
    monkeypatch.setattr(reading, "_CHUNK", 16)
    path = tmp_path / "data.json"
    path.write_text('["' + "a" * (size - 1))
    with pytest.raises(DataError) as refused:
        list(json_list(path, "LongBench v2", 10))
    assert str(refused.value) == f"{path} item 0 {why}"


class _Logged:
    """A path whose opened text logs the size of each read: how far a reader reads ahead."""

    def __init__(self, path: Path) -> None:
        self.path, self.reads = path, list[int | None]()

    def __str__(self) -> str:
        return str(self.path)

    def open(self, **options: Any) -> Any:
        text = self.path.open(**options)
        logged = self

        class Text:
            def __enter__(self) -> Text:
                return self

            def __exit__(self, *_: object) -> None:
                text.close()

            def read(self, size: int | None = None) -> str:
                logged.reads.append(size)
                return str(text.read(size))

        return Text()


def test_a_list_is_read_a_chunk_at_a_time_and_no_further_than_the_items_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read 60 at a time: the second item (from character 53) needs one more chunk; whitespace across
    # the next chunk's edge is skipped a chunk at a time; the third item, and the 10,000 characters
    # after it, are never read.
    monkeypatch.setattr(reading, "_CHUNK", 60)
    path = tmp_path / "data.json"
    path.write_text('["' + "x" * 46 + '", "' + "a" * 10 + '",' + " " * 70 + '"b", "' + "c" * 10_000 + '"]')
    logged = _Logged(path)
    read = [item for _, item in json_list(logged, "LongBench v2", 3)]  # type: ignore[arg-type]
    assert read == ["x" * 46, "a" * 10, "b"]
    assert logged.reads == [60, 60, 60]
    logged = _Logged(path)
    assert [item for _, item in json_list(logged, "LongBench v2", 2)] == ["x" * 46, "a" * 10]  # type: ignore[arg-type]
    assert logged.reads == [60, 60]


def test_a_list_may_open_after_whitespace() -> None:
    assert reading._ListReader(io.StringIO("\n  [1, 2]"), Path("d.json"), "v2").items(10).__next__() == (0, 1)
