"""NIAH with hard needles: distractors, several needles, split needles, haystack hygiene."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fathom.errors import PromptError, SpecError
from fathom.prompts.needle_sets import GOLD, PART, Hardness, needle_set
from fathom.prompts.needles import ADJECTIVES, NOUNS, needle_rng
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.niah import NIAH_SEVERAL_TEXT, NIAH_TEXT, NiahTask

CHAR = load_tokenizer("char")


def spec(**changes: object) -> RunSpec:
    base = RunSpec("niah", "sim:perfect", "char", (4096,), (0.0, 0.5, 1.0), 2)
    return dataclasses.replace(base, **changes)


def sample(task: NiahTask, depth: float = 0.5, index: int = 0, length: int = 4096) -> Sample:
    made = task.prepare(Cell("niah", length, depth, index))
    assert isinstance(made, Sample)
    return made


@pytest.mark.parametrize(
    ("changes", "roles"),
    [
        ({"distractors": 3}, [GOLD, "key-distractor", "class-distractor", "key-distractor"]),
        ({"needles": 3}, [GOLD] * 3),
        ({"needle": "split", "distractors": 1}, [PART, PART, "key-distractor"]),
        ({"needle": "chain"}, [PART, PART]),
    ],
)
def test_every_placement_is_in_the_prompt_once_where_recorded(
    changes: dict[str, object], roles: list[str]
) -> None:
    made = sample(NiahTask(spec(**changes), CHAR), depth=0.3)
    assert made.needles is not None
    assert [p.role for p in made.needles.placements] == roles
    text = CHAR.decode(made.prompt.ids.tolist())
    assert len(made.prompt.ids) == 4096
    for placement, inserted in zip(made.needles.placements, made.prompt.needles, strict=True):
        assert text.count(placement.text) == 1
        assert text.index(placement.text) == inserted.token_offset  # a character is a token
        assert inserted.depth == pytest.approx(placement.depth, abs=0.05)


def test_plain_runs_keep_their_words_and_identity() -> None:
    plain = NiahTask(spec(), CHAR)
    assert list(plain.variants) == ["niah"]
    assert plain.variants["niah"].builder.text.before == NIAH_TEXT.before
    assert "needle_sets" not in plain.identity()
    hard = NiahTask(spec(distractors=2), CHAR)
    # One answer: the plain words, so plain and distractor runs are a paired contrast.
    assert hard.variants["niah"].builder.text.before == NIAH_TEXT.before
    assert hard.identity()["needle_sets"] == 4
    several = NiahTask(spec(needles=2), CHAR)
    assert several.variants["niah"].builder.text.before == NIAH_SEVERAL_TEXT.before
    assert several.identity()["prompt_text_sha256"] != plain.identity()["prompt_text_sha256"]


def test_several_needles_are_graded_by_the_share_found_unless_told() -> None:
    assert NiahTask(spec(needles=3), CHAR).scoring == "share"
    assert NiahTask(spec(needles=3, scoring="contains"), CHAR).scoring == "contains"
    assert NiahTask(spec(distractors=3), CHAR).scoring == "contains"


def test_impossible_needles_are_refused_when_the_task_is_made() -> None:
    with pytest.raises(SpecError, match="sf needle is one fixed sentence"):
        NiahTask(spec(needle="sf", distractors=1), CHAR)
    with pytest.raises(SpecError, match="does not go with the chain needle"):
        NiahTask(spec(needle="chain", needles=2), CHAR)


def test_a_needle_the_corpus_already_holds_is_redrawn_with_the_reason(tmp_path: Path) -> None:
    # The first draw of the cell's needles, written into the corpus: the task must draw again.
    first = needle_set("number", Hardness(), 0.5, needle_rng(0, "niah", 4096, 0.5, 0))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    filler = "The river ran past the mill and on towards the sea. " * 200
    (corpus / "a.txt").write_text(filler + f"Her number was {first.answers[0]}. " + filler)
    made = sample(NiahTask(spec(corpus=f"dir:{corpus}"), CHAR))
    assert made.answers != first.answers
    assert made.redraws == (f"the corpus already holds '{first.answers[0]}'",)
    assert sample(NiahTask(spec(), CHAR)).redraws == ()


def test_a_corpus_that_holds_every_draw_is_refused(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    # Every adjective-noun key of the number needle, so any draw's key is there.
    keys = " ".join(f"The {a}-{n} rested." for a in ADJECTIVES for n in NOUNS)
    (corpus / "a.txt").write_text(keys)
    task = NiahTask(spec(corpus=f"dir:{corpus}"), CHAR)
    with pytest.raises(PromptError, match=r"holds some value of every number needle drawn \(21 tries"):
        task.prepare(Cell("niah", 4096, 0.5, 0))


def test_domains_are_an_axis_of_variants_that_draw_the_same_needles() -> None:
    task = NiahTask(spec(domains=("prose", "noise"), depths=(0.5,), samples=1, lengths=(2048, 4096)), CHAR)
    cells = list(task.cells())
    assert [c.task for c in cells] == ["niah:prose"] * 2 + ["niah:noise"] * 2
    made = {c.task: task.prepare(c) for c in cells if c.length == 2048}
    prose, noise = made["niah:prose"], made["niah:noise"]
    assert isinstance(prose, Sample) and isinstance(noise, Sample)
    assert prose.answers == noise.answers and prose.question == noise.question
    assert CHAR.decode(prose.prompt.ids.tolist()) != CHAR.decode(noise.prompt.ids.tolist())
    assert task.identity()["corpora"].keys() == {"prose", "noise"}


def test_a_low_overlap_needle_comes_with_its_literal_twin() -> None:
    task = NiahTask(spec(needle="latent-1", depths=(0.5,), samples=2), CHAR)
    cells = list(task.cells())
    assert [c.task for c in cells] == ["niah", "niah:literal"] * 2
    low, literal = (task.prepare(c) for c in cells[:2])
    assert isinstance(low, Sample) and isinstance(literal, Sample)
    assert low.answers == literal.answers and low.kind == "latent-1" and literal.kind == "latent-1-literal"
    assert low.question.startswith("Which character has been to ") and literal.question != low.question
    # The same haystack and needle: both prompts have their exact length, so the longer question
    # leaves a little less haystack at the end, but they agree up to the needle (a prefix cache's).
    assert low.needles is not None and literal.needles is not None
    assert low.needles.placements == literal.needles.placements
    shared = min(low.prompt.needles[0].token_offset, literal.prompt.needles[0].token_offset)
    assert shared > 1000 and (low.prompt.ids[:shared] == literal.prompt.ids[:shared]).all()
    assert list(NiahTask(spec(needle="latent-1-literal"), CHAR).variants) == ["niah"]


def test_twice_the_same_corpus_or_perplexity_over_several_is_refused() -> None:
    with pytest.raises(SpecError, match="names a corpus twice"):
        NiahTask(spec(domains=("prose", "prose")), CHAR)
    with pytest.raises(SpecError, match="--perplexity reads one corpus"):
        NiahTask(spec(domains=("prose", "noise"), perplexity=True), CHAR)


def test_random_haystack_offsets_give_each_sample_its_own_recorded_haystack() -> None:
    task = NiahTask(spec(haystack_offset="random", needle="latent-1", samples=3, depths=(0.5,)), CHAR)
    cells = list(task.cells())
    made = [task.prepare(c) for c in cells]
    assert all(isinstance(m, Sample) for m in made)
    offsets = [m.haystack_offset for m in made if isinstance(m, Sample)]
    # A literal twin reads its sample's haystack; the three samples read three.
    assert offsets[0::2] == offsets[1::2] and len(set(offsets)) == 3
    corpus = task.variants["niah"].builder.corpus
    assert all(o in set(corpus.boundaries.tolist()) for o in offsets if o is not None)
    first = made[0]
    assert isinstance(first, Sample) and first.haystack_offset is not None
    head = first.prompt.head_tokens
    assert (
        first.prompt.ids[head : head + 50] == corpus.ids[first.haystack_offset : first.haystack_offset + 50]
    ).all()
    assert sample(NiahTask(spec(), CHAR)).haystack_offset is None
    with pytest.raises(SpecError, match="unknown haystack offset 'middle': use one of start, random"):
        NiahTask(spec(haystack_offset="middle"), CHAR)


def test_a_needle_in_code_ends_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(400)))
    made = sample(NiahTask(spec(corpus=f"dir:{tmp_path}"), CHAR), depth=0.5)
    text = CHAR.decode(made.prompt.ids.tolist())
    (placement,) = made.needles.placements if made.needles else ()
    line = placement.text + "\n"
    assert text.count(line) == 1
    before = text[: text.index(line)]
    assert before.endswith("\n")  # it starts a line and ends one
