"""The graders' details that the behaviour tests leave open, each pinned by a value worked out by
hand: the method each grader writes into the record, what ``exact`` strips from a reference, and
the refusal of a sample without references."""

from __future__ import annotations

import pytest

from fathom.scoring import SCORERS, found_in, grade


@pytest.mark.parametrize("method", ["contains", "ordered", "share", "exact", "all", "any"])
def test_each_grader_names_itself_in_the_score(method: str) -> None:
    assert grade(SCORERS[method], "Thundmere", ["thundmere"]).method == method


def test_exact_strips_quotes_and_end_punctuation_from_the_reference_too() -> None:
    graded = grade(SCORERS["exact"], "Thundmere", ["'Thundmere'."])
    assert (graded.value, graded.matched) == (1.0, ("'Thundmere'.",))
    # Only those edges: a reference that differs inside is no match.
    assert grade(SCORERS["exact"], "Thundmere", ["'Thund mere'."]).value == 0.0


@pytest.mark.parametrize("method", ["contains", "ordered", "share", "exact", "all", "any"])
def test_a_sample_without_references_is_refused_with_the_reason(method: str) -> None:
    with pytest.raises(ValueError) as raised:
        grade(SCORERS[method], "anything", [])
    assert str(raised.value) == "a sample needs at least one reference answer to be scored"


def test_the_phrases_found_are_those_in_the_output_whatever_the_case_in_their_order() -> None:
    output = "The Magic NUMBER is 42."
    assert found_in(output, ["42", "magic number", "43", "the MAGIC"]) == ("42", "magic number", "the MAGIC")
    assert found_in(output, []) == ()
