"""RULER's variable tracking: the chain, its place in the noise, the solved example and the length."""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.errors import PromptError
from fathom.prompts import length_tolerance
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.ruler.suite import RulerTask
from fathom.tasks.ruler.vt import chain

TOKENIZERS = {name: load_tokenizer(name) for name in ("char", "cl100k_base")}
STATEMENT = re.compile(r"VAR ([A-Z]+) = (VAR ([A-Z]+)|\d+)")


def prepare(tokenizer: str, length: int, index: int = 0, seed: int = 0) -> Sample:
    spec = RunSpec("vt", "sim:perfect", tokenizer, (length,), (), 1, seed=seed, template="none")
    return RulerTask(spec, TOKENIZERS[tokenizer]).prepare(Cell("vt", length, None, index))


def context_of(sample: Sample, tokenizer: Tokenizer) -> str:
    prompt = sample.prompt
    return tokenizer.decode(
        prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
    )


def resolve(statements: list[tuple[str, str, str]]) -> dict[str, str]:
    """Every variable's value, following the assignments in order, as a reader would."""
    values: dict[str, str] = {}
    for name, right, source in statements:
        values[name] = values[source] if source else right
    return values


def test_a_chain_has_distinct_names_and_a_five_digit_value() -> None:
    for seed in range(200):
        names, value, statements = chain(random.Random(seed), 4, letters=3)
        assert len(set(names)) == 5 and "VAR" not in names
        assert 10000 <= int(value) < 99999
        assert statements[0] == f"VAR {names[0]} = {value}"
        assert statements[1:] == [f"VAR {b} = VAR {a}" for a, b in itertools.pairwise(names)]


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
@pytest.mark.parametrize("length", [1024, 4096, 16384, 65536])
def test_prompt_and_tokens_to_generate_fill_the_length(tokenizer: str, length: int) -> None:
    sample = prepare(tokenizer, length)
    target = length - 30
    assert sample.max_new_tokens == 30 and sample.prompt.target_tokens == target
    assert target - length_tolerance(target) <= len(sample.prompt.ids) <= target


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
def test_the_chain_sits_in_the_context_in_order_and_its_names_are_the_answers(tokenizer: str) -> None:
    sample = prepare(tokenizer, 8192, index=2)
    context = context_of(sample, TOKENIZERS[tokenizer])
    found = STATEMENT.findall(context)
    assert len(found) == 5  # the first assignment and four hops
    values = resolve(found)
    assert sorted(values) == sorted(sample.answers)
    assert set(values.values()) == {sample.question}
    assert sample.kind == "variables" and sample.query_keys == sample.answers
    # Where each statement landed is recorded, in chain order, spread over the context.
    needles = sample.prompt.needles
    assert len(needles) == 5
    depths = [n.depth for n in needles]
    assert depths == sorted(depths) and depths[0] >= 0.0 and depths[-1] <= 1.0
    for needle, statement in zip(needles, found, strict=True):
        text = TOKENIZERS[tokenizer].decode(
            sample.prompt.ids[needle.token_offset : needle.token_offset + needle.tokens].tolist()
        )
        assert text.strip().startswith(f"VAR {statement[0]} = ")
    # Noise around it is RULER's.
    assert context.count("The grass is green.") > 50


def test_a_solved_example_with_other_names_comes_first_in_the_head() -> None:
    tokenizer = TOKENIZERS["cl100k_base"]
    sample = prepare("cl100k_base", 4096, index=1)
    head = tokenizer.decode(sample.prompt.ids[: sample.prompt.head_tokens].tolist())
    assert head.count("Memorize and track the chain(s)") == 2  # the example's task, then the real one
    example, _ = head.rsplit("Memorize and track the chain(s)", 1)
    statements = STATEMENT.findall(example)
    values = resolve(statements)
    assert len(values) == 5 and all(len(name) == 3 for name in values)
    (value,) = set(values.values())
    # The example ends with its own answer, in chain order, after the answer prefix and the space
    # RULER adds before it (so two follow "they are:").
    names = " ".join(name for name, _, _ in statements)
    assert example.rstrip().endswith(
        f"{len(values)} variables are assgined the value {value}, they are:  {names}"
    )
    assert not set(values) & set(sample.answers)
    # The real question is asked after the context, whose last line ends with the blank line before
    # it, and the answer prefix names the value.
    assert sample.text.after.startswith("Question: Find all variables that are assigned the value {question}")
    assert context_of(sample, tokenizer).endswith("There and back again.\n\n")
    assert sample.text.answer_prefix.endswith(
        f"5 variables are assgined the value {sample.question}, they are: "
    )


def test_samples_are_seeded() -> None:
    first, again = prepare("cl100k_base", 4096), prepare("cl100k_base", 4096)
    other, reseeded = prepare("cl100k_base", 4096, index=1), prepare("cl100k_base", 4096, seed=1)
    assert first.prompt.sha256 == again.prompt.sha256
    assert len({first.prompt.sha256, other.prompt.sha256, reseeded.prompt.sha256}) == 3


def test_a_length_too_short_for_the_example_and_the_chain_is_refused() -> None:
    with pytest.raises(PromptError, match=r"length 400 is below .* of (\d+) tokens") as refused:
        prepare("cl100k_base", 400)
    assert "30 tokens to generate" in str(refused.value)
    # The length it asks for is enough, give or take the draw: each sample draws its own example.
    least = int(re.search(r"at least (\d+)", str(refused.value)).group(1))  # type: ignore[union-attr]
    assert len(prepare("cl100k_base", least + 32).prompt.ids) <= least + 2


@pytest.mark.parametrize("kind", ["ids", "text"])
def test_a_perfect_reader_names_every_variable(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "run"
    args = ["run", "vt", "--model", f"sim:perfect?input={kind}", "--tokenizer", "cl100k_base"]
    assert (
        main([*args, "--lengths", "1k,4k", "--samples", "4", "--run-dir", str(folder), "--no-progress"]) == 0
    )
    found = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    records, controls = [r for r in found if not r.get("control")], [r for r in found if r.get("control")]
    assert len(controls) == len(records) and all(c["error"] is None and c["score"] == 0.0 for c in controls)
    assert len(records) == 8 and all(r["error"] is None for r in records)
    assert all(r["score"] == 1.0 for r in records)
    assert all(len(r["needle_depths"]) == 5 for r in records)
