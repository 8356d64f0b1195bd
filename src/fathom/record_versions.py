"""How a line of samples.jsonl written by an older fathom is read: one named step per record schema.

Each step turns a record of one schema into the next (``v1_to_v2``, ...); ``RECORDS`` runs them from
the schema a record was written in (``fathom.schemas.Versions``). Perplexity records began in schema 3.
``ADDED`` names the optional fields each schema added to a sample's record (``fathom.records`` leaves
them out at their defaults): a record of the schema before that holds one is no record of either.
"""

from __future__ import annotations

from typing import Any

from fathom.schemas import RECORD_SCHEMA, Versions

ADDED: dict[int, tuple[str, ...]] = {
    5: (
        "needle_roles",
        "needle_values",
        "lured",
        "haystack_offset",
        "redraws",
        "haystack_similarity",
        "overlap_words",
        "overlap_rouge1",
    ),
    6: ("item_id", "item_groups", "original_tokens", "truncated"),
    7: ("prefill_s", "decode_s"),
    8: ("first_token", "extracted"),
    9: ("probe", "latent_items"),
    10: ("odd_name_score",),
    11: ("literal_neighbours",),
    12: ("needle_forms",),
    13: ("reasoning_tokens", "reasoning"),
}


def _refuse_newer(data: dict[str, Any], schema: int) -> dict[str, Any]:
    """A record of the schema before ``schema`` that holds a field ``schema`` added is no record of
    either: refused, not misread."""
    found = [name for name in ADDED[schema] if name in data]
    if found:
        newer = f"a field of schema {schema}, in a record of schema {schema - 1}"
        raise TypeError(f"unknown field '{found[0]}' ({newer})")
    return data


def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 holds several needles per sample: the one needle's offset and depth become lists."""
    upgraded = dict(data)
    upgraded["needle_token_offsets"] = [upgraded.pop("needle_token_offset")]
    upgraded["needle_depths"] = [upgraded.pop("needle_depth")]
    return upgraded


def v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 added the answer's log-probabilities, which a record of schema 2 never read (None)."""
    return data


def v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 4 added the run's fingerprint and the answer's full size when cut; a record of schema 3
    predates both (None): it counts as its run's own, and its answer is whole."""
    return data


def v4_to_v5(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 5 added the needles' roles and values and what NIAH's hard needles record; a record of
    schema 4 had one plain needle (or RULER's), with no distractor, redraw or offset: the defaults."""
    return _refuse_newer(data, 5)


def v5_to_v6(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 6 added a real suite's item, splits and truncation; a record of schema 5 is of a task
    that builds its prompts to length, none of which it has."""
    return _refuse_newer(data, 6)


def v6_to_v7(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 7 added the backend's prefill and decode seconds; a record of schema 6 has neither (its
    backend's latency is all it knows)."""
    return _refuse_newer(data, 7)


def v7_to_v8(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 8 added what came first of the answer and what ``exact`` compared; a record of schema 7
    has neither (None)."""
    return _refuse_newer(data, 8)


def v8_to_v9(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 9 added the closed-book probe's item and a low-overlap sample's items; a record of
    schema 8 is no probe, and its items were not recorded (its score counts on all items only)."""
    return _refuse_newer(data, 9)


def v9_to_v10(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 10 added the odd-name reader's grade on a low-overlap sample's prompt; a record of
    schema 9 was not read by it (None): its run's report shows no shortcut baseline."""
    return _refuse_newer(data, 10)


def v10_to_v11(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 11 added the near neighbours of a low-overlap sample's places that its window names; a
    record of schema 10 was not checked for them (none recorded: its accidental literal distractors
    are unknown, not absent)."""
    return _refuse_newer(data, 11)


def v11_to_v12(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 12 added a low-overlap needle's form; a record of schema 11 was drawn in the one form
    there was then (visit/name-first/1), left unrecorded (empty) rather than guessed."""
    return _refuse_newer(data, 12)


def v12_to_v13(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 13 added a thinking model's reasoning, kept apart from its answer; a record of schema 12
    was not split (None: no reasoning known, whatever its output holds)."""
    return _refuse_newer(data, 13)


RECORDS = Versions(
    "record",
    RECORD_SCHEMA,
    (
        v1_to_v2,
        v2_to_v3,
        v3_to_v4,
        v4_to_v5,
        v5_to_v6,
        v6_to_v7,
        v7_to_v8,
        v8_to_v9,
        v9_to_v10,
        v10_to_v11,
        v11_to_v12,
        v12_to_v13,
    ),
)
