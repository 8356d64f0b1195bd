"""Each hard needle kind tells a simulated reader that reads from one that matches patterns or words."""

from __future__ import annotations

import dataclasses

import pytest

from fathom.backends.base import Request
from fathom.backends.sim import SimulatedBackend
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.niah import NiahTask

CHAR = load_tokenizer("char")
SAMPLES = 12


def answers(model: str, **changes: object) -> list[tuple[bool, bool]]:
    """For each sample (4k characters, depths spread): whether the output holds every answer, and
    whether it holds a distractor's value."""
    spec = dataclasses.replace(RunSpec("niah", model, "char", (4096,), (0.5,), SAMPLES), **changes)
    task = NiahTask(spec, CHAR)
    backend = SimulatedBackend(model.removeprefix("sim:"), CHAR)
    outcomes = []
    for index in range(SAMPLES):
        sample = task.prepare(Cell("niah", 4096, index / (SAMPLES - 1), index))
        assert isinstance(sample, Sample) and sample.needles is not None
        prompt = sample.prompt
        request = Request(
            sample.cell.id,
            prompt.ids,
            32,
            query_keys=sample.query_keys,
            context=(prompt.head_tokens, prompt.head_tokens + prompt.context_tokens),
            patterns=sample.patterns,
            question=sample.question,
        )
        (completion,) = backend.generate([request])
        said = completion.text.lower()
        outcomes.append(
            (
                all(a.lower() in said for a in sample.answers),
                any(v.lower() in said for v in sample.needles.lures),
            )
        )
    return outcomes


def right(outcomes: list[tuple[bool, bool]]) -> int:
    return sum(found and not lured for found, lured in outcomes)


@pytest.mark.parametrize("needle", ["number", "words", "uuid", "fact", "split", "chain"])
def test_distractors_fool_the_pattern_matcher_and_not_the_reader(needle: str) -> None:
    assert right(answers("sim:perfect", needle=needle, distractors=4)) == SAMPLES
    # Without look-alikes the pattern-matcher is as good as the reader, so a plain sweep calls it
    # sound; only the code split in two halves, which it answers one half of, fails it anyway.
    assert right(answers("sim:pattern-matcher", needle=needle)) == (0 if needle == "split" else SAMPLES)
    fooled = answers("sim:pattern-matcher", needle=needle, distractors=4)
    assert sum(lured for _, lured in fooled) >= SAMPLES // 3


def test_several_needles_need_every_one_found() -> None:
    assert right(answers("sim:perfect", needles=3)) == SAMPLES
    # The pattern-matcher answers with one sentence: at most one of three.
    assert right(answers("sim:pattern-matcher", needles=3)) == 0


@pytest.mark.parametrize("hops", [1, 2])
def test_low_overlap_needles_defeat_the_literal_reader_and_not_their_literal_twins(hops: int) -> None:
    assert right(answers("sim:perfect", needle=f"latent-{hops}")) == SAMPLES
    assert right(answers("sim:literal", needle=f"latent-{hops}-literal")) == SAMPLES
    assert right(answers("sim:literal", needle=f"latent-{hops}")) == 0
    # Literal questions are what the plain needles ask too: the word reader passes them.
    assert right(answers("sim:literal", needle="number")) == SAMPLES
