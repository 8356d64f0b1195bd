"""Simulated models read the prompt: they answer only from a needle that is really there."""

from __future__ import annotations

import numpy as np
import pytest

from fathom.backends.base import Request
from fathom.backends.sim import NOT_FOUND, SimulatedBackend
from fathom.errors import SpecError
from fathom.haystack import load_corpus, tokenize_corpus
from fathom.needles import make_needle, needle_rng
from fathom.prompts import Prompt, PromptBuilder
from fathom.records import Needle
from fathom.tasks.niah import NIAH_TEXT
from fathom.templates import resolve_template
from fathom.tokenizers import load_tokenizer

TOKENIZER = load_tokenizer("cl100k_base")
BUILDER = PromptBuilder(
    TOKENIZER,
    resolve_template("none", TOKENIZER),
    NIAH_TEXT,
    tokenize_corpus(load_corpus("prose"), TOKENIZER),
)


def ask(model: str, prompt_ids: np.ndarray, needle: Needle, as_text: bool = False) -> str:
    backend = SimulatedBackend(model, TOKENIZER)
    text = TOKENIZER.decode(prompt_ids.tolist()) if as_text else None
    request = Request("s", prompt_ids, 32, text=text, query_keys=(needle.key,))
    return backend.generate([request])[0].text


def built(length: int, depth: float, seed: int = 0) -> tuple[Prompt, Needle]:
    needle = make_needle("number", needle_rng(seed))
    return BUILDER.build(length, depth, needle), needle


def found(model: str, length: int, depth: float, seed: int) -> bool:
    prompt, needle = built(length, depth, seed)
    return ask(model, prompt.ids, needle) != NOT_FOUND


def test_perfect_answers_with_the_needle_it_reads() -> None:
    prompt, needle = built(4096, 0.5)
    answer = ask("perfect", prompt.ids, needle)
    assert needle.answers[0] in answer
    assert answer == needle.text.strip()
    assert ask("perfect?input=text", prompt.ids, needle, as_text=True) == answer


def test_perfect_fails_when_the_builder_drops_the_needle() -> None:
    prompt, needle = built(4096, 0.5)
    (placed,) = prompt.needles
    start, stop = placed.token_offset, placed.token_offset + placed.tokens
    dropped = np.concatenate([prompt.ids[:start], prompt.ids[stop:]])
    assert ask("perfect", dropped, needle) == NOT_FOUND


def test_perfect_fails_when_the_builder_mangles_the_needle() -> None:
    prompt, needle = built(4096, 0.5)
    text = TOKENIZER.decode(prompt.ids.tolist())
    value = needle.answers[0]
    mangled_value = value[::-1] if value[::-1] != value else value[1:] + "0"
    mangled = np.asarray(TOKENIZER.encode_with_specials(text.replace(value, mangled_value)))
    answer = ask("perfect", mangled, needle)
    assert value not in answer and mangled_value in answer


def test_cliff_answers_inside_its_window_and_fails_beyond_it() -> None:
    inside = [found("cliff?window=8k", 4096, d, seed) for seed, d in enumerate([0.1, 0.5, 0.9] * 5)]
    beyond = [found("cliff?window=8k", 12000, d, seed) for seed, d in enumerate([0.1, 0.5, 0.9] * 5)]
    assert sum(inside) >= 13
    assert sum(beyond) <= 2


def test_lost_in_the_middle_is_worse_in_the_middle_than_at_the_edges() -> None:
    model = "lost-in-the-middle?window=16k&dip=0.9"
    middle = [found(model, 16384, 0.5, seed) for seed in range(30)]
    edges = [found(model, 16384, d, seed) for seed in range(15) for d in (0.0, 1.0)]
    assert sum(middle) / len(middle) < 0.5 < sum(edges) / len(edges)


def test_draws_are_deterministic_per_prompt_and_seed() -> None:
    prompt, needle = built(16384, 0.5, 4)
    answers = {ask("pi-decay?half=16k", prompt.ids, needle) for _ in range(3)}
    assert len(answers) == 1
    seeds = {ask(f"pi-decay?half=16k&seed={s}", prompt.ids, needle) for s in range(12)}
    assert len(seeds) == 2  # about half the seeds succeed at the half-way length


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("psychic", "unknown simulated model 'sim:psychic'"),
        ("cliff?depth=3", "no setting 'depth=3'"),
        ("cliff?window=lots", "token count"),
        ("yarn?slope=steep", "needs a number"),
    ],
)
def test_bad_simulated_models_are_refused(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        SimulatedBackend(spec, TOKENIZER)


def test_windows_are_reported_for_archetypes_that_have_one() -> None:
    assert SimulatedBackend("cliff?window=8k", TOKENIZER).trained_window == 8192
    assert SimulatedBackend("yarn", TOKENIZER).trained_window == 65536
    assert SimulatedBackend("perfect", TOKENIZER).trained_window is None


def test_a_key_repeated_through_the_context_is_one_draw_not_many() -> None:
    """Beyond its window, sim:cliff finds a word repeated thirty times (cwe's evidence) about as
    rarely as a single needle, and of several keys it can find some and miss others."""
    words = ("alpha", "bravo", "charlie", "delta")
    backend = SimulatedBackend("cliff?window=8k", TOKENIZER)
    entries = " ".join(f"{i + 1}. {words[i % 4]}" for i in range(120))  # as cwe numbers its list
    filler = tokenize_corpus(load_corpus("prose"), TOKENIZER).ids[:30_000].tolist()
    found_any, partly = 0, 0
    for seed in range(40):
        ids = np.asarray([*filler[seed : seed + 30_000], *TOKENIZER.encode(" " + entries)], dtype=np.int32)
        context = (0, len(ids))
        request = Request("s", ids, 32, query_keys=words, context=context)
        hits = sum(word in backend.generate([request])[0].text for word in words)
        found_any += hits > 0
        partly += 0 < hits < len(words)
    assert found_any <= 12  # p ~ 0.02 per key; 30 draws per key would find nearly every word
    halfway = SimulatedBackend("pi-decay?half=1k", TOKENIZER)  # p = 0.5 at this length
    for seed in range(40):
        ids = np.asarray([*filler[seed : seed + 200], *TOKENIZER.encode(" " + entries)], dtype=np.int32)
        request = Request("s", ids, 32, query_keys=words, context=(0, len(ids)))
        hits = sum(word in halfway.generate([request])[0].text for word in words)
        partly += 0 < hits < len(words)
    assert partly > 10
