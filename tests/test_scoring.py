import pytest

from fathom.errors import SpecError
from fathom.registry import score
from fathom.scoring import extract_answer


def test_contains_is_case_insensitive_and_needs_every_reference() -> None:
    assert score("contains", "The number is 4883028.", ["4883028"]).value == 1.0
    assert score("contains", "DOLORES PARK with a Sandwich", ["sandwich", "Dolores Park"]).value == 1.0
    partial = score("contains", "a sandwich", ["sandwich", "Dolores Park"])
    assert partial.value == 0.0
    assert partial.matched == ("sandwich",)


def test_share_is_the_fraction_named_with_numbers_whole_where_rulers_all_takes_a_digit_superstring() -> None:
    refs = ["2484111", "9056", "7321"]
    graded = score("share", "12484111, 9056 and 73210.", refs)
    assert (graded.value, graded.matched, graded.method) == (pytest.approx(1 / 3), ("9056",), "share")
    assert score("all", "12484111, 9056 and 73210.", refs).value == 1.0  # RULER's plain containment
    assert score("share", "2,484,111 then 7321; and 9056.", refs).value == 1.0


def test_ruler_all_is_the_fraction_found_and_any_is_one_hit() -> None:
    refs = ["111", "222", "333", "444"]
    assert score("all", "111 and 333", refs).value == 0.5
    assert score("any", "111 and 333", refs).value == 1.0
    assert score("any", "none here", refs).value == 0.0
    assert score("all", "none here", refs).matched == ()


@pytest.mark.parametrize(
    "output",
    [
        " Answer: 'Thundmere'.",
        "thundmere",
        "THUNDMERE!",
        '"Thundmere"',
        "The answer is Thundmere.",
        "The answer is: Thundmere",
        "answer - Thundmere",
        "\nAnswer:\tThundmere\n",
    ],
)
def test_exact_ignores_case_an_answer_prefix_quotes_and_end_punctuation(output: str) -> None:
    graded = score("exact", output, ["Thundmere"])
    assert (graded.value, graded.matched, graded.method) == (1.0, ("Thundmere",), "exact")


@pytest.mark.parametrize(
    ("output", "reference"),
    [
        ("It is Thundmere.", "Thundmere"),  # ends with the answer
        ("Thundmere is wrong", "Thundmere"),  # starts with it
        ("Thundmere, or perhaps Elmvale.", "Thundmere"),
        ("Thund", "Thundmere"),  # a prefix of the answer
        ("", "Thundmere"),  # nothing at all (the empty string starts every reference)
        ("Answer:", "Thundmere"),  # a prefix and nothing after it
        ("48830281", "4883028"),  # a longer number that starts with the answer
        ("14883028", "4883028"),  # and one that ends with it
        ("488302", "4883028"),  # a shorter one the answer starts with
        ("4883 028", "4883028"),
    ],
)
def test_exact_refuses_an_output_that_only_starts_ends_or_is_part_of_the_answer(
    output: str, reference: str
) -> None:
    graded = score("exact", output, [reference])
    assert (graded.value, graded.matched) == (0.0, ())


def test_exact_matches_any_one_of_several_references_and_names_it() -> None:
    graded = score("exact", "Answer: elmvale", ["Thundmere", "Elmvale"])
    assert (graded.value, graded.matched) == (1.0, ("Elmvale",))
    assert score("exact", "Thundmere Elmvale", ["Thundmere", "Elmvale"]).value == 0.0


@pytest.mark.parametrize(
    ("output", "reference"),
    [
        ("Answer Island", "Answer Island"),  # the prefix must not eat a reference's own first word
        ("Answerable", "Answerable"),
        ("The answer is Answer Island.", "Answer Island"),
        ("Answer Isthmus", "Isthmus"),  # "is" is a word of the prefix only when it is a whole word
    ],
)
def test_exact_keeps_a_reference_that_begins_like_the_answer_prefix(output: str, reference: str) -> None:
    assert score("exact", output, [reference]).value == 1.0


def test_unknown_method_and_missing_references_are_errors() -> None:
    with pytest.raises(SpecError, match="unknown scoring 'fuzzy'"):
        score("fuzzy", "x", ["x"])
    with pytest.raises(ValueError, match="reference"):
        score("contains", "x", [])


@pytest.mark.parametrize(
    ("output", "extracted"),
    [
        ("Thundmere", "Thundmere"),
        ("  Thundmere\n", "Thundmere"),
        ("Thundmere.", "Thundmere"),
        ("The answer is Thundmere.", "Thundmere"),
        ("the answer is: Thundmere", "Thundmere"),
        ("The final answer is - Thundmere", "Thundmere"),
        ("My answer: Thundmere", "Thundmere"),
        ("Answer: Thundmere", "Thundmere"),
        ("**Thundmere**", "Thundmere"),
        ("*Thundmere*.", "Thundmere"),
        ("_Thundmere_", "Thundmere"),
        ("`Thundmere`", "Thundmere"),
        ('"Thundmere"', "Thundmere"),
        ("\u201cThundmere.\u201d", "Thundmere"),
        ("**Answer:** Thundmere", "Thundmere"),
        ("The answer is **Thundmere**.", "Thundmere"),
        ("Answer: `4883028`", "4883028"),
        ("The answer is **Answer Island**.", "Answer Island"),  # the prefix is taken once
        ("It is Thundmere.", "It is Thundmere"),  # not an answer prefix: kept, and graded 0
        ("Thundmere is wrong", "Thundmere is wrong"),
        ("**Thundmere** or Elmvale", "Thundmere** or Elmvale"),  # wrapping inside stays
    ],
)
def test_extract_answer_takes_off_prefix_emphasis_quotes_and_end_stop(output: str, extracted: str) -> None:
    assert extract_answer(output) == extracted


@pytest.mark.parametrize(
    ("output", "value", "extracted"),
    [
        ("Thundmere", 1.0, None),  # the output itself: nothing more to record
        (" Thundmere\n", 1.0, None),  # whitespace changes no grade
        ("The answer is **Thundmere**.", 1.0, "Thundmere"),
        ("**Answer Island**", 0.0, "Island"),  # no match: the extract, as compared
        ("It is Thundmere.", 0.0, "It is Thundmere"),
        ("Thundmere is wrong", 0.0, None),
        ("48830281", 0.0, None),
    ],
)
def test_exact_records_the_text_it_compared_where_it_is_not_the_output(
    output: str, value: float, extracted: str | None
) -> None:
    graded = score("exact", output, ["Thundmere"])
    assert (graded.value, graded.extracted) == (value, extracted)


def test_a_reference_that_begins_like_the_prefix_is_recorded_as_matched() -> None:
    graded = score("exact", "**Answer Island**", ["Answer Island"])
    assert (graded.value, graded.extracted) == (1.0, "Answer Island")
    assert score("contains", "**Thundmere**", ["Thundmere"]).extracted is None  # only exact extracts
