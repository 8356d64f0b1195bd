"""Refusals of what no sample could be built for, made before any needle is drawn: hardness that
does not go with the needle kind, more groups or names than the items and the pool hold, and more
sentences than the shortest length holds.
"""

from __future__ import annotations

from fathom.errors import SpecError
from fathom.prompts.latent import items_in
from fathom.prompts.names import check_pool
from fathom.prompts.needle_sets import LATENT_KINDS, SPLIT_KINDS, Hardness
from fathom.prompts.spaces import EVAL, Space

# The fewest tokens any needle sentence takes, of any kind and style, in any tokenizer fathom reads
# (the shortest, a reStructuredText field, is 9 with cl100k; tests/test_latent_forms.py checks the bound).
MIN_SENTENCE_TOKENS = 6


def check_hardness(kind: str, hardness: Hardness, space: Space = EVAL) -> None:
    """Refuse what no sample could be built for, before any is."""
    if hardness.distractors < 0 or hardness.needles < 1:
        raise SpecError("--distractors must be 0 or more and --needles 1 or more")
    if kind == "sf" and not hardness.plain:
        raise SpecError("the sf needle is one fixed sentence: use --needle number, words, uuid or fact")
    if kind in SPLIT_KINDS and hardness.needles > 1:
        raise SpecError(f"--needles {hardness.needles} does not go with the {kind} needle, one fact in parts")
    distance = hardness.split_distance
    if distance is not None and not 0.0 < distance <= 1.0:
        raise SpecError(f"--split-distance must lie in (0, 1], a share of the haystack, not {distance:g}")
    if not 0.0 <= hardness.gap < 0.5:
        raise SpecError(f"the distractor gap must lie in [0, 0.5), not {hardness.gap:g}")
    if kind in LATENT_KINDS:
        hops = LATENT_KINDS[kind][0]
        groups = len(
            {
                item.group
                for item in items_in(space.split, hops)
                if item.id not in space.withheld and hardness.forms.fits(item.element)
            }
        )
        if not groups:
            raise SpecError(f"the haystack names a place of every {kind} item of the {space.split} part")
        if hardness.needles > groups:
            part = f" (the {space.split} part's, less those the haystack names)" if space.withheld else ""
            raise SpecError(
                f"--needles {hardness.needles}: {kind} needles come from {groups} groups{part}, one a needle"
            )
        check_pool(space.names, hardness.needles, hardness.distractors, space.split)
        if hardness.distractors and hardness.needles == groups:  # a distractor's group is no gold's
            raise SpecError(
                f"--needles {hardness.needles} takes every group of {kind} needles, leaving none for "
                f"distractors: use --needles {groups - 1} or fewer"
            )
    if hardness.literal_distractor and kind not in LATENT_KINDS:
        raise SpecError(
            f"--literal-distractor names a low-overlap question's place; the {kind} needle has none: "
            "use --needle latent-1 or latent-2"
        )
    if not hardness.forms.plain and kind not in LATENT_KINDS:
        raise SpecError(
            f"--relations, --needle-orders and --question-templates shape low-overlap needles; the {kind} "
            "needle has none: use --needle latent-1 or latent-2"
        )
    golds = _golds(kind, hardness)
    if (hardness.distractors or hardness.literal_distractor) and 2 * hardness.gap * golds >= 1.0:
        raise SpecError(
            f"{golds} needles leave no room for distractors {hardness.gap:g} of the haystack away from "
            "each: use fewer needles"
        )


def _golds(kind: str, hardness: Hardness) -> int:
    """The gold sentences of a sample: its needles, or a split needle's two parts."""
    return 2 if kind in SPLIT_KINDS else hardness.needles


def _sentences(kind: str, hardness: Hardness) -> int:
    """How many sentences a sample of ``kind`` hides: its golds, its distractors and its literal
    distractors."""
    return (
        _golds(kind, hardness)
        + hardness.distractors
        + (hardness.needles if hardness.literal_distractor else 0)
    )


def check_room(kind: str, hardness: Hardness, shortest: int) -> None:
    """Refuse, from arithmetic alone and before any needle is drawn, more sentences than the shortest
    length can hold: each takes MIN_SENTENCE_TOKENS or more, so a million distractors are refused at
    once rather than after a million are built."""
    count = _sentences(kind, hardness)
    if count * MIN_SENTENCE_TOKENS > shortest:
        room = max(shortest // MIN_SENTENCE_TOKENS - (count - hardness.distractors), 0)
        raise SpecError(
            f"--distractors {hardness.distractors}: a sample hides {count} sentences of "
            f"{MIN_SENTENCE_TOKENS} tokens or more, more than the shortest length ({shortest} tokens) "
            f"holds: use --distractors {room} or fewer, or longer --lengths"
        )
