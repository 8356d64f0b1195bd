"""``fathom.prompts.split_needles`` where the needle sets' tests leave it open: which look-alike of a
split needle is which, and the draws of a chain pinned."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

from fathom.errors import SpecError
from fathom.prompts.latent import items_in
from fathom.prompts.names import NamePool
from fathom.prompts.needle_sets import CLASS_DISTRACTOR, GOLD, KEY_DISTRACTOR, Hardness, evidence, needle_set
from fathom.prompts.needle_styles import CODE
from fathom.prompts.needles import needle_rng
from fathom.prompts.spaces import EVAL, TRAIN
from fathom.prompts.split_needles import Parts, draw_parts, fresh, split_depths
from fathom.records import LITERAL_ROLE, Needle


def test_a_split_needles_key_look_alike_names_a_near_key_and_its_class_look_alike_the_door() -> None:
    made = needle_set("split", Hardness(distractors=2), 0.5, needle_rng(1, "split"))
    key = re.fullmatch(r" The first half of the vault code for (\S+) is \d+\.", made.placements[0].text)
    assert key is not None
    gold = key[1]
    lures = {p.role: p for p in made.placements[2:]}
    assert set(lures) == {KEY_DISTRACTOR, CLASS_DISTRACTOR}
    near = re.fullmatch(
        r" The first half of the vault code for (\w+)-(\w+) is (\d+)\.", lures[KEY_DISTRACTOR].text
    )
    assert near is not None and near[3] == lures[KEY_DISTRACTOR].value
    # A near-miss key: another key that keeps one of the gold key's two words.
    assert f"{near[1]}-{near[2]}" != gold and (near[1], near[2]) != tuple(gold.split("-"))
    assert near[1] == gold.split("-")[0] or near[2] == gold.split("-")[1]
    door = lures[CLASS_DISTRACTOR]
    assert door.text == f" The first half of the door code for {gold} is {door.value}."


def test_a_chains_draws_are_pinned() -> None:
    # The draw order: a person of two syllables ("Nei" + "kound"), the chest's adjective and noun,
    # then the town. A person of three syllables, or any other order, draws other words.
    assert draw_parts("chain", random.Random(0), EVAL) == Parts(
        texts=(
            " Neikound keeps the family ledger locked in the little pencil chest.",
            " The little pencil chest was sent to the town of Moskmoor last spring.",
        ),
        keys=("Neikound keeps the family ledger", "The little pencil chest was sent"),
        values=("little pencil chest", "Moskmoor"),
        question="In which town is the family ledger of Neikound now?",
        answers=("Moskmoor",),
        subject="Neikound",
        link="little pencil chest",
    )


def test_split_look_alikes_alternate_key_class_key_and_never_repeat_a_value() -> None:
    # Code halves of 1 to 5: the two parts take one or two of the five values, the three look-alikes
    # must take three others, distinct, in every sample (a repeat is likely in each of 20 samples).
    space = dataclasses.replace(EVAL, code_halves=(1, 5))
    for seed in range(20):
        made = needle_set("split", Hardness(distractors=3, gap=0.01), 0.5, needle_rng(seed, "split"), space)
        lures = made.placements[2:]
        assert [p.role for p in lures] == [KEY_DISTRACTOR, CLASS_DISTRACTOR, KEY_DISTRACTOR]
        assert "door code" in lures[1].text and "door code" not in lures[0].text + lures[2].text
        values = [p.value for p in lures]
        assert len(set(values)) == 3 and not set(values) & set(made.answers)


def test_a_chains_subjects_are_its_person_and_chest_and_a_splits_its_key() -> None:
    chain = needle_set("chain", Hardness(), 0.5, random.Random(0))
    assert chain.subjects == ("Neikound", "little pencil chest")  # the draws pinned above
    split = needle_set("split", Hardness(), 0.5, random.Random(0))
    assert split.subjects == ("old-yacht",)


def test_split_depths_go_back_to_the_haystacks_very_start() -> None:
    # 0.75 forward by 0.75 leaves the haystack; back by 0.75 lands on 0.0 exactly, which is inside it.
    assert split_depths(0.75, 0.75) == (0.75, 0.0)


def test_a_draw_that_only_repeats_taken_values_is_an_error() -> None:
    with pytest.raises(RuntimeError) as raised:
        fresh(lambda _: "taken", random.Random(0), {"taken"})
    assert str(raised.value) == "no fresh value"


def test_golds_are_drawn_in_the_style_and_space_asked() -> None:
    code = needle_set("number", Hardness(), 0.5, random.Random(0), style=CODE)
    assert code.placements[0].text.startswith("SPECIAL_MAGIC_NUMBER_OLD_YACHT = ")
    adjective, noun = needle_set("number", Hardness(), 0.5, random.Random(0), TRAIN).subjects[0].split("-")
    assert adjective in TRAIN.adjectives and noun in TRAIN.nouns
    (person,) = needle_set("fact", Hardness(), 0.5, random.Random(0), TRAIN).subjects
    assert all(word.lower().startswith(TRAIN.first_onsets) for word in person.split())
    assert not any(word.lower().startswith(EVAL.first_onsets) for word in person.split())


def test_several_golds_never_share_a_key() -> None:
    # Three adjectives and one noun: three keys only, so three golds often draw a key again, the
    # third one its first's as often as its second's, and each repeat is drawn again (a value repeats
    # far more rarely).
    space = dataclasses.replace(EVAL, adjectives=("red", "blue", "grey"), nouns=("fox",))
    for seed in range(20):
        made = needle_set("number", Hardness(needles=3), 0.5, random.Random(seed), space)
        assert sorted(made.subjects) == ["blue-fox", "grey-fox", "red-fox"]


def test_several_needles_spread_from_the_cells_depth_as_given() -> None:
    # The first needle at the cell's depth itself, even 1.0 (which modulo 1 would put at 0.0) or a
    # depth of more than six decimals; the others a third of the haystack on, rounded to six.
    def depths(depth: float, needles: int) -> list[float]:
        made = needle_set("number", Hardness(needles=needles), depth, random.Random(0))
        return [p.depth for p in made.placements]

    assert depths(1.0, 2) == [1.0, 0.5]
    assert depths(0.1234567, 1) == [0.1234567]
    assert depths(0.1, 3) == [0.1, 0.433333, 0.766667]


def test_a_distractor_with_no_room_far_enough_from_the_golds_is_refused_whole() -> None:
    with pytest.raises(SpecError) as raised:
        needle_set("number", Hardness(distractors=1, gap=0.6), 0.5, random.Random(0))
    assert str(raised.value) == "no room for a distractor 0.6 of the haystack away from needles at [0.5]"


def test_evidence_stops_before_the_answers_first_occurrence() -> None:
    needle = Needle("number", " The code 7 opens the door; the code is 7.", "Which code?", ("7",), "door")
    assert evidence(needle) == "The code"


def test_low_overlap_golds_are_of_distinct_groups_and_named_from_the_spaces_pool() -> None:
    # A pool of four given and four family names for four characters: each is named from it, not from
    # the shipped pool, with a given and a family name no other character of its sample has; the two
    # golds are of two groups (countries), and the two distractors of neither.
    pool = NamePool(("Ada", "Bea", "Cleo", "Dora"), ("Abbott", "Barker", "Carter", "Dawson"))
    space = dataclasses.replace(EVAL, names=pool)
    items = items_in("eval")
    for seed in range(30):
        made = needle_set("latent-1", Hardness(needles=2, distractors=2), 0.5, random.Random(seed), space)
        assert [p.role for p in made.placements] == [GOLD, GOLD, KEY_DISTRACTOR, KEY_DISTRACTOR]
        given, family = zip(*(p.value.split(" ") for p in made.placements), strict=True)
        assert sorted(given) == list(pool.given) and sorted(family) == list(pool.family)
        # Each placement's item, found by its sentence (the default form: the item's own needle).
        placed = [
            next(i for i in items if f" {i.needle}".replace("{name}", p.value) == p.text)
            for p in made.placements
        ]
        assert [item.key for item in placed[:2]] == list(made.keys)
        golds = {item.group for item in placed[:2]}
        assert len(golds) == 2 and not golds & {item.group for item in placed[2:]}


def test_a_literal_distractor_names_the_golds_last_place_away_from_it() -> None:
    sentences = (
        " A faded postcard of {place} hung crooked above the kitchen sink.",
        " The radio played a long documentary about {place} late that evening.",
        " Someone had left a guidebook to {place} on the seat of the night train.",
    )
    items = {item.key: item for item in items_in("eval")}
    for seed in range(5):
        hardness = Hardness(literal_distractor=True, gap=0.1)
        made = needle_set("latent-2", hardness, 0.5, random.Random(seed))
        gold, literal = made.placements
        place = items[made.keys[0]].chain[2]  # two hops: the anchor, its city, the country asked
        assert (literal.role, literal.value) == (LITERAL_ROLE, place)
        assert literal.text in {s.format(place=place) for s in sentences}
        assert isinstance(literal.depth, float) and abs(literal.depth - gold.depth) >= 0.1


def test_a_sets_question_kind_and_patterns_whole() -> None:
    two = needle_set("number", Hardness(needles=2), 0.5, random.Random(0))
    assert (
        two.question == "Which numbers were given as the special magic numbers for old-yacht and brief-fence?"
    )
    plural = needle_set("number", Hardness(needles=3), 0.5, random.Random(0))
    assert (plural.kind, plural.patterns) == ("number", ("special magic",))
    assert plural.question == (
        "Which numbers were given as the special magic numbers for old-yacht, brief-fence and rusty-mountain?"
    )
    # The pattern a pattern-matcher takes for evidence: the style's own, prose's for a fact, and the
    # key where neither has one (the sf needle).
    assert needle_set("number", Hardness(), 0.5, random.Random(0), style=CODE).patterns == ("SPECIAL_MAGIC_",)
    assert needle_set("fact", Hardness(), 0.5, random.Random(0)).patterns == ("settled in the town of",)
    assert needle_set("sf", Hardness(), 0.5, random.Random(0)).patterns == ("San Francisco",)
    latent = needle_set("latent-1", Hardness(needles=2), 0.5, random.Random(0))
    assert latent.patterns == ()
    assert latent.question == "Which character has been to Busan? Which character has been to London?"


def test_distractors_never_repeat_a_golds_value_or_each_others() -> None:
    # Magic numbers of 1 to 3: the gold takes one, the two key distractors (the first and third; the
    # second, a class distractor, states a uuid) must take the other two.
    space = dataclasses.replace(EVAL, numbers=(1, 3))
    for seed in range(20):
        made = needle_set("number", Hardness(distractors=3, gap=0.01), 0.5, random.Random(seed), space)
        numbers = [p.value for p in made.placements if p.role != CLASS_DISTRACTOR]
        assert sorted(numbers) == ["1", "2", "3"]


def test_a_fact_key_distractor_is_another_two_syllable_given_name_with_the_surname_pinned() -> None:
    made = needle_set("fact", Hardness(distractors=1, gap=0.01), 0.5, random.Random(0))
    assert [p.text for p in made.placements] == [
        " After many years abroad, Neikound Klouthtosk settled in the town of Funhaven.",
        " After many years abroad, Fuldaerk Klouthtosk settled in the town of Thuskbury.",
    ]
