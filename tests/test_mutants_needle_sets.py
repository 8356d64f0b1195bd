"""``fathom.prompts.split_needles`` where the needle sets' tests leave it open: which look-alike of a
split needle is which, and the draws of a chain pinned."""

from __future__ import annotations

import random
import re

from fathom.prompts.needle_sets import CLASS_DISTRACTOR, KEY_DISTRACTOR, Hardness, needle_set
from fathom.prompts.needles import needle_rng
from fathom.prompts.spaces import EVAL
from fathom.prompts.split_needles import Parts, draw_parts


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
