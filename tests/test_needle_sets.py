import re

import pytest

from fathom.errors import SpecError
from fathom.prompts.needle_checks import check_hardness
from fathom.prompts.needle_sets import (
    CLASS_DISTRACTOR,
    GOLD,
    KEY_DISTRACTOR,
    PART,
    Hardness,
    evidence,
    needle_set,
)
from fathom.prompts.needles import make_needle, needle_rng
from fathom.prompts.split_needles import split_depths

KEYED = ("number", "words", "uuid", "fact")
# Each keyed kind's needle up to its value, for the name (the key, or the fact's person) it is about.
EVIDENCE = {
    "number": "One of the special magic numbers for NAME is:",
    "words": "The secret passphrase chosen for NAME is",
    "uuid": "The special magic identifier for NAME is:",
    "fact": "After many years abroad, NAME settled in the town of",
}


@pytest.mark.parametrize("kind", [*KEYED, "sf"])
def test_plain_hardness_is_the_one_needle_drawn_as_before(kind: str) -> None:
    needle = make_needle(kind, needle_rng(3, "niah", 1024, 0.4, 0))
    made = needle_set(kind, Hardness(), 0.4, needle_rng(3, "niah", 1024, 0.4, 0))
    assert [(p.text, p.depth, p.role) for p in made.placements] == [(needle.text, 0.4, GOLD)]
    assert (made.question, made.answers, made.lures) == (needle.question, needle.answers, ())


@pytest.mark.parametrize("kind", KEYED)
@pytest.mark.parametrize("seed", range(5))
def test_distractors_are_near_misses_that_never_answer(kind: str, seed: int) -> None:
    made = needle_set(kind, Hardness(distractors=4, gap=0.1), 0.5, needle_rng(seed, kind))
    gold, *others = made.placements
    assert gold.role == GOLD and [p.role for p in others] == [KEY_DISTRACTOR, CLASS_DISTRACTOR] * 2
    # Each states a value of its own, none of them the answer, and each sits the gap away from the gold.
    values = [p.value for p in made.placements]
    assert len(set(values)) == len(values) and made.lures == tuple(values[1:])
    assert all(abs(p.depth - 0.5) >= 0.1 for p in others)
    # Only the gold holds the phrase that marks the evidence; every distractor shares the template's
    # wording or a word of the gold's key, which is what makes it a look-alike.
    (phrase,) = made.keys
    assert phrase in gold.text and not any(phrase in p.text for p in others)
    key_words = make_needle(kind, needle_rng(seed, kind)).key.replace("-", " ").split()
    assert all(made.patterns[0] in p.text or any(w in p.text for w in key_words) for p in others)


@pytest.mark.parametrize("kind", ("number", "words", "uuid"))
def test_keyed_distractors_share_the_key_or_one_of_its_words(kind: str) -> None:
    made = needle_set(kind, Hardness(distractors=2), 0.2, needle_rng(1, kind))
    gold_key = make_needle(kind, needle_rng(1, kind)).key
    near, same = made.placements[1:]
    near_key = near.text.split(" for ")[1].split(" is")[0]
    assert near_key != gold_key and len(set(near_key.split("-")) & set(gold_key.split("-"))) == 1
    # The class distractor names the same key in another kind's sentence.
    assert (
        f" for {gold_key} is" in same.text
        and same.text.split(" for ")[0] != made.placements[0].text.split(" for ")[0]
    )


def test_a_fact_distractor_keeps_the_surname_or_the_person() -> None:
    made = needle_set("fact", Hardness(distractors=2), 0.2, needle_rng(2, "fact"))
    person = make_needle("fact", needle_rng(2, "fact")).key
    near, same = made.placements[1:]
    assert person.split()[1] in near.text and person not in near.text
    assert person in same.text and "settled" not in same.text


