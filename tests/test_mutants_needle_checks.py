"""The refusals of ``fathom.prompts.needle_checks`` at their edges: each bound of a hardness visited at
its value and a step to either side, each message read whole where it names a number worked out here,
and the low-overlap checks on the parts an export draws from (withheld items, the train split)."""

from __future__ import annotations

import dataclasses

import pytest

from fathom.errors import SpecError
from fathom.prompts.latent import items_in
from fathom.prompts.latent_forms import DEFAULT_FORMS, Forms
from fathom.prompts.names import NamePoolError, Split
from fathom.prompts.needle_checks import MIN_SENTENCE_TOKENS, check_hardness, check_room
from fathom.prompts.needle_sets import Hardness
from fathom.prompts.spaces import EVAL, TRAIN, Space


def refused(kind: str, hardness: Hardness, message: str, space: Space = EVAL) -> None:
    """``check_hardness`` refuses with exactly ``message``."""
    with pytest.raises(SpecError) as raised:
        check_hardness(kind, hardness, space)
    assert str(raised.value) == message


def test_counts_are_refused_below_zero_distractors_and_one_needle_and_taken_at_them() -> None:
    check_hardness("number", Hardness(distractors=0, needles=1))
    message = "--distractors must be 0 or more and --needles 1 or more"
    refused("number", Hardness(distractors=-1), message)
    refused("number", Hardness(needles=0), message)


def test_the_sf_needle_takes_only_the_plain_hardness() -> None:
    check_hardness("sf", Hardness())
    message = "the sf needle is one fixed sentence: use --needle number, words, uuid or fact"
    refused("sf", Hardness(distractors=1), message)
    refused("sf", Hardness(needles=2), message)


@pytest.mark.parametrize("kind", ["split", "chain"])
def test_a_split_needle_is_one_fact_in_parts(kind: str) -> None:
    check_hardness(kind, Hardness(needles=1))
    refused(kind, Hardness(needles=2), f"--needles 2 does not go with the {kind} needle, one fact in parts")


def test_the_split_distance_lies_in_zero_to_one_with_one_included() -> None:
    for distance in (None, 1.0, 1e-9):
        check_hardness("split", Hardness(split_distance=distance))
    for distance, shown in ((0.0, "0"), (-0.25, "-0.25"), (1.0000001, "1")):
        refused(
            "split",
            Hardness(split_distance=distance),
            f"--split-distance must lie in (0, 1], a share of the haystack, not {shown}",
        )


def test_the_gap_lies_in_zero_to_a_half_with_zero_included() -> None:
    for gap in (0.0, 0.49):
        check_hardness("number", Hardness(gap=gap))
    for gap, shown in ((0.5, "0.5"), (-0.01, "-0.01")):
        refused("number", Hardness(gap=gap), f"the distractor gap must lie in [0, 0.5), not {shown}")


def test_golds_and_their_gaps_must_leave_room_for_distractors_at_exactly_a_whole_haystack() -> None:
    # 2 * gap * golds >= 1 is refused: 4 needles at a gap of 0.125 take the whole haystack (1.0).
    refused(
        "number",
        Hardness(distractors=1, needles=4, gap=0.125),
        "4 needles leave no room for distractors 0.125 of the haystack away from each: use fewer needles",
    )
    check_hardness("number", Hardness(distractors=1, needles=4, gap=0.124))
    # Without distractors the gap keeps nothing apart.
    check_hardness("number", Hardness(needles=4, gap=0.125))
    # A split needle's golds are its two parts: 2 * 0.25 * 2 = 1.0.
    refused(
        "split",
        Hardness(distractors=1, gap=0.25),
        "2 needles leave no room for distractors 0.25 of the haystack away from each: use fewer needles",
    )
    check_hardness("split", Hardness(distractors=1, gap=0.249))
    # A literal distractor needs the room a distractor does: 2 * 0.25 * 2 = 1.0.
    refused(
        "latent-1",
        Hardness(needles=2, gap=0.25, literal_distractor=True),
        "2 needles leave no room for distractors 0.25 of the haystack away from each: use fewer needles",
    )
    check_hardness("latent-1", Hardness(needles=2, gap=0.24, literal_distractor=True))


def groups(
    split: Split, hops: int, forms: Forms = DEFAULT_FORMS, withheld: frozenset[str] = frozenset()
) -> int:
    """The groups of the low-overlap items a latent needle of ``hops`` may come from, counted here."""
    return len(
        {item.group for item in items_in(split, hops) if item.id not in withheld and forms.fits(item.element)}
    )


