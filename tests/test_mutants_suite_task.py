"""A real suite as a task (``fathom.tasks.suites.task``) where its end-to-end tests leave it open: a
prompt cut to its length and one that fits by a token, every field of the sample, the frames of chat
and continuation tasks, the run's identity and its refusals, each read whole. The char tokenizer
makes a token a character, so every count below is a length of text."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fathom.errors import SpecError
from fathom.prompts.templates import CONTEXT_MARKER
from fathom.prompts.tokenizers import CharTokenizer, load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.suites import infinite_metrics, metrics
from fathom.tasks.suites.catalogue import SUITES
from fathom.tasks.suites.data import Item
from fathom.tasks.suites.task import SuiteRun, grader, select
from fathom.tasks.suites.truncation import cut_middle, kept_ends

# A chat template whose frame is one character each side: "<" before the prompt, ">" after it.
FRAME = "<{% for m in messages %}{{ m['content'] }}{% endfor %}>"
CONTEXT = "Ada Lovelace built the mill by the river in the year of the flood."


def _item(number: int, context: str = CONTEXT, **fields: Any) -> dict[str, Any]:
    return {
        "input": f"Who built mill {number}?",
        "context": context,
        "answers": ["Ada", "Lovelace", "Babbage", "Mill", "mill"],
        "length": 100,
        "all_classes": ["Ada", "Bob"],
        "_id": f"id{number}",
    } | fields


def _suite(tmp_path: Path, suite: str = "longbench", items: int = 2, **options: Any) -> SuiteRun:
    data = tmp_path / "data"
    data.mkdir(parents=True, exist_ok=True)
    for name in ("hotpotqa", "trec"):
        lines = [json.dumps(_item(i)) for i in range(items)]
        (data / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "frame.jinja").write_text(FRAME, encoding="utf-8")
    fields: dict[str, Any] = {
        "task": suite,
        "model": "sim:perfect",
        "tokenizer": "char",
        "lengths": (1024,),
        "depths": (),
        "samples": items,
        "data": str(data),
        "suite_tasks": ("trec", "hotpotqa"),
        "template": str(tmp_path / "frame.jinja"),
    } | options
    return SuiteRun(RunSpec(**fields), load_tokenizer("char"))


def _text(name: str, number: int = 0) -> tuple[str, str]:
    """The hotpotqa or trec template filled, split at the document: the text before it and after."""
    before, _, after = (
        SUITES["longbench"][name]
        .template.format(context=CONTEXT_MARKER, input=f"Who built mill {number}?")
        .partition(CONTEXT_MARKER)
    )
    return before, after


def test_tasks_are_in_the_suites_order_and_cells_length_major(tmp_path: Path) -> None:
    run = _suite(tmp_path, lengths=(2048, 1024))
    assert list(run.data) == ["hotpotqa", "trec"]  # the suite's order, not --suite-tasks'
    assert list(run.cells()) == [
        Cell(task, length, None, sample)
        for length in (2048, 1024)
        for task in ("hotpotqa", "trec")
        for sample in (0, 1)
    ]


def test_a_prompt_that_fits_is_sent_whole_in_its_frame_with_every_field(tmp_path: Path) -> None:
    before, after = _text("hotpotqa", 1)
    whole = len(before) + len(CONTEXT) + len(after)
    run = _suite(tmp_path, lengths=(whole,))
    sample = run.prepare(Cell("hotpotqa", whole, None, 1))
    text = "<" + before + CONTEXT + after + ">"
    assert "".join(map(chr, sample.prompt.ids)) == text
    assert (sample.prompt.target_tokens, sample.prompt.head_tokens) == (len(text), 1 + len(before))
    assert (sample.prompt.context_tokens, sample.prompt.needles) == (len(CONTEXT), ())
    assert (sample.text.before, sample.text.after, sample.text.answer_prefix) == (before, after, "")
    assert sample.text.system is None
    assert (sample.question, sample.answers, sample.kind) == (
        "Who built mill 1?",
        run.data["hotpotqa"].items[1].answers,
        "hotpotqa",
    )
    assert sample.answers == ("Ada", "Lovelace", "Babbage", "Mill", "mill")
    # The references a simulated reader looks for: longer than 3 characters and in the document
    # ("Ada" is too short, "Babbage" absent, "Mill" absent: the document says "mill", 4 characters).
    assert sample.query_keys == ("Lovelace", "mill")
    assert (sample.scoring, sample.max_new_tokens) == ("longbench:qa_f1", 32)
    assert sample.grader == metrics.Grader("longbench:qa_f1", metric=metrics.qa_f1)
    assert (sample.source.item_id, sample.source.groups) == ("id1", ())
    assert (sample.source.original_tokens, sample.source.truncated) == (len(text), False)


def _v2_run(tmp_path: Path, limit: int) -> tuple[SuiteRun, str]:
    """A LongBench v2 run of one item, and its template filled."""
    data = tmp_path / "data"
    data.mkdir(parents=True)
    choices = {
        f"choice_{letter}": name for letter, name in zip("ABCD", ("Ada", "Bob", "Cy", "Di"), strict=True)
    }
    item = {
        "_id": "v",
        "domain": "d",
        "difficulty": "easy",
        "length": "short",
        "question": "Who?",
        "answer": "A",
    }
    (data / "data.json").write_text(json.dumps([item | choices | {"context": CONTEXT}]))
    spec = RunSpec("longbench-v2", "sim:perfect", "char", (limit,), (), 1, data=str(data), max_new_tokens=7)
    filled = SUITES["longbench-v2"]["longbench-v2"].template.format(
        context=CONTEXT, question="Who?", **choices
    )
    return SuiteRun(spec, load_tokenizer("char")), filled


@pytest.mark.parametrize("limit", [100, 101])
def test_a_prompt_too_long_loses_its_middle_by_its_suites_rule(tmp_path: Path, limit: int) -> None:
    before, after = _text("hotpotqa")
    filled = before + CONTEXT + after
    run = _suite(tmp_path / "lb", lengths=(limit,))
    sample = run.prepare(Cell("hotpotqa", limit, None, 0))
    # LongBench: int(limit / 2) from the start and as many from the end (100 of 101 kept).
    head = limit // 2
    kept = filled[:head] + filled[-head:]
    assert "".join(map(chr, sample.prompt.ids)) == "<" + kept + ">"
    assert (sample.text.before, sample.text.after) == (filled[:head], filled[-head:])
    assert (sample.prompt.head_tokens, sample.prompt.context_tokens) == (1 + head, 0)
    assert (sample.source.original_tokens, sample.source.truncated) == (len(filled) + 2, True)
    assert sample.max_new_tokens == 32
    # LongBench v2: limit // 2 from the start, the rest from the end (51 for 101); its own budget.
    run, filled = _v2_run(tmp_path / "v2", limit)
    sample = run.prepare(Cell("longbench-v2", limit, None, 0))
    kept = filled[:head] + filled[-(limit - head) :]
    assert "".join(map(chr, sample.prompt.ids[: len(kept)])) == kept
    assert (sample.source.truncated, sample.max_new_tokens) == (True, 7)


def test_a_continuation_task_has_no_frame_and_grades_its_first_line_by_class(tmp_path: Path) -> None:
    run = _suite(tmp_path)
    sample = run.prepare(Cell("trec", 1024, None, 0))
    before, after = _text("trec")
    assert "".join(map(chr, sample.prompt.ids)) == before + CONTEXT + after  # no "<" ... ">"
    assert sample.prompt.ids.dtype == np.int32
    assert sample.prompt.head_tokens == len(before)
    assert sample.grader == metrics.Grader(
        "longbench:classification", first_line=True, classes=("Ada", "Bob")
    )
    assert (sample.scoring, sample.max_new_tokens) == ("longbench:classification", 64)


def test_each_suite_grades_by_its_own_table() -> None:
    item = Item("i", "c", {}, "q", ("a",), classes=("x", "y"))
    infinite = SUITES["infinitebench"]["code_run"]
    assert grader("infinitebench", infinite, item) == metrics.Grader(
        "infinitebench:code_run", whole=infinite_metrics.code_run
    )
    v2 = SUITES["longbench-v2"]["longbench-v2"]
    assert grader("longbench-v2", v2, item) == metrics.Grader(
        "longbench-v2:choice", metric=metrics.choice_score
    )
    samsum = SUITES["longbench"]["samsum"]
    assert grader("longbench", samsum, item) == metrics.Grader(
        "longbench:rouge", metric=metrics.rouge_score, first_line=True
    )


def test_the_identity_names_the_files_the_template_and_the_tasks_texts(tmp_path: Path) -> None:
    run = _suite(tmp_path)
    data = tmp_path / "data"
    tasks = {name: SUITES["longbench"][name] for name in ("hotpotqa", "trec")}
    texts = json.dumps({n: [t.template, t.max_new_tokens, t.metric] for n, t in tasks.items()})
    assert run.identity() == {
        "task": "longbench",
        "version": 1,
        "files": {
            name: hashlib.sha256((data / name).read_bytes()).hexdigest()
            for name in ("hotpotqa.jsonl", "trec.jsonl")
        },
        "template": f"file:{tmp_path / 'frame.jinja'}",
        "template_sha256": hashlib.sha256(FRAME.encode()).hexdigest(),
        "prompt_text_sha256": hashlib.sha256(texts.encode()).hexdigest(),
    }


def test_no_truncate_refuses_a_prompt_one_token_over_the_shortest_length_and_takes_one_that_fits(
    tmp_path: Path,
) -> None:
    before, after = _text("hotpotqa")
    size = len(before) + len(CONTEXT) + len(after)  # item 0's; item 1's question is as long
    _suite(tmp_path, lengths=(4096, size), truncate=False)  # exactly the length: kept
    with pytest.raises(SpecError) as refused:
        _suite(tmp_path, lengths=(4096, size - 1), truncate=False)
    assert str(refused.value) == (
        f"2 of 2 hotpotqa prompts exceed {size - 1} tokens (the longest has {size}) and --no-truncate "
        "forbids cutting them: raise --lengths, lower --samples, or let the suite cut their middle"
    )


def test_a_suite_run_is_refused_without_its_folder_or_with_an_unknown_task(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as refused:
        _suite(tmp_path, data=None)
    assert str(refused.value) == "longbench reads the suite's official files from a folder: pass --data DIR"
    with pytest.raises(SpecError) as refused:
        _suite(tmp_path, data=str(tmp_path / "frame.jinja"))
    assert str(refused.value) == (
        f"--data {tmp_path / 'frame.jinja'} is no folder: name the folder holding the longbench files"
    )
    with pytest.raises(SpecError) as refused:
        select("longbench", ("hotpotqa", "nosuch", "other"))
    assert str(refused.value) == (
        f"longbench has no task 'nosuch': use --suite-tasks with some of {', '.join(SUITES['longbench'])}"
    )
    assert [t.name for t in select("longbench-e", ())] == list(SUITES["longbench-e"])


def _parts(sizes: tuple[int, int, int]) -> list[np.ndarray]:
    """Three parts of consecutive ids from 0: before, context, after."""
    edges = np.cumsum((0, *sizes))
    return [np.arange(a, b, dtype=np.int32) for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize(
    ("sizes", "limit", "suite", "kept"),
    [
        # Exactly the limit: whole. One over: 2 + 2 of 5 (LongBench), 2 + 3 of 6 for v2's odd 5.
        ((1, 2, 1), 4, "longbench", ([0], [1, 2], [3])),
        ((1, 3, 1), 4, "longbench", ([0], [1, 3], [4])),
        ((1, 4, 1), 5, "longbench-v2", ([0], [1, 3, 4], [5])),
        ((1, 4, 1), 5, "infinitebench", ([0], [1, 4], [5])),
        # The cut inside the text before the document: it loses its end, the document all of it.
        ((4, 2, 1), 2, "longbench", ([0], [], [6])),
        # ... and inside the text after it.
        ((1, 2, 4), 3, "longbench-v2", ([0], [], [5, 6])),
        # Both ends reach into the document: 3 + 3 of 8 keep ids 0-2 and 5-7.
        ((1, 5, 2), 6, "longbench", ([0], [1, 2, 5], [6, 7])),
    ],
)
def test_the_middle_is_cut_from_whichever_parts_it_falls_in(
    sizes: tuple[int, int, int], limit: int, suite: str, kept: tuple[list[int], ...]
) -> None:
    cut = cut_middle(*_parts(sizes), limit=limit, suite=suite)
    assert (cut.before.tolist(), cut.context.tolist(), cut.after.tolist()) == tuple(kept)
    assert cut.tokens == sum(map(len, kept))
    assert all(part.dtype == np.int32 for part in (cut.before, cut.context, cut.after))


@pytest.mark.parametrize(
    ("tokens", "limit", "suite", "ends"),
    [
        (10, 10, "longbench", (10, 0)),
        (11, 10, "longbench", (5, 5)),
        (11, 10, "longbench-v2", (5, 5)),
        (12, 11, "longbench-v2", (5, 6)),
        (12, 11, "infinitebench", (5, 5)),
        (12, 11, "longbench-e", (5, 5)),
    ],
)
def test_the_ends_kept_at_the_limit_and_one_over(
    tokens: int, limit: int, suite: str, ends: tuple[int, int]
) -> None:
    assert kept_ends(tokens, limit, suite) == ends


def test_the_runs_system_prompt_is_the_samples_and_opens_its_frame(tmp_path: Path) -> None:
    run = _suite(tmp_path, system_prompt="Be brief.")
    sample = run.prepare(Cell("hotpotqa", 1024, None, 0))
    assert sample.text.system == "Be brief."
    before, after = _text("hotpotqa")
    # The frame's template writes each message's text in turn: the system prompt's, then the user's.
    assert "".join(map(chr, sample.prompt.ids)) == "<Be brief." + before + CONTEXT + after + ">"


class _CharsWithBos(CharTokenizer):
    """The char tokenizer with a BOS token: id 1."""

    def __init__(self) -> None:
        super().__init__()
        self.bos_id = 1


def test_a_continuation_task_is_sent_after_a_bos_alone(tmp_path: Path) -> None:
    run = _suite(tmp_path)
    bos = SuiteRun(run.spec, _CharsWithBos())
    before, after = _text("trec")
    ids = bos.prepare(Cell("trec", 1024, None, 0)).prompt.ids
    assert ids[0] == 1 and "".join(map(chr, ids[1:])) == before + CONTEXT + after