@pytest.mark.parametrize("kind", KEYED)
def test_several_needles_are_spread_and_all_asked_for(kind: str) -> None:
    made = needle_set(kind, Hardness(needles=4), 0.75, needle_rng(0, kind))
    assert [p.depth for p in made.placements] == [0.75, 0.0, 0.25, 0.5]
    assert all(p.role == GOLD for p in made.placements) and len(set(made.answers)) == 4
    assert made.answers == tuple(p.value for p in made.placements)
    # Each placement is its kind's sentence, written out here: the evidence key is the sentence's words
    # before the value, for the name the sentence is about, and every name is asked for.
    evidence_of = EVIDENCE[kind]
    sentences = [
        re.fullmatch(f" {re.escape(evidence_of).replace('NAME', '(.+)')} (.+)\\.", p.text)
        for p in made.placements
    ]
    assert all(sentences), [p.text for p in made.placements]
    names = [m.group(1) for m in sentences if m]
    assert made.keys == tuple(evidence_of.replace("NAME", name) for name in names)
    assert made.answers == tuple(m.group(2) for m in sentences if m)
    assert len(set(names)) == 4 and all(name in made.question for name in names)


def test_split_parts_land_the_distance_apart_and_both_halves_are_the_answer() -> None:
    made = needle_set("split", Hardness(split_distance=0.3), 0.9, needle_rng(0, "split"))
    first, second = made.placements
    assert (first.role, second.role) == (PART, PART)
    assert (first.depth, second.depth) == pytest.approx((0.9, 0.6))
    assert made.answers == (first.value, second.value) and first.value in first.text
    assert "first half" in first.text and "second half" in second.text


def test_chain_answer_is_only_in_the_second_hop() -> None:
    made = needle_set("chain", Hardness(distractors=2), 0.1, needle_rng(4, "chain"))
    first, second, *lures = made.placements
    (place,) = made.answers
    chest = first.value
    assert place in second.text and place not in first.text and place not in made.question
    assert chest in first.text and chest in second.text and chest not in made.question
    assert [p.role for p in lures] == [KEY_DISTRACTOR, CLASS_DISTRACTOR]
    assert chest.split()[1] in lures[0].text and chest not in lures[0].text


def test_a_drawn_split_distance_varies_between_samples() -> None:
    depths = [
        needle_set("split", Hardness(split_distance=None), 0.5, needle_rng(i)).placements for i in range(8)
    ]
    distances = {round(abs(a.depth - b.depth), 6) for a, b in depths}
    assert len(distances) == 8 and all(0.05 <= d <= 0.5 for d in distances)


def test_split_depths_go_back_where_forward_leaves_the_haystack() -> None:
    assert split_depths(0.2, 0.5) == (0.2, 0.7)
    assert split_depths(0.8, 0.5) == pytest.approx((0.8, 0.3))
    assert split_depths(0.5, 0.5) == (0.5, 1.0)
    with pytest.raises(
        SpecError, match=r"depth 0.5 cannot have its parts 0.75 .* --split-distance 0.5 or less"
    ):
        split_depths(0.5, 0.75)


def test_evidence_is_the_words_before_the_answer_or_the_key() -> None:
    number = make_needle("number", needle_rng(0))
    assert evidence(number) == f"One of the special magic numbers for {number.key} is:"


@pytest.mark.parametrize(
    ("kind", "hardness", "message"),
    [
        ("sf", Hardness(distractors=1), "sf needle is one fixed sentence"),
        ("split", Hardness(needles=2), "does not go with the split needle"),
        ("number", Hardness(distractors=-1), "--distractors must be 0 or more"),
        ("number", Hardness(needles=0), "--needles 1 or more"),
        ("chain", Hardness(split_distance=1.5), r"--split-distance must lie in \(0, 1\]"),
        ("number", Hardness(distractors=1, needles=5, gap=0.1), "5 needles leave no room"),
    ],
)
def test_impossible_hardness_is_refused(kind: str, hardness: Hardness, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        check_hardness(kind, hardness)


def test_possible_hardness_passes() -> None:
    check_hardness("number", Hardness(distractors=10, needles=4, gap=0.12))
    check_hardness("chain", Hardness(distractors=3, split_distance=None))


@pytest.mark.parametrize("seed", range(4))
def test_overlap_separates_low_overlap_needles_from_literal_and_plain_ones(seed: int) -> None:
    def overlap(kind: str) -> tuple[int, float]:
        return needle_set(kind, Hardness(), 0.5, needle_rng(seed, kind)).overlap

    for hops in (1, 2):
        shared, rouge = overlap(f"latent-{hops}")
        literal_shared, literal_rouge = overlap(f"latent-{hops}-literal")
        assert shared == 0 and rouge < 0.25 and literal_shared >= 2 and literal_rouge > 0.6
    # The plain needles' questions repeat their key and template words.
    assert overlap("number")[0] >= 4 and overlap("fact")[0] >= 2
