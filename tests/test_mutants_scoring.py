"""The graders' details that the behaviour tests leave open, each pinned by a value worked out by
hand: the method each grader writes into the record, what ``exact`` strips from a reference, the
refusal of a sample without references, the references ``any`` and ``ordered`` record, the mention
``in_order`` reads each reference at, and the mention a negation rejects, at each edge."""

from __future__ import annotations

import pytest

from fathom.records import Score
from fathom.scoring import SCORERS, committed_lures, found_in, grade, in_order, whole_numbers


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


@pytest.mark.parametrize(
    ("method", "matched"),
    [("any", ("gamma", "alpha")), ("ordered", ("alpha", "gamma"))],
)
def test_any_and_ordered_record_the_references_named(method: str, matched: tuple[str, ...]) -> None:
    references = ["delta", "gamma", "alpha"] if method == "any" else ["alpha", "gamma"]
    graded = grade(SCORERS[method], "Alpha, then gamma.", references)
    assert (graded.value, graded.matched) == (1.0, matched)


@pytest.mark.parametrize(
    ("output", "references", "ordered"),
    [
        # Each reference is read at its first mention after the one before it: the middle "a" here.
        ("a b a c a", ["b", "a", "c"], True),
        # A mention may start one character after the one before it starts.
        ("aab", ["a", "a", "b"], True),
        # A reference named only inside the one before it is not named after it.
        ("ab", ["ab", "b"], False),
        # An empty reference is named at the start.
        ("abc", ["", "abc"], True),
    ],
)
def test_in_order_reads_each_reference_at_its_first_mention_after_the_last(
    output: str, references: list[str], ordered: bool
) -> None:
    assert in_order(output, references) is ordered


@pytest.mark.parametrize(
    ("output", "lures", "committed"),
    [
        # Each negation of a clause rejects its own mention.
        ("not 111, not 222", ("111", "222"), ()),
        # A look-alike whose own words hold a negation is not rejected by it.
        ("Not Me.", ("Not Me",), ("Not Me",)),
        # A mention that starts where the negation ends is the one after it ...
        ("not-5", ("-5",), ()),
        # ... and one that ends where it starts is the one its clause opens with.
        ("5%not", ("5%",), ()),
    ],
)
def test_a_negation_rejects_the_mention_right_after_it_or_the_one_its_clause_opens_with(
    output: str, lures: tuple[str, ...], committed: tuple[str, ...]
) -> None:
    assert committed_lures(output, lures, ()) == committed


@pytest.mark.parametrize(
    ("output", "score"),
    [
        ("abcd", Score(0.0, (), "mrcr")),  # no prefix
        ("ABCDEFGHIJabce", Score(0.75, (), "mrcr")),  # 2 x 3 / (4 + 4)
        ("ABCDEFGHIJabcd", Score(1.0, ("ABCDEFGHIJabcd",), "mrcr")),
    ],
)
def test_mrcr_names_itself_with_or_without_the_prefix(output: str, score: Score) -> None:
    assert grade(SCORERS["mrcr"], output, ["ABCDEFGHIJabcd"]) == score


def test_the_whole_numbers_of_an_output_are_its_digit_runs_with_their_commas_dropped() -> None:
    # "12.5" names no whole number, and "12484111" is one number, not 2484111.
    assert whole_numbers("1,234 and 12.5, or 7 then 12484111") == ("1234", "7", "12484111")