def test_latent_needles_come_one_a_group_and_a_distractor_needs_a_group_of_its_own() -> None:
    everyone = groups("eval", 1)
    assert everyone == 39  # the eval part's one-hop items fall in 39 groups
    check_hardness("latent-1", Hardness(needles=everyone))
    refused(
        "latent-1",
        Hardness(needles=everyone + 1),
        f"--needles {everyone + 1}: latent-1 needles come from {everyone} groups, one a needle",
    )
    refused(
        "latent-1",
        Hardness(needles=everyone, distractors=1, gap=0.0),
        f"--needles {everyone} takes every group of latent-1 needles, leaving none for distractors: "
        f"use --needles {everyone - 1} or fewer",
    )
    check_hardness("latent-1", Hardness(needles=everyone - 1, distractors=1, gap=0.0))
    # Two hops, and only the relations that fit an anchor: fewer groups.
    home = Forms(relations=("home",))
    assert groups("eval", 2, home) == 34
    refused(
        "latent-2",
        Hardness(needles=35, gap=0.0, forms=home),
        "--needles 35: latent-2 needles come from 34 groups, one a needle",
    )
    check_hardness("latent-2", Hardness(needles=34, gap=0.0, forms=home))


def test_the_items_the_haystack_names_are_left_out_of_the_groups() -> None:
    items = items_in("eval", 1)
    # Withhold every item of one group: one group fewer, and the message says why.
    first = items[0].group
    withheld = frozenset(item.id for item in items if item.group == first)
    space = dataclasses.replace(EVAL, withheld=withheld)
    assert groups("eval", 1, withheld=withheld) == 38
    check_hardness("latent-1", Hardness(needles=38), space)
    refused(
        "latent-1",
        Hardness(needles=39),
        "--needles 39: latent-1 needles come from 38 groups (the eval part's, less those the haystack "
        "names), one a needle",
        space,
    )
    everything = dataclasses.replace(EVAL, withheld=frozenset(item.id for item in items))
    refused(
        "latent-1",
        Hardness(),
        "the haystack names a place of every latent-1 item of the eval part",
        everything,
    )


def test_the_train_split_has_its_own_groups_and_names() -> None:
    assert groups("train", 1) == 17
    check_hardness("latent-1", Hardness(needles=17), TRAIN)
    refused(
        "latent-1",
        Hardness(needles=18),
        "--needles 18: latent-1 needles come from 17 groups, one a needle",
        TRAIN,
    )
    # The train names pool holds 22 characters (25 given names, 22 family names): 2 needles and 20
    # distractors fill it, 21 are refused.
    check_hardness("latent-1", Hardness(needles=2, distractors=20, gap=0.0), TRAIN)
    with pytest.raises(NamePoolError) as raised:
        check_hardness("latent-1", Hardness(needles=2, distractors=21, gap=0.0), TRAIN)
    assert str(raised.value) == (
        "--distractors 21: a low-overlap sample names 23 characters, but the train names pool, less the "
        "names the haystack holds, has 25 given and 22 family names (one of each a character): use "
        "--distractors 20 or fewer"
    )


@pytest.mark.parametrize("kind", ["number", "split", "sf"])
def test_low_overlap_options_are_refused_on_other_needles(kind: str) -> None:
    refused(
        kind,
        Hardness(literal_distractor=True, gap=0.0),
        f"--literal-distractor names a low-overlap question's place; the {kind} needle has none: "
        "use --needle latent-1 or latent-2",
    )
    refused(
        kind,
        Hardness(forms=Forms(orders=("place-first",))),
        f"--relations, --needle-orders and --question-templates shape low-overlap needles; the {kind} "
        "needle has none: use --needle latent-1 or latent-2",
    )


def test_room_is_refused_one_token_short_of_the_sentences_and_taken_at_exactly_them() -> None:
    assert MIN_SENTENCE_TOKENS == 6
    # number: 1 gold + 9 distractors = 10 sentences, 60 tokens at least.
    check_room("number", Hardness(distractors=9), 60)
    with pytest.raises(SpecError) as raised:
        check_room("number", Hardness(distractors=9), 59)
    # 59 // 6 = 9 sentences, less the 1 gold: 8 distractors.
    assert str(raised.value) == (
        "--distractors 9: a sample hides 10 sentences of 6 tokens or more, more than the shortest length "
        "(59 tokens) holds: use --distractors 8 or fewer, or longer --lengths"
    )
    # split: 2 golds (its parts) + 3 distractors = 5 sentences, 30 tokens.
    check_room("split", Hardness(distractors=3), 30)
    with pytest.raises(SpecError, match=r"hides 5 sentences .* use --distractors 2 or fewer"):
        check_room("split", Hardness(distractors=3), 29)
    # latent-1, 2 needles, a literal distractor each: 2 + 2 + 1 = 5 sentences, 30 tokens.
    literal = Hardness(needles=2, distractors=1, literal_distractor=True)
    check_room("latent-1", literal, 30)
    with pytest.raises(SpecError, match=r"hides 5 sentences .* use --distractors 0 or fewer"):
        check_room("latent-1", literal, 29)
    # Room for fewer sentences than the golds alone: 0 distractors, never a negative count.
    with pytest.raises(SpecError, match=r"hides 5 sentences .* use --distractors 0 or fewer"):
        check_room("latent-1", literal, 12)
