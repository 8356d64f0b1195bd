"""``fathom.export``'s details that its end-to-end tests leave open (issue #32, the fifth round of
mutation testing, docs/mutation.md): the ``examples`` generator, what each family's lines say they
read, how the check reads what a needle's context states, and the low-overlap items a record with no
context is taken to have drawn."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_store import record

from fathom.errors import SpecError
from fathom.export import CheckResult, Overlap, check_export, check_text, examples, write_examples
from fathom.export.check import (
    _PROMPT_WORDS,
    Drawn,
    _anchored,
    _family_terms,
    _read_export,
    _record_terms,
    _scope,
    _stating,
    _without_prompt_words,
)
from fathom.export.examples import Exported, ExportError, check_request, made
from fathom.export.families import answer_sentence
from fathom.prompts.latent import LATENT_VERSION, load_items
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell, SampleRecord
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks.mrcr import topics_of
from fathom.tasks.niah import NEEDLE_SETS_VERSION, NIAH_VERSION
from fathom.tasks.ruler.catalogue import RULER_VERSION
from fathom.tasks.ruler.splits import QA_SPLIT_VERSION


def test_the_examples_generator_yields_the_lines_an_export_writes_and_counts_with_the_tokenizer_given(
    tmp_path: Path,
) -> None:
    spec = RunSpec("niah", "export", "char", (2048,), (0.5,), 1, haystack_offset="random")
    write_examples(spec, 3, tmp_path / "out.jsonl")
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert list(examples(spec, 3)) == written and len(written) == 3
    # A tokenizer given counts the lengths in place of the spec's (cl100k_base here).
    given = list(examples(dataclasses.replace(spec, tokenizer="cl100k_base"), 2, load_tokenizer("char")))
    assert [example["meta"]["tokenizer"] for example in given] == ["char", "char"]
    assert given == written[:2]


@pytest.mark.parametrize(
    ("task", "options", "generators"),
    [
        ("babi", {}, {"babi": 1}),
        ("state", {"ops": (4,)}, {"state": 1}),
        ("listing", {"items": (8,)}, {"listing": 1}),
        ("mrcr", {"repeats": (2,)}, {"mrcr": 1}),
        (
            "niah",
            {},
            {"niah": NIAH_VERSION, "needle_sets": NEEDLE_SETS_VERSION, "latent": LATENT_VERSION},
        ),
        ("vt", {}, {"ruler": RULER_VERSION}),
        pytest.param(
            "qa_1", {}, {"ruler": RULER_VERSION, "qa_split": QA_SPLIT_VERSION}, marks=pytest.mark.ruler_data
        ),
    ],
)
def test_each_familys_lines_say_which_corpus_they_read_and_their_generators_versions(
    task: str, options: dict[str, Any], generators: dict[str, int]
) -> None:
    depths = (0.5,) if task == "niah" else ()
    spec = RunSpec(task, "export", "char", (2048,), depths, 1, corpus="code", **options)
    [example] = examples(spec, 1)
    read = {"vt": "noise", "qa_1": "squad"}  # RULER's vt reads its noise, qa_1 SQuAD's documents
    assert example["meta"]["corpus"] == read.get(task, "code")
    assert example["meta"]["generators"] == generators


@pytest.mark.parametrize(
    ("context", "values", "stated"),
    [
        # From the sentence's opening (after ". ", its space kept) or the line's (after the last
        # "\n"), up to each occurrence; an empty value states nothing.
        (
            "Noise here. The code for brave-signal is 1234. More.\nx\nThe code for calm-river is 1234.",
            ["1234", ""],
            [" The code for brave-signal is ", "The code for calm-river is "],
        ),
        ("One. Two. The code is 1234.", ["1234"], [" The code is "]),  # the last full stop before it
        ("1234 opens the context.", ["1234"], [""]),  # a value at the very start
        (". The code is 1234", ["1234"], [" The code is "]),  # a full stop at the very start
        ("\nThe code is 1234", ["1234"], ["The code is "]),  # a newline at the very start
        ("The code is 111.", ["11"], ["The code is ", "The code is 1"]),  # occurrences that overlap
        ("A is 12. B is 12. C is 12.", ["12"], ["A is ", " B is ", " C is "]),  # each, in order
    ],
)
def test_what_a_needles_context_states_before_each_value(
    context: str, values: list[str], stated: list[str]
) -> None:
    assert list(_stating(context, values)) == stated


def test_without_a_context_a_record_drew_the_one_item_that_asks_its_question() -> None:
    items = load_items()
    asked = Counter(q for item in items for q in (item.question, item.literal_question))
    once = next(item for item in items if asked[item.question] == 1)
    shared = next(item for item in items if asked[item.question] > 1)
    plain = dataclasses.replace(record(0), needle_context=None)
    assert _anchored(dataclasses.replace(plain, question=once.question), items, "") == [once]
    # Several items ask it: none of them is told (a context would say which).
    assert _anchored(dataclasses.replace(plain, question=shared.question), items, "") == []


def test_the_sf_needle_is_refused_naming_every_kind_an_export_takes() -> None:
    with pytest.raises(SpecError) as refused:
        check_request(RunSpec("niah", "export", "char", (2048,), (0.5,), 1, needle="sf"), 1)
    assert str(refused.value) == (
        "the sf needle is one fixed sentence, the same in every evaluation, so it cannot be exported "
        "without leaking it: use one of number, words, uuid, fact, split, chain, latent-1, "
        "latent-1-literal, latent-2, latent-2-literal"
    )


def test_a_listing_record_drew_its_ids_and_each_field_of_its_condition() -> None:
    base = dataclasses.replace(record(0), task="listing:8", answers=("#12345", "#23456"))
    asked = dataclasses.replace(base, question="Which records are there with `user=alice | action=login |`?")
    assert list(_family_terms(asked)) == [
        ("value", "#12345"),
        ("value", "#23456"),
        ("name", "user=alice"),
        ("name", "action=login"),
    ]
    plain = dataclasses.replace(base, question="Which records are there?")  # no condition asked
    assert list(_family_terms(plain)) == [("value", "#12345"), ("value", "#23456")]


def test_a_qa_question_no_dataset_item_asks_is_looked_for_alone() -> None:
    asked = dataclasses.replace(record(0), task="qa_1", question="Who wrote no such thing in 1066?")
    assert list(_family_terms(asked)) == [("question", "Who wrote no such thing in 1066?")]


def test_rulers_prompt_words_are_taken_out_of_their_familys_lines_only() -> None:
    opening = _PROMPT_WORDS["cwe"][0]
    assert opening.startswith("Below is a numbered list of words.")
    assert _without_prompt_words(f"{opening}apple", "cwe") == " apple"
    assert _without_prompt_words(f"{opening}apple", "listing") == f"{opening}apple"


def _result(overlaps: int, lines: int = 1, skipped: int = 0) -> CheckResult:
    drawn = [
        Drawn("value", f"{1000 + n}", Path("runs/a"), f"niah|L1024|D0.5000|S{n}") for n in range(overlaps)
    ]
    found = tuple(Overlap(d, tuple((line, "assistant") for line in range(3, 3 + lines))) for d in drawn)
    return CheckResult(Path("train.jsonl"), 9, (Path("runs/a"), Path("runs/b")), 7, skipped, 60, found)


def test_the_checks_verdict_without_overlaps_with_and_without_records_skipped() -> None:
    assert check_text(_result(0)) == [
        "no overlap: 9 examples of train.jsonl share no value, key, name or anchor with 7 records of 2 run "
        "folder(s) (60 looked for)"
    ]
    assert check_text(_result(0, skipped=4)) == [
        "no overlap: 9 examples of train.jsonl share no value, key, name or anchor with 7 records of 2 run "
        "folder(s) (60 looked for; 4 records with nothing to look for (sf's published sentence, state's "
        "small numbers, qa_synth) not compared)"
    ]


def test_the_check_lists_fifty_overlaps_each_with_its_first_line_and_counts_the_rest() -> None:
    one = check_text(_result(1))
    assert one == [
        "1 overlaps: 9 examples of train.jsonl share these with 7 records of 2 run folder(s):",
        "  value '1000' (from runs/a, sample niah|L1024|D0.5000|S0): export line 3 (assistant)",
    ]
    assert check_text(_result(1, lines=3))[1] == (
        "  value '1000' (from runs/a, sample niah|L1024|D0.5000|S0): export line 3 (assistant) and 2 more "
        "line(s)"
    )
    fifty = check_text(_result(50))
    assert len(fifty) == 51 and fifty[-1].startswith("  value '1049'")
    fifty_one = check_text(_result(51))
    assert len(fifty_one) == 52 and fifty_one[-1] == "  ... and 1 more"
    assert check_text(_result(3), most=2)[-1] == "  ... and 1 more"


def test_what_a_niah_record_drew_by_kind_and_an_sf_record_nothing() -> None:
    items = load_items()
    number = dataclasses.replace(record(0), needle_values=("1234567",), needle_context=None)
    assert list(_record_terms(number, items)) == [("value", "1234567"), ("value", "1234567")]
    assert list(_record_terms(dataclasses.replace(number, needle_kind="sf"), items)) == []
    # A keyed question's compounds: all of them without a context, those it states with one.
    keyed = dataclasses.replace(number, question="Which number was given for brave-signal and calm-river?")
    assert [t for t in _record_terms(keyed, items) if t[0] == "key"] == [
        ("key", "brave-signal"),
        ("key", "calm-river"),
    ]
    stated = dataclasses.replace(keyed, needle_context=("The number for brave-signal is 1234567.",))
    assert [t for t in _record_terms(stated, items) if t[0] == "key"] == [("key", "brave-signal")]


def test_a_ruler_record_drew_each_key_its_question_lists() -> None:
    ruler = dataclasses.replace(
        record(0),
        task="niah_multikey_2",
        needle_kind="numbers",
        question="brave-signal, calm-river, and amber-anchor",
        answers=("1234567",),
    )
    assert list(_record_terms(ruler, load_items())) == [
        ("value", "1234567"),
        ("key", "brave-signal"),
        ("key", "calm-river"),
        ("key", "amber-anchor"),
    ]


def test_an_mrcr_record_drew_its_samples_topics_and_its_answers_prefix() -> None:
    mrcr = dataclasses.replace(
        record(3), task="mrcr:2", length=4096, seed=5, answers=("Xq7Pz2Lm9Kabc: the piece",)
    )
    _, topics = topics_of(5, "mrcr:2", 4096, 3)
    assert len(topics) > 1
    assert list(_record_terms(mrcr, load_items())) == [
        *(("name", topic) for topic in topics),
        ("value", "Xq7Pz2Lm9K"),
    ]


def test_niahs_draws_are_told_apart_by_kind_and_hardness_and_the_default_kind_is_number() -> None:
    spec = RunSpec("niah", "export", "char", (2048,), (0.5,), 1, haystack_offset="random")
    plain = [example["meta"]["answers"] for example in examples(spec, 4)]
    assert [e["meta"]["answers"] for e in examples(dataclasses.replace(spec, needle="number"), 4)] == plain
    # One distractor more: another stream, so concatenated exports repeat no value.
    harder = [e["meta"]["answers"] for e in examples(dataclasses.replace(spec, distractors=1), 4)]
    assert not {a for answers in plain for a in answers} & {a for answers in harder for a in answers}


def test_two_kinds_exported_with_one_seed_ask_about_other_keys() -> None:
    spec = RunSpec("niah", "export", "char", (2048,), (0.5,), 1, haystack_offset="random")
    asked = {
        kind: {
            key
            for example in examples(dataclasses.replace(spec, needle=kind), 4)
            for key in re.findall(r" for ([a-z]+-[a-z]+)\?", example["messages"][0]["content"])
        }
        for kind in ("number", "uuid")
    }
    assert len(asked["number"]) == len(asked["uuid"]) == 4
    assert not asked["number"] & asked["uuid"]


# --- the sixth round (docs/mutation.md): what write_examples returns and refuses, and a line's task ---


def test_write_examples_returns_what_it_wrote_and_keeps_non_ascii_text_as_it_is(tmp_path: Path) -> None:
    # 2 lengths x 3 depths of the number kind: 6 cells for 5 examples.
    spec = RunSpec(
        "niah", "export", "char", (1024, 2048), (0.0, 0.5, 1.0), 1, system_prompt="Sé bref, 答えて."
    )
    out = tmp_path / "out.jsonl"
    assert write_examples(spec, 5, out) == Exported(out, 5, 6)
    text = out.read_bytes().decode("utf-8")
    # The system prompt written as it is, not as JSON's \u escapes.
    assert text.count('{"messages": [{"role": "system", "content": "Sé bref, 答えて."}') == 5
    assert "\\u" not in text


def test_write_examples_refuses_an_existing_file_a_folder_and_a_missing_folder(tmp_path: Path) -> None:
    spec = RunSpec("niah", "export", "char", (1024,), (0.5,), 1)
    out = tmp_path / "out.jsonl"
    out.write_text("mine\n")
    with pytest.raises(ExportError) as refused:
        write_examples(spec, 1, out)  # force is off unless asked
    assert str(refused.value) == f"'{out}' exists: pass --force to replace it, or choose another --out"
    assert out.read_text() == "mine\n"
    with pytest.raises(ExportError) as refused:
        write_examples(spec, 1, tmp_path, force=True)
    assert str(refused.value) == f"'{tmp_path}' is a folder: --out names the JSONL file to write"
    absent = tmp_path / "absent" / "out.jsonl"
    with pytest.raises(ExportError) as refused:
        write_examples(spec, 1, absent)
    assert str(refused.value) == f"'{tmp_path / 'absent'}' is no folder: create it, or choose another --out"


def test_a_line_whose_task_is_no_text_is_read_as_a_line_without_a_task(tmp_path: Path) -> None:
    export = tmp_path / "e.jsonl"
    messages = '"messages": [{"role": "user", "content": "hi"}]'
    export.write_text(
        f'{{{messages}, "meta": {{"task": 5}}}}\n{{{messages}, "meta": {{"task": "cwe"}}}}\n'
        f'{{{messages}, "meta": "cwe"}}\n'
    )
    assert list(_read_export(export)) == [
        (1, None, [("user", "hi")]),
        (2, "cwe", [("user", "hi")]),
        (3, None, [("user", "hi")]),
    ]


def test_the_assistants_turn_names_every_reference_or_the_first_where_any_is_right() -> None:
    spec = RunSpec("niah", "export", "char", (1024,), (0.5,), 1)
    task = made(spec, load_tokenizer("char"))
    sample = dataclasses.replace(
        task.prepare(Cell(*task.cells[0], 0)), answers=("a1", "b2", "c3"), scoring="all"
    )
    assert answer_sentence(" Answer: ", sample) == "Answer: a1, b2 and c3."
    assert answer_sentence(" Answer: ", dataclasses.replace(sample, answers=("x", "y"))) == "Answer: x and y."
    assert answer_sentence(" ", sample) == "a1, b2 and c3."  # a prefix of blanks is no prefix
    assert answer_sentence("Answer:", dataclasses.replace(sample, scoring="any")) == "Answer: a1."


def test_an_examples_meta_gives_each_needles_depth_and_role_the_gold_at_its_cells_depth() -> None:
    keys = ["task", "needle", "length", "depth", "needle_depths", "needle_roles", "answers", "corpus"]
    keys += ["tokenizer", "template", "seed", "index", "split", "version", "generators"]
    spec = RunSpec("niah", "export", "char", (1024,), (0.0, 1.0), 1)
    for index, example in enumerate(examples(spec, 2)):
        meta = example["meta"]
        assert list(meta) == keys
        # Each example its own sample, in order; a char tokenizer's template adds nothing ("none").
        assert (meta["index"], meta["template"]) == (index, "none")
        assert (meta["needle_depths"], meta["needle_roles"]) == ([meta["depth"]], ["gold"])
    depths: list[float] = []
    for example in examples(dataclasses.replace(spec, distractors=1), 5):
        meta = example["meta"]
        assert meta["needle_depths"][0] == meta["depth"] and len(meta["needle_depths"]) == 2
        assert meta["needle_roles"] == ["gold", "key-distractor"]
        depths.append(meta["needle_depths"][1])
    # A distractor's depth may be no cell's (3 of these 5): a fraction kept to 4 places (not 3, 5, 0).
    inner = [depth for depth in depths if 0 < depth < 1]
    assert len(inner) == 3 and all(round(depth, 4) == depth != round(depth, 3) for depth in inner)


@pytest.mark.parametrize("seed", [0, 3])
def test_the_cells_are_taken_in_the_seeds_shuffled_order_round_after_round(seed: int) -> None:
    # The order drawn here as the docstring of examples() says: Python's shuffle of the cells (task,
    # length, depth in their loops' order), seeded by sha256 of "seed|train|export-order".
    cells = [("niah", length, depth) for length in (1024, 2048) for depth in (0.0, 1.0)]
    material = hashlib.sha256(f"{seed}|train|export-order".encode()).digest()[:8]
    random.Random(int.from_bytes(material, "big")).shuffle(cells)
    spec = RunSpec("niah", "export", "char", (1024, 2048), (0.0, 1.0), 1, seed=seed)
    drawn = [(e["meta"]["task"], e["meta"]["length"], e["meta"]["depth"]) for e in examples(spec, 8)]
    assert drawn == cells + cells


def test_a_count_must_lie_in_one_to_a_million_and_only_exportable_tasks_are_taken() -> None:
    spec = RunSpec("niah", "export", "char", (1024,), (0.5,), 1)
    check_request(spec, 1)
    check_request(spec, 1_000_000)
    for count in (0, 1_000_001):
        with pytest.raises(SpecError) as refused:
            check_request(spec, count)
        assert str(refused.value) == f"--count must lie in 1..1,000,000, not {count}"
    with pytest.raises(SpecError) as refused:
        check_request(dataclasses.replace(spec, task="perplexity"), 1)
    assert str(refused.value) == (
        "'perplexity' cannot be exported: export takes niah, babi, babi:qa1, babi:qa2, babi:qa3, babi:qa4, "
        "babi:qa5, state, vt, cwe, fwe, qa_1, qa_2, listing, mrcr (the others draw their keys and words from "
        "whole vocabularies that evaluation uses, so no training part can be split off them without "
        "changing evaluation prompts)"
    )


def test_the_check_counts_the_records_compared_and_skipped_and_names_where_an_overlap_was_drawn(
    tmp_path: Path,
) -> None:
    number = RunSpec("niah", "sim:perfect", "char", (1024,), (0.0, 1.0), 1)
    folders = (tmp_path / "number", tmp_path / "sf")
    for folder, spec in zip(folders, (number, dataclasses.replace(number, needle="sf")), strict=True):
        assert run(spec, folder, show_progress=False).errors == 0
    first = next(r for r in RunFolder(folders[0]).records() if isinstance(r, SampleRecord) and not r.control)
    export = tmp_path / "e.jsonl"
    said = {"role": "assistant", "content": f"Answer: {first.answers[0]}."}
    export.write_text(json.dumps({"messages": [{"role": "user", "content": "Which?"}, said]}) + "\n")
    result = check_export(export, iter(folders))
    # Two number records (controls aside), each drawing its value and its key; two sf records skipped.
    assert (result.export, result.examples, result.runs) == (export, 1, folders)
    assert (result.records, result.skipped, result.drawn) == (2, 2, 4)
    assert result.overlaps == (
        Overlap(Drawn("value", first.answers[0], folders[0], first.sample_id), ((1, "assistant"),)),
    )


def test_a_family_is_named_by_the_task_before_its_first_colon() -> None:
    tasks = ("cwe", "qa_1", "listing:8", "cwe:a:b", "niah", "babi:qa1", "mrcr:2")
    assert [_scope(task) for task in tasks] == ["cwe", "qa_1", "listing", "cwe", None, None, None]


def test_an_export_is_read_past_blank_lines_and_each_bad_line_refused_whole(tmp_path: Path) -> None:
    export = tmp_path / "e.jsonl"
    line = '{"messages": [{"role": "user", "content": "hi"}]}\n'
    export.write_text(f"{line}\n  \n{line}")
    assert [number for number, _, _ in _read_export(export)] == [1, 4]
    refusals = {
        b"\xff\n": "is not UTF-8 text: give the JSONL file fathom export wrote",
        b"[]\n": "is not an exported example (TypeError: list indices must be integers or slices, not str): "
        "each line must be a JSON object with a 'messages' list of {role, content}",
        b'{"messages": [{"role": "user", "content": 5}]}\n': (
            "is not an exported example: a content is no text"
        ),
    }
    for bad, message in refusals.items():
        export.write_bytes(line.encode() + bad)
        with pytest.raises(ExportError) as refused:
            list(_read_export(export))
        assert str(refused.value) == f"{export} line 2 {message}"


def test_an_export_line_longer_than_any_example_is_refused_by_its_size_never_held_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fathom.export.check as check_module
    import fathom.run.lines as lines_module

    # A bound of 60 bytes stands for the real one (hundreds of MB), the same rule at its edge.
    monkeypatch.setattr(lines_module, "MAX_LINE_BYTES", 60)
    monkeypatch.setattr(check_module, "MAX_LINE_BYTES", 60)
    line = '{"messages": [{"role": "user", "content": "hi"}]}'  # 49 bytes
    export = tmp_path / "e.jsonl"
    at_bound = line.replace("hi", "h" * 13)  # 60 bytes, its newline aside: read
    export.write_text(f"{line}\n{at_bound}\n")
    assert [m for _, _, m in _read_export(export)] == [[("user", "hi")], [("user", "h" * 13)]]
    over = line.replace("hi", "h" * 14)  # 61 bytes: refused, with its size
    export.write_text(f"{line}\n{over}\n{line}\n")
    with pytest.raises(ExportError) as refused:
        list(_read_export(export))
    assert str(refused.value) == (
        f"{export} line 2 is 61 bytes, longer than any example fathom writes (60): "
        "give the JSONL file fathom export wrote"
    )
