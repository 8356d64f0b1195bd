"""The failure kinds' pieces that the tests in mutmut's selection left open (the eighth round,
docs/mutation.md): a reply cut inside its reasoning named as such, and a record whose needles' roles
do not pair one to one with their values refused rather than read short."""

from __future__ import annotations

import dataclasses

import pytest
from test_store import record

from fathom.analysis.failures import failure_counts, failure_kind, rejected_lures
from fathom.records import THINKING

WRONG = {"output": "", "score": 0.0, "matched": ()}


def test_a_reply_that_ended_inside_its_reasoning_is_still_thinking_whatever_the_window() -> None:
    thinking = dataclasses.replace(record(0), finish_reason=THINKING, **WRONG)
    beyond = dataclasses.replace(thinking, beyond_window=True)
    assert (failure_kind(thinking), failure_kind(beyond)) == ("still_thinking", "still_thinking")
    assert failure_counts([thinking, beyond, record(1)]) == {
        None: 1, "error": 0, "still_thinking": 2, "beyond_window": 0, "stopped": 0, "empty": 0,
        "hedged": 0, "distractor": 0, "partial": 0, "refusal": 0, "wrong_answer": 0,
    }  # fmt: skip
    # Fully right, though its reply ended inside its reasoning: no failure.
    assert failure_kind(dataclasses.replace(record(2), finish_reason=THINKING)) is None


def test_the_rejected_look_alikes_are_read_from_roles_paired_one_to_one_with_the_values() -> None:
    paired = dataclasses.replace(
        record(0), output="It is 1234567, not 7654321.", needle_values=("1234567", "7654321"),
        needle_roles=("gold", "key-distractor"),
    )  # fmt: skip
    assert rejected_lures(paired) == ("7654321",)
    # One role for two values: refused, not read short (which would pair the gold value with the
    # distractor's role and call the right answer a rejected look-alike).
    short = dataclasses.replace(paired, needle_roles=("key-distractor",))
    with pytest.raises(ValueError, match="zip"):
        rejected_lures(short)
