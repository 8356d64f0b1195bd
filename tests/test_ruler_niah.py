"""RULER's needle tasks: lengths, needles, wording and distractors, for every variant."""

from __future__ import annotations

import dataclasses
import re

import pytest

from fathom.errors import SpecError
from fathom.prompts import length_tolerance
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.registry import create_task
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.ruler.catalogue import VARIANTS
from fathom.tasks.ruler.suite import RulerTask

NEEDLE_TASKS = [
    pytest.param(name, marks=pytest.mark.essays) if variant.params["haystack"] == "essay" else name
    for name, variant in VARIANTS.items()
    if variant.family == "niah"
]
TOKENIZERS = {name: load_tokenizer(name) for name in ("char", "cl100k_base")}
NEEDLE_LINE = re.compile(r"One of the special magic (\w+) for ([\w-]+) is: ([\w-]+)\.")


def prepare(task: str, tokenizer: str, length: int, index: int = 0, seed: int = 0) -> Sample:
    spec = RunSpec(task, "sim:perfect", tokenizer, (length,), (), 1, seed=seed, template="none")
    return RulerTask(spec, TOKENIZERS[tokenizer]).prepare(Cell(task, length, None, index))


def context_of(sample: Sample, tokenizer: Tokenizer) -> str:
    prompt = sample.prompt
    return tokenizer.decode(
        prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
    )


@pytest.mark.parametrize("task", NEEDLE_TASKS)
@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
@pytest.mark.parametrize("length", [1024, 4096, 16384])
def test_prompt_and_tokens_to_generate_fill_the_length_without_passing_it(
    task: str, tokenizer: str, length: int
) -> None:
    sample = prepare(task, tokenizer, length)
    target = length - sample.max_new_tokens
    assert sample.max_new_tokens == 128 and sample.prompt.target_tokens == target
    assert target - length_tolerance(target) <= len(sample.prompt.ids) <= target


@pytest.mark.parametrize("task", NEEDLE_TASKS)
def test_each_needle_is_in_the_context_once_and_answers_come_from_the_asked_keys(task: str) -> None:
    tokenizer = TOKENIZERS["cl100k_base"]
    params = VARIANTS[task].params
    sample = prepare(task, "cl100k_base", 8192, index=1)
    context = context_of(sample, tokenizer)
    lines = NEEDLE_LINE.findall(context)
    asked = sample.query_keys
    assert len(asked) == params["queries"]
    placed = [(key, value) for _kind, key, value in lines if key in asked]
    assert len(placed) == params["queries"] * params["values"] == len(sample.answers)
    assert sorted(value for _, value in placed) == sorted(sample.answers)
    for answer in sample.answers:
        assert context.count(answer) == 1
    # Every needle of the sample was recorded where it landed, in order of depth.
    needles = max(params["keys"], params["queries"]) * params["values"]
    assert len(sample.prompt.needles) == needles
    depths = [n.depth for n in sample.prompt.needles]
    assert depths == sorted(depths) and all(0.0 <= d <= 1.0 for d in depths)
    for needle in sample.prompt.needles:
        text = tokenizer.decode(
            sample.prompt.ids[needle.token_offset : needle.token_offset + needle.tokens].tolist()
        )
        assert NEEDLE_LINE.fullmatch(text.strip())


def test_distractor_lines_never_name_the_asked_key() -> None:
    tokenizer = TOKENIZERS["cl100k_base"]
    for task in ("niah_multikey_2", "niah_multikey_3"):
        sample = prepare(task, "cl100k_base", 16384)
        lines = NEEDLE_LINE.findall(context_of(sample, tokenizer))
        assert len(lines) > 100  # the whole haystack is needles
        (key,) = sample.query_keys
        assert sum(found == key for _kind, found, _value in lines) == 1


@pytest.mark.essays
def test_one_value_asked_reads_in_the_singular_as_in_ruler() -> None:
    single = prepare("niah_single_3", "cl100k_base", 4096)
    assert single.text.before.startswith("A special magic uuid is hidden")
    assert single.text.after.startswith("\nWhat is the special magic uuid for {question}")
    assert single.text.answer_prefix.endswith("mentioned in the provided text is")
    several = prepare("niah_multivalue", "cl100k_base", 4096)
    assert several.text.before.startswith("Some special magic numbers are hidden")
    assert several.text.after.startswith("\nWhat are all the special magic numbers for {question}")
    multi = prepare("niah_multiquery", "cl100k_base", 4096)
    assert multi.question.count(", ") == 3 and ", and " in multi.question
    assert multi.question in multi.text.answer_prefix


@pytest.mark.essays
def test_samples_are_seeded() -> None:
    first = prepare("niah_multikey_1", "cl100k_base", 4096, index=0)
    again = prepare("niah_multikey_1", "cl100k_base", 4096, index=0)
    other = prepare("niah_multikey_1", "cl100k_base", 4096, index=1)
    reseeded = prepare("niah_multikey_1", "cl100k_base", 4096, index=0, seed=1)
    assert first.prompt.sha256 == again.prompt.sha256
    assert len({first.prompt.sha256, other.prompt.sha256, reseeded.prompt.sha256}) == 3


@pytest.mark.essays
def test_essay_tasks_use_rulers_essays_and_noise_tasks_the_noise() -> None:
    tokenizer = TOKENIZERS["cl100k_base"]
    assert "The grass is green." in context_of(prepare("niah_single_1", "cl100k_base", 4096), tokenizer)
    essay = context_of(prepare("niah_single_2", "cl100k_base", 4096), tokenizer)
    assert "The grass is green." not in essay and len(set(essay.split())) > 500


@pytest.mark.parametrize(
    ("change", "message"),
    [({"depths": (0.5,)}, "drop --depths"), ({"needle": "uuid"}, "drop --needle")],
)
def test_options_that_do_not_apply_are_refused(change: dict[str, object], message: str) -> None:
    spec = RunSpec("niah_single_2", "sim:perfect", "char", (4096,), (), 1)
    with pytest.raises(SpecError, match=message):
        create_task(dataclasses.replace(spec, **change), TOKENIZERS["char"])  # type: ignore[arg-type]
