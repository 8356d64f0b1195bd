import pytest

from fathom.errors import SpecError
from fathom.scoring import score


def test_contains_is_case_insensitive_and_needs_every_reference() -> None:
    assert score("contains", "The number is 4883028.", ["4883028"]).value == 1.0
    assert score("contains", "DOLORES PARK with a Sandwich", ["sandwich", "Dolores Park"]).value == 1.0
    partial = score("contains", "a sandwich", ["sandwich", "Dolores Park"])
    assert partial.value == 0.0
    assert partial.matched == ("sandwich",)


def test_ruler_all_is_the_fraction_found_and_any_is_one_hit() -> None:
    refs = ["111", "222", "333", "444"]
    assert score("all", "111 and 333", refs).value == 0.5
    assert score("any", "111 and 333", refs).value == 1.0
    assert score("any", "none here", refs).value == 0.0
    assert score("all", "none here", refs).matched == ()


def test_exact_ignores_prefix_quotes_and_end_punctuation_only() -> None:
    assert score("exact", " Answer: 'Thundmere'.", ["Thundmere"]).value == 1.0
    assert score("exact", "thundmere", ["Thundmere"]).value == 1.0
    assert score("exact", "It is Thundmere.", ["Thundmere"]).value == 0.0


def test_unknown_method_and_missing_references_are_errors() -> None:
    with pytest.raises(SpecError, match="unknown scoring 'fuzzy'"):
        score("fuzzy", "x", ["x"])
    with pytest.raises(ValueError, match="reference"):
        score("contains", "x", [])
